"""Fixtures shared by the reliability suite (tests/reliability)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small project: a Python file, notes, a nested folder."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "notes.md").write_text("the notes say 42\n")
    return root
