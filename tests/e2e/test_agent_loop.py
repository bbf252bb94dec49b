"""The agent loop with a model that goes around in circles (as small local
models do), over real LSP: the server runs as a subprocess with the scripted
provider (its `record` file shows what the model was sent), and the test
client plays an editor that applies approved edits (tests/e2e/test_edits.py's
Editor).

Covered: the same edit_file call three times is applied once, the second
gets the first result back with a note, the third ends the turn with
agentls's explanation as the last message; an edit whose old_string is not
in the file is answered with the nearest lines, numbered; a turn whose
model then says nothing ends with an explanation, not a blank; a tool call
with arguments that are not JSON gets a tool error the model sees right
after it, and the model's retry runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_edits import (
    call,
    capabilities,
    chat,
    editor_session,
    recorded,
    scripted,
    tool_messages,
)

CODE = ("class Inventory:\n"
        "    def add(self, name, count=1):\n"
        "        self.items[name] = self.items.get(name, 0) + count\n"
        "\n"
        "    def total(self):\n"
        "        return sum(self.items.values())\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inventory.py").write_text(CODE)
    return root


async def test_an_identical_edit_is_applied_once_and_the_third_ends_the_turn(
    tmp_path: Path, workspace: Path
) -> None:
    edit = {"path": "inventory.py", "old_string": "    def total(self):",
            "new_string": "    def count(self, name):\n        return self.items.get(name, 0)\n"
                          "\n    def total(self):"}
    settings, record = scripted(tmp_path, "repeat", [
        call("edit_file", "c1", **edit), call("edit_file", "c2", **edit),
        call("edit_file", "c3", **edit), {"text": "never asked"}])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.open("inventory.py", CODE)
        result = await chat(ed, prompt="Add a count method")
        assert len(ed.edits) == 1 and len(ed.asked) == 1  # asked and applied once
        assert ed.text("inventory.py").count("def count(") == 1
    first, second, third = tool_messages(result)
    assert first["toolResult"]["success"] is True
    assert second["content"].startswith(first["content"] + "\n\nNote from agentls: you already "
                                        "called edit_file with exactly these arguments")
    assert 'The user\'s request was: "Add a count method"' in second["content"]
    assert second["toolResult"] == first["toolResult"]
    assert third["toolResult"]["error"]["code"] == "repeated"
    assert result["status"] == "failed" and result["error"]["code"] == "repeated_tool_call"
    last = result["messages"][-1]
    assert last["role"] == "assistant" and last["metadata"]["explanation"] == "repeated_tool_call"
    assert "called edit_file with the same arguments 3 times" in last["content"]
    calls = recorded(record)
    assert len(calls) == 3  # the third call ended the turn before another model call
    assert calls[2]["messages"][-1]["content"] == second["content"]


async def test_a_near_miss_edit_shows_the_nearest_lines_and_silence_is_explained(
    tmp_path: Path, workspace: Path
) -> None:
    # Indentation and a word wrong: what small models retype from memory.
    settings, record = scripted(tmp_path, "near", [
        call("edit_file", "c1", path="inventory.py",
             old_string="def total(self):\n    return sum(self.items.values)",
             new_string="def total(self):\n    return 0"),
        {"text": ""}])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        result = await chat(ed, prompt="Make total return 0")
        assert ed.edits == []
    [failed] = tool_messages(result)
    assert failed["toolResult"]["error"]["code"] == "not_found"
    assert "lines 5-6 of inventory.py" in failed["content"]
    assert "5|     def total(self):" in failed["content"]
    assert "6|         return sum(self.items.values())" in failed["content"]
    assert recorded(record)[1]["messages"][-1]["content"] == failed["content"]  # the model saw it
    assert result["status"] == "failed" and result["error"]["code"] == "empty_reply"
    last = result["messages"][-1]
    assert last["role"] == "assistant" and last["metadata"]["explanation"] == "empty_reply"
    assert "without an answer" in last["content"] and "edit_file" in last["content"]
    assert "old_string was not found" in last["content"]


async def test_a_malformed_call_gets_a_tool_error_and_the_retry_runs(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "malformed", [
        {"tool_calls": [{"id": "c1", "name": "read_file",
                         "raw_arguments": '{"path": inventory.py}'}]},
        call("read_file", "c2", path="inventory.py"),
        {"text": "Inventory has add and total."}])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        result = await chat(ed, prompt="Which methods does Inventory have?")
    assert result["status"] == "completed", result
    assert result["messages"][-1]["content"] == "Inventory has add and total."
    wrote, note = result["messages"][1], result["messages"][2]
    assert wrote["content"] == 'read_file({"path": inventory.py})'
    assert note["role"] == "system" and note["metadata"]["tool_error"] is True
    [read] = tool_messages(result)
    assert read["toolResult"]["output"]["content"] == CODE
    sent = recorded(record)
    assert [m["role"] for m in sent[1]["messages"][-3:]] == ["user", "assistant", "system"]
    assert sent[1]["messages"][-1]["content"].startswith("Error: your last tool call was not run")
    assert "not valid JSON" in sent[1]["messages"][-1]["content"]
