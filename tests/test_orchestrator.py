"""The turn loop over the scripted provider: text, tools, hooks, approvals,
injections, cancellation, limits, persistence across a restart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentls.core.agent.bundle import TurnLimits
from agentls.core.agent.observer import TurnObserver
from agentls.core.agent.orchestrator import Orchestrator, TurnInProgress
from agentls.core.approval.gate import ApprovalRequest
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.plugins.injections import InjectionLimits
from agentls.core.provider.contract import ProviderConfig
from agentls.core.sessions.store import SessionStore
from agentls.core.tools.contract import ToolNeed
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types import events
from agentls.core.types.conversation import Message, Session
from agentls.core.types.messages import HookResult
from agentls.providers.scripted import ScriptedProvider
from tests.agent_helpers import agent_bundle


class EchoTools:
    """A real ToolPlugin: `echo` returns its text, `boom` raises."""

    name = "echo-tools"
    version = "1.0"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {
                "name": "echo", "description": "Echo text",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}},
            {"name": "boom", "description": "Always fails", "input_schema": {"type": "object"}},
        ]

    def tool_need(self, tool_name: str, arguments: Any, state: dict[str, Any]) -> ToolNeed:
        return ToolNeed("none")  # nothing to approve (a tool that declares nothing asks)

    def execute_tool(self, tool_name: str | None, payload: Any, state: dict[str, Any],
                     **_: Any) -> dict[str, Any]:
        self.calls.append({"tool": tool_name, "payload": payload})
        if tool_name == "boom":
            raise RuntimeError("kaboom")
        return {"success": True, "result": payload.get("text", "")}

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        return f"echoed: {result.get('result')}"


class Recorder(TurnObserver):
    def __init__(self) -> None:
        self.deltas: list[tuple[int, str, str]] = []
        self.messages: list[tuple[int, Message]] = []
        self.progress: list[str] = []

    async def on_delta(self, session_id: str, index: int, delta: str, kind: str) -> None:
        self.deltas.append((index, delta, kind))

    async def on_message(self, session_id: str, index: int, message: Message) -> None:
        self.messages.append((index, message))

    async def on_progress(self, session_id: str, text: str) -> None:
        self.progress.append(text)


class Answering:
    """An approval channel that answers with a fixed choice (or never)."""

    def __init__(self, choice: str | None, *, hang: bool = False) -> None:
        self.choice = choice
        self.hang = hang
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        self.requests.append(request)
        if self.hang:
            await asyncio.Event().wait()
        # A channel answers with the chosen option's id (the user clicked
        # the button with that label).
        return next((o.id for o in request.options if o.label == self.choice), self.choice)


class Display:
    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []

    async def show_message(self, message: str, level: str = "info") -> None:
        self.shown.append((message, level))


def make(script: list[dict[str, Any]], *, sink: SessionStore | None = None,
         **parts: Any) -> tuple[Orchestrator, ScriptedProvider, EchoTools]:
    provider = ScriptedProvider(ProviderConfig(name="scripted", options={"script": script}))
    tools = EchoTools()
    orch = Orchestrator(agent_bundle(provider, tools=ToolExecutor([tools]), **parts), sink=sink)
    return orch, provider, tools


async def test_text_only_turn_streams_and_completes() -> None:
    orch, provider, _ = make([{"text": "Hello there friend", "usage": {"input_tokens": 7,
                                                                      "output_tokens": 3}}])
    observer = Recorder()
    result = await orch.run_turn(Session("s1"), "hi", observer=observer)
    assert result.status == "completed"
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.messages[1].content == "Hello there friend"
    assert "".join(d for _, d, _ in observer.deltas) == "Hello there friend"
    assert {i for i, _, _ in observer.deltas} == {1}  # index of the assistant message
    assert result.usage.total_tokens == 10
    sent = provider.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "agentls" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "hi"}
    assert result.to_wire()["usage"] == {"input_tokens": 7, "output_tokens": 3,
                                         "total_tokens": 10}
    status = orch.status("s1")
    assert status is not None and status.status == "completed"
    assert status.total_input_tokens == 7 and status.total_messages == 2


async def test_one_tool_call_then_answer() -> None:
    orch, provider, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "ping"}, "id": "c1"}]},
        {"text": "done"},
    ])
    result = await orch.run_turn(Session("s1"), "use the tool")
    assert result.status == "completed"
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assistant, tool = result.messages[1], result.messages[2]
    assert assistant.tool_calls == [{"tool": "echo", "arguments": {"text": "ping"}, "id": "c1"}]
    assert tool.tool_call_id == "c1"
    assert tool.content == "echoed: ping"
    assert tool.tool_result == {"success": True, "output": "ping", "error": None}
    assert tools.calls == [{"tool": "echo", "payload": {"text": "ping"}}]
    # the second model call saw the tool result
    assert provider.requests[1]["messages"][-1]["metadata"]["tool_call_id"] == "c1"
    assert provider.requests[0]["tools"] == ["echo", "boom"]
    status = orch.status("s1")
    assert status and status.tool_invocations == 1 and status.tool_successes == 1


async def test_tool_that_raises_becomes_failed_result() -> None:
    orch, _, _ = make([{"tool_calls": [{"name": "boom", "arguments": {}}]}, {"text": "ok"}])
    result = await orch.run_turn(Session("s1"), "x")
    tool = result.messages[2]
    assert tool.tool_result and tool.tool_result["success"] is False
    assert "kaboom" in tool.tool_result["error"]["message"]
    status = orch.status("s1")
    assert status and status.tool_failures == 1


async def test_unknown_tool_is_reported_to_the_model() -> None:
    orch, _, _ = make([{"tool_calls": [{"name": "nope", "arguments": {}}]}, {"text": "ok"}])
    result = await orch.run_turn(Session("s1"), "x")
    assert "Unknown tool 'nope'" in result.messages[2].content


async def test_denied_tool_call_does_not_run() -> None:
    hooks = HookRegistry()

    async def policy(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="deny", reason="echo is not allowed here")

    hooks.register(events.TOOL_PRE, policy, name="policy")
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}, "id": "c1"}]},
        {"text": "understood"},
    ], hooks=hooks)
    result = await orch.run_turn(Session("s1"), "x")
    assert tools.calls == []
    tool = result.messages[2]
    assert tool.tool_result == {"success": False, "output": None,
                                "error": {"message": "echo is not allowed here",
                                          "code": "denied"}}
    assert "echo is not allowed here" in tool.content
    assert result.status == "completed"


@pytest.mark.parametrize("choice,ran", [("Allow once", True), ("Deny", False), (None, False)])
async def test_ask_user_approved_or_denied(choice: str | None, ran: bool) -> None:
    hooks = HookRegistry()

    async def ask(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="ask_user", approval_prompt=f"Run {data['tool_name']}?",
                          approval_options=["Allow once", "Deny"])

    hooks.register(events.TOOL_PRE, ask)
    channel = Answering(choice)
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}, "id": "c1"}]},
        {"text": "ok"},
    ], hooks=hooks, approval=channel)
    result = await orch.run_turn(Session("s1"), "x")
    assert channel.requests[0].prompt == "Run echo?"
    assert [(o.label, o.allows) for o in channel.requests[0].options] == [
        ("Allow once", True), ("Deny", False)]
    assert channel.requests[0].tool_input == {"text": "x"}
    assert bool(tools.calls) is ran
    assert result.messages[2].tool_result["success"] is ran  # type: ignore[index]


async def test_ask_user_times_out_to_default_deny() -> None:
    hooks = HookRegistry()

    async def ask(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="ask_user", approval_timeout=0.05)

    hooks.register(events.TOOL_PRE, ask)
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}, {"text": "ok"},
    ], hooks=hooks, approval=Answering(None, hang=True))
    result = await orch.run_turn(Session("s1"), "x")
    assert tools.calls == []
    assert "did not answer" in result.messages[2].tool_result["error"]["message"]  # type: ignore[index]


async def test_ask_user_without_channel_denies() -> None:
    hooks = HookRegistry()

    async def ask(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="ask_user")

    hooks.register(events.TOOL_PRE, ask)
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}, {"text": "ok"},
    ], hooks=hooks)
    await orch.run_turn(Session("s1"), "x")
    assert tools.calls == []


async def test_modify_rewrites_tool_input() -> None:
    hooks = HookRegistry()

    async def shout(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="modify", data={**data, "tool_input": {"text": "LOUD"}})

    hooks.register(events.TOOL_PRE, shout)
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "quiet"}}]}, {"text": "ok"},
    ], hooks=hooks)
    await orch.run_turn(Session("s1"), "x")
    assert tools.calls == [{"tool": "echo", "payload": {"text": "LOUD"}}]


async def test_inject_context_stored_after_tool_results() -> None:
    hooks = HookRegistry()

    async def linter(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="lint: line 3 E501",
                          user_message="lint found 1 issue", user_message_level="warning")

    hooks.register(events.TOOL_POST, linter, name="linter")
    display = Display()
    orch, provider, _ = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}, "id": "c1"},
                        {"name": "echo", "arguments": {"text": "b"}, "id": "c2"}]},
        {"text": "fixed"},
    ], hooks=hooks, display=display)
    result = await orch.run_turn(Session("s1"), "x")
    roles = [m.role for m in result.messages]
    # Both tool results directly follow the tool_calls message; injections after.
    assert roles == ["user", "assistant", "tool", "tool", "system", "system", "assistant"]
    injected = result.messages[4]
    assert injected.content == "lint: line 3 E501"
    assert injected.metadata == {"source": "hook", "hook_name": "linter",
                                 "event": "tool:post"}
    assert ("lint found 1 issue", "warning") in display.shown
    second_call = provider.requests[1]["messages"]
    assert second_call[-1]["content"] == "lint: line 3 E501"


async def test_inject_context_ephemeral_reaches_next_call_only() -> None:
    hooks = HookRegistry()

    async def todo(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="TODO: step 2",
                          ephemeral=True)

    hooks.register(events.TOOL_POST, todo)
    orch, provider, _ = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
        {"tool_calls": [{"name": "echo", "arguments": {"text": "b"}}]},
        {"text": "done"},
    ], hooks=hooks)
    result = await orch.run_turn(Session("s1"), "x")
    assert all(m.content != "TODO: step 2" for m in result.session.messages)
    assert provider.requests[1]["messages"][-1]["content"] == "TODO: step 2"
    # the third call gets the *new* ephemeral injection from the 2nd tool, once
    third = [m["content"] for m in provider.requests[2]["messages"]]
    assert third.count("TODO: step 2") == 1


async def test_append_to_last_tool_result() -> None:
    hooks = HookRegistry()

    async def note(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="(note)",
                          append_to_last_tool_result=True)

    hooks.register(events.TOOL_POST, note)
    orch, _, _ = make([{"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
                       {"text": "ok"}], hooks=hooks)
    result = await orch.run_turn(Session("s1"), "x")
    assert result.messages[2].content == "echoed: a\n\n(note)"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


async def test_oversized_injection_is_refused_and_user_told() -> None:
    hooks = HookRegistry()

    async def big(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="x" * 200)

    hooks.register(events.TOOL_POST, big, name="big")
    display = Display()
    orch, _provider, _ = make(
        [{"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]}, {"text": "ok"}],
        hooks=hooks, display=display,
        limits=TurnLimits(injection=InjectionLimits(size_limit=100)),
    )
    result = await orch.run_turn(Session("s1"), "x")
    assert all("x" * 200 != m.content for m in result.session.messages)
    assert any("injectionSizeLimit" in text for text, _ in display.shown)
    assert result.status == "completed"


async def test_prompt_submit_deny_and_modify() -> None:
    hooks = HookRegistry()

    async def guard(event: str, data: dict[str, Any]) -> HookResult:
        if "secret" in data["prompt"]:
            return HookResult(action="deny", reason="no secrets")
        return HookResult(action="modify", data={**data, "prompt": data["prompt"].upper()})

    hooks.register(events.PROMPT_SUBMIT, guard)
    orch, provider, _ = make([{"text": "ok"}], hooks=hooks)
    denied = await orch.run_turn(Session("s1"), "tell me the secret")
    assert denied.status == "failed" and denied.error == {"code": "denied",
                                                          "message": "no secrets"}
    assert provider.requests == []
    done = await orch.run_turn(Session("s2"), "hello")
    assert done.messages[0].content == "HELLO"


async def test_cancellation_mid_stream() -> None:
    orch, provider, _ = make([{"chunks": ["partial ", "answer"], "stall": True}])
    observer = Recorder()
    task = asyncio.create_task(orch.run_turn(Session("s1"), "x", observer=observer))
    while len(observer.deltas) < 2:
        await asyncio.sleep(0.01)
    assert orch.cancel("s1") is True
    result = await asyncio.wait_for(task, 5)
    assert result.status == "cancelled"
    assert result.error and result.error["code"] == "cancelled"
    last = result.messages[-1]
    assert last.content == "partial answer" and last.metadata["incomplete"] is True  # type: ignore[index]
    assert provider.active_requests == 0
    assert not orch.is_running("s1")


async def test_cancellation_during_approval_gives_pending_calls_a_result() -> None:
    hooks = HookRegistry()

    async def ask(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="ask_user")

    hooks.register(events.TOOL_PRE, ask)
    channel = Answering(None, hang=True)
    orch, _, tools = make([{"tool_calls": [
        {"name": "echo", "arguments": {"text": "a"}, "id": "c1"},
        {"name": "echo", "arguments": {"text": "b"}, "id": "c2"}]}],
        hooks=hooks, approval=channel)
    task = asyncio.create_task(orch.run_turn(Session("s1"), "x"))
    while not channel.requests:
        await asyncio.sleep(0.01)
    orch.cancel("s1")
    result = await asyncio.wait_for(task, 5)
    assert result.status == "cancelled"
    tool_msgs = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_msgs] == ["c1", "c2"]
    assert all(m.tool_result["error"]["code"] == "cancelled" for m in tool_msgs)  # type: ignore[index]
    assert tools.calls == []


async def test_max_iterations_stops_the_loop() -> None:
    # Different arguments each time: identical calls end a turn sooner
    # (test_agent_loop.py).
    orch, provider, _ = make(
        [{"tool_calls": [{"name": "echo", "arguments": {"text": f"again {i}"}}]}
         for i in range(5)],
        limits=TurnLimits(max_iterations=3),
    )
    result = await orch.run_turn(Session("s1"), "loop forever")
    assert result.status == "failed"
    assert result.error and result.error["code"] == "max_iterations"
    assert len(provider.requests) == 3
    # The last message says so, for the user (never a blank end).
    last = result.messages[-1]
    assert last.role == "assistant" and last.metadata["explanation"] == "max_iterations"
    assert "session.maxIterations = 3" in last.content and "echo x3" in last.content


async def test_model_error_fails_turn_and_keeps_session_valid() -> None:
    orch, _, _ = make([{"error": {"code": "rate_limit", "message": "slow down"}},
                       {"text": "recovered"}])
    failed = await orch.run_turn(Session("s1"), "x")
    assert failed.status == "failed"
    assert failed.error == {"code": "rate_limit", "message": "slow down"}
    again = await orch.run_turn(failed.session, "retry")
    assert again.status == "completed" and again.messages[-1].content == "recovered"


async def test_concurrent_turns_in_one_session_are_refused() -> None:
    orch, _, _ = make([{"text": "slow", "delay": 0.2}, {"text": "x"}])
    first = asyncio.create_task(orch.run_turn(Session("s1"), "a"))
    for _ in range(1000):  # until the first turn has begun
        if orch.is_running("s1"):
            break
        await asyncio.sleep(0)
    with pytest.raises(TurnInProgress):
        await orch.run_turn(Session("s1"), "b")
    assert (await first).status == "completed"


async def test_session_survives_restart(tmp_path: Any) -> None:
    db = tmp_path / "sessions.sqlite3"
    store = SessionStore(db)
    session = store.create_session()
    orch, _, _ = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}, "id": "c1"}]},
        {"text": "first answer"},
    ], sink=store)
    result = await orch.run_turn(session, "first question")
    store.close()

    reopened = SessionStore(db)  # a new process would do exactly this
    loaded = reopened.load(session.session_id)
    assert [m.to_dict() for m in loaded.messages] == [m.to_dict() for m in result.messages]
    status = reopened.get_status(session.session_id)
    assert status.status == "completed" and status.tool_invocations == 1

    orch2, provider2, _ = make([{"text": "second answer"}], sink=reopened)
    second = await orch2.run_turn(loaded, "follow up")
    sent = [m["content"] for m in provider2.requests[0]["messages"]]
    assert "first question" in sent and "first answer" in sent
    assert len(reopened.load(session.session_id).messages) == len(loaded.messages) + 2
    assert second.status == "completed"
    reopened.close()


async def test_hooks_see_lifecycle_events_in_order() -> None:
    hooks = HookRegistry()
    seen: list[str] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        assert data["session_id"] == "s1" and "timestamp" in data
        seen.append(event)
        return HookResult()

    for name in (events.SESSION_START, events.PROMPT_SUBMIT, events.PROVIDER_REQUEST,
                 events.PROVIDER_RESPONSE, events.TOOL_PRE, events.TOOL_POST,
                 events.PROMPT_COMPLETE, events.ORCHESTRATOR_COMPLETE):
        hooks.register(name, record)
    orch, _, _ = make([{"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
                       {"text": "ok"}], hooks=hooks)
    await orch.run_turn(Session("s1"), "x")
    assert seen == ["session:start", "prompt:submit", "provider:request", "provider:response",
                    "tool:pre", "tool:post", "provider:request", "provider:response",
                    "prompt:complete", "orchestrator:complete"]


async def test_hooks_see_content_blocks_thinking_and_notifications() -> None:
    hooks = HookRegistry()
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        seen.append((event, {k: v for k, v in data.items() if k != "timestamp"}))
        return HookResult()

    async def tell(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(user_message="prompt logged", user_message_level="warning")

    for name in (events.CONTENT_BLOCK_START, events.CONTENT_BLOCK_DELTA,
                 events.CONTENT_BLOCK_END, events.THINKING_DELTA, events.USER_NOTIFICATION):
        hooks.register(name, record)
    hooks.register(events.PROMPT_SUBMIT, tell)
    display = Display()
    orch, _, _ = make([{"reasoning": "think", "chunks": ["Hel", "lo"]}], hooks=hooks,
                      display=display)
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "completed"
    assert display.shown == [("prompt logged", "warning")]
    block = {"session_id": "s1", "index": 1}
    assert seen == [
        ("user:notification", {"session_id": "s1", "message": "prompt logged",
                               "level": "warning"}),
        ("content_block:start", {**block, "block_type": "thinking"}),
        ("thinking:delta", {"session_id": "s1", "delta": "think"}),
        ("content_block:end", {**block, "block_type": "thinking", "text": "think"}),
        ("content_block:start", {**block, "block_type": "text"}),
        ("content_block:delta", {"session_id": "s1", "delta": "Hel"}),
        ("content_block:delta", {"session_id": "s1", "delta": "lo"}),
        ("content_block:end", {**block, "block_type": "text", "text": "Hello"}),
    ]


async def test_session_end_is_emitted_once_per_session_the_process_ran() -> None:
    hooks = HookRegistry()
    ended: list[tuple[str, str]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        ended.append((data["session_id"], data["reason"]))
        return HookResult()

    hooks.register(events.SESSION_END, record)
    orch, _, _ = make([{"text": "a"}, {"text": "b"}], hooks=hooks)
    await orch.run_turn(Session("s1"), "x")
    await orch.run_turn(Session("s2"), "y")
    await orch.end_sessions("deleted", ["s2", "never-ran"])
    assert ended == [("s2", "deleted")]
    await orch.end_sessions("shutdown")
    await orch.end_sessions("shutdown")
    assert ended == [("s2", "deleted"), ("s1", "shutdown")]


async def test_suppress_output_is_marked_on_stored_injections() -> None:
    hooks = HookRegistry()

    async def quiet(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="verbose lint log",
                          suppress_output=True)

    hooks.register(events.TOOL_POST, quiet)
    orch, provider, _ = make([{"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
                              {"text": "ok"}], hooks=hooks)
    result = await orch.run_turn(Session("s1"), "x")
    injected = next(m for m in result.messages if m.content == "verbose lint log")
    assert injected.metadata and injected.metadata["suppress_output"] is True
    # the model still gets it
    assert provider.requests[1]["messages"][-1]["content"] == "verbose lint log"


def test_a_status_update_before_the_status_was_loaded_starts_one() -> None:
    # A turn cancelled before it loaded its session's status still finishes:
    # the update starts a status instead of raising KeyError.
    from agentls.core.sessions.statuses import SessionStatuses

    statuses = SessionStatuses()
    ended = statuses.update("never-loaded", status="cancelled")
    assert ended.session_id == "never-loaded" and ended.status == "cancelled"
    assert statuses.add("other", total_messages=2).total_messages == 2
