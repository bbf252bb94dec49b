"""Screenshot of a next edit suggestion in Neovim for docs/neovim.md: the
quick start (editors/nvim/quickstart.lua) on a copy of
examples/sample-workspace with one more file, pricing.py; the user renames
a parameter (ciw + Esc) and the plugin shows the same rename at its use and
at the call site, captured in tmux and rendered with ansi2png.py:

    .venv/bin/python editors/nvim/scripts/next_edit_screenshot.py [--out docs/screenshots]

The model is the `scripted` provider as a base (FIM) model whose answer is
the editable region rewritten (as in tests/nvim/test_next_edit.py), so the
picture is reproducible; Neovim, the plugin, the server and the next edit
feature (prompt, region, diff into edits, rendering) are the real thing.
Needs what screenshots.py needs (tmux, Pillow, DejaVu Sans Mono).
"""

from __future__ import annotations

import argparse
import json
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
from screenshots import COLS, SESSION, capture, keys, tmux, wait_screen  # noqa: E402

from agentls.features.next_edit.prompt import REGION_END  # noqa: E402
from agentls.features.next_edit.region import editable_region  # noqa: E402

ROWS = 20  # the file is short: no need for the quick start's 34 rows
SOURCE = '''\
"""Prices with tax, for the inventory's report."""

from inventory import Inventory, Item


def price_with_tax(item: Item, rate: float) -> float:
    """The item's price including tax."""
    return round(item.price * (1 + rate), 2)


def report(inventory: Inventory, rate: float = 0.2) -> None:
    for item in inventory.items():
        print(f"{item.name}: {price_with_tax(item, rate=rate):.2f}")
'''
LINE = 6  # 1-based: the signature of price_with_tax
COLUMN = SOURCE.splitlines()[LINE - 1].index("rate")  # 0-based, on `rate`
# What the user types (ciw on `rate`) and what the buffer is then.
RENAMED = SOURCE.replace("item: Item, rate: float", "item: Item, tax_rate: float")
# The rename carried through: its use in the body and the keyword at the call.
DONE = RENAMED.replace("(1 + rate)", "(1 + tax_rate)").replace("rate=rate", "tax_rate=rate")


def model_answer() -> str:
    """The editable region the server will send, rewritten: what a model
    that follows the rename answers."""
    offset = sum(len(line) for line in RENAMED.splitlines(keepends=True)[: LINE - 1]) + COLUMN
    region = editable_region(RENAMED, offset)
    rewritten = DONE[region.start: region.end + len(DONE) - len(RENAMED)]
    return rewritten + REGION_END


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
        (ws / "pricing.py").write_text(SOURCE)
        script = work / "script.json"
        script.write_text(json.dumps({"responses": [], "loop": True,
                                      "fim": [{"text": model_answer()}]}))
        env = {
            "AGENTLS_PROVIDER": "scripted",
            "AGENTLS_PROVIDER_OPTIONS": json.dumps({"script": str(script)}),
            # Only the next edit: no ghost text while typing the new name.
            "AGENTLS_INLINE_COMPLETION__ENABLED": "false",
            "AGENTLS_STATE_DIR": str(work / "state"),
            "NVIM_AGENTLS_CMD": str(Path(sys.executable).parent / "agentls"),
            "XDG_STATE_HOME": str(work / "xdg-state"),
        }
        command = " ".join([
            "env", *(f"{k}={json.dumps(v) if ' ' in v or '{' in v else v}"
                     for k, v in env.items()),
            args.nvim, "-u", str(REPO / "editors" / "nvim" / "quickstart.lua"), "pricing.py",
        ])
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        tmux("new-session", "-d", "-s", SESSION, "-x", str(COLS), "-y", str(ROWS),
             "-c", str(ws), command)
        try:
            wait_screen("idle")
            keys(f":call cursor({LINE}, {COLUMN + 1})", "Enter")
            keys(":echo", "Enter")  # clear the quick start's greeting
            keys("ciw")
            keys("tax_rate", literal=True)
            keys("Escape")
            # The inline virtual text follows the highlighted old name.
            wait_screen("ratetax_rate=rate")
            wait_screen("(1 + ratetax_rate)")
            time.sleep(0.3)
            path = args.out / "nvim-next-edit.png"
            render(capture(), path, COLS, ROWS)
            print("wrote", path.relative_to(REPO) if path.is_relative_to(REPO) else path)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)


if __name__ == "__main__":
    main()
