"""The type-ahead cache of inline completions."""

from __future__ import annotations

from agentls.features.inline_completion.cache import CompletionCache

DOC = "def area(r):\n    return \n\nprint(area(2))\n"
CURSOR = DOC.index("return ") + len("return ")
PREFIX, SUFFIX = DOC[:CURSOR], DOC[CURSOR:]


def _typed(chars: str) -> tuple[str, int]:
    return DOC[:CURSOR] + chars + DOC[CURSOR:], CURSOR + len(chars)


def _cache() -> CompletionCache:
    cache = CompletionCache()
    cache.store("file:///a.py", DOC, CURSOR, PREFIX, SUFFIX, "3.14 * r * r")
    return cache


def test_same_position_is_a_hit() -> None:
    assert _cache().lookup("file:///a.py", DOC, CURSOR) == "3.14 * r * r"


def test_typing_ahead_answers_the_rest() -> None:
    cache = _cache()
    for typed in ("3", "3.1", "3.14 *", "3.14 * r * "):
        text, offset = _typed(typed)
        assert cache.lookup("file:///a.py", text, offset) == "3.14 * r * r"[len(typed):]
    assert cache.hits == 4


def test_misses() -> None:
    cache = _cache()
    assert cache.lookup("file:///b.py", DOC, CURSOR) is None  # other document
    assert cache.lookup("file:///a.py", *_typed("4")) is None  # typed something else
    assert cache.lookup("file:///a.py", *_typed("3.14 * r * r")) is None  # all typed
    assert cache.lookup("file:///a.py", *_typed("3.14 * r *")) == " r"
    assert cache.lookup("file:///a.py", DOC, CURSOR - 1) is None  # moved back
    changed_suffix = DOC[:CURSOR] + "3" + DOC[CURSOR:].replace("print", "show")
    assert cache.lookup("file:///a.py", changed_suffix, CURSOR + 1) is None
    changed_prefix = DOC.replace("area", "size", 1)
    assert cache.lookup("file:///a.py", changed_prefix, CURSOR) is None
    # text appended after a suffix that reached the end of the document
    assert cache.lookup("file:///a.py", DOC + "x = 1\n", CURSOR) is None


def test_whitespace_only_rest_is_a_miss() -> None:
    cache = CompletionCache()
    cache.store("file:///a.py", DOC, CURSOR, PREFIX, SUFFIX, "x  ")
    assert cache.lookup("file:///a.py", *_typed("x")) is None
    cache.store("file:///a.py", DOC, CURSOR, PREFIX, SUFFIX, "   ")  # never stored
    assert len(cache) == 1


def test_bounded_lru() -> None:
    cache = CompletionCache(max_entries=3)
    for i in range(5):
        cache.store(f"file:///{i}.py", DOC, CURSOR, PREFIX, SUFFIX, f"value{i}")
    assert len(cache) == 3
    assert cache.lookup("file:///0.py", DOC, CURSOR) is None
    assert cache.lookup("file:///2.py", DOC, CURSOR) == "value2"  # now the newest
    cache.store("file:///5.py", DOC, CURSOR, PREFIX, SUFFIX, "value5")
    assert cache.lookup("file:///3.py", DOC, CURSOR) is None
    assert cache.lookup("file:///2.py", DOC, CURSOR) == "value2"
    cache.clear()
    assert len(cache) == 0 and cache.lookup("file:///2.py", DOC, CURSOR) is None


def test_newest_entry_wins() -> None:
    cache = _cache()
    cache.store("file:///a.py", DOC, CURSOR, PREFIX, SUFFIX, "radius ** 2")
    assert cache.lookup("file:///a.py", DOC, CURSOR) == "radius ** 2"
    assert cache.lookup("file:///a.py", *_typed("3.1")) == "4 * r * r"
