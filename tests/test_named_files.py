"""Files a chat prompt names are attached (features/prompt/named_files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentls.core.editor.prompt_enrichment import PromptDraft, PromptSources
from agentls.core.editor.reply_edits import ReplySources
from agentls.features.prompt import named_files
from agentls.features.prompt.mentions import MentionsFeature
from agentls.features.prompt.named_files import (
    NAMED_FILE_MAX_CHARS,
    NamedFilesFeature,
    named_paths,
)
from agentls.features.reply_edits import feature as reply_feature
from agentls.features.tools.workspace import Workspace


def enrich(root: Path, text: str, **draft: object) -> PromptDraft:
    sources = PromptSources(workspace_folders=(str(root),))
    start = PromptDraft(text=text, **draft)  # type: ignore[arg-type]
    return NamedFilesFeature().enrich_prompt(start, sources)


def test_path_like_words() -> None:
    text = ("Fix pricing.py. See src/app/main.py, `utils.py` and (a.b.json); "
            "not https://x.org/y.py, me@mail.com, @file:z.py, v1.2 or e.g. this")
    # `v1.2` and `e.g` look like names too: no such file, so nothing is attached
    assert named_paths(text) == ["pricing.py", "src/app/main.py", "utils.py", "a.b.json",
                                 "v1.2", "e.g"]


def test_a_named_file_is_attached_with_its_text(tmp_path: Path) -> None:
    (tmp_path / "pricing.py").write_text("def f():\n    return 1\n")
    (tmp_path / "test_pricing.py").write_text("from pricing import f\n")
    out = enrich(tmp_path, "The test in test_pricing.py fails. Fix pricing.py.")
    (block,) = out.attachments
    assert '<file path="test_pricing.py">\nfrom pricing import f\n\n</file>' in block
    assert '<file path="pricing.py">\ndef f():\n    return 1\n\n</file>' in block
    assert out.metadata["mentions"] == ["test_pricing.py", "pricing.py"]
    assert out.text == "The test in test_pricing.py fails. Fix pricing.py."


def test_a_named_module_brings_what_it_imports_and_what_imports_it(tmp_path: Path) -> None:
    (tmp_path / "config.py").write_text('HOST = "127.0.0.5"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text("def port():\n    return 8421\n")
    (tmp_path / "server.py").write_text("import os, config\nfrom pkg.util import port\n")
    (tmp_path / "unrelated.py").write_text("import json\n")
    out = enrich(tmp_path, "Where does server.py listen?")
    assert out.metadata["mentions"] == ["server.py", "config.py", "pkg/util.py"]

    rename = tmp_path / "rename"  # a folder of its own: the listing is cached a while
    rename.mkdir()
    (rename / "geometry.py").write_text("def area_of(w, h):\n    return w * h\n")
    (rename / "report.py").write_text("from geometry import area_of\n")
    (rename / "test_geometry.py").write_text("import geometry\n")
    out = enrich(rename, "Rename area_of in geometry.py to rectangle_area.")
    assert out.metadata["mentions"] == ["geometry.py", "report.py"]  # not its test
    # Named files come first and the limit holds for the neighbours too.
    many = tmp_path / "many"
    many.mkdir()
    (many / "geometry.py").write_text("def area_of(w, h):\n    return w * h\n")
    for n in range(6):
        (many / f"use{n}.py").write_text("import geometry\n")
    out = enrich(many, "Rename area_of in geometry.py to rectangle_area.")
    assert len(out.metadata["mentions"]) == named_files.MAX_NAMED_FILES
    assert out.metadata["mentions"][0] == "geometry.py"


def test_a_name_alone_finds_the_one_file_that_has_it(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lists.py").write_text("def chunk(): ...\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "util.py").write_text("A\n")
    (tmp_path / "b" / "util.py").write_text("B\n")
    out = enrich(tmp_path, "Implement chunk in lists.py, then look at util.py")
    assert out.metadata["mentions"] == ["src/lists.py"]  # util.py: two files, none chosen


def test_what_is_not_attached(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEY=sk-secret\n")
    (tmp_path / "big.py").write_text("x = 1\n" * (NAMED_FILE_MAX_CHARS // 6 + 1))
    (tmp_path / "folder.d").mkdir()
    outside = tmp_path.parent / "outside.py"
    outside.write_text("secret = 1\n")
    text = "Read .env, big.py, folder.d, missing.py, ../outside.py and /etc/hostname.txt"
    out = enrich(tmp_path, text)
    assert out.attachments == () and "mentions" not in out.metadata


def test_a_file_mentioned_with_at_file_is_not_attached_twice(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    sources = PromptSources(workspace_folders=(str(tmp_path),))
    draft = MentionsFeature().enrich_prompt(PromptDraft(text="explain @file:a.py"), sources)
    assert draft.metadata["mentions"] == ["a.py"]
    out = NamedFilesFeature().enrich_prompt(draft, sources)
    assert out is draft  # `a.py` in the text now, but attached already


def test_open_buffers_are_read_first(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("on disk\n")

    def documents(path: Path) -> str | None:
        return "unsaved buffer\n" if path.name == "a.py" else None

    sources = PromptSources(workspace_folders=(str(tmp_path),), documents=documents)
    out = NamedFilesFeature().enrich_prompt(PromptDraft(text="What is in a.py?"), sources)
    assert "unsaved buffer" in out.attachments[0] and "on disk" not in out.attachments[0]


def test_a_file_whose_text_is_already_in_the_prompt_is_not_attached(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    out = enrich(tmp_path, "Explain calc.py:\n```\ndef add(a, b):\n    return a - b\n```")
    assert out.attachments == ()


def _counting_lookups(monkeypatch: pytest.MonkeyPatch, module: object) -> list[str]:
    looked: list[str] = []
    real = named_files.find_named_file

    def counted(workspace: Workspace, word: str, folders: tuple[str, ...]) -> Path | None:
        looked.append(word)
        return real(workspace, word, folders)

    monkeypatch.setattr(module, "find_named_file", counted)
    return looked


def test_a_pasted_log_naming_thousands_of_files_is_not_looked_up_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pricing.py").write_text("def f():\n    return 1\n")
    looked = _counting_lookups(monkeypatch, named_files)
    log = "\n".join(f"f{i}.py" for i in range(12_000))
    out = enrich(tmp_path, f"Fix pricing.py. The log:\n{log}")
    assert out.metadata["mentions"] == ["pricing.py"]
    assert len(looked) <= 200  # named_files.MAX_NAMED_WORDS


def test_reply_edits_look_up_the_reply_s_files_not_every_file_the_session_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose history names 12,000 files: the next reply looks up
    its own file and the session's latest Python files, and still merges."""
    (tmp_path / "pricing.py").write_text("def f():\n    return 1\n")
    (tmp_path / "util.py").write_text("def g():\n    return 1\n")
    looked = _counting_lookups(monkeypatch, reply_feature)
    log = "\n".join(f"ERROR in logs/f{i}.txt" for i in range(12_000))
    seen = ("Fix util.py and pricing.py", log, "def f():\n    return 1\n",
            "def g():\n    return 1\n")
    reply = ('<file path="pricing.py">\ndef f():\n    return 2\n</file>\n'
             "```python\ndef g():\n    return 2\n```\n")
    edits = reply_feature.ReplyEditsFeature().reply_edits(
        reply, ReplySources((str(tmp_path),), None, seen))
    written = {c.arguments["path"]: c.arguments["content"] for c in edits.calls}
    assert written == {"pricing.py": "def f():\n    return 2\n",
                       "util.py": "def g():\n    return 2\n"}  # found by its definition
    assert len(looked) <= 101  # its own file and MAX_SEEN_PYTHON_FILES
