"""features/sensitive_paths.py: the protected table and the one check for a
file's text reaching the model (ModelFileAccess), on a real directory tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentls.core.file_access import ModelFile, ReadableFile, Withheld
from agentls.features.sensitive_paths import (
    PROTECTED,
    PROTECTED_PATTERNS,
    ModelFileAccess,
    protected_match,
    protected_reason,
    secret_match,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")


def test_every_protected_entry_has_a_reason_and_appears_once() -> None:
    assert all(entry.reason.strip() for entry in PROTECTED)
    assert len(set(PROTECTED_PATTERNS)) == len(PROTECTED_PATTERNS)


@pytest.mark.parametrize("path", [
    ".claude/settings.json", ".claude/settings.local.json", ".cursor/mcp.json",
    ".gemini/settings.json", ".continue/config.json", ".hg/hgrc", "sub/.HG/hgrc",
    ".windsurf/rules/x.md", ".roo/mcp.json", ".clinerules", ".aider.conf.yml",
    ".codex/config.toml", ".jj/repo/config.toml", "lefthook.yml", ".envrc", ".env",
    "mise.toml", ".github/workflows/ci.yml", ".gitlab/ci/x.yml", "bitbucket-pipelines.yml",
    ".yarn/plugins/p.cjs", "bunfig.toml", "rust-toolchain.toml", ".vscode/tasks.json",
    ".git/hooks/pre-commit", ".devcontainer/devcontainer.json", ".dir-locals.el",
])
def test_files_that_make_programs_run_commands_are_protected(path: str) -> None:
    assert protected_match(path) is not None
    assert protected_reason(path)


@pytest.mark.parametrize("path", [
    "package.json", "Makefile", "pyproject.toml", "src/app.py", "AGENTS.md", "CLAUDE.md",
    ".env.example", "docs/claude.md", "README.md",
])
def test_everyday_files_are_not_protected(path: str) -> None:
    assert protected_match(path) is None and protected_reason(path) is None


def test_the_reason_names_the_program() -> None:
    assert "Claude Code" in (protected_reason(".claude/settings.json") or "")
    assert "Mercurial" in (protected_reason(".hg/hgrc") or "")


def test_secret_rule_is_unchanged() -> None:
    assert secret_match(".env") and secret_match("a/.git/config") and secret_match("id_rsa")
    assert secret_match(".env.example") is None and secret_match("id_rsa.pub") is None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[remote] PLANTED")
    (root / ".env").write_text("KEY=PLANTED")
    (root / "notes.md").write_text("hello")
    (tmp_path / "outside.txt").write_text("PLANTED outside")
    return root


def test_plain_workspace_files_are_read(tree: Path) -> None:
    access = ModelFileAccess([tree])
    read = access.read_for_model("notes.md", max_bytes=100)
    assert isinstance(read, ModelFile) and read.text == "hello" and read.rel == "notes.md"
    cut = access.read_for_model("notes.md", max_bytes=2)
    assert isinstance(cut, ModelFile) and cut.text == "he" and cut.truncated


@pytest.mark.parametrize(("name", "target", "says"), [
    ("link.md", ".env", "link.md leads to .env"),
    ("AGENTS.md", ".git/config", "AGENTS.md leads to .git/config"),
    ("out.md", "../outside.txt", "leads outside the workspace"),
])
def test_links_to_secrets_or_out_are_withheld(tree: Path, name: str, target: str,
                                              says: str) -> None:
    (tree / name).symlink_to(target)
    result = ModelFileAccess([tree]).read_for_model(name, max_bytes=1000)
    assert isinstance(result, Withheld) and says in result.reason


def test_a_secret_name_linking_elsewhere_is_still_withheld(tree: Path) -> None:
    (tree / ".env.local").symlink_to("notes.md")
    assert isinstance(ModelFileAccess([tree]).check(".env.local"), Withheld)


def test_a_folder_link_into_git_is_seen(tree: Path) -> None:
    (tree / "docs").symlink_to(".git")
    result = ModelFileAccess([tree]).check("docs/config")
    assert isinstance(result, Withheld) and "docs/config leads to .git/config" in result.reason


def test_fifos_and_folders_are_not_read(tree: Path) -> None:
    os.mkfifo(tree / "pipe.md")
    access = ModelFileAccess([tree])
    assert access.read_for_model("pipe.md", max_bytes=10) is None  # no hang
    assert access.read_for_model(".git", max_bytes=10) is None
    assert access.read_for_model("missing.md", max_bytes=10) is None


def test_unconfined_checks_apply_only_the_secret_rule(tree: Path, tmp_path: Path) -> None:
    access = ModelFileAccess([tree])
    outside = access.check(tmp_path / "outside.txt", confine=False)
    assert isinstance(outside, ReadableFile)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host x")
    assert isinstance(access.check(tmp_path / ".ssh" / "config", confine=False), Withheld)
    assert isinstance(ModelFileAccess([]).check("notes.md"), Withheld)
    assert isinstance(access.check("a\0b"), Withheld)


def test_mcp_contents_answering_with_a_secret_uri_are_kept_back(tree: Path) -> None:
    from agentls.features.mcp.results import attachable_contents, withheld_resource

    env, notes = (tree / ".env").as_uri(), (tree / "notes.md").as_uri()
    kept, notes_out = attachable_contents(
        [{"uri": notes, "text": "hello"}, {"uri": env, "text": "KEY=PLANTED"},
         {"uri": "notes://today", "text": "milk"}, "junk"], [tree])
    assert [c["uri"] for c in kept] == [notes, "notes://today"]
    assert len(notes_out) == 1 and "PLANTED" not in notes_out[0] and env in notes_out[0]
    assert withheld_resource("notes://x", [tree]) is None
    assert withheld_resource((tree / ".git" / "config").as_uri(), [tree])
