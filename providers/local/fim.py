"""Fill-in-the-middle prompts from the FIM tokens a GGUF declares.

A code model trained for FIM (Qwen2.5-Coder, StarCoder2, CodeGemma,
DeepSeek-Coder, Codestral, CodeLlama) completes the gap between a prefix and
a suffix when the prompt is laid out with its special tokens. Which tokens:
the GGUF's `tokenizer.ggml.fim_pre_token_id` / `fim_suf_token_id` /
`fim_mid_token_id` (older files: `prefix_token_id` / `suffix_token_id` /
`middle_token_id`) map to strings of `tokenizer.ggml.tokens`; files written
before those keys existed are recognised by the token strings the families
use. A model with neither gets no FIM (its suffix is only used to trim).

The prompt goes to raw completion (/v1/completions with the special tokens
in the text; llama.cpp tokenizes special tokens in a prompt), not to
llama-cpp-python's `suffix` parameter, which is not FIM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FimTokens", "build_fim_prompt", "fim_tokens"]


@dataclass(frozen=True)
class FimTokens:
    prefix: str
    suffix: str
    middle: str | None  # Codestral has none: [SUFFIX]s[PREFIX]p
    family: str
    suffix_first: bool = False  # SPM order (Codestral)
    stops: tuple[str, ...] = ()  # tokens that end a completion besides EOS


# Known families, most specific first: (family, prefix, suffix, middle, suffix_first, stops)
_KNOWN: tuple[tuple[str, str, str, str | None, bool, tuple[str, ...]], ...] = (
    ("qwen2.5-coder/codegemma", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", False,
     ("<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|file_separator|>")),
    ("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", False,
     ("<|endoftext|>", "<file_sep>", "<fim_pad>")),
    # DeepSeek's bars are U+FF5C (fullwidth), its spaces U+2581 (SentencePiece)
    ("deepseek-coder", "<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>",
     "<\uff5cfim\u2581end\uff5c>", False,
     ("<|EOT|>", "<\uff5cend\u2581of\u2581sentence\uff5c>")),
    ("codestral", "[PREFIX]", "[SUFFIX]", None, True, ("</s>",)),
    ("codellama", "▁<PRE>", "▁<SUF>", "▁<MID>", False, ("▁<EOT>", "</s>")),
)

_ID_KEYS = (
    ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
     "tokenizer.ggml.fim_mid_token_id"),
    ("tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id",
     "tokenizer.ggml.middle_token_id"),
)


def fim_tokens(metadata: dict[str, Any]) -> FimTokens | None:
    """The FIM tokens a GGUF's metadata declares (needs the full
    `tokenizer.ggml.tokens` list), or None."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        return None
    for keys in _ID_KEYS:
        ids = [_token_id(metadata.get(key), len(tokens)) for key in keys]
        pre_id, suf_id, mid_id = ids
        if pre_id is not None and suf_id is not None:
            prefix, suffix = tokens[pre_id], tokens[suf_id]
            middle = tokens[mid_id] if mid_id is not None else None
            known = _family_of(prefix)
            if known is not None:
                return known
            return FimTokens(prefix, suffix, middle, family="declared",
                             suffix_first=middle is None)
    vocabulary = set(tokens)
    for family, prefix, suffix, middle, suffix_first, stops in _KNOWN:
        has_middle = middle is None or middle in vocabulary
        if prefix in vocabulary and suffix in vocabulary and has_middle:
            return FimTokens(prefix, suffix, middle, family, suffix_first,
                             tuple(s for s in stops if s in vocabulary))
    return None


def _token_id(value: Any, vocabulary_size: int) -> int | None:
    return value if isinstance(value, int) and 0 <= value < vocabulary_size else None


def _family_of(prefix: str) -> FimTokens | None:
    for family, known_prefix, suffix, middle, suffix_first, stops in _KNOWN:
        if prefix == known_prefix:
            return FimTokens(prefix, suffix, middle, family, suffix_first, stops)
    return None


def build_fim_prompt(tokens: FimTokens, prefix: str, suffix: str) -> str:
    """The raw prompt: PSM (<pre>prefix<suf>suffix<mid>) for most families,
    Codestral's [SUFFIX]suffix[PREFIX]prefix."""
    if tokens.suffix_first:
        return f"{tokens.suffix}{suffix}{tokens.prefix}{prefix}"
    if tokens.family == "codellama":  # its tokens carry a leading space marker
        return f"<PRE> {prefix} <SUF>{suffix} <MID>"
    return f"{tokens.prefix}{prefix}{tokens.suffix}{suffix}{tokens.middle or ''}"
