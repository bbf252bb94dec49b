"""The agentls side of the model host (host.py): its socket found and
checked, the host started when nobody answers, and `SharedModelProcess`,
a model child held through the host instead of started here.

The socket is RUNTIME/agentls/models.sock, RUNTIME by the rule `agentls
--socket` follows (core/support/state_dir.py: runtime_dir, which also
checks every folder on the way). Before connecting, the path must be a
socket (never a symbolic link, which is not followed, nor a regular file),
of this user, mode 0600; once connected, the peer must run as this user
(SO_PEERCRED). Anything else is refused with a message naming the path,
and the models run in this process's own children (process.py), as with
`local.shared: false`. A socket nobody answers (a killed host) is
replaced by the host that is started then.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentls.core.provider.contract import ProviderConfig
from agentls.core.support.state_dir import runtime_dir
from agentls.core.types.errors import ModelError
from agentls.providers.local.process import _ChildSpec, _LoopbackOpenAI, _ModelProcess
from agentls.providers.local.shared.host import MAX_LINE

logger = logging.getLogger("agentls.providers.local")

SOCKET_NAME = "models.sock"
HOST_START_SECONDS = 15.0  # python start-up and imports, on a busy laptop


class HostUnavailable(Exception):
    """The model host cannot be used; the message says why and what to do."""


def socket_path(environ: Mapping[str, str] = os.environ) -> Path:
    try:
        return runtime_dir(environ) / SOCKET_NAME
    except OSError as exc:
        raise HostUnavailable(f"the runtime folder is not private: {exc}") from exc


def check_socket(path: Path) -> bool:
    """True when a socket of this user, 0600, is at `path`; False when
    nothing is there; HostUnavailable for anything else (never followed)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise HostUnavailable(f"{path} is a symbolic link, not the model host's socket; it is "
                              "not followed. Remove it (nothing of agentls makes a link there)")
    if not stat.S_ISSOCK(info.st_mode):
        raise HostUnavailable(f"{path} is not a socket (a file planted where the model host "
                              "listens); remove it")
    if info.st_uid != os.getuid():
        raise HostUnavailable(f"{path} belongs to another user (uid {info.st_uid}); remove it")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise HostUnavailable(f"{path} has mode {mode:o}, so other users could reach it (the "
                              "model host makes it 0600); stop whatever made it and remove it")
    return True


async def running_children(path: Path) -> list[dict[str, Any]]:
    """The models the user's host runs now (alias, pid, port, clients), or
    none when no host is there; never starts one."""
    if not check_socket(path):
        return []
    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_LINE)
    except (ConnectionRefusedError, FileNotFoundError):
        return []
    try:
        uid = _peer_uid(writer)
        if uid is not None and uid != os.getuid():
            raise HostUnavailable(f"the process listening on {path} runs as uid {uid}")
        writer.write(json.dumps({"id": 1, "op": "list"}).encode() + b"\n")
        await writer.drain()
        answer = json.loads(await asyncio.wait_for(reader.readline(), 5))
    finally:
        writer.close()
    return list(answer.get("children") or [])


