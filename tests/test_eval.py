"""`agentls eval` (server/eval): tasks cut from real files put back together
give the file again, the same seed gives the same tasks, and the scores
mean what they say. The run through the real server is covered by
test_eval_runs_through_the_real_server (scripted provider)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentls.eval.completion.report import edit_similarity, score, summary, table
from agentls.eval.completion.runner import Outcome
from agentls.eval.completion.tasks import cut_tasks, package_sources, repository_sources

SOURCE = '''"""A module."""

import math


def area(radius):
    """The area."""
    squared = radius * radius
    return math.pi * squared


def describe(shape, size):
    label = f"{shape} of size {size}"
    if size > 10:
        label = label + " (large)"
    return label
'''


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    for index in range(6):
        (root / f"mod{index}.py").write_text(SOURCE)
    return root


def test_tasks_put_back_together_give_the_file(tmp_path: Path) -> None:
    tasks = cut_tasks(repository_sources(repo(tmp_path)), count=6, seed=3)
    assert sorted(t.kind for t in tasks) == ["body", "body", "line", "line", "span", "span"]
    for task in tasks:
        assert task.text[: task.offset] + task.expected + task.text[task.offset :] == SOURCE
        assert task.expected.strip()
        line_start = task.text.rfind("\n", 0, task.offset) + 1
        assert task.line == task.text.count("\n", 0, task.offset)
        assert task.character == task.offset - line_start  # ASCII: UTF-16 units = chars
    body = next(t for t in tasks if t.kind == "body")
    assert body.expected.startswith(("squared", "label")) and "return" in body.expected
    span = next(t for t in tasks if t.kind == "span")
    assert span.text[span.offset :].split("\n", 1)[0].strip()  # code follows the cursor
    assert "text" not in tasks[0].to_dict()  # never stored


def test_same_seed_same_tasks(tmp_path: Path) -> None:
    files = repository_sources(repo(tmp_path))
    first = [t.id for t in cut_tasks(files, count=6, seed=7)]
    assert first == [t.id for t in cut_tasks(files, count=6, seed=7)]


def test_installed_packages_are_a_source() -> None:
    files = package_sources(["httpx"])
    assert files and all(path.suffix == ".py" for _, _, path in files)
    assert package_sources(["no_such_package_here"]) == []


def test_scores() -> None:
    assert edit_similarity("return a * b", "return a * b  \n") == 1.0
    assert edit_similarity("", "abc") == 0.0
    assert 0.7 < edit_similarity("return a * c", "return a * b") < 1.0
    tasks = cut_tasks([("p", Path("/"), Path("/dev/null"))], count=1, seed=1)
    assert tasks == []  # an empty file gives no task
    from agentls.eval.completion.tasks import Task

    task = Task(id="line:x.py:1", kind="line", source="p", path="x.py", language_id="python",
                text="", offset=0, line=0, character=0, expected="return a * b")
    rows = [score(Outcome(task, "return a * b\n    extra", 10.0, 400, 0)),
            score(Outcome(task, "", 30.0, 400, 120))]
    assert rows[0]["first_line_exact"] and not rows[0]["exact"]
    assert rows[1]["empty"]
    totals = summary(rows)["all"]
    assert totals["exact_match"] == 0 and totals["first_line_exact"] == 0.5
    assert totals["empty_rate"] == 0.5 and totals["tokens_sent_mean"] == 110
    assert "line" in table(summary(rows))


def test_eval_runs_through_the_real_server(tmp_path: Path) -> None:
    """`agentls eval --repo` end to end with the scripted provider (every
    completion answers `return label`): the table and the JSON come out."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"fim": [{"text": "return label"}], "loop": True}))
    out = tmp_path / "out.json"
    env = {"AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
           "AGENTLS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "agentls", "eval", "--repo", str(repo(tmp_path)), "--tasks", "3",
         "--provider", "scripted", "--setting", f'providerOptions={{"script": "{script}"}}',
         "--json", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert "exact" in result.stdout and "p50 ms" in result.stdout
    data = json.loads(out.read_text())
    assert data["totals"]["all"]["tasks"] == 3
    assert all(t["completion"] for t in data["tasks"])  # every task got an answer
    assert all(t["prompt_chars"] > 0 and not t["error"] for t in data["tasks"])


def test_the_def_mul_case_is_caught() -> None:
    """The `line` task is the issue's case: the cursor on the indented empty
    line under `def mul(a, b):`. An answer that starts with a line break
    (which left "    " behind before the fix in postprocess.py) scores as
    wrong; the right insert scores as exact."""
    from agentls.eval.completion.tasks import Task

    source = "def mul(a, b):\n    return a * b\n"
    cursor = source.index("return")
    task = Task(id="line:mul.py:2", kind="line", source="p", path="mul.py",
                language_id="python", text=source[:cursor] + "\n", offset=cursor, line=1,
                character=4, expected="return a * b")
    wrong = score(Outcome(task, "\n    return a * b", 5.0, 20, 0))
    right = score(Outcome(task, "return a * b", 5.0, 20, 0))
    assert not wrong["exact"] and not wrong["first_line_exact"]
    assert right["exact"] and right["first_line_exact"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "PATH": "/usr/bin:/bin",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e", "HOME": "/tmp"})


def test_next_edit_tasks_from_git_history_through_the_server(tmp_path: Path) -> None:
    """A commit that renames a parameter in the signature and at its use is a
    task: the signature change is sent as the user's edit, the use is the
    target. With a scripted base model that answers the rewrite, the
    suggestion matches the commit exactly."""
    from agentls.eval.completion.edit_tasks import cut_edit_tasks

    repo = tmp_path / "git"
    repo.mkdir()
    before = "def scale(x, factor):\n    value = 1\n    return x * factor\n"
    after = before.replace("factor", "ratio")
    (repo / "m.py").write_text(before)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    (repo / "m.py").write_text(after)
    _git(repo, "commit", "-qam", "rename")
    [task] = cut_edit_tasks(repo, count=5)
    assert task.before == before and task.expected == after
    assert task.edited == before.replace("x, factor", "x, ratio")
    assert task.cursor == (0, len("def scale(x, ratio):"))

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"fim": [{"text": after + "```"}], "loop": True}))
    out = tmp_path / "nes.json"
    env = {"AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
           "AGENTLS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "agentls", "eval", "--next-edit", "--repo", str(repo),
         "--provider", "scripted", "--setting", f'providerOptions={{"script": "{script}"}}',
         "--json", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert "next edit tasks 1: exact 1.00" in result.stdout
    [row] = json.loads(out.read_text())["tasks"]
    assert row["edits"] == 1 and row["exact"] and not row["error"]


def test_eval_repo_never_sends_a_file_a_tracked_link_leads_to(tmp_path: Path) -> None:
    """A repository that tracks a link to a file outside it (and one to a
    folder outside): the outside text never reaches the provider; the
    repository's own files still make the tasks."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = SOURCE.replace("area", "outside_secret_area")
    (outside / "secret.py").write_text(secret)
    root = tmp_path / "linked"
    root.mkdir()
    (root / "mine.py").write_text(SOURCE)
    (root / "leak.py").symlink_to(outside / "secret.py")
    (root / "lib").symlink_to(outside, target_is_directory=True)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "links"]):
        _git(root, *args)
    assert "leak.py" in subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                                       text=True, check=True).stdout
    record = tmp_path / "calls.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"fim": [{"text": "return label"}], "loop": True,
                                  "record": str(record)}))
    out = tmp_path / "out.json"
    env = {"AGENTLS_CONFIG_FILE": str(tmp_path / "none.toml"),
           "AGENTLS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "agentls", "eval", "--repo", str(root), "--tasks", "6",
         "--provider", "scripted", "--setting", f'providerOptions={{"script": "{script}"}}',
         "--json", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stderr
    paths = {task["id"].split(":")[1] for task in json.loads(out.read_text())["tasks"]}
    assert paths == {"mine.py"}
    sent = record.read_text()
    assert "outside_secret_area" not in sent and "def area" in sent
