"""Fill-in-the-middle prompt templates of code-model families, and the
known-answer probe that tells whether a server's own FIM honours the suffix.

A model trained for FIM fills the gap between a prefix and a suffix when the
prompt is laid out with its special tokens; each family spells them its own
way (from the models' documentation and tokenizer files):

    family          prompt (PSM unless said)                          stops
    qwen2.5-coder   <|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>     <|endoftext|> <|fim_pad|>
                                                                      <|repo_name|> <|file_sep|>
                                                                      <|im_end|>
    codegemma       <|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>     <|file_separator|>
                                                                      <|fim_prefix|> <eos>
    starcoder       <fim_prefix>P<fim_suffix>S<fim_middle>           <|endoftext|> <file_sep>
                                                                      <fim_pad>
    deepseek-coder  <|fim begin|>P<|fim hole|>S<|fim end|>           <|EOT|>
                    (bars are U+FF5C, spaces U+2581)  <|end of sentence|>
    codellama       <PRE> P <SUF>S <MID>                              <EOT> </s>
    codestral       [SUFFIX]S[PREFIX]P  (suffix first, no middle)     </s>

The table serves three callers: the embedded model (local/fim.py, which
finds the family from its GGUF's tokens), the `openai` provider (a server's
tokenizer endpoint, else the model's name) and the `ollama` provider (the
model's template from /api/show, else its name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FAMILIES",
    "PROBE_EXPECTED",
    "PROBE_PREFIX",
    "PROBE_SUFFIX",
    "FimTokens",
    "build_fim_prompt",
    "family_by_name",
    "family_in_text",
    "probe_verdict",
]


@dataclass(frozen=True)
class FimTokens:
    prefix: str
    suffix: str
    middle: str | None  # Codestral has none: [SUFFIX]s[PREFIX]p
    family: str
    suffix_first: bool = False  # SPM order (Codestral)
    stops: tuple[str, ...] = ()  # tokens that end a completion besides EOS


# Most specific first. The name patterns match a model id or file name.
_QWEN_STOPS = ("<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|im_end|>")
_GEMMA_STOPS = ("<|file_separator|>", "<|fim_prefix|>", "<eos>", "<end_of_turn>")
FAMILIES: tuple[tuple[FimTokens, re.Pattern[str]], ...] = (
    (FimTokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "qwen2.5-coder",
               stops=_QWEN_STOPS), re.compile(r"qwen[\w.\-]*coder", re.I)),
    (FimTokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "codegemma",
               stops=_GEMMA_STOPS), re.compile(r"code[\-_ ]?gemma", re.I)),
    (FimTokens("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "starcoder",
               stops=("<|endoftext|>", "<file_sep>", "<fim_pad>")),
     re.compile(r"star[\-_ ]?coder", re.I)),
    # DeepSeek's bars are U+FF5C (fullwidth), its spaces U+2581 (SentencePiece)
    (FimTokens("<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>",
               "<\uff5cfim\u2581end\uff5c>", "deepseek-coder",
               stops=("<|EOT|>", "<\uff5cend\u2581of\u2581sentence\uff5c>")),
     re.compile(r"deepseek[\w.\-]*coder", re.I)),
    (FimTokens("<PRE>", "<SUF>", "<MID>", "codellama", stops=("<EOT>", "</s>")),
     re.compile(r"code[\-_ ]?llama", re.I)),
    (FimTokens("[PREFIX]", "[SUFFIX]", None, "codestral", suffix_first=True, stops=("</s>",)),
     re.compile(r"codestral", re.I)),
)


def family_by_name(*names: str) -> FimTokens | None:
    """The family a model id, file name or base name says (the table above),
    or None. Only code models trained for FIM match: `qwen2.5-7b` does not."""
    for name in names:
        if not name:
            continue
        for tokens, pattern in FAMILIES:
            if pattern.search(name):
                return tokens
    return None


def family_in_text(text: str) -> FimTokens | None:
    """The family whose FIM tokens appear literally in `text` (an Ollama
    model template, a chat template), or None."""
    for tokens, _ in FAMILIES:
        if tokens.family == "codegemma":
            continue  # spelled as Qwen's: text alone cannot tell them apart
        needed = [tokens.prefix, tokens.suffix, *([tokens.middle] if tokens.middle else [])]
        if all(token in text for token in needed):
            if tokens.family == "qwen2.5-coder" and "<|file_separator|>" in text:
                return family_by_name("codegemma")
            return tokens
    return None


def build_fim_prompt(tokens: FimTokens, prefix: str, suffix: str) -> str:
    """The raw prompt: PSM (<pre>prefix<suf>suffix<mid>) for most families,
    Codestral's [SUFFIX]suffix[PREFIX]prefix.

    The code typed on the cursor's line goes after the middle token, as the
    start of the fill the model continues (llama.vim's layout): a keystroke
    within a line then adds tokens only at the prompt's end, which every
    engine's prompt cache keeps. The line's indentation stays before the
    suffix token: after the middle token it made the packaged 0.5B answer
    nothing (bench/README.md, "Typing replay")."""
    if tokens.suffix_first:
        return f"{tokens.suffix}{suffix}{tokens.prefix}{prefix}"
    if tokens.family == "codellama":  # spaces as Meta's reference code lays them out
        return f"<PRE> {prefix} <SUF>{suffix} <MID>"
    line = prefix.rfind("\n") + 1
    code = len(prefix) - len(prefix[line:].lstrip(" \t"))
    return (f"{tokens.prefix}{prefix[:code]}{tokens.suffix}{suffix}{tokens.middle or ''}"
            f"{prefix[code:]}")


# ----------------------------------------------------------------- the known-answer probe
#
# A hole whose only correct fill is in the text after it: the attribute the
# class below defines, a name nobody guesses from the prefix. A model that
# ignores the suffix (LM Studio), or sees filler tokens around it
# (llama-cpp-python builds its FIM prompt with token id 0), writes something
# else, or runs on past the hole into the class again.
PROBE_PREFIX = "def lookup(record):\n    return record."
PROBE_SUFFIX = (
    "\n\n\nclass Record:\n    def __init__(self):\n        self.lantern_id = 7\n"
)
PROBE_EXPECTED = "lantern_id"
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def probe_verdict(fill: str) -> tuple[bool, str]:
    """Whether a FIM answer to the probe honoured the suffix, and why not.

    Lenient where a small model is imperfect (`lantern_id * 2`, a trailing
    newline, text after the line that is not the suffix again) and strict
    where ignoring the suffix shows: the first name must be the one only
    the suffix defines, and the fill must not write the suffix out again."""
    first = _IDENTIFIER.match(fill.lstrip())
    if first is None or first.group() != PROBE_EXPECTED:
        return False, f"filled {fill[:40]!r} where the suffix says {PROBE_EXPECTED!r}"
    if "class Record" in fill or "self.lantern_id =" in fill:
        return False, "wrote past the hole, into the text after it"
    return True, "filled the hole from the text after it"
