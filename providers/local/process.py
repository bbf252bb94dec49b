"""The child processes that run the models, and their supervision.

Out of process, on purpose: a native crash (llama.cpp segfaults on some CPUs
when built with the wrong flags) must never take down the editor's language
server. Each model runs in a child process, `python -m
agentls.providers.local serve ...` (worker.py), which loads the GGUF into
llama-cpp-python's OpenAI-compatible server (`llama_cpp.server`) on a
loopback port it picks itself. Every call is then delegated to the `openai`
provider's HTTP code pointed at that port, with the child's bearer token,
a secret made at each start and handed to it in its environment
(_LoopbackOpenAI; worker.py refuses requests without it). With
`local.shared` the children are the model host's (shared/), held through it.

Life cycle: a child starts on first use (never at server start), and is
started again by the next request after it died. A request in flight when
it dies fails with ModelError(code="server_error") saying the local model
crashed and was restarted. aclose() stops the children; so does interpreter
exit (atexit, process-group kill). A child also exits by itself when its
parent dies: it watches its stdin (a pipe from us, closed by the kernel when
we die, even by SIGKILL) and its parent pid.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentls.core.provider.contract import ProviderConfig
from agentls.core.support.process_group import kill_process_group
from agentls.core.types.errors import ModelError
from agentls.providers.fim.probe import FimSupport
from agentls.providers.http.client import HttpClient
from agentls.providers.local.models.catalog import INSTALL_COMMAND, locate_model_file
from agentls.providers.openai.provider import OpenAIProvider

logger = logging.getLogger("agentls.providers.local")

# The child's secret (worker.py): in its environment, never on its command line.
TOKEN_ENV = "AGENTLS_LOCAL_TOKEN"
_LOG_TAIL_BYTES = 4000
# What llama.cpp prints when a GGUF is cut short or damaged.
_CORRUPT_SIGNS = (
    "failed to load model",
    "not within the file bounds",
    "failed to read",
    "corrupted",
    "invalid magic",
    "unexpectedly reached end of file",
)


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (Linux /proc), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_gguf_file(path: Path, model: str) -> None:
    """Before a child is started: the file exists, is a GGUF, and fits in
    the memory this machine has left; else a ModelError saying what to do."""
    import agentls.providers.local.models.hub as hub

    if not path.is_file():
        raise ModelError(
            f"local: model file {str(path)!r} does not exist: check the path in `model` / "
            "inlineCompletion.model / providerOptions.model_path.",
            model=model,
            code="not_found",
        )
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
        size = path.stat().st_size
    except OSError as exc:
        raise ModelError(
            f"local: cannot read model file {str(path)!r}: {exc}", model=model, code="not_found"
        ) from exc
    if magic != hub.GGUF_MAGIC:
        raise ModelError(
            f"local: {str(path)!r} is not a GGUF model file (it does not start with 'GGUF'; "
            "truncated, corrupt or another format): download it again or convert it with "
            "llama.cpp's convert_hf_to_gguf.py.",
            model=model,
            code="bad_request",
        )
    hub.check_fits_memory(model, size)

# Every child we started and have not yet reaped, for the atexit handler.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_CHILDREN_LOCK = threading.Lock()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the child's whole process group (it leads its own session);
    only while the leader is not yet reaped, so the group id is still ours."""
    if proc.returncode is None:
        kill_process_group(proc, sig)


def _terminate(proc: subprocess.Popen[bytes], grace: float = 2.0) -> int | None:
    """Stop a child: closing its stdin makes its watchdog exit at once;
    SIGKILL to the group if it has not gone within `grace` seconds."""
    if proc.poll() is None:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with _CHILDREN_LOCK:
        _CHILDREN.pop(proc.pid, None)
    return proc.returncode


def _kill_all_children() -> None:
    with _CHILDREN_LOCK:
        children = list(_CHILDREN.values())
        _CHILDREN.clear()
    for proc in children:
        _kill_group(proc, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=2)


atexit.register(_kill_all_children)


