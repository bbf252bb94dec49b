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

A call written without the tag is a call too when it names an offered
tool: a ```json fence, or a reply that starts with the JSON, whose first
key is `"name"` with an offered tool as its value (Qwen2.5-Coder-1.5B
writes calls that way about as often as in tags, and broke their JSON).
A reply that *starts* with a JSON call (bare or fenced) whose `"name"` is
not an offered tool, followed by its `"arguments"` object, is a call too:
the small models "call" the function they were asked to write
(`{"name": "initials", "arguments": {"full_name": ...}}`), and decoded under
the grammar that becomes a call of an offered tool, never text that calls
nothing. A leading JSON object without `"arguments"` (a package.json) stays
text. Text that may still become a call (from a fence or a leading `{`) is
held back for at most about a hundred characters.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from agentls.core.provider.contract import FimChunk, FimRequest, ToolSpec
from agentls.providers.local.tool_calls.native_format import partial_marker
from agentls.providers.local.tool_calls.schema_grammar import FIELD

__all__ = ["CALL_TAGS", "call_schema", "constrained_calls"]

# format -> (opening, closing) tag around one JSON call
CALL_TAGS: Mapping[str, tuple[str, str]] = {"hermes": ("<tool_call>", "</tool_call>")}
# Openings a model writes by mistake for the format's own (Qwen2.5-Coder-1.5B
# wrote `<tools>`, the tag its prompt lists the tools in): read as the opening.
_MISTAKEN: Mapping[str, tuple[str, ...]] = {"hermes": ("<tools>",)}
CALL_MAX_TOKENS = 2048  # a write_file of a small module
# A call written as JSON without its tag: in a fence, or bare.
# (Qwen2.5-Coder-1.5B also doubles the brace: `{{"name": ...}}}`.)
_JSON_CALL = re.compile(r'(```[ \t]*(?:json)?[ \t]*\n\s*)?\{+\s*"name"\s*:\s*"([^"\n]{1,64})"')
# At the start of a reply: any name, when `"arguments"` follows (see the module doc).
_LEADING_CALL = re.compile(
    r'(```[ \t]*(?:json)?[ \t]*\n\s*)?\{+\s*"name"\s*:\s*"([^"\n]{1,64})"\s*,\s*'
    r'"(?:arguments|parameters)"\s*:\s*\{')
_UNDECIDED = 112  # characters held after a fence or a leading `{` before they pass as text


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
    watch = _Watch(opening, (opening, *_MISTAKEN.get(tool_format, ())),
                   {str(tool["name"]) for tool in tools})
    said = ""  # what was handed on
    first = stream(request)
    opened = False
    try:
        async for chunk in first:
            ready, head = watch.feed(chunk.delta, said, final=chunk.finish_reason is not None)
            if head is not None:
                yield FimChunk(delta=head)
                said, opened = said + head, True
                break
            said += ready
            yield FimChunk(delta=ready, finish_reason=chunk.finish_reason, usage=chunk.usage)
        else:
            if watch.pending:
                yield FimChunk(delta=watch.pending)
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


class _Watch:
    """Finds where a call opens in a streamed reply, holding back what may
    still become an opening."""

    def __init__(self, opening: str, openings: tuple[str, ...], names: set[str]) -> None:
        self.opening = opening
        self.openings = openings
        self.names = names
        self.pending = ""

    def feed(self, delta: str, said: str, *, final: bool) -> tuple[str, str | None]:
        """(text to hand on, None) or ("", the text up to the call with the
        format's opening instead of whatever opened it)."""
        self.pending += delta
        text = self.pending
        starts = [text.find(o) for o in self.openings if o in text]
        for match in _JSON_CALL.finditer(text):
            at_start = not (said + text[: match.start()]).strip()
            if (match.group(1) or at_start) and match.group(2) in self.names:
                starts.append(match.start())
                break
        leading = _LEADING_CALL.match(text.lstrip()) if not said.strip() else None
        if leading is not None:
            starts.append(len(text) - len(text.lstrip()))
        if starts:
            self.pending = ""
            return "", text[: min(starts)] + self.opening
        keep = 0 if final else self._undecided(text, said)
        self.pending = text[len(text) - keep:]
        return text[: len(text) - keep], None

    def _undecided(self, text: str, said: str) -> int:
        """How much of the end of `text` may still open a call."""
        keep = max(partial_marker(text, o) for o in (*self.openings, "```"))
        fence = text.rfind("```")
        if fence >= 0 and len(text) - fence < _UNDECIDED:
            keep = max(keep, len(text) - fence)
        brace = text.find("{")
        if (brace >= 0 and not (said + text[:brace]).strip()
                and len(text) - brace < _UNDECIDED):
            keep = max(keep, len(text) - brace)
        return keep


async def _close(stream: AsyncIterator[FimChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
