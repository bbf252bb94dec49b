"""A GGUF's own tool-call format: which one its chat template speaks, and a
streaming parser that turns the model's text back into ToolCallDeltas.

Detection reads the template's text for the markers each family trains on
(the same signs llama.cpp's chat code looks for):

- "hermes" (Qwen2.5, Hermes 2/3, many fine-tunes): the template renders
  `tools` and asks for `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
  one block per call, several per reply;
- "mistral" (Mistral Nemo, Codestral, Mistral Small): `[TOOL_CALLS]` then a
  JSON list of `{"name": ..., "arguments": {...}}`;
- "llama3" (Llama 3.1/3.2/3.3): a reply that is `{"name": ..., "parameters":
  {...}}`, optionally after `<|python_tag|>`; the template has the `ipython`
  role for tool results;
- "none": the template never uses `tools` (SmolLM2's chatml, Gemma), or uses
  it with markers we do not know: tool calls then go through the JSON-schema
  grammar (tool_grammar.py).

`[TOOL_CALLS]` and `<|python_tag|>` are control tokens, which
llama-cpp-python leaves out of the streamed text; so for those families a
reply that *starts* with the JSON (a list for Mistral, an object for Llama)
is read as calls too, and handed over as text when it is not one.

Small models also write calls in a ```json fence anywhere in the reply
(Qwen2.5-Coder-1.5B does): a fence whose JSON calls offered tools is read
as calls; one that names an offered tool but does not parse is a
MalformedToolCall (the turn answers it with a tool error and one retry).
Text held back while a call may be forming is released to the turn as
soon as it degenerates into a repetition, so the turn's stream guard can
stop it (a reply starting with `{` would otherwise be held whole until
max_tokens).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Literal

from agentls.core.agent.stream_guard import CHECK_EVERY, repeating_tail, window_chars
from agentls.core.types.errors import FinishReason, MalformedToolCall, ModelError
from agentls.core.types.messages import StreamChunk, ToolCallDelta
from agentls.providers.local.tool_calls.call_json import ToolCallSyntaxError, calls_in, meant_tool

ToolFormat = Literal["hermes", "mistral", "llama3", "none"]
NATIVE_FORMATS: tuple[ToolFormat, ...] = ("hermes", "mistral", "llama3")

_USES_TOOLS = re.compile(r"\btools\b")


def detect_tool_format(template: str | None) -> ToolFormat:
    """The tool-call format a chat template speaks ("none" without one)."""
    if not template or not _USES_TOOLS.search(template):
        return "none"
    if "<tool_call>" in template:
        # Qwen3-Coder / Qwen3.5 put XML inside the tags (<function=name>
        # <parameter=...>), not JSON: no parser for that yet, so the grammar.
        return "none" if "<function=" in template else "hermes"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or (
        "ipython" in template and "<|start_header_id|>" in template
    ):
        return "llama3"
    return "none"


# --------------------------------------------------------------------------- parsing

_MARKERS: dict[ToolFormat, str] = {
    "hermes": "<tool_call>",
    "mistral": "[TOOL_CALLS]",
    "llama3": "<|python_tag|>",
}
_HERMES_END = "</tool_call>"
_FENCE = "```"
# How a reply of calls opens without its marker: the marker token was not
# printed (Mistral, Llama), or the model wrote the call bare instead of in
# <tool_call> tags (Qwen2.5-Coder is known to). Such a reply counts as calls
# only if it parses as calls to offered tools; else it is text. (A ```json
# fence, at the start or later, is handled for every format.)
_BARE_OPENINGS: dict[ToolFormat, tuple[str, ...]] = {
    "mistral": ("[",),
    "llama3": ("{",),
    "hermes": ("{",),
}
_FENCE_INFO = re.compile(r"(?:json)?[ \t]*\n?\s*", re.IGNORECASE)
_HELD_WINDOW = window_chars()


def _fence_kind(after: str) -> str | None:
    """What follows an opening ```: "json" (a call may be in it), "other"
    (code: pass it on), or None (too little seen yet)."""
    if "json".startswith(after.lower()):
        return None  # "```", "```js": the info string is still coming
    rest = after[_FENCE_INFO.match(after).end():]  # type: ignore[union-attr]
    if rest:
        return "json" if rest[0] in "{[" else "other"
    if len(after) > 40 or (after.strip() and not "json".startswith(after.strip().lower())):
        return "other"
    return None


class NativeToolCallParser:
    """Feed the streamed text of one reply; get text chunks (passed through
    as they arrive, except what may begin a marker or a fenced call) and a
    ToolCallDelta per call, with finish_reason "tool_calls" at the end.

    A call that cannot be read becomes a MalformedToolCall (a ModelError,
    code "invalid_response", quoting it), never a crash; bare or fenced
    JSON that calls no offered tool is text.
    """

    def __init__(self, tool_format: ToolFormat, *, model: str = "",
                 tool_names: Iterable[str] = ()) -> None:
        if tool_format not in NATIVE_FORMATS:
            raise ValueError(f"no native tool-call parser for {tool_format!r}")
        self.format = tool_format
        self.model = model
        self.tool_names = set(tool_names)  # what a reply without a marker must call
        self._marker = _MARKERS[tool_format]
        self._pending = ""  # text not yet passed on (may begin a marker or a fence)
        self._call = ""  # the call being buffered
        self._in_call = False
        self._bare = False  # the call began without its marker
        self._fenced = False  # ... in a ```json fence, closed by the next ```
        self._checked = 0  # how much of the held call the degeneration check saw
        self._released = False  # held text degenerated: everything passes through now
        self._started = False  # anything but whitespace seen
        self._calls = 0

    # -- streaming ----------------------------------------------------------------
    def feed(self, text: str) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        if self._released:
            return [StreamChunk(delta=text)] if text else []
        if self._in_call:
            self._call += text
        else:
            self._pending += text
        while True:
            if self._in_call:
                if self._release_if_degenerate(out) or not self._close_call(out):
                    return out
                continue
            if not self._started:
                stripped = self._pending.lstrip()
                if not stripped:
                    return out
                openings = (*_BARE_OPENINGS[self.format], _FENCE)
                if any(len(stripped) < len(text) and text.startswith(stripped)
                       for text in (self._marker, *openings)):
                    return out  # may still become the marker or an opening ("[TOOL_CALLS]")
                self._started = True
                if (any(stripped.startswith(opening) for opening in _BARE_OPENINGS[self.format])
                        and not stripped.startswith(self._marker)):
                    self._begin_call(self._pending, bare=True)
                    self._pending = ""
                    continue
            at = self._pending.find(self._marker)
            fence = self._pending.find(_FENCE)
            if fence >= 0 and (at < 0 or fence < at):
                kind = _fence_kind(self._pending[fence + len(_FENCE):])
                if kind is None:  # wait for the fence's first line
                    self._text(out, self._pending[:fence])
                    self._pending = self._pending[fence:]
                    return out
                if kind == "json":
                    self._text(out, self._pending[:fence])
                    self._begin_call(self._pending[fence:], bare=True, fenced=True)
                    self._pending = ""
                    continue
                self._text(out, self._pending[:fence + len(_FENCE)])  # code: not a call
                self._pending = self._pending[fence + len(_FENCE):]
                continue
            if at >= 0:
                self._text(out, self._pending[:at])
                self._begin_call(self._pending[at + len(self._marker):], bare=False)
                self._pending = ""
                continue
            keep = max(partial_marker(self._pending, self._marker),
                       partial_marker(self._pending, _FENCE))
            ready = self._pending[: len(self._pending) - keep]
            if self._calls and not ready.strip():
                return out  # the newline between two calls: held, dropped at the end
            if ready:
                out.append(StreamChunk(delta=ready))
            self._pending = self._pending[len(ready):]
            return out

    def _text(self, out: list[StreamChunk], before: str) -> None:
        """Text before a call or fence; whitespace alone only before the first call."""
        if before.strip() or (before and not self._calls):
            out.append(StreamChunk(delta=before))

    def _begin_call(self, text: str, *, bare: bool, fenced: bool = False) -> None:
        self._in_call, self._bare, self._fenced, self._call = True, bare, fenced, text
        self._checked = 0

    def _release_if_degenerate(self, out: list[StreamChunk]) -> bool:
        """A held call that has become one unit repeated over and over is
        handed over as text, and so is everything after it: the turn's
        stream guard sees it and stops the reply."""
        if len(self._call) - self._checked < CHECK_EVERY:
            return False
        self._checked = len(self._call)
        if repeating_tail(self._call[-_HELD_WINDOW:]) is None:
            return False
        out.append(StreamChunk(delta=("" if self._bare else self._marker) + self._call))
        self._in_call, self._call, self._released = False, "", True
        if self._pending:
            out.append(StreamChunk(delta=self._pending))
            self._pending = ""
        return True

    def _close_call(self, out: list[StreamChunk]) -> bool:
        """Hermes calls end with </tool_call>, fenced ones with the closing
        ```: each is decoded as soon as it is closed, and the text after it
        is read again. Other calls run to the end of the reply (False: wait
        for more)."""
        if self._fenced:
            end = self._call.find(_FENCE, len(_FENCE))
            closing = _FENCE
        elif self.format == "hermes" and not self._bare:
            end = self._call.find(_HERMES_END)
            closing = _HERMES_END
        else:
            return False
        if end < 0:
            return False
        body, rest = self._call[:end], self._call[end + len(closing):]
        if self._fenced:
            body += closing
        try:
            out.extend(self._decode(body, bare=self._bare))
        except MalformedToolCall as exc:
            # The text before it in this feed was not handed over yet.
            exc.text = "".join(chunk.delta for chunk in out) + exc.text
            raise
        self._in_call, self._fenced, self._call = False, False, ""
        self._pending = rest
        return True

    def finish(self, finish_reason: FinishReason | None) -> list[StreamChunk]:
        """The closing chunks; raises ModelError for a malformed or cut-off call."""
        out: list[StreamChunk] = []
        if self._in_call:
            body = self._call
            self._in_call, self._call = False, ""
            if self.format == "hermes" and not self._bare and not body.strip():
                pass  # a stray <tool_call> at the very end: nothing to run
            else:
                try:
                    out.extend(self._decode(body, bare=self._bare))
                except ModelError:
                    if finish_reason == "length":
                        raise ModelError(
                            f"local: {self.model}'s tool call was cut off at max_tokens before "
                            f"it was complete: {body[:200]!r}. Raise max_tokens.",
                            model=self.model,
                            code="invalid_response",
                        ) from None
                    raise
        if self._pending and (self._pending.strip() or not self._calls):
            out.append(StreamChunk(delta=self._pending))
            self._pending = ""
        if self._calls:
            out.append(StreamChunk(finish_reason="tool_calls"))
        else:
            out.append(StreamChunk(finish_reason=finish_reason or "stop"))
        return out

    def _decode(self, body: str, *, bare: bool) -> list[StreamChunk]:
        try:
            calls = calls_in(body)
        except ToolCallSyntaxError as exc:
            meant = meant_tool(body, self.tool_names)
            if bare and meant is None:  # a JSON answer, not a call: the user sees it as written
                return [StreamChunk(delta=body)]
            written = body if bare else f"{self._marker}{body}{_closing(self.format)}"
            raise MalformedToolCall(
                f"local: {self.model} wrote a malformed tool call ({exc}): {body[:200]!r}. "
                "Ask again, or use a larger model.",
                model=self.model,
                text=written,
                reason=f"Your call{f' of {meant}' if meant else ''} could not be read: {exc}. "
                f"Write a call as {_shape(self.format, meant)}, the arguments a JSON object "
                "with double-quoted keys and strings.",
            ) from None
        if bare and self.tool_names and any(name not in self.tool_names for name, _ in calls):
            return [StreamChunk(delta=body)]  # JSON that looks like a call, to no tool we offered
        deltas = []
        for name, arguments in calls:
            deltas.append(ToolCallDelta(
                index=self._calls,
                id=f"call_{uuid.uuid4().hex[:12]}",
                name=name,
                arguments=arguments,
            ))
            self._calls += 1
        return [StreamChunk(tool_call_deltas=deltas)]


def _shape(tool_format: ToolFormat, name: str | None) -> str:
    """How a call of `name` is written in `tool_format`, for an error message."""
    call = f'{{"name": "{name or "<tool name>"}", "arguments": {{"<argument>": "<value>"}}}}'
    if tool_format == "hermes":
        return f"<tool_call>\n{call}\n</tool_call>"
    return f"[{call}]" if tool_format == "mistral" else call


def _closing(tool_format: ToolFormat) -> str:
    return _HERMES_END if tool_format == "hermes" else ""


def partial_marker(text: str, marker: str) -> int:
    """How many characters at the end of `text` could be the start of `marker`."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
