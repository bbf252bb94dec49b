"""The user's edit history (server/core/editor/history.py): keystrokes coalesce
into hunks, hunks follow the text as it moves, typed-then-deleted text
leaves nothing, the agent's edits never become hunks, and everything is
bounded."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agentls.core.editor import history as edit_history
from agentls.core.editor.history import EditHistory, TextChange

URI = "file:///w/a.py"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.01
        return self.now


def typed(history: EditHistory, text: str, at: int, chars: str, uri: str = URI) -> str:
    """Type `chars` one by one at `at`; the new text."""
    for index, char in enumerate(chars):
        offset = at + index
        history.record(uri, text, [TextChange(offset, offset, char)])
        text = text[:offset] + char + text[offset:]
    return text


def deleted(history: EditHistory, text: str, start: int, end: int, uri: str = URI) -> str:
    """Backspace from `end` down to `start`, one character at a time."""
    for offset in range(end, start, -1):
        history.record(uri, text, [TextChange(offset - 1, offset, "")])
        text = text[: offset - 1] + text[offset:]
    return text


def test_keystrokes_coalesce_into_one_hunk() -> None:
    history = EditHistory(clock=Clock())
    text = "def scale(x, factor):\n    return x * factor\n"
    start = text.index("factor")
    text = deleted(history, text, start, start + len("factor"))
    text = typed(history, text, start, "ratio")
    hunks = history.hunks(URI)
    assert len(hunks) == 1
    hunk = hunks[0]
    assert (hunk.old, hunk.new) == ("factor", "ratio")
    assert text[hunk.start : hunk.end] == "ratio"


def test_separate_places_make_separate_hunks_that_follow_the_text() -> None:
    history = EditHistory(clock=Clock())
    text = "a = 1\nb = 2\nc = 3\n"
    text = typed(history, text, text.index("3"), "4")  # "c = 43"
    text = typed(history, text, 0, "# ")  # before the first hunk: it moves
    first, second = history.hunks(URI)
    assert (first.old, first.new) == ("", "4")
    assert text[first.start : first.end] == "4"
    assert text[second.start : second.end] == "# "


def test_typed_then_deleted_leaves_no_hunk() -> None:
    history = EditHistory(clock=Clock())
    text = "x = 1\n"
    text = typed(history, text, 5, "23")
    text = deleted(history, text, 5, 7)
    assert text == "x = 1\n"
    assert history.hunks(URI) == []
    assert history.last() is None


def test_agent_edit_is_not_a_hunk_but_moves_the_users() -> None:
    history = EditHistory(clock=Clock())
    text = "one\ntwo\n"
    text = typed(history, text, text.index("two") + 3, "!")
    history.agent_edit_started(URI, ["zero\n"])
    history.record(URI, text, [TextChange(0, 0, "zero\n")])
    text = "zero\n" + text
    history.agent_edit_finished(URI)
    [hunk] = history.hunks(URI)
    assert hunk.new == "!"
    assert text[hunk.start : hunk.end] == "!"


def test_agent_echo_after_the_answer_is_recognised_by_its_text() -> None:
    clock = Clock()
    history = EditHistory(clock=clock)
    history.agent_edit_started(URI, ["print('hi')\n"])
    history.agent_edit_finished(URI)  # Neovim answers before it sends didChange
    history.record(URI, "", [TextChange(0, 0, "print('hi')\n")])
    assert history.hunks(URI) == []
    clock.now += edit_history.AGENT_ECHO_SECONDS + 1  # long after: the user's again
    history.record(URI, "print('hi')\n", [TextChange(0, 0, "print('hi')\n")])
    assert len(history.hunks(URI)) == 1


def test_several_changes_in_one_notification_apply_in_order() -> None:
    history = EditHistory(clock=Clock())
    before = "abc\n"
    # "abc" -> "xabc" -> "xabcy": the second offset is in the text after the first.
    history.record(URI, before, [TextChange(0, 0, "x"), TextChange(4, 4, "y")])
    assert [(h.old, h.new) for h in history.hunks(URI)] == [("", "x"), ("", "y")]


def test_recent_is_across_documents_oldest_first_and_close_forgets() -> None:
    history = EditHistory(clock=Clock())
    typed(history, "a\n", 1, "1", uri="file:///w/a.py")
    typed(history, "b\n", 1, "2", uri="file:///w/b.py")
    assert [uri for uri, _ in history.recent()] == ["file:///w/a.py", "file:///w/b.py"]
    history.forget("file:///w/b.py")
    assert [uri for uri, _ in history.recent()] == ["file:///w/a.py"]


def test_a_paste_is_kept_clipped() -> None:
    history = EditHistory(clock=Clock())
    big = "x" * (edit_history.MAX_HUNK_CHARS + 10)
    history.record(URI, "\n", [TextChange(0, 0, big)])
    [hunk] = history.hunks(URI)
    assert hunk.clipped and hunk.end == len(big) and len(hunk.new) < 100


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8),
                          st.text(alphabet="ab\n ", max_size=12)), max_size=60))
def test_bounded_and_every_hunk_matches_the_text(steps: list[tuple[int, int, str]]) -> None:
    """Whatever the user types, hunks hold what the text holds at their
    place, stay within the caps, and never overlap."""
    history = EditHistory(clock=Clock())
    text = "start of the file\nsecond line\n"
    for where, length, new in steps:
        start = min(where, len(text))
        end = min(start + length, len(text))
        history.record(URI, text, [TextChange(start, end, new)])
        text = text[:start] + new + text[end:]
        hunks = history.hunks(URI)
        assert len(hunks) <= edit_history.MAX_HUNKS_PER_DOCUMENT
        assert sum(h.size for h in hunks) <= edit_history.MAX_CHARS_PER_DOCUMENT
        spans = sorted((h.start, h.end) for h in hunks)
        for hunk in hunks:
            assert 0 <= hunk.start <= hunk.end <= len(text)
            if not hunk.clipped:
                assert text[hunk.start : hunk.end] == hunk.new
        for (_, end_a), (start_b, _) in itertools.pairwise(spans):
            assert end_a <= start_b
