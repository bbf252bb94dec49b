"""HookRegistry: every precedence and merging rule of Amplifier's Hooks API and
the behaviours it implies, handler isolation, ordering, unregister; injection
limits and budget."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentls.core.plugins.hooks import HookRegistry
from agentls.core.plugins.injections import InjectionBudget, InjectionLimits, InjectionRefused
from agentls.core.types import events
from agentls.core.types.messages import HookResult


def answer(result: HookResult | Any, calls: list[str] | None = None, tag: str = ""):  # type: ignore[no-untyped-def]
    async def handler(event: str, data: dict[str, Any]) -> Any:
        if calls is not None:
            calls.append(tag)
        return result

    handler.__name__ = tag or "handler"
    return handler


async def test_no_handlers_continue() -> None:
    result = await HookRegistry().emit("tool:pre", {})
    assert result == HookResult(action="continue")


async def test_deny_short_circuits() -> None:
    reg = HookRegistry()
    calls: list[str] = []
    reg.register("tool:pre", answer(HookResult(action="continue"), calls, "a"), priority=1)
    reg.register("tool:pre", answer(HookResult(action="deny", reason="no"), calls, "b"),
                 priority=2)
    reg.register("tool:pre", answer(HookResult(action="ask_user"), calls, "c"), priority=3)
    emission = await reg.emit_with_sources("tool:pre", {})
    assert emission.result.action == "deny" and emission.result.reason == "no"
    assert emission.sources == ["b"]
    assert calls == ["a", "b"]


async def test_deny_after_ask_user_wins() -> None:
    reg = HookRegistry()
    reg.register("tool:pre", answer(HookResult(action="ask_user")), priority=1)
    reg.register("tool:pre", answer(HookResult(action="deny")), priority=2)
    assert (await reg.emit("tool:pre", {})).action == "deny"


@pytest.mark.parametrize("ask_first", [True, False])
async def test_first_ask_user_beats_inject_context_whatever_the_order(ask_first: bool) -> None:
    reg = HookRegistry()
    ask = HookResult(action="ask_user", approval_prompt="first?")
    inject = HookResult(action="inject_context", context_injection="ctx")
    order = [ask, inject] if ask_first else [inject, ask]
    for i, r in enumerate(order):
        reg.register("tool:pre", answer(r), priority=i)
    reg.register("tool:pre", answer(HookResult(action="ask_user", approval_prompt="second?")),
                 priority=9)
    result = await reg.emit("tool:pre", {})
    assert result.action == "ask_user" and result.approval_prompt == "first?"


async def test_inject_context_merges() -> None:
    reg = HookRegistry()
    reg.register("tool:post", answer(HookResult(
        action="inject_context", context_injection="one", context_injection_role="user",
        ephemeral=True, suppress_output=True), tag="h1"), priority=1)
    reg.register("tool:post", answer(HookResult(
        action="inject_context", context_injection="two", context_injection_role="assistant",
        ephemeral=False, suppress_output=False), tag="h2"), priority=2)
    reg.register("tool:post", answer(HookResult(action="modify", data={"x": 1})), priority=3)
    emission = await reg.emit_with_sources("tool:post", {"x": 0})
    r = emission.result
    assert r.action == "inject_context"
    assert r.context_injection == "one\n\ntwo"
    assert (r.context_injection_role, r.ephemeral, r.suppress_output) == ("user", True, True)
    assert emission.sources == ["h1", "h2"]
    assert r.data == {"x": 1}  # modify and inject_context both apply


async def test_inject_context_beats_modify_beats_continue() -> None:
    reg = HookRegistry()
    reg.register("e:x", answer(HookResult(action="modify", data={"v": 1})))
    assert (await reg.emit("e:x", {})).action == "modify"
    reg.register("e:x", answer(HookResult(action="inject_context", context_injection="c")))
    assert (await reg.emit("e:x", {})).action == "inject_context"


async def test_modify_chains_data() -> None:
    reg = HookRegistry()
    seen: list[dict[str, Any]] = []

    async def add_one(event: str, data: dict[str, Any]) -> HookResult:
        seen.append(dict(data))
        return HookResult(action="modify", data={**data, "n": data["n"] + 1})

    reg.register("e:x", add_one, priority=1)
    reg.register("e:x", add_one, priority=2)

    async def observe(event: str, data: dict[str, Any]) -> HookResult:
        seen.append(dict(data))
        return HookResult()

    reg.register("e:x", observe, priority=3)
    result = await reg.emit("e:x", {"n": 0})
    assert [d["n"] for d in seen] == [0, 1, 2]
    assert result.action == "modify" and result.data["n"] == 2  # type: ignore[index]


async def test_priority_then_registration_order() -> None:
    reg = HookRegistry()
    calls: list[str] = []
    reg.register("e:x", answer(HookResult(), calls, "late"), priority=5)
    reg.register("e:x", answer(HookResult(), calls, "first0"), priority=0)
    reg.register("e:x", answer(HookResult(), calls, "second0"), priority=0)
    reg.register("e:x", answer(HookResult(), calls, "neg"), priority=-1)
    await reg.emit("e:x", {})
    assert calls == ["neg", "first0", "second0", "late"]
    assert reg.list_handlers("e:x") == {"e:x": ["neg", "first0", "second0", "late"]}


async def test_raising_and_bad_handlers_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    reg = HookRegistry()

    async def raises(event: str, data: dict[str, Any]) -> HookResult:
        raise RuntimeError("bug in hook")

    reg.register("e:x", raises, name="raiser", priority=0)
    reg.register("e:x", answer({"action": "deny"}, tag="not_a_result"), priority=1)
    reg.register("e:x", answer(HookResult(action="modify", data={"ok": True})), priority=2)
    with caplog.at_level(logging.ERROR, logger="agentls.hooks"):
        emission = await reg.emit_with_sources("e:x", {})
    assert emission.result.action == "modify"
    assert emission.skipped == ["raiser", "not_a_result"]
    assert "raiser" in caplog.text and "not_a_result" in caplog.text


async def test_hanging_handler_times_out() -> None:
    reg = HookRegistry(handler_timeout=0.05)

    async def hang(event: str, data: dict[str, Any]) -> HookResult:
        await asyncio.Event().wait()
        return HookResult(action="deny")

    reg.register("e:x", hang)
    reg.register("e:x", answer(HookResult(action="modify", data={"a": 1})), priority=1)
    result = await asyncio.wait_for(reg.emit("e:x", {}), 2)
    assert result.action == "modify"


async def test_unregister() -> None:
    reg = HookRegistry()
    off = reg.register("e:x", answer(HookResult(action="deny")))
    off()
    off()  # idempotent
    assert (await reg.emit("e:x", {})).action == "continue"


async def test_handler_mutation_does_not_leak() -> None:
    reg = HookRegistry()

    async def mutate(event: str, data: dict[str, Any]) -> HookResult:
        data["tool_input"] = "changed"
        return HookResult()

    seen: list[Any] = []

    async def look(event: str, data: dict[str, Any]) -> HookResult:
        seen.append(data["tool_input"])
        return HookResult()

    reg.register("e:x", mutate, priority=0)
    reg.register("e:x", look, priority=1)
    payload = {"tool_input": "original"}
    await reg.emit("e:x", payload)
    assert seen == ["original"] and payload == {"tool_input": "original"}


async def test_user_messages_are_kept_at_highest_level() -> None:
    reg = HookRegistry()
    reg.register("e:x", answer(HookResult(user_message="a", user_message_level="warning")))
    reg.register("e:x", answer(HookResult(action="ask_user", user_message="b")), priority=1)
    result = await reg.emit("e:x", {})
    assert result.action == "ask_user"
    assert result.user_message == "a\nb" and result.user_message_level == "warning"


def test_event_names_validated() -> None:
    reg = HookRegistry()
    for bad in ("tool", "tool:pre:x", ":pre", "tool:"):
        with pytest.raises(ValueError, match="namespace:action"):
            reg.register(bad, answer(HookResult()))
    assert all(events.is_valid_event_name(e) for e in events.ALL_EVENTS)
    assert {"tool:pre", "tool:post", "tool:error", "prompt:submit", "session:start",
            "orchestrator:complete", "approval:required", "cancel:completed",
            "context:pre_compact", "thinking:delta", "content_block:delta",
            "user:notification", "provider:error"} <= events.ALL_EVENTS


ACTIONS = ["continue", "deny", "modify", "inject_context", "ask_user"]
RANK = {"deny": 0, "ask_user": 1, "inject_context": 2, "modify": 3, "continue": 4}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=8))
def test_precedence_property(actions: list[str]) -> None:
    """Whatever the mix, the winner is the highest-precedence action present."""
    reg = HookRegistry()
    for i, action in enumerate(actions):
        result = HookResult(
            action=action,  # type: ignore[arg-type]
            data={"i": i} if action == "modify" else None,
            context_injection=f"c{i}" if action == "inject_context" else None,
        )
        reg.register("e:x", answer(result), priority=i)
    got = asyncio.run(reg.emit("e:x", {}))
    expected = min(actions, key=lambda a: RANK[a])
    assert got.action == expected
    if expected == "inject_context":
        texts = [f"c{i}" for i, a in enumerate(actions) if a == "inject_context"]
        assert got.context_injection == "\n\n".join(texts)


def test_injection_size_limit() -> None:
    budget = InjectionBudget(InjectionLimits(size_limit=10, budget_per_turn=None))
    budget.admit("x" * 10, hook_name="h", event="tool:post")
    with pytest.raises(InjectionRefused, match="injectionSizeLimit"):
        budget.admit("é" * 6, hook_name="h", event="tool:post")  # 12 bytes in UTF-8


def test_injection_budget_per_turn_and_unlimited() -> None:
    budget = InjectionBudget(InjectionLimits(size_limit=None, budget_per_turn=10))
    budget.admit("x" * 20, hook_name="h", event="e:x")  # 5 tokens
    budget.admit("x" * 20, hook_name="h", event="e:x")  # 10 tokens
    with pytest.raises(InjectionRefused, match="budget"):
        budget.admit("x", hook_name="h", event="e:x")
    assert budget.used_tokens == 10  # a refused injection is not charged
    unlimited = InjectionBudget(InjectionLimits(size_limit=None, budget_per_turn=None))
    unlimited.admit("x" * 1_000_000, hook_name="h", event="e:x")
