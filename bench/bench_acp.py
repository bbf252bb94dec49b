"""The ACP front (`agentls acp`) against the LSP front, in one run.

1. Start-up, N rounds interleaved (machine noise hits both alike): spawn ->
   the `initialize` answer, wall clock and the child's CPU time (from
   /proc), for `agentls acp` (one NDJSON line) and for the language server
   (`agentls`, LSP framing; the same figure bench_startup.py reports).
2. Per-update overhead: the scripted provider streams an answer of K chunks
   with no delay, so what is measured is the agentls stack, not a model.
   Each prompt runs in a fresh session (ACP session/new + session/prompt;
   LSP agentls/chat without a sessionId); prompts alternate between the
   K-chunk answer and a 1-chunk one. Reported per chunk: the client-side
   wall clock from the first update to the last over their number (ACP
   agent_message_chunk, LSP agentls/messageDelta: one notification per chunk
   on both fronts; the largest gaps too, as updates arrive in bursts), and
   the agent's marginal CPU, (CPU of a K-chunk turn - CPU of a 1-chunk
   turn) / (K - 1), which leaves out the turn's fixed costs.

Usage: python bench/bench_acp.py [--rounds 10] [--chunks 2000] [--prompts 6]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_inline import Client, cpu_seconds
from bench_startup import child_environ

from tests.acp.ndjson import AcpPipe

MS = 1e3
US = 1e6


def environ(workdir: Path, config: Path | None = None) -> dict[str, str]:
    env = child_environ()
    env.update(HOME=str(workdir / "home"), AGENTLS_STATE_DIR=str(workdir / "state"),
               AGENTLS_CONFIG_FILE=str(config or workdir / "no-config.toml"))
    return env


def script(workdir: Path, chunks: int) -> Path:
    words = [f"w{i} " for i in range(chunks)]
    path = workdir / "script.json"
    path.write_text(json.dumps({"loop": True, "responses": [
        {"text": "".join(words), "chunks": words},
        {"text": "short", "chunks": ["short"]},
    ]}))
    config = workdir / "config.toml"
    config.write_text(f'provider = "scripted"\n\n[providerOptions]\nscript = "{path}"\n')
    return config


# ----------------------------------------------------------------------------- start-up


async def acp_start(workdir: Path) -> tuple[float, float]:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", "acp", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=environ(workdir), cwd=workdir)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {}}}).encode() + b"\n")
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    wall = time.perf_counter() - started
    cpu = cpu_seconds(proc.pid)
    assert json.loads(line)["result"]["protocolVersion"] == 1, line
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 30)
    return wall, cpu


async def lsp_start(workdir: Path) -> tuple[float, float]:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=environ(workdir), cwd=workdir)
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    answer = await asyncio.wait_for(client.request("initialize", {
        "processId": None, "rootUri": None, "capabilities": {}}), 60)
    wall = time.perf_counter() - started
    cpu = cpu_seconds(proc.pid)
    assert "result" in answer, answer
    await client.request("shutdown", None)
    client.notify("exit", None)
    await asyncio.wait_for(proc.wait(), 30)
    return wall, cpu


# ----------------------------------------------------------------------------- streaming


class Turns:
    """Per-chunk figures of one front: intervals between updates, and the
    agent's CPU per K-chunk and 1-chunk turn."""

    def __init__(self) -> None:
        self.intervals: list[float] = []
        self.spans: list[float] = []  # per K-chunk turn: (last - first update) / (n - 1)
        self.cpu_long: list[float] = []
        self.cpu_short: list[float] = []
        self.seen: list[int] = []

    def add(self, times: list[float], cpu: float, long: bool) -> None:
        if long:
            self.intervals += [b - a for a, b in itertools.pairwise(times)]
            self.spans.append((times[-1] - times[0]) / (len(times) - 1))
            self.cpu_long.append(cpu)
            self.seen.append(len(times))
        else:
            self.cpu_short.append(cpu)

    def marginal_cpu(self, chunks: int) -> float:
        return (statistics.median(self.cpu_long) - statistics.median(self.cpu_short)) / (
            chunks - 1)


