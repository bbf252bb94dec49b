"""Edits a model writes in its reply instead of in tool calls.

Small local models write code well in prose and badly inside a tool call's
JSON string (bench/HISTORY.md, "Agent tasks: edits written in the reply";
Aider's "whole" edit format exists for the same reason). With a
`ReplyEditor` in the agent (AgentBundle.reply_editor, chosen by
`session.editFormat`), the model is told to write a changed file whole in
its reply, the file tools it would fumble are not offered to it, and a
final reply's file blocks become file-tool calls that the turn runs
through the one approval call site like any other call (turn_tools.py): the
user approves each file, the checkpoints and linters see a normal edit.

The contract is typed here (core); the mechanism that reads blocks and
merges them into files is a feature (features/reply_edits/feature.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentls.core.types.messages import ToolCall

__all__ = [
    "CHECK_ID_PREFIX",
    "ReplyEditor",
    "ReplyEdits",
    "ReplySources",
    "check_failed_text",
    "gave_up_text",
    "reply_note",
    "resolved_edit_format",
    "without_written_calls",
    "written_call",
]


# The ids of the checks' calls (ReplyEdits.checks) once the turn runs them.
CHECK_ID_PREFIX = "reply_check_"


def resolved_edit_format(chosen: str, provider: str) -> str:
    """`session.editFormat` as it applies: "auto" is "file-blocks" for the
    embedded `local` provider (small models on the user's CPU), else
    "tool-calls"."""
    if chosen == "auto":
        return "file-blocks" if provider == "local" else "tool-calls"
    return chosen


@dataclass(frozen=True)
class ReplySources:
    """What a ReplyEditor may read: the workspace folders, the open
    buffers' texts, and this turn's texts (the prompt with its attached
    files, the tool results), where the files the reply changes were seen."""

    workspace_folders: tuple[str, ...]
    documents: Callable[[Path], str | None] | None
    seen: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplyEdits:
    """What a reply writes: the calls that make its changes, and the files
    it wrote out unchanged (an echo, not an edit: the small models repeat
    a file they were shown instead of answering)."""

    calls: tuple[ToolCall, ...] = ()
    unchanged: tuple[str, ...] = ()
    words: bool = True  # the reply has text besides its file blocks
    # A reply that "calls" a function of the code as a tool: name -> the
    # file that defines it (what to write instead).
    defined_in: tuple[tuple[str, str], ...] = ()
    # Files the reply's words say it changes while it changed none of them
    # (the 1.5B said "Change the content of x.py to ..." and stopped there).
    announced: tuple[str, ...] = ()
    # Commands that check the changes (the tests that cover the changed
    # files), run after them through the gate; a failure goes back to the
    # model (`check_failed_text`).
    checks: tuple[ToolCall, ...] = ()


@runtime_checkable
class ReplyEditor(Protocol):
    """Reads file edits out of a final reply (a feature plugin offers it)."""

    def instructions(self) -> str:
        """Added to the system prompt: how to write a change in a reply."""
        ...

    def hidden_tools(self) -> frozenset[str]:
        """Tools kept from the model (still run for the reply's edits)."""
        ...

    def offers_tools(self, attached: Sequence[str]) -> bool:
        """Whether the model is offered tools at all in a turn whose prompt
        carries these attached files (their workspace paths)."""
        ...

    def reply_edits(self, reply: str, sources: ReplySources) -> ReplyEdits:
        """The tool calls that make the changes `reply` writes (none: no
        change), and the files it only repeated."""
        ...


_FENCED = re.compile(r"^```[\w-]*\s*\n(.*?)\n?```\s*$", re.S)


def written_call(text: str) -> str | None:
    """The tool name of a reply that is only a tool call written as JSON
    text (`{"name": ..., "arguments": {...}}`, fenced or not), else None."""
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return _called(value, ("name",))


def without_written_calls(prose: str) -> str:
    """`prose` less the tool calls written in it as JSON text (`"name"` or
    `"tool"` and its arguments): the 1.5B, after failing tests, wrote a file
    back unchanged followed by `{"tool": "write_file", "arguments": {...}}`,
    which says nothing to the user."""
    decoder = json.JSONDecoder()
    kept, start = [], 0
    for found in re.finditer(r"(?m)^[ \t]*\{", prose):
        at = found.end() - 1
        if at < start:
            continue
        try:
            value, end = decoder.raw_decode(prose, at)
        except ValueError:
            continue
        if _called(value, ("name", "tool")) is not None:
            kept.append(prose[start:at])
            start = end
    kept.append(prose[start:])
    return "".join(kept)


def _called(value: object, keys: Sequence[str]) -> str | None:
    """The tool a JSON value written as a call names (under the first of
    `keys` it has), when it has its arguments object; else None."""
    if not isinstance(value, dict):
        return None
    name = next((value[key] for key in keys if key in value), None)
    arguments = value.get("arguments", value.get("parameters"))
    return name if isinstance(name, str) and isinstance(arguments, dict) else None


def reply_note(reply: str, offered: Sequence[str], edits: ReplyEdits | None,
               hint: str = "", previous: str = "") -> str | None:
    """What the model is told, once per turn, about a final reply that did
    nothing: a tool call written as text (never run), files repeated
    unchanged with no answer, or the last reply (`previous`) again word for
    word with its files unchanged. None when the reply stands."""
    tools = ", ".join(offered) or "none"
    named = written_call(reply)
    if named is not None:
        where = dict(edits.defined_in) if edits is not None else {}
        if named not in offered and named in where:
            path = where[named]
            return (f"Error: your reply was a JSON call of {named!r}; that is a function in "
                    f"{path}, not a tool, so nothing ran. To write or change {named}, reply "
                    f'with the whole new {path} as <file path="{path}">...</file>.')
        what = ("is not a tool" if named not in offered
                else "is a tool, but a call written as text is not run")
        return (f"Error: your reply was a JSON call of {named!r}, which {what}; nothing ran. "
                f"The tools you can call: {tools}. {hint} Otherwise answer the user's request "
                "in words.").replace("  ", " ")
    if echoed := _echoed(edits):
        return (f"Note from agentls: your reply repeated {', '.join(echoed)} without changing "
                "anything. Answer the user's request in words, or write the file again with "
                "the change made.")
    if edits is not None and edits.unchanged and not edits.calls \
            and previous.strip() == reply.strip():
        # Greedy decoding answers "the tests still fail" with the reply that
        # failed (the 1.5B on Exercism's second tries); the note is new text,
        # and its call samples (docs/local-model.md, file-blocks).
        first = edits.unchanged[0]
        return (f"Note from agentls: this reply is your previous one word for word, and "
                f"{', '.join(edits.unchanged)} is unchanged by it: the fix it describes was "
                "already made and did not work (the message before it says what still fails). "
                f'Write the complete {first} again as <file path="{first}">...</file> with a '
                "different fix, or say in words why it needs none.")
    if edits is not None and edits.announced and not edits.calls:
        files = ", ".join(edits.announced)
        first = edits.announced[0]
        return (f"Note from agentls: your reply says it changes {files}, but it holds no "
                "changed copy, so nothing changed. If the request needs the change, write "
                f'the complete new {first} now as <file path="{first}">...</file> with the '
                "change made. If it needs no change, say so in words.")
    return None


def gave_up_text(reply: str, edits: ReplyEdits | None) -> str | None:
    """What the user is told when a reply did nothing again after the note
    (reply_note): no file changed. None when the reply stands."""
    from agentls.core.agent.endings import ADVICE  # imports pydantic: not when features load

    if written_call(reply) is not None:
        what = "wrote a tool call as text, which is not run"
    elif echoed := _echoed(edits):
        what = f"repeated {', '.join(echoed)} unchanged"
    else:
        return None
    return f"The model {what}, twice; no file was changed. {ADVICE}"


def _echoed(edits: ReplyEdits | None) -> tuple[str, ...]:
    """The files a reply repeated unchanged, when that is all it did (no
    change, no words)."""
    if edits is None or edits.calls or edits.words:
        return ()
    return edits.unchanged


def check_failed_text(content: str) -> str:
    """The result of a failed check, as the model reads it: what ran, and
    what to do (the code is fixed, not the tests)."""
    return ("agentls ran the tests that cover the files you changed, and they fail:\n\n"
            f"{content}\n\nFix the code, not the tests: say in one sentence what was wrong, "
            "then write each file you change whole again.")
