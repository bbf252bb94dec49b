"""Which tests check a reply's changes, and with which pytest
(features/reply_edits/checks.py)."""

from __future__ import annotations

from pathlib import Path

from agentls.features.reply_edits.checks import PYTEST_ARGS, covering_tests, pytest_argv


def touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")


def test_a_module_is_covered_by_its_tests_by_the_usual_names(tmp_path: Path) -> None:
    touch(tmp_path, "bob.py", "bob_test.py", "pkg/util.py", "pkg/test_util.py",
          "tests/test_util.py", "app/core.py", "app/tests/test_core.py", "notes.txt")
    assert covering_tests(tmp_path, ["bob.py"]) == ["bob_test.py"]
    assert covering_tests(tmp_path, ["pkg/util.py"]) == ["pkg/test_util.py", "tests/test_util.py"]
    assert covering_tests(tmp_path, ["app/core.py"]) == ["app/tests/test_core.py"]
    # A changed test file runs itself; other files and missing tests run nothing.
    assert covering_tests(tmp_path, ["bob_test.py", "bob.py"]) == ["bob_test.py"]
    assert covering_tests(tmp_path, ["notes.txt", "other.py", "../bob.py"]) == []


def test_the_workspace_pytest_comes_first_then_the_one_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    touch(tmp_path, "bin/pytest")
    (bin_dir / "pytest").chmod(0o755)
    assert pytest_argv(tmp_path, ["bob_test.py"], {"PATH": str(bin_dir)}) == \
        ["pytest", *PYTEST_ARGS, "bob_test.py"]
    assert pytest_argv(tmp_path, ["bob_test.py"], {"PATH": str(tmp_path / "none")}) is None
    assert pytest_argv(tmp_path, [], {"PATH": str(bin_dir)}) is None
    touch(tmp_path, ".venv/bin/pytest")  # not executable: not used
    assert pytest_argv(tmp_path, ["bob_test.py"], {"PATH": str(bin_dir)})[0] == "pytest"
    (tmp_path / ".venv/bin/pytest").chmod(0o755)
    assert pytest_argv(tmp_path, ["bob_test.py"], {"PATH": ""}) == \
        [".venv/bin/pytest", *PYTEST_ARGS, "bob_test.py"]
