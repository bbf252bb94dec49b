"""Benchmark an `hf:` model download end to end on loopback: the fake hub
(tests/fakes/hf_hub.py, huggingface_hub's real client against it) serving
the packaged Gemma 3 GGUF (253 MB), through hub.download(): model info,
HEAD, GET (10 MiB reads), then agentls' SHA-256 and GGUF checks.

Prints, per run (median at the end): the whole download, the time to the
first progress callback, the number of callbacks, and the verification
(SHA-256 of the file) on its own, so the cost agentls adds on top of the
transfer is visible. The network is loopback: real downloads are bounded by
the link, not by this code.

Usage: python bench/bench_download.py [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentls.providers.local import GEMMA3, locate_model_file
from agentls.providers.local.models import hub
from tests.fakes.hf_hub import FakeHub

REPO = "bench-org/gemma-3-270m-GGUF"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    gguf = Path(locate_model_file(GEMMA3))
    print(f"file: {gguf.name}, {gguf.stat().st_size / 1e6:.1f} MB")
    results = []
    with FakeHub() as fake:
        fake.add(REPO, "gemma-3-270m-Q4_K_M.gguf", gguf)
        os.environ["HF_ENDPOINT"] = fake.url
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="agentls-bench-hf-") as tmp:
                started = time.perf_counter()
                first: list[float] = []

                def on_progress(done: int, total: int | None, first: list[float] = first) -> None:
                    if not first:
                        first.append(time.perf_counter())

                path = hub.download(hub.parse_hf_reference(f"hf:{REPO}"), hf_cache=Path(tmp),
                                    on_progress=on_progress)
                total = time.perf_counter() - started
                size = path.stat().st_size
                v0 = time.perf_counter()
                digest = hashlib.sha256()
                with path.open("rb") as handle:
                    while block := handle.read(1 << 20):
                        digest.update(block)
                verify = time.perf_counter() - v0
                result = {"seconds": total, "mb_s": size / 1e6 / total,
                          "first_progress": (first[0] - started) if first else float("nan"),
                          "verify_seconds": verify}
                results.append(result)
                print(f"run {run + 1}: {total:.2f} s ({result['mb_s']:.0f} MB/s incl. checks), "
                      f"first progress after {result['first_progress'] * 1000:.0f} ms, "
                      f"SHA-256 of the file alone {verify:.2f} s")
    print("median: " + ", ".join(
        f"{key} {statistics.median(r[key] for r in results):.3g}" for key in results[0]))


if __name__ == "__main__":
    main()
