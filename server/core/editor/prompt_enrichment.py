"""The contract between the chat front and the features that enrich a chat
prompt before it is sent (`@file:` mentions, `/template` placeholders).

The front (lsp/agent/chat_prompt.py) hands each enricher, in plugin order, the
draft so far and what it knows of the editor; the enricher returns the
next draft. Enrichers run in a worker thread (they may read files), never
see LSP, and must not raise for bad user input: an unreadable mention
becomes an attachment saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["EditorContext", "PromptDraft", "PromptEnricher", "PromptSources",
           "not_attached_text"]


@dataclass(frozen=True, slots=True)
class EditorContext:
    """Where the user is in the editor as the prompt is sent (from the
    request's `context`); empty values when the request named no file."""

    path: str = ""  # the file as the agent knows it (workspace-relative when inside)
    language: str = ""  # the document's languageId
    selection: str = ""  # the selected text (capped), "" without one
    diagnostics: Sequence[Mapping[str, Any] | str] = ()  # as the client sent them


@dataclass(frozen=True, slots=True)
class PromptSources:
    """What enrichers may read."""

    workspace_folders: tuple[str, ...] = ()
    # path -> the open buffer's text, or None (then the disk is read).
    documents: Callable[[Path], str | None] | None = None
    editor: EditorContext = field(default_factory=EditorContext)


@dataclass(frozen=True, slots=True)
class PromptDraft:
    text: str  # the prompt as the model will read it
    # Blocks the model reads after the prompt (attached files), in order.
    attachments: tuple[str, ...] = ()
    # Stored with the user message (e.g. {"mentions": [paths]}). Files named
    # but not attached go in "not_attached" ([{path, reason}]): the front
    # tells the user (not_attached_text), not only the model.
    metadata: Mapping[str, Any] = field(default_factory=dict)
    used_selection: bool = False  # the editor selection went into the text


@runtime_checkable
class PromptEnricher(Protocol):
    """A feature that rewrites or adds to a chat prompt (mentions,
    templates). `enrich_prompt` returns the next draft (the same one when
    it has nothing to do)."""

    name: str

    def enrich_prompt(self, draft: PromptDraft, sources: PromptSources) -> PromptDraft: ...


def not_attached_text(refused: Sequence[Mapping[str, str]]) -> str:
    """What the user is told of the files a prompt named that were not
    attached; control characters in a path are shown escaped."""
    def shown(text: str) -> str:
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)

    parts = [f"{shown(str(item.get('path', '?')))} "
             f"({shown(str(item.get('reason', '')).removeprefix('not attached: '))})"
             for item in refused]
    return "not attached: " + "; ".join(parts)
