"""The core's approval, display and turn-observer interfaces over ACP.

- `ClientLink`: the connection to the client, what it advertised
  (fs.readTextFile / fs.writeTextFile / terminal) and, per session, the
  tool call in flight (so a question or a write is shown on its call).
- `AcpApprovalChannel`: every question the one ApprovalGate asks becomes
  `session/request_permission`: an option that allows and is remembered
  is `allow_always` ("Allow for session"), one that allows `allow_once`,
  one that refuses `reject_once` (the gate's Deny has the id `reject_once`
  on the wire, as shared/PROTOCOL.md binds it). A protected question (a
  protected or secret path, restricted mode, a workspace trust question)
  never offers `allow_always`. A
  `cancelled` outcome is a dismissal and an option id not offered comes
  back as one no option has: both are a Deny at the gate. A question that
  belongs to no tool call (workspace trust) is shown as its own tool call.
- `AcpDisplayChannel`: a notice as an agent message chunk of the session
  the user is working in.
- `AcpTurnObserver`: one per `session/prompt`: text and reasoning deltas as
  `agent_message_chunk` / `agent_thought_chunk`, the model's tool calls as
  `tool_call` (pending), their prepared need as a `tool_call_update` (kind,
  title, locations), their results as `tool_call_update` (completed or
  failed, with the result text), a running command's output as it arrives
  (`tool_call_update` in_progress). updates.py builds the payloads.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentls.acp import updates
from agentls.core.agent.observer import TurnObserver
from agentls.core.approval.gate import ApprovalRequest, MessageLevel

if TYPE_CHECKING:
    from agentls.core.tools.contract import ToolNeed
    from agentls.core.types.conversation import Message

__all__ = ["UNOFFERED", "AcpApprovalChannel", "AcpDisplayChannel", "AcpTurnObserver",
           "ClientLink"]

log = logging.getLogger("agentls.acp.channels")

# An answer naming no offered option: the gate treats it as Deny.
UNOFFERED = "\0unoffered"


@dataclass
class ClientLink:
    """The ACP client as the channels see it."""

    conn: Any = None  # acp.interfaces.Client (the SDK's AgentSideConnection)
    fs_read: bool = False
    fs_write: bool = False
    terminal: bool = False
    # session id -> the tool call now being cleared or run
    current_calls: dict[str, str] = field(default_factory=dict)
    # The session the user last prompted (notices and trust questions go there).
    last_session: str | None = None
    # session id -> agentls's explanation just sent as the answer (a notice
    # with the same text would only repeat it)
    explained: dict[str, str] = field(default_factory=dict)

    async def update(self, session_id: str, update: Any) -> None:
        """One `session/update`; a client that is gone is logged, not raised."""
        if self.conn is None:
            return
        try:
            await self.conn.session_update(session_id=session_id, update=update)
        except (ConnectionError, OSError) as exc:
            log.info("session/update not delivered: %s", exc)


class AcpApprovalChannel:
    def __init__(self, link: ClientLink, session_for: Callable[[], str | None]) -> None:
        self.link = link
        # The session a question without one (workspace trust) is asked in.
        self.session_for = session_for

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        from acp.schema import AllowedOutcome, ToolCallUpdate

        link = self.link
        sid = request.session_id or self.session_for()
        if link.conn is None or not sid:
            log.info("No ACP session to ask in; the question is dismissed")
            return None
        call_id = link.current_calls.get(sid) if request.session_id else None
        own_call = call_id is None
        if call_id is None:
            call_id = f"agentls-question-{uuid.uuid4().hex[:12]}"
            await link.update(sid, updates.question_call(call_id, request))
        options = updates.permission_options(request)
        # wire id -> the gate's id ("reject_once" is the gate's "deny")
        wire_ids = {o.option_id for o in options}
        offered = {updates.option_wire_id(o.id): o.id for o in request.options
                   if updates.option_wire_id(o.id) in wire_ids}
        allowed: bool | None = None
        try:
            response = await link.conn.request_permission(
                session_id=sid, options=options,
                tool_call=ToolCallUpdate(
                    tool_call_id=call_id,
                    title=updates.question_title(request) if own_call else None,
                    content=[updates.text_content(request.prompt)]))
            outcome = response.outcome
            if not isinstance(outcome, AllowedOutcome):
                return None  # cancelled: the gate denies
            chosen_id = offered.get(outcome.option_id)
            if chosen_id is None:
                return UNOFFERED  # "deny" included: any id not offered denies
            chosen = request.option(chosen_id)
            allowed = chosen is not None and chosen.allows
            return chosen_id
        finally:
            if own_call:
                await link.update(sid, updates.question_done(call_id, allowed))


class AcpDisplayChannel:
    def __init__(self, link: ClientLink) -> None:
        self.link = link

    async def show_message(self, message: str, level: MessageLevel = "info") -> None:
        sid = self.link.last_session
        if sid is None:
            log.log(logging.WARNING if level != "info" else logging.INFO, "%s", message)
            return
        if self.link.explained.pop(sid, None) == message:
            return  # the client already shows it as the turn's answer
        await self.link.update(sid, updates.notice(message, level))


class AcpTurnObserver(TurnObserver):
    """The updates of one prompt turn. `sent_text` tells the front whether
    the model's answer was streamed (a provider that does not stream gets
    its final text sent once)."""

    def __init__(self, link: ClientLink, workspace_root: str | None) -> None:
        self.link = link
        self.root = workspace_root
        self.streamed: set[int] = set()
        self.outputs: dict[str, str] = {}  # tool call id -> its output so far

    async def on_delta(self, session_id: str, index: int, delta: str, kind: str) -> None:
        if not delta:
            return
        self.streamed.add(index)
        await self.link.update(session_id, updates.chunk(delta, thought=kind == "thinking"))

    async def on_message(self, session_id: str, index: int, message: Message) -> None:
        if (message.metadata or {}).get("suppress_output"):
            return
        if message.role == "assistant" and index not in self.streamed:
            for update in updates.assistant_text(message):
                await self.link.update(session_id, update)
            if (message.metadata or {}).get("source") == "agentls":
                self.link.explained[session_id] = message.content
        for update in updates.message_calls(message, self.root):
            await self.link.update(session_id, update)
        if message.role == "tool" and message.tool_call_id is not None:
            if self.link.current_calls.get(session_id) == message.tool_call_id:
                self.link.current_calls.pop(session_id, None)

    async def on_tool_need(self, session_id: str, call_id: str, tool_name: str,
                           need: ToolNeed) -> None:
        if not call_id:
            return
        self.link.current_calls[session_id] = call_id
        await self.link.update(session_id, updates.need_update(call_id, tool_name, need,
                                                              self.root))

    async def on_tool_output(self, session_id: str, call_id: str, text: str) -> None:
        """A running command's output, shown live on its tool call (ACP
        content replaces the call's content: the whole output so far, its
        tail when long)."""
        if not call_id:
            return
        shown = (self.outputs.get(call_id, "") + text)[-updates.RESULT_MAX_CHARS:]
        self.outputs[call_id] = shown
        await self.link.update(session_id, updates.output_update(call_id, shown))

    async def drain(self) -> None:
        """Every update of this turn is on the wire (the SDK sends in order
        and awaits each write, so one yield lets a last one finish)."""
        await asyncio.sleep(0)
