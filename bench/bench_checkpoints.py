"""What checkpoints cost an agent edit, and what a restore costs to plan.

Each agent edit now first commits the file's previous content to the session
database (WAL, synchronous=FULL: one fsync) and, once the editor answered,
commits the hash of what was written (a second fsync). This measures those
two transactions per edit for files of several sizes, through the same
`CheckpointingEditor` the orchestrator uses, against a stand-in editor that
answers at once, and compares with the same edit without checkpoints. It
also times planning the restore of a turn that changed many files.

    .venv/bin/python bench/bench_checkpoints.py            # --edits 200 --files 100

Figures depend on the disk's fsync latency far more than on the CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentls.core.checkpoints.files import TurnCheckpoints, current_text, plan_restore
from agentls.core.checkpoints.store import CheckpointStore, content_hash
from agentls.core.editor.edits import DocumentSnapshot, EditOutcome, EditRequest
from agentls.core.sessions.store import SessionStore


class InstantEditor:
    position_encoding = "utf-16"

    async def apply(self, request: EditRequest) -> EditOutcome:
        return EditOutcome(applied=True)


def lookup(path: str) -> DocumentSnapshot | None:
    text = current_text(path, None)
    return None if text is None else DocumentSnapshot(Path(path).as_uri(), path, text, None)


async def edit_latency(root: Path, store: SessionStore, size: int, edits: int,
                       checkpoints: bool) -> list[float]:
    session = store.create_session().session_id
    line = "x" * 79 + "\n"
    text = line * max(1, size // len(line))
    times: list[float] = []
    for index in range(edits):
        path = root / f"f{size}-{checkpoints}-{index}.txt"  # a new file each time: a first change
        path.write_text(text)
        turn = TurnCheckpoints(CheckpointStore(store), session, 1, 0)
        context = {"editor": InstantEditor(), "snapshots": lookup}
        editor = turn.wrap(context)["editor"] if checkpoints else context["editor"]
        request = EditRequest("edit_file", session, "bench", {}, "", (str(path),),
                              after={str(path): text + "y\n"})
        start = time.perf_counter()
        await editor.apply(request)
        times.append(time.perf_counter() - start)
    return times


def restore_planning(root: Path, store: SessionStore, files: int) -> float:
    session = store.create_session().session_id
    checkpoints = CheckpointStore(store)
    before = {}
    written = {}
    for index in range(files):
        path = root / f"r{index}.txt"
        path.write_text(f"agent text {index}\n" * 50)
        before[str(path)] = f"old text {index}\n" * 50
        written[(1, str(path))] = content_hash(path.read_text())
    checkpoints.save_before(session, 1, 0, before)
    checkpoints.settle(session, written)
    start = time.perf_counter()
    tracked = checkpoints.files_since(session, 1) or []
    plan = plan_restore(tracked, lookup, lambda real: True)
    elapsed = time.perf_counter() - start
    assert len(plan.restored) == files
    return elapsed


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with SessionStore(root / "sessions.sqlite3") as store:
            print(f"{args.edits} first edits per row; Python {sys.version.split()[0]}, "
                  f"database in {root}")
            print(f"{'file size':>10}  {'plain p50':>9}  {'checkpointed p50':>16}  "
                  f"{'p95':>7}  {'added p50':>9}")
            asyncio.run(edit_latency(root, store, 1_000, 20, True))  # warm-up: threads, pages
            for size in (1_000, 10_000, 100_000, 1_000_000):
                plain = asyncio.run(edit_latency(root, store, size, args.edits, False))
                checked = asyncio.run(edit_latency(root, store, size, args.edits, True))
                print(f"{size:>10,}  {ms(plain, .5):>7.3f}ms  {ms(checked, .5):>14.3f}ms  "
                      f"{ms(checked, .95):>5.2f}ms  {ms(checked, .5) - ms(plain, .5):>7.3f}ms")
            runs = [restore_planning(root, store, args.files) for _ in range(5)]
            print(f"planning the restore of {args.files} files (50 lines each): "
                  f"median {statistics.median(runs) * 1000:.1f} ms of 5")


if __name__ == "__main__":
    main()
