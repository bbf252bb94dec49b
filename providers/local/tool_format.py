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
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any, Literal

from agentls.core.models import FinishReason, ModelError, StreamChunk, ToolCallDelta

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
# How a reply of calls opens without its marker: the marker token was not
# printed (Mistral, Llama), or the model put the call in a JSON fence or
# bare instead of <tool_call> tags (Qwen2.5-Coder is known to). Such a reply
# counts as calls only if it parses as calls to offered tools; else it is text.
_BARE_OPENINGS: dict[ToolFormat, tuple[str, ...]] = {
    "mistral": ("[",),
    "llama3": ("{", "```json"),
    "hermes": ("{", "```json"),
}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class ToolCallSyntaxError(ValueError):
    pass


def _call_from(value: Any) -> tuple[str, str]:
    """(name, arguments JSON) of one decoded call object."""
    if not isinstance(value, dict):
        raise ToolCallSyntaxError("a tool call is not a JSON object")
    function = value.get("function")
    if isinstance(function, dict):  # OpenAI's shape, which some fine-tunes copy
        value = function
    name = value.get("name")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            raise ToolCallSyntaxError(f"the arguments of {name!r} are not JSON") from exc
    if not isinstance(name, str) or not name:
        raise ToolCallSyntaxError("a tool call has no name")
    if not isinstance(arguments, dict):
        raise ToolCallSyntaxError(f"the arguments of {name!r} are not a JSON object")
    return name, json.dumps(arguments)


def _calls_in(text: str) -> list[tuple[str, str]]:
    """Every call in `text`: one object, a list of them, or objects one after
    another (Llama separates parallel calls with `;`)."""
    text = _FENCE.sub("", text.strip())
    decoder = json.JSONDecoder()
    calls: list[tuple[str, str]] = []
    index = 0
    while True:
        while index < len(text) and (text[index].isspace() or text[index] in ";,"):
            index += 1
        if index >= len(text):
            break
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise ToolCallSyntaxError(f"not valid JSON ({exc.msg})") from exc
        for item in value if isinstance(value, list) else [value]:
            calls.append(_call_from(item))
    if not calls:
        raise ToolCallSyntaxError("no tool call in it")
    return calls


class NativeToolCallParser:
    """Feed the streamed text of one reply; get text chunks (passed through
    as they arrive, except a possible marker's first characters) and a
    ToolCallDelta per call, with finish_reason "tool_calls" at the end.

    A malformed call becomes a ModelError(code="invalid_response") that
    quotes it, never a crash; a bare JSON reply that is not a call is text.
    """

    def __init__(self, tool_format: ToolFormat, *, model: str = "",
                 tool_names: Iterable[str] = ()) -> None:
        if tool_format not in NATIVE_FORMATS:
            raise ValueError(f"no native tool-call parser for {tool_format!r}")
        self.format = tool_format
        self.model = model
        self.tool_names = set(tool_names)  # what a reply without a marker must call
        self._marker = _MARKERS[tool_format]
        self._pending = ""  # text not yet passed on (may begin a marker)
        self._call = ""  # the call being buffered
        self._in_call = False
        self._bare = False  # the call began without its marker
        self._started = False  # anything but whitespace seen
        self._calls = 0

    # -- streaming ----------------------------------------------------------------
    def feed(self, text: str) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        if self._in_call:
            self._call += text
        else:
            self._pending += text
        while True:
            if self._in_call:
                if not self._close_hermes_call(out):
                    return out
                continue
            if not self._started:
                stripped = self._pending.lstrip()
                if not stripped:
                    return out
                openings = _BARE_OPENINGS[self.format]
                if any(len(stripped) < len(text) and text.startswith(stripped)
                       for text in (self._marker, *openings)):
                    return out  # may still become the marker or an opening ("[TOOL_CALLS]")
                self._started = True
                if (any(stripped.startswith(opening) for opening in openings)
                        and not stripped.startswith(self._marker)):
                    self._begin_call(self._pending, bare=True)
                    self._pending = ""
                    continue
            at = self._pending.find(self._marker)
            if at >= 0:
                before = self._pending[:at]
                if before.strip() or (before and not self._calls):  # not the gap between calls
                    out.append(StreamChunk(delta=before))
                self._begin_call(self._pending[at + len(self._marker):], bare=False)
                self._pending = ""
                continue
            keep = _partial_marker(self._pending, self._marker)
            ready = self._pending[: len(self._pending) - keep]
            if self._calls and not ready.strip():
                return out  # the newline between two calls: held, dropped at the end
            if ready:
                out.append(StreamChunk(delta=ready))
            self._pending = self._pending[len(ready):]
            return out

    def _begin_call(self, text: str, *, bare: bool) -> None:
        self._in_call, self._bare, self._call = True, bare, text

    def _close_hermes_call(self, out: list[StreamChunk]) -> bool:
        """Hermes calls end with </tool_call>: each is decoded as soon as it is
        closed, and the text after it is read again. Other formats run to
        the end of the reply (False: wait for more)."""
        if self.format != "hermes":
            return False
        end = self._call.find(_HERMES_END)
        if end < 0:
            return False
        body, rest = self._call[:end], self._call[end + len(_HERMES_END):]
        out.extend(self._decode(body, bare=False))
        self._in_call, self._call = False, ""
        self._pending = rest
        return True

    def finish(self, finish_reason: FinishReason | None) -> list[StreamChunk]:
        """The closing chunks; raises ModelError for a malformed or cut-off call."""
        out: list[StreamChunk] = []
        if self._in_call:
            body = self._call
            self._in_call, self._call = False, ""
            if self.format == "hermes" and not body.strip():
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
            calls = _calls_in(body)
        except ToolCallSyntaxError as exc:
            if bare:  # a JSON answer, not a call: the user sees it as written
                return [StreamChunk(delta=body)]
            raise ModelError(
                f"local: {self.model} wrote a malformed tool call ({exc}): {body[:200]!r}. "
                "Ask again, or use a larger model.",
                model=self.model,
                code="invalid_response",
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


def _partial_marker(text: str, marker: str) -> int:
    """How many characters at the end of `text` could be the start of `marker`."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
