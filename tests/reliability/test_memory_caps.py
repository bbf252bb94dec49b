"""Memory under huge messages through the REAL server (issue 15 item 12): a
50 MB chat prompt was accepted, stored, and re-loaded by every later turn
of the session (RSS 166 -> 486 MiB over 11 turns). Now a prompt over
session.maxPromptChars is refused with -32602 before anything is stored,
and later turns do not carry it.
"""

from __future__ import annotations

from pathlib import Path

from tests.reliability.harness import LspProcess, scripted_settings

MIB = 1024


def test_a_huge_prompt_is_refused_and_nothing_is_kept(tmp_path: Path, workspace: Path) -> None:
    settings, record = scripted_settings(tmp_path, "huge", [{"text": "ok"}] * 12)
    with LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                          settings=settings) as lsp:
        first = lsp.result("agentls/chat", {"prompt": "hello"})
        session = first["sessionId"]
        huge = "x" * (50 << 20)
        answer = lsp.request("agentls/chat", {"prompt": huge, "sessionId": session},
                             timeout=120)
        assert answer["error"]["code"] == -32602
        assert "session.maxPromptChars" in answer["error"]["message"]
        del huge
        # Nothing of it was stored or sent to the model.
        stored = lsp.result("agentls/session", {"sessionId": session})
        assert len(stored["messages"]) == 2
        assert "xxxxxxxxxx" not in record.read_text()
        before = lsp.rss_kib()
        for turn in range(10):
            result = lsp.result("agentls/chat", {"prompt": f"turn {turn}", "sessionId": session})
            assert result["status"] == "completed", result
        grown = lsp.rss_kib() - before
    # Ten small turns in the session that once saw the 50 MB prompt: each
    # used to re-load it (about +50 MiB per turn); now they stay small.
    assert grown < 40 * MIB, f"RSS grew {grown // MIB} MiB over 10 turns"
