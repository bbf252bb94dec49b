"""An agent loop that holds up with small local models, as
unit tests: identical tool calls, turns that never end blank, malformed
calls answered with a tool error and one retry, injected context kept in
place for local chat templates, the native parser's fenced calls and
degenerate held text, long periods in the stream guard, and the nearest
lines of an edit whose old_string is not in the file.

Through the real server: tests/e2e/test_agent_loop.py and
tests/reliability/test_runaway_stream.py."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentls.core.agent.bundle import TurnLimits
from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.agent.repeat_calls import RepeatedCalls
from agentls.core.agent.stream_guard import StreamGuard, repeating_tail
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.tools.contract import ToolNeed, ToolRefused
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types import events
from agentls.core.types.conversation import Message, Session
from agentls.core.types.errors import MalformedToolCall
from agentls.core.types.messages import HookResult, ToolCall, ToolResult
from agentls.features.tools.near_match import nearest_lines
from agentls.features.tools.text_edits import StringEdit, apply_string_edits
from agentls.providers.local.tool_calls.chat_template import (
    render_prompt,
    template_messages,
    template_tools,
)
from agentls.providers.local.tool_calls.grammar import to_local_messages
from agentls.providers.local.tool_calls.native_format import NativeToolCallParser
from tests.agent_helpers import agent_bundle
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    json_reply,
    openai_chunk,
    sse,
    sse_reply,
)
from tests.test_local_fim import write_gguf
from tests.test_local_tool_format import HERMES, TOOLS, ReadTool, _qwen_meta, make_provider
from tests.test_orchestrator import Display, make

# --------------------------------------------------------------------------- identical calls


async def test_second_identical_call_gets_the_first_result_and_the_third_ends_the_turn() -> None:
    call = {"name": "echo", "arguments": {"text": "a"}}
    display = Display()
    orch, provider, tools = make([{"tool_calls": [dict(call, id=f"c{i}")]} for i in range(3)]
                                 + [{"text": "never asked"}], display=display)
    result = await orch.run_turn(Session("s1"), "echo a")
    assert tools.calls == [{"tool": "echo", "payload": {"text": "a"}}]  # run once
    assert len(provider.requests) == 3
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                     "assistant"]
    first, second, third = (m for m in result.messages if m.role == "tool")
    assert first.content == "echoed: a"
    assert second.content.startswith("echoed: a\n\nNote from agentls: you already called echo with")
    assert "The user's request was: \"echo a\"" in second.content
    assert second.tool_result == first.tool_result
    assert third.tool_result and third.tool_result["error"]["code"] == "repeated"
    assert [m.tool_call_id for m in (first, second, third)] == ["c0", "c1", "c2"]
    # The model saw the note with the second result.
    assert provider.requests[2]["messages"][-1]["content"] == second.content
    assert result.status == "failed" and result.error
    assert result.error["code"] == "repeated_tool_call"
    last = result.messages[-1]
    assert last.metadata["source"] == "agentls"
    assert last.metadata["explanation"] == "repeated_tool_call"
    assert "called echo with the same arguments 3 times" in last.content
    assert any("called echo" in text for text, level in display.shown if level == "warning")


async def test_calls_after_the_stopping_one_get_a_result_too() -> None:
    calls = [{"name": "echo", "arguments": {"text": "a"}, "id": f"c{i}"} for i in range(3)]
    orch, _, tools = make([{"tool_calls": [*calls, {"name": "echo", "arguments": {"text": "b"},
                                                     "id": "c3"}]}])
    result = await orch.run_turn(Session("s1"), "x")
    tool_ids = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert tool_ids == ["c0", "c1", "c2", "c3"]  # every call answered: the session stays valid
    assert len(tools.calls) == 1
    assert result.messages[-1].metadata["explanation"] == "repeated_tool_call"


async def test_different_arguments_are_not_identical() -> None:
    orch, _, tools = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a", "n": 1}}]},
        {"tool_calls": [{"name": "echo", "arguments": {"n": 1, "text": "a"}}]},  # same, reordered
        {"tool_calls": [{"name": "echo", "arguments": {"text": "b"}}]},
        {"text": "done"},
    ])
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "completed" and result.messages[-1].content == "done"
    assert [c["payload"]["text"] for c in tools.calls] == ["a", "b"]


def test_a_change_makes_the_turn_forget_earlier_results() -> None:
    """After an edit or a command that succeeded, reading again is a new
    question; the edit itself stays remembered (never applied twice)."""
    calls = RepeatedCalls()
    read = ToolCall(tool="read_file", arguments={"path": "a.py"})
    edit = ToolCall(tool="edit_file", arguments={"path": "a.py", "old_string": "x"})
    calls.record(read, ToolResult(output="x"), "x", "read")
    again = calls.count_again(read)
    assert again is not None and again.times == 2
    calls.record(edit, ToolResult(output="ok"), "ok", "edit")
    assert calls.count_again(read) is None  # forgotten: it runs again
    calls.record(read, ToolResult(output="y"), "y", "read")
    repeated_edit = calls.count_again(edit)
    assert repeated_edit is not None and repeated_edit.content == "ok"
    failed = ToolCall(tool="run_command", arguments={"command": "pytest"})
    calls.record(failed, ToolResult(success=False, error={"message": "no"}), "no", "run")
    assert calls.count_again(read) is not None  # a failed run changed nothing


# --------------------------------------------------------------------------- no blank end


async def test_empty_reply_after_failed_calls_says_what_happened() -> None:
    display = Display()
    orch, _, _ = make([{"tool_calls": [{"name": "boom", "arguments": {}}]}, {"text": ""}],
                      display=display)
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "failed" and result.error and result.error["code"] == "empty_reply"
    last = result.messages[-1]
    assert last.role == "assistant" and last.content.strip()
    assert last.metadata["explanation"] == "empty_reply"
    assert "without an answer" in last.content and "1 failed" in last.content
    assert "boom" in last.content and "kaboom" in last.content
    assert "usage" in last.metadata  # the reply's own metadata is kept
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_reply_with_text_still_completes() -> None:
    orch, _, _ = make([{"tool_calls": [{"name": "boom", "arguments": {}}]},
                       {"text": "It failed."}])
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "completed" and result.messages[-1].content == "It failed."


async def test_a_call_after_a_failure_is_marked_retry_and_one_after_a_success_is_not() -> None:
    orch, provider, _ = make([
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
        {"tool_calls": [{"name": "boom", "arguments": {}}]},
        {"text": "Reading.", "tool_calls": [{"name": "echo", "raw_arguments": "{text: b}"}]},
        {"text": "It failed."},
    ])
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "completed"
    # first call; after echo's success; after boom's failure; after the malformed call's note
    assert [r["retry"] for r in provider.requests] == [False, False, True, True]


@pytest.mark.parametrize("passed", [False, True])
async def test_a_prompt_after_a_turn_whose_own_test_run_failed_is_answered_as_a_retry(
    passed: bool,
) -> None:
    check = {"id": "reply_check_1", "tool": "run_command", "arguments": {"command": "pytest"}}
    earlier = [Message("user", "finish bob.py"),
               Message("assistant", "<file path=\"bob.py\">...</file>", {"tool_calls": [check]}),
               Message("tool", "1 failed" if not passed else "1 passed",
                       {"tool_call_id": "reply_check_1"}, tool_result={"success": passed}),
               Message("assistant", "Done.")]
    orch, provider, _ = make([{"text": "Fixed."}])
    await orch.run_turn(Session("s1", messages=earlier), "The tests still fail.")
    assert provider.requests[0]["retry"] is not passed


# --------------------------------------------------------------------------- malformed calls


async def test_malformed_call_gets_a_tool_error_and_one_retry() -> None:
    orch, provider, tools = make([
        {"text": "Reading.", "tool_calls": [{"name": "echo", "raw_arguments": "{text: a}"}]},
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
        {"text": "done"},
    ])
    result = await orch.run_turn(Session("s1"), "x")
    assert result.status == "completed" and result.messages[-1].content == "done"
    wrote, note = result.messages[1], result.messages[2]
    assert wrote.role == "assistant" and wrote.content == "Reading.echo({text: a})"
    assert "not valid JSON" in wrote.metadata["malformed_tool_call"]
    assert note.role == "system" and note.metadata["tool_error"] is True
    assert note.content.startswith("Error: your last tool call was not run.")
    assert provider.requests[1]["messages"][-1]["content"] == note.content  # right after it
    assert tools.calls == [{"tool": "echo", "payload": {"text": "a"}}]


async def test_malformed_twice_in_a_row_ends_the_turn_with_an_explanation() -> None:
    bad = {"tool_calls": [{"name": "echo", "raw_arguments": "[1, 2]"}]}
    orch, provider, _ = make([bad, bad, {"text": "never"}], limits=TurnLimits(max_iterations=5))
    result = await orch.run_turn(Session("s1"), "x")
    assert len(provider.requests) == 2
    assert result.status == "failed" and result.error
    assert result.error["code"] == "invalid_response"
    last = result.messages[-1]
    assert last.metadata["explanation"] == "malformed_tool_call"
    assert "twice in a row" in last.content and "not a JSON object" in last.content


# --------------------------------------------------------------------------- local templates


def _conversation() -> list[Message]:
    return [
        Message("system", "You are the agent."),
        Message("user", "Read a.py"),
        Message("assistant", "", metadata={"tool_calls": [
            {"tool": "read_file", "arguments": {"path": "a.py"}, "id": "c1"}]}),
        Message("tool", "import os\n", metadata={"tool_call_id": "c1"}),
    ]


def test_injected_context_stays_after_its_tool_result_and_keeps_the_prefix() -> None:
    before = _conversation()
    after = [*before, Message("system", "ruff: a.py:1:8: F401 `os` imported but unused",
                              metadata={"source": "hook", "hook_name": "linters"})]
    rendered = template_messages(after, "hermes")
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "tool", "user"]
    assert rendered[0]["content"] == "You are the agent."  # the system prompt is unchanged
    assert rendered[-1]["content"] == (
        "<system-reminder>\nruff: a.py:1:8: F401 `os` imported but unused\n</system-reminder>")
    tools = template_tools(TOOLS)
    old = render_prompt(HERMES, template_messages(before, "hermes"), tools)
    new = render_prompt(HERMES, rendered, tools)
    generation = "<|im_start|>assistant\n"
    assert old.endswith(generation)
    # Everything the model saw before is the start of the next prompt: a
    # prefix cache (llama.cpp's) keeps it.
    assert new.startswith(old[: -len(generation)])
    assert new.index("</tool_response>") < new.index("F401")


def test_leading_system_messages_still_join_the_first() -> None:
    messages = [Message("system", "one"), Message("system", "two"), Message("user", "hi"),
                Message("system", "", metadata={"source": "hook"})]
    rendered = template_messages(messages, "hermes")
    assert rendered == [{"role": "system", "content": "one\n\ntwo"},
                        {"role": "user", "content": "hi"}]


def test_the_grammar_path_keeps_later_system_messages_in_place_too() -> None:
    messages = [*_conversation(), Message("system", "lint: F401", metadata={"source": "hook"})]
    local = to_local_messages(messages, TOOLS)
    assert [m.role for m in local] == ["system", "user", "assistant", "user"]
    assert local[0].content.startswith("You are the agent.") and "F401" not in local[0].content
    assert local[-1].content.endswith(
        "Result of read_file:\nimport os\n\n\n<system-reminder>\nlint: F401\n</system-reminder>")


# --------------------------------------------------------------------------- the native parser


def _feed_all(parser: NativeToolCallParser, text: str, size: int = 7) -> list:
    out = []
    for i in range(0, len(text), size):
        out += parser.feed(text[i:i + size])
    return out + parser.finish("stop")


def _calls(out: list) -> list[tuple[str, dict]]:
    return [(d.name, json.loads(d.arguments)) for c in out for d in c.tool_call_deltas]


def _text(out: list) -> str:
    return "".join(c.delta for c in out)


def test_fenced_call_after_text_is_a_call() -> None:
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    reply = ('I will read the file.\n```json\n{"name": "read_file", "arguments": '
             '{"path": "inventory.py"}}\n```\n')
    out = _feed_all(parser, reply)
    assert _calls(out) == [("read_file", {"path": "inventory.py"})]
    assert _text(out) == "I will read the file.\n"
    assert out[-1].finish_reason == "tool_calls"


def test_fenced_json_that_calls_no_offered_tool_is_text() -> None:
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    reply = 'Like this:\n```json\n{"name": "Ada", "arguments": {"x": 1}}\n```\nDone.'
    out = _feed_all(parser, reply)
    assert not _calls(out) and _text(out) == reply


def test_malformed_fenced_call_of_an_offered_tool_is_a_malformed_call() -> None:
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    reply = 'Reading.\n```json\n{"name": "read_file", "arguments": {path: "a.py"}}\n```'
    with pytest.raises(MalformedToolCall) as caught:
        _feed_all(parser, reply, size=200)
    assert caught.value.text == reply  # what the model wrote, text before it included
    assert "read_file" in caught.value.reason and "<tool_call>" in caught.value.reason
    assert caught.value.code == "invalid_response"


def test_malformed_tagged_call_is_a_malformed_call() -> None:
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file"])
    with pytest.raises(MalformedToolCall) as caught:
        _feed_all(parser, '<tool_call>\n{"name": "read_file", "arguments": {path}}\n</tool_call>')
    assert caught.value.text.startswith("<tool_call>") and "not valid JSON" in caught.value.reason


def test_degenerate_held_call_text_reaches_the_stream_guard() -> None:
    """A reply that starts with `{` is held as a possible call; when it
    degenerates (Qwen2.5-Coder-0.5B: a pair of JSON lines, 297 characters,
    21 times) the parser hands it over and the turn's guard stops it long
    before max_tokens."""
    pair = (json.dumps({"name": "read_inventory.py", "arguments": {"path": "inventory.py",
                                                                   "mode": "r" * 60}}) + "\n"
            + json.dumps({"name": "list_files", "arguments": {"glob": "*.py",
                                                              "note": "n" * 80}}) + "\n")
    assert len(pair) > 256  # longer than the old MAX_PERIOD
    parser = NativeToolCallParser("hermes", model="m", tool_names=["read_file", "list_files"])
    guard = StreamGuard(None)
    streamed = 0
    stop = None
    reply = pair * 21
    for i in range(0, len(reply), 5):
        streamed = i + 5
        for chunk in parser.feed(reply[i:i + 5]):
            stop = stop or guard.feed(chunk.delta)
        if stop:
            break
    assert stop is not None and stop.reason == "degenerate"
    assert streamed < len(pair) * 8  # after a few repeats, not after all 21


def test_long_periods_are_caught_and_ordinary_long_text_is_not() -> None:
    unit = "".join(f"    assert inventory.count('item{i}') == {i}\n" for i in range(25))
    assert len(unit) > 1000
    assert repeating_tail("start\n" + unit * 5) == unit
    assert repeating_tail("start\n" + unit * 2) is None  # twice is not degenerate
    varied = "".join(f"    assert inventory.count('item{i}') == {i}\n" for i in range(400))
    assert repeating_tail(varied) is None


# --------------------------------------------------------------------------- edit_file near miss

FILE = ("class Inventory:\n    def add(self, name, count=1):\n        self.items[name] += count\n"
        "\n    def remove(self, name):\n        del self.items[name]\n")


def test_not_found_old_string_shows_the_nearest_lines() -> None:
    with pytest.raises(ToolRefused) as caught:
        apply_string_edits(FILE, [StringEdit("def remove(self, name):\n    del self.items[name]",
                                             "pass")], "inventory.py")
    message = caught.value.message
    assert caught.value.code == "not_found" and "Nothing was changed" in message
    assert "lines 5-6 of inventory.py" in message
    assert "5|     def remove(self, name):" in message and "6|         del self.items[name]" \
        in message


def test_old_string_with_the_other_quotes_matches_the_one_passage() -> None:
    """Seen with Qwen2.5-Coder-1.5B: `fetch(server + '/changes')` for the
    file's `fetch(server + "/changes")`."""
    text = 'def pull(server):\n    return fetch(server + "/changes")\n'
    edited = apply_string_edits(text, [StringEdit("fetch(server + '/changes')",
                                                  "fetch(server + '/changes', timeout=30)")])
    assert edited == "def pull(server):\n    return fetch(server + '/changes', timeout=30)\n"
    twice = "a = 'x'\nb = 'x'\n"  # two passages differ only in quotes: no guess
    with pytest.raises(ToolRefused) as caught:
        apply_string_edits(twice, [StringEdit('"x"', "y")])
    assert caught.value.code == "not_found"