async def acp_turns(workdir: Path, config: Path, prompts: int) -> Turns:
    pipe = await AcpPipe.start(environ(workdir, config), cwd=workdir)
    turns = Turns()
    try:
        await pipe.initialize()
        for index in range(prompts * 2 + 2):  # the first pair warms up
            session = await pipe.new_session(workdir)
            since = len(pipe.messages)
            before = cpu_seconds(pipe.proc.pid)
            answer = await pipe.request("session/prompt", {"sessionId": session, "prompt": [
                {"type": "text", "text": "go"}]}, timeout=300)
            cpu = cpu_seconds(pipe.proc.pid) - before
            assert answer["result"]["stopReason"] == "end_turn", answer
            times = [t for t, m in zip(pipe.times[since:], pipe.messages[since:], strict=True)
                     if m.get("method") == "session/update"
                     and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"]
            if index >= 2:
                turns.add(times, cpu, long=index % 2 == 0)
    finally:
        await pipe.close()
    return turns


class _Stamped(list[Any]):
    """bench_inline.Client's notification list, with arrival times."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        self.times.append(time.perf_counter())
        super().append(item)


async def lsp_turns(workdir: Path, script_path: Path, prompts: int) -> Turns:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=environ(workdir), cwd=workdir)
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    stamped = _Stamped()
    client.notifications = stamped
    turns = Turns()
    try:
        await client.request("initialize", {
            "processId": None, "rootUri": workdir.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": workdir.as_uri(), "name": "ws"}],
            "initializationOptions": {"agentls": {
                "provider": "scripted", "providerOptions": {"script": str(script_path)}}}})
        client.notify("initialized", {})
        for index in range(prompts * 2 + 2):
            since = len(stamped)
            before = cpu_seconds(proc.pid)
            answer = await asyncio.wait_for(client.request("agentls/chat", {"prompt": "go"}), 300)
            cpu = cpu_seconds(proc.pid) - before
            assert answer.get("result", {}).get("status") == "completed", answer
            times = [t for t, m in zip(stamped.times[since:], stamped[since:], strict=True)
                     if m.get("method") == "agentls/messageDelta"]
            if index >= 2:
                turns.add(times, cpu, long=index % 2 == 0)
        await client.request("shutdown", None)
        client.notify("exit", None)
        await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return turns


# ----------------------------------------------------------------------------- report


async def main(rounds: int, chunks: int, prompts: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="agentls-bench-acp-"))
    med = statistics.median
    await acp_start(workdir)  # warm the OS file cache and .pyc files
    await lsp_start(workdir)
    acp_wall, acp_cpu, lsp_wall, lsp_cpu = [], [], [], []
    for _ in range(rounds):
        wall, cpu = await acp_start(workdir)
        acp_wall.append(wall)
        acp_cpu.append(cpu)
        wall, cpu = await lsp_start(workdir)
        lsp_wall.append(wall)
        lsp_cpu.append(cpu)
    config = script(workdir, chunks)
    acp = await acp_turns(workdir, config, prompts)
    lsp = await lsp_turns(workdir, workdir / "script.json", prompts)

    print(f"agentls acp vs the language server, {platform.python_version()}, "
          f"{os.cpu_count()} cores, {platform.machine()}")
    print(f"start-up, {rounds} rounds interleaved; medians, wall clock / CPU")
    print(f"  agentls acp  spawn -> initialize answered   {med(acp_wall) * MS:6.1f} ms"
          f"  / {med(acp_cpu) * MS:6.1f} ms")
    print(f"  agentls (LSP) spawn -> initialize result    {med(lsp_wall) * MS:6.1f} ms"
          f"  / {med(lsp_cpu) * MS:6.1f} ms")
    print(f"streaming, {prompts} turns of {chunks} chunks (+ {prompts} of 1) per front")
    for name, turns in (("ACP agent_message_chunk", acp), ("LSP agentls/messageDelta", lsp)):
        intervals = sorted(turns.intervals)
        p99 = intervals[int(len(intervals) * 0.99)]
        print(f"  {name}: {med(turns.seen):.0f} updates per turn")
        print(f"    wall clock per update (first to last / n-1)  {med(turns.spans) * US:6.1f} us"
              f"   (gap p99 {p99 * US:6.0f} us: updates arrive in bursts)")
        print(f"    agent CPU per update (marginal)              "
              f"{turns.marginal_cpu(chunks) * US:6.1f} us   (turn"
              f" {med(turns.cpu_long) * MS:.0f} ms, 1-chunk turn"
              f" {med(turns.cpu_short) * MS:.0f} ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=6)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.chunks, options.prompts))