class HostLink:
    """One connection of this process to the model host, on one event loop:
    requests and their answers, and the host's events for each child."""

    def __init__(self, path: Path, idle_seconds: float) -> None:
        self.path = path
        self.idle_seconds = idle_seconds
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.listeners: dict[str, set[SharedModelProcess]] = {}
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        deadline = time.monotonic() + HOST_START_SECONDS
        started = False
        while True:
            present = check_socket(self.path)
            if present:
                try:
                    self._reader, self._writer = await asyncio.open_unix_connection(
                        str(self.path), limit=MAX_LINE)
                    break
                except (ConnectionRefusedError, FileNotFoundError):
                    pass  # a socket left by a killed host: the new host replaces it
                except OSError as exc:
                    raise HostUnavailable(f"cannot connect to {self.path}: {exc}") from exc
            if not started:
                _start_host(self.path, self.idle_seconds)
                started = True
            if time.monotonic() >= deadline:
                raise HostUnavailable(f"the model host did not answer on {self.path} within "
                                      f"{HOST_START_SECONDS:g} s (its log: "
                                      f"{self.path.parent / 'models.log'})")
            await asyncio.sleep(0.05)
        uid = _peer_uid(self._writer)
        if uid is not None and uid != os.getuid():
            self._writer.close()
            raise HostUnavailable(f"the process listening on {self.path} runs as uid {uid}, "
                                  "not as you; it is not used")
        self._task = asyncio.ensure_future(self._read())

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.closed or self._writer is None:
            raise HostUnavailable("the connection to the model host was lost")
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self._pending[ident] = future
        try:
            self._writer.write(json.dumps({"id": ident, "op": op, **fields}).encode() + b"\n")
            await self._writer.drain()
            return await future
        except (ConnectionError, RuntimeError) as exc:
            raise HostUnavailable(f"the connection to the model host was lost ({exc})") from exc
        finally:
            self._pending.pop(ident, None)

    async def _read(self) -> None:
        assert self._reader is not None
        lost = True
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                message = json.loads(line)
                ident = message.get("id")
                if ident is not None:
                    future = self._pending.get(ident)
                    if future is not None and not future.done():
                        future.set_result(message)
                    continue
                for process in list(self.listeners.get(str(message.get("key")), ())):
                    process.host_event(message)
        except (ConnectionError, ValueError) as exc:
            logger.warning("local: the model host connection failed: %s", exc)
        except asyncio.CancelledError:  # this process is going (close(), its loop's end)
            lost = False
            raise
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(HostUnavailable("the model host went away"))
            for processes in self.listeners.values() if lost else ():
                for process in list(processes):
                    process.host_event({"event": "lost"})
            if self._writer is not None:
                self._writer.close()

    def close(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()


_LINKS: dict[Path, HostLink] = {}
_CONNECTING: dict[Path, asyncio.Future[HostLink]] = {}


async def get_link(path: Path, idle_seconds: float) -> HostLink:
    """This process's link to the host at `path` on the running loop (a new
    one after the loop changed, as `agentls check` runs several)."""
    loop = asyncio.get_running_loop()
    link = _LINKS.get(path)
    if link is not None and not link.closed and link.loop is loop:
        return link
    pending = _CONNECTING.get(path)
    if pending is not None and pending.get_loop() is loop:
        return await asyncio.shield(pending)
    future: asyncio.Future[HostLink] = loop.create_future()
    _CONNECTING[path] = future
    try:
        link = HostLink(path, idle_seconds)
        await link.connect()
        _LINKS[path] = link
        future.set_result(link)
        return link
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()  # retrieved: a failure is raised to each waiter
        raise
    finally:
        _CONNECTING.pop(path, None)


def _start_host(path: Path, idle_seconds: float) -> None:
    """Start the host, detached: it outlives this process (other agentls
    use it); a thread reaps it should it exit while we run."""
    log = path.parent / "models.log"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentls.providers.local", "host", "--socket", str(path),
             "--idle", f"{idle_seconds:g}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
            start_new_session=True, close_fds=True, cwd="/",
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except OSError as exc:
        raise HostUnavailable(f"could not start the model host: {exc}") from exc
    finally:
        os.close(fd)
    logger.info("local: started the model host (pid %d) on %s", proc.pid, path)
    threading.Thread(target=proc.wait, name="agentls-model-host-reaper", daemon=True).start()


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    return int(struct.unpack("3i", raw)[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class SharedModelProcess(_ModelProcess):
    """A model child held through the model host: the same interface as
    `_ModelProcess` (serving.py and child_calls.py cannot tell), the child
    shared with the user's other agentls. When the host cannot be used, it
    says why once and runs its own child, as `_ModelProcess` does."""

    def __init__(self, spec: _ChildSpec, *, idle_seconds: float,
                 notify: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self.idle_seconds = idle_seconds
        self._notify = notify
        self.shared_error: str | None = None  # why this one runs its own child
        self.clients = 0  # agentls processes holding the shared child
        self._link: HostLink | None = None
        self._key: str | None = None
        self._pid: int | None = None
        self._exit: int | None = None
        self.loaded_here = False  # the last acquire started the child (else it ran already)

    @property
    def shared(self) -> bool:
        return self._link is not None and self._key is not None

    @property
    def pid(self) -> int | None:
        if self.shared_error is not None or self._key is None:
            return super().pid
        pid = self._pid
        return pid if pid is not None and self._exit is None and _alive(pid) else None

    def exited(self) -> tuple[int, int] | None:
        if self.shared_error is not None or self._key is None:
            return super().exited()
        return (self._pid or 0, self._exit) if self._exit is not None else None

    def host_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "clients":
            self.clients = int(event.get("clients") or 0)
        elif kind in ("exited", "lost") and self._pid is not None and self._exit is None:
            if kind == "exited" and event.get("pid") != self._pid:
                return
            self._exit = int(event.get("code") or 0)
            how = event.get("how") or "the model host went away"
            text = (f"local: the shared model {self.spec.alias} (pid {self._pid}) stopped "
                    f"({how}); the next request starts it again.")
            logger.warning("%s", text)
            if self.in_use == 0:  # a request in flight is told by its own error
                self._notify(text)

    async def _ensure(self) -> _LoopbackOpenAI:
        if self.shared_error is not None:
            return await super()._ensure()
        if self._client is not None and self.pid is not None:
            return self._client
        await self._drop_lease()
        try:
            return await self._acquire()
        except HostUnavailable as exc:
            self.shared_error = str(exc)
            text = (f"local: the shared model host is not used: {exc}. The models run in "
                    "this window's own processes (set `local.shared` to false to say so).")
            logger.warning("%s", text)
            self._notify(text)
            return await super()._ensure()

    async def _acquire(self) -> _LoopbackOpenAI:
        spec = self.spec
        gguf = await asyncio.to_thread(self._model_file)
        self.gguf = gguf
        link = await get_link(socket_path(), self.idle_seconds)
        started = time.monotonic()
        reply = await link.call("acquire", model={
            "gguf": str(gguf), "alias": spec.alias, "n_ctx": spec.n_ctx,
            "n_threads": spec.n_threads, "chat_format": spec.chat_format, "nice": self.nice,
            "startup_timeout": self.startup_timeout})
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise ModelError(str(error.get("message") or "local: the model host failed"),
                             model=spec.alias, code=str(error.get("code") or "server_error"))
        child = reply["child"]
        self._link, self._key = link, str(child["key"])
        link.listeners.setdefault(self._key, set()).add(self)
        self._pid, self._exit = int(child["pid"]), None
        self.port, self.token = int(child["port"]), str(child["token"])
        self._log = Path(child["log"]) if child.get("log") else None
        self.clients = int(child.get("clients") or 1)
        self.starts = int(child.get("starts") or 1)  # the shared child's, not this window's
        self.loaded_here = bool(child.get("loaded"))
        # A child another window had loaded costs this window only the ask.
        self.load_seconds = time.monotonic() - started
        self._client = _LoopbackOpenAI(ProviderConfig(
            name="local", model=spec.alias, base_url=f"http://127.0.0.1:{self.port}/v1",
            api_key_env=None, request_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout, options={"max_attempts": 1}), self.token)
        logger.info("local: %s served by the model host's child (pid %d, %d clients)",
                    spec.alias, self._pid, self.clients)
        return self._client

    async def exit_code(self, wait: float = 0.0) -> int | None:
        if self.shared_error is not None or self._key is None:
            return await super().exit_code(wait)
        if self._exit is not None:
            return self._exit
        link, pid = self._link, self._pid
        if link is None or pid is None:
            return None
        with contextlib.suppress(HostUnavailable):
            reply = await link.call("exit_code", key=self._key, pid=pid, wait=wait)
            if reply.get("code") is not None:
                self._exit = int(reply["code"])
        if self._exit is None and link.closed:
            self._exit = 0  # the host went away: its children exit with it
        return self._exit

    async def _drop_lease(self) -> None:
        link, key = self._link, self._key
        client, self._client = self._client, None
        self._link = self._key = None
        self._pid = None
        self._log = None  # the host's file: not ours to remove
        if link is not None and key is not None:
            link.listeners.get(key, set()).discard(self)
            current = link.loop.is_running() and asyncio.get_running_loop() is link.loop
            if current and not link.closed and not any(link.listeners.get(key, ())):
                with contextlib.suppress(HostUnavailable):
                    await link.call("release", key=key)
        if client is not None:
            await client.aclose()

    async def stop(self) -> None:
        if self.shared_error is not None or self._key is None:
            await super().stop()
            return
        await self._drop_lease()
