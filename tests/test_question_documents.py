"""Pure logic of core/approval/documents.py and the approval gate's use of
it (a question never hides a byte that changes the answer). Through the
real server: tests/reliability/test_approval_documents.py."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest

from agentls.core.approval.documents import QuestionDocuments, fits_message, shown_question
from agentls.core.approval.gate import ApprovalGate, ApprovalRequest

RLO = "\u202e"


class Channel:
    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        self.asked.append(request)
        return "deny"


class Opener:
    def __init__(self, result: bool | Exception) -> None:
        self.result = result
        self.opened: list[Path] = []

    async def show_document(self, path: Path) -> bool:
        self.opened.append(path)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def asked(gate: ApprovalGate, request: ApprovalRequest) -> str:
    channel = Channel()
    asyncio.run(gate.ask(request, channel))
    [put] = channel.asked
    return put.prompt


def test_escaping_keeps_line_breaks_and_spells_out_the_rest() -> None:
    shown = shown_question(f"a{RLO}b\n\tc\r\nd")
    assert shown == "a<U+202E>b\n<U+0009>c<U+000D>\nd"
    assert shown_question(shown) == shown  # idempotent


def test_a_short_question_is_the_message_escaped_and_no_file(tmp_path: Path) -> None:
    documents = QuestionDocuments(tmp_path / "q")
    gate = ApprovalGate(documents=documents, opener=Opener(True))
    prompt = asked(gate, ApprovalRequest(prompt=f"Allow {RLO}x?", tool_name="t"))
    assert prompt == "Allow <U+202E>x?"
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize("opened", [True, False, OSError("no editor")])
def test_a_long_question_goes_whole_to_a_private_file(tmp_path: Path,
                                                      opened: bool | Exception) -> None:
    opener = Opener(opened)
    gate = ApprovalGate(documents=QuestionDocuments(tmp_path / "state" / "q"), opener=opener)
    whole = "head\n" + "x" * 5000 + RLO + "y" * 5000 + "\nAllow it?"
    prompt = asked(gate, ApprovalRequest(prompt=whole, tool_name="mcp__a__b",
                                         summary="The tool mcp__a__b, 2 arguments.\n\nAllow?"))
    [document] = opener.opened
    assert str(document) in prompt and "mcp__a__b" in prompt and fits_message(prompt)
    assert ("is open in your editor" in prompt) is (opened is True)
    assert "x" * 100 not in prompt
    text = document.read_text()
    assert "x" * 5000 + "<U+202E>" + "y" * 5000 in text and RLO not in text
    assert stat.S_IMODE(document.stat().st_mode) == 0o600
    assert stat.S_IMODE(document.parent.stat().st_mode) == 0o700


def test_without_a_summary_the_short_form_names_the_tool_and_says_it_is_cut(
        tmp_path: Path) -> None:
    gate = ApprovalGate(documents=QuestionDocuments(tmp_path / "q"))
    prompt = asked(gate, ApprovalRequest(prompt="z" * 4000, tool_name="hooked"))
    assert "hooked" in prompt and "[the rest is in the file]" in prompt
    assert fits_message(prompt) and str(tmp_path / "q") in prompt


def test_without_a_folder_the_whole_text_is_the_message() -> None:
    whole = "a" * 3000 + RLO
    assert asked(ApprovalGate(), ApprovalRequest(prompt=whole)) == "a" * 3000 + "<U+202E>"


def test_old_question_files_are_removed(tmp_path: Path) -> None:
    documents = QuestionDocuments(tmp_path / "q", keep=3, max_age=3600)
    old = documents.write("old", "old")
    assert old is not None
    past = time.time() - 7200
    os.utime(old, (past, past))
    written = [documents.write(f"n{i}", str(i)) for i in range(5)]
    (tmp_path / "q" / "mine.md").write_text("not a question file")
    left = sorted(p.name for p in (tmp_path / "q").iterdir())
    assert not old.exists()
    assert left == ["mine.md", "n2.txt", "n3.txt", "n4.txt"], left
    assert all(p is not None for p in written)


def test_an_edit_too_long_for_a_message_names_its_title_and_diff_size(tmp_path: Path) -> None:
    from agentls.core.approval.gate import ApprovalQuestion, PolicyAnswer
    from agentls.core.tools.contract import ToolNeed

    diff = "\n".join(["--- a/x.py", "+++ b/x.py", "@@ -1,1 +1,300 @@", "-old",
                      *(f"+new {i}" for i in range(299))])
    need = ToolNeed("edit", ("x.py",), title="agentls: edit_file x.py", preview=diff)
    channel = Channel()
    gate = ApprovalGate(channel, documents=QuestionDocuments(tmp_path / "q"))
    cleared = asyncio.run(gate.clearance(ApprovalQuestion("edit_file", {}, need),
                                     PolicyAnswer("protected", "a protected file")))
    assert not cleared.allowed
    [put] = channel.asked
    assert put.prompt.startswith("agentls: edit_file x.py: allow this change?")
    assert "a protected file" in put.prompt and "(299 added, 1 removed)" in put.prompt
    assert "+new 5" not in put.prompt and fits_message(put.prompt)
    [document] = (tmp_path / "q").iterdir()
    assert diff in document.read_text()
