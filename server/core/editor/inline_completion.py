"""The contract between the language server and an inline completion
feature (textDocument/inlineCompletion, docs/protocol.md): what the server hands
over and what it gets back, in code-point offsets. The LSP side turns the
position into an offset and the answer into LSP items; the feature
(features/inline_completion) owns caching, debouncing, prompting, the model
call and post-processing. Modelled on core/editor/next_edit.py.

Imported on the keystroke path: plain dataclasses, nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentls.core.provider.contract import Provider

__all__ = ["InlineAnswer", "InlineCompleter", "InlineRequest", "OpenDocument", "UserNotice"]


@dataclass(frozen=True, slots=True)
class OpenDocument:
    """Another document open in the editor (neighbour context)."""

    uri: str
    language_id: str
    version: int | None
    text: str


@dataclass(frozen=True, slots=True)
class UserNotice:
    """Something the user can fix (a wrong baseUrl, a bad key, a missing
    model); the editor shows each key once, not per keystroke."""

    key: str  # shown once per key
    message: str
    severity: Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class InlineRequest:
    uri: str
    language_id: str
    text: str  # the whole document
    offset: int  # the cursor, in code points
    invoked: bool = False  # explicitly asked for (no debounce)
    # Other open documents, asked for only when the model is called.
    neighbours: Callable[[], Iterable[OpenDocument]] | None = None


@dataclass(frozen=True, slots=True)
class InlineAnswer:
    items: tuple[str, ...] = ()
    from_cache: bool = False
    superseded: bool = False  # a newer request (or cancel_request) replaced this one
    notice: UserNotice | None = None  # something the user should fix
    model_answered: bool = False  # the provider call succeeded
    partial: bool = False  # the part streamed so far; the model call runs on
    # What was sent (for agentls/status and `agentls eval`): prompt characters,
    # and input tokens when the provider reported usage.
    prompt_chars: int = 0
    input_tokens: int = 0


@runtime_checkable
class InlineCompleter(Protocol):
    """What the LSP side needs from the `inline-completion` feature plugin.

    `complete` answers one request. `provider` is called only when the
    model is needed (it raises AgentlsError when the provider cannot be
    built); `settings` is the `inlineCompletion` settings section.
    Cancelling the calling task (a newer request, $/cancelRequest) must
    reach the provider's stream. Errors the user can act on come back as
    `notice`, not as exceptions."""

    name: str

    async def complete(
        self,
        request: InlineRequest,
        provider: Callable[[], Provider],
        settings: Any,
    ) -> InlineAnswer: ...

    async def prepare(self, provider: Callable[[], Provider], settings: Any) -> None:
        """Ready what the first request needs (the provider, its prompt
        form, its model) ahead of it; raises what `provider` raises."""

    async def warm_at(
        self,
        request: InlineRequest,
        provider: Callable[[], Provider],
        settings: Any,
    ) -> bool:
        """The cursor rests at `request`'s position: have the model's prompt
        for it ready before the first keystroke there, when that costs
        nothing (a local engine). Whether the model was asked; never raises
        for the model's errors (the next request reports them)."""
