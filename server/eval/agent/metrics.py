"""What one agent turn did, read from its messages (the `agentls/chat`
result, or the `agentls/message` notifications when no result came).

Tool calls are counted three ways:

- *valid*: parsed into a call of an offered tool whose arguments the tool
  accepted (it ran, or was refused for what it would do: a denial, a file
  not found, an `old_string` not in the file);
- *invalid*: parsed, but the tool does not exist or refused its arguments
  (error codes `unknown_tool`, `invalid_arguments`, `malformed*`,
  `invalid_*`); or a call the server could not parse (an assistant message
  with `metadata.malformed_tool_call`, kept as text for the model's retry;
  without those, a turn that ended with `invalid_response` naming a tool
  call counts one); or a call written as JSON in
  the answer's text (fenced or bare: an object with `name` and
  `arguments`, or a `<tool_call>` tag) that never ran;
- *repeated*: valid calls identical (tool and arguments) to an earlier one
  of the same turn; counted in valid too.

Edits the model wrote in its reply (`session.editFormat` file-blocks; the
reply's `metadata.reply_edits`) are agentls's calls, not the model's: they
are counted as `reply_edits` (and `reply_edits_applied`), not as tool calls.

agentls's own closing message (`metadata.source` "agentls": why a turn
ended early) is neither a model call nor the model's answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentls.core.editor.reply_edits import CHECK_ID_PREFIX

__all__ = ["INVALID_CODES", "text_calls", "transcript", "turn_metrics"]

INVALID_CODES = frozenset({"unknown_tool", "invalid_arguments"})
_JSON_START = re.compile(r"[{\[]")
# a call's opening even where the JSON after it is broken or cut off
_CALL_OPENING = re.compile(r'\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"(?:arguments|parameters)"\s*:')


def _invalid(code: str) -> bool:
    return code in INVALID_CODES or code.startswith(("malformed", "invalid_"))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _looks_like_call(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_looks_like_call(v) for v in value)
    return (isinstance(value, dict) and isinstance(value.get("name"), str)
            and ("arguments" in value or "parameters" in value))


def text_calls(text: str) -> int:
    """How many tool calls `text` writes out instead of making them (whole
    JSON call objects, or openings of calls whose JSON is broken, whichever
    finds more; plus `<tool_call>` tags)."""
    count = 0
    decoder = json.JSONDecoder()
    index = 0
    while match := _JSON_START.search(text, index):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            index = match.start() + 1
            continue
        if _looks_like_call(value):
            count += len(value) if isinstance(value, list) else 1
        index = end
    return max(count, len(_CALL_OPENING.findall(text))) + text.count("<tool_call>")


def turn_metrics(messages: Sequence[Mapping[str, Any]],
                 result: Mapping[str, Any] | None) -> dict[str, Any]:
    """Counts of one turn (see the module's docstring) and its final answer."""
    calls: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    repeated = written = model_calls = malformed = 0
    answer = ""
    codes: dict[str, str] = {}  # tool_call_id -> error code
    unmatched_codes: list[str] = []
    edit_ids: set[str] = set()
    check_ids: set[str] = set()  # agentls's own test runs after the edits
    for message in messages:
        role = message.get("role")
        metadata = message.get("metadata") or {}
        if role == "assistant" and metadata.get("source") == "agentls":
            continue
        if role == "assistant" and metadata.get("malformed_tool_call"):
            model_calls += 1
            malformed += 1
            continue
        if role == "assistant":
            model_calls += 1
            text = _text(message.get("content"))
            for call in metadata.get("tool_calls") or []:
                if metadata.get("reply_edits") or metadata.get("reply_checks"):
                    edit_id = str(call.get("id"))
                    (check_ids if edit_id.startswith(CHECK_ID_PREFIX) else edit_ids).add(edit_id)
                    continue
                calls.append(call)
                key = json.dumps([call.get("tool"), call.get("arguments")], sort_keys=True,
                                 default=str)
                repeated += key in seen
                seen.add(key)
            written += text_calls(text)
            if text.strip():
                answer = text
        elif role == "tool":
            outcome = message.get("toolResult") or {}
            code = str((outcome.get("error") or {}).get("code", "")) if not outcome.get(
                "success", True) else ""
            call_id = metadata.get("tool_call_id")
            if isinstance(call_id, str):
                codes[call_id] = code
            else:
                unmatched_codes.append(code)
    failures = [code for code in [*codes.values(), *unmatched_codes] if code]
    invalid_parsed = sum(_invalid(codes.get(str(c.get("id")), "")) for c in calls)
    invalid_parsed += sum(_invalid(code) for code in unmatched_codes)
    error = (result or {}).get("error") or {}
    unparsed = malformed or int(error.get("code") == "invalid_response"
                                and "tool call" in str(error.get("message", "")))
    usage = (result or {}).get("usage") or {}
    total = len(calls) + unparsed + written
    valid = len(calls) - invalid_parsed
    return {
        "model_calls": model_calls,
        "tool_calls": total,
        "valid_calls": valid,
        "invalid_calls": total - valid,
        "unparsed_calls": unparsed,
        "text_calls": written,
        "repeated_calls": repeated,
        "reply_edits": len(edit_ids),
        "reply_edits_applied": sum(1 for i in edit_ids if i in codes and not codes[i]),
        "checks": len(check_ids),
        "checks_failed": sum(1 for i in check_ids if codes.get(i)),
        "tools": [str(c.get("tool")) for c in calls],
        "call_errors": failures,  # the error codes of the calls that failed
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "total_tokens": int(usage.get("total_tokens") or 0),
        "answer": answer,
    }


def transcript(messages: Sequence[Mapping[str, Any]], *, chars: int = 400
               ) -> list[dict[str, Any]]:
    """The turn, short: each message's role, its text's first `chars`
    characters, the calls it made and a tool result's error code (what
    --json keeps, to see why a task failed)."""
    rows: list[dict[str, Any]] = []
    for message in messages:
        metadata = message.get("metadata") or {}
        row: dict[str, Any] = {"role": message.get("role"),
                               "text": _text(message.get("content"))[:chars]}
        if metadata.get("source") == "agentls":
            row["source"] = "agentls"
        if metadata.get("malformed_tool_call"):
            row["malformed"] = True
        calls = metadata.get("tool_calls") or []
        if calls:
            row["calls"] = [{"tool": c.get("tool"),
                             "arguments": json.dumps(c.get("arguments"), default=str)[:chars]}
                            for c in calls]
        outcome = message.get("toolResult") or {}
        if outcome and not outcome.get("success", True):
            row["error"] = str((outcome.get("error") or {}).get("code", ""))
        rows.append(row)
    return rows
