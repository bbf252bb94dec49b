"""Other programs' configuration files are protected (docs/security.md),
through the REAL server: after "Allow for session" for write_file, writing
any file that makes another agent, a VCS, the editor, CI, the shell or a
package manager run commands still asks every time (Allow once / Deny
only), and the question says why.

The list lives in features/policy/sensitive.py (PROTECTED, one reason per
entry); build files the user runs on purpose (package.json, Makefile) are
deliberately not on it and go through under "Allow for session".
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e.test_edits import (
    call,
    capabilities,
    chat,
    editor_session,
    scripted,
    tool_messages,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")

# What the attack in the issue wrote with no question, then more of the same kind.
TOOL_CONFIGS = [
    ".claude/settings.json", ".claude/settings.local.json", ".cursor/mcp.json",
    ".gemini/settings.json", ".continue/config.json", ".hg/hgrc",
    ".windsurf/workflows/x.md", ".roo/mcp.json", ".clinerules", ".aider.conf.yml",
    ".codex/config.toml", ".jj/repo/config.toml", "lefthook.yml", ".gitlab/ci/build.yml",
    "bitbucket-pipelines.yml", ".yarn/plugins/p.cjs", "bunfig.toml", "rust-toolchain.toml",
    "mise.toml", ".env", "pkg/.kiro/hooks/h.json",
    # the next round's: agents the list did not name, each starting MCP servers
    ".qwen/settings.json", ".crush.json", "crush.json", ".kilocode/mcp.json",
    ".amazonq/mcp.json", ".junie/mcp/mcp.json", ".trae/mcp.json", ".augment/settings.json",
    # and the rules for agents nobody listed yet: any MCP list, a tool folder's settings
    "tools/mcp.json", "config/mcp_servers.json", ".newagent/settings.json",
]
NOT_PROTECTED = ["package.json", "Makefile"]


def writes(paths: list[str]) -> list[dict[str, object]]:
    return [call("write_file", f"w{i}", path=p, content="pwned\n") for i, p in enumerate(paths)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".hg").mkdir(parents=True)
    (root / ".hg" / "hgrc").write_text("[ui]\n")
    return root


async def test_tool_configs_ask_every_time_after_allow_for_session(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "configs", [
        *writes(["a.txt", *TOOL_CONFIGS, *NOT_PROTECTED]), {"text": "done"}],
        approval={"mode": "message"}, session={"maxIterations": 60})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Allow for session"  # clicked whenever it is offered
        result = await chat(ed, prompt="Write the files")
        assert result["status"] == "completed", result
        outcomes = [m["toolResult"]["success"] for m in tool_messages(result)]
    asked = [p.message.split(":")[1].split()[-1] for p in ed.asked]
    # a.txt asked once and allowed for the session; every tool config was
    # asked (Allow once / Deny only, so "Allow for session" counted as Deny);
    # package.json and the Makefile then went through unasked.
    assert asked == ["a.txt", *TOOL_CONFIGS], asked
    for params in ed.asked[1:]:
        assert [a.title for a in params.actions or []] == ["Allow once", "Deny"]
    assert outcomes == [True, *[False] * len(TOOL_CONFIGS), True, True]
    for path in TOOL_CONFIGS:
        target = workspace / path
        assert not target.exists() or target.read_text() != "pwned\n", path
    assert (workspace / ".hg" / "hgrc").read_text() == "[ui]\n"
    for path in NOT_PROTECTED:
        assert (workspace / path).read_text() == "pwned\n"


async def test_the_question_says_why_the_file_is_protected(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "why", [
        *writes([".claude/settings.json"]), {"text": "done"}], approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.answer = "Deny"
        result = await chat(ed, prompt="Write it")
        assert result["status"] == "completed", result
    assert len(ed.asked) == 1
    assert "Claude Code settings" in ed.asked[0].message
