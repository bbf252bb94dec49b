"""Prompt building for inline completion: positions, budgets, FIM and chat
prompts, neighbour context, token budgets."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentls.core.editor.inline_completion import OpenDocument
from agentls.core.editor.positions import PositionOutOfRange, offset_at, position_at
from agentls.features.inline_completion.document import cursor_context
from agentls.features.inline_completion.neighbours import NeighbourIndex, Snippet, display_path
from agentls.features.inline_completion.prompt import (
    FILL_MARKER,
    build_prompt,
    context_budget,
    fit_to_tokens,
    trim_end,
    trim_start,
)

# --------------------------------------------------------------------------- positions

TEXT = "ab\nx😋y = 1\r\nlast"


@pytest.mark.parametrize(
    ("line", "character", "encoding", "expected"),
    [
        (0, 0, "utf-16", 0),
        (0, 2, "utf-16", 2),
        (0, 9, "utf-16", 2),  # past the end of the line: its end (LSP)
        (1, 1, "utf-16", 4),  # after "x"
        (1, 3, "utf-16", 5),  # the emoji is two UTF-16 units
        (1, 2, "utf-32", 5),
        (1, 5, "utf-8", 5),  # ... and four UTF-8 bytes
        (1, 99, "utf-16", 10),  # end of line, before "\r\n"
        (2, 4, "utf-16", 16),
    ],
)
def test_offset_at(line: int, character: int, encoding: str, expected: int) -> None:
    assert offset_at(TEXT, line, character, encoding) == expected


def test_offset_at_rejects_lines_past_the_end() -> None:
    with pytest.raises(PositionOutOfRange, match="3 line"):
        offset_at(TEXT, 3, 0)
    with pytest.raises(PositionOutOfRange):
        offset_at(TEXT, -1, 0)
    assert offset_at("", 0, 0) == 0


def _reference_offset(text: str, line: int, character: int) -> int | None:
    """LSP's line breaks: "\\r\\n", a lone "\\r" or "\\n"."""
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines, breaks = parts[::2], parts[1::2]
    if line >= len(lines):
        return None
    start = sum(len(item) + len(end) for item, end in zip(lines[:line], breaks, strict=False))
    return start + min(character, len(lines[line]))


@given(st.text(alphabet="ab \n\r", max_size=3000), st.integers(0, 1200), st.integers(0, 40))
def test_offset_at_matches_a_line_split(text: str, line: int, character: int) -> None:
    try:
        found: int | None = offset_at(text, line, character)
    except PositionOutOfRange:
        found = None
    assert found == _reference_offset(text, line, character)


@given(st.text(alphabet="ab \n\r", max_size=400), st.data())
def test_position_at_inverts_offset_at(text: str, data: st.DataObject) -> None:
    line_count = len(re.split(r"\r\n|\r|\n", text))
    line = data.draw(st.integers(0, line_count - 1))
    offset = offset_at(text, line, data.draw(st.integers(0, 40)))
    assert position_at(text, offset) == (line, offset - offset_at(text, line, 0))


def test_a_lone_carriage_return_ends_a_line() -> None:
    text = "one\rtwo\r\nthree\nfour"
    assert [offset_at(text, line, 0) for line in range(4)] == [0, 4, 9, 15]
    assert offset_at(text, 0, 99) == 3 and offset_at(text, 1, 99) == 7
    assert position_at(text, text.index("wo")) == (1, 1)
    assert position_at(text, text.index("our")) == (3, 1)
    with pytest.raises(PositionOutOfRange, match="4 line"):
        offset_at(text, 4, 0)


# --------------------------------------------------------------------------- budgets


def test_cursor_context_cuts_windows_at_line_boundaries() -> None:
    lines = [f"line{i} = {i}" for i in range(100)]
    text = "\n".join(lines)
    offset = text.index("line50")
    ctx = cursor_context(text, offset + 4, max_prefix_chars=40, max_suffix_chars=30)
    assert len(ctx.prefix) <= 40 and len(ctx.suffix) <= 30
    assert ctx.prefix.endswith("\nline")
    assert ctx.prefix.split("\n")[0].startswith("line")  # a whole first line
    assert ctx.suffix.endswith("\n")  # a whole last line
    assert ctx.line_prefix == "line" and ctx.line_suffix == "50 = 50"
    assert ctx.mid_line


def test_cursor_context_at_line_end_and_crlf() -> None:
    ctx = cursor_context("if x:\r\n    y\r\n", 12, max_prefix_chars=100, max_suffix_chars=100)
    assert ctx.line_prefix == "    y" and ctx.line_suffix == "" and not ctx.mid_line
    assert ctx.eol == "\r\n" and ctx.indent == "    "


@pytest.mark.parametrize(
    ("text", "size", "start", "end"),
    [
        ("aaa\nbbb\nccc", 5, "ccc", "aaa\n"),
        ("aaa\nbbb\nccc", 100, "aaa\nbbb\nccc", "aaa\nbbb\nccc"),
        ("abcdefgh", 3, "fgh", "abc"),  # no line boundary in reach
        ("aaa\nbbb", 0, "", ""),
    ],
)
def test_trim(text: str, size: int, start: str, end: str) -> None:
    assert trim_start(text, size) == start
    assert trim_end(text, size) == end


# --------------------------------------------------------------------------- prompts


def _ctx(text: str, marker: str = "█") -> object:
    offset = text.index(marker)
    return cursor_context(text.replace(marker, ""), offset, max_prefix_chars=6000,
                          max_suffix_chars=2000)


