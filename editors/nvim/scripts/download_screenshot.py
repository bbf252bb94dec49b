"""Screenshot of a model download in Neovim for docs/local-model.md: the
quick start with `inlineCompletion.model = "hf:..."`, served by the loopback
fake hub (tests/fakes/hf_hub.py) with the packaged Gemma GGUF, captured in
tmux while the download runs (the plugin's statusline):

    .venv/bin/python editors/nvim/scripts/download_screenshot.py [--out docs/screenshots]

Needs what screenshots.py needs (tmux, Pillow, DejaVu Sans Mono) and the
local model extra (llama-cpp-python, Gemma, huggingface_hub).
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
sys.path.insert(0, str(REPO))

from ansi2png import render  # noqa: E402
from screenshots import COLS, ROWS, SESSION, capture, plain, tmux  # noqa: E402

from agentls.providers.local import GEMMA3, locate_model_file  # noqa: E402
from tests.fakes.hf_hub import FakeHub  # noqa: E402

MODEL = "hf:test-org/gemma-3-270m-GGUF"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--nvim", default=str(Path(sys.executable).parent / "nvim"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentls-shots-") as tmp, \
            FakeHub(delay=0.004) as hub:
        work = Path(tmp)
        hub.add(MODEL.removeprefix("hf:"), "gemma-3-270m-Q4_K_M.gguf",
                Path(locate_model_file(GEMMA3)))
        ws = work / "sample-workspace"
        shutil.copytree(REPO / "examples" / "sample-workspace", ws)
        env = {
            "AGENTLS_PROVIDER": "local",
            "AGENTLS_INLINE_COMPLETION__MODEL": MODEL,
            "AGENTLS_STATE_DIR": str(work / "state"),
            "NVIM_AGENTLS_CMD": str(Path(sys.executable).parent / "agentls"),
            "XDG_STATE_HOME": str(work / "xdg-state"),
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(work / "hf"),
        }
        command = " ".join(["env", *(f"{k}={v}" for k, v in env.items()), args.nvim, "-u",
                            str(REPO / "editors" / "nvim" / "quickstart.lua"), "main.py"])
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        tmux("new-session", "-d", "-s", SESSION, "-x", str(COLS), "-y", str(ROWS),
             "-c", str(ws), command)
        try:
            deadline = time.monotonic() + 60
            while "Downloading" not in plain() or "%" not in plain():
                if time.monotonic() > deadline:
                    raise SystemExit(f"no download on screen:\n{plain()}")
                time.sleep(0.2)
            time.sleep(3)  # some way in
            path = args.out / "nvim-model-download.png"
            render(capture(), path, COLS, ROWS)
            print("wrote", path)
            print(json.dumps(plain().splitlines()[-3:]))
        finally:
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)


if __name__ == "__main__":
    main()
