"""The user message of an `agentls/chat` request: the prompt as typed, the
editor context (file, selection, diagnostics) and what the prompt
enrichers (core/editor/prompt_enrichment.py: `@file:` mentions, `/template`
placeholders) add. The enrichers are features found through the agent
bundle; this module only reads the editor's documents.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from agentls.core.editor.prompt_enrichment import PromptEnricher
    from agentls.core.types.conversation import Message

__all__ = ["SELECTION_MAX_CHARS", "lsp_range", "user_message"]

log = logging.getLogger("agentls.lsp.agent.chat")

SELECTION_MAX_CHARS = 20_000


@dataclass(frozen=True)
class _Editor:
    """What the request's context names, read from the editor's documents."""

    path: str = ""  # as the agent knows it; "" when the URI is no file
    shown: str = ""  # for the selection block: path, else the URI
    language: str = ""
    selection: str | None = None  # the selected text (uncapped); None without one
    lines: str = ""  # "3-7"


async def user_message(
    ls: LanguageServer,
    prompt: str,
    context: dict[str, Any],
    enrichers: Sequence[PromptEnricher],
    workspace_folders: Sequence[str | Path],
    documents: Callable[[Path], str | None] | None = None,
) -> Message:
    """The prompt with its context, as the stored user message. Enrichers
    run in plugin order in a worker thread (mentions read files)."""
    from agentls.core.editor.prompt_enrichment import (
        EditorContext,
        PromptDraft,
        PromptSources,
        not_attached_text,
    )
    from agentls.core.types.conversation import Message

    folders = tuple(str(f) for f in workspace_folders)
    editor = _read_editor(ls, context, folders)
    diagnostics = context.get("diagnostics")
    sources = PromptSources(
        workspace_folders=folders,
        documents=documents,
        editor=EditorContext(
            path=editor.path,
            language=editor.language,
            selection=(editor.selection or "")[:SELECTION_MAX_CHARS],
            diagnostics=diagnostics if isinstance(diagnostics, list) else (),
        ),
    )

    def enrich() -> PromptDraft:
        draft = PromptDraft(prompt)
        for enricher in enrichers:
            try:
                draft = enricher.enrich_prompt(draft, sources)
            except Exception:  # a feature bug must not cost the user their prompt
                log.exception("Prompt enricher %s failed; skipped",
                              getattr(enricher, "name", enricher))
        return draft

    draft = await asyncio.to_thread(enrich) if enrichers else PromptDraft(prompt)
    if refused := draft.metadata.get("not_attached"):
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message=f"agentls: {not_attached_text(refused)}"))
    blocks: list[str] = []
    selection = "" if draft.used_selection else _selection_block(context, editor)
    if selection:
        blocks.append(selection)
    blocks.extend(draft.attachments)
    metadata: dict[str, Any] = {}
    if context:
        metadata["context"] = context
    metadata.update(draft.metadata)
    if not blocks and draft.text == prompt:
        return Message("user", prompt)
    metadata["prompt"] = prompt
    return Message("user", "\n\n".join([draft.text, *blocks]), metadata)


def _read_editor(ls: LanguageServer, context: dict[str, Any], folders: Sequence[str]) -> _Editor:
    uri = context.get("uri")
    if not isinstance(uri, str) or not uri:
        return _Editor()
    from pygls.uris import to_fs_path

    fs_path = to_fs_path(uri)
    path = _shown_path(folders, fs_path) if fs_path else ""
    editor = _Editor(path=path, shown=path or uri)
    selected = lsp_range(context.get("range"))
    try:
        document = ls.workspace.get_text_document(uri)
        editor = replace(editor, language=document.language_id or "")
        if selected is not None:
            editor = replace(editor, selection=document.text_in_client_range(selected),
                             lines=f"{selected.start.line + 1}-{selected.end.line + 1}")
    except Exception as exc:  # unreadable file, range past the end, odd URI
        log.warning("Cannot read the selection of %s: %s", uri, exc)
    return editor


def _selection_block(context: dict[str, Any], editor: _Editor) -> str:
    if not editor.shown:
        return ""
    if editor.selection is None:
        return f'<editor file="{editor.shown}"/>'
    text, note = editor.selection, ""
    if len(text) > SELECTION_MAX_CHARS:
        text, note = text[:SELECTION_MAX_CHARS], ' truncated="true"'
    return f'<selection file="{editor.shown}" lines="{editor.lines}"{note}>\n{text}\n</selection>'


def _shown_path(folders: Sequence[str], fs_path: str) -> str:
    """A file as the agent knows it: relative to the first workspace folder,
    else `<folder name>/<path>` in another folder, else absolute."""
    resolved = Path(fs_path).resolve()
    for index, folder in enumerate(Path(f).expanduser().resolve() for f in folders):
        if resolved == folder or resolved.is_relative_to(folder):
            rel = resolved.relative_to(folder).as_posix()
            if index == 0:
                return rel or "."
            return f"{folder.name}/{rel}" if rel != "." else folder.name
    return fs_path


def lsp_range(value: Any) -> types.Range | None:
    if not isinstance(value, dict):
        return None
    try:
        start, end = value["start"], value["end"]
        return types.Range(
            start=types.Position(line=int(start["line"]), character=int(start["character"])),
            end=types.Position(line=int(end["line"]), character=int(end["character"])),
        )
    except (KeyError, TypeError, ValueError):
        return None

