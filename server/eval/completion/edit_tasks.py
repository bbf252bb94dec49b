"""Next edit tasks from real git history (`agentls eval --next-edit`).

A commit that changed a file in two places close together is a next edit:
the first hunk is shown to the server as the user's edit (a didChange on the
file as it was before the commit), the hunk after it is what a good
suggestion proposes. Cut at run time with `git log` / `git show`; nothing
is copied.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agentls.core.editor.positions import code_units

__all__ = ["EditTask", "cut_edit_tasks"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)
MAX_HUNK_LINES = 6
MAX_GAP_LINES = 10  # the target must lie inside the editable region
MAX_FILE_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class EditTask:
    id: str
    path: str
    language_id: str
    before: str  # the file before the commit
    edited: str  # after the user's edit (the first hunk)
    expected: str  # after the next edit too (the second hunk)
    change: tuple[int, int, str]  # the first hunk: start line, end line (exclusive) in before, text
    cursor: tuple[int, int]  # line, character (UTF-16) after the user's edit


@dataclass(frozen=True, slots=True)
class _Hunk:
    start: int  # 0-based first old line replaced (or inserted before)
    count: int  # old lines replaced
    lines: list[str]  # new lines


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=60, check=True).stdout


def _hunks(diff: str) -> list[_Hunk]:
    found: list[_Hunk] = []
    matches = list(_HUNK.finditer(diff))
    for index, match in enumerate(matches):
        old_start, old_count = int(match.group(1)), int(match.group(2) or "1")
        body_end = matches[index + 1].start() if index + 1 < len(matches) else len(diff)
        body = diff[match.end() : body_end].split("\n")[1:]
        new = [line[1:] for line in body if line.startswith("+")]
        start = old_start if old_count == 0 else old_start - 1
        found.append(_Hunk(start, old_count, new))
    return found


def _apply(lines: list[str], hunks: list[_Hunk]) -> list[str]:
    out = list(lines)
    for hunk in sorted(hunks, key=lambda h: h.start, reverse=True):
        out[hunk.start : hunk.start + hunk.count] = hunk.lines
    return out


def cut_edit_tasks(repo: Path, *, count: int, commits: int = 400,
                   suffixes: tuple[str, ...] = (".py",)) -> list[EditTask]:
    """Up to `count` tasks from the newest `commits` non-merge commits."""
    try:
        shas = _git(repo, "log", "--no-merges", f"-n{commits}", "--format=%H").split()
    except (OSError, subprocess.SubprocessError):
        return []
    tasks: list[EditTask] = []
    for sha in shas:
        if len(tasks) >= count:
            break
        try:
            names = _git(repo, "show", "--format=", "--name-only", sha).split()
        except subprocess.SubprocessError:
            continue
        for name in names:
            if not name.endswith(suffixes):
                continue
            task = _task(repo, sha, name)
            if task is not None:
                tasks.append(task)
                break  # one task per commit
    return tasks


def _task(repo: Path, sha: str, name: str) -> EditTask | None:
    try:
        diff = _git(repo, "show", "--format=", "--unified=0", sha, "--", name)
        before = _git(repo, "show", f"{sha}^:{name}")
    except subprocess.SubprocessError:
        return None  # a new file, or no parent
    if len(before) > MAX_FILE_CHARS or "\r" in before or not before.endswith("\n"):
        return None
    hunks = _hunks(diff)
    for first, second in itertools.pairwise(hunks):
        small = all(h.count <= MAX_HUNK_LINES and len(h.lines) <= MAX_HUNK_LINES
                    for h in (first, second))
        gap = second.start - (first.start + first.count)
        if not small or not 0 <= gap <= MAX_GAP_LINES or not (first.lines or first.count):
            continue
        lines = before.split("\n")[:-1]
        edited = _apply(lines, [first])
        expected = _apply(lines, [first, second])
        if edited == expected:
            continue
        new_text = "\n".join(first.lines) + ("\n" if first.lines else "")
        last = first.lines[-1] if first.lines else ""
        cursor_line = first.start + max(0, len(first.lines) - 1)
        cursor_char = code_units(last)
        return EditTask(
            id=f"{sha[:10]}:{name}:{first.start + 1}", path=name, language_id="python",
            before=before, edited="\n".join(edited) + "\n", expected="\n".join(expected) + "\n",
            change=(first.start, first.start + first.count, new_text),
            cursor=(cursor_line, cursor_char))
    return None
