"""The completion of a half-typed mention prefix: "@" or "@fi" completes to
"@file:", "@m" to "@mcp:". Shared by the mention features (mentions.py:
workspace files; mcp/feature.py: MCP resources), each with its own prefix.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["complete_mention_prefix"]


def complete_mention_prefix(
    text: str, typing: re.Pattern[str], prefix: str, meta: str
) -> list[dict[str, Any]]:
    """`prefix` as the one completion when `typing` (the half-typed prefix at
    the end of `text`) matches, replacing what was typed; else none."""
    match = typing.search(text)
    if match is None:
        return []
    return [{"replacement": prefix, "start": match.start(), "display": prefix,
             "display_meta": meta}]
