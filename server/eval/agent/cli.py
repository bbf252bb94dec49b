"""`agentls eval --agent`: the agent tasks (agent_suite) through the real
server (agent_runner), scored and reported (agent_report).

    agentls eval --agent --engine local --model /path/to/model.gguf
    agentls eval --agent --engine http://127.0.0.1:8080/v1 --model qwen2.5-coder
    agentls eval --agent --engine ollama:http://127.0.0.1:11434 --model qwen2.5-coder:1.5b
    agentls eval --agent --kinds rename,question --only fix_mean --json out.json

The model's tool calls run for real in a temporary copy of each task's
repository (run_command included: every question is answered Allow), and
each check runs under execute.py's limits: run it where that is acceptable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentls.eval.agent.report import agent_summary, agent_table, task_table
from agentls.eval.agent.runner import run_agent_tasks
from agentls.eval.agent.suite import AGENT_KINDS, load_agent_tasks

__all__ = ["run_agent_eval"]


def run_agent_eval(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    kinds = [k.strip() for k in (args.kinds or "").split(",") if k.strip()]
    unknown = [k for k in kinds if k not in AGENT_KINDS]
    if unknown:
        print(f"--kinds: unknown {unknown}; with --agent use some of {', '.join(AGENT_KINDS)}",
              file=sys.stderr)
        return 2
    ids = [i.strip() for i in (args.only or "").split(",") if i.strip()]
    try:
        tasks = load_agent_tasks(ids=ids, kinds=kinds)
    except ValueError as exc:
        print(f"--agent: {exc}", file=sys.stderr)
        return 2
    if args.tasks is not None:
        tasks = tasks[: max(0, args.tasks)]
    if not tasks:
        print("--agent: no task matches --kinds / --only / --tasks", file=sys.stderr)
        return 2
    settings.setdefault("approval", {})["mode"] = "message"  # every question comes to us

    def progress(done: int, total: int, row: dict[str, Any]) -> None:
        if not args.quiet:
            mark = "P" if row["passed"] else "F"
            print(f"[{done}/{total}] {mark} {row['id']} {row['time_s']:.0f} s, "
                  f"{row['tool_calls']} calls ({row['valid_calls']} valid), "
                  f"{row.get('reply_edits', 0)} reply edits, "
                  f"{row['model_calls']} model calls, {row['total_tokens']} tokens"
                  f"{'  ' + row['error'][:120] if row['error'] else ''}", file=sys.stderr)

    rows = asyncio.run(run_agent_tasks(tasks, settings, turn_time_limit=args.turn_time_limit,
                                       check_time_limit=args.time_limit, progress=progress))
    totals = agent_summary(rows)
    print(task_table(rows))
    print()
    print(agent_table(totals))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"settings": settings, "totals": totals,
                                         "tasks": rows}, indent=2))
        print(f"results: {args.json}")
    return 0
