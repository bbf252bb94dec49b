"""Files a chat prompt names are attached to it: "fix the bug in
pricing.py" sends pricing.py's text along, as an `@file:` mention would.

A model that has not seen a file guesses at it: the small local models
edited files they had never read, with invented `old_string`s, and answered
questions about files without reading them (bench/HISTORY.md, "Agent
tasks"). Aider adds the files a chat names in the same spirit. What counts
as naming a file: a word with a file extension (or a `/`) that is a file
of the workspace, by its relative path, or by its name alone when exactly
one file has that name. Only small files are attached whole (a large one is
left for read_file to page through), at most a few per prompt, never a
secret file (sensitive_paths.ModelFileAccess, the rule read_file asks
under), never twice (an `@file:` mention already attached it). The
message's footer ("Attached: ...") lists them, like mentions.

A named Python file brings its neighbours in the import graph, after the
named files and within the same limits: the workspace modules it imports
(a question about `server.py`'s port needs the `config.py` it imports) and
the modules that import it, tests apart (a rename must reach its callers).
The small models did not read them on their own (bench/README.md, "Agent
tasks"); Aider's repository map serves the same need.

Turned off with `features.disabled: ["named-files"]`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path, PurePosixPath

from agentls.core.editor.file_access import Withheld
from agentls.core.editor.prompt_enrichment import PromptDraft, PromptSources
from agentls.features.policy.sensitive import ModelFileAccess
from agentls.features.prompt.mentions import LISTINGS, render_attachments
from agentls.features.reply_edits.checks import is_test
from agentls.features.tools.workspace import Workspace, WorkspacePathError

__all__ = ["NAMED_FILE_MAX_CHARS", "NamedFilesFeature", "find_named_file", "named_paths"]

NAMED_FILE_MAX_CHARS = 12_000  # a file larger than this is not attached
NAMED_FILES_MAX_TOTAL_CHARS = 24_000
MAX_NAMED_FILES = 4
MAX_NAMED_WORDS = 200  # words looked up as files: a pasted log may name thousands
MAX_SCANNED_FOR_IMPORTERS = 200  # Python files read to find who imports a named one

# A path-like word: letters, digits, `_ . / -`, ending in `.ext`; not part of
# a URL, an e-mail address, a mention or a longer word.
_NAMED = re.compile(r"(?<![\w@:/.-])((?:[\w-]+/)*[\w.-]*\w\.[A-Za-z0-9]{1,8})(?![\w/-])")


def named_paths(text: str) -> list[str]:
    """The path-like words of `text`, in order, each once."""
    return list(dict.fromkeys(match.group(1) for match in _NAMED.finditer(text)))


class NamedFilesFeature:
    """FeaturePlugin and PromptEnricher (see the module doc)."""

    name = "named-files"
    version = "0.1.0"
    priority = 55  # after the `@file:` mentions and templates (50)

    def enrich_prompt(self, draft: PromptDraft, sources: PromptSources) -> PromptDraft:
        words = named_paths(draft.text)
        if not words or not sources.workspace_folders:
            return draft
        workspace = Workspace.of(sources.workspace_folders, sources.documents)
        access = ModelFileAccess(sources.workspace_folders)
        already = set(draft.metadata.get("mentions") or ())
        attachments: list[dict[str, object]] = []
        budget = NAMED_FILES_MAX_TOTAL_CHARS

        def attach(resolved: Path) -> None:
            nonlocal budget
            rel = workspace.relative(resolved)
            if rel in already or isinstance(access.check(rel), Withheld):
                return
            content = _read(workspace, resolved)
            if content is None or len(content) > budget:
                return
            if content.strip() and content.strip() in draft.text:
                return  # already in the prompt (a selection of the whole file, a paste)
            already.add(rel)
            budget -= len(content)
            attachments.append({"path": rel, "content": content, "truncated": False})

        for word in words[:MAX_NAMED_WORDS]:
            if len(attachments) >= MAX_NAMED_FILES:
                break
            resolved = find_named_file(workspace, word, sources.workspace_folders)
            if resolved is not None:
                attach(resolved)
        named = {str(a["path"]): str(a["content"]) for a in attachments
                 if str(a["path"]).endswith(".py")}
        for resolved in _neighbours(workspace, named, sources.workspace_folders[0]):
            if len(attachments) >= MAX_NAMED_FILES:
                break
            attach(resolved)
        if not attachments:
            return draft
        listed = [*(draft.metadata.get("mentions") or ()), *(a["path"] for a in attachments)]
        return replace(
            draft,
            attachments=(*draft.attachments, render_attachments(attachments)),
            metadata={**draft.metadata, "mentions": listed},
        )


def _read(workspace: Workspace, resolved: Path) -> str | None:
    try:
        text = workspace.read_text(resolved, limit=NAMED_FILE_MAX_CHARS + 1).text
    except (OSError, WorkspacePathError, UnicodeError):
        return None
    return None if text is None or len(text) > NAMED_FILE_MAX_CHARS else text


# `import a.b, c` and `from a.b import x` at a line's start (relative imports
# are left to the model: their package is rarely in a small prompt).
_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)"
                     r"|from[ \t]+(\w[\w.]*)[ \t]+import\b)", re.MULTILINE)


def imported_modules(text: str) -> list[str]:
    """The absolute module names a Python text imports, in order, each once."""
    names: list[str] = []
    for match in _IMPORT.finditer(text):
        if match.group(2):
            names.append(match.group(2))
        else:
            names.extend(name.strip() for name in match.group(1).split(","))
    return list(dict.fromkeys(names))


def _is_test(rel: str) -> bool:
    return is_test(PurePosixPath(rel)) or "tests/" in f"/{rel}"


def _module_file(workspace: Workspace, module: str, folders: tuple[str, ...]) -> Path | None:
    """The workspace file of an imported module: from the root, or beside the
    importing file (a script's own folder is first on sys.path)."""
    base = module.replace(".", "/")
    for folder in folders:
        for candidate in (f"{folder}{base}.py", f"{folder}{base}/__init__.py"):
            try:
                resolved = workspace.resolve(candidate)
            except WorkspacePathError:
                continue
            if resolved.is_file():
                return resolved
    return None


def _neighbours(workspace: Workspace, named: dict[str, str], root: str) -> list[Path]:
    """The workspace modules the named Python files (path -> text) import,
    then the non-test modules that import one of them (see the module doc)."""
    if not named:
        return []
    found: list[Path] = []
    for rel, text in named.items():
        folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        for module in imported_modules(text):
            resolved = _module_file(workspace, module, ("", folder) if folder else ("",))
            if resolved is not None and resolved not in found:
                found.append(resolved)
    wanted = {rel[:-3].replace("/", ".") for rel in named}
    wanted |= {rel.rsplit("/", 1)[-1][:-3] for rel in named}
    scanned = 0
    for rel in LISTINGS.files(root):
        if not rel.endswith(".py") or rel in named or _is_test(rel):
            continue
        scanned += 1
        if scanned > MAX_SCANNED_FOR_IMPORTERS:
            break
        try:
            resolved = workspace.resolve(rel)
        except WorkspacePathError:
            continue
        other = _read(workspace, resolved)
        if other and wanted & set(imported_modules(other)) and resolved not in found:
            found.append(resolved)
    return found


def find_named_file(workspace: Workspace, word: str, folders: tuple[str, ...]) -> Path | None:
    """The workspace file `word` names: by its path, else by its name when
    exactly one file of the (first) folder's listing has it."""
    try:
        resolved = workspace.resolve(word)
    except WorkspacePathError:
        resolved = None
    if resolved is not None and resolved.is_file():
        return resolved
    if "/" in word:
        return None
    matches = LISTINGS.named(str(folders[0]), word)
    if len(matches) != 1:
        return None
    try:
        found = workspace.resolve(matches[0])
    except WorkspacePathError:
        return None
    return found if found.is_file() else None
