"""One agent turn: the loop that Orchestrator.run_turn runs (docs/architecture.md,
"The path of a chat turn").

prompt:submit -> request built to fit the window (context.py) -> provider
stream (deltas to the observer) -> tool calls -> tool:pre (deny / ask_user /
modify) -> the tool's need, the approval policy and the gate, once per call
(tool_calls.py) -> tool execution (files checkpointed first) -> tool:post
(inject_context, stored or ephemeral; turn_hooks.py) -> next iteration ->
until the model stops, `session.maxIterations` is reached, or the turn is
cancelled (pending tool calls then get a synthetic cancelled result, so the
session stays valid for every provider).

Every message is persisted the moment it is final, so a crash loses nothing
already said. Split from orchestrator.py, which keeps what spans turns (the
running turns per session, their SessionStatuses, cancellation, compaction
on request). A turn holds the AgentBundle current when it started (so a
settings change never swaps its provider or tools), the TurnServices the
orchestrator lends it, its HookDispatch (turn_hooks.py) and a ToolCallRunner
(tool_calls.py) built from both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from agentls.core.agent.bundle import AgentBundle
from agentls.core.agent.endings import (
    TurnStop,
    empty_reply_text,
    explanation,
    malformed_again_text,
    malformed_messages,
    max_iterations_text,
)
from agentls.core.agent.observer import TurnObserver
from agentls.core.agent.stream_guard import StreamGuard, StreamStop
from agentls.core.agent.tool_calls import ToolCallRunner, attached_files, interrupted_message
from agentls.core.agent.turn_hooks import HookDispatch
from agentls.core.checkpoints.files import TurnCheckpoints
from agentls.core.checkpoints.store import CheckpointStore
from agentls.core.context.fitting import ContextHost, ContextManager, ContextOverflow, RequestPlan
from agentls.core.editor.reply_edits import CHECK_ID_PREFIX
from agentls.core.provider.contract import CompletionOptions
from agentls.core.provider.stream_collect import ToolCallAccumulator
from agentls.core.sessions.statuses import SessionStatuses
from agentls.core.types import events
from agentls.core.types.conversation import Message, Session
from agentls.core.types.errors import MalformedToolCall, ModelError, ProviderRequestCancelled
from agentls.core.types.messages import ModelResponse, SessionStatus, ToolCall, Usage

__all__ = ["MessageSink", "Turn", "TurnResult", "TurnServices", "TurnStatus"]

log = logging.getLogger("agentls.orchestrator")

TurnStatus = Literal["completed", "failed", "cancelled"]


class MessageSink(Protocol):
    """Where final messages go (the SQLite SessionStore satisfies this)."""

    def append_message(self, session_id: str, message: Message) -> int: ...

    def update_status(self, session_id: str, status: SessionStatus) -> None: ...


def _every_notice(session_id: str, notice: str) -> bool:
    return True


@dataclass(frozen=True)
class TurnServices:
    """What a turn uses of the orchestrator running it, beyond its bundle:
    state that outlives the turn, owned by the orchestrator."""

    statuses: SessionStatuses
    # Fits each request to the window; the one current when the turn started.
    context: ContextManager
    sink: MessageSink | None = None
    checkpoints: CheckpointStore | None = None  # None: no checkpoints
    # True the first time a provider notice comes up in a session.
    first_notice: Callable[[str, str], bool] = _every_notice


@dataclass(frozen=True)
class TurnResult:
    session: Session
    status: TurnStatus
    messages: list[Message]
    usage: Usage
    error: dict[str, str] | None = None
    session_status: SessionStatus | None = None

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def to_wire(self) -> dict[str, Any]:
        """The `agentls/chat` result (docs/protocol.md)."""
        wire: dict[str, Any] = {
            "sessionId": self.session_id,
            "status": self.status,
            "messages": [m.to_dict() for m in self.messages],
            "usage": self.usage.model_dump(),
        }
        if self.error is not None:
            wire["error"] = dict(self.error)
        return wire


class Turn:
    """One running turn: its bundle (fixed for the turn's life), what the
    orchestrator lends it, its hook dispatch and its tool-call runner."""

    def __init__(
        self,
        agent: AgentBundle,
        services: TurnServices,
        session: Session,
        observer: TurnObserver,
        context: dict[str, Any],
    ) -> None:
        self.agent = agent
        self.services = services
        self.statuses = services.statuses
        self.session = session
        self.sid = session.session_id
        self.observer = observer
        self.hooks = HookDispatch(agent.hooks, agent.gate, agent.channels.display, self.sid,
                                  agent.limits.injection)
        self.messages: list[Message] = []  # this turn's final messages
        self.usage = Usage()
        self.partial_text = ""  # streamed text of the call in progress
        self.partial_reasoning = ""
        self.block_kind: str | None = None  # the content block being streamed
        self.block_text = ""
        self.unanswered: list[ToolCall] = []  # tool calls still without a result
        self.stream_stop: StreamStop | None = None  # why the last stream was cut short
        self.finished = False
        self.turn_start = len(session.messages)  # index of this turn's prompt
        self.plan: RequestPlan | None = None  # what the last model call was sent
        self.calls = ToolCallRunner(agent, self.hooks, statuses=self.statuses, observer=observer,
                                    context=context, persist=self.persist,
                                    messages=self.messages)
        self.malformed = False  # the last reply was a tool call that could not be read
        self.retry = False  # the next model call answers a failure (CompletionOptions.retry)

    # -- the loop ------------------------------------------------------------
    async def run(self, prompt: str | Message) -> TurnResult:
        agent = self.agent
        status = await self.statuses.load(self.sid)
        self.statuses.update(self.sid, status="running", ended_at=None)
        is_new = not self.session.messages and status.total_messages == 0
        await self.hooks.emit(events.SESSION_START if is_new else events.SESSION_RESUME, {})

        user_message = prompt if isinstance(prompt, Message) else Message("user", prompt)
        outcome = await self.hooks.hook(events.PROMPT_SUBMIT, {"prompt": user_message.content})
        if not outcome.allowed:
            return await self.finish("failed", {"code": "denied", "message": outcome.reason})
        new_prompt = outcome.data.get("prompt") if outcome.data else None
        if isinstance(new_prompt, str) and new_prompt != user_message.content:
            user_message = Message(
                "user", new_prompt, user_message.metadata, user_message.multipart_content
            )
        await self.close_interrupted_tool_calls()
        # "The tests still fail: ..." after a turn whose own test run failed
        # answers that failure as much as a note within the turn does.
        self.retry = _ended_with_failed_check(self.session.messages)
        instructions = self.services.context.prompt_instructions()
        if instructions:  # shown with the prompt in the chat views
            user_message = user_message.with_metadata(instructions=instructions)
        self.turn_start = len(self.session.messages)
        await self.persist(user_message)
        self.calls.checkpoints = TurnCheckpoints.for_prompt(self.services.checkpoints, self.sid,
                                                            self.session.messages)

        for iteration in range(1, agent.limits.max_iterations + 1):
            for injection in await self.hooks.take_injections():
                await self.persist(injection)
                self.retry = True  # a linter's findings on the last edit
            try:
                response = await self.call_model_retrying(iteration)
            except MalformedToolCall as exc:
                if not self.malformed:  # one retry, with a tool error it can correct
                    self.malformed = True
                    self.retry = True
                    await self.answer_malformed(exc)
                    continue
                await self.answer_malformed(exc, note=False)
                return await self.explain_end(
                    "malformed_tool_call", malformed_again_text(exc.reason, self.messages),
                    {"code": "invalid_response", "message": str(exc)})
            except ModelError as exc:
                await self.hooks.emit(events.PROVIDER_ERROR,
                                      {"error": str(exc), "code": exc.code, "iteration": iteration})
                await self.persist_partial({"error": exc.code or "model_error"})
                return await self.finish(
                    "failed", {"code": exc.code or "model_error", "message": str(exc)})
            except ProviderRequestCancelled:
                raise asyncio.CancelledError from None
            self.usage = self.usage + response.usage
            await self.hooks.emit(
                events.PROVIDER_RESPONSE,
                {
                    "iteration": iteration,
                    "finish_reason": response.finish_reason,
                    "usage": response.usage.model_dump(),
                    "tool_calls": len(response.tool_calls),
                },
            )
            self.malformed = False
            message = self.assistant_message(response)
            if not response.tool_calls and not response.content.strip():
                # Never a blank answer: say what happened instead.
                text = empty_reply_text(self.messages)
                await self.persist(explanation("empty_reply", text, message.metadata))
                await self.hooks.notify(text, "warning")
                return await self.finish("failed", {"code": "empty_reply", "message": text})
            edits = None if response.tool_calls else await self.calls.read_reply(
                response.content, self.session.messages)
            calls = response.tool_calls or [*(edits.calls if edits else ()),
                                             *self.calls.checks(edits)]
            if calls and not response.tool_calls:  # edits the reply wrote (reply_edits.py)
                message = self.calls.with_reply_edits(message, calls)
            await self.persist(message)
            if not calls and (retry := self.calls.reply_retry(response.content, edits,
                                                              self.session.messages)):
                await self.persist(retry)
                self.retry = True
                continue
            if not calls:
                if (gave_up := self.calls.reply_gave_up(response.content, edits)) is not None:
                    await self.persist(explanation("reply_did_nothing", gave_up))
                return await self.finish("completed", None)
            self.unanswered = list(calls)
            while self.unanswered:
                call = self.unanswered[0]
                if call.id in self.calls.check_ids:
                    await self.calls.run_check(call, calls)
                else:
                    await self.calls.run(call)
                self.unanswered.pop(0)
                if self.calls.stop is not None:
                    return await self.stop_after_tool(self.calls.stop)
            self.retry = any(not (m.tool_result or {}).get("success", True)
                             for m in self.messages[-len(calls):])
            if not response.tool_calls and self.calls.reply_edits_settled(calls):
                return await self.finish("completed", None)

        limit = agent.limits.max_iterations
        return await self.explain_end("max_iterations", max_iterations_text(limit, self.messages), {
            "code": "max_iterations",
            "message": f"Stopped after {limit} model calls (session.maxIterations = {limit}). "
            "Ask the agent to continue, or raise the limit."})

    async def explain_end(self, code: str, text: str, error: dict[str, str]) -> TurnResult:
        """End the turn as failed with agentls's explanation as its last message."""
        await self.persist(explanation(code, text))
        return await self.finish("failed", error)

    async def stop_after_tool(self, stop: TurnStop) -> TurnResult:
        """A tool call ended the turn: the calls after it get a result saying
        they did not run (the session stays valid for every provider)."""
        for call in self.unanswered:
            await self.persist(interrupted_message(
                call, "Not run: the turn was stopped before this call.", "stopped",
                "Error: not run, the turn was stopped before this call."))
        self.unanswered = []
        await self.hooks.notify(stop.message, "warning")
        return await self.explain_end(stop.code, stop.message,
                                      {"code": stop.code, "message": stop.message})

    async def answer_malformed(self, exc: MalformedToolCall, *, note: bool = True) -> None:
        """Keep what the model wrote (it sees its mistake) and, with `note`,
        tell it why the call was not run, right after it."""
        await self.switch_block(None, len(self.session.messages), "")
        text, self.partial_text = self.partial_text + exc.text, ""
        await self.hooks.emit(events.PROVIDER_ERROR, {"error": str(exc), "code": exc.code,
                                                      "retrying": note})
        for message in malformed_messages(text, exc.reason, exc.model, note=note):
            await self.persist(message)

    async def call_model_retrying(self, iteration: int) -> ModelResponse:
        """call_model; a provider context_length error compacts and retries once."""
        try:
            return await self.call_model(iteration)
        except ModelError as exc:
            if (exc.code != "context_length" or isinstance(exc, ContextOverflow)
                    or self.partial_text or self.plan is None):
                raise
            self.services.context.learn(self.agent.model_name(), exc, self.sid,
                                        self.plan.budget.window)
            await self.hooks.emit(events.PROVIDER_ERROR,
                                  {"error": str(exc), "code": exc.code, "iteration": iteration,
                                   "retrying": True})
        try:
            return await self.call_model(iteration, force_compact=True)
        except ModelError as exc:
            if exc.code == "context_length" and not isinstance(exc, ContextOverflow):
                raise ModelError(
                    f"{exc} The request was compacted and retried once and still did not fit. "
                    "Start a new session, or set contextWindow to the model's real window.",
                    model=exc.model, code=exc.code,
                ) from exc
            raise

    def context_host(self) -> ContextHost:
        async def veto(event: str, data: dict[str, Any]) -> str | None:
            outcome = await self.hooks.hook(event, data)
            return None if outcome.allowed else outcome.reason

        async def progress(text: str) -> None:
            await self.observer.on_progress(self.sid, text)

        return ContextHost(self.sid, lambda: self.session.messages, veto, self.hooks.emit,
                           self.persist, progress)

    async def call_model(self, iteration: int, *, force_compact: bool = False) -> ModelResponse:
        agent = self.agent
        model = agent.model_name()
        attached = attached_files(self.session.messages[self.turn_start:])
        offered = agent.offered_tools(attached)
        self.plan = await self.services.context.prepare(
            self.context_host(), provider=agent.provider, model=model,
            system=agent.system_text(attached), ephemeral=self.hooks.ephemeral, tools=offered,
            turn_start=self.turn_start, output_cap=agent.output_cap or agent.max_tokens,
            force_compact=force_compact,
        )
        messages = self.plan.messages
        sent_ephemeral = list(self.hooks.ephemeral)
        await self.hooks.emit(
            events.PROVIDER_REQUEST,
            {"iteration": iteration, "model": model, "message_count": len(messages)},
        )
        await self.observer.on_progress(self.sid, "Calling model")
        options = CompletionOptions(
            model=agent.model, max_tokens=agent.max_tokens, request_id=f"{self.sid}:{iteration}",
            retry=self.retry,
        )
        self.retry = False
        index = len(self.session.messages)
        self.partial_text = ""
        self.partial_reasoning = ""
        calls = ToolCallAccumulator()
        usage = Usage()
        finish = None
        want_delta_hooks = self.hooks.has_handlers(events.CONTENT_BLOCK_DELTA)
        guard = StreamGuard(agent.output_cap or agent.max_tokens)
        stop: StreamStop | None = None
        stream = agent.provider.stream(messages, offered or None, options=options)
        async for chunk in stream:
            if chunk.notice and self.services.first_notice(self.sid, chunk.notice):
                await self.hooks.notify(chunk.notice, "warning")
            if chunk.reasoning:
                self.partial_reasoning += chunk.reasoning
                await self.switch_block("thinking", index, chunk.reasoning)
                await self.observer.on_delta(self.sid, index, chunk.reasoning, "thinking")
                await self.hooks.emit(events.THINKING_DELTA, {"delta": chunk.reasoning})
            if chunk.delta:
                self.partial_text += chunk.delta
                await self.switch_block("text", index, chunk.delta)
                await self.observer.on_delta(self.sid, index, chunk.delta, "text")
                if want_delta_hooks:
                    await self.hooks.emit(events.CONTENT_BLOCK_DELTA, {"delta": chunk.delta})
            calls.add(chunk)
            if chunk.usage.total_tokens or chunk.usage.input_tokens or chunk.usage.output_tokens:
                usage = chunk.usage
            if finish is None and chunk.finish_reason is None:  # the model has not ended it
                stop = guard.feed(
                    chunk.delta + chunk.reasoning,
                    other_chars=sum(len(d.arguments) for d in chunk.tool_call_deltas),
                    reported_output_tokens=chunk.usage.output_tokens,
                )
                if stop is not None:
                    break
            if chunk.finish_reason is not None:
                finish = chunk.finish_reason
        await self.switch_block(None, index, "")
        self.hooks.drop_ephemeral(sent_ephemeral)
        if usage.input_tokens:
            self.services.context.calibrate(self.sid, usage.input_tokens,
                                   self.services.context.counter(agent.provider, model).name)
        if stop is not None:
            # Closing the generator cancels the provider's HTTP call.
            await _close_stream(stream)
            finish = stop.finish_reason
            self.stream_stop = stop
            await self.hooks.notify(stop.message, "warning")
        # A reply cut short may end inside a tool call's arguments: run none.
        tool_calls = calls.tool_calls(model=model) if stop is None else []
        if self.partial_reasoning:
            await self.hooks.emit(events.THINKING_FINAL, {"text": self.partial_reasoning})
        return ModelResponse(
            model=model,
            content=self.partial_text,
            tool_calls=tool_calls,
            usage=usage,
            finish_reason=finish or ("tool_calls" if tool_calls else "stop"),
            reasoning_content=self.partial_reasoning,
        )

    async def switch_block(self, kind: str | None, index: int, text: str) -> None:
        """Keep the content block of `kind` open ("text", "thinking"; None at
        the end of the stream) with `text` added: content_block:end for the
        block before it, content_block:start for a new one."""
        if kind != self.block_kind:
            if self.block_kind is not None:
                await self.hooks.emit(events.CONTENT_BLOCK_END, {
                    "index": index, "block_type": self.block_kind, "text": self.block_text})
            self.block_kind, self.block_text = kind, ""
            if kind is not None:
                await self.hooks.emit(events.CONTENT_BLOCK_START,
                                      {"index": index, "block_type": kind})
        self.block_text += text

    def assistant_message(self, response: ModelResponse) -> Message:
        metadata: dict[str, Any] = {
            "finish_reason": response.finish_reason,
            "model": response.model,
            "usage": response.usage.model_dump(),
            "timestamp": _now(),
        }
        if response.tool_calls:
            metadata["tool_calls"] = [tc.model_dump() for tc in response.tool_calls]
            previews = {tc.id: self.agent.tools.preview(tc) for tc in response.tool_calls}
            if any(previews.values()):
                metadata["tool_call_previews"] = previews
        if response.reasoning_content:
            metadata["reasoning"] = response.reasoning_content
        if self.plan is not None and self.plan.instruction_files:
            metadata["instructions"] = list(self.plan.instruction_files)
        if self.stream_stop is not None:
            metadata["stopped"] = {
                "reason": self.stream_stop.reason, "message": self.stream_stop.message
            }
            self.stream_stop = None
        self.partial_text = ""
        self.partial_reasoning = ""
        return Message("assistant", response.content, metadata)

    # -- persistence -------------------------------------------------------------
    async def persist(self, message: Message) -> None:
        index = len(self.session.messages)
        self.session = self.session.with_message(message)
        self.messages.append(message)
        self.statuses.add(self.sid, total_messages=1)
        sink = self.services.sink
        if sink is not None:
            # Shielded: a cancellation must not abandon a half-written message.
            await asyncio.shield(asyncio.to_thread(sink.append_message, self.sid, message))
        await self.observer.on_message(self.sid, index, message)

    async def persist_partial(self, extra: dict[str, Any]) -> None:
        """Keep text the user already saw stream in, marked incomplete."""
        if self.partial_text:
            metadata = {"incomplete": True, "timestamp": _now(), **extra}
            text, self.partial_text = self.partial_text, ""
            await self.persist(Message("assistant", text, metadata))

    async def close_interrupted_tool_calls(self) -> None:
        """Give tool calls that a dead server left unanswered a failed result.

        When the process is killed while a tool runs or an approval is
        pending, the session ends with an assistant message whose tool calls
        have no result, and OpenAI and Anthropic reject every later request
        of that session. Like a cancellation (finish_cancelled), each such
        call gets a synthetic result, stored before anything new."""
        messages = self.session.messages
        answered: set[Any] = set()
        for message in reversed(messages):
            if message.role == "tool":
                answered.add((message.metadata or {}).get("tool_call_id"))
                continue
            calls = (message.metadata or {}).get("tool_calls") if message.role == "assistant" \
                else None
            if not calls:
                return  # only the trailing tool round can be cut short
            for raw in calls:
                try:
                    call = ToolCall.model_validate(raw)
                except ValueError:  # not ours to repair
                    continue
                if call.id in answered:
                    continue
                await self.persist(interrupted_message(
                    call, "The agent stopped (the language server exited) before this tool "
                    "call finished; it may not have run.", "interrupted",
                    "Error: interrupted before this tool call finished; it may not have run."))
            return

    async def finish_cancelled(self) -> TurnResult:
        if self.finished:
            return self._result("cancelled", None)
        await self.hooks.emit(events.CANCEL_REQUESTED, {})
        await self.persist_partial({"cancelled": True})
        for call in self.unanswered:
            await self.persist(interrupted_message(
                call, "Cancelled by the user before this tool call finished.", "cancelled",
                "Error: cancelled by the user."))
        self.unanswered = []
        await self.hooks.emit(events.CANCEL_COMPLETED, {})
        return await self.finish(
            "cancelled", {"code": "cancelled", "message": "The turn was cancelled."}
        )

    async def finish(self, status: TurnStatus, error: dict[str, str] | None) -> TurnResult:
        sink = self.services.sink
        self.statuses.update(self.sid, status=status, ended_at=datetime.now(UTC))
        saved = self.statuses.add(self.sid, total_input_tokens=self.usage.input_tokens,
                                  total_output_tokens=self.usage.output_tokens)
        self.finished = True
        if sink is not None:
            try:
                await asyncio.shield(asyncio.to_thread(sink.update_status, self.sid, saved))
            except Exception:
                log.exception("Could not save the status of session %s", self.sid)
        if status == "completed":
            await self.hooks.emit(events.PROMPT_COMPLETE, {"usage": self.usage.model_dump()})
        await self.hooks.emit(events.ORCHESTRATOR_COMPLETE,
                              {"status": status, "usage": self.usage.model_dump()})
        return self._result(status, error)

    def _result(self, status: TurnStatus, error: dict[str, str] | None) -> TurnResult:
        return TurnResult(self.session, status, list(self.messages), self.usage, error,
                          self.statuses.get(self.sid))


def _ended_with_failed_check(messages: list[Message]) -> bool:
    """Whether the last turn ran the tests of its edits and they failed."""
    for message in reversed(messages):
        if message.role == "user":
            return False
        if message.role == "tool" and (message.tool_call_id or "").startswith(CHECK_ID_PREFIX):
            return not (message.tool_result or {}).get("success", True)
    return False


async def _close_stream(stream: Any) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # the stream is abandoned either way
        log.debug("Closing a stopped model stream failed", exc_info=True)


def _now() -> str:
    return datetime.now(UTC).isoformat()
