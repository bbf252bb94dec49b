"""Edits written in the reply (`session.editFormat: "file-blocks"`) over real
LSP: the server as a subprocess, the scripted provider writes the reply, the
test client plays the editor (tests/e2e/test_edits.py's Editor). A file
block becomes a write_file call asked about and applied like any edit; the
model is not offered the file-writing tools and is told how to write a
change; a declined change is told to the model, which is called again."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_edits import (
    MODES,
    capabilities,
    chat,
    editor_session,
    recorded,
    scripted,
    tool_messages,
)

PRICING = ('def apply_discount(price, percent):\n'
           '    """The price after taking `percent` percent off."""\n'
           '    return price * percent / 100\n\n\n'
           'def double(x):\n    return 2 * x\n')
FIXED = ("I found it: the discount was returned instead of the price after it.\n\n"
         "```python\ndef apply_discount(price, percent):\n"
         '    """The price after taking `percent` percent off."""\n'
         "    return price - price * percent / 100\n```\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pricing.py").write_text(PRICING)
    return root


@pytest.mark.parametrize("mode", MODES)
async def test_a_function_in_the_reply_is_asked_about_and_merged_into_its_file(
        tmp_path: Path, workspace: Path, mode: str) -> None:
    settings, record = scripted(tmp_path, "fix", [{"text": FIXED}],
                                session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        status = await ed.client.protocol.send_request_async("agentls/status", {})
        assert status.editFormat == "file-blocks"
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
        [tool] = tool_messages(result)
        assert tool["toolResult"]["success"] is True, tool
        assert tool["metadata"]["tool_name"] == "write_file"
    text = (workspace / "pricing.py").read_text()
    assert "return price - price * percent / 100" in text
    assert "def double(x):\n    return 2 * x\n" in text  # the rest of the file is kept
    [sent] = ed.edits
    assert sent.label == "agentls: write_file pricing.py"
    if mode == "message":
        assert len(ed.asked) == 1  # asked once, like any edit
    [request] = recorded(record)  # the reply was the answer: no second model call
    # The prompt names pricing.py, so it is attached, and no tool is offered.
    assert request["tools"] == []
    system = request["messages"][0]
    assert system["role"] == "system" and '<file path="relative/path">' in system["content"]
    assert "Tools you can call" not in system["content"]
    # The reply keeps its text and is recorded as making the call.
    reply = next(m for m in result["messages"] if m["role"] == "assistant")
    assert reply["content"] == FIXED
    assert reply["metadata"]["reply_edits"] == 1
    assert reply["metadata"]["tool_calls"][0]["tool"] == "write_file"


async def test_a_declined_file_block_changes_nothing_and_the_model_is_told(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted(
        tmp_path, "declined",
        [{"text": '<file path="pricing.py">\ndef apply_discount(price, percent):\n'
                  '    return 0\n\n\ndef double(x):\n    return x + x\n</file>'},
         {"text": "Understood, nothing was changed."}],
        session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Deny"
        result = await chat(ed, prompt="Rewrite pricing.py")
        assert result["status"] == "completed", result
        [tool] = tool_messages(result)
        assert tool["toolResult"]["success"] is False
    assert (workspace / "pricing.py").read_text() == PRICING
    _, second = recorded(record)
    assert any(m["role"] == "tool" and "declined" in str(m["content"]).lower()
               for m in second["messages"]), second["messages"]
    assert result["messages"][-1]["content"] == "Understood, nothing was changed."


async def test_a_new_path_is_created_and_tool_calls_stay_the_default_elsewhere(
        tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted(
        tmp_path, "create",
        [{"text": 'Added:\n<file path="pkg/util.py">\ndef one():\n    return 1\n</file>\n'}],
        session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Add a util module")
        assert result["status"] == "completed", result
    assert (workspace / "pkg" / "util.py").read_text() == "def one():\n    return 1\n"
    # No file attached: the model may read and search; files change in its
    # reply, and agentls runs the tests itself.
    [request] = recorded(record)
    assert "read_file" in request["tools"]
    assert not {"write_file", "edit_file", "run_command"} & set(request["tools"])
    # Without the setting a non-local provider keeps the file tools and the
    # reply's blocks are only text.
    settings, record = scripted(tmp_path, "default", [{"text": FIXED}])
    async with editor_session(workspace, tmp_path / "state2", settings,
                              capabilities(annotations=True)) as ed:
        status = await ed.client.protocol.send_request_async("agentls/status", {})
        assert status.editFormat == "tool-calls"
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed" and not tool_messages(result)
        assert not ed.edits
    [request] = recorded(record)
    assert {"write_file", "edit_file"} <= set(request["tools"])
    assert (workspace / "pricing.py").read_text() == PRICING


async def test_a_call_written_as_text_goes_back_once_with_what_to_do_instead(
        tmp_path: Path, workspace: Path) -> None:
    written = '```json\n{"name": "apply_discount", "arguments": {"price": 200}}\n```'
    settings, record = scripted(
        tmp_path, "written",
        [{"text": written}, {"text": FIXED}],
        session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
    _, second = recorded(record)
    note = second["messages"][-1]
    assert note["role"] == "system", second["messages"]
    # The function it "called" is pricing.py's: the note says what to write instead.
    assert "'apply_discount'; that is a function in pricing.py, not a tool" in note["content"]
    assert '<file path="pricing.py">' in note["content"]
    assert "return price - price * percent / 100" in (workspace / "pricing.py").read_text()


async def test_a_second_reply_that_does_nothing_ends_the_turn_saying_nothing_changed(
        tmp_path: Path, workspace: Path) -> None:
    echo = f'<file path="pricing.py">\n{PRICING}</file>'
    settings, record = scripted(tmp_path, "echo", [{"text": echo}, {"text": echo}],
                                session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="What does pricing.py do?")
        assert result["status"] == "completed", result
        assert not ed.edits and not tool_messages(result)
    first, second = recorded(record)
    assert "repeated pricing.py without changing anything" in second["messages"][-1]["content"]
    assert len(first["messages"]) + 2 == len(second["messages"])  # the echo and the note
    # The user sees the second echo, then agentls's word that nothing changed.
    echoed, said = result["messages"][-2:]
    assert echoed["content"] == echo
    assert said["role"] == "assistant" and said["metadata"]["explanation"] == "reply_did_nothing"
    assert said["content"].startswith("The model repeated pricing.py unchanged, twice; "
                                      "no file was changed.")
    assert len(recorded(record)) == 2  # the model was not called a third time


async def test_the_last_reply_again_word_for_word_goes_back_with_a_note_and_is_sampled(
        tmp_path: Path, workspace: Path) -> None:
    """Exercism's second try with the greedy 1.5B: "the tests still fail"
    was answered with the first try's reply, word for word, whose fix was
    already on disk; the turn ended there. Now the model is told, and the
    call after the note samples (CompletionOptions.retry)."""
    fixed = FIXED.replace("```python", '<file path="pricing.py">').replace(
        "\n```\n", "\n\n\ndef double(x):\n    return 2 * x\n</file>\n")
    other = fixed.replace("price - price * percent / 100", "price * (100 - percent) / 100")
    settings, record = scripted(tmp_path, "again", [{"text": fixed}, {"text": fixed},
                                                   {"text": other}],
                                session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        first = await chat(ed, prompt="Fix the bug in pricing.py")
        assert first["status"] == "completed", first
        assert "return price - price * percent / 100" in (workspace / "pricing.py").read_text()
        second = await chat(ed, sessionId=first["sessionId"],
                            prompt="The tests still fail: test_discount expects 150.")
        assert second["status"] == "completed", second
    calls = recorded(record)
    assert len(calls) == 3, calls
    note = calls[2]["messages"][-1]
    assert note["role"] == "system" and note["content"].startswith(
        "Note from agentls: this reply is your previous one word for word, and pricing.py is "
        "unchanged by it"), note
    assert calls[1]["retry"] is False and calls[2]["retry"] is True
    assert "price * (100 - percent) / 100" in (workspace / "pricing.py").read_text()


async def test_a_file_the_model_never_saw_is_not_overwritten_from_its_reply(
        tmp_path: Path, workspace: Path) -> None:
    """The 1.5B, asked to read notes.txt, "wrote" it whole with invented
    text: a block for an existing file whose text the model was never shown
    changes nothing; agentls reads the file for it and the model goes on
    with the real text."""
    (workspace / "notes.txt").write_text("The secret word is PERIWINKLE.\n")
    invented = '<file path="notes.txt">\nThis is a secret note.\n</file>'
    settings, record = scripted(
        tmp_path, "unseen", [{"text": invented}, {"text": "The secret word is PERIWINKLE."}],
        session={"editFormat": "file-blocks"}, features={"disabled": ["named-files"]})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Read notes.txt and tell me the secret word.")
        assert result["status"] == "completed", result
        assert not ed.edits
        [read] = tool_messages(result)
        assert read["metadata"]["tool_name"] == "read_file"
    assert (workspace / "notes.txt").read_text() == "The secret word is PERIWINKLE.\n"
    _, second = recorded(record)
    assert "PERIWINKLE" in second["messages"][-1]["content"]  # the real text, read for it
    assert result["messages"][-1]["content"] == "The secret word is PERIWINKLE."


async def test_a_huge_reply_and_history_are_read_off_the_event_loop_and_still_applied(
        tmp_path: Path, workspace: Path) -> None:
    """A prompt pasting a log that names 12,000 files and a reply of 4,000
    unclosed `<file path>` tags around a real block: the real block is
    applied, and the server answers `agentls/status` all along (before,
    reading the reply held the event loop for seconds)."""
    log = "\n".join(f"f{i}.py" for i in range(12_000))
    unclosed = "".join(f'<file path="gen/x{i}.py">x\n' for i in range(4_000))
    fixed = PRICING.replace("* percent", "- price * percent")
    reply = f'Fixed:\n<file path="pricing.py">\n{fixed}</file>\n{unclosed}'
    # One chunk: what is measured is reading the reply, not streaming it.
    settings, _ = scripted(tmp_path, "huge", [{"text": "Hello."},
                                              {"text": reply, "chunks": [reply]}],
                           session={"editFormat": "file-blocks"}, contextWindow=1_000_000)
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        warm = await chat(ed, prompt="Hello")  # the first turn's one-time start-up
        slowest = 0.0
        turn = asyncio.ensure_future(chat(ed, prompt=f"Fix pricing.py. The log:\n{log}",
                                          sessionId=warm["sessionId"]))
        while not turn.done():
            started = time.monotonic()
            await ed.client.protocol.send_request_async("agentls/status", {})
            slowest = max(slowest, time.monotonic() - started)
            await asyncio.wait([turn], timeout=0.05)
        result = turn.result()
        assert result["status"] == "completed", result.get("error")
        [tool] = tool_messages(result)
        assert tool["toolResult"]["success"] is True, tool
    assert "return price - price * percent / 100" in (workspace / "pricing.py").read_text()
    assert not (workspace / "gen").exists()
    # About 50 ms here; generous against a loaded machine (it was 15 s).
    assert slowest < 1.0, f"agentls/status waited {slowest:.2f} s"


async def test_a_block_with_a_nul_byte_in_its_path_is_refused_alone(
        tmp_path: Path, workspace: Path) -> None:
    """The other blocks of the reply are applied; the model is told why the
    bad one was not written (before, the NUL's ValueError dropped every
    edit of the reply, silently)."""
    fixed = PRICING.replace("* percent", "- price * percent")
    reply = (f'Fixed:\n<file path="pricing.py">\n{fixed}</file>\n'
             '<file path="bad\x00name.py">\nX = 1\n</file>\n'
             '<file path="pkg/new.py">\nY = 2\n</file>\n')
    settings, record = scripted(tmp_path, "nul", [{"text": reply}, {"text": "Done."}],
                                session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Fix pricing.py")
        assert result["status"] == "completed", result.get("error")
    assert "return price - price * percent / 100" in (workspace / "pricing.py").read_text()
    assert (workspace / "pkg" / "new.py").read_text() == "Y = 2\n"
    assert sorted(os.listdir(workspace)) == ["pkg", "pricing.py"]
    _, second = recorded(record)
    refusals = [m for m in second["messages"] if m["role"] == "tool"
                and "NUL" in str(m["content"])]
    assert len(refusals) == 1, [(m["role"], str(m["content"])[:200]) for m in second["messages"]]


PRICING_TESTS = ("from pricing import apply_discount\n\n\n"
                "def test_ten_percent_off():\n"
                "    assert apply_discount(200, 10) == 180\n")
STILL_WRONG = ("The discount is applied now.\n\n```python\n"
               "def apply_discount(price, percent):\n"
               '    """The price after taking `percent` percent off."""\n'
               "    return price * (100 + percent) / 100\n```\n")


def with_tests(root: Path) -> Path:
    """pricing.py with its test, and the project's own pytest in .venv (a
    wrapper around this interpreter's, as a virtual environment's is)."""
    (root / "test_pricing.py").write_text(PRICING_TESTS)
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "pytest").write_text(f'#!/bin/sh\nexec {sys.executable} -m pytest "$@"\n')
    (venv_bin / "pytest").chmod(0o755)
    return root


async def test_the_tests_of_a_changed_file_run_after_the_reply_and_a_failure_goes_back(
        tmp_path: Path, workspace: Path) -> None:
    with_tests(workspace)
    settings, record = scripted(tmp_path, "checked", [{"text": STILL_WRONG}, {"text": FIXED}],
                                session={"editFormat": "file-blocks", "testAfterEdits": 2})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
    tools = tool_messages(result)
    assert [t["metadata"]["tool_name"] for t in tools] == ["write_file", "run_command"] * 2, \
        [(m["role"], str(m["content"])[:300]) for m in result["messages"]]
    failed, passed = tools[1], tools[3]
    assert failed["toolResult"]["success"] is False and passed["toolResult"]["success"] is True
    assert failed["content"].startswith("agentls ran the tests that cover the files you changed")
    assert "assert 220.0 == 180" in failed["content"], failed["content"]
    assert "Fix the code, not the tests" in failed["content"]
    # The user was asked about each command as about each edit.
    assert [".venv/bin/pytest -q --tb=short" in q.message for q in ed.asked] == \
        [False, True, False, True], [q.message for q in ed.asked]
    _, second = recorded(record)  # the passing run ended the turn: no third call
    assert any(m["role"] == "tool" and "assert 220.0 == 180" in str(m["content"])
               for m in second["messages"]), second["messages"]
    assert "return price - price * percent / 100" in (workspace / "pricing.py").read_text()


async def test_the_tests_run_as_often_as_the_setting_says(
        tmp_path: Path, workspace: Path) -> None:
    with_tests(workspace)
    other_wrong = STILL_WRONG.replace("(100 + percent)", "(100 - 2 * percent)")
    settings, record = scripted(tmp_path, "once", [{"text": STILL_WRONG}, {"text": other_wrong}],
                                session={"editFormat": "file-blocks"})  # the default: 1
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
    assert [t["metadata"]["tool_name"] for t in tool_messages(result)] == \
        ["write_file", "run_command", "write_file"]
    assert len(recorded(record)) == 2
    settings, record = scripted(tmp_path, "never", [{"text": STILL_WRONG}],
                                session={"editFormat": "file-blocks", "testAfterEdits": 0})
    async with editor_session(workspace, tmp_path / "state2", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
    assert [t["metadata"]["tool_name"] for t in tool_messages(result)] == ["write_file"]


async def test_the_tests_do_not_run_after_a_declined_change(
        tmp_path: Path, workspace: Path) -> None:
    with_tests(workspace)
    settings, _ = scripted(tmp_path, "declined-check",
                                [{"text": STILL_WRONG}, {"text": "Nothing was changed."}],
                                session={"editFormat": "file-blocks"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Deny"
        result = await chat(ed, prompt="Fix the bug in pricing.py")
        assert result["status"] == "completed", result
    edit, check = tool_messages(result)
    assert edit["toolResult"]["success"] is False
    assert check["content"] == "Not run: a change before it was not applied."
    assert len(ed.asked) == 1  # the edit only
    assert (workspace / "pricing.py").read_text() == PRICING
