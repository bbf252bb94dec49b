"""The project-instruction lookup before a model call, over deep paths
(docs/security.md): how long `ProjectInstructions.files_for` takes, and how
many file system calls it makes, for a conversation that touched N paths
2,000 folders deep, the first time (nothing cached) and again (the next
model call).

    .venv/bin/python bench/bench_instructions.py            # --paths 50 --depth 2000

The figure to read is the time of the second lookup (it runs before every
model call, in a worker thread) and that neither grows with the depth.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

from agentls.core.context.instructions import ProjectInstructions
from agentls.features.policy.sensitive import ModelFileAccess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paths", type=int, default=50)
    parser.add_argument("--depth", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "AGENTS.md").write_text("root rules\n")
        (root / "d" / "d").mkdir(parents=True)
        (root / "d" / "AGENTS.md").write_text("nested rules\n")
        touched = ["d/" * args.depth + f"f{i}.py" for i in range(args.paths)]
        first: list[float] = []
        again: list[float] = []
        calls = (0, 0)
        for _ in range(args.repeat):
            instructions = ProjectInstructions(root, reader=ModelFileAccess([root]))
            start = time.perf_counter()
            found = instructions.files_for(touched)
            first.append(time.perf_counter() - start)
            after_first = instructions.stats
            start = time.perf_counter()
            instructions.files_for(touched)
            again.append(time.perf_counter() - start)
            calls = (after_first, instructions.stats - after_first)
            assert [f.path for f in found] == ["AGENTS.md", "d/AGENTS.md"]
    print(f"{args.paths} paths {args.depth} folders deep, median of {args.repeat}; "
          f"Python {platform.python_version()}, {platform.machine()}")
    print(f"first lookup  {statistics.median(first) * 1000:8.2f} ms  {calls[0]:6d} fs calls")
    print(f"again         {statistics.median(again) * 1000:8.2f} ms  {calls[1]:6d} fs calls")


if __name__ == "__main__":
    main()
