"""`@file:` mentions: completion of workspace paths while the user types a
prompt, and expansion into attached file content when the prompt is sent.

    explain @file:src/app.py            a path without spaces
    compare @file:"docs/old notes.md"   quoted when the path has spaces

Completions follow agent_core's descriptor shape ({replacement, start,
display, display_meta}): `start` is where the `@` stands in the text before
the cursor, `replacement` the whole mention to put there.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentls.core.editor.file_access import Withheld
from agentls.core.editor.prompt_enrichment import PromptDraft, PromptSources
from agentls.features.policy.sensitive import ModelFileAccess
from agentls.features.prompt.mention_prefix import complete_mention_prefix
from agentls.features.tools.workspace import Workspace, WorkspacePathError

__all__ = [
    "ATTACHMENTS_MAX_TOTAL_CHARS",
    "ATTACHMENT_MAX_CHARS",
    "MAX_COMPLETIONS",
    "MENTION_PREFIX",
    "MentionsFeature",
    "expand_mentions",
    "find_mentions",
    "fuzzy_score",
    "mention_for",
    "render_attachments",
]

MENTION_PREFIX = "@file:"
MAX_COMPLETIONS = 50
MAX_LISTED_FILES = 10_000  # files considered for completion in one workspace
LISTING_TTL_SECONDS = 5.0  # completion runs per keystroke: reuse the listing briefly
ATTACHMENT_MAX_CHARS = 20_000  # per mentioned file
ATTACHMENTS_MAX_TOTAL_CHARS = 60_000  # all mentions of one prompt together
MAX_MENTIONS = 10

# A mention starts a word: `a@file:x` (an e-mail-ish token) is not one.
_MENTION = re.compile(r'(?<!\S)@file:(?:"([^"\n]+)"|(\S+))')
# The mention being typed, at the end of the text before the cursor.
_TYPING = re.compile(r'(?<!\S)@file:("?)([^\s"]*)$')
# `@`, `@f` ... `@file` at the end: offer the `@file:` prefix itself.
_TYPING_PREFIX = re.compile(r"(?<!\S)@(f|fi|fil|file)?$")


def mention_for(rel: str) -> str:
    return f'{MENTION_PREFIX}"{rel}"' if any(c.isspace() for c in rel) else MENTION_PREFIX + rel


def find_mentions(text: str) -> list[tuple[int, int, str]]:
    """(start, end, path) of every mention in `text`."""
    return [(m.start(), m.end(), m.group(1) or m.group(2)) for m in _MENTION.finditer(text)]


def fuzzy_score(query: str, candidate: str) -> float | None:
    """None when the query's characters do not appear in order in the
    candidate; otherwise higher is better: runs of consecutive characters,
    matches at word starts and in the file name count, long paths cost."""
    if not query:
        return -len(candidate) * 0.01
    q, c = query.lower(), candidate.lower()
    score = 0.0
    pos = prev = -2
    for ch in q:
        pos = c.find(ch, pos + 1 if pos >= 0 else 0)
        if pos < 0:
            return None
        if pos == prev + 1:
            score += 5
        if pos == 0 or c[pos - 1] in "/_-. ":
            score += 3
        prev = pos
    name = c.rsplit("/", 1)[-1]
    if q in name:
        score += 10 + (5 if name.startswith(q) else 0)
    elif q in c:
        score += 5
    return score - len(c) * 0.05


@dataclass
class _Listing:
    files: list[str]
    at: float
    by_name: dict[str, list[str]] | None = None  # built on first use


def _by_name(files: list[str]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for rel in files:
        index.setdefault(rel.rsplit("/", 1)[-1], []).append(rel)
    return index


class _ListingCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, _Listing] = {}

    def files(self, root: str) -> list[str]:
        return self._listing(root).files

    def named(self, root: str, name: str) -> list[str]:
        """The listed files whose last part is `name` (an index: a prompt
        or a session may name thousands of files)."""
        listing = self._listing(root)
        with self._lock:
            if listing.by_name is None:
                listing.by_name = _by_name(listing.files)
            return list(listing.by_name.get(name, ()))

    def _listing(self, root: str) -> _Listing:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(root)
            if hit is not None and now - hit.at < LISTING_TTL_SECONDS:
                return hit
        workspace = Workspace.of([root])
        base = workspace.root
        files = []
        if base is not None and base.is_dir():
            files = [
                workspace.relative(path)
                for path, is_dir in workspace.walk(base, max_entries=MAX_LISTED_FILES * 2)
                if not is_dir
            ][:MAX_LISTED_FILES]
        listing = _Listing(files, now)
        with self._lock:
            self._cache[root] = listing
        return listing


LISTINGS = _ListingCache()  # also named_files.py


class MentionsFeature:
    """FeaturePlugin: `@file:` completions; as a PromptEnricher
    (core/editor/prompt_enrichment.py) it attaches the mentioned files to a chat
    prompt (`expand_mentions`)."""

    name = "mentions"
    version = "0.1.0"
    priority = 50

    def enrich_prompt(self, draft: PromptDraft, sources: PromptSources) -> PromptDraft:
        """Each mention becomes its path in backticks, and the files' text
        (the open buffer first) an attachment; the paths go into the
        message's metadata (`mentions`)."""
        if MENTION_PREFIX not in draft.text:
            return draft
        workspace = Workspace.of(sources.workspace_folders, sources.documents)

        def read(path: Path) -> str | None:
            return workspace.read_text(path, limit=ATTACHMENT_MAX_CHARS + 1).text

        text, attachments = expand_mentions(draft.text, sources.workspace_folders, read)
        if not attachments:
            return replace(draft, text=text)
        # The footer ("Attached: ...") names only files whose text went to the
        # model: a withheld `.env` or a missing file is not "attached".
        attached = [a["path"] for a in attachments if "content" in a]
        metadata = {**draft.metadata, "mentions": attached} if attached else dict(draft.metadata)
        refused = [{"path": a["path"], "reason": a["error"]} for a in attachments if "error" in a]
        if refused:  # the front tells the user too (prompt_enrichment.not_attached_text)
            metadata["not_attached"] = [*metadata.get("not_attached", ()), *refused]
        return replace(
            draft, text=text,
            attachments=(*draft.attachments, render_attachments(attachments)),
            metadata=metadata,
        )

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        typing = _TYPING.search(text)
        if typing is None:
            return complete_mention_prefix(
                text, _TYPING_PREFIX, MENTION_PREFIX, "mention a workspace file")
        root = config.get("workspace_root")
        if not root:
            return []
        query = typing.group(2)
        ranked: list[tuple[float, str]] = []
        for rel in LISTINGS.files(str(root)):
            score = fuzzy_score(query, rel)
            if score is not None:
                ranked.append((score, rel))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        return [
            {"replacement": mention_for(rel), "start": typing.start(), "display": rel,
             "display_meta": "file"}
            for _, rel in ranked[:MAX_COMPLETIONS]
        ]

    def apply_completion(
        self, config: dict[str, Any], text: str, completion: dict[str, Any]
    ) -> str:
        return str(completion.get("replacement") or "")

    def get_ui_elements(
        self, config: dict[str, Any], context: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        # Prompts with mentions carry metadata.mentions (enrich_prompt).
        return [{"ui_type": "message_footer", "data": "metadata.mentions",
                 "template": "Attached: {{data}}"}]


def expand_mentions(
    text: str,
    workspace_folders: Sequence[str | Path],
    read: Callable[[Path], str | None],
) -> tuple[str, list[dict[str, Any]]]:
    """Resolve the `@file:` mentions of a prompt.

    Returns the text with each mention replaced by its path in backticks
    (the attachment carries the content) and the attachments: {path,
    content, truncated} per readable file, {path, error} otherwise.
    `read(resolved_path)` gives a file's text (the open buffer first) or
    None. Paths outside the workspace are refused, and so are secret files
    (sensitive_paths.ModelFileAccess, the rule read_file asks under: a
    mention in pasted code or a template must not attach `.env`); their
    attachment carries the reason instead. Content is bounded per file and
    in total, so a mention cannot blow the model's context."""
    workspace = Workspace.of(workspace_folders)
    access = ModelFileAccess(workspace_folders)
    attachments: list[dict[str, Any]] = []
    seen: set[Path] = set()
    budget = ATTACHMENTS_MAX_TOTAL_CHARS
    pieces: list[str] = []
    last = 0
    for start, end, raw in find_mentions(text):
        pieces.append(text[last:start])
        last = end
        try:
            resolved = workspace.resolve(raw)
        except WorkspacePathError as exc:
            pieces.append(f"`{raw}`")
            attachments.append({"path": raw, "error": str(exc)})
            continue
        rel = workspace.relative(resolved)
        pieces.append(f"`{rel}`")
        if resolved in seen:
            continue
        seen.add(resolved)
        if len(seen) > MAX_MENTIONS:
            attachments.append({"path": rel, "error": f"not attached: more than {MAX_MENTIONS} "
                                "files mentioned; use read_file"})
            continue
        checked = access.check(raw)  # the name as written and the file it leads to
        if isinstance(checked, Withheld):
            attachments.append({"path": rel, "error": f"not attached: {checked.reason}"})
            continue
        content = _safe_read(read, resolved)
        if content is None:
            attachments.append({"path": rel, "error": "could not be read (missing, a folder, "
                                "or binary)"})
            continue
        limit = max(0, min(ATTACHMENT_MAX_CHARS, budget))
        attachments.append({"path": rel, "content": content[:limit],
                            "truncated": len(content) > limit})
        budget -= min(len(content), limit)
    pieces.append(text[last:])
    return "".join(pieces), attachments


def _safe_read(read: Callable[[Path], str | None], path: Path) -> str | None:
    try:
        return read(path)
    except (OSError, WorkspacePathError):
        return None


def render_attachments(attachments: Iterable[dict[str, Any]]) -> str:
    """The attachments as the model reads them, after the prompt."""
    blocks = []
    for item in attachments:
        path = item.get("path", "?")
        if "error" in item:
            blocks.append(f'<file path="{path}" error="{item["error"]}"/>')
            continue
        note = ' truncated="true"' if item.get("truncated") else ""
        blocks.append(f'<file path="{path}"{note}>\n{item.get("content", "")}\n</file>')
    return "\n".join(blocks)
