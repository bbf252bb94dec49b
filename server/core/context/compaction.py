"""Compaction: the model summarises the oldest turns of a session.

The mechanics of one summary (the dedicated prompt, the transcript the
model reads, several calls when the history is longer than the window);
when to compact and where to cut is core/context/fitting.py's job. Every original
message stays stored; the summary is a message with metadata.source =
"compaction" and `compacted_through` = how many stored messages (from the
start) it replaces in requests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace

from agentls.core.context.tokens import TokenCounter
from agentls.core.provider.contract import CompletionOptions, Provider
from agentls.core.support.size_caps import head_and_tail
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError

__all__ = [
    "COMPACTION_PROMPT",
    "excerpt",
    "is_compaction",
    "is_prompt",
    "latest_summary",
    "summarise",
    "transcript_line",
    "without_attachments",
]

COMPACTION_PROMPT = """\
You compact the conversation of a coding agent that works in the user's editor, so the \
agent can continue within its limited context window. Write a summary that lets the agent \
carry on without the original messages. Include:
- the user's requests and goals, quoting instructions and constraints that still apply;
- decisions made and why;
- files read, created, changed or deleted (with paths) and what changed in them;
- facts found that matter (names, errors, test and command results);
- what is done, what remains, and the next step.
Leave out greetings and tool output that no longer matters. Plain text, short sections, \
no preamble. Keep it under {words} words."""


def is_compaction(message: Message) -> bool:
    return (message.metadata or {}).get("source") == "compaction"


def is_prompt(message: Message) -> bool:
    """A user's prompt (not a hook's injected context, not a summary)."""
    return message.role == "user" and not (message.metadata or {}).get("source")


def latest_summary(messages: Sequence[Message]) -> tuple[Message | None, int]:
    """The newest stored summary and how many stored messages it replaces."""
    for message in reversed(messages):
        if is_compaction(message):
            through = (message.metadata or {}).get("compacted_through")
            if isinstance(through, int) and 0 < through <= len(messages):
                return message, through
    return None, 0


async def summarise(
    provider: Provider,
    model: str,
    session_id: str,
    previous: str,
    messages: Sequence[Message],
    *,
    window: int,
    input_limit: int,
    counter: TokenCounter,
    factor: float,
) -> tuple[str, int]:
    """The new summary and the model calls it took: the transcript goes
    in pieces that fit, each folded into the summary so far."""
    words = max(150, min(1500, window // 12))
    system = COMPACTION_PROMPT.format(words=words)
    # The summary itself is ~words*1.4 tokens; the answer needs room for it.
    room = input_limit - math.ceil(counter.count(system) * factor) - 200
    lines = [transcript_line(m) for m in messages]
    summary = previous
    calls = 0
    pending = list(lines)
    while pending or calls == 0:
        head = math.ceil(counter.count(summary) * factor)
        chunk: list[str] = []
        used = head
        while pending:
            size = math.ceil(counter.count(pending[0]) * factor) + 2
            if chunk and used + size > room:
                break
            line = pending.pop(0)
            if used + size > room:  # one line alone is too big: its head only
                line = line[: max(200, int((room - used) * 3 / factor))] + " […]"
            chunk.append(line)
            used += size
        prompt = (
            (f"The summary so far:\n<summary>\n{summary}\n</summary>\n\n" if summary else "")
            + "The conversation to summarise"
            + (" (it continues from the summary)" if summary else "")
            + ":\n<conversation>\n" + "\n\n".join(chunk) + "\n</conversation>\n\n"
            + "Write the " + ("updated " if summary else "") + "summary now."
        )
        options = CompletionOptions(model=model or None,
                                    request_id=f"{session_id}:compact:{calls + 1}")
        response = await provider.complete(
            [Message("system", system), Message("user", prompt)], None, options=options
        )
        calls += 1
        text = (response.content or "").strip()
        if not text:
            raise ModelError("The model wrote an empty summary while compacting.",
                             model=model, code="invalid_response")
        # A model that rambles must not fill the window with its summary: at
        # most about a third of the input budget (~3 characters a token).
        limit = max(600, input_limit)
        summary = text if len(text) <= limit else text[:limit] + " […]"
        if not pending:
            break
    return summary, calls


def excerpt(message: Message, chars: int, which: str) -> Message | None:
    """A tool result cut to its head and tail (about `chars` characters)
    with a note; None when it is already that short."""
    text = message.content if isinstance(message.content, str) else \
        json.dumps(message.content, default=str)
    if len(text) <= chars + 200:
        return None
    earlier = " (it belongs to an earlier turn)" if which == "older" else ""
    cut = head_and_tail(text, chars, lambda left_out: (
        f"\n\n[agentls: {left_out:,} of this tool result's {len(text):,} characters are left "
        f"out here to fit the model's context window{earlier}. Run the tool again, on a "
        "narrower range, if you need the rest.]\n\n"
    ), head_share=(2, 3))
    result = message.tool_result or {}
    return replace(
        message,
        content=cut,
        metadata={**(message.metadata or {}), "context_cut": True},
        tool_result={"success": result.get("success", True)} if result else None,
    )


_CLOSE = "\n</file>"  # how features/prompt/mentions.py ends an attached file


def without_attachments(message: Message) -> Message | None:
    """An earlier prompt without the workspace files attached to it (they
    are in the workspace: the model can read them again), or None when it
    has none. The stored message keeps them."""
    if message.role != "user" or not isinstance(message.content, str):
        return None
    paths = (message.metadata or {}).get("mentions") or ()
    text, left_out = message.content, []
    for path in paths:
        start = text.find(f'<file path="{path}"')
        end = text.find(_CLOSE, start) if start >= 0 else -1
        if start < 0 or end < 0 or text.find("/>", start, text.find(">", start) + 1) >= 0:
            continue  # not attached, or attached as an error (no text)
        text = text[:start] + f'<file path="{path}" omitted="true"/>' + text[end + len(_CLOSE):]
        left_out.append(str(path))
    if not left_out:
        return None
    note = (f"\n\n[agentls: the text of {', '.join(left_out)} attached here is left out to fit "
            "the model's context window; read the file again if you need it.]")
    return replace(message, content=text + note,
                   metadata={**(message.metadata or {}), "context_cut": True})


def transcript_line(message: Message) -> str:
    content = message.content if isinstance(message.content, str) else \
        json.dumps(message.content, default=str)
    metadata = message.metadata or {}
    if message.role == "tool":
        name = metadata.get("tool_name") or "tool"
        cut = excerpt(message, 1500, "older")
        body = cut.content if cut is not None else content
        return f"[{name} result]\n{body}"
    if message.role == "assistant":
        parts = [f"Assistant: {content}" if content else "Assistant:"]
        for call in metadata.get("tool_calls") or ():
            if isinstance(call, dict):
                arguments = json.dumps(call.get("arguments"), default=str)
                if len(arguments) > 600:
                    arguments = arguments[:600] + "…"
                parts.append(f"[called {call.get('tool')} {arguments}]")
        return "\n".join(parts)
    if metadata.get("source") == "hook":
        return f"[context added by {metadata.get('hook_name', 'a hook')}]\n{content[:3000]}"
    label = "User" if message.role == "user" else "System"
    return f"{label}: {content}"
