"""Property tests: the WorkspaceEdit edit_file produces, applied to the
original text by a tiny LSP applier (positions in UTF-16 code units, or
UTF-8 / UTF-32 when negotiated), gives exactly the intended string, for
random texts with non-ASCII characters, surrogate pairs and CRLF / CR / LF
line endings."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentls.core.editor.edits import DocumentSnapshot, EditOutcome, EditRequest
from agentls.core.tools.contract import ToolContext
from agentls.features.tools.files import EditFileTool
from agentls.features.tools.text_edits import (
    StringEdit,
    apply_string_edits,
    changed_line_ranges,
    diff_regions,
    text_edits,
)

PIECES = ["a", "b", "x", " ", "\t", "\n", "\r", "\r\n", "é", "ß", "中", "😀", "𝄞", "\u2028",
          "\ufeff", "ab", "line\n"]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(max_size=60),
)


def units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(ch) > 0xFFFF else 1


def offset_at(text: str, position: dict[str, int], encoding: str) -> int:
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
    assert 0 <= position["line"] < len(starts), position
    index = starts[position["line"]]
    count = 0
    while count < position["character"]:
        assert index < len(text) and text[index] not in "\r\n", "character past the line end"
        count += units(text[index], encoding)
        index += 1
    assert count == position["character"], "a position inside a character"
    return index


def apply_lsp_edits(text: str, edits: list[dict[str, Any]], encoding: str = "utf-16") -> str:
    spans = [(offset_at(text, e["range"]["start"], encoding),
              offset_at(text, e["range"]["end"], encoding), e["newText"]) for e in edits]
    spans.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        assert end <= start, "overlapping edits"
    for start, end, new in reversed(spans):
        text = text[:start] + new + text[end:]
    return text


# --------------------------------------------------------------------------- the diff


@settings(max_examples=400, deadline=None)
@given(old=texts, new=texts, encoding=st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_minimal_edits_turn_old_into_new(old: str, new: str, encoding: str) -> None:
    edits = text_edits(old, new, encoding)
    assert apply_lsp_edits(old, edits, encoding) == new
    assert (edits == []) == (old == new)


@settings(max_examples=200, deadline=None)
@given(old=texts, new=texts)
def test_changed_lines_are_sorted_and_inside_the_new_text(old: str, new: str) -> None:
    regions = diff_regions(old, new)
    ranges = changed_line_ranges(new, regions)
    last_line = len(re.findall(r"\r\n|\r|\n", new))
    previous = -2
    for first, last in ranges:
        assert previous + 1 < first <= last <= last_line
        previous = last
    assert bool(ranges) == (old != new)


# --------------------------------------------------------------------------- edit_file


class Recorder:
    """An EditApplier that only records the request (and says applied)."""

    def __init__(self) -> None:
        self.requests: list[EditRequest] = []

    async def apply(self, request: EditRequest) -> EditOutcome:
        self.requests.append(request)
        return EditOutcome(applied=True)


def run_edit_file(root: Path, text: str, arguments: dict[str, Any]
                  ) -> tuple[dict[str, Any], list[EditRequest]]:
    target = root / "f.txt"
    uri = target.as_uri()

    def lookup(path: str) -> DocumentSnapshot | None:
        return DocumentSnapshot(uri=uri, path=path, text=text, version=7)

    editor = Recorder()
    context = ToolContext(workspace_folders=(str(root),), snapshots=lookup, editor=editor,
                          session_id="s")
    tool = EditFileTool()
    result = asyncio.run(tool.run_tool(
        "edit_file", {"path": "f.txt", **arguments}, tool.init({}), context))
    return result, editor.requests


@st.composite
def text_and_substring(draw: st.DrawFn) -> tuple[str, str]:
    text = draw(texts.filter(bool))
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, min(len(text), start + 12)))
    return text, text[start:end]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=text_and_substring(), new=texts, replace_all=st.booleans())
def test_edit_file_applies_exactly_the_intended_replacement(
    tmp_path_factory: Any, pair: tuple[str, str], new: str, replace_all: bool
) -> None:
    root = tmp_path_factory.mktemp("ws")
    text, old = pair
    result, requests = run_edit_file(
        root, text, {"old_string": old, "new_string": new, "replace_all": replace_all})
    first = text.find(old)
    unique = text.find(old, first + 1) < 0
    if old == new:
        assert result["error"]["code"] == "invalid_arguments"
        return
    if not replace_all and not unique:
        assert result["error"]["code"] == "ambiguous" and requests == []
        return
    intended = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    if intended == text:
        assert result["success"] is False and requests == []
        return
    assert result["success"] is True, result
    [request] = requests
    [change] = request.edit["documentChanges"]
    assert change["textDocument"] == {"uri": (root / "f.txt").as_uri(), "version": 7}
    assert request.base_versions == {(root / "f.txt").as_uri(): 7}
    assert apply_lsp_edits(text, change["edits"]) == intended
    assert result["output"]["new_text"] == intended and result["output"]["old_text"] == text


@st.composite
def multi_edits(draw: st.DrawFn) -> tuple[str, list[StringEdit]]:
    text = draw(texts.filter(bool))
    edits = []
    current = text
    for _ in range(draw(st.integers(1, 4))):
        if not current:
            break
        start = draw(st.integers(0, len(current) - 1))
        end = draw(st.integers(start + 1, min(len(current), start + 8)))
        old = current[start:end]
        new = draw(texts)
        edit = StringEdit(old, new, draw(st.booleans()))
        edits.append(edit)
        try:
            current = apply_string_edits(current, [edit])
        except Exception:
            break
    return text, edits


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=multi_edits())
def test_multi_edit_is_all_or_nothing_and_exact(tmp_path_factory: Any,
                                                case: tuple[str, list[StringEdit]]) -> None:
    root = tmp_path_factory.mktemp("ws")
    text, edits = case
    try:
        intended: str | None = apply_string_edits(text, edits)
    except Exception:
        intended = None
    payload = [{"old_string": e.old_string, "new_string": e.new_string,
                "replace_all": e.replace_all} for e in edits]
    result, requests = run_edit_file(root, text, {"edits": payload})
    if intended is None or intended == text:
        assert result["success"] is False and requests == []
        return
    assert result["success"] is True, result
    [change] = requests[0].edit["documentChanges"]
    assert apply_lsp_edits(text, change["edits"]) == intended
