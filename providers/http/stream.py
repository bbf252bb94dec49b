"""`StreamReader`: what reading a model's stream means for every HTTP
provider, whatever its wire format: one JSON object per event or line, an
error the server sends inside a 200 stream, a stream that ends before it
finished, the items after the end drained, and usage estimated as
characters / 4 when the server sends none.

Each vendor's reader (openai_stream.py, ollama_stream.py,
anthropic_stream.py) subclasses it and decodes only its own chunks. Like
the rest of the HTTP layer it imports no pydantic: the FIM readers run on
every keystroke.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from agentls.core.types.errors import ModelError
    from agentls.providers.http.client import HttpClient

__all__ = ["StreamReader", "estimated_tokens"]

_Item = TypeVar("_Item")
_Chunk = TypeVar("_Chunk")


def estimated_tokens(chars: int) -> int:
    """Tokens for `chars` characters when the server does not say: characters / 4,
    rounded up."""
    return -(-chars // 4)


class StreamReader:
    """The state and the checks one streamed response shares across vendors."""

    def __init__(self, http: HttpClient, model: str, *, prompt_chars: int) -> None:
        self.http = http
        self.model = model
        self.prompt_chars = prompt_chars
        self.output_chars = 0
        self.done = False  # the stream's own end marker was seen

    async def chunks(
        self, items: AsyncIterator[_Item], decode: Callable[[_Item], _Chunk | None]
    ) -> AsyncIterator[_Chunk]:
        """The decoded chunks of a stream up to its end marker (`done`); what
        follows is read and dropped so the connection can be reused."""
        async for item in items:
            if self.done:
                continue
            chunk = decode(item)
            if chunk is not None:
                yield chunk

    def invalid(self, detail: str) -> ModelError:
        """An invalid_response error for this stream."""
        return self.http.error("invalid_response", detail, model=self.model)

    def json_object(self, data: str, what: str) -> dict[str, Any]:
        """`data` parsed as a JSON object; `what` names it in the error
        ("a stream chunk", "a 'message_start' event")."""
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise self.invalid(f"{what} is not JSON ({exc}): {data[:200]!r}") from None
        return self.object(payload, what, shown=data)

    def object(self, value: Any, what: str, *, shown: str | None = None) -> dict[str, Any]:
        """`value` when it is a JSON object, else an invalid_response error."""
        if not isinstance(value, dict):
            text = json.dumps(value) if shown is None else shown
            raise self.invalid(f"{what} is not an object: {text[:200]!r}")
        return value

    def raise_sent_error(self, payload: dict[str, Any], *, status: int = 200) -> None:
        """An error the server sent inside the stream (`{"error": ...}`) as a
        ModelError, classified as if it came with `status`."""
        if payload.get("error"):
            raise self.stream_error(payload, status=status)

    def stream_error(self, payload: Any, *, status: int = 200) -> ModelError:
        return self.http.error_from_body(payload, model=self.model, status=status)

    def cut_short(self, missing: str) -> ModelError:
        """The error for a stream that ended before `missing` ("it finished (no ...)")."""
        return self.http.error(
            "connection", f"the server ended the stream before {missing}", model=self.model
        )
