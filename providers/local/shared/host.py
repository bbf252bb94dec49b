"""The model host: one process per user that runs the local models' children
for every agentls of that user (docs/local-model.md, "One set of models per
user"), as Ollama's daemon does. `python -m agentls.providers.local host
--socket PATH --idle SECONDS`, started by the first agentls that needs a
local model (link.py).

It listens on a Unix socket, 0600 in the 0700 runtime folder, and checks
each peer's uid (SO_PEERCRED). It holds one child per model file and load
options (`_ModelProcess`, the same supervision as in-process), started on
the first `acquire` and shared by every client that asks for the same key.
A client talks to the child over loopback HTTP itself, with the child's
bearer token, which only this socket hands out; the host sees no prompt.

The protocol, one JSON object per line:
  {"id": n, "op": "acquire", "model": {...}} -> {"id": n, "ok": true, "child": {...}}
  {"id": n, "op": "release", "key": k}        -> {"id": n, "ok": true}
  {"id": n, "op": "exit_code", "key": k, "pid": p, "wait": s} -> {..., "code": c}
  {"id": n, "op": "list"} -> {..., "children": [{"alias", "pid", "port", "clients"}]}
and, unasked, to every client holding a child: {"event": "exited", ...}
when it died (it is started again by the next acquire) and
{"event": "clients", ...} when its number of clients changed. A client's
leases end with its connection. A child nobody holds is stopped after the
idle time; the host exits once it has no client for that long.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentls.core.support.state_dir import (
    check_folders_on_the_way,
    ensure_private_dir,
    free_socket_path,
)
from agentls.core.types.errors import ModelError
from agentls.providers.local.process import _ChildSpec, _describe_exit, _ModelProcess

logger = logging.getLogger("agentls.providers.local.host")

MAX_LINE = 64 << 10
_WATCH_SECONDS = 0.2


@dataclass(eq=False)
class _Child:
    key: str
    process: _ModelProcess
    leases: set[_Client] = field(default_factory=set)
    idle_since: float = field(default_factory=time.monotonic)
    reported: set[int] = field(default_factory=set)  # pids whose death was announced
    exits: dict[int, int] = field(default_factory=dict)  # pid -> exit code


@dataclass(eq=False)
class _Client:
    writer: asyncio.StreamWriter
    pid: int | None

    async def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.writer.write(json.dumps(message).encode() + b"\n")
            await self.writer.drain()


def child_key(model: dict[str, Any]) -> str:
    """The same GGUF file with the same load options is one child."""
    identity = [os.path.realpath(str(model["gguf"])), int(model["n_ctx"]),
                int(model["n_threads"]), model.get("chat_format"), int(model.get("nice") or 0)]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]


class ModelHost:
    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self.children: dict[str, _Child] = {}
        self.clients: set[_Client] = set()
        self.idle_since = time.monotonic()
        self.done = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- connections -----------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid, pid = _peer(writer)
        if uid is not None and uid != os.getuid():
            logger.warning("model host: refused a peer running as uid %s", uid)
            writer.close()
            return
        client = _Client(writer, pid)
        self.clients.add(client)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, ConnectionError):  # a line over MAX_LINE, a reset
                    break
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    break
                if not isinstance(message, dict):
                    break
                task = asyncio.ensure_future(self._answer(client, message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            self.clients.discard(client)
            for child in list(self.children.values()):
                if client in child.leases:
                    await self._drop(child, client)
            if not self.clients:
                self.idle_since = time.monotonic()
            writer.close()

    async def _answer(self, client: _Client, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"id": message.get("id")}
        try:
            op = message.get("op")
            if op == "acquire":
                reply["child"] = await self._acquire(client, dict(message["model"]))
            elif op == "release":
                child = self.children.get(str(message.get("key")))
                if child is not None and client in child.leases:
                    await self._drop(child, client)
            elif op == "list":  # for `agentls check`: no tokens, no paths
                reply["children"] = [
                    {"alias": child.process.spec.alias, "pid": child.process.pid,
                     "port": child.process.port, "clients": len(child.leases)}
                    for child in self.children.values() if child.process.pid is not None]
            elif op == "exit_code":
                reply["code"] = await self._exit_code(str(message.get("key")),
                                                      int(message.get("pid") or 0),
                                                      float(message.get("wait") or 0))
            else:
                raise ValueError(f"unknown op {op!r}")
            reply["ok"] = True
        except ModelError as exc:
            reply.update(ok=False, error={"message": exc.message, "code": exc.code})
        except (KeyError, TypeError, ValueError) as exc:
            reply.update(ok=False, error={"message": f"model host: bad request ({exc})",
                                          "code": "bad_request"})
        await client.send(reply)

    async def _acquire(self, client: _Client, model: dict[str, Any]) -> dict[str, Any]:
        key = child_key(model)
        child = self.children.get(key)
        if child is None:
            spec = _ChildSpec(alias=str(model["alias"]), catalog_id=None,
                              path=Path(str(model["gguf"])), n_ctx=int(model["n_ctx"]),
                              n_threads=int(model["n_threads"]),
                              chat_format=model.get("chat_format"))
            process = _ModelProcess(spec, cache_dir=None,
                                    startup_timeout=float(model.get("startup_timeout") or 120),
                                    request_timeout=60.0, connect_timeout=10.0)
            process.nice = int(model.get("nice") or 0)
            child = self.children[key] = _Child(key, process)
        fresh = client not in child.leases
        child.leases.add(client)
        starts = child.process.starts
        try:
            await child.process.client()
        except ModelError:
            child.leases.discard(client)
            if not child.leases and child.process.pid is None:
                self.children.pop(key, None)
            raise
        if client not in self.clients:  # it left while the model loaded
            await self._drop(child, client)
        elif fresh:
            await self._tell_clients(child)
        process = child.process
        return {"key": key, "pid": process.pid, "port": process.port, "token": process.token,
                "log": str(process.log_path) if process.log_path else None,
                "gguf": str(process.gguf),
                "starts": process.starts, "loaded": process.starts > starts,
                "load_seconds": process.load_seconds, "clients": len(child.leases)}

    async def _drop(self, child: _Child, client: _Client) -> None:
        child.leases.discard(client)
        if not child.leases:
            child.idle_since = time.monotonic()
        await self._tell_clients(child)

    async def _tell_clients(self, child: _Child) -> None:
        event = {"event": "clients", "key": child.key, "clients": len(child.leases)}
        for each in list(child.leases):
            await each.send(event)

    async def _exit_code(self, key: str, pid: int, wait: float) -> int | None:
        child = self.children.get(key)
        if child is None:
            return None
        deadline = time.monotonic() + min(wait, 5.0)
        while True:
            self._notice_exit(child)
            if pid in child.exits:
                return child.exits[pid]
            if child.process.pid != pid or time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)

    # -- supervision -----------------------------------------------------------------
    def _notice_exit(self, child: _Child) -> bool:
        """Record a death once; True when it is new."""
        exited = child.process.exited()
        if exited is None or exited[0] in child.reported:
            return False
        pid, code = exited
        child.reported.add(pid)
        child.exits[pid] = code
        return True

    async def watch(self) -> None:
        """Announce deaths, stop children nobody holds, exit when idle."""
        while not self.done.is_set():
            now = time.monotonic()
            for key, child in list(self.children.items()):
                if self._notice_exit(child):
                    pid = max(child.reported)
                    how = _describe_exit(child.exits[pid])
                    logger.warning("model host: %s (pid %d) stopped (%s)",
                                   child.process.spec.alias, pid, how)
                    event = {"event": "exited", "key": key, "pid": pid,
                             "code": child.exits[pid], "how": how}
                    for each in list(child.leases):
                        await each.send(event)
                if not child.leases and now - child.idle_since >= self.idle_seconds:
                    self.children.pop(key, None)
                    await child.process.stop()
            if not self.clients and now - self.idle_since >= self.idle_seconds:
                self.done.set()
            await asyncio.sleep(_WATCH_SECONDS)

    async def aclose(self) -> None:
        children, self.children = list(self.children.values()), {}
        await asyncio.gather(*(child.process.stop() for child in children),
                             return_exceptions=True)


def _peer(writer: asyncio.StreamWriter) -> tuple[int | None, int | None]:
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None, None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None, None
    pid, uid, _gid = struct.unpack("3i", raw)
    return uid, pid


def _take_lock(folder: Path) -> int | None:
    """The host's lock in its folder (one host per folder), or None when
    another host holds it."""
    fd = os.open(folder / "models.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _clear_stale(path: Path) -> None:
    """Remove a socket nobody answers (a host that was killed); anything else
    at the path is refused, never removed or followed (link.py refuses it too)."""
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_uid != os.getuid():
            raise OSError(f"{path} exists and is not a socket of yours; remove it")
    why = free_socket_path(path)
    if why == "not a socket":
        raise OSError(f"{path} exists and is not a socket of yours; remove it")
    if why == "listening":
        raise OSError(f"something else is listening on {path}")


async def _serve(path: Path, idle_seconds: float) -> int:
    host = ModelHost(idle_seconds)
    old = os.umask(0o177)  # the socket is created 0600, never briefly wider
    try:
        server = await asyncio.start_unix_server(host.handle, path=str(path), limit=MAX_LINE)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, host.done.set)
    logger.info("model host: listening on %s (pid %d)", path, os.getpid())
    watcher = asyncio.ensure_future(host.watch())
    try:
        await host.done.wait()
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        watcher.cancel()
        await host.aclose()
    logger.info("model host: idle for %g s; exiting", idle_seconds)
    return 0


def host_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentls.providers.local host",
                                     description="The agentls model host (started by agentls).")
    parser.add_argument("command", choices=["host"])
    parser.add_argument("--socket", required=True, type=Path)
    parser.add_argument("--idle", type=float, default=300.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    path: Path = args.socket.absolute()
    try:
        check_folders_on_the_way(ensure_private_dir(path.parent))
        lock = _take_lock(path.parent)
        if lock is None:
            return 0  # another host of this user runs (or is starting): it serves
        _clear_stale(path)
    except OSError as exc:
        print(f"agentls model host: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(path, args.idle))
    finally:
        os.close(lock)
