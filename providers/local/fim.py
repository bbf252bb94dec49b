"""Fill-in-the-middle prompts from the FIM tokens a GGUF declares.

A code model trained for FIM (Qwen2.5-Coder, StarCoder2, CodeGemma,
DeepSeek-Coder, Codestral, CodeLlama) completes the gap between a prefix and
a suffix when the prompt is laid out with its special tokens. Which tokens:
the GGUF's `tokenizer.ggml.fim_pre_token_id` / `fim_suf_token_id` /
`fim_mid_token_id` (older files: `prefix_token_id` / `suffix_token_id` /
`middle_token_id`) map to strings of `tokenizer.ggml.tokens`; files written
before those keys existed are recognised by the token strings the families
use (the family table is providers/fim/templates.py, shared with the HTTP
providers). A model with neither gets no FIM (its suffix is only used to
trim).

The prompt goes to raw completion (/v1/completions with the special tokens
in the text; llama.cpp tokenizes special tokens in a prompt), not to
llama-cpp-python's `suffix` parameter, which is not FIM.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentls.providers.fim.templates import FAMILIES, FimTokens

__all__ = [ "fim_tokens"]

_ID_KEYS = (
    ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
     "tokenizer.ggml.fim_mid_token_id"),
    ("tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id",
     "tokenizer.ggml.middle_token_id"),
)


def _spellings(token: str) -> tuple[str, str]:
    """SentencePiece vocabularies (CodeLlama) write a leading space as U+2581."""
    return token, "\u2581" + token


def _in(token: str, vocabulary: set[str]) -> bool:
    return any(spelling in vocabulary for spelling in _spellings(token))


def fim_tokens(metadata: dict[str, Any]) -> FimTokens | None:
    """The FIM tokens a GGUF's metadata declares (needs the full
    `tokenizer.ggml.tokens` list), or None."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        return None
    vocabulary = {t for t in tokens if isinstance(t, str)}
    for keys in _ID_KEYS:
        ids = [_token_id(metadata.get(key), len(tokens)) for key in keys]
        pre_id, suf_id, mid_id = ids
        if pre_id is not None and suf_id is not None:
            prefix, suffix = tokens[pre_id], tokens[suf_id]
            middle = tokens[mid_id] if mid_id is not None else None
            known = _known(vocabulary, prefix)
            if known is not None:
                return known
            return FimTokens(prefix, suffix, middle, family="declared",
                             suffix_first=middle is None)
    return _known(vocabulary)


def _known(vocabulary: set[str], declared_prefix: str | None = None) -> FimTokens | None:
    """The first family of the table whose FIM tokens the vocabulary has
    (whose prefix token is `declared_prefix`, when given), with the stops
    the vocabulary has. Qwen and CodeGemma spell FIM alike: CodeGemma's
    vocabulary has <|file_separator|>."""
    for tokens, _ in FAMILIES:
        if declared_prefix is not None and declared_prefix not in _spellings(tokens.prefix):
            continue
        needed = [tokens.prefix, tokens.suffix, *([tokens.middle] if tokens.middle else [])]
        if not all(_in(token, vocabulary) for token in needed):
            continue
        if tokens.family == "qwen2.5-coder" and "<|file_separator|>" in vocabulary:
            continue  # CodeGemma, next in the table
        return dataclasses.replace(
            tokens, stops=tuple(s for s in tokens.stops if _in(s, vocabulary)))
    return None


def _token_id(value: Any, vocabulary_size: int) -> int | None:
    return value if isinstance(value, int) and 0 <= value < vocabulary_size else None
