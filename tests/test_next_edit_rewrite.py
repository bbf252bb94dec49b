"""Next edit suggestions, pure logic (features/next_edit): the editable
region, the prompts, reading the model's rewrite, minimal edits, and the
rules for what is not shown."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agentls.core.editor.history import Hunk
from agentls.core.editor.next_edit import SuggestedEdit
from agentls.core.editor.positions import position_at
from agentls.features.next_edit.prompt import (
    BASE_EXAMPLE,
    REGION_END,
    REGION_START,
    before_edit,
    build_prompt,
    describe_change,
    render_edits,
)
from agentls.features.next_edit.region import CURSOR_MARKER, editable_region
from agentls.features.next_edit.rewrite import extract_rewrite, minimal_edits
from agentls.features.next_edit.suppress import apply_edits, worth_showing

SOURCE = (
    "import math\n"
    "\n"
    "def scale(x, ratio):\n"
    "    return x * factor\n"
    "\n"
    "print(scale(2, factor=3))\n"
)
CURSOR = SOURCE.index("ratio") + len("ratio")
RENAMED = SOURCE.replace("x * factor", "x * ratio").replace("factor=3", "ratio=3")


def hunk_for_rename() -> Hunk:
    start = SOURCE.index("ratio")
    return Hunk(start, "factor", "ratio", at=1.0, new_len=len("ratio"))


def test_region_is_whole_lines_around_the_cursor_with_context() -> None:
    text = "".join(f"line {n}\n" for n in range(100))
    offset = text.index("line 50") + 3
    region = editable_region(text, offset, lines_before=2, lines_after=3)
    assert region.text == "".join(f"line {n}\n" for n in range(48, 54))
    assert region.first_line == 48
    assert region.marked.startswith("line 48\nline 49\nlin" + CURSOR_MARKER + "e 50")
    assert region.before.endswith("line 47\n") and region.after.startswith("line 54\n")
    assert text[region.start : region.end] == region.text


def test_prompts_show_the_edit_the_region_and_the_cursor() -> None:
    region = editable_region(SOURCE, CURSOR)
    edits = render_edits([("file:///w/s.py", hunk_for_rename())],
                         lambda uri: SOURCE, lambda uri: "s.py")
    assert "-def scale(x, factor):\n+def scale(x, ratio):" in edits
    assert "@@ line 3 @@" in edits
    chat = build_prompt(region, edits, chat=True, path="s.py", language_id="python")
    user = chat.messages[-1].content
    assert f"{REGION_START}\n" in user and REGION_END in user
    assert f"ratio{CURSOR_MARKER}):" in user
    last = hunk_for_rename()
    base = build_prompt(region, edits, chat=False, path="s.py", language_id="python",
                        change=describe_change(SOURCE, last), original=before_edit(region, last))
    # A base model sees a worked example, the region as it was before the
    # user's edit, and what the edit was; it continues inside a fence.
    assert base.text.startswith(BASE_EXAMPLE)
    assert "```python\nimport math\n\ndef scale(x, factor):" in base.text
    assert base.text.endswith(
        "The same code after renaming `factor` to `ratio` everywhere:\n```python\n")
    assert base.stop == ("```",)


def test_describe_change() -> None:
    text = "total = price * count\n"
    # Typing a letter into a name is still a rename of the whole name.
    grown = Hunk(text.index("count") + 5, "", "s", at=1.0, new_len=1)
    text = text.replace("count", "counts")
    assert describe_change(text, grown) == "after renaming `count` to `counts` everywhere"
    op = Hunk(text.index("*"), "+", "*", at=1.0, new_len=1)
    assert describe_change(text, op) == ("after `total = price + counts` was changed to "
                                         "`total = price * counts` and the same change is made "
                                         "wherever it applies")
    assert describe_change(text, None) == "after the next edit"


def test_rename_rewrite_gives_the_call_site_edits() -> None:
    region = editable_region(SOURCE, CURSOR)
    answer = f"{REGION_START}\n{RENAMED[region.start:region.end]}{REGION_END}"
    rewritten, why = extract_rewrite(answer, region)
    assert rewritten is not None, why
    edits = minimal_edits(region.text, rewritten, region.start)
    assert [(SOURCE[e.start : e.end], e.text) for e in edits] == [
        ("factor", "ratio"), ("factor", "ratio")]
    assert apply_edits(SOURCE, edits) == RENAMED
    kept, _ = worth_showing(edits, SOURCE, CURSOR, hunk_for_rename())
    assert kept == edits


def test_answer_in_a_fence_without_markers_is_read() -> None:
    region = editable_region(SOURCE, CURSOR)
    answer = f"Here you go:\n```python\n{RENAMED[region.start:region.end]}```\n"
    rewritten, _ = extract_rewrite(answer, region)
    assert rewritten == RENAMED[region.start : region.end]


def test_garbage_whole_file_and_other_regions_give_nothing() -> None:
    text = "".join(f"value_{n} = compute({n})\n" for n in range(80))
    offset = text.index("value_40")
    region = editable_region(text, offset)
    for answer in ["I cannot help with that.",
                   f"{REGION_START}\n{text}{REGION_END}",  # the whole file
                   f"{REGION_START}\nclass Other:\n    pass\n{REGION_END}",
                   f"{REGION_START}\n{REGION_END}",
                   f"{REGION_START}\n<|editable_region_start|>{region.text}{REGION_END}"]:
        rewritten, why = extract_rewrite(answer, region)
        assert rewritten is None and why, answer


def test_noop_undo_and_suffix_edits_are_suppressed() -> None:
    hunk = hunk_for_rename()
    start = SOURCE.index("ratio")
    undo = SuggestedEdit(start, start + len("ratio"), "factor")
    assert worth_showing([undo], SOURCE, CURSOR, hunk)[0] == []
    same = SuggestedEdit(0, 6, "import")
    assert worth_showing([same], SOURCE, CURSOR, hunk) == ([], "no-op")
    in_suffix = SuggestedEdit(CURSOR + 1, CURSOR + 2, ") -> int:")
    assert worth_showing([in_suffix], SOURCE, CURSOR, hunk)[0] == []
    # A deletion the user made, put back by the model: an undo too.
    text = "a = 1\nb = 2\n"
    deleted = Hunk(6, "b = 2\n", "", at=1.0, new_len=0)
    after = text[:6] + text[12:]
    put_back = SuggestedEdit(6, 6, "b = 2\n")
    assert worth_showing([put_back], after, 0, deleted) == ([], "it undoes the last edit")


def test_whitespace_only_and_unrelated_edits_are_suppressed() -> None:
    hunk = hunk_for_rename()
    blank = SOURCE.index("\n\nprint") + 1
    dropped_blank_line = SuggestedEdit(blank, blank + 1, "")
    unrelated = SuggestedEdit(SOURCE.index("*"), SOURCE.index("*") + 1, "/")
    call_site = SuggestedEdit(SOURCE.index("factor=3"), SOURCE.index("factor=3") + 6, "ratio")
    kept, _ = worth_showing([dropped_blank_line, unrelated, call_site], SOURCE, CURSOR, hunk,
                            [hunk])
    assert kept == [call_site]


def test_changed_lines_become_one_edit_each() -> None:
    old = "def f(factor):\n    return x * factor\n"
    new = "def f(ratio):\n    return x / ratio\n"
    edits = minimal_edits(old, new, 0)
    assert [(old[e.start : e.end], e.text) for e in edits] == [
        ("factor", "ratio"), ("* factor", "/ ratio")]


def test_mid_line_change_is_widened_to_the_word() -> None:
    old = "total = price * count\n"
    new = "total = price * amount\n"
    [edit] = minimal_edits(old, new, 10)
    assert (old[edit.start - 10 : edit.end - 10], edit.text) == ("count", "amount")


def test_position_at_counts_utf16_units() -> None:
    text = "a\n\U0001f600b = 1\n"
    assert position_at(text, text.index("b"), "utf-16") == (1, 2)
    assert position_at(text, text.index("b"), "utf-8") == (1, 4)
    assert position_at(text, text.index("b"), "utf-32") == (1, 1)


lines = st.lists(st.text(alphabet="ab c_(\t", max_size=8), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(lines, lines)
def test_minimal_edits_rebuild_the_rewrite(old_lines: list[str], new_lines: list[str]) -> None:
    """Applying the edits to the document gives the rewritten region, and
    they never overlap."""
    old = "\n".join(old_lines) + "\n"
    new = "\n".join(new_lines) + "\n"
    document = "head\n" + old + "tail\n"
    edits = minimal_edits(old, new, 5)
    assert apply_edits(document, edits) == "head\n" + new + "tail\n"
    spans = sorted((e.start, e.end) for e in edits)
    for (_, end_a), (start_b, _) in itertools.pairwise(spans):
        assert end_a <= start_b


def test_a_small_region_with_most_lines_renamed_is_still_a_rewrite() -> None:
    text = "def f(factor):\n    return factor\n"
    region = editable_region(text, text.index("):"))
    answer = f"{REGION_START}\n{text.replace('factor', 'ratio')}{REGION_END}"
    assert extract_rewrite(answer, region)[0] == text.replace("factor", "ratio")


def test_relevance_follows_the_names_the_user_changed() -> None:
    text = "def f(a, b, c):\n    return a + b\n\nf(1, 2)\n"
    added_param = Hunk(text.index(", c"), "", ", c", at=1.0, new_len=3)
    call = text.index("f(1, 2)") + len("f(1, 2")
    passes_c = SuggestedEdit(call, call, ", c")
    own_line = SuggestedEdit(len(text), len(text), 'settings["model"] = "default"\n')
    kept, why = worth_showing([passes_c, own_line], text, 0, added_param, [added_param])
    assert kept == [passes_c] and why == "unrelated to the recent edits"
