"""Exercism's Python practice exercises, asked the way Aider's benchmark asks
them (bench/README.md, "Exercism, side by side with Aider").

An exercise is a folder `exercises/practice/<name>/` of a checkout of
github.com/exercism/python: `.meta/config.json` names its solution stub,
its test files and its example solution (never copied into a workspace);
`.docs/` holds the text the model is given. Per exercise, as Aider's
harness does it (benchmark/benchmark.py, benchmark/prompts.py there):

- try 1 is `.docs/introduction.md` + `.docs/instructions.md` +
  `.docs/instructions.append.md` (those that exist), then a note naming the
  solution files and saying to keep the names and use only the standard
  library;
- the tests are copied back over whatever the model did to them and run
  with pytest in the workspace (180 s limit); their output, without timings
  and with the workspace's path shortened to its name, is try 2's message,
  followed by a note that the tests are correct and the files to fix.

One difference: Aider sends the whole output; here it is cut to
`output_chars` (its head and its tail, where pytest's failures begin and its
summary is), since a 1.5B with an 8k context cannot take 30 failing tests.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agentls.eval.completion.execute import run_check

__all__ = ["DEFAULT_OUTPUT_CHARS", "DEFAULT_SUBSET", "TEST_TIME_LIMIT", "Exercise", "TestRun",
           "clean_output", "failure_prompt", "first_prompt", "load_exercise", "materialize",
           "practice_exercises", "run_tests", "select_exercises", "truncate"]

TEST_TIME_LIMIT = 180.0  # Aider's
DEFAULT_SUBSET = 12
DEFAULT_OUTPUT_CHARS = 4000
_DOCS = ("introduction.md", "instructions.md", "instructions.append.md")
_FIRST_NOTE = """
####

Use the above instructions to modify the supplied files: {files}
Don't change the names of existing functions or classes, as they may be referenced from \
other code like unit tests, etc.
Only use standard libraries, don't suggest installing any packages.
"""
_FAILURE_NOTE = """
####

See the testing errors above.
The tests are correct, don't try and change them.
Fix the code in {files} to resolve the errors.
"""
_TIMING = re.compile(r"\bin \d+\.\d+s\b")
# No plugin autoload: the exercises need none, and a plugin's warnings would
# head the output the model is sent.
_PYTEST = """\
import os
import sys
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
import pytest
sys.exit(pytest.main(["-p", "no:cacheprovider", *{tests!r}]))
"""


@dataclass(frozen=True, slots=True)
class Exercise:
    name: str
    folder: Path
    solution: tuple[str, ...]  # paths relative to the folder
    tests: tuple[str, ...]

    @property
    def file_list(self) -> str:
        """The solution files' names, as the prompts name them."""
        return " ".join(PurePosixPath(p).name for p in self.solution)


@dataclass(frozen=True, slots=True)
class TestRun:
    passed: bool
    status: str  # passed | failed | timeout
    output: str  # cleaned (clean_output), not cut


def _relative(path: object, exercise: str) -> str:
    pure = PurePosixPath(str(path))
    if not isinstance(path, str) or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"exercise {exercise}: .meta/config.json names {path!r}; a file of "
                         "the exercise must be a relative path inside its folder")
    return pure.as_posix()


def load_exercise(folder: Path) -> Exercise:
    """The exercise in `folder`; ValueError saying what is missing."""
    config_file = folder / ".meta" / "config.json"
    try:
        files = json.loads(config_file.read_text(encoding="utf-8")).get("files") or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"exercise {folder.name}: cannot read {config_file}: {exc}") from None
    if not (folder / ".docs" / "instructions.md").is_file():
        raise ValueError(f"exercise {folder.name}: .docs/instructions.md is missing")
    hidden = {_relative(p, folder.name) for p in files.get("example") or ()}
    tests = tuple(_relative(p, folder.name) for p in files.get("test") or ())
    solution = tuple(p for p in (_relative(p, folder.name) for p in files.get("solution") or ())
                     if p not in hidden and p not in tests and not p.startswith((".meta/",
                                                                                ".docs/")))
    if not solution or not tests:
        raise ValueError(f"exercise {folder.name}: .meta/config.json names no solution or no "
                         "test file")
    return Exercise(folder.name, folder, solution, tests)


def practice_exercises(checkout: Path) -> list[Exercise]:
    """Every exercise of `checkout` (a clone of exercism/python, or its
    exercises/practice folder, or a folder of exercise folders), by name;
    folders that are not an exercise are skipped."""
    root = checkout / "exercises" / "practice"
    root = root if root.is_dir() else checkout
    if not root.is_dir():
        raise ValueError(f"--exercises: {checkout} is not a folder")
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            found.append(load_exercise(folder))
        except ValueError:
            continue
    if not found:
        raise ValueError(f"--exercises: no exercise (a folder with .meta/config.json and "
                         f".docs/instructions.md) in {root}; give a checkout of "
                         "github.com/exercism/python")
    return found


def select_exercises(exercises: Sequence[Exercise], *, seed: int = 1,
                     count: int = DEFAULT_SUBSET, limit: int | None = None,
                     everything: bool = False) -> list[Exercise]:
    """`count` exercises drawn by `seed` (all, by name, with `everything`),
    then the first `limit` of them. The same seed on the same checkout
    draws the same exercises in the same order."""
    ordered = sorted(exercises, key=lambda e: e.name)
    chosen = ordered if everything else random.Random(seed).sample(
        ordered, min(count, len(ordered)))
    return chosen if limit is None else chosen[: max(0, limit)]


def first_prompt(exercise: Exercise) -> str:
    """Try 1: the exercise's docs and the note naming the files."""
    docs = exercise.folder / ".docs"
    text = "".join((docs / name).read_text(encoding="utf-8") for name in _DOCS
                   if (docs / name).is_file())
    return text + _FIRST_NOTE.format(files=exercise.file_list)


def clean_output(output: str, workspace: Path) -> str:
    """The test output without timings (they would make each prompt
    differ) and with the workspace's path shortened to its name."""
    return _TIMING.sub("", output).replace(str(workspace), workspace.name)


def truncate(text: str, limit: int) -> str:
    """`text` within `limit` characters: its head and its tail around a line
    saying how much was cut; whole when `limit` is 0 or it fits."""
    if limit <= 0 or len(text) <= limit:
        return text
    keep = max(1, limit // 2)
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n[... {cut} characters of the test output cut ...]\n{text[-keep:]}"


def failure_prompt(exercise: Exercise, output: str, limit: int = DEFAULT_OUTPUT_CHARS) -> str:
    """Try 2: the failing tests' output (cut to `limit`) and the note."""
    return truncate(output, limit) + _FAILURE_NOTE.format(files=exercise.file_list)


def materialize(exercise: Exercise, workspace: Path, *, tests_only: bool = False) -> None:
    """The stub and the tests into `workspace` (only the tests, again, with
    `tests_only`: what the model did to them is undone before they run)."""
    for path in exercise.tests if tests_only else (*exercise.solution, *exercise.tests):
        target = workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(exercise.folder / path, target)


def run_tests(exercise: Exercise, workspace: Path, *,
              time_limit: float = TEST_TIME_LIMIT) -> TestRun:
    """The exercise's tests, restored, run with pytest in `workspace`
    (confined: execute.py), as this Python runs them."""
    materialize(exercise, workspace, tests_only=True)
    result = run_check(_PYTEST.format(tests=list(exercise.tests)), workspace,
                       time_limit=time_limit, output_chars=200_000)
    output = result.output if result.status != "timeout" else result.output + "\nTests timed out!"
    return TestRun(result.passed, result.status, clean_output(output, workspace))
