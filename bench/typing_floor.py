"""The floor of the typing replay: the engine alone decoding the same
suggestions with their prompts already in its cache.

From the --json of an embedded agentls run of bench/bench_typing.py (each
answered pause holds the FIM prompt agentls rendered for it, recorded in the
server, and the suggestion it showed): for each pause the model answered,
llama_cpp in-process (the same GGUF, 2 threads, n_batch 256) evaluates the
prompt once, then a second generate of as many tokens as the suggestion has
is timed, its prompt fully cached (no prompt token evaluated again). Pauses
answered from the type-ahead cache have no prompt and no floor.

    .venv/bin/python bench/bench_typing.py --floor RUN.json
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from typing_peers import pct

N_BATCH = 256
N_CTX = 4096


def decode_cached(llm: Any, tokens: list[int], count: int) -> float:
    """Seconds to generate `count` tokens after `tokens`, which the cache holds
    with live logits (llama_cpp's generate then samples at once)."""
    llm.reset()
    llm.eval(tokens)  # the cold pass: the prompt into the cache
    started = time.perf_counter()
    for made, _ in enumerate(llm.generate(tokens, top_k=1, temp=0.0, reset=True), start=1):
        if made >= count:
            break
    return time.perf_counter() - started


def run_floor(run: Path, model: str, threads: int = 2) -> None:
    from llama_cpp import Llama

    data = json.loads(run.read_text())
    pauses = [p for p in data["pauses"] if p.get("suggestion")]
    prompted = [p for p in pauses if p.get("prompt")]
    if not prompted:
        raise SystemExit(f"bench_typing --floor: {run} holds no pause with a recorded prompt "
                         "(run bench_typing.py --json on the embedded engine)")
    llm = Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_batch=N_BATCH,
                n_ctx=N_CTX, verbose=False)
    floors: list[float] = []
    ratios: list[float] = []
    rows: list[dict[str, Any]] = []
    for pause in prompted:
        tokens = llm.tokenize(pause["prompt"].encode(), special=True)
        count = max(1, len(llm.tokenize(pause["suggestion"].encode(), add_bos=False)))
        seconds = decode_cached(llm, tokens, count)
        floors.append(seconds)
        ratios.append(pause["seconds"] / seconds)
        rows.append({"typed": pause["typed"], "prompt_tokens": len(tokens),
                     "suggestion_tokens": count, "floor_s": round(seconds, 3),
                     "agentls_s": round(pause["seconds"], 3)})
    print(f"bench_typing --floor: {run}, {Path(model).name}, {threads} threads, n_batch "
          f"{N_BATCH}; {len(prompted)} of {len(pauses)} non-empty answers came from the model "
          f"({len(pauses) - len(prompted)} from the type-ahead cache, no floor)")
    print(f"  floor (suggestion's tokens, prompt cached)  p50 {statistics.median(floors):.3f} s"
          f"  p90 {pct(floors, 0.9):.3f} s; suggestion tokens p50 "
          f"{statistics.median(r['suggestion_tokens'] for r in rows):.0f}")
    agentls = [p["seconds"] for p in prompted]
    print(f"  agentls on the same pauses  p50 {statistics.median(agentls):.2f} s  p90 "
          f"{pct(agentls, 0.9):.2f} s; agentls / floor per pause p50 "
          f"{statistics.median(ratios):.1f}x  p90 {pct(ratios, 0.9):.1f}x")
    for row in rows:
        print(f"    {row['typed'][-30:]:<30} prompt {row['prompt_tokens']:>5} tok, suggestion "
              f"{row['suggestion_tokens']:>3} tok: floor {row['floor_s']:.3f} s, agentls "
              f"{row['agentls_s']:.2f} s")
