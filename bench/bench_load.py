"""Load benchmark of a real agentls server: concurrent agent turns and a long
typing storm; the full-size version of tests/reliability/test_load.py.

The server runs as a subprocess on stdio with provider `openai` pointed at
a loopback OpenAI-compatible backend in ITS OWN process (tests/reliability/
load.py, AgentBackend): chat requests stream a few chunks with a small delay
and answer each conversation from its own content (a `list_files` tool
call, then "Done: <prompt>"), FIM requests are answered at once.

1. Agent turns: --rounds batches of --turns concurrent agentls/chat
   requests (the first batch new sessions, the next ones the same
   sessions); every session is checked for being whole and only its own.
   Reports wall time per batch, per-turn latency, RSS.
2. Typing storm: --keys keystrokes into a 19 KB Python file, each a
   didChange plus an inline completion request answered before the next
   key: a new line (a model call) then the suggestion typed character by
   character (type-ahead cache hits). Reports latency (model path / cache
   path, p50/p95/p99), server CPU per request, and RSS every
   --sample-every keys after a warm-up, with the growth from the warm-up
   baseline (the CI bound is 20 MiB).

Usage (from the repository root):
    /work/venv/bin/python bench/bench_load.py            # --turns 20 --rounds 5 --keys 30000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.harness import LspProcess, rss_kib  # noqa: E402
from tests.reliability.load import (  # noqa: E402
    AgentBackend,
    check_sessions,
    concurrent_turns,
    document,
    percentiles,
    typing_storm,
)

WARMUP_KEYS = 300


def serve_backend(chunk_delay: float) -> None:
    with AgentBackend(chunk_delay=chunk_delay) as backend:
        print(backend.url, flush=True)
        while True:
            time.sleep(3600)


def start_backend(chunk_delay: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, __file__, "--backend", str(chunk_delay)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def main(turns: int, rounds: int, keys: int, sample_every: int, chunk_delay: float) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="agentls-bench-load-"))
    workspace = workdir / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("def main():\n    return 1\n")
    backend, url = start_backend(chunk_delay)
    settings = {"provider": "openai", "baseUrl": url + "/v1", "model": "qwen2.5-coder-1.5b",
                "inlineCompletion": {"debounceMs": 0}, "session": {"maxIterations": 4}}
    print(f"agentls load bench; Python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.2f}")
    try:
        # 1. concurrent agent turns
        with LspProcess.start(state_dir=workdir / "state", workspace=workspace,
                              settings=settings) as lsp:
            print(f"\n1. agent turns: {rounds} batches of {turns} concurrent turns "
                  f"(2 streamed model calls each, {chunk_delay * 1e3:.0f} ms between chunks)")
            sessions = None
            rss_start = lsp.rss_kib()
            for batch in range(rounds):
                stats = concurrent_turns(lsp, turns, f"batch{batch}", session_ids=sessions,
                                         timeout=300)
                sessions = sessions or stats.session_ids
                lat = percentiles(stats.latencies)
                print(f"   batch {batch + 1}: {stats.seconds:.2f} s wall, per turn "
                      f"p50 {lat['p50'] * 1e3:.0f} ms, max {lat['max'] * 1e3:.0f} ms; "
                      f"RSS {lsp.rss_kib() / 1024:.1f} MiB")
            assert sessions is not None
            check_sessions(lsp, sessions, turns=rounds)
            print(f"   all {turns} sessions intact ({4 * rounds} messages each, own prompts "
                  f"only); RSS {rss_start / 1024:.1f} -> {lsp.rss_kib() / 1024:.1f} MiB")

        # 2. typing storm
        text = document()
        with LspProcess.start(state_dir=workdir / "state2", workspace=workspace,
                              settings=settings) as lsp:
            uri = (workspace / "storm.py").as_uri()
            lsp.open(uri, text)
            print(f"\n2. typing storm: {keys} keys after {WARMUP_KEYS} warm-up "
                  f"({len(text) // 1000} KB document, instant backend)")

            def report(done: int, rss: int) -> None:
                print(f"   {done:>6} keys: VmRSS {rss / 1024:.1f} MiB", flush=True)

            run = typing_storm(lsp, uri, text, WARMUP_KEYS + keys, sample_every=sample_every,
                               on_sample=report)
            hwm = _vm_hwm(lsp.pid)
            counters = lsp.result("agentls/status", {})["completions"]
        warm = next(rss for done, rss in run.rss_kib if done >= sample_every)
        final = run.rss_kib[-1][1]
        model, cache = percentiles(run.model_ms), percentiles(run.cache_ms)
        storm = run.latencies_ms[WARMUP_KEYS:]
        third = len(storm) // 3
        print(f"   {run.requests} requests in {run.seconds:.1f} s "
              f"({run.requests / run.seconds:.0f}/s, each a didChange + a request)")
        print(f"   model path ({len(run.model_ms)}): p50 {model['p50']:.2f} ms  "
              f"p95 {model['p95']:.2f} ms  p99 {model['p99']:.2f} ms")
        print(f"   cache path ({len(run.cache_ms)}): p50 {cache['p50']:.2f} ms  "
              f"p95 {cache['p95']:.2f} ms  p99 {cache['p99']:.2f} ms")
        print(f"   first/last third p50: {percentiles(storm[:third])['p50']:.2f} / "
              f"{percentiles(storm[-third:])['p50']:.2f} ms; empty answers {run.empty}")
        print(f"   server CPU {run.cpu_ms_per_request:.2f} ms/request (incl. the didChange)")
        print(f"   RSS at {sample_every} keys {warm / 1024:.1f} MiB, end {final / 1024:.1f} MiB "
              f"({(final - warm) / 1024:+.1f} MiB), VmHWM {hwm:.1f} MiB; counters {counters}")
        print(f"   backend: {json.dumps(_backend_calls(url))}")
    finally:
        backend.kill()
        backend.wait()


def _vm_hwm(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float(rss_kib(pid)) / 1024


def _backend_calls(url: str) -> dict[str, int]:
    import urllib.request

    with urllib.request.urlopen(url + "/stats", timeout=5) as answer:
        calls: dict[str, int] = json.loads(answer.read())
    return calls


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--backend":
        serve_backend(float(sys.argv[2]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="concurrent turns per batch")
    parser.add_argument("--rounds", type=int, default=5, help="batches of concurrent turns")
    parser.add_argument("--keys", type=int, default=30_000, help="keystrokes in the storm")
    parser.add_argument("--sample-every", type=int, default=3000, help="RSS sample interval")
    parser.add_argument("--chunk-delay", type=float, default=0.01,
                        help="seconds between streamed chunks of a chat reply")
    args = parser.parse_args()
    main(args.turns, args.rounds, args.keys, args.sample_every, args.chunk_delay)
