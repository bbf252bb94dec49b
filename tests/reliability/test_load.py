"""Load, bounded for CI (bench/bench_load.py runs the full-size version and
docs/reliability.md has its figures).

- 20 concurrent agent turns (openai provider against a loopback backend
  that streams with small delays and answers each conversation from its own
  content), twice over the same sessions: every turn completes, every
  session holds exactly its own messages, in order.
- A typing storm: 3,000 keystrokes (a 10-minute session at 5 keys/s), each
  a didChange and an inline completion, against an instant loopback
  backend. The server's RSS after warm-up grows by less than
  RSS_GROWTH_BOUND_MIB; latency is reported against the bench targets
  (docs/architecture.md, "The two hot paths") and asserted only as
  generous ratios: the last part of the storm is not much slower than the
  first (no degradation), and p50 is within a wide multiple of the targets.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.harness import LspProcess
from tests.reliability.load import (
    AgentBackend,
    check_sessions,
    concurrent_turns,
    document,
    percentiles,
    typing_storm,
)

TURNS = 20
STORM_KEYS = int(os.environ.get("AGENTLS_STORM_KEYS", "3000"))
WARMUP_KEYS = 300
RSS_GROWTH_BOUND_MIB = 4  # the pygls future leak was +6-7 MiB per 3,000 keys
# docs/architecture.md, "The two hot paths": round trip p50 <= 3 ms (model
# path, instant backend), type-ahead cache hits < 1 ms. CI asserts 10x: a
# loaded 2-core machine.
MODEL_P50_TARGET_MS = 3.0
CACHE_P50_TARGET_MS = 1.0
GENEROUS = 10


def settings(url: str) -> dict[str, object]:
    return {"provider": "openai", "baseUrl": url + "/v1", "model": "qwen2.5-coder-1.5b",
            "inlineCompletion": {"debounceMs": 0}, "session": {"maxIterations": 4}}


def test_twenty_concurrent_agent_turns(tmp_path: Path, workspace: Path) -> None:
    with AgentBackend(chunk_delay=0.01) as backend, \
            LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                             settings=settings(backend.url)) as lsp:
        first = concurrent_turns(lsp, TURNS, "first")
        rss_after_first = lsp.rss_kib()
        second = concurrent_turns(lsp, TURNS, "second", session_ids=first.session_ids)
        check_sessions(lsp, first.session_ids, turns=2)
        # Every notification belongs to one session, in that session's order.
        for sid in first.session_ids:
            indexes = [p["index"] for p in lsp.notifications_of("agentls/message")
                       if p["sessionId"] == sid]
            assert indexes == list(range(8)), (sid, indexes)
        status = lsp.result("agentls/status", {})
        assert {s["session_id"] for s in status["sessions"]} == set(first.session_ids)
        assert all(s["status"] == "completed" for s in status["sessions"])
        growth = (lsp.rss_kib() - rss_after_first) / 1024
    assert backend.calls["chat"] == 2 * 2 * TURNS
    # Concurrency works: 20 turns at once take far less than 20 in a row
    # (each is two streamed model calls with ~0.05 s of delays).
    for stats in (first, second):
        assert stats.seconds < max(stats.latencies) * 2 + 5
    assert growth < RSS_GROWTH_BOUND_MIB, f"RSS grew {growth:.1f} MiB over 20 more turns"
    print(f"\n20 concurrent turns: {first.seconds:.2f} s then {second.seconds:.2f} s; "
          f"per turn p50 {percentiles(second.latencies)['p50'] * 1e3:.0f} ms; "
          f"RSS growth {growth:+.1f} MiB")


def test_typing_storm_keeps_memory_flat_and_latency_steady(
    tmp_path: Path, workspace: Path
) -> None:
    text = document()
    uri = (workspace / "storm.py").as_uri()
    with AgentBackend() as backend, \
            LspProcess.start(state_dir=tmp_path / "state", workspace=workspace,
                             settings=settings(backend.url)) as lsp:
        lsp.open(uri, text)
        run = typing_storm(lsp, uri, text, WARMUP_KEYS + STORM_KEYS, sample_every=WARMUP_KEYS)
        counters = lsp.result("agentls/status", {})["completions"]
    baseline = dict(run.rss_kib)[WARMUP_KEYS]  # after warm-up
    final = run.rss_kib[-1][1]
    growth_mib = (final - baseline) / 1024
    peak_mib = (max(rss for done, rss in run.rss_kib if done >= WARMUP_KEYS) - baseline) / 1024
    storm_ms = run.latencies_ms[WARMUP_KEYS:]
    model, cache = percentiles(run.model_ms), percentiles(run.cache_ms)
    third = len(storm_ms) // 3
    early = percentiles(storm_ms[:third])["p50"]
    late = percentiles(storm_ms[-third:])["p50"]
    print(f"\ntyping storm: {run.requests} keys ({WARMUP_KEYS} warm-up) in {run.seconds:.1f} s; "
          f"model path p50 {model['p50']:.2f} ms p95 {model['p95']:.2f} ms "
          f"(target {MODEL_P50_TARGET_MS} ms); cache p50 {cache['p50']:.2f} ms "
          f"p95 {cache['p95']:.2f} ms (target {CACHE_P50_TARGET_MS} ms); "
          f"server CPU {run.cpu_ms_per_request:.2f} ms/request; "
          f"RSS {baseline / 1024:.1f} -> {final / 1024:.1f} MiB ({growth_mib:+.1f}, "
          f"peak {peak_mib:+.1f}); early/late p50 {early:.2f}/{late:.2f} ms; "
          f"backend calls {backend.calls['fim']}; counters {counters}")
    assert run.requests == WARMUP_KEYS + STORM_KEYS
    # Memory: flat after warm-up.
    assert growth_mib < RSS_GROWTH_BOUND_MIB and peak_mib < RSS_GROWTH_BOUND_MIB
    # Answers: suggestions keep coming (almost every request has items).
    assert run.empty < run.requests * 0.05, run.empty
    # The cache does its job: one model call per line typed, not per key.
    assert backend.calls["fim"] < run.requests / 5
    # Latency: no degradation over the storm, and within a wide multiple of
    # the targets (the figures to compare with the targets are printed and
    # recorded by bench/bench_load.py).
    assert late < early * 3 + 1.0, (early, late)
    assert model["p50"] < MODEL_P50_TARGET_MS * GENEROUS
    assert cache["p50"] < CACHE_P50_TARGET_MS * GENEROUS * 2
