"""The tests that check a reply's changes: for each changed Python file, the
test files beside it by the usual names (`x_test.py`, `test_x.py`, and
`tests/test_x.py` next to it or at the workspace's root), run with the
workspace's own pytest (`.venv` or `venv`) or the one on PATH.

The turn runs the command after the reply's edits through the one approval
gate, like any `run_command` the model asks for, and gives a failure back
to the model (core/editor/reply_edits.py, `ReplyEdits.checks`). Claude Code
and Codex run a project's tests before they answer; a small model that sees
the failing assertion fixes what it wrote more often than one told nothing
(bench/README.md, "Exercism, side by side with Aider").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

__all__ = ["PYTEST_ARGS", "covering_tests", "is_test", "pytest_argv"]

# Short tracebacks, a few failures: the failing assertion is what the model
# needs, and a small model's context has no room for thirty of them.
PYTEST_ARGS = ("-q", "--tb=short", "--maxfail=3", "-p", "no:cacheprovider")
MAX_TEST_FILES = 8
WORKSPACE_PYTESTS = (".venv/bin/pytest", "venv/bin/pytest")


def is_test(path: PurePosixPath) -> bool:
    """A test module by its name: `test_x.py` or `x_test.py`."""
    return path.name.startswith("test_") or path.stem.endswith("_test")


def covering_tests(root: Path, changed: Sequence[str]) -> list[str]:
    """The test files (relative to `root`, which exist) that cover the
    changed files: a changed test file itself, and each changed module's
    tests by name."""
    found: list[str] = []
    for rel in changed:
        path = PurePosixPath(rel)
        if path.suffix != ".py" or ".." in path.parts or path.is_absolute():
            continue
        if is_test(path):
            candidates = [path]
        else:
            folder, stem = path.parent, path.stem
            candidates = [folder / f"{stem}_test.py", folder / f"test_{stem}.py",
                          folder / "tests" / f"test_{stem}.py",
                          PurePosixPath("tests") / f"test_{stem}.py"]
        for candidate in candidates:
            text = str(candidate)
            if text not in found and (root / text).is_file():
                found.append(text)
    return found[:MAX_TEST_FILES]


def pytest_argv(root: Path, tests: Sequence[str],
                 environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The argv that runs `tests` in `root`, or None when there is no pytest
    to run them with (the workspace's virtual environment first: its
    packages are the project's)."""
    if not tests:
        return None
    for rel in WORKSPACE_PYTESTS:
        candidate = root / rel
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [rel, *PYTEST_ARGS, *tests]
    path = (environ if environ is not None else os.environ).get("PATH")
    if shutil.which("pytest", path=path) is None:
        return None
    return ["pytest", *PYTEST_ARGS, *tests]
