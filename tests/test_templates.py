"""The templates feature: built-ins, workspace templates (override, reload),
rendering, `/` completions and apply_completion."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentls.core.plugins.protocols import FeaturePlugin, plugin_call
from agentls.core.plugins.registry import PluginRegistry
from agentls.features.prompt import templates as tm
from agentls.features.prompt.templates import (
    BUILTIN_TEMPLATES,
    TemplatesFeature,
    find_template,
    format_diagnostics,
    list_templates,
    render,
)

BUILTINS = {"explain", "fix", "tests", "docstring", "commit"}


def _write(root: Path, name: str, text: str) -> Path:
    folder = root / ".agentls" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text)
    return path


def _bump_mtime(path: Path) -> None:
    # Coarse filesystem clocks: make the change visible whatever the resolution.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_builtins_are_listed_without_a_workspace() -> None:
    listed = list_templates(None)
    assert {t.name for t in listed} == BUILTINS
    assert [t.name for t in listed] == sorted(BUILTINS)
    for template in listed:
        assert template.description and template.source == "builtin"
    for name in ("explain", "fix", "tests", "docstring"):
        assert "{{selection}}" in BUILTIN_TEMPLATES[name].template
        assert "{{path}}" in BUILTIN_TEMPLATES[name].template
        assert "{{language}}" in BUILTIN_TEMPLATES[name].template
    assert "{{diagnostics}}" in BUILTIN_TEMPLATES["fix"].template
    assert "commit message" in BUILTIN_TEMPLATES["commit"].template


def test_user_templates_front_matter_first_line_and_override(tmp_path: Path) -> None:
    _write(tmp_path, "review", "---\ndescription: Review for bugs\n---\nReview {{selection}}\n")
    _write(tmp_path, "explain", "# Explain like I'm five\n\n{{selection}}\n")
    _write(tmp_path, "plain", "\n\nSummarise {{path}}.\n")
    (tmp_path / ".agentls" / "templates" / "notes.txt").write_text("not a template")

    by_name = {t.name: t for t in list_templates(tmp_path)}
    assert set(by_name) == BUILTINS | {"review", "plain"}
    review = by_name["review"]
    assert review.description == "Review for bugs"
    assert review.template == "Review {{selection}}\n"  # front matter is not part of it
    assert review.source == "user" and review.path and review.path.endswith("review.md")
    explain = by_name["explain"]  # the workspace's explain replaces the built-in
    assert explain.source == "user"
    assert explain.description == "Explain like I'm five"
    assert explain.template.startswith("# Explain like I'm five")  # first line stays
    assert by_name["plain"].description == "Summarise {{path}}."
    assert by_name["fix"].source == "builtin"


def test_user_templates_are_reread_when_changed_and_forgotten_when_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "review", "first version\n")
    assert find_template(tmp_path, "review").template == "first version\n"  # type: ignore[union-attr]

    reads: list[str] = []
    real_parse = tm.parse_template_file

    def counting_parse(*args: Any, **kwargs: Any) -> tm.Template:
        reads.append(args[0])
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(tm, "parse_template_file", counting_parse)
    for _ in range(3):
        assert find_template(tmp_path, "review").template == "first version\n"  # type: ignore[union-attr]
    assert reads == []  # unchanged file: not read again

    path.write_text("second version, longer\n")
    _bump_mtime(path)
    assert find_template(tmp_path, "review").template == "second version, longer\n"  # type: ignore[union-attr]
    assert reads == ["review"]

    _write(tmp_path, "added", "new\n")
    assert find_template(tmp_path, "added") is not None
    path.unlink()
    assert find_template(tmp_path, "review") is None


def test_render_substitutes_every_placeholder_once() -> None:
    text = render(
        BUILTIN_TEMPLATES["fix"],
        selection="x = undefined_name  # {{path}} stays literal",
        language="python",
        path="src/app.py",
        diagnostics=[
            {"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 18}},
             "message": "Undefined name `undefined_name`", "severity": 1,
             "source": "ruff", "code": "F821"},
            {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 1}},
             "message": "unused", "severity": 2},
            "a plain string diagnostic",
        ],
    )
    assert "{{selection}}" not in text and "{{diagnostics}}" not in text
    assert "```python\nx = undefined_name  # {{path}} stays literal\n```" in text
    assert "src/app.py" in text
    assert "- line 1:5 error: Undefined name `undefined_name` (ruff F821)" in text
    assert "- line 3:1 warning: unused" in text
    assert "- a plain string diagnostic" in text


def test_render_leaves_unknown_values_and_accepts_strings_and_aliases() -> None:
    assert render("{{selection}} in {{ path }}", selection="code") == "code in {{ path }}"
    assert render("{{file}}: {{language}}", path="a.py", language="") == "a.py: "
    assert render("{{diagnostics}}", diagnostics=[]) == format_diagnostics([])
    assert render("{{unknown}}", selection="x") == "{{unknown}}"


def test_format_diagnostics_without_positions() -> None:
    assert format_diagnostics([{"message": "boom"}]) == "- boom"
    assert format_diagnostics([{"message": "m", "severity": 4, "code": 7}]) == "- hint: m (7)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/", BUILTINS),
        ("/ex", {"explain"}),
        ("/EX", {"explain"}),
        ("please /te", {"tests"}),
        ("line one\n/do", {"docstring"}),
        ("  /c", {"commit"}),
        ("/nothing", set()),
        ("src/ex", set()),  # not at a word start
        ("http://", set()),
        ("/explain more words", set()),  # the cursor is past the name
        ("", set()),
        ("@file:", set()),
    ],
)
def test_slash_completions(text: str, expected: set[str]) -> None:
    found = TemplatesFeature().get_completions({}, text)
    assert {c["name"] for c in found} == expected
    for completion in found:
        assert completion["replacement"] == f"/{completion['name']}"
        assert completion["display"] == completion["replacement"]
        assert completion["display_meta"]
        assert text[completion["start"]] == "/"
        assert text[completion["start"]:].lower() in completion["replacement"]


def test_completions_include_workspace_templates(tmp_path: Path) -> None:
    _write(tmp_path, "review", "---\ndescription: Review for bugs\n---\nReview it\n")
    found = TemplatesFeature().get_completions({"workspace_root": str(tmp_path)}, "/re")
    assert [(c["display"], c["display_meta"]) for c in found] == [("/review", "Review for bugs")]


def test_apply_completion_expands_into_the_template() -> None:
    feature = TemplatesFeature()
    [completion] = feature.get_completions({}, "Ask: /expl")
    expanded = feature.apply_completion({}, "Ask: /explain", completion)
    assert expanded == BUILTIN_TEMPLATES["explain"].template  # nothing known: placeholders stay
    rendered = feature.apply_completion(
        {"selection": "print(1)", "language": "python", "path": "a.py"}, "/explain", completion)
    assert "```python\nprint(1)\n```" in rendered and "a.py" in rendered
    assert feature.apply_completion({}, "@file:x", {"replacement": "@file:x"}) == ""
    assert feature.apply_completion({}, "/gone", {"type": "template", "name": "gone"}) == ""


def test_get_template_by_name_and_rendered(tmp_path: Path) -> None:
    feature = TemplatesFeature()
    assert feature.get_template({}) == ""
    assert feature.get_template({"template": "nope"}) == ""
    assert feature.get_template({"template": "tests"}) == BUILTIN_TEMPLATES["tests"].template
    _write(tmp_path, "fix", "Fix {{diagnostics}} in {{selection}}")
    text = feature.get_template({"template": "fix", "workspace_root": str(tmp_path),
                                 "selection": "x", "diagnostics": ["bad"]})
    assert text == "Fix - bad in x"
    listed = feature.list_templates({"workspace_root": str(tmp_path)})
    fix = next(t for t in listed if t["name"] == "fix")
    assert fix == {"name": "fix", "description": "Fix {{diagnostics}} in {{selection}}",
                   "template": "Fix {{diagnostics}} in {{selection}}", "source": "user"}


def test_feature_is_found_through_its_entry_point() -> None:
    registry = PluginRegistry.discover()
    assert "templates" in registry.names("feature")
    plugin = registry.get("feature", "templates")
    assert isinstance(plugin, TemplatesFeature)
    found = plugin_call(plugin, FeaturePlugin, "get_completions", {}, "/fi")
    assert [c["name"] for c in found] == ["fix"]


def test_a_template_linking_to_a_secret_or_out_is_listed_with_the_reason(
    tmp_path: Path
) -> None:
    folder = tmp_path / "ws" / ".agentls" / "templates"
    folder.mkdir(parents=True)
    (tmp_path / "ws" / ".env").write_text("KEY=PLANTED")
    (tmp_path / "outside.md").write_text("PLANTED outside")
    (folder / "leak.md").symlink_to("../../.env")
    (folder / "out.md").symlink_to(tmp_path / "outside.md")
    listed = {t.name: t for t in tm.list_templates(tmp_path / "ws")}
    assert "PLANTED" not in str(listed)
    assert "reaches the model only through read_file" in listed["leak"].template
    assert "leads outside the workspace" in listed["out"].description
