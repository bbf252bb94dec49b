"""`ServingModels`: which child process serves each role ("chat",
"completion") of the local provider, and the switch to a newly chosen
model without a gap.

When the settings name a model whose child is not running while another
model's child already serves that role, the request is answered by the
running child and the new model loads in the background (shown as
work-done progress). Only once its child answers does it take over; the
previous child is then stopped, as soon as no role and no request in flight
uses it. A new model that fails (a corrupt or truncated GGUF, too large for
the memory left, a missing file, an unknown name) never takes over: the
user is told once, naming the model and what to change, and the previous
one keeps serving. It is tried again when its file changes or the settings
are changed. With nothing serving the role yet (the first request), the
request waits for the load, as before.

A settings change that rebuilds the provider hands the serving children to
the new provider (take_over), so they are neither stopped nor loaded again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agentls.core.provider.progress import ProgressSink
from agentls.core.types.errors import ModelError
from agentls.providers.local.process import _ChildSpec, _ModelProcess

__all__ = ["ServingModels"]

logger = logging.getLogger("agentls.providers.local")

_SETTING = {"chat": "`model`", "completion": "`inlineCompletion.model`"}


def _file_signature(spec: _ChildSpec) -> tuple[int, int] | None:
    """(size, mtime) of a model given by path: a failed file that changed
    since (downloaded again, fixed) is worth another try."""
    if spec.path is None:
        return None
    try:
        stat = spec.path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


class ServingModels:
    """The local provider's children: `processes` by spec, the one serving
    each role, background loads and the children being retired."""

    def __init__(
        self,
        make_process: Callable[[_ChildSpec], _ModelProcess],
        progress: Callable[[], ProgressSink],
        on_loaded: Callable[[_ChildSpec, str], Awaitable[Any]],
    ) -> None:
        self._make_process = make_process
        self._progress = progress
        self._on_loaded = on_loaded
        self.processes: dict[_ChildSpec, _ModelProcess] = {}
        self.serving: dict[str, _ModelProcess] = {}
        self.loading: dict[_ChildSpec, asyncio.Task[None]] = {}
        # spec -> (why it failed, its file's signature then)
        self.failed: dict[_ChildSpec, tuple[ModelError, tuple[int, int] | None]] = {}
        self._retiring: set[_ModelProcess] = set()
        self._wanted: dict[str, _ChildSpec] = {}  # role -> what its last request asked for
        self._told: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def process(self, spec: _ChildSpec) -> _ModelProcess:
        process = self.processes.get(spec)
        if process is None:
            process = self.processes[spec] = self._make_process(spec)
        return process

    def choose(self, wanted: Callable[[], _ChildSpec], role: str) -> _ModelProcess:
        """The child to send a `role` request to (see the module doc). The
        caller starts it if it is not running (the first load waits)."""
        current = self._running(role)
        try:
            spec = wanted()
        except ModelError as exc:
            if current is None:
                raise
            self._tell(f"Model {exc.model or '?'}", exc.message, current, role)
            return current
        self._wanted[role] = spec
        process = self.processes.get(spec)
        if process is not None and process.ready:
            self.mark_serving(role, process)
            return process
        if current is None or current.spec == spec:
            return self.process(spec)
        failure = self.failed.get(spec)
        if failure is not None and failure[1] == _file_signature(spec):
            return current  # told once already; the previous model serves
        if spec not in self.loading:
            self._load_in_background(spec, role, current)
        return current

    def mark_serving(self, role: str, process: _ModelProcess) -> None:
        previous = self.serving.get(role)
        self.serving[role] = process
        self.failed.pop(process.spec, None)
        if previous is not None and previous is not process:
            logger.info("local: %s now serves %s (was %s)", process.spec.alias, role,
                        previous.spec.alias)
            if previous not in self.serving.values():
                self._retire(previous)

    def replacement(self, process: _ModelProcess, role: str) -> _ModelProcess:
        """A request that chose `process` just before it was retired and
        stopped goes to what serves the role now, rather than starting it again."""
        if process.retired and not process.ready:
            return self.serving.get(role, process)
        return process

    def release(self, process: _ModelProcess) -> None:
        """A request on `process` ended: stop it if it was retired meanwhile."""
        if process in self._retiring and process.in_use == 0:
            self._retiring.discard(process)
            self._spawn(process.stop())

    def take_over(self, other: ServingModels) -> None:
        """Adopt the running children that serve a role in `other` (the
        provider a settings change replaced); `other` keeps the rest."""
        for role, process in list(other.serving.items()):
            if not process.ready:
                continue
            for spec, candidate in list(other.processes.items()):
                if candidate is process:
                    del other.processes[spec]
                    self.processes.setdefault(spec, process)
            other.serving.pop(role, None)
            self.serving.setdefault(role, process)
        for role in list(other.serving):  # roles whose child another role took with it
            if other.serving[role] in self.serving.values():
                del other.serving[role]

    async def aclose(self) -> None:
        for task in [*self.loading.values(), *self._tasks]:
            task.cancel()
        everything = {*self.processes.values(), *self.serving.values(), *self._retiring}
        self.processes.clear()
        self.serving.clear()
        self._retiring.clear()
        await asyncio.gather(*(process.stop() for process in everything),
                             return_exceptions=True)

    # -- internals -----------------------------------------------------------------
    def _running(self, role: str) -> _ModelProcess | None:
        process = self.serving.get(role)
        return process if process is not None and process.ready else None

    def _load_in_background(self, spec: _ChildSpec, role: str, current: _ModelProcess) -> None:
        process = self.process(spec)
        task = asyncio.ensure_future(self._load(spec, role, process, current))
        self.loading[spec] = task
        task.add_done_callback(lambda _: self.loading.pop(spec, None))

    async def _load(
        self, spec: _ChildSpec, role: str, process: _ModelProcess, current: _ModelProcess
    ) -> None:
        previous = current.spec.alias
        shown = self._progress().begin(f"Loading {spec.alias}",
                                       message=f"{previous} serves until it is ready")
        try:
            await process.client()
            await self._on_loaded(spec, role)
        except ModelError as exc:
            self.failed[spec] = (exc, _file_signature(spec))
            if self.processes.get(spec) is process:
                del self.processes[spec]
            if self._wanted.get(role) != spec:  # no longer chosen: nothing to tell
                shown.end("Loading failed (no longer chosen)")
            else:
                shown.end("Loading failed",
                          error=self._failure(spec.alias, exc.message, previous, role))
            logger.warning("local: switching %s to %s failed; %s keeps serving: %s", role,
                           spec.alias, previous, exc.message)
            return
        except BaseException:
            shown.end("Loading stopped")
            raise
        if self._wanted.get(role) != spec:  # the settings moved on while it loaded
            shown.end(f"{spec.alias} loaded, but the settings no longer choose it")
            if process not in self.serving.values():
                self._retire(process)
            return
        shown.end(f"{spec.alias} loaded in {process.load_seconds or 0:.1f} s; it serves now")
        self.mark_serving(role, process)

    def _retire(self, process: _ModelProcess) -> None:
        process.retired = True
        for spec, candidate in list(self.processes.items()):
            if candidate is process:
                del self.processes[spec]
        if process.in_use == 0:
            self._spawn(process.stop())
        else:  # stopped by release() when its last request ends
            self._retiring.add(process)

    def _tell(self, title: str, message: str, current: _ModelProcess, role: str) -> None:
        text = self._failure(None, message, current.spec.alias, role)
        if text in self._told:
            return
        self._told.add(text)
        logger.warning("%s", text)
        self._progress().begin(title).end("failed", error=text)

    @staticmethod
    def _failure(model: str | None, message: str, previous: str, role: str) -> str:
        head = f"local: cannot switch to {model}: " if model else ""
        message = message.removeprefix("local: ") if head else message
        setting = _SETTING.get(role, "the model setting")
        return (f"{head}{message}\n{previous} keeps serving {role}; change {setting} "
                "(or providerOptions) to a model that loads, or fix the file.")

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
