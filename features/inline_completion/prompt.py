"""Prompts for inline completion: fill-in-the-middle when the model was
trained for it, else a chat prompt asking for only the missing code.

Budgets are in characters (`inlineCompletion.maxPrefixChars` /
`maxSuffixChars`). A provider that knows its tokenizer may expose
`count_tokens(text) -> int` and `context_window: int`; then the prompt is
also trimmed to fit the window with room for the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agentls.features.inline_completion.document import CursorContext
from agentls.features.inline_completion.neighbours import Snippet

if TYPE_CHECKING:
    from agentls.core.types.conversation import Message

__all__ = [
    "CHAT_SYSTEM_PROMPT",
    "FILL_MARKER",
    "CompletionPrompt",
    "TokenCounter",
    "build_prompt",
    "context_budget",
    "fit_to_tokens",
    "line_comment",
    "trim_start",
]

FILL_MARKER = "<FILL_HERE>"
CHAT_SYSTEM_PROMPT = (
    "You are a code completion engine inside an editor. The user message holds a "
    f"file with the marker {FILL_MARKER} where the cursor is. Reply with only the code "
    f"that belongs at {FILL_MARKER}: no explanations, no markdown fences, and do not "
    "repeat code that is already before or after the marker. Keep the file's "
    "indentation. If nothing should be inserted, reply with nothing."
)
MAX_CONTEXT_CHARS = 1500  # neighbour snippets, at most a quarter of the prefix budget

_LINE_COMMENT = {
    **dict.fromkeys(
        "python ruby shellscript perl r yaml toml dockerfile makefile elixir powershell "
        "coffeescript julia nim crystal".split(),
        "#",
    ),
    **dict.fromkeys(
        "javascript typescript javascriptreact typescriptreact java c cpp csharp go rust "
        "swift kotlin scala dart php zig groovy objective-c objective-cpp jsonc".split(),
        "//",
    ),
    **dict.fromkeys("lua sql haskell ada elm".split(), "--"),
    **dict.fromkeys("lisp clojure scheme".split(), ";"),
    **dict.fromkeys("erlang latex tex matlab".split(), "%"),
    "vim": '"',
}


@runtime_checkable
class TokenCounter(Protocol):
    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class CompletionPrompt:
    fim: bool
    prefix: str  # FIM: the prompt; chat: the prefix the model saw (for post-processing)
    suffix: str
    messages: tuple[Message, ...]  # chat only
    stop: tuple[str, ...]


def line_comment(language_id: str) -> str | None:
    return _LINE_COMMENT.get(language_id.lower())


def context_budget(max_prefix_chars: int) -> int:
    return min(MAX_CONTEXT_CHARS, max_prefix_chars // 4)


def trim_start(text: str, max_chars: int) -> str:
    """The last `max_chars` of `text`, starting at a line start when possible."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    start = len(text) - max_chars
    cut = text.find("\n", start)
    return text[cut + 1 :] if cut >= 0 else text[start:]


def trim_end(text: str, max_chars: int) -> str:
    """The first `max_chars` of `text`, ending at a line end when possible."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    cut = text.rfind("\n", 0, max_chars)
    return text[: cut + 1] if cut >= 0 else text[:max_chars]


def fit_to_tokens(
    prefix: str, suffix: str, counter: TokenCounter, limit: int
) -> tuple[str, str]:
    """Trim the far ends of prefix and suffix until both fit in `limit`
    tokens; the suffix gets at most a quarter of it."""
    limit = max(0, limit)
    suffix_tokens = counter.count_tokens(suffix)
    suffix_limit = limit // 4
    for _ in range(8):
        if suffix_tokens <= suffix_limit:
            break
        suffix = trim_end(suffix, int(len(suffix) * suffix_limit / suffix_tokens * 0.95))
        suffix_tokens = counter.count_tokens(suffix)
    prefix_limit = limit - suffix_tokens
    prefix_tokens = counter.count_tokens(prefix)
    for _ in range(8):
        if prefix_tokens <= prefix_limit:
            break
        prefix = trim_start(prefix, int(len(prefix) * prefix_limit / prefix_tokens * 0.95))
        prefix_tokens = counter.count_tokens(prefix)
    return prefix, suffix


def build_prompt(
    ctx: CursorContext,
    *,
    fim: bool,
    language_id: str,
    path: str,
    max_prefix_chars: int,
    snippets: Sequence[Snippet] = (),
    tokens: TokenCounter | None = None,
    token_limit: int | None = None,
) -> CompletionPrompt:
    """`ctx` is already cut to the character budgets; neighbour snippets
    take their room from the prefix budget."""
    comment = line_comment(language_id)
    context = _context_block(snippets, comment) if fim else _chat_context(snippets)
    # The room the snippets take comes off the prefix's far end, in steps,
    # so the prompt's start stays put while the user types (document.py).
    prefix = ctx.within(max(0, max_prefix_chars - len(context))).prefix if context else ctx.prefix
    suffix = ctx.suffix
    if tokens is not None and token_limit is not None:
        prefix, suffix = fit_to_tokens(
            prefix, suffix, tokens, token_limit - tokens.count_tokens(context)
        )
    if fim:
        return CompletionPrompt(
            fim=True,
            prefix=context + prefix,
            suffix=suffix,
            messages=(),
            stop=("\n",) if ctx.mid_line else (),
        )
    # Only a chat prompt needs Message (pydantic): the FIM path stays without it.
    from agentls.core.types.conversation import Message

    return CompletionPrompt(
        fim=False,
        prefix=prefix,
        suffix=suffix,
        messages=(
            Message(role="system", content=CHAT_SYSTEM_PROMPT),
            Message(role="user", content=_chat_request(ctx, prefix, suffix, language_id, path,
                                                       context)),
        ),
        stop=(),
    )


def _context_block(snippets: Sequence[Snippet], comment: str | None) -> str:
    """Snippets as line comments at the top of a FIM prefix (languages
    without a known line comment get none: the code would not parse)."""
    if not snippets or comment is None:
        return ""
    lines = []
    for snippet in snippets:
        lines.append(f"{comment} Path: {snippet.path}")
        lines.extend(f"{comment} {line}".rstrip() for line in snippet.text.split("\n"))
    return "\n".join(lines) + "\n"


def _chat_context(snippets: Sequence[Snippet]) -> str:
    if not snippets:
        return ""
    parts = ["Related code from other open files:"]
    for snippet in snippets:
        parts.append(f"--- {snippet.path}\n{snippet.text}")
    return "\n".join(parts) + "\n\n"


def _chat_request(
    ctx: CursorContext, prefix: str, suffix: str, language_id: str, path: str, context: str
) -> str:
    scope = (
        "Complete only the rest of the current line."
        if ctx.mid_line
        else "Complete the current statement or block."
    )
    return (
        f"{context}File: {path} ({language_id})\n"
        f"{scope} Reply with the code for {FILL_MARKER} only.\n\n"
        f"{prefix}{FILL_MARKER}{suffix}"
    )
