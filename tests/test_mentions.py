"""`@file:` mentions: completions (fuzzy, bounded, descriptor shape) and
expansion into bounded attachments confined to the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentls.core.plugins.registry import PluginRegistry
from agentls.features.prompt import mentions
from agentls.features.prompt.mentions import (
    MentionsFeature,
    expand_mentions,
    find_mentions,
    fuzzy_score,
    mention_for,
    render_attachments,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "agentls").mkdir(parents=True)
    (root / "src" / "agentls" / "server.py").write_text("server = 1\n")
    (root / "src" / "agentls" / "state.py").write_text("state = 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "my notes.md").write_text("notes\n")
    (root / "README.md").write_text("readme\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "server.js").write_text("nope\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


def config(root: Path) -> dict[str, object]:
    return {"workspace_root": str(root), "workspace_folders": [str(root)]}


def disk_read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def test_completions_fuzzy_match_workspace_files(ws: Path) -> None:
    feature = MentionsFeature()
    text = "please look at @file:srvr"
    items = feature.get_completions(config(ws), text)
    assert items[0]["display"] == "src/agentls/server.py"
    assert items[0]["replacement"] == "@file:src/agentls/server.py"
    assert items[0]["start"] == text.index("@file:")
    assert all("node_modules" not in i["display"] for i in items)
    assert feature.apply_completion(config(ws), text, items[0]) == "@file:src/agentls/server.py"


def test_completions_rank_file_names_first(ws: Path) -> None:
    items = MentionsFeature().get_completions(config(ws), "@file:state")
    assert items[0]["display"] == "src/agentls/state.py"
    everything = MentionsFeature().get_completions(config(ws), "@file:")
    assert {i["display"] for i in everything} == {
        "README.md", "docs/my notes.md", "src/agentls/server.py", "src/agentls/state.py"}


def test_paths_with_spaces_are_quoted(ws: Path) -> None:
    items = MentionsFeature().get_completions(config(ws), "@file:notes")
    assert items[0]["replacement"] == '@file:"docs/my notes.md"'
    assert MentionsFeature().get_completions(config(ws), '@file:"my')[0]["display"] == \
        "docs/my notes.md"


def test_completions_are_bounded(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(80):
        (ws / f"gen_{i:03}.py").write_text("")
    monkeypatch.setattr(mentions, "LISTING_TTL_SECONDS", 0.0)
    items = MentionsFeature().get_completions(config(ws), "@file:gen")
    assert len(items) == mentions.MAX_COMPLETIONS


def test_prefix_and_non_mentions(ws: Path) -> None:
    feature = MentionsFeature()
    assert feature.get_completions(config(ws), "hello @")[0]["replacement"] == "@file:"
    assert feature.get_completions(config(ws), "hello @fi")[0]["start"] == 6
    assert feature.get_completions(config(ws), "mail me a@file:x") == []
    assert feature.get_completions(config(ws), "no mention here") == []
    assert feature.get_completions({}, "@file:x") == []  # no workspace


def test_fuzzy_score() -> None:
    assert fuzzy_score("xyz", "src/app.py") is None
    assert fuzzy_score("app", "src/app.py") is not None
    assert fuzzy_score("app", "src/app.py") > fuzzy_score("app", "a/p/p/other.py")  # type: ignore[operator]


def test_find_mentions() -> None:
    assert find_mentions('see @file:a.py and @file:"b c.md", not x@file:d') == [
        (4, 14, "a.py"), (19, 33, "b c.md")]
    assert mention_for("a b") == '@file:"a b"' and mention_for("a") == "@file:a"


def test_expand_mentions_attaches_content(ws: Path) -> None:
    text, attachments = expand_mentions(
        'explain @file:src/agentls/server.py and @file:"docs/my notes.md"', [ws], disk_read)
    assert text == "explain `src/agentls/server.py` and `docs/my notes.md`"
    assert attachments == [
        {"path": "src/agentls/server.py", "content": "server = 1\n", "truncated": False},
        {"path": "docs/my notes.md", "content": "notes\n", "truncated": False},
    ]
    rendered = render_attachments(attachments)
    assert '<file path="src/agentls/server.py">\nserver = 1\n\n</file>' in rendered


def test_expand_mentions_uses_the_reader(ws: Path) -> None:
    target = (ws / "README.md").resolve()
    _, attachments = expand_mentions(
        "@file:README.md", [ws], lambda p: "buffer" if p == target else None)
    assert attachments[0]["content"] == "buffer"


def test_expand_mentions_keeps_secret_files_back_with_the_reason(ws: Path) -> None:
    (ws / ".env").write_text("KEY=PLANTED\n")
    (ws / "cfg.txt").symlink_to(".env")
    reads: list[Path] = []

    def reader(path: Path) -> str | None:
        reads.append(path)
        return disk_read(path)

    _, attachments = expand_mentions("@file:.env", [ws], reader)
    _, linked = expand_mentions("@file:cfg.txt", [ws], reader)
    assert "PLANTED" not in str(attachments + linked) and reads == []  # never even read
    assert "read_file, which asks the user first" in attachments[0]["error"]
    assert "cfg.txt leads to .env" in linked[0]["error"]


def test_expand_mentions_refuses_outside_and_missing(ws: Path) -> None:
    text, attachments = expand_mentions(
        "@file:../secret.txt @file:missing.py", [ws], disk_read)
    assert "top secret" not in str(attachments)
    assert "outside the workspace" in attachments[0]["error"]
    assert attachments[1] == {"path": "missing.py", "error": attachments[1]["error"]}
    assert "could not be read" in attachments[1]["error"]
    assert 'error="' in render_attachments(attachments)
    assert text == "`../secret.txt` `missing.py`"


def test_expand_mentions_is_bounded(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mentions, "ATTACHMENT_MAX_CHARS", 10)
    monkeypatch.setattr(mentions, "ATTACHMENTS_MAX_TOTAL_CHARS", 15)
    (ws / "a.txt").write_text("a" * 50)
    (ws / "b.txt").write_text("b" * 50)
    (ws / "c.txt").write_text("c" * 50)
    _, attachments = expand_mentions(
        "@file:a.txt @file:b.txt @file:c.txt @file:a.txt", [ws], disk_read)
    assert [a["content"] for a in attachments] == ["a" * 10, "b" * 5, ""]
    assert all(a["truncated"] for a in attachments)
    monkeypatch.setattr(mentions, "MAX_MENTIONS", 1)
    _, limited = expand_mentions("@file:a.txt @file:b.txt", [ws], disk_read)
    assert "more than 1" in limited[1]["error"]


def test_no_workspace_means_no_attachment(ws: Path) -> None:
    text, attachments = expand_mentions("@file:README.md", [], disk_read)
    assert text == "`README.md`"
    assert "No workspace folder" in attachments[0]["error"]


def test_mentions_is_an_installed_feature_with_ui_elements(ws: Path) -> None:
    registry = PluginRegistry.discover()
    plugin = registry.get("feature", "mentions")
    assert isinstance(plugin, MentionsFeature)
    schema = registry.get_ui_schema(config(ws), plugins=[plugin])
    assert schema == [{"ui_type": "message_footer", "data": "metadata.mentions",
                       "template": "Attached: {{data}}", "plugin": "mentions"}]


def test_a_half_typed_prefix_completes_to_the_whole_one_for_files_and_mcp() -> None:
    from agentls.features.mcp import feature as mcp
    from agentls.features.prompt import mentions
    from agentls.features.prompt.mention_prefix import complete_mention_prefix

    for pattern, prefix in ((mentions._TYPING_PREFIX, "@file:"), (mcp._TYPING_PREFIX, "@mcp:")):
        for typed in ("@", prefix[:2], prefix[:-1]):
            items = complete_mention_prefix(f"see {typed}", pattern, prefix, "meta")
            assert items == [{"replacement": prefix, "start": 4, "display": prefix,
                              "display_meta": "meta"}], typed
        assert complete_mention_prefix("mail@", pattern, prefix, "meta") == []  # not a word start
        assert complete_mention_prefix("@x", pattern, prefix, "meta") == []
