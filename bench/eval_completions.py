"""Inline completion quality on real code: `agentls eval` over the installed
sources of httpx, pydantic, anyio and pygls (cut at run time, never copied
here), through the real language server and the configured provider (the
embedded `local` model by default). Figures are in bench/README.md.

Usage: python bench/eval_completions.py [--tasks 12] [--seed 1] [--json out.json]
       [--provider openai --base-url ... --model ...] [--setting key=json]
"""

from __future__ import annotations

import sys

from agentls.eval.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
