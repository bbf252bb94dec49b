"""A model download in Neovim: choosing an `hf:` model starts its download
at once, and its work-done progress shows in `vim.lsp.status()` and in the
plugin's statusline until it ends. The fake hub (tests/fakes/hf_hub.py) on
loopback serves the packaged Gemma GGUF slowly enough to watch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.hf_hub import FakeHub
from tests.nvim.harness import Editor, clean_env

local = pytest.importorskip("agentls.providers.local")
pytest.importorskip("huggingface_hub", reason="huggingface_hub (agentls[local]) not installed")
if local.runtime_error() is not None or local.gemma3_chunk_paths() is None:
    pytest.skip(f"the local model runtime or Gemma is not installed: {local.INSTALL_COMMAND}",
                allow_module_level=True)

REPO = "test-org/gemma-3-270m-GGUF"


def test_download_progress_in_lsp_status_and_the_statusline(
    editor: Callable[..., Editor], tmp_path: Path
) -> None:
    gemma = Path(local.locate_model_file(local.GEMMA3))
    # ~12 s for the 253 MB file; the hub outlives a slow start on a loaded machine
    with FakeHub(delay=0.003, hard_timeout=600) as fake:
        fake.add(REPO, "gemma-3-270m-Q4_K_M.gguf", gemma)
        env = clean_env(tmp_path / "home0", HF_ENDPOINT=fake.url, HF_HOME=str(tmp_path / "hf"))
        ed = editor("main.py", env=env)
        ed.setup_agentls(settings={"provider": "local",
                                   "inlineCompletion": {"model": f"hf:{REPO}"}})
        ed.wait_attached()
        status = ed.wait_for(
            "(function() local s = vim.lsp.status() "
            "return s:find('Downloading hf:', 1, true) and s:find('%', 1, true) and s end)()",
            timeout=60, message="download progress in vim.lsp.status()")
        line = ed.wait_for(
            "(function() local s = require('agentls').statusline() "
            "return s:find('Downloading hf:', 1, true) and s end)()",
            timeout=30, message="the download in the statusline")
        # the download's own progress task ends, the client still attached
        # (a statusline without "Downloading" also means no client at all)
        ed.wait_for(
            "(function() if #vim.lsp.get_clients({ name = 'agentls' }) == 0 then return false end "
            "for _, w in pairs(require('agentls.status').state.work) do "
            "if (w.title or ''):find('Downloading', 1, true) then return false end end "
            "return true end)()",
            timeout=120, message="the download's progress to end")
        final = ed.lua("return require('agentls').statusline()")
        cached = list((tmp_path / "hf").rglob("gemma-3-270m-Q4_K_M.gguf"))
        assert cached, (f"the download ended without a file in the HF cache; statusline "
                        f"{final!r}\n--- server log ---\n{ed.lsp_log_tail()}")
    assert f"Downloading hf:{REPO}" in status and "MB" in status
    assert line.startswith("agentls: ") and f"⟳ Downloading hf:{REPO}" in line
    assert "%" in line and final.startswith("agentls: ") and "Downloading" not in final
