"""`ChunkStream`: a provider's stream as its consumer reads it, with
cancellation by request id that reaches the in-flight call (the task
awaiting the HTTP stream is cancelled, so the connection closes), and
`ActiveRequests`, the request ids a provider can cancel. BaseProvider
(provider.py) hands out both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Generator
from typing import Any, Generic, TypeVar

from agentls.core.types.errors import ModelError, ProviderRequestCancelled

__all__ = ["ActiveRequests", "ChunkStream"]

log = logging.getLogger("agentls.provider")

ChunkT = TypeVar("ChunkT")


class ChunkStream(Generic[ChunkT]):
    """An async iterator of chunks (StreamChunks from `stream()`, FimChunks
    from `stream_fim()`) that is also awaitable.

    orbiter's documentation iterates `async for c in await provider.stream(...)`
    while most code writes `async for c in provider.stream(...)`; both work.
    Cancellation by request id raises ProviderRequestCancelled in the consumer.
    """

    def __init__(
        self,
        source: AsyncIterator[ChunkT],
        *,
        request_id: str,
        registry: ActiveRequests | None = None,
    ) -> None:
        self._source = source
        self.request_id = request_id
        self._registry = registry
        self._cancel_requested = False
        self._consumer: asyncio.Task[Any] | None = None
        self._reading = False  # the consumer is parked inside __anext__
        self._done = False

    def __await__(self) -> Generator[Any, None, ChunkStream[ChunkT]]:
        if False:  # pragma: no cover - makes this a generator function
            yield
        return self

    def __aiter__(self) -> ChunkStream[ChunkT]:
        return self

    async def __anext__(self) -> ChunkT:
        if self._cancel_requested:
            await self._finish()
            raise ProviderRequestCancelled(self.request_id)
        if self._done:
            raise StopAsyncIteration
        if self._consumer is None:
            self._consumer = asyncio.current_task()
            if self._registry is not None:
                self._registry.add(self.request_id, self)
        self._reading = True
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            await self._finish()
            raise
        except asyncio.CancelledError:
            if self._cancel_requested and self._consumer is not None:
                # Our own cancel_request(): turn the task cancellation back
                # into an ordinary exception for the consumer.
                self._consumer.uncancel()
                await self._finish()
                raise ProviderRequestCancelled(self.request_id) from None
            await self._finish()
            raise
        except (ModelError, ProviderRequestCancelled):
            await self._finish()
            raise
        except Exception as exc:
            # The contract is "providers raise ModelError". A chunk a decoder
            # did not expect (`"index": "x"`, a number where text belongs)
            # raised TypeError/ValueError/ValidationError instead, which
            # escaped the turn loop as an internal error and left the session
            # marked running. Whatever the provider raised, the caller gets a
            # ModelError saying what broke; the traceback goes to the log.
            await self._finish()
            log.warning("Stream %s failed reading the response", self.request_id, exc_info=True)
            raise ModelError(
                f"The model's response could not be read ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300] if str(exc) else 'no details'}).",
                code="invalid_response",
            ) from exc
        except BaseException:
            await self._finish()
            raise
        finally:
            self._reading = False

    def cancel(self) -> bool:
        """Cancel the in-flight read; the consumer sees ProviderRequestCancelled
        from its current (or next) read, and the source stream is closed."""
        if self._done or self._cancel_requested:
            return False
        self._cancel_requested = True
        # Only interrupt the consumer while it waits on us: a cancellation
        # landing elsewhere in its code would not be ours to translate.
        if self._reading and self._consumer is not None:
            self._consumer.cancel()
        return True

    async def aclose(self) -> None:
        await self._finish()

    async def _finish(self) -> None:
        if self._done and self._registry is None:
            return
        self._done = True
        if self._registry is not None:
            self._registry.discard(self.request_id, self)
            self._registry = None
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # closing a broken stream must not mask the real error
                pass


class ActiveRequests:
    """Request id -> in-flight stream, for cancel_request()."""

    def __init__(self) -> None:
        self._streams: dict[str, ChunkStream[Any]] = {}

    def add(self, request_id: str, stream: ChunkStream[Any]) -> None:
        self._streams[request_id] = stream

    def discard(self, request_id: str, stream: ChunkStream[Any]) -> None:
        if self._streams.get(request_id) is stream:
            del self._streams[request_id]

    def cancel(self, request_id: str) -> bool:
        stream = self._streams.get(request_id)
        return stream.cancel() if stream is not None else False

    def __len__(self) -> int:
        return len(self._streams)
