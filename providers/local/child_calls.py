"""A call to a model's child process, as LocalProvider makes it: the
client of a running child, or its start shown as progress when the load
takes over a second; a child found dead before anything was streamed
(it died between requests and the request raced its exit) started again
and asked once more; a death mid-answer, or a prompt over the context
window, explained from the child's log.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from agentls.core.provider.chunk_stream import ChunkStream
from agentls.core.provider.progress import ProgressSink, ProgressTask
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.providers.local.engine_work import PREEMPTED
from agentls.providers.local.process import (
    _ChildSpec,
    _describe_exit,
    _LoopbackOpenAI,
    _ModelProcess,
)
from agentls.providers.local.serving import ServingModels

__all__ = ["LOAD_PROGRESS_AFTER", "ChildCalls"]

_Chunk = TypeVar("_Chunk")

LOAD_PROGRESS_AFTER = 1.0  # seconds: a shorter model load is not worth a notification


class ChildCalls:
    """Streams from the children `models` serves; `progress` says where a
    slow load is shown, `loaded` is told of each child that finished loading."""

    def __init__(
        self,
        models: ServingModels,
        progress: Callable[[], ProgressSink],
        loaded: Callable[[_ChildSpec, str], Awaitable[None]],
    ) -> None:
        self.models = models
        self._progress = progress
        self._loaded = loaded

    async def stream(
        self,
        process: _ModelProcess,
        open_stream: Callable[[_LoopbackOpenAI], ChunkStream[_Chunk]],
        role: str = "chat",
    ) -> AsyncIterator[_Chunk]:
        """Stream from the child. When it turns out dead before anything was
        streamed (it died between requests and we raced its exit), it is
        started again and the request sent once more; a death mid-answer
        becomes server_error ("crashed and was restarted")."""
        process = self.models.replacement(process, role)
        process.in_use += 1  # a switch stops this child only once it is unused
        try:
            for attempt in (1, 2):
                client = await self.client(process, role)
                mark = process.log_offset()
                stream = open_stream(client)
                streamed = False
                try:
                    async for chunk in stream:
                        streamed = True
                        yield chunk
                    return
                except ModelError as exc:
                    if PREEMPTED in exc.message:  # a background request an inline one came before
                        raise ProviderRequestCancelled() from exc
                    if (attempt == 1 and not streamed
                            and await self._died(process, exc) is not None):
                        continue  # nothing was said yet: process.client() restarts it
                    explained = await self._explain(process, exc, mark)
                    if explained is exc:
                        raise
                    raise explained from exc
                finally:
                    await stream.aclose()
        finally:
            process.in_use -= 1
            self.models.release(process)

    async def client(self, process: _ModelProcess, role: str) -> _LoopbackOpenAI:
        """The child's client; a load that takes over a second is shown as
        progress (a 1 GB model takes several on a laptop)."""
        if process.pid is not None:
            client = await process.client()  # running (or just died: restarted quietly)
            self.models.mark_serving(role, process)
            return client
        alias = process.spec.alias
        shown: list[ProgressTask] = []
        timer = asyncio.get_running_loop().call_later(
            LOAD_PROGRESS_AFTER,
            lambda: shown.append(self._progress().begin(f"Loading {alias}", message="local model")),
        )
        try:
            client = await process.client()
        except ModelError as exc:
            timer.cancel()
            for task in shown:
                task.end("Loading failed", error=exc.message)
            raise
        except BaseException:
            timer.cancel()
            for task in shown:
                task.end("Loading stopped")
            raise
        timer.cancel()
        for task in shown:
            task.end(f"{alias} loaded in {process.load_seconds or 0:.1f} s")
        await self._loaded(process.spec, role)
        self.models.mark_serving(role, process)
        return client

    async def _died(self, process: _ModelProcess, exc: ModelError) -> int | None:
        """The child's exit code if it is dead. A connection cut is how a
        crash looks from here: give the dying child a moment to be reaped."""
        wait = 1.0 if exc.code in ("connection", "invalid_response", "server_error") else 0.0
        return await process.exit_code(wait)

    async def _explain(self, process: _ModelProcess, exc: ModelError, mark: int) -> ModelError:
        code = await self._died(process, exc)
        alias = process.spec.alias
        if code is None:
            log = process.log_text(mark)
            if "exceed context window" in log or "exceeds the context" in log:
                return ModelError(
                    f"local: the request does not fit {alias}'s context window "
                    f"(n_ctx={process.spec.n_ctx}): start a new session, send less context, "
                    "or raise providerOptions.n_ctx.",
                    model=alias,
                    code="context_length",
                )
            return exc
        tail = process.log_text()
        try:
            await process.client()
            restarted = "and was restarted; try again"
        except ModelError as again:
            restarted = f"and could not be restarted: {again.message}"
        return ModelError(
            f"local: the local model {alias} crashed ({_describe_exit(code)}) while answering, "
            f"{restarted}. Its last output:\n{tail or '(nothing)'}",
            model=alias,
            code="server_error",
        )
