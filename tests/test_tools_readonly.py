"""The read-only tools: confinement (`..`, absolute paths, symlinks), open
buffers before the disk, output caps, ignore rules, previews; run through
the core's ToolExecutor as the orchestrator runs them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from agentls.core.plugins.registry import PluginRegistry
from agentls.core.tools.contract import ToolContext
from agentls.core.tools.executor import ToolExecution, ToolExecutor
from agentls.core.types.messages import ToolCall
from agentls.features.tools import ListFilesTool, ReadFileTool, SearchTextTool, readonly
from agentls.features.tools.ignore import IgnoreRules
from agentls.features.tools.workspace import Workspace, matches_glob


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'disk'\n")
    (root / "src" / "pkg" / "util.py").write_text("X = 1\nneedle here\n")
    (root / "README.md").write_text("# readme\nneedle in readme\n")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "index.js").write_text("needle\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("needle\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("needle\n")
    (root / ".gitignore").write_text("# comment\nbuild/\n*.log\n!keep.log\n")
    (root / "debug.log").write_text("needle\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


def run(
    tool: str,
    arguments: dict[str, Any],
    root: Path,
    *,
    documents: dict[Path, str] | None = None,
    folders: list[Path] | None = None,
) -> ToolExecution:
    executor = ToolExecutor([ReadFileTool(), ListFilesTool(), SearchTextTool()], {})
    docs = documents or {}
    context = {
        "workspace_folders": [str(f) for f in (folders if folders is not None else [root])],
        "documents": lambda path: docs.get(path),
    }
    call = ToolCall(id="c1", tool=tool, arguments=arguments)
    return asyncio.run(asyncio.wait_for(
        executor.execute(call, ToolContext.from_mapping(context)), 10))


# -- read_file --------------------------------------------------------------------------


def test_read_file_reads_disk_relative_to_the_root(ws: Path) -> None:
    done = run("read_file", {"path": "src/app.py"}, ws)
    assert done.result.success
    assert done.result.output["source"] == "disk"
    assert done.result.output["path"] == "src/app.py"
    assert done.content == "def main():\n    return 'disk'\n"


def test_read_file_prefers_the_open_buffer(ws: Path) -> None:
    target = (ws / "src" / "app.py").resolve()
    done = run("read_file", {"path": "src/app.py"}, ws, documents={target: "unsaved buffer"})
    assert done.result.output["source"] == "buffer"
    assert done.content == "unsaved buffer"


def test_read_file_of_a_buffer_not_yet_on_disk(ws: Path) -> None:
    target = (ws / "new.py").resolve()
    done = run("read_file", {"path": "new.py"}, ws, documents={target: "fresh"})
    assert done.result.success and done.content == "fresh"


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd"])
def test_paths_outside_the_workspace_are_refused(ws: Path, path: str) -> None:
    done = run("read_file", {"path": path}, ws)
    assert not done.result.success
    assert done.result.error is not None
    assert done.result.error["code"] == "outside_workspace"
    assert "outside the workspace" in done.content
    assert "top secret" not in done.content


def test_absolute_path_inside_the_workspace_is_fine(ws: Path) -> None:
    done = run("read_file", {"path": str(ws / "README.md")}, ws)
    assert done.result.success and "needle in readme" in done.content


def test_symlink_leading_outside_is_refused(ws: Path) -> None:
    os.symlink(ws.parent / "secret.txt", ws / "link.txt")
    done = run("read_file", {"path": "link.txt"}, ws)
    assert not done.result.success
    assert done.result.error and done.result.error["code"] == "outside_workspace"
    listed = run("list_files", {}, ws)
    assert "link.txt" not in listed.result.output["files"]
    searched = run("search_text", {"pattern": "secret"}, ws)
    assert searched.result.output["matches"] == []


def test_symlinked_directory_leading_outside_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.py").write_text("needle outside\n")
    os.symlink(outside, ws / "escape")
    assert not run("read_file", {"path": "escape/x.py"}, ws).result.success
    listed = run("list_files", {}, ws).result.output["files"]
    assert not any(f.startswith("escape") for f in listed)
    searched = run("search_text", {"pattern": "needle outside"}, ws).result.output
    assert searched["matches"] == []


def test_symlink_inside_the_workspace_is_followed(ws: Path) -> None:
    os.symlink(ws / "src" / "app.py", ws / "alias.py")
    done = run("read_file", {"path": "alias.py"}, ws)
    assert done.result.success and "disk" in done.content
    assert done.result.output["path"] == "src/app.py"  # the real file


def test_second_workspace_folder_is_allowed(ws: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.txt").write_text("in other")
    done = run("read_file", {"path": str(other / "b.txt")}, ws, folders=[ws, other])
    assert done.result.success and done.content == "in other"
    assert done.result.output["path"] == "other/b.txt"


def test_no_workspace_folder(ws: Path) -> None:
    done = run("read_file", {"path": "src/app.py"}, ws, folders=[])
    assert not done.result.success
    assert done.result.error and done.result.error["code"] == "no_workspace"
    assert "open a folder" in done.content


def test_read_file_errors_are_for_the_agent(ws: Path) -> None:
    missing = run("read_file", {"path": "nope.py"}, ws)
    assert not missing.result.success and "does not exist" in missing.content
    folder = run("read_file", {"path": "src"}, ws)
    assert "directory" in folder.content and "list_files" in folder.content
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    assert "binary" in run("read_file", {"path": "blob.bin"}, ws).content
    no_path = run("read_file", {}, ws)
    assert not no_path.result.success and "'path' is required" in no_path.content
    bad_type = run("read_file", {"path": 3}, ws)
    assert not bad_type.result.success and "must be a string" in bad_type.content


def test_read_file_truncates_big_files_with_a_note(ws: Path) -> None:
    (ws / "big.txt").write_text("x" * (readonly.READ_MAX_CHARS + 5000))
    done = run("read_file", {"path": "big.txt"}, ws)
    assert done.result.success and done.result.output["truncated"] is True
    assert len(done.result.output["content"]) == readonly.READ_MAX_CHARS
    assert "truncated" in done.content
    big_buffer = {(ws / "src/app.py").resolve(): "y" * (readonly.READ_MAX_CHARS + 1)}
    buffered = run("read_file", {"path": "src/app.py"}, ws, documents=big_buffer)
    assert buffered.result.output["truncated"] is True


# -- list_files ---------------------------------------------------------------------------


def test_list_files_skips_ignored_folders_and_gitignored_files(ws: Path) -> None:
    files = run("list_files", {}, ws).result.output["files"]
    assert "src/app.py" in files and "src/pkg/util.py" in files and "README.md" in files
    assert ".gitignore" in files
    for hidden in ("node_modules/dep/index.js", ".git/config", "build/out.txt", "debug.log"):
        assert hidden not in files


def test_list_files_path_and_glob(ws: Path) -> None:
    assert run("list_files", {"path": "src"}, ws).result.output["files"] == [
        "src/app.py", "src/pkg/util.py"]
    py = run("list_files", {"glob": "*.py"}, ws).result.output["files"]
    assert py == ["src/app.py", "src/pkg/util.py"]
    nested = run("list_files", {"glob": "src/**/*.py"}, ws).result.output["files"]
    assert nested == ["src/app.py", "src/pkg/util.py"]
    only_pkg = run("list_files", {"glob": "pkg/*.py", "path": "src"}, ws).result.output["files"]
    assert only_pkg == ["src/pkg/util.py"]
    outside = run("list_files", {"path": ".."}, ws)
    assert not outside.result.success


def test_list_files_is_capped(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readonly, "LIST_MAX_FILES", 3)
    done = run("list_files", {}, ws)
    assert len(done.result.output["files"]) == 3
    assert done.result.output["truncated"] is True
    assert "stopped at 3 files" in done.content


# -- search_text --------------------------------------------------------------------------


def test_search_text_finds_lines_and_skips_ignored(ws: Path) -> None:
    done = run("search_text", {"pattern": "needle"}, ws)
    paths = {m["path"] for m in done.result.output["matches"]}
    assert paths == {"README.md", "src/pkg/util.py"}
    assert "src/pkg/util.py:2: needle here" in done.content


def test_search_text_prefers_buffers(ws: Path) -> None:
    docs = {(ws / "src/app.py").resolve(): "a\nneedle only in the buffer\n"}
    done = run("search_text", {"pattern": "needle only", "path": "src"}, ws, documents=docs)
    assert done.result.output["matches"] == [
        {"path": "src/app.py", "line": 2, "text": "needle only in the buffer"}]


def test_search_text_regex_glob_and_literal_fallback(ws: Path) -> None:
    anchored = run("search_text", {"pattern": "^needle", "glob": "*.py"}, ws)
    assert [m["path"] for m in anchored.result.output["matches"]] == ["src/pkg/util.py"]
    literal = run("search_text", {"pattern": "return 'disk'("}, ws)
    assert literal.result.output["literal"] is True
    assert literal.result.output["matches"] == []
    (ws / "paren.txt").write_text("call(x\n")
    found = run("search_text", {"pattern": "call(x"}, ws)
    assert [m["path"] for m in found.result.output["matches"]] == ["paren.txt"]
    assert "plain text" in found.content
    one_file = run("search_text", {"pattern": "def", "path": "src/app.py"}, ws)
    assert one_file.result.output["matches"][0]["line"] == 1
    assert not run("search_text", {}, ws).result.success


def test_search_text_is_capped(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    monkeypatch.setattr(readonly, "SEARCH_MAX_MATCHES", 10)
    done = run("search_text", {"pattern": "hit"}, ws)
    assert len(done.result.output["matches"]) == 10 and done.result.output["truncated"]
    assert "stopped after 10 matches" in done.content
    (ws / "long.txt").write_text("needle" + "z" * 1000 + "\n")
    long = run("search_text", {"pattern": "needle", "path": "long.txt"}, ws)
    assert len(long.result.output["matches"][0]["text"]) == readonly.SEARCH_MAX_LINE_CHARS


# -- plumbing -------------------------------------------------------------------------------


def test_previews_are_one_line() -> None:
    executor = ToolExecutor([ReadFileTool(), ListFilesTool(), SearchTextTool()], {})
    assert executor.preview(ToolCall(id="1", tool="read_file", arguments={"path": "a.py"})) \
        == "read_file a.py"
    assert executor.preview(ToolCall(id="2", tool="list_files", arguments={"glob": "*.py"})) \
        == "list_files . (glob *.py)"
    assert executor.preview(
        ToolCall(id="3", tool="search_text", arguments={"pattern": "x+", "path": "src"})
    ) == "search_text /x+/ in src"


def test_workspace_comes_from_plugin_config_without_a_context(ws: Path) -> None:
    executor = ToolExecutor([ReadFileTool()], {"workspace_root": str(ws)})
    call = ToolCall(id="c", tool="read_file", arguments={"path": "README.md"})
    done = asyncio.run(asyncio.wait_for(executor.execute(call, {}), 10))
    assert done.result.success and "readme" in done.content


def test_tools_are_installed_entry_points() -> None:
    registry = PluginRegistry.discover()
    assert {"read_file", "list_files", "search_text"} <= set(registry.names("tool"))
    executor = ToolExecutor(registry.plugins("tool"), {})
    assert {"read_file", "list_files", "search_text"} <= {s["name"] for s in executor.specs}
    spec = next(s for s in executor.specs if s["name"] == "search_text")
    assert spec["parameters"]["required"] == ["pattern"]


def test_ignore_rules_and_globs(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("/dist\n*.tmp\ncache/\ndocs/**/draft.md\n!keep.tmp\n\n")
    (tmp_path / "pkg").mkdir()
    # a nested .gitignore applies to its folder, and may re-include what a parent ignores
    (tmp_path / "pkg" / ".gitignore").write_text("secret-notes.md\n!wanted.tmp\n")
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("local-only.txt\n")
    rules = IgnoreRules(tmp_path)
    assert rules.ignored("dist", is_dir=True) and not rules.ignored("src/dist", is_dir=True)
    assert rules.ignored("a/b/x.tmp", is_dir=False) and not rules.ignored("keep.tmp", is_dir=False)
    assert rules.ignored("a/cache", is_dir=True) and not rules.ignored("a/cache", is_dir=False)
    assert rules.ignored("docs/x/y/draft.md", is_dir=False)
    assert rules.ignored("sub/node_modules", is_dir=True)
    assert rules.ignored("pkg/secret-notes.md", is_dir=False)
    assert not rules.ignored("secret-notes.md", is_dir=False)  # only under pkg/
    assert not rules.ignored("pkg/wanted.tmp", is_dir=False)
    assert rules.ignored("pkg/other.tmp", is_dir=False)
    assert rules.ignored("local-only.txt", is_dir=False)
    assert matches_glob("a/b/c.py", "*.py") and matches_glob("a/b/c.py", "a/**/*.py")
    assert matches_glob("x.ts", "*.{ts,tsx}") and not matches_glob("a/b/c.py", "b/*.py")


def test_file_uri_paths_are_accepted(ws: Path) -> None:
    workspace = Workspace.of([ws])
    assert workspace.resolve((ws / "README.md").as_uri()) == (ws / "README.md").resolve()
