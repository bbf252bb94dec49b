"""Fixtures for the Neovim plugin tests (tests/nvim/harness.py does the work)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.harness import Editor, require_nvim

MAIN_PY = 'def answer():\n    \n\n\ndef greet(name):\n    return "hi " + name\n'

# vim.ui.select stand-in: records each call and leaves it pending until the
# test answers (asynchronously, like a picker plugin would).
SELECT_STUB = r"""
_G.picks = { calls = {}, pending = nil }
vim.ui.select = function(items, opts, on_choice)
  local shown = {}
  for _, item in ipairs(items) do
    table.insert(shown, opts.format_item and opts.format_item(item) or tostring(item))
  end
  table.insert(_G.picks.calls, { prompt = opts.prompt, items = shown, kind = opts.kind })
  _G.picks.pending = { items = items, shown = shown, on_choice = on_choice }
end
_G.picks.answer = function(index)
  local p = _G.picks.pending
  _G.picks.pending = nil
  p.on_choice(index and p.items[index] or nil, index)
end
_G.picks.answer_title = function(title)
  for i, shown in ipairs(_G.picks.pending.shown) do
    if shown == title then return _G.picks.answer(i) end
  end
  error('no item ' .. title .. ' in ' .. vim.inspect(_G.picks.pending.shown))
end
"""


@pytest.fixture(scope="session")
def nvim_path() -> str:
    return require_nvim()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.py").write_text(MAIN_PY)
    (ws / "notes.md").write_text("# Notes\n")
    return ws


@pytest.fixture
def editor(nvim_path: str, tmp_path: Path, workspace: Path) -> Iterator[Callable[..., Editor]]:
    """editor(*args) starts Neovim in the workspace; all are closed after the test."""
    started: list[Editor] = []

    def start(*args: str, **kwargs: Any) -> Editor:
        ed = Editor.start(workspace, tmp_path / f"home{len(started)}", args=args, **kwargs)
        started.append(ed)
        ed.lua(SELECT_STUB)
        return ed

    yield start
    for ed in started:
        ed.close()
