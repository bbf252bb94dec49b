"""One set of local models per user (providers/local/shared/) against one set
per window: N real agentls servers over LSP on the packaged completion model
(Qwen2.5-Coder-0.5B), each asked one inline completion in turn.

Reported per mode (`local.shared` true / false): the total RSS of the model
children once all N windows are served, and each window's first completion
time (keystroke -> answer, the model load included when the window loads it),
the keystroke `--pause` s (1 by default) after the document opened: opening
it readies the model (lsp/suggestions/inline.py prepare_soon).
Each mode gets its own runtime folder, so no real model host is used.

--priority: one window; inline completions (0.5B) asked while the agent
decodes a long reply on the chat model (1.5B), with the chat child at
providerOptions.chat_nice 0 and 10 (docs/local-model.md, "Completions
first"), against the same completions with the chat model idle.

Usage: python bench/bench_shared.py [--windows 3] [--pause 1] [--priority [--asks 6]]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.harness import LspProcess  # noqa: E402

DOC = "def add(a, b):\n    \n"


def first_completion(lsp: LspProcess, folder: Path, name: str = "",
                     pause: float = 0.0) -> float:
    """Open a document, wait `pause` s (the user reads before typing), then
    time one invoked completion in it."""
    uri = (folder / f"doc{lsp.pid}{name}.py").as_uri()
    lsp.open(uri, DOC)
    time.sleep(pause)
    began = time.monotonic()
    answer = lsp.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 1, "character": 4},
        "context": {"triggerKind": 1}}, timeout=300)
    took = time.monotonic() - began
    assert "error" not in answer, answer
    return took


def run(windows: int, shared: bool, pause: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentls-bench-shared-") as tmp:
        folder = Path(tmp)
        runtime = folder / "run"
        runtime.mkdir(mode=0o700)
        settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0},
                    "local": {"shared": shared}}
        servers: list[LspProcess] = []
        times = []
        try:
            for index in range(windows):
                lsp = LspProcess.spawn(state_dir=folder / f"state{index}",
                                       env={"XDG_RUNTIME_DIR": str(runtime)})
                servers.append(lsp)
                lsp.initialize(workspace=folder, settings=settings)
                times.append(first_completion(lsp, folder, pause=pause))
            pids: dict[int, int] = {}
            for lsp in servers:
                for entry in lsp.result("agentls/status", {})["localModels"]:
                    if entry["running"]:
                        pids[entry["pid"]] = entry["rssBytes"] or 0
        finally:
            for lsp in servers:
                lsp.close()
    return {"shared": shared, "children": len(pids), "rss_mib": sum(pids.values()) / (1 << 20),
            "first": times}


def priority(nice: int, asks: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="agentls-bench-nice-") as tmp:
        folder = Path(tmp)
        runtime = folder / "run"
        runtime.mkdir(mode=0o700)
        settings = {"provider": "local", "inlineCompletion": {"debounceMs": 0},
                    "providerOptions": {"chat_nice": nice},
                    "session": {"maxOutputTokens": 4000, "maxIterations": 1}}
        with LspProcess.start(state_dir=folder / "state", workspace=folder, settings=settings,
                              env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
            first_completion(lsp, folder, "warm")
            idle = [first_completion(lsp, folder, f"idle{i}") for i in range(asks)]
            lsp.result("agentls/chat", {"prompt": "Say hi."}, timeout=600)  # loads the 1.5B
            lsp.request_async("agentls/chat", {
                "prompt": "Write a very long story about a dragon and a knight."})
            time.sleep(5)  # the prompt evaluated, the reply decoding
            busy = [first_completion(lsp, folder, f"busy{i}") for i in range(asks)]
    return {"idle": idle, "busy": busy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--priority", action="store_true")
    parser.add_argument("--asks", type=int, default=6)
    parser.add_argument("--pause", type=float, default=1.0,
                        help="seconds between opening the document and the completion (a "
                        "user's first keystroke; the model is readied when a document opens)")
    args = parser.parse_args()
    if args.priority:
        print("| chat_nice | completion, chat idle (p50 / max) | completion while the agent "
              "decodes (p50 / max) |")
        print("| --- | --- | --- |")
        for nice in (0, 10):
            times = priority(nice, args.asks)
            print(f"| {nice} | {statistics.median(times['idle']):.2f} / "
                  f"{max(times['idle']):.2f} s | {statistics.median(times['busy']):.2f} / "
                  f"{max(times['busy']):.2f} s |")
        return 0
    print("| local.shared | windows | model children | their RSS | first completion, "
          "window 1 | windows 2.. (median) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shared in (False, True):
        row = run(args.windows, shared, args.pause)
        rest = statistics.median(row["first"][1:]) if len(row["first"]) > 1 else float("nan")
        print(f"| {str(shared).lower()} | {args.windows} | {row['children']} | "
              f"{row['rss_mib']:.0f} MiB | {row['first'][0]:.2f} s | {rest:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