def test_fim_prompt_is_prefix_and_suffix() -> None:
    ctx = _ctx("def f(x):\n    █\nprint(f(1))\n")
    prompt = build_prompt(ctx, fim=True, language_id="python", path="a.py",  # type: ignore[arg-type]
                          max_prefix_chars=6000)
    assert prompt.fim and prompt.prefix == "def f(x):\n    " and prompt.suffix == "\nprint(f(1))\n"
    assert prompt.stop == () and prompt.messages == ()


def test_fim_prompt_mid_line_stops_at_newline() -> None:
    ctx = _ctx("print(█)\n")
    prompt = build_prompt(ctx, fim=True, language_id="python", path="a.py",  # type: ignore[arg-type]
                          max_prefix_chars=6000)
    assert prompt.stop == ("\n",)


def test_chat_prompt_asks_for_the_missing_code_only() -> None:
    ctx = _ctx("def f(x):\n    █\n")
    prompt = build_prompt(ctx, fim=False, language_id="python", path="pkg/a.py",  # type: ignore[arg-type]
                          max_prefix_chars=6000)
    system, user = prompt.messages
    assert system.role == "system" and "only the code" in system.content
    assert "no markdown fences" in system.content
    assert user.role == "user"
    assert f"def f(x):\n    {FILL_MARKER}\n" in user.content
    assert "pkg/a.py (python)" in user.content


def test_neighbour_context_takes_room_from_the_prefix_budget() -> None:
    body = "".join(f"value_{i} = compute_total(items, {i})\n" for i in range(200))
    ctx = cursor_context(body + "total = compute_total(", len(body) + 22,
                         max_prefix_chars=2000, max_suffix_chars=100)
    snippet = Snippet("lib/util.py", "def compute_total(items, start):\n    return sum(items)", 3)
    fim = build_prompt(ctx, fim=True, language_id="python", path="a.py",
                       max_prefix_chars=2000, snippets=[snippet])
    assert fim.prefix.startswith("# Path: lib/util.py\n# def compute_total(items, start):\n")
    assert len(fim.prefix) <= 2000
    assert fim.prefix.endswith("total = compute_total(")
    chat = build_prompt(ctx, fim=False, language_id="python", path="a.py",
                        max_prefix_chars=2000, snippets=[snippet])
    assert "--- lib/util.py\ndef compute_total" in chat.messages[1].content
    # a language without a known line comment gets no FIM context
    other = build_prompt(ctx, fim=True, language_id="brainfuck", path="a.bf",
                         max_prefix_chars=2000, snippets=[snippet])
    assert "Path:" not in other.prefix


class _WordCounter:
    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_fit_to_tokens_trims_far_ends() -> None:
    prefix = "\n".join(f"p{i} x y" for i in range(50))  # 150 words
    suffix = "\n".join(f"s{i} x y" for i in range(50))
    new_prefix, new_suffix = fit_to_tokens(prefix, suffix, _WordCounter(), 60)
    counter = _WordCounter()
    assert counter.count_tokens(new_prefix) + counter.count_tokens(new_suffix) <= 60
    assert counter.count_tokens(new_suffix) <= 15
    assert new_prefix.endswith("p49 x y") and new_suffix.startswith("s0 x y")


def test_prompt_with_token_counter_fits_the_window() -> None:
    text = "\n".join(f"line {i} here" for i in range(300))
    ctx = cursor_context(text, len(text) // 2, max_prefix_chars=6000, max_suffix_chars=2000)
    prompt = build_prompt(ctx, fim=True, language_id="python", path="a.py",
                          max_prefix_chars=6000, tokens=_WordCounter(), token_limit=100)
    assert len(prompt.prefix.split()) + len(prompt.suffix.split()) <= 100


def test_context_budget() -> None:
    assert context_budget(6000) == 1500 and context_budget(400) == 100


# --------------------------------------------------------------------------- neighbours


def test_neighbours_pick_windows_sharing_identifiers() -> None:
    util = OpenDocument(
        "file:///w/lib/util.py", "python", 1,
        "import os\n\n" + "\n" * 20 + "def parse_config(path):\n    return load_yaml(path)\n",
    )
    noise = OpenDocument("file:///w/lib/noise.py", "python", 1, "def unrelated():\n    pass\n")
    index = NeighbourIndex()
    found = index.snippets("config = parse_config(", [noise, util], 1000)
    assert [s.path for s in found] == ["lib/util.py"]
    assert "def parse_config(path)" in found[0].text
    assert index.snippets("config = parse_config(", [util], 10) == []  # over budget
    assert index.snippets("(", [util], 1000) == []  # nothing to match on


def test_neighbour_index_is_rebuilt_only_on_a_new_version() -> None:
    index = NeighbourIndex()
    doc = OpenDocument("file:///a.py", "python", 1, "def alpha_beta():\n    pass\n")
    assert index.snippets("alpha_beta()", [doc], 500)
    windows = index._index(doc)
    assert index._index(doc) is windows
    changed = OpenDocument("file:///a.py", "python", 2, "def gamma_delta():\n    pass\n")
    assert index._index(changed) is not windows
    assert not index.snippets("alpha_beta()", [changed], 500)


def test_display_path() -> None:
    assert display_path("file:///home/u/pkg/mod%20x.py") == "pkg/mod x.py"
    assert display_path("untitled:Untitled-1") == "Untitled-1"
