"""Completions by prefix, so typing ahead into a shown suggestion needs no
model call.

An entry remembers what the model saw (the prefix and suffix windows) and
where (document and offset). A later request in the same document whose
text still holds that prefix before the old offset, then only characters of
the completion up to the cursor, then the same suffix, is answered with the
rest of the completion. Bounded LRU; lookups compare strings in place
(`str.startswith` at an offset), no copies of the document.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["CompletionCache"]


@dataclass(frozen=True, slots=True)
class _Entry:
    uri: str
    offset: int
    prefix: str
    suffix: str
    suffix_to_end: bool  # the suffix window reached the end of the document
    completion: str


class CompletionCache:
    def __init__(self, max_entries: int = 128) -> None:
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._by_uri: dict[str, list[int]] = {}
        self._next = 0
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._by_uri.clear()

    def store(
        self, uri: str, text: str, offset: int, prefix: str, suffix: str, completion: str
    ) -> None:
        """Remember `completion` for a cursor at `offset` of `text` with
        `prefix` before it and `suffix` after it (the windows the model saw)."""
        if not completion.strip():
            return
        key = self._next
        self._next += 1
        to_end = offset + len(suffix) == len(text)
        self._entries[key] = _Entry(uri, offset, prefix, suffix, to_end, completion)
        self._by_uri.setdefault(uri, []).append(key)
        while len(self._entries) > self.max_entries:
            old_key, old = self._entries.popitem(last=False)
            keys = self._by_uri.get(old.uri)
            if keys is not None:
                keys.remove(old_key)
                if not keys:
                    del self._by_uri[old.uri]

    def lookup(self, uri: str, text: str, offset: int) -> str | None:
        """The rest of a cached completion the user is typing into at
        `offset` of `text`, or None."""
        keys = self._by_uri.get(uri)
        if keys:
            for key in reversed(keys):
                entry = self._entries[key]
                typed = offset - entry.offset
                if typed < 0 or typed >= len(entry.completion):
                    continue
                start = entry.offset - len(entry.prefix)
                if (
                    start >= 0
                    and text.startswith(entry.prefix, start)
                    and text.startswith(entry.completion[:typed], entry.offset)
                    and text.startswith(entry.suffix, offset)
                    and (not entry.suffix_to_end or offset + len(entry.suffix) == len(text))
                ):
                    rest = entry.completion[typed:]
                    if rest.strip():
                        self._entries.move_to_end(key)
                        self.hits += 1
                        return rest
        self.misses += 1
        return None
