"""The contract between the language server and a next edit feature
(textDocument/copilotInlineEdit, docs/protocol.md): what the server hands over
and what it gets back, in code-point offsets. The LSP side turns positions
into offsets and edits back into ranges; the feature (features/next_edit)
owns prompting, the model call and the rules for what is worth showing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentls.core.editor.history import Hunk

if TYPE_CHECKING:
    from agentls.core.provider.contract import Provider

__all__ = ["NextEditAnswer", "NextEditRequest", "NextEditSuggester", "SuggestedEdit"]


@dataclass(frozen=True, slots=True)
class SuggestedEdit:
    """Replace text[start:end] of the request's document with `text`."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class NextEditRequest:
    uri: str
    language_id: str
    text: str  # the whole document, as of `version`
    offset: int  # the cursor, in code points
    version: int | None = None
    # The user's recent edits over the recently edited documents, oldest
    # first: (uri, hunk); hunk offsets are in that document's current text.
    history: Sequence[tuple[str, Hunk]] = ()
    # The current text of another document (for showing its hunks), or None.
    document_text: Callable[[str], str | None] | None = None
    invoked: bool = False  # explicitly asked for: no debounce


@dataclass(frozen=True, slots=True)
class NextEditAnswer:
    edits: tuple[SuggestedEdit, ...] = ()
    superseded: bool = False
    notice: Any = None  # a UserNotice the user should see once
    model_answered: bool = False
    why_none: str = ""  # why nothing is suggested (logs, tests, the eval)


@runtime_checkable
class NextEditSuggester(Protocol):
    """What the LSP side needs from the `next-edit` feature plugin."""

    name: str

    async def suggest(
        self,
        request: NextEditRequest,
        provider: Callable[[], Provider],
        settings: Any,
        model: str | None = None,
    ) -> NextEditAnswer: ...
