"""The context budget (core/context/fitting.py) through the real turn loop, with a
scripted provider that reports a small window and records every request.

Covered: 50 turns of large tool results never produce a request over the
window, tool-call/tool-result pairs are never split, the newest prompt and
the current turn's results are sent whole, the stored session keeps every
original message; a provider context_length error compacts and retries
once; a failed or vetoed compaction stores nothing; a resumed session uses
the stored summary; manual compaction; parsing of context-length errors.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.context.compaction import COMPACTION_PROMPT, is_compaction
from agentls.core.context.fitting import MESSAGE_OVERHEAD_TOKENS
from agentls.core.context.tokens import estimate_tokens
from agentls.core.context.window_size import Budget, learned_window
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.provider.contract import CompletionOptions, ProviderConfig, ToolSpec
from agentls.core.sessions.store import SessionStore
from agentls.core.tools.contract import ToolNeed
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types import events
from agentls.core.types.conversation import Message, Session
from agentls.core.types.errors import ModelError
from agentls.core.types.messages import HookResult, StreamChunk
from agentls.providers.scripted import ScriptedProvider
from tests.agent_helpers import agent_bundle

WINDOW = 4096
SUMMARY_MARK = "You compact the conversation"


class BigTools:
    """`fetch` returns `size` characters that name the call, so a test can
    tell a whole result from an excerpt."""

    name = "big-tools"
    version = "1.0"

    def __init__(self, size: int = 6000) -> None:
        self.size = size

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"name": "fetch", "description": "Fetch a document",
                 "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}]

    def tool_need(self, tool_name: str, arguments: Any, state: dict[str, Any]) -> ToolNeed:
        return ToolNeed("none")  # reads nothing of the user's (a tool declaring nothing asks)

    def execute_tool(self, tool_name: str | None, payload: Any, state: dict[str, Any],
                     **_: Any) -> dict[str, Any]:
        return {"success": True, "result": full_result(int(payload.get("n", 0)), self.size)}

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        return str(result.get("result"))


def full_result(n: int, size: int) -> str:
    line = f"document {n} line with some words in it. "
    return (line * (size // len(line) + 1))[:size]


class AgentModel(ScriptedProvider):
    """Answers by looking at the request: a prompt gets a `fetch` tool call,
    a tool result gets a short answer, a compaction request gets a summary.
    Every request is recorded; `reject_over` makes it answer requests over
    that many (estimated) tokens with a context_length error, as a server
    with a smaller window than agentls assumed would."""

    def __init__(self, window: int = WINDOW, reject_over: int | None = None,
                 fail_summary: bool = False, vague: bool = False) -> None:
        super().__init__(ProviderConfig(name="scripted", options={"contextWindow": window}))
        self.calls: list[list[Message]] = []
        self.reject_over = reject_over
        self.fail_summary = fail_summary
        self.rejected = 0
        self.vague = vague  # a context-length error that names no numbers

    def _stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None,
                options: CompletionOptions) -> AsyncIterator[StreamChunk]:
        self.calls.append(list(messages))
        return self._answer(list(messages), tools)

    async def _answer(self, messages: list[Message], tools: Sequence[ToolSpec] | None
                      ) -> AsyncIterator[StreamChunk]:
        if self.reject_over is not None and request_tokens(messages, tools) > self.reject_over:
            self.rejected += 1
            if self.vague:
                raise ModelError("input too long for the model", code="context_length")
            raise ModelError(
                f"This model's maximum context length is {self.reject_over} tokens. However, "
                f"your messages resulted in {request_tokens(messages, tools)} tokens. Please "
                "reduce the length of the messages.", code="context_length")
        if messages[0].content.startswith(SUMMARY_MARK):
            if self.fail_summary:
                raise ModelError("The server had an error while summarising", code="server_error")
            prompt = messages[-1].content
            turns = prompt.count("User: ")
            yield StreamChunk(delta=f"Summary: the user asked for documents ({turns} prompts).",
                              finish_reason="stop")
            return
        last = messages[-1]
        if last.role == "user":
            n = int(last.content.rsplit(" ", 1)[-1])
            from agentls.core.types.messages import ToolCallDelta

            yield StreamChunk(tool_call_deltas=[ToolCallDelta(
                index=0, id=f"call_{n}", name="fetch", arguments=json.dumps({"n": n}))],
                finish_reason="tool_calls")
            return
        yield StreamChunk(delta="Read it.", finish_reason="stop")


def request_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> int:
    """An independent count of a request: the estimate over each message's
    content and tool calls, plus the tool schemas."""
    total = 0
    for m in messages:
        total += estimate_tokens(m.content if isinstance(m.content, str) else json.dumps(m.content))
        total += MESSAGE_OVERHEAD_TOKENS
        if m.tool_calls:
            total += estimate_tokens(json.dumps(m.tool_calls))
    if tools:
        total += estimate_tokens(json.dumps(list(tools)))
    return total


def make(provider: AgentModel, store: SessionStore | None = None,
         hooks: HookRegistry | None = None, size: int = 6000) -> Orchestrator:
    return Orchestrator(agent_bundle(provider, tools=ToolExecutor([BigTools(size)]), hooks=hooks,
                                     system_prompt="You are a test agent."), sink=store)


def check_request(messages: list[Message], prompt: str, budget: Budget,
                  tools: Sequence[ToolSpec] | None, size: int = 6000) -> None:
    assert messages[0].role == "system"
    assert request_tokens(messages, tools) <= budget.window - budget.output_reserve
    # pairs: every result answers a call sent before it, every call is answered
    open_calls: set[str] = set()
    for m in messages[1:]:
        if m.role == "tool":
            assert m.tool_call_id in open_calls, "a tool result without its call"
            open_calls.discard(m.tool_call_id)
        else:
            assert not open_calls, "a tool call without its result"
        if m.role == "assistant":
            open_calls = {c["id"] for c in m.tool_calls}
    assert not open_calls
    # the newest prompt, whole, and everything after it whole
    prompts = [i for i, m in enumerate(messages) if m.role == "user"
               and not (m.metadata or {}).get("source")]
    newest = prompts[-1]
    assert messages[newest].content == prompt
    for m in messages[newest:]:
        assert not (m.metadata or {}).get("context_cut")
        if m.role == "tool":
            assert m.content == full_result(int(m.tool_call_id.split("_")[1]), len(m.content))
            assert len(m.content) == size


@pytest.mark.parametrize("size", [3000, 6000])
async def test_fifty_turns_of_large_tool_results_always_fit(tmp_path: Any, size: int) -> None:
    # 3000 characters is a quarter of the input budget; 6000 half of it.
    provider = AgentModel()
    store = SessionStore(tmp_path / "s.db")
    core = make(provider, store, size=size)
    session = store.create_session()
    tools = core.agent.tools.specs
    budget = Budget.for_window(WINDOW, None)
    for turn in range(1, 51):
        before = len(provider.calls)
        prompt = f"Fetch document {turn}"
        result = await core.run_turn(session, prompt)
        assert result.status == "completed", result.error
        session = result.session
        for request in provider.calls[before:]:
            if request[0].content.startswith(SUMMARY_MARK):
                assert request_tokens(request, None) <= budget.window - budget.output_reserve
                continue
            check_request(request, prompt, budget, tools, size)
    summaries = [m for m in session.messages if is_compaction(m)]
    assert summaries, "50 turns of 6000-character results must have compacted"
    # The stored session keeps every original message, whole.
    stored = store.load(session.session_id)
    originals = [m for m in stored.messages if not is_compaction(m)]
    assert len(originals) == 50 * 4
    results = [m for m in originals if m.role == "tool"]
    assert [len(m.content) for m in results] == [size] * 50
    assert len(stored.messages) == len(originals) + len(summaries)
    if size == 3000:
        # Compaction is rare, not every turn: each one frees most of the budget.
        assert len(summaries) <= 15
    # Older turns were cut before compacting: some requests carried excerpts.
    assert any((m.metadata or {}).get("context_cut") for c in provider.calls for m in c)


async def test_context_length_error_compacts_and_retries_once(tmp_path: Any) -> None:
    # agentls believes 8192 tokens; the server takes 3000 and says so.
    provider = AgentModel(window=8192, reject_over=3000)
    store = SessionStore(tmp_path / "s.db")
    core = make(provider, store, size=3000)
    seen: list[tuple[str, dict[str, Any]]] = []
    session = store.create_session()
    for turn in range(1, 11):
        result = await core.run_turn(session, f"Fetch document {turn}")
        assert result.status == "completed", result.error
        session = result.session
    assert provider.rejected >= 1
    # After the error named the limit, agentls keeps under it: one rejection only.
    assert provider.rejected == 1
    assert any(is_compaction(m) and m.metadata["reason"] == "context_length"
               for m in session.messages)
    del seen


async def test_a_request_that_still_does_not_fit_fails_with_what_to_do() -> None:
    # The server rejects everything: one retry, then a clear failure.
    provider = AgentModel(window=8192, reject_over=10)
    core = make(provider)
    result = await core.run_turn(Session("s1"), "Fetch document 1")
    assert result.status == "failed"
    assert result.error is not None and result.error["code"] == "context_length"
    assert "new session" in result.error["message"]
    assert provider.rejected == 2  # the first call and exactly one retry


async def test_failed_compaction_leaves_the_session_exactly_as_it_was(tmp_path: Any) -> None:
    provider = AgentModel()
    store = SessionStore(tmp_path / "s.db")
    core = make(provider, store)
    session = store.create_session()
    for turn in range(1, 4):
        session = (await core.run_turn(session, f"Fetch document {turn}")).session
    before = store.load(session.session_id).to_dict()
    provider.fail_summary = True
    with pytest.raises(ModelError, match="server had an error"):
        await core.compact(store.load(session.session_id))
    assert store.load(session.session_id).to_dict() == before
    # And in a turn: the turn fails; only the turn's own messages are stored.
    core2 = make(AgentModel(fail_summary=True), store)
    turns = 0
    result = None
    while turns < 10:
        turns += 1
        earlier = store.load(session.session_id).messages
        result = await core2.run_turn(store.load(session.session_id), f"Fetch document {turns}")
        if result.status == "failed":
            stored = store.load(session.session_id).messages
            assert stored[:len(earlier)] == earlier
            assert stored[len(earlier):] == result.messages
            assert [m.role for m in result.messages] in (
                ["user"], ["user", "assistant", "tool"])
            assert not any(is_compaction(m) for m in result.messages)
            break
    assert result is not None and result.status == "failed"
    assert result.error is not None and "summarising" in result.error["message"]


async def test_pre_compact_hook_can_veto_and_post_compact_is_told(tmp_path: Any) -> None:
    hooks = HookRegistry()
    seen: list[tuple[str, dict[str, Any]]] = []
    veto = {"on": True}

    async def pre(event: str, data: dict[str, Any]) -> HookResult:
        seen.append((event, data))
        if veto["on"]:
            return HookResult(action="deny", reason="policy says keep everything")
        return HookResult()

    async def post(event: str, data: dict[str, Any]) -> HookResult:
        seen.append((event, data))
        return HookResult()

    hooks.register(events.CONTEXT_PRE_COMPACT, pre, name="keeper")
    hooks.register(events.CONTEXT_POST_COMPACT, post, name="watcher")
    provider = AgentModel()
    store = SessionStore(tmp_path / "s.db")
    core = make(provider, store, hooks)
    session = store.create_session()
    for turn in range(1, 3):
        session = (await core.run_turn(session, f"Fetch document {turn}")).session
    with pytest.raises(ModelError, match="keep everything"):
        await core.compact(session)
    assert not any(is_compaction(m) for m in store.load(session.session_id).messages)
    assert [e for e, _ in seen] == [events.CONTEXT_PRE_COMPACT]
    veto["on"] = False
    summary = await core.compact(store.load(session.session_id))
    assert summary is not None and summary.metadata["reason"] == "manual"
    assert [e for e, _ in seen][-2:] == [events.CONTEXT_PRE_COMPACT, events.CONTEXT_POST_COMPACT]
    post_data = seen[-1][1]
    assert post_data["compacted_through"] == 8 and post_data["model_calls"] == 1


async def test_manual_compaction_then_resume_uses_the_stored_summary(tmp_path: Any) -> None:
    provider = AgentModel(window=32768)
    store = SessionStore(tmp_path / "s.db")
    core = make(provider, store)
    session = store.create_session()
    for turn in range(1, 4):
        session = (await core.run_turn(session, f"Fetch document {turn}")).session
    summary = await core.compact(store.load(session.session_id))
    assert summary is not None
    assert summary.content == "Summary: the user asked for documents (3 prompts)."
    # Nothing new since: nothing to compact.
    assert await core.compact(store.load(session.session_id)) is None

    # "Restart": a new orchestrator and provider over the same store.
    provider2 = AgentModel(window=32768)
    core2 = make(provider2, SessionStore(tmp_path / "s.db"))
    resumed = store.load(session.session_id)
    result = await core2.run_turn(resumed, "Fetch document 4")
    assert result.status == "completed"
    first = provider2.calls[0]
    assert summary.content in first[0].content  # the stored summary, in the system prompt
    assert not any(c[0].content.startswith(SUMMARY_MARK) for c in provider2.calls)
    assert [m.role for m in first[1:]] == ["user"]  # the summarised turns are not resent
    assert first[1].content == "Fetch document 4"
    # agentls/session still has everything: 3 turns, the summary, the 4th turn.
    roles = [("summary" if is_compaction(m) else m.role)
             for m in store.load(session.session_id).messages]
    assert roles == ["user", "assistant", "tool", "assistant"] * 3 + ["summary"] + \
        ["user", "assistant", "tool", "assistant"]


def test_compaction_prompt_asks_for_a_bounded_summary() -> None:
    assert "{words}" in COMPACTION_PROMPT
    assert COMPACTION_PROMPT.startswith(SUMMARY_MARK)


@pytest.mark.parametrize(("error", "limit", "used"), [
    ("This model's maximum context length is 4097 tokens. However, your messages resulted in "
     "5034 tokens. Please reduce the length of the messages.", 4097, 5034),
    ("This model's maximum context length is 128000 tokens. However, you requested 130,500 "
     "tokens (126,404 in the messages, 4,096 in the completion).", 128000, 126404),
    ("prompt is too long: 208363 tokens > 200000 maximum", 200000, 208363),
    ("the request exceeds the available context size (8192 tokens), try increasing it",
     8192, None),
    ("input too long", None, None),
])
def test_context_length_errors_are_read(error: str, limit: int | None, used: int | None
                                        ) -> None:
    assert learned_window(error) == (limit, used)


async def test_a_vetoed_compaction_in_a_turn_fails_clearly_once_nothing_else_fits() -> None:
    hooks = HookRegistry()

    async def keep_everything(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="deny", reason="an audit hook keeps every turn")

    hooks.register(events.CONTEXT_PRE_COMPACT, keep_everything, name="audit")
    provider = AgentModel()
    core = make(provider, hooks=hooks, size=3000)
    session = Session("s1")
    budget = Budget.for_window(WINDOW, None)
    failed = None
    for turn in range(1, 30):
        result = await core.run_turn(session, f"Fetch document {turn}")
        session = result.session
        if result.status == "failed":
            failed = result
            break
    assert failed is not None, "without compaction the window must run out"
    assert failed.error is not None and failed.error["code"] == "context_length"
    assert "vetoed: an audit hook keeps every turn" in failed.error["message"]
    assert not any(is_compaction(m) for m in session.messages)
    assert not any(c[0].content.startswith(SUMMARY_MARK) for c in provider.calls)
    # Until then every request fitted (older results cut, never a summary).
    for request in provider.calls:
        assert (request_tokens(request, core.agent.tools.specs)
                <= budget.window - budget.output_reserve)


async def test_a_context_length_error_without_numbers_still_teaches_a_smaller_window() -> None:
    # Ollama-style: "input too long", no limit named. agentls shrinks its idea
    # of the window below the request that failed, compacts and retries.
    provider = AgentModel(window=8192, reject_over=3000, vague=True)
    core = make(provider, size=3000)
    session = Session("s1")
    statuses = []
    for turn in range(1, 13):
        result = await core.run_turn(session, f"Fetch document {turn}")
        statuses.append(result.status)
        session = result.session
    assert provider.rejected == 1  # one rejection, then it stays under
    assert statuses == ["completed"] * 12, statuses  # the retry saved that turn too


def test_reported_usage_scales_later_estimates_up_never_down() -> None:
    from agentls.core.context.fitting import ContextManager
    from agentls.core.context.tokens import EstimateCounter

    manager = ContextManager()
    counter = EstimateCounter()
    text = Message("user", "x" * 3000)  # 1000 estimated tokens + overhead
    budget = Budget(100_000, 0)

    def planned() -> int:
        return manager.plan(system="s", messages=[text], ephemeral=[], tools=None,
                            turn_start=0, budget=budget, counter=counter).estimated_tokens

    before = planned()
    manager._last_estimate["s1"] = before
    manager.calibrate("s1", before // 2, counter.name)  # the model counted fewer: ignored
    assert planned() == before
    manager.calibrate("s1", before * 2, counter.name)  # twice as many: believed
    assert planned() >= 2 * before - 2
    manager._last_estimate["s2"] = 100  # too small a sample to learn from
    manager.calibrate("s2", 10_000, counter.name)
    assert planned() < 3 * before


def test_one_head_and_tail_cut_serves_the_size_caps_and_the_excerpts() -> None:
    from agentls.core.context.compaction import excerpt
    from agentls.core.support.size_caps import cap_text, head_and_tail

    text = "".join(chr(ord("a") + i % 26) for i in range(3000))
    assert head_and_tail(text, 90, lambda omitted: f"[{omitted}]", head_share=(2, 3)) == (
        text[:60] + "[2910]" + text[-30:])
    capped = cap_text(text, 100)
    assert capped.startswith(text[:75] + "\n\n[… 2,900 characters of this tool result left out")
    assert capped.endswith("…]\n\n" + text[-25:])
    assert cap_text(text, 3000) is text
    cut = excerpt(Message("tool", text, tool_result={"success": True}), 600, "older")
    assert cut is not None and cut.metadata["context_cut"] is True
    assert cut.content.startswith(text[:400] + "\n\n[agentls: 2,400 of this tool result's 3,000 ")
    assert "(it belongs to an earlier turn)." in cut.content
    assert cut.content.endswith(".]\n\n" + text[-200:])
    assert excerpt(Message("tool", text[:700]), 600, "older") is None  # short enough already


def test_an_older_prompt_loses_only_the_files_it_attached() -> None:
    from agentls.core.context.compaction import without_attachments

    prompt = ('Fix a.py and b.py\n\n<file path="a.py">\nA = 1\n</file>\n'
              '<file path="gone.py" error="not found"/>\n<file path="b.py">\nB = 2\n</file>')
    message = Message("user", prompt, {"mentions": ["a.py", "gone.py", "b.py"]})
    slim = without_attachments(message)
    assert slim is not None and "A = 1" not in slim.content and "B = 2" not in slim.content
    assert slim.content.startswith('Fix a.py and b.py\n\n<file path="a.py" omitted="true"/>\n'
                                   '<file path="gone.py" error="not found"/>\n'
                                   '<file path="b.py" omitted="true"/>')
    assert "a.py, b.py attached here is left out" in slim.content
    assert message.content == prompt  # the stored message keeps them
    assert without_attachments(Message("user", "no files")) is None
    assert without_attachments(Message("tool", prompt, {"mentions": ["a.py"]})) is None
