"""Through the REAL server: trust does not follow a symbolic
link into another checkout.

The user trusted checkout A's `.agentls.toml` (a linter) and allowed its
`.mcp.json`. Checkout B's files are relative links to A's. Opening B must
not inherit that trust: B's linter does not run and B's MCP server does not
start until the user answers B's own question, which says the file is a
link and where it leads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agentls.core.trust.workspace import TrustStore, digest
from tests.reliability.harness import LspProcess, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")

CLIENT = {"window": {"showMessage": {"messageActionItem": {}}}}
RAW = Path(__file__).resolve().parents[1] / "fakes" / "mcp_raw_server.py"


def questions(lsp: LspProcess) -> list[str]:
    return [r["params"]["message"] for r in lsp.server_requests
            if r["method"] == "window/showMessageRequest"]


def dismissing(method: str, params: Any) -> Any:
    return None


def checkouts(tmp_path: Path, name: str, text: str, kind: str) -> tuple[Path, Path, Path]:
    """A (with the file, trusted for its content) and B (a relative link to it)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / name).write_text(text)
    os.symlink(os.path.join("..", "a", name), b / name)
    state = tmp_path / "state"
    state.mkdir()
    TrustStore(state / "trust.json").record(a / name, digest((a / name).read_bytes()),
                                            "trusted", kind)
    return a, b, state


def test_a_linked_agentls_toml_does_not_inherit_trust(tmp_path: Path) -> None:
    marker = tmp_path / "LINTER_RAN"
    a, b, state = checkouts(tmp_path, ".agentls.toml", (
        "[[linters]]\nlanguages = [\"python\"]\n"
        f"command = [\"touch\", \"{marker}\", \"{{file}}\"]\n"), "settings")
    # In A, its own file: trusted as recorded (the record works).
    with LspProcess.start(state_dir=state, workspace=a, capabilities=CLIENT) as lsp:
        lsp.responder = dismissing
        assert lsp.result("agentls/status", {})["workspaceTrust"]["state"] == "trusted"
    # In B, the link to it: asked, and said to be a link out of B.
    with LspProcess.start(state_dir=state, workspace=b, capabilities=CLIENT) as lsp:
        lsp.responder = dismissing
        trust = lsp.result("agentls/status", {})["workspaceTrust"]
        [asked] = wait_until(lambda: questions(lsp), "B's own trust question")
    assert trust["state"] == "pending" and trust["pendingKeys"] == ["linters"]
    assert "symbolic link" in asked and str(a / ".agentls.toml") in asked
    assert "outside this workspace folder" in asked


def test_a_linked_mcp_json_does_not_inherit_the_allow(tmp_path: Path) -> None:
    log = tmp_path / "mcp-log.jsonl"
    text = json.dumps({"mcpServers": {"raw": {"command": sys.executable, "args": [str(RAW)],
                                              "env": {"MCP_RAW_LOG": str(log)}}}})
    a, b, state = checkouts(tmp_path, ".mcp.json", text, "mcp")
    with LspProcess.start(state_dir=state, workspace=b, capabilities=CLIENT) as lsp:
        lsp.responder = dismissing
        [asked] = wait_until(lambda: questions(lsp), "B's own .mcp.json question", 30)
        entries = wait_until(
            lambda: [e for e in lsp.result("agentls/status", {})["mcp"] if e["name"] == "raw"],
            "raw in the status", 30)
        # The question was dismissed and nothing else can start it.
        assert entries[0]["state"] == "stopped" and entries[0].get("pending") is True
    assert "symbolic link" in asked and str(a / ".mcp.json") in asked
    assert not log.exists()  # the server never started (it logs every message it gets)
