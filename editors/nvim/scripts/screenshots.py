"""Screenshots of the Neovim plugin for docs/neovim.md.

Runs the quick start (editors/nvim/quickstart.lua on a copy of
examples/sample-workspace) in a detached tmux session, types as a user
would, captures the pane with its colours and renders PNGs with
ansi2png.py:

    .venv/bin/python editors/nvim/scripts/screenshots.py [--out docs/screenshots]

The agent is the `scripted` provider (a fixed, realistic conversation) so
the pictures are reproducible; everything else (Neovim, the plugin, the
server, approvals) is the real thing. Needs tmux (apt-get install tmux),
Pillow (pip install pillow) and DejaVu Sans Mono (fonts-dejavu-core).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))

from ansi2png import render  # noqa: E402

COLS, ROWS = 120, 34
SESSION = "agentls-nvim-shots"

OLD = "    in_stock = [item for item in inventory.items() if item.quantity > 0]\n"
NEW = OLD + ("    if not in_stock:\n        return None\n"
             "    return min(in_stock, key=lambda item: item.price)\n")
SCRIPT = {
    "fim": [{"text": "return min(in_stock, key=lambda item: item.price)"}],
    "loop": True,
    "responses": [
        {"chunks": ["Let me check ", "how items ", "are stored."], "delay": 0.05,
         "tool_calls": [{"name": "read_file", "id": "r1",
                         "arguments": {"path": "inventory.py"}}]},
        {"chunks": ["`cheapest()` builds `in_stock` ", "but never returns anything, ",
                    "so `main()` prints `None`. ", "I'll return the item with ",
                    "the lowest price."], "delay": 0.05,
         "tool_calls": [{"name": "edit_file", "id": "e1",
                         "arguments": {"path": "main.py", "old_string": OLD,
                                       "new_string": NEW}}],
         "usage": {"input_tokens": 812, "output_tokens": 64}},
        {"chunks": ["Done: `cheapest()` now returns ", "the cheapest item in stock, ",
                    "or `None` when nothing is in stock.\n\n", "`python main.py` ",
                    "now prints the apple (0.50): the plum is cheaper ",
                    "but out of stock."], "delay": 0.05,
         "usage": {"input_tokens": 905, "output_tokens": 41}},
    ],
}


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def keys(*keys: str, literal: bool = False, pause: float = 0.15) -> None:
    tmux("send-keys", "-t", SESSION, *(["-l"] if literal else []), *keys)
    time.sleep(pause)


def capture() -> str:
    return tmux("capture-pane", "-e", "-p", "-t", SESSION)


def plain() -> str:
    return tmux("capture-pane", "-p", "-t", SESSION)


def wait_screen(text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in plain():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {text!r} on screen:\n{plain()}")


def shot(out: Path, name: str) -> None:
    path = out / f"nvim-{name}.png"
    render(capture(), path, COLS, ROWS)
    print("wrote", path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--nvim", default=str(Path(sys.executable).parent / "nvim"))
    args = parser.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed: apt-get install tmux")
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="agentls-shots-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        ws = work / "sample-workspace"
        shutil.copytree(REPO / "examples" / "sample-workspace", ws)
        script = work / "script.json"
        script.write_text(json.dumps(SCRIPT))
        env = {
            "AGENTLS_PROVIDER": "scripted",
            "AGENTLS_PROVIDER_OPTIONS": json.dumps({"script": str(script)}),
            "AGENTLS_STATE_DIR": str(work / "state"),
            "NVIM_AGENTLS_CMD": str(Path(sys.executable).parent / "agentls"),
            "XDG_STATE_HOME": str(work / "xdg-state"),
        }
        command = " ".join([
            "env", *(f"{k}={json.dumps(v) if ' ' in v or '{' in v else v}"
                     for k, v in env.items()),
            args.nvim, "-u", str(REPO / "editors" / "nvim" / "quickstart.lua"), "main.py",
        ])
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        tmux("new-session", "-d", "-s", SESSION, "-x", str(COLS), "-y", str(ROWS),
             "-c", str(ws), command)
        try:
            wait_screen("idle")
            # 1. Inline completion: ghost text in the unfinished function.
            keys(":21", "Enter")
            keys("o")
            keys("if not in_stock:", literal=True)
            keys("Enter")
            keys("return None", literal=True)
            keys("Enter")  # Python's indent moves back out of the `if`
            wait_screen("return min(in_stock, key=lambda item: item.price)")
            time.sleep(0.3)
            shot(args.out, "inline-completion")
            keys("Tab", pause=0.5)
            keys("Escape")
            shot(args.out, "inline-accepted")
            keys(":e!", "Enter", pause=0.5)  # back to the file as it was

            # 2. Chat: the agent reads a file, then proposes an edit.
            keys(":AgentChat Why does main.py print None for the cheapest item?", "Enter")
            wait_screen("Type number and <Enter>")
            time.sleep(0.3)
            shot(args.out, "approval")
            keys("1", "Enter", pause=0.5)  # Apply
            wait_screen("but out of stock.")
            time.sleep(0.5)
            shot(args.out, "chat")
        finally:
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    os.sync()


if __name__ == "__main__":
    main()
