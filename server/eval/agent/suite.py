"""The agent tasks of `agentls eval --agent`: small repositories, a prompt,
and a check run afterwards.

Each task is a TOML file in the `tasks` folder next to this module,
written for agentls (not taken from any benchmark):

    kind = "fix-test"          # one of AGENT_KINDS
    prompt = "..."             # what the user asks in the chat
    [files]                    # the repository: relative path -> content
    "pricing.py" = '''...'''
    [solution]                 # the reference solution: files it replaces
    "pricing.py" = '''...'''
    [check]
    script = '''...'''         # Python run with the workspace as the current
                               # folder and first on sys.path; exit 0 = pass

A question task checks the final answer instead of the files:

    [check]
    answer_contains = ["127.0.0.5", "8421"]   # every fact, as a whole word,
                                              # case-insensitive
    [reference]
    answer = "..."             # an answer that passes

The check script is never in the workspace while the agent works (it is
written to a folder of its own when the turn is over), so editing or
deleting a visible test cannot make a task pass.
"""

from __future__ import annotations

import importlib.resources
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentls.eval.completion.execute import DEFAULT_TIME_LIMIT, ExecResult, run_check

__all__ = ["AGENT_KINDS", "AgentTask", "CheckResult", "check_answer", "check_task",
           "load_agent_tasks", "materialize"]

AGENT_KINDS = ("fix-test", "implement", "rename", "add-param", "question")
TASKS_PACKAGE = "agentls.eval.agent"
TASKS_FOLDER = "tasks"


@dataclass(frozen=True, slots=True)
class AgentTask:
    id: str
    kind: str
    prompt: str
    files: Mapping[str, str]
    check_script: str = ""
    answer_contains: tuple[str, ...] = ()
    solution: Mapping[str, str] = field(default_factory=dict)
    reference_answer: str = ""

    @property
    def is_question(self) -> bool:
        return bool(self.answer_contains)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class CheckResult:
    passed: bool
    status: str  # passed | failed | timeout | missing (facts not in the answer)
    detail: str = ""


def _relative(path: str, task: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"agent task {task}: file path {path!r} must be relative, inside the "
                         "repository")
    return pure.as_posix()


def _strings(table: Any, task: str, key: str) -> dict[str, str]:
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ValueError(f"agent task {task}: [{key}] must map file paths to their text")
    return {_relative(path, task): text for path, text in table.items()}


def parse_task(task_id: str, data: Mapping[str, Any]) -> AgentTask:
    """One task from its TOML table; ValueError naming what is wrong."""
    kind = data.get("kind")
    if kind not in AGENT_KINDS:
        raise ValueError(f"agent task {task_id}: kind {kind!r} is not one of "
                         f"{', '.join(AGENT_KINDS)}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"agent task {task_id}: `prompt` must be a non-empty string")
    files = _strings(data.get("files"), task_id, "files")
    if not files:
        raise ValueError(f"agent task {task_id}: [files] is empty")
    check = data.get("check")
    if not isinstance(check, dict):
        raise ValueError(f"agent task {task_id}: [check] is missing")
    script = check.get("script", "")
    facts = check.get("answer_contains", [])
    if not isinstance(script, str) or not isinstance(facts, list) or not all(
            isinstance(f, str) and f for f in facts):
        raise ValueError(f"agent task {task_id}: check.script must be a string and "
                         "check.answer_contains a list of non-empty strings")
    if bool(script.strip()) == bool(facts):
        raise ValueError(f"agent task {task_id}: give either check.script or "
                         "check.answer_contains, not both or neither")
    reference = data.get("reference", {})
    answer = reference.get("answer", "") if isinstance(reference, dict) else ""
    return AgentTask(id=task_id, kind=kind, prompt=prompt.strip(), files=files,
                     check_script=script, answer_contains=tuple(facts),
                     solution=_strings(data.get("solution", {}), task_id, "solution"),
                     reference_answer=str(answer))


def load_agent_tasks(folder: Path | None = None, *, ids: Sequence[str] = (),
                     kinds: Sequence[str] = ()) -> list[AgentTask]:
    """The packaged tasks (or those in `folder`), sorted by id; only `ids` /
    `kinds` when given. ValueError for an unknown id or a malformed task."""
    if folder is None:
        root = importlib.resources.files(TASKS_PACKAGE).joinpath(TASKS_FOLDER)
        entries = [(Path(e.name).stem, e.read_text(encoding="utf-8"))
                   for e in root.iterdir() if e.name.endswith(".toml")]
    else:
        entries = [(p.stem, p.read_text(encoding="utf-8")) for p in folder.glob("*.toml")]
    tasks = []
    for task_id, text in sorted(entries):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"agent task {task_id}: not valid TOML: {exc}") from None
        tasks.append(parse_task(task_id, data))
    known = {t.id for t in tasks}
    missing = [i for i in ids if i not in known]
    if missing:
        raise ValueError(f"unknown agent task(s) {', '.join(missing)}; known: "
                         f"{', '.join(sorted(known))}")
    return [t for t in tasks if (not ids or t.id in ids) and (not kinds or t.kind in kinds)]


def materialize(task: AgentTask, workspace: Path, *, solved: bool = False) -> None:
    """Write the task's repository into `workspace` (the reference solution
    applied when `solved`)."""
    files = {**task.files, **(task.solution if solved else {})}
    for path, text in files.items():
        target = workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def check_answer(task: AgentTask, answer: str) -> CheckResult:
    """Every fact of a question task, as a whole word, in `answer`."""
    missing = [fact for fact in task.answer_contains
               if not re.search(r"(?<![A-Za-z0-9_])" + re.escape(fact) + r"(?![A-Za-z0-9_])",
                                answer, re.IGNORECASE)]
    if missing:
        return CheckResult(False, "missing", "not in the answer: " + ", ".join(missing))
    return CheckResult(True, "passed")


def check_task(task: AgentTask, workspace: Path, answer: str = "", *,
               time_limit: float = DEFAULT_TIME_LIMIT) -> CheckResult:
    """The task's check on `workspace` (and the final answer, for questions).
    The check runs with -B: it leaves no bytecode in the workspace."""
    if task.is_question:
        return check_answer(task, answer)
    result: ExecResult = run_check(task.check_script, workspace, time_limit=time_limit)
    return CheckResult(result.passed, result.status, "" if result.passed else result.output)
