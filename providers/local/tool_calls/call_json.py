"""The JSON inside a local model's tool call: one call object, a list of
them, or objects one after another, in tags, in a ```json fence or bare;
and whether text the model wrote was meant as a call to one of the offered
tools (so that a call it got wrong is answered with an error it can
correct, not shown to the user as an answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

__all__ = ["ToolCallSyntaxError", "calls_in", "meant_tool"]

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_NAMED = re.compile(r'"(?:name|tool|function)"\s*:\s*"([^"\\]{1,100})"')


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


def calls_in(text: str) -> list[tuple[str, str]]:
    """Every call in `text`: one object, a list of them, or objects one after
    another (Llama separates parallel calls with `;`); a ```json fence
    around them is dropped."""
    text = _FENCE.sub("", text.strip())
    # strict=False: a line break or tab written raw inside a string (small
    # models do; llama.cpp's JSON grammar allows it) is read as that character.
    decoder = json.JSONDecoder(strict=False)
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
            raise ToolCallSyntaxError(
                f"not valid JSON ({exc.msg} at character {exc.pos})") from exc
        for item in value if isinstance(value, list) else [value]:
            calls.append(_call_from(item))
    if not calls:
        raise ToolCallSyntaxError("no tool call in it")
    return calls


def meant_tool(text: str, tool_names: Collection[str]) -> str | None:
    """The offered tool that JSON-like `text` names as a call's name, if any:
    then it was meant as a call even when it does not parse."""
    for match in _NAMED.finditer(text):
        if match.group(1) in tool_names:
            return match.group(1)
    return None
