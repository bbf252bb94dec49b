"""How much text around the cursor an inline completion sends an engine on
this machine (the embedded model, or a server on a loopback address).

On a laptop CPU the prompt's evaluation is most of what the first key at a
new place waits for: ~100 prompt tokens a second for a 0.5B on 2 cores. The
feature's own budgets (`inlineCompletion.maxPrefixChars` 6,000 and
`maxSuffixChars` 2,000, made for hosted APIs) came to ~1,900 tokens, 19 s
cold; these come to ~550-700. `agentls eval` scored no worse with them
(bench/README.md, "Typing replay" and "Completion quality"). The user
raises them with providerOptions `completion_prefix_chars` and
`completion_suffix_chars` (a GPU serves far more in the same time); the
feature never sends more than its settings allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentls.core.settings.keys import camel_case
from agentls.core.types.errors import ModelError

__all__ = ["OWN_ENGINE_PREFIX_CHARS", "OWN_ENGINE_SUFFIX_CHARS", "own_engine_budgets"]

OWN_ENGINE_PREFIX_CHARS = 2000
OWN_ENGINE_SUFFIX_CHARS = 600


def own_engine_budgets(provider: str, options: Mapping[str, Any]) -> tuple[int, int]:
    """(prefix, suffix) characters from providerOptions (snake_case or
    camelCase), else the defaults; ModelError names a bad value."""
    return (_chars(provider, options, "completion_prefix_chars", OWN_ENGINE_PREFIX_CHARS),
            _chars(provider, options, "completion_suffix_chars", OWN_ENGINE_SUFFIX_CHARS))


def _chars(provider: str, options: Mapping[str, Any], key: str, default: int) -> int:
    value = options.get(key, options.get(camel_case(key)))
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"{provider}: providerOptions.{key} must be a whole number of "
                         f"characters, 1 or more (default {default}), not {value!r}",
                         code="bad_request")
    return value
