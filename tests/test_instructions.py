"""Project instruction files (core/context/instructions.py) on a real directory tree."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from agentls.core.context.instructions import (
    DEFAULT_INSTRUCTION_FILES,
    MAX_INSTRUCTION_DEPTH,
    ProjectInstructions,
    render_instructions,
)
from agentls.features.policy.sensitive import ModelFileAccess


def project(root: Path | None, names: Sequence[str] = DEFAULT_INSTRUCTION_FILES
            ) -> ProjectInstructions:
    """Instructions read through the secret-file rule, as the server does."""
    return ProjectInstructions(root, names, reader=ModelFileAccess([root] if root else []))


def test_first_name_found_at_the_root_wins(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("claude rules")
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "copilot-instructions.md").write_text("copilot rules")
    found = project(tmp_path).root_file()
    assert found is not None and (found.path, found.text) == ("CLAUDE.md", "claude rules")
    (tmp_path / "AGENTS.md").write_text("agents rules")
    found = project(tmp_path).root_file()
    assert found is not None and found.path == "AGENTS.md"
    only = project(tmp_path, [".github/copilot-instructions.md"]).root_file()
    assert only is not None and only.text == "copilot rules"
    assert project(tmp_path, ["NOPE.md"]).root_file() is None
    assert project(None).root_file() is None


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    target = tmp_path / "AGENTS.md"
    target.write_text("one")
    instructions = project(tmp_path)
    assert instructions.root_file().text == "one"  # type: ignore[union-attr]
    target.write_text("two!")
    os.utime(target, ns=(1, 1))  # even a file whose mtime went back is noticed (size)
    assert instructions.root_file().text == "two!"  # type: ignore[union-attr]
    target.unlink()
    assert instructions.root_file() is None


def test_files_over_32_kb_are_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"a" * 40_000)
    found = project(tmp_path).root_file()
    assert found is not None and found.truncated and found.size == 40_000
    assert found.text.startswith("a" * 32 * 1024)
    assert "AGENTS.md is 40,000 bytes; only its first 32 KB are included" in found.text
    # A multi-byte character cut at the limit does not break the text.
    (tmp_path / "AGENTS.md").write_bytes(b"a" * (32 * 1024 - 1) + "é".encode() * 10)
    assert project(tmp_path).root_file() is not None


def test_subfolder_files_apply_for_paths_under_them(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("root")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("in a")
    (tmp_path / "a" / "b" / "CLAUDE.md").write_text("in b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "AGENTS.md").write_text("in c")
    instructions = project(tmp_path)
    assert [f.path for f in instructions.files_for([])] == ["AGENTS.md"]
    deep = instructions.files_for(["a/b/x.py"])
    assert [f.path for f in deep] == ["AGENTS.md", "a/AGENTS.md", "a/b/CLAUDE.md"]
    assert [f.path for f in instructions.files_for([str(tmp_path / "c" / "new.py"),
                                                    "a/y.py", "a/z.py"])] == [
        "AGENTS.md", "c/AGENTS.md", "a/AGENTS.md"]
    # Outside the workspace: never read.
    outside = tmp_path.parent / "elsewhere"
    outside.mkdir(exist_ok=True)
    (outside / "AGENTS.md").write_text("not ours")
    assert [f.path for f in instructions.files_for([str(outside / "x.py"), "../x.py"])] == [
        "AGENTS.md"]


def test_a_symlink_out_of_the_workspace_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").symlink_to(secret)
    found = project(root).root_file()
    # Not read; the prompt says which file was kept back and why.
    assert found is not None and found.withheld and "private" not in found.text
    assert "leads outside the workspace" in found.text


def test_render_fits_a_small_window(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("r" * 10_000)
    files = project(tmp_path).files_for([])
    full = render_instructions(files)
    assert '<instructions file="AGENTS.md">' in full and "r" * 10_000 in full
    small = render_instructions(files, max_chars=2000)
    assert len(small) < 2600 and "cut to its first 2,000 characters" in small
    assert render_instructions([]) == ""


def test_paths_the_model_made_up_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("root")
    instructions = project(tmp_path)
    found = instructions.files_for(["a\x00b.py", "", "/", "x" * 5000])
    assert [f.path for f in found] == ["AGENTS.md"]
    assert project(tmp_path, ["BAD\x00.md"]).root_file() is None


def test_without_a_reader_nothing_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rules")
    assert ProjectInstructions(tmp_path).root_file() is None


def test_secret_files_are_withheld_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("KEY=sk-secret")
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[remote] PLANTED")
    (tmp_path / "sub" / "CLAUDE.md").symlink_to("../.git/config")
    named = project(tmp_path, [".env"]).root_file()
    assert named is not None and named.withheld and "sk-secret" not in named.text
    assert "reaches the model only through read_file" in named.text
    found = project(tmp_path).files_for(["sub/x.py"])
    assert [f.path for f in found] == ["sub/CLAUDE.md"] and found[0].withheld
    assert found[0].shown().startswith("sub/CLAUDE.md (not sent: sub/CLAUDE.md leads to")
    assert "sub/CLAUDE.md leads to .git/config" in found[0].text
    section = render_instructions(found)
    assert "PLANTED" not in section and 'withheld="true"' in section


def test_deep_paths_cost_a_bounded_number_of_file_system_calls(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("root")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "AGENTS.md").write_text("in d")
    instructions = project(tmp_path)
    deep = ["d/" * 2000 + f"f{i}.py" for i in range(20)]
    found = instructions.files_for(deep)
    assert [f.path for f in found] == ["AGENTS.md", "d/AGENTS.md"]
    first = instructions.stats
    # Each path resolves at most max_depth folders (not 2,000); the folders
    # they share are looked in once.
    assert first <= 20 * (MAX_INSTRUCTION_DEPTH + 1) + (MAX_INSTRUCTION_DEPTH + 1) * 6, first
    # Again (the next model call): the paths' folders are remembered, each
    # folder costs its stamps.
    instructions.files_for(deep)
    assert instructions.stats - first <= (MAX_INSTRUCTION_DEPTH + 1) * 3


def test_a_new_or_changed_nested_file_is_seen_through_the_cache(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    instructions = project(tmp_path)
    assert instructions.files_for(["a/b/x.py"]) == []
    (tmp_path / "a" / "AGENTS.md").write_text("new")
    assert [f.text for f in instructions.files_for(["a/b/x.py"])] == ["new"]
    (tmp_path / "a" / "AGENTS.md").write_text("changed")
    assert [f.text for f in instructions.files_for(["a/b/x.py"])] == ["changed"]
    (tmp_path / "a" / "AGENTS.md").unlink()
    (tmp_path / "a" / "AGENTS.md").symlink_to("../.env")
    (tmp_path / ".env").write_text("SECRET=1")
    [withheld] = instructions.files_for(["a/b/x.py"])
    assert withheld.withheld and "SECRET" not in withheld.text
