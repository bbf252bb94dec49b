"""Prompt templates: built-in (explain, fix, tests, docstring, commit) and the
workspace's own in `.agentls/templates/*.md`.

A template is Markdown with placeholders `{{selection}}`, `{{language}}`,
`{{path}}` (alias `{{file}}`) and `{{diagnostics}}`, substituted by
`render()`. A placeholder whose value is unknown (None) stays as written, so
a template expanded in a chat prompt keeps `{{selection}}` visible for the
user (or the chat) to fill in.

User templates: the file stem is the name (`review.md` -> `/review`), and a
user template overrides a built-in of the same name. The description comes
from front matter (`description: ...` between `---` lines, which are not part
of the template), else from the first non-empty line (which is). Files are
re-read only when their mtime or size changes.

As a FeaturePlugin (entry point `templates`): get_completions offers `/name`
when the text before the cursor ends in `/` + a partial name at a word start;
apply_completion expands an accepted `/name` into the template text;
get_template returns the template named by config["template"], rendered when
the config carries selection / language / path / diagnostics. As a
PromptEnricher (core/editor/prompt_enrichment.py) it fills the placeholders a chat
prompt still carries from the editor context.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from agentls.core.editor.prompt_enrichment import PromptDraft, PromptSources

__all__ = [
    "BUILTIN_TEMPLATES",
    "Template",
    "TemplatesFeature",
    "find_template",
    "format_diagnostics",
    "list_templates",
    "render",
]

USER_DIR = Path(".agentls") / "templates"
MAX_TEMPLATE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    template: str
    source: Literal["builtin", "user"] = "builtin"
    path: str | None = None  # the file a user template was read from

    def to_wire(self) -> dict[str, Any]:
        """The `agentls/templates` entry (docs/protocol.md), plus `source`."""
        return {"name": self.name, "description": self.description,
                "template": self.template, "source": self.source}


_CODE = "```{{language}}\n{{selection}}\n```"

BUILTIN_TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "explain",
            "Explain what the selected code does",
            "Explain what this code does: its purpose, how it works, and anything "
            "surprising or risky in it.\n\n"
            f"File: {{{{path}}}}\n\n{_CODE}\n",
        ),
        Template(
            "fix",
            "Fix the problems reported in the selected code",
            "Fix these problems reported in {{path}}:\n\n{{diagnostics}}\n\n"
            f"The code they are reported in:\n\n{_CODE}\n\n"
            "Change as little as needed, keep the file's style, and say briefly what "
            "was wrong.\n",
        ),
        Template(
            "tests",
            "Write tests for the selected code",
            "Write tests for this code. Use the test framework and conventions the "
            "project already uses; cover the normal cases, the edge cases and the "
            "error handling.\n\n"
            f"File: {{{{path}}}}\n\n{_CODE}\n",
        ),
        Template(
            "docstring",
            "Write docstrings / doc comments for the selected code",
            "Write documentation comments (docstrings) for this code, in the style "
            "the file already uses: what each function or class is for, its "
            "parameters, what it returns and raises. Change nothing else.\n\n"
            f"File: {{{{path}}}}\n\n{_CODE}\n",
        ),
        Template(
            "commit",
            "Write a commit message for the selected changes",
            "Write a commit message for these changes: a summary line of at most 72 "
            "characters in the imperative mood, a blank line, then a short body "
            "saying what changed and why.\n\n```diff\n{{selection}}\n```\n",
        ),
    )
}


# -- rendering -------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{\{\s*(selection|language|path|file|diagnostics)\s*\}\}")
_SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}


def render(
    template: Template | str,
    *,
    selection: str | None = None,
    language: str | None = None,
    path: str | None = None,
    diagnostics: Sequence[Mapping[str, Any] | str] | None = None,
) -> str:
    """Substitute the placeholders in one pass (a selection that itself
    contains `{{path}}` is not substituted again). None means unknown: that
    placeholder is left as written."""
    text = template.template if isinstance(template, Template) else template
    values: dict[str, str | None] = {
        "selection": selection,
        "language": language,
        "path": path,
        "file": path,
        "diagnostics": None if diagnostics is None else format_diagnostics(diagnostics),
    }

    def substitute(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        return match.group(0) if value is None else value

    return _PLACEHOLDER.sub(substitute, text)


def format_diagnostics(diagnostics: Sequence[Mapping[str, Any] | str]) -> str:
    """One Markdown list line per diagnostic: `- line 3:5 error: message (ruff F821)`.
    Takes LSP Diagnostic dicts (0-based positions, shown 1-based) or strings."""
    if not diagnostics:
        return "(no diagnostics)"
    lines = []
    for diagnostic in diagnostics:
        if isinstance(diagnostic, str):
            lines.append(f"- {diagnostic}")
            continue
        parts = []
        start = (diagnostic.get("range") or {}).get("start") or {}
        if isinstance(start.get("line"), int):
            where = f"line {start['line'] + 1}"
            if isinstance(start.get("character"), int):
                where += f":{start['character'] + 1}"
            parts.append(where)
        level = diagnostic.get("severity")
        severity = _SEVERITY.get(level) if isinstance(level, int) else None
        head = " ".join(parts + ([severity] if severity else []))
        message = str(diagnostic.get("message", "")).strip()
        origin = " ".join(str(v) for v in (diagnostic.get("source"), diagnostic.get("code"))
                          if v not in (None, ""))
        line = f"{head}: {message}" if head else message
        lines.append(f"- {line} ({origin})" if origin else f"- {line}")
    return "\n".join(lines)


# -- user templates ----------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


def parse_template_file(name: str, text: str, path: str | None = None) -> Template:
    """A user template: optional `---` front matter (`description:`), else the
    first non-empty line (without leading `#`) describes it."""
    description = ""
    body = text
    match = _FRONT_MATTER.match(text)
    if match:
        body = text[match.end():]
        for line in match.group(1).splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "description":
                description = value.strip().strip("\"'")
    if not description:
        first = next((line for line in body.splitlines() if line.strip()), "")
        description = first.strip().lstrip("#").strip()
    return Template(name, description, body, source="user", path=path)


@dataclass
class _CachedFile:
    stamp: tuple[int, int, int]  # (mtime_ns, size, inode) of the file it leads to
    template: Template


def _read_template(root: Path, path: str, name: str) -> Template | None:
    """A template file read through the secret-file rule: its text goes to
    the model, so a template that is a link to `.env` (or out of the
    workspace) is listed with the reason instead of its text."""
    from agentls.core.editor.file_access import Withheld
    from agentls.features.policy.sensitive import ModelFileAccess

    result = ModelFileAccess([root]).read_for_model(path, max_bytes=MAX_TEMPLATE_BYTES)
    if result is None:
        return None
    if isinstance(result, Withheld):
        note = f"[agentls: the template {result.shown} was not loaded: {result.reason}]"
        return Template(name, f"not loaded: {result.reason}", note, source="user", path=path)
    text = result.text
    if result.truncated:
        text += (f"\n\n[agentls: {result.rel} is cut to its first "
                 f"{MAX_TEMPLATE_BYTES // 1024} KB.]")
    return parse_template_file(name, text, path)


class _UserTemplates:
    """Per-directory cache of parsed template files; a file is parsed again
    only when its (mtime, size, inode) changed, so listing costs one scandir."""

    def __init__(self) -> None:
        self._dirs: dict[str, dict[str, _CachedFile]] = {}
        self._lock = threading.Lock()

    def load(self, root: Path) -> list[Template]:
        directory = root / USER_DIR
        key = str(directory)
        try:
            entries = [e for e in os.scandir(directory)
                       if e.name.endswith(".md") and e.is_file()]
        except OSError:  # no such directory (the common case) or unreadable
            with self._lock:
                self._dirs.pop(key, None)
            return []
        with self._lock:
            cached = self._dirs.get(key, {})
            fresh: dict[str, _CachedFile] = {}
            for entry in entries:
                try:
                    st = entry.stat()
                except OSError:
                    continue
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                hit = cached.get(entry.name)
                if hit is None or hit.stamp != stamp:
                    template = _read_template(root, entry.path, entry.name[:-3])
                    if template is None:
                        continue
                    hit = _CachedFile(stamp, template)
                fresh[entry.name] = hit
            self._dirs[key] = fresh
        return sorted((c.template for c in fresh.values()), key=lambda t: t.name)


_USER_TEMPLATES = _UserTemplates()


def list_templates(workspace_root: str | os.PathLike[str] | None) -> list[Template]:
    """Built-ins and the workspace's templates, by name; a user template
    replaces the built-in of the same name."""
    merged = dict(BUILTIN_TEMPLATES)
    if workspace_root:
        for template in _USER_TEMPLATES.load(Path(workspace_root)):
            merged[template.name] = template
    return [merged[name] for name in sorted(merged)]


def find_template(workspace_root: str | os.PathLike[str] | None, name: str) -> Template | None:
    return next((t for t in list_templates(workspace_root) if t.name == name), None)


# -- the feature plugin ----------------------------------------------------------------

# `/` + partial name at the end of the text, at the start of a word.
_SLASH = re.compile(r"(?:^|(?<=\s))/([\w.-]*)\Z")


def _root(config: Mapping[str, Any]) -> str | None:
    root = config.get("workspace_root")
    return str(root) if root else None


def _render_from_config(template: Template, config: Mapping[str, Any]) -> str:
    diagnostics = config.get("diagnostics")
    return render(
        template,
        selection=_str_or_none(config.get("selection")),
        language=_str_or_none(config.get("language")),
        path=_str_or_none(config.get("path")),
        diagnostics=list(diagnostics) if isinstance(diagnostics, list | tuple) else None,
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class TemplatesFeature:
    """FeaturePlugin serving prompt templates (see the module docstring)."""

    name = "templates"
    version = "1.0.0"
    priority = 50

    def enrich_prompt(self, draft: PromptDraft, sources: PromptSources) -> PromptDraft:
        """A /template picked in the chat buffer arrives with its
        placeholders: {{selection}}, {{language}}, {{path}} and
        {{diagnostics}} are filled from the editor context."""
        if "{{" not in draft.text:
            return draft
        editor = sources.editor
        text = render(
            draft.text,
            selection=editor.selection or "(no selection)",
            language=editor.language,
            path=editor.path or "(no file)",
            diagnostics=list(editor.diagnostics),
        )
        used = bool(editor.selection) and "{{selection}}" in draft.text
        return replace(draft, text=text, used_selection=draft.used_selection or used)

    def list_templates(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        """What `agentls/templates` lists."""
        return [t.to_wire() for t in list_templates(_root(config))]

    def get_template(self, config: dict[str, Any]) -> str:
        name = config.get("template")
        if not isinstance(name, str):
            return ""
        template = find_template(_root(config), name)
        return _render_from_config(template, config) if template else ""

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        line_start = text.rfind("\n") + 1
        match = _SLASH.search(text[line_start:])
        if match is None:
            return []
        partial = match.group(1).lower()
        start = line_start + match.start()
        return [
            {
                "replacement": f"/{t.name}",
                "start": start,
                "display": f"/{t.name}",
                "display_meta": t.description,
                "kind": "snippet",
                "type": "template",
                "name": t.name,
                "documentation": t.template,
            }
            for t in list_templates(_root(config))
            if t.name.lower().startswith(partial)
        ]

    def apply_completion(
        self, config: dict[str, Any], text: str, completion: dict[str, Any]
    ) -> str:
        if completion.get("type") != "template":
            return ""
        name = completion.get("name")
        if not isinstance(name, str):
            return ""
        template = find_template(_root(config), name)
        return _render_from_config(template, config) if template else ""