def _spawn(command: list[str], *, stderr: int, token: str) -> subprocess.Popen[bytes]:
    """Start a child (fork+exec takes milliseconds: fine on the event loop);
    its token goes in its environment, which other users cannot read."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,  # its own group: killed as one, spared our Ctrl-C
        close_fds=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", TOKEN_ENV: token},
    )


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@dataclass(frozen=True)
class _ChildSpec:
    alias: str  # the model id the server answers to
    catalog_id: str | None  # None: a user-supplied path
    path: Path | None
    n_ctx: int
    n_threads: int
    chat_format: str | None


_LOOPBACK_HINTS = {
    "connection": "The local model server stopped answering; the next request starts it again.",
    "timeout": "No data within {timeout:g} s: the local model is too slow for this timeout "
    "on this machine; raise requestTimeoutSeconds or ask for fewer tokens.",
    "server_error": "The local model server failed while answering.",
    "not_found": "The local model server does not know model {model!r}.",
    "invalid_response": "The local model server sent something unexpected.",
    "bad_request": "The local model server rejected the request.",
}


class _TokenHttp(HttpClient):
    """HttpClient whose bearer key is the child's token (kept here, never
    in the environment; redacted from error texts like any key)."""

    def __init__(self, config: ProviderConfig, token: str, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._token = token

    def api_key(self) -> str | None:
        return self._token


class _LoopbackOpenAI(OpenAIProvider):
    """The openai provider's HTTP code aimed at one child, with its token
    and no retries (a dead child is restarted by us, not retried into)."""

    name = "local"

    def __init__(self, config: ProviderConfig, token: str) -> None:
        super().__init__(config)
        self._http = _TokenHttp(
            config,
            token,
            provider="local",
            default_base_url=config.base_url or "",
            default_api_key_env=None,
            hints=_LOOPBACK_HINTS,
        )
        # /completions is what the child serves, always (with or without
        # `suffix`, which provider.py drops): nothing to probe.
        self.fim = FimSupport("local", True, suffix_blocked=self._fim_suffix_blocked,
                              probe=self._fim_probe, find_tokens=self._fim_tokens)

    def model_supports_fim(self, model: str | None = None) -> bool:
        return False


def completions_flag() -> Path | None:
    """The flag file the user's children share (engine_work.py
    CompletionsFirst), in the 0700 runtime folder; None when that folder is
    not safe to use."""
    from agentls.core.support.state_dir import runtime_dir

    try:
        return runtime_dir() / "completing"
    except OSError as exc:  # PrivatePathError: another user's or an open folder
        logger.info("local: completions-first flag not used: %s", exc)
        return None


class _ModelProcess:
    """One child process serving one model; started on demand, restarted
    after it died."""

    def __init__(
        self,
        spec: _ChildSpec,
        *,
        cache_dir: Path | None,
        startup_timeout: float,
        request_timeout: float,
        connect_timeout: float,
    ) -> None:
        self.spec = spec
        self.cache_dir = cache_dir
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.starts = 0
        self.in_use = 0  # requests streaming from it now (serving.py stops it only at 0)
        self.retired = False  # replaced by another model (serving.py): never started again
        self.load_seconds: float | None = None
        self.port: int | None = None  # the child's loopback port once it serves
        self.gguf: Path | None = None
        self.nice = 0  # set before the start: a chat child behind completions (provider.py)
        self.token = ""  # the child's secret, new at each start (worker.py)
        self._lock = asyncio.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._client: _LoopbackOpenAI | None = None
        self._log: Path | None = None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def ready(self) -> bool:
        """Running and answering (not merely started)."""
        return self._client is not None and self.pid is not None

    @property
    def log_path(self) -> Path | None:
        """The child's stderr log while it runs (the model host hands it out)."""
        return self._log

    def log_offset(self) -> int:
        try:
            return self._log.stat().st_size if self._log is not None else 0
        except OSError:
            return 0

    def log_text(self, since: int | None = None) -> str:
        """The child's stderr from byte `since`, else its last few KiB."""
        if self._log is None:
            return ""
        try:
            with self._log.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                start = since if since is not None else max(0, size - _LOG_TAIL_BYTES)
                log.seek(start)
                data = log.read(_LOG_TAIL_BYTES * 4)
        except OSError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()
        # llama_cpp.server prints two lines for every cancelled stream: noise here.
        noise = ("disconnected", "Disconnected from client")
        return "\n".join(line for line in lines if not line.startswith(noise)).strip()

    async def client(self) -> _LoopbackOpenAI:
        """The HTTP client for a running child, starting one if needed."""
        async with self._lock:
            return await self._ensure()

    def exited(self) -> tuple[int, int] | None:
        """(pid, exit code) of a child that died and was not started again yet."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        return proc.pid, proc.returncode

    async def _ensure(self) -> _LoopbackOpenAI:
        """client() under the lock."""
        proc = self._proc
        if proc is not None and proc.poll() is None and self._client is not None:
            return self._client
        if proc is not None:
            logger.warning(
                "local: the model server for %s (pid %d) had stopped (%s); starting it again",
                self.spec.alias,
                proc.pid,
                _describe_exit(proc.returncode or 0),
            )
            await self.stop()
        return await self._start()

    async def exit_code(self, wait: float = 0.0) -> int | None:
        """The child's exit code, waiting up to `wait` s for it; None while alive."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None and wait > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, wait)
        return proc.returncode

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        client, self._client = self._client, None
        log, self._log = self._log, None
        if proc is not None:
            await asyncio.to_thread(_terminate, proc)
        if client is not None:
            await client.aclose()
        if log is not None:
            log.unlink(missing_ok=True)

    def worker_command(self, gguf: Path) -> list[str]:
        """The child's command line (worker.py). Tests override it with a
        stand-in that reports a loopback fake's port, which exercises this
        supervision with an HTTP fake in place of llama.cpp."""
        spec = self.spec
        command = [
            sys.executable, "-m", "agentls.providers.local", "serve",
            "--model", str(gguf),
            "--alias", spec.alias,
            "--n-ctx", str(spec.n_ctx),
            "--n-threads", str(spec.n_threads),
            "--parent-pid", str(os.getpid()),
        ]
        if self.nice:
            command += ["--nice", str(self.nice)]
        flag = completions_flag()
        if flag is not None:  # completions first (engine_work.py CompletionsFirst)
            command += ["--priority-flag", str(flag),
                        "--priority", "yield" if self.nice else "raise"]
        if spec.chat_format:
            command += ["--chat-format", spec.chat_format]
        return command

    def _model_file(self) -> Path:
        spec = self.spec
        if spec.path is None:
            assert spec.catalog_id is not None
            return locate_model_file(spec.catalog_id, cache_dir=self.cache_dir)
        check_gguf_file(spec.path, spec.alias)
        return spec.path

    async def _start(self) -> _LoopbackOpenAI:
        spec = self.spec
        started = time.monotonic()
        deadline = started + self.startup_timeout
        gguf = await asyncio.to_thread(self._model_file)
        self.gguf = gguf
        safe = re.sub(r"[^\w.-]+", "_", spec.alias)  # hf:owner/repo has a slash
        fd, log_name = tempfile.mkstemp(prefix=f"agentls-local-{safe}-", suffix=".log")
        command = self.worker_command(gguf)
        self.token = secrets.token_urlsafe(32)
        try:
            proc = _spawn(command, stderr=fd, token=self.token)
        except OSError as exc:
            os.unlink(log_name)
            raise ModelError(
                f"local: could not start the model server ({exc})",
                model=spec.alias,
                code="server_error",
            ) from exc
        finally:
            os.close(fd)
        with _CHILDREN_LOCK:
            _CHILDREN[proc.pid] = proc
        self._proc, self._log = proc, Path(log_name)
        logger.info("local: starting model server for %s (pid %d, %s)", spec.alias, proc.pid, gguf)
        try:
            port = await self._read_port(proc, deadline)
            client = _LoopbackOpenAI(
                ProviderConfig(
                    name="local",
                    model=spec.alias,
                    base_url=f"http://127.0.0.1:{port}/v1",
                    api_key_env=None,
                    request_timeout=self.request_timeout,
                    connect_timeout=self.connect_timeout,
                    options={"max_attempts": 1},
                ),
                self.token,
            )
            await self._wait_ready(proc, client, deadline)
        except BaseException:
            await self.stop()
            raise
        self._client = client
        self.port = port
        self.starts += 1
        self.load_seconds = time.monotonic() - started
        logger.info("local: %s ready on port %d in %.2f s", spec.alias, port, self.load_seconds)
        return client

    async def _read_port(self, proc: subprocess.Popen[bytes], deadline: float) -> int:
        assert proc.stdout is not None
        remaining = max(0.1, deadline - time.monotonic())
        try:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), remaining)
        except TimeoutError:
            raise self._startup_error(
                proc, "timeout", f"did not load within {self.startup_timeout:g} s"
            ) from None
        match = re.match(rb"AGENTLS_LOCAL_READY (\d+)", line)
        if match is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, 5)
            state = _describe_exit(proc.returncode) if proc.returncode is not None else "no port"
            raise self._startup_error(proc, "server_error", f"failed to start ({state})")
        return int(match.group(1))

    async def _wait_ready(
        self, proc: subprocess.Popen[bytes], client: _LoopbackOpenAI, deadline: float
    ) -> None:
        """Poll /v1/models until it answers, the child dies or time runs out."""
        while True:
            remaining = deadline - time.monotonic()
            try:
                await asyncio.wait_for(client.list_models(), max(0.1, remaining))
                return
            except (ModelError, TimeoutError) as exc:
                if proc.poll() is not None:
                    raise self._startup_error(
                        proc, "server_error", f"exited ({_describe_exit(proc.returncode)})"
                    ) from exc
                if time.monotonic() >= deadline:
                    raise self._startup_error(
                        proc, "timeout", f"did not answer within {self.startup_timeout:g} s"
                    ) from exc
            await asyncio.sleep(0.05)

    def _startup_error(self, proc: subprocess.Popen[bytes], code: str, what: str) -> ModelError:
        tail = self.log_text()
        hint = ""
        if "No module named" in tail or "ModuleNotFoundError" in tail:
            code, hint = "not_found", f" Install the local model runtime: {INSTALL_COMMAND}."
        elif code == "timeout":
            hint = " Raise providerOptions.startup_timeout if this machine is slow."
        elif any(sign in tail.lower() for sign in _CORRUPT_SIGNS):  # "Failed to load model"
            hint = (
                f" The file looks truncated or corrupt: download it again (`agentls pull "
                f"{self.spec.alias}` for an hf: model, after deleting the file) or pick another."
            )
        return ModelError(
            f"local: the model server for {self.spec.alias} ({self.gguf}, pid {proc.pid}) "
            f"{what}.{hint} Its last output:\n{tail or '(nothing)'}",
            model=self.spec.alias,
            code=code,
        )
