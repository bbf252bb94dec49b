"""What keeping the context within the window costs (a benchmark, not a test).

100 agent turns in one session, each a tool call whose result is ~4,000
characters (a file read) and a short answer, through the real turn loop and
the real openai provider against an instant loopback backend
(tests/fakes/http_backend.py) that answers like a model: a prompt gets a
tool call, a tool result a short answer, a compaction request a summary.

Run with a window that never fills (contextWindow 10,000,000: no cutting, no
compaction, every request carries the whole history) and with 8192 and 4096
tokens. Reported per 100 turns: model calls (and how many were compaction
calls), wall time, the time spent building requests (the budget: counting,
cutting, planning; the compaction calls themselves are counted apart), and
the mean and largest request the backend received, in bytes.

    .venv/bin/python bench/bench_compaction.py [--turns 100] [--result-chars 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentls.core.agent.bundle import AgentBundle
from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.context.fitting import ContextManager
from agentls.core.provider.contract import ProviderConfig
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.conversation import Session
from agentls.providers.openai.provider import OpenAIProvider
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    RecordedRequest,
    Reply,
    openai_chunk,
    sse,
    sse_reply,
)

MARK = "You compact the conversation"


class ReadTool:
    name = "bench-read"
    version = "1.0"

    def __init__(self, chars: int) -> None:
        self.chars = chars

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"name": "read_file", "description": "Read a file",
                 "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]

    def execute_tool(self, tool_name: str | None, payload: Any, state: dict[str, Any],
                     **_: Any) -> dict[str, Any]:
        line = f"{payload.get('path')}: a line of the file with some code in it. "
        return {"success": True, "result": (line * (self.chars // len(line) + 1))[:self.chars]}

    def format_tool_result(self, result: dict[str, Any], state: dict[str, Any]) -> str:
        return str(result.get("result"))


def answer(request: RecordedRequest) -> Reply:
    messages = request.json["messages"]
    if messages[0]["content"].startswith(MARK):
        text = "Summary: the user had files read, one per prompt; all were read."
    elif messages[-1]["role"] == "user":
        n = len(messages)
        call = {"index": 0, "id": f"c{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{n}.py"})}}
        return sse_reply([sse(openai_chunk(tool_calls=[call])),
                          sse(openai_chunk(finish_reason="tool_calls")), SSE_DONE])
    else:
        text = "Read it."
    return sse_reply([sse(openai_chunk(text)), sse(openai_chunk(finish_reason="stop")), SSE_DONE])


async def run(window: int, turns: int, chars: int) -> dict[str, Any]:
    with FakeBackend(hard_timeout=3600) as backend:
        backend.respond("POST", "/v1/chat/completions", answer)
        os.environ["BENCH_KEY"] = "sk-bench"
        provider = OpenAIProvider(ProviderConfig(
            name="openai", model="bench-model", base_url=backend.url + "/v1",
            api_key_env="BENCH_KEY"))
        core = Orchestrator(AgentBundle(provider=provider, tools=ToolExecutor([ReadTool(chars)]),
                                        system_prompt="You are a benchmark agent."))
        core.context = ContextManager(window=window)
        building = 0.0
        prepare = core.context.prepare

        async def timed_prepare(*args: Any, **kwargs: Any) -> Any:
            nonlocal building
            start = time.perf_counter()
            before = core.context.compaction_seconds
            try:
                return await prepare(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                building += spent - (core.context.compaction_seconds - before)

        core.context.prepare = timed_prepare  # type: ignore[method-assign]
        session = Session("bench")
        started = time.perf_counter()
        for turn in range(turns):
            result = await core.run_turn(session, f"Please read file {turn}")
            if result.status != "completed":
                raise SystemExit(f"turn {turn} failed: {result.error}")
            session = result.session
        wall = time.perf_counter() - started
        await provider.aclose()
        sizes = [len(r.body) for r in backend.requests_to("/v1/chat/completions")]
        compactions = sum(1 for r in backend.requests_to("/v1/chat/completions")
                          if r.json["messages"][0]["content"].startswith(MARK))
        return {
            "window": window, "calls": len(sizes), "compaction_calls": compactions,
            "wall": wall, "building": building, "compacting": core.context.compaction_seconds,
            "mean_bytes": sum(sizes) / len(sizes), "max_bytes": max(sizes),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--result-chars", type=int, default=4000)
    args = parser.parse_args()
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {args.turns} turns, "
          f"{args.result_chars}-character tool results")
    base = None
    for window in (10_000_000, 8192, 4096):
        r = asyncio.run(run(window, args.turns, args.result_chars))
        base = base or r
        label = "no limit" if window == 10_000_000 else f"{window} tokens"
        print(f"{label:>12}: {r['calls']} model calls ({r['compaction_calls']} compaction), "
              f"wall {r['wall']:.2f} s ({r['wall'] - base['wall']:+.2f} s), building requests "
              f"{r['building'] * 1000:.0f} ms ({r['building'] * 1000 / r['calls']:.2f} ms/call), "
              f"compaction calls {r['compacting'] * 1000:.0f} ms; request mean "
              f"{r['mean_bytes'] / 1024:.1f} KiB, max {r['max_bytes'] / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
