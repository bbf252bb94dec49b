"""Benchmark the `local` provider's models: load time, child RSS, tokens/s.

Runs each packaged model through the real provider (child process, HTTP,
streaming), so the figures are what the editor gets:

- load: spawn of the child -> /v1/models answers (the GGUF is already joined
  and in the page cache: the first run of all also joins Gemma's chunks);
- RSS: VmRSS (and the peak, VmHWM) of the child from /proc/<pid>/status,
  after loading and after the runs;
- completion: continuation of a Python prefix (stream_fim, temperature 0);
- chat: a short question through the chat template (stream, temperature 0).

tokens/s is decode speed: streamed chunks after the first, divided by the
time from the first to the last chunk (llama-cpp-python streams one chunk per
token). "first" is the time to the first chunk (prompt processing + one token).

Usage: python bench/bench_local.py [--threads 1,2] [--runs 3] [--tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from agentls.core.provider.contract import CompletionOptions, FimRequest, ProviderConfig
from agentls.core.types.conversation import Message
from agentls.core.types.messages import StreamChunk
from agentls.providers.local import CATALOG, LocalProvider, locate_model_file, runtime_error

PREFIX = '''import json
from pathlib import Path


def load_config(path: Path) -> dict:
    """Read a JSON config file and return it as a dict, or {} when it is missing."""
'''
QUESTION = "Explain in two sentences what a Python list comprehension is."


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of a process in MiB."""
    values = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) // 1024
    return values


async def timed(stream: AsyncIterator[StreamChunk]) -> tuple[float, float, int, str]:
    """(seconds to the first chunk, decode tokens/s, chunks, text)."""
    start = time.perf_counter()
    stamps: list[float] = []
    text: list[str] = []
    async for chunk in stream:
        if chunk.delta:
            stamps.append(time.perf_counter())
            text.append(chunk.delta)
    if not stamps:
        return float("nan"), float("nan"), 0, ""
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
    return stamps[0] - start, rate, len(stamps), "".join(text)


async def bench_model(model: str, threads: int, runs: int, tokens: int) -> dict[str, Any]:
    provider = LocalProvider(
        ProviderConfig(
            name="local",
            model=model,
            request_timeout=300,
            options={"completion_model": model, "n_threads": threads},
        )
    )
    try:
        await provider.list_models()  # starts the (one) child for this model
        stats = provider.process_stats()[model]
        pid = stats["pid"]
        loaded = proc_status(pid)
        completion, chat = [], []
        sample_completion = sample_chat = ""
        for _ in range(runs):
            options = CompletionOptions(max_tokens=tokens, temperature=0.0)
            result = await timed(provider.stream_fim(FimRequest(PREFIX, "", options)))
            completion.append(result)
            sample_completion = result[3]
            question = [Message(role="user", content=QUESTION)]
            result = await timed(provider.stream(question, options=options))
            chat.append(result)
            sample_chat = result[3]
        after = proc_status(pid)
        return {
            "model": model,
            "threads": threads,
            "load_s": stats["load_seconds"],
            "rss_loaded_mib": loaded["VmRSS"],
            "rss_after_mib": after["VmRSS"],
            "rss_peak_mib": after["VmHWM"],
            "completion_first_s": statistics.median(r[0] for r in completion),
            "completion_tok_s": statistics.median(r[1] for r in completion),
            "completion_tokens": statistics.median(r[2] for r in completion),
            "chat_first_s": statistics.median(r[0] for r in chat),
            "chat_tok_s": statistics.median(r[1] for r in chat),
            "chat_tokens": statistics.median(r[2] for r in chat),
            "sample_completion": sample_completion,
            "sample_chat": sample_chat,
        }
    finally:
        await provider.aclose()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated n_threads values")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--models", default=",".join(CATALOG))
    args = parser.parse_args()
    error = runtime_error()
    if error is not None:
        print(error.message, file=sys.stderr)
        return 2
    models = args.models.split(",")
    for model in models:
        locate_model_file(model)  # join Gemma's chunks before timing anything
    load = os.getloadavg()
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {load[0]:.2f} at start"
    )
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for model in models:
            row = await bench_model(model, threads, args.runs, args.tokens)
            rows.append(row)
            print(f"\n## {model}, n_threads={threads}")
            print(f"completion sample: {row['sample_completion']!r}")
            print(f"chat sample: {row['sample_chat']!r}")
    print(
        "\n| model | n_threads | load s | RSS loaded MiB | RSS after MiB | peak MiB "
        "| completion first s | completion tok/s | chat first s | chat tok/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['model']} | {row['threads']} | {row['load_s']:.2f} "
            f"| {row['rss_loaded_mib']} | {row['rss_after_mib']} | {row['rss_peak_mib']} "
            f"| {row['completion_first_s']:.2f} | {row['completion_tok_s']:.1f} "
            f"| {row['chat_first_s']:.2f} | {row['chat_tok_s']:.1f} |"
        )
    load = os.getloadavg()
    print(f"\nload average at end: {load[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