def test_nothing_similar_says_so() -> None:
    assert nearest_lines(FILE, "zzzz qqqq wwww") is None
    with pytest.raises(ToolRefused) as caught:
        apply_string_edits(FILE, [StringEdit("zzzz qqqq wwww", "x")])
    assert "Nothing in the file is like it" in caught.value.message


# --------------------------------------------------------------------------- local, end to end


class FreeRead(ReadTool):
    """read_file that needs no approval."""

    def tool_need(self, tool_name: str, arguments: Any, state: dict[str, Any]) -> ToolNeed:
        return ToolNeed("none")


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    """llama.cpp's server, faked (as in tests/test_local_tool_format.py)."""
    from agentls.providers.local.models import catalog

    if catalog.runtime_error() is not None:
        pytest.skip("llama-cpp-python[server] is not installed: the provider refuses every call")
    with FakeBackend() as fake:
        fake.script("GET", "/v1/models", json_reply({"object": "list", "data": [
            {"id": "tiny", "object": "model"}]}))
        yield fake


async def test_local_turn_retries_a_malformed_fenced_call_and_keeps_the_prefix(
    backend: FakeBackend, tmp_path: Path
) -> None:
    """The local provider (real child supervision, llama.cpp's server
    replaced by a loopback fake) under the real turn: a fenced call that
    does not parse gets a tool error and a retry; the retry's call runs; a
    hook's injection after the result is rendered after the tool response,
    so each prompt starts with the one before it."""
    gguf = write_gguf(tmp_path / "tiny-tools.gguf", _qwen_meta(HERMES))
    replies = [
        'Let me look.\n```json\n{"name": "read_file", "arguments": {path: "a.py"}}\n```',
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
        "It holds content.",
    ]
    backend.script("POST", "/v1/completions", *[
        sse_reply([sse(openai_chunk(text=reply)),
                   sse(openai_chunk(text="", finish_reason="stop")), SSE_DONE])
        for reply in replies])
    hooks = HookRegistry()

    async def lint(event: str, data: dict[str, Any]) -> HookResult:
        return HookResult(action="inject_context", context_injection="lint: a.py is fine")

    hooks.register(events.TOOL_POST, lint, name="linters")
    # The model's own calls: with the grammar (the default) the fenced call
    # would be asked again under it, never malformed (test_constrained_calls).
    provider = make_provider(backend, gguf, toolCallGrammar=False)
    orchestrator = Orchestrator(agent_bundle(provider, tools=ToolExecutor([FreeRead()]),
                                             hooks=hooks))
    try:
        result = await orchestrator.run_turn(Session("s1"), "What is in a.py?")
    finally:
        await provider.aclose()
    assert result.status == "completed", result.error
    assert result.messages[-1].content == "It holds content."
    assert [m.role for m in result.messages] == [
        "user", "assistant", "system", "assistant", "tool", "system", "assistant"]
    assert result.messages[1].content == replies[0]  # what the model wrote, kept
    prompts = [r.json["prompt"] for r in backend.requests_to("/v1/completions")]
    generation = "<|im_start|>assistant\n"
    for before, after in itertools.pairwise(prompts):
        assert after.startswith(before[: -len(generation)])  # the prefix stays
    assert prompts[1].endswith(
        "<|im_start|>user\n<system-reminder>\nError: your last tool call was not run. Your "
        "call of read_file could not be read: not valid JSON (Expecting property name enclosed "
        "in double quotes at character 36). Write a call as <tool_call>\n{\"name\": "
        "\"read_file\", \"arguments\": {\"<argument>\": \"<value>\"}}\n</tool_call>, the "
        "arguments a JSON object with double-quoted keys and strings. Write the call again, "
        "correctly, or answer in words if no tool is needed.\n</system-reminder><|im_end|>\n"
        + generation)
    assert prompts[2].index("</tool_response>") < prompts[2].index("lint: a.py is fine")
