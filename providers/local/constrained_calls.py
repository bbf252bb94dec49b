"""Tool calls a small model cannot get wrong: the model writes freely until
it opens a call (`<tool_call>`, Hermes/Qwen), then the call itself is
decoded under a grammar made from the offered tools' schemas, so its JSON
parses, names an offered tool and has that tool's required arguments.

llama-cpp-python has no lazy grammar (one that starts at a trigger word),
so this is two requests to the child: the first streams until the opener
appears and is closed there (which stops the generation); the second sends
the prompt with everything written so far plus the opener, constrained by
`json_schema` (the child turns it into GBNF, schema_grammar.py), and stops
at the closing tag. llama.cpp reuses the cached prompt prefix, so the
second request costs only the new tokens. One call per reply: the turn
answers it and the model goes on from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from agentls.core.provider import FimChunk, FimRequest, ToolSpec

from .schema_grammar import FIELD

__all__ = ["CALL_TAGS", "call_schema", "constrained_calls"]

# format -> (opening, closing) tag around one JSON call
CALL_TAGS: Mapping[str, tuple[str, str]] = {"hermes": ("<tool_call>", "</tool_call>")}
# Openings a model writes by mistake for the format's own (Qwen2.5-Coder-1.5B
# wrote `<tools>`, the tag its prompt lists the tools in): read as the opening.
_MISTAKEN: Mapping[str, tuple[str, ...]] = {"hermes": ("<tools>",)}
CALL_MAX_TOKENS = 2048  # a write_file of a small module


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """One JSON object `{"name": <an offered tool>, "arguments": <its
    parameters>}`, as the Hermes format writes a call."""
    return {"oneOf": [
        {"type": "object",
         "properties": {"name": {"const": tool["name"]},
                        "arguments": tool.get("parameters") or {"type": "object"}},
         "required": ["name", "arguments"]}
        for tool in tools
    ]}


async def constrained_calls(
    request: FimRequest,
    stream: Callable[[FimRequest], AsyncIterator[FimChunk]],
    tools: Sequence[ToolSpec],
    tool_format: str,
) -> AsyncIterator[FimChunk]:
    """The model's reply to `request` (a rendered chat prompt), its first
    tool call decoded under the tools' grammar (see the module doc). Text
    before the call streams as it comes."""
    opening, closing = CALL_TAGS[tool_format]
    openings = (opening, *_MISTAKEN.get(tool_format, ()))
    said = ""  # what was handed on
    pending = ""  # what may still become an opening
    first = stream(request)
    opened = False
    try:
        async for chunk in first:
            pending += chunk.delta
            found = [(pending.find(o), o) for o in openings if o in pending]
            if found:
                at, _ = min(found)
                head = pending[:at] + opening
                yield FimChunk(delta=head)
                said, opened = said + head, True
                break
            keep = 0 if chunk.finish_reason else max(_partial(pending, o) for o in openings)
            ready, pending = pending[: len(pending) - keep], pending[len(pending) - keep:]
            said += ready
            yield FimChunk(delta=ready, finish_reason=chunk.finish_reason, usage=chunk.usage)
        else:
            if pending:
                yield FimChunk(delta=pending)
    finally:
        await _close(first)  # stops the child's generation
    if not opened:
        return
    said += "\n"
    yield FimChunk(delta="\n")
    options = request.options
    call = FimRequest(
        prefix=request.prefix + said,
        suffix="",
        options=dataclasses.replace(
            options,
            stop=(closing, *(s for s in options.stop if s != closing)),
            max_tokens=max(options.max_tokens or 0, CALL_MAX_TOKENS),
            extra={**options.extra, FIELD: call_schema(tools)},
        ),
    )
    finish = None
    async for chunk in stream(call):
        if chunk.finish_reason is not None:
            finish = chunk.finish_reason
            chunk = dataclasses.replace(chunk, finish_reason=None)
        yield chunk
    # The closing tag the stop cut off; the parser ends the call on it.
    yield FimChunk(delta="\n" + closing, finish_reason=finish)


def _partial(text: str, opening: str) -> int:
    """How many characters at the end of `text` could begin `opening`."""
    for size in range(min(len(opening) - 1, len(text)), 0, -1):
        if opening.startswith(text[-size:]):
            return size
    return 0


async def _close(stream: AsyncIterator[FimChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
