"""The loopback fake Hugging Face hub (tests/fakes/hf_hub.py) as a process,
for the VS Code download test: serves the packaged Gemma 3 GGUF as
`test-org/gemma-3-270m-GGUF`, slowly enough (AGENTLS_FAKE_HUB_DELAY seconds
per 64 KiB) for the progress notification to be seen, prints its URL on
stdout, and stops when its stdin closes (or after 10 minutes)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from agentls.core.types.errors import ModelError
from agentls.providers.local import GEMMA3, locate_model_file
from tests.fakes.hf_hub import FakeHub

try:
    GGUF = Path(locate_model_file(GEMMA3))
except ModelError as exc:  # the test skips, saying why
    print(f"SKIP {exc}", flush=True)
    sys.exit(0)

with FakeHub(delay=float(os.environ.get("AGENTLS_FAKE_HUB_DELAY", "0.003")),
             hard_timeout=600) as hub:
    hub.add("test-org/gemma-3-270m-GGUF", "gemma-3-270m-Q4_K_M.gguf", GGUF)
    print(hub.url, flush=True)
    sys.stdin.read()
