"""One tool call of a turn, and the one place a tool call is approved.

    tool:pre hooks (deny / ask_user / modify the input)
    -> the tool declares its need (ToolExecutor.need: kind, paths, command)
    -> the policies answer (approval.decide); deny stops here, with a notice
    -> the tool prepares what the user is shown (the edit and its diff)
    -> the policies answer again on the prepared need, and the gate clears
       the call (ApprovalGate.clearance: session memory, the question, timeout)
    -> the tool runs with a frozen ToolContext (files checkpointed first)
    -> tool:post hooks -> the result is stored.

Before all that, a call identical to an earlier one of the turn (same tool,
same arguments; repeat_calls.py) is not run: the second gets the first
result back with a note, the third ends the turn (`stop`).

Edits a reply writes (core/editor/reply_edits.py) become calls here too
(`read_reply`), so they are cleared at the same place.

Tools never see a verdict: a call that reaches `tools.execute` was cleared. When
the editor confirms edits itself (annotation mode) the gate's clearance says
so and the tool gets a ConfirmingEditor.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from agentls.core.agent.bundle import AgentBundle
from agentls.core.agent.endings import TurnStop, repeated_call_text
from agentls.core.agent.observer import TurnObserver
from agentls.core.agent.repeat_calls import END_AT, RepeatedCalls
from agentls.core.agent.shown_above import shown_above, slimmed_output
from agentls.core.agent.turn_hooks import HookDispatch
from agentls.core.approval.gate import ApprovalQuestion, ApprovalRequest, Clearance, decide
from agentls.core.checkpoints.files import TurnCheckpoints
from agentls.core.editor.edits import ConfirmingEditor, editor_confirms
from agentls.core.editor.reply_edits import (
    CHECK_ID_PREFIX,
    ReplyEdits,
    ReplySources,
    check_failed_text,
    gave_up_text,
    reply_note,
)
from agentls.core.sessions.statuses import SessionStatuses
from agentls.core.support.size_caps import cap_text, cap_tool_result
from agentls.core.tools.contract import ToolContext, ToolNeed, ToolRefused
from agentls.core.tools.executor import ToolExecution, failed
from agentls.core.types import events
from agentls.core.types.conversation import Message
from agentls.core.types.messages import ToolCall, ToolResult

__all__ = ["ToolCallRunner", "interrupted_message", "tool_message"]

log = logging.getLogger("agentls.orchestrator")


class ToolCallRunner:
    """Runs a turn's tool calls: built by the turn from its agent, with what
    the turn lends it (its hooks, the session's statuses, the observer, the
    caller's context keys, and how to store a message)."""

    def __init__(
        self,
        agent: AgentBundle,
        hooks: HookDispatch,
        *,
        statuses: SessionStatuses,
        observer: TurnObserver,
        context: Mapping[str, Any],
        persist: Callable[[Message], Awaitable[None]],
        messages: Sequence[Message],
    ) -> None:
        self.agent = agent
        self.hooks = hooks
        self.sid = hooks.sid
        self.statuses = statuses
        self.observer = observer
        self.context = context  # the caller's extra tool-context keys
        self.persist = persist
        self.messages = messages  # the turn's final messages so far (the turn appends)
        self.checkpoints: TurnCheckpoints | None = None  # set once the prompt is stored
        self.repeats = RepeatedCalls()  # identical tool calls (repeat_calls.py)
        self.stop: TurnStop | None = None  # set when the turn must end after this call
        self.need_kind: str | None = None  # the ToolNeed kind of the call being cleared
        self.reply_noted = False  # a final reply that did nothing was sent back once
        self.checks_run = 0  # runs of the tests that check a reply's edits (ReplyEdits.checks)
        self.check_ids: set[str] = set()

    async def run(self, call: ToolCall, *, failed_note: Callable[[str], str] | None = None
                  ) -> None:
        """Run one tool call and store its result (`failed_note` rewrites
        what the model reads of a failed one)."""
        asked = call  # as the model wrote it: what identical calls are compared by
        again = self.repeats.count_again(call)
        if again is not None:
            if again.times >= END_AT:
                self.stop = TurnStop("repeated_tool_call",
                                     repeated_call_text(call, again.times, self.messages))
                await self.persist(interrupted_message(
                    call, f"Not run: the same call for the {again.times}th time; the turn was "
                    "stopped.", "repeated",
                    "Error: not run, this exact call was already made twice in this turn. The "
                    "turn was stopped."))
            else:
                await self.persist(tool_message(call, again.result,
                                                again.note(call, _request(self.messages))))
            return
        await self.observer.on_progress(self.sid, f"Running {call.tool}")
        self.need_kind = None
        pre = await self.hooks.hook(
            events.TOOL_PRE,
            {"tool_name": call.tool, "tool_input": dict(call.arguments), "tool_call_id": call.id},
        )
        ran = False
        if not pre.allowed:
            execution = failed(call, pre.reason, "denied")
        else:
            new_input = pre.data.get("tool_input") if pre.data else None
            if isinstance(new_input, dict):
                call = call.model_copy(update={"arguments": new_input})
            execution, ran = await self._clear(call, approved=pre.choice is not None)
        result, content = execution.result, execution.content
        if ran:
            if not result.success:
                await self.hooks.emit(
                    events.TOOL_ERROR,
                    {"tool_name": call.tool, "tool_input": call.arguments, "error": result.error},
                )
            self.hooks.take_tool_post_appends()
            await self.hooks.hook(
                events.TOOL_POST,
                {"tool_name": call.tool, "tool_input": call.arguments, "tool_call_id": call.id,
                 "result": result.model_dump()},
            )
            if appends := self.hooks.take_tool_post_appends():
                content = "\n\n".join([content, *appends])
        self.statuses.add(self.sid, tool_invocations=1, tool_successes=int(result.success),
                          tool_failures=int(not result.success))
        limit = self.agent.limits.max_tool_result_chars
        capped = result.model_copy(update=cap_tool_result(result.model_dump(), limit))
        content = cap_text(content, limit)
        if ran and capped.success and self.need_kind == "read":
            subject = str(call.arguments.get("path") or call.tool)
            note = shown_above(content, subject, self.messages)
            if note is not None:
                content = note
                capped = capped.model_copy(update={"output": slimmed_output(capped.output, note)})
        self.repeats.record(asked, capped, content, self.need_kind)
        if failed_note is not None and ran and not capped.success:
            content = failed_note(content)
        await self.persist(tool_message(call, capped, content))

    async def _clear(self, call: ToolCall, *, approved: bool = False
                     ) -> tuple[ToolExecution, bool]:
        """Ask the policies and the gate about `call` (the one approval call
        site), then run it. Returns the execution and whether the tool ran.
        `approved`: the user said yes to a tool:pre hook's ask_user."""
        agent = self.agent
        tools, policies = agent.tools, agent.hooks.approval_policies
        unknown = tools.unknown(call)
        if unknown is not None:
            return unknown, False
        context = self._tool_context()
        try:
            need = tools.need(call)
            self.need_kind = need.kind
            question = ApprovalQuestion(call.tool, dict(call.arguments), need, self.sid)
            answer = decide(policies, question)
            if answer.notice:
                await self.hooks.notify(answer.notice, "warning")
            if answer.verdict == "deny":
                return failed(call, answer.reason, "denied"), False
            # What the user will be shown, and what will be applied.
            need = await tools.prepare(call, context, need)
        except ToolRefused as refused:
            return failed(call, refused.message, refused.code), False
        question = replace(question, need=need)
        answer = decide(policies, question)
        await self.observer.on_tool_need(self.sid, call.id or "", call.tool, need)

        async def announce(request: ApprovalRequest) -> None:
            await self.hooks.emit(events.APPROVAL_REQUIRED,
                                  {"tool_name": call.tool, "prompt": request.prompt})

        clearance = await agent.gate.clearance(question, answer, approved=approved,
                                           editor_confirms=editor_confirms(context.editor),
                                           before_asking=announce)
        if clearance.asked:
            if clearance.allowed:
                await self.hooks.emit(events.APPROVAL_GRANTED,
                                      {"tool_name": call.tool, "choice": clearance.choice})
            else:
                await self.hooks.emit(events.APPROVAL_DENIED, {"tool_name": call.tool,
                                                               "choice": clearance.choice,
                                                               "reason": clearance.reason})
        if not clearance.allowed:
            message, code = _refusal(need, clearance)
            return failed(call, message, code), False
        editor = context.editor
        if clearance.confirm_in_editor and editor is not None:
            editor = ConfirmingEditor(editor)

        async def output(text: str) -> None:
            await self.observer.on_tool_output(self.sid, call.id or "", text)

        context = replace(context, need=need, editor=editor, output=output)
        if self.checkpoints is not None:  # file edits store the files first
            context = self.checkpoints.wrap(context)
        return await tools.execute(call, context), True

    def _tool_context(self) -> ToolContext:
        """The context a tool runs with: the agent's keys, the caller's
        extra keys, the session and a progress callback."""

        async def progress(text: str) -> None:
            await self.observer.on_progress(self.sid, text)

        return ToolContext.from_mapping(
            {**self.context, **self.agent.tool_context()},
            session_id=self.sid, trigger_source="core", progress=progress)

    # -- edits a final reply writes (core/editor/reply_edits.py) -------------------
    async def read_reply(self, reply: str, seen: Sequence[Message]) -> ReplyEdits | None:
        """The edits a final reply writes, their calls with ids (None
        without a reply editor). `seen`: the session so far. Read in a
        thread: it reads the files the reply and the session name."""
        editor = self.agent.reply_editor
        if editor is None or not reply.strip():
            return None
        keys = self.agent.tool_context()
        sources = ReplySources(
            workspace_folders=tuple(keys.get("workspace_folders") or ()),
            documents=keys.get("documents"),
            seen=tuple(_seen_texts(seen)))
        try:
            edits = await asyncio.to_thread(editor.reply_edits, reply, sources)
        except Exception:  # a broken editor loses the edits, never the reply
            log.exception("Reading the edits of a reply failed")
            return None
        calls = tuple(
            call.model_copy(update={"id": call.id or f"reply_edit_{uuid.uuid4().hex[:12]}"})
            for call in edits.calls)
        return replace(edits, calls=calls)

    def checks(self, edits: ReplyEdits | None) -> list[ToolCall]:
        """The calls that check a reply's edits (its tests), while the turn
        has runs left (`session.testAfterEdits`)."""
        if edits is None or not edits.calls or not edits.checks \
                or self.checks_run >= self.agent.limits.test_after_edits:
            return []
        checks = [call.model_copy(update={"id": f"{CHECK_ID_PREFIX}{uuid.uuid4().hex[:12]}"})
                  for call in edits.checks if self.agent.tools.unknown(call) is None]
        self.checks_run += bool(checks)
        self.check_ids.update(call.id for call in checks if call.id)
        return checks

    async def run_check(self, call: ToolCall, batch: Sequence[ToolCall]) -> None:
        """A check after the reply's edits: run when every edit before it in
        `batch` was applied, else answered "not run"."""
        before = batch.index(call)  # their results are the last messages stored
        results = self.messages[len(self.messages) - before:]
        if not all((m.tool_result or {}).get("success") for m in results):
            await self.persist(interrupted_message(
                call, "Not run: a change before it was not applied.", "skipped",
                "Not run: a change before it was not applied."))
            return
        await self.run(call, failed_note=check_failed_text)

    def reply_retry(self, reply: str, edits: ReplyEdits | None,
                    history: Sequence[Message] = ()) -> Message | None:
        """Once per turn: the note that sends a final reply that did nothing
        (a call written as text, files repeated unchanged, the last reply
        again) back to the model. `history`: the session, the reply last."""
        if self.reply_noted:
            return None
        editor = self.agent.reply_editor
        offered = self.agent.offered_tools(attached_files(self.messages))
        previous = next((m.content for m in reversed(history[:-1])
                         if m.role == "assistant" and isinstance(m.content, str)), "")
        note = reply_note(reply, [spec["name"] for spec in offered], edits,
                          editor.instructions() if editor is not None else "", previous)
        if note is None:
            return None
        self.reply_noted = True
        return Message("system", note, {"source": "agentls", "tool_error": True,
                                        "timestamp": _now()})

    def reply_gave_up(self, reply: str, edits: ReplyEdits | None) -> str | None:
        """After the note: a final reply that again did nothing gets agentls's
        word to the user that nothing changed (else they see an echo)."""
        return gave_up_text(reply, edits) if self.reply_noted else None

    def with_reply_edits(self, message: Message, calls: list[ToolCall]) -> Message:
        """The reply, recorded as making `calls` (every provider then sees a
        call before each result)."""
        previews = {call.id: self.agent.tools.preview(call) for call in calls}
        return message.with_metadata(tool_calls=[call.model_dump() for call in calls],
                                     tool_call_previews=previews,
                                     reply_edits=sum(c.id not in self.check_ids for c in calls),
                                     reply_checks=sum(c.id in self.check_ids for c in calls))

    def reply_edits_settled(self, calls: list[ToolCall]) -> bool:
        """The reply's edits were all applied, none was a read (of a file it
        wrote unseen), and nothing (a linter's findings) waits for the
        model: the reply is the answer."""
        results = [m.tool_result or {} for m in self.messages[-len(calls):]]
        return (all(r.get("success") for r in results)
                and all(call.tool != "read_file" for call in calls)
                and not self.hooks.pending_injections and not self.hooks.ephemeral)


def _seen_texts(messages: Sequence[Message]) -> list[str]:
    """The texts the model has seen: the messages, and the files the
    replies' edits wrote (the model knows what it wrote, merged or not)."""
    texts = [m.content for m in messages if isinstance(m.content, str)]
    for message in messages:
        if message.role != "assistant":
            continue
        for call in (message.metadata or {}).get("tool_calls") or ():
            arguments = call.get("arguments") if isinstance(call, dict) else None
            if isinstance(arguments, dict) and call.get("tool") == "write_file" \
                    and isinstance(arguments.get("content"), str):
                texts.append(arguments["content"])
    return texts


def _refusal(need: ToolNeed, clearance: Clearance) -> tuple[str, str]:
    """What the model is told about a call the gate did not clear."""
    if clearance.code == "denied" or need.kind != "edit":
        return clearance.reason, "denied"
    subject = need.title.removeprefix("agentls: ") or "The change"
    code = "timeout" if clearance.code == "timeout" else "declined"
    if clearance.code == "declined" and clearance.choice:
        return (f"{subject}: The user declined the change ({clearance.choice!r}). Nothing was "
                "written. Do not retry it unchanged; ask the user what they want instead.",
                code)
    return f"{subject}: {clearance.reason} Nothing was written.", code


def tool_message(call: ToolCall, result: ToolResult, content: str) -> Message:
    return Message(
        "tool",
        content,
        {"tool_call_id": call.id, "tool_name": call.tool, "timestamp": _now()},
        tool_result=result.model_dump(),
    )


def interrupted_message(call: ToolCall, message: str, code: str, content: str) -> Message:
    """The synthetic failed result of a call that never finished."""
    return tool_message(call, ToolResult(success=False, error={"message": message, "code": code}),
                        content)


def attached_files(messages: Sequence[Message]) -> tuple[str, ...]:
    """The files attached to this turn's prompt (mentions, named files)."""
    for message in messages:
        if message.role == "user":
            mentions = (message.metadata or {}).get("mentions")
            return tuple(str(m) for m in mentions) if isinstance(mentions, list | tuple) else ()
    return ()


def _request(messages: Sequence[Message]) -> str:
    """The user's request of this turn, as typed (before mentions were expanded)."""
    for message in messages:
        if message.role == "user":
            typed = (message.metadata or {}).get("prompt")
            content = typed if isinstance(typed, str) else message.content
            if isinstance(content, list):  # content parts: keep the text ones
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _now() -> str:
    return datetime.now(UTC).isoformat()
