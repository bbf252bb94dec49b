"""Project instruction files (core/instructions.py) on a real directory tree."""

from __future__ import annotations

import os
from pathlib import Path

from agentls.core.instructions import ProjectInstructions, render_instructions


def test_first_name_found_at_the_root_wins(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("claude rules")
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "copilot-instructions.md").write_text("copilot rules")
    found = ProjectInstructions(tmp_path).root_file()
    assert found is not None and (found.path, found.text) == ("CLAUDE.md", "claude rules")
    (tmp_path / "AGENTS.md").write_text("agents rules")
    found = ProjectInstructions(tmp_path).root_file()
    assert found is not None and found.path == "AGENTS.md"
    only = ProjectInstructions(tmp_path, [".github/copilot-instructions.md"]).root_file()
    assert only is not None and only.text == "copilot rules"
    assert ProjectInstructions(tmp_path, ["NOPE.md"]).root_file() is None
    assert ProjectInstructions(None).root_file() is None


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    target = tmp_path / "AGENTS.md"
    target.write_text("one")
    instructions = ProjectInstructions(tmp_path)
    assert instructions.root_file().text == "one"  # type: ignore[union-attr]
    target.write_text("two!")
    os.utime(target, ns=(1, 1))  # even a file whose mtime went back is noticed (size)
    assert instructions.root_file().text == "two!"  # type: ignore[union-attr]
    target.unlink()
    assert instructions.root_file() is None


def test_files_over_32_kb_are_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"a" * 40_000)
    found = ProjectInstructions(tmp_path).root_file()
    assert found is not None and found.truncated and found.size == 40_000
    assert found.text.startswith("a" * 32 * 1024)
    assert "AGENTS.md is 40,000 bytes; only its first 32 KB are included" in found.text
    # A multi-byte character cut at the limit does not break the text.
    (tmp_path / "AGENTS.md").write_bytes(b"a" * (32 * 1024 - 1) + "é".encode() * 10)
    assert ProjectInstructions(tmp_path).root_file() is not None


def test_subfolder_files_apply_for_paths_under_them(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("root")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("in a")
    (tmp_path / "a" / "b" / "CLAUDE.md").write_text("in b")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "AGENTS.md").write_text("in c")
    instructions = ProjectInstructions(tmp_path)
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
    assert ProjectInstructions(root).root_file() is None


def test_render_fits_a_small_window(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("r" * 10_000)
    files = ProjectInstructions(tmp_path).files_for([])
    full = render_instructions(files)
    assert '<instructions file="AGENTS.md">' in full and "r" * 10_000 in full
    small = render_instructions(files, max_chars=2000)
    assert len(small) < 2600 and "cut to its first 2,000 characters" in small
    assert render_instructions([]) == ""


def test_paths_the_model_made_up_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("root")
    instructions = ProjectInstructions(tmp_path)
    found = instructions.files_for(["a\x00b.py", "", "/", "x" * 5000])
    assert [f.path for f in found] == ["AGENTS.md"]
    assert ProjectInstructions(tmp_path, ["BAD\x00.md"]).root_file() is None
