"""The folder -> import mapping holds for a wheel as it does for the
editable install the tests run under."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"server": "agentls", "providers": "agentls.providers", "features": "agentls.features"}


def _declared() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def _on_disk() -> set[str]:
    found = set()
    for folder, package in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    return found


def test_every_package_folder_is_declared() -> None:
    missing = _on_disk() - _declared()
    assert not missing, f"add these to [tool.setuptools].packages in pyproject.toml: {missing}"


def test_imports_resolve_to_the_brief_folders() -> None:
    import agentls
    import agentls.features
    import agentls.providers

    assert Path(agentls.__file__).parent == ROOT / "server"
    assert Path(agentls.providers.__file__).parent == ROOT / "providers"
    assert Path(agentls.features.__file__).parent == ROOT / "features"


@pytest.mark.slow
def test_wheel_contains_the_mapped_packages(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    wheel = next(tmp_path.glob("agentls-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("agentls/__init__.py", "agentls/core/agent/orchestrator.py",
                   "agentls/providers/scripted.py", "agentls/features/__init__.py",
                   "agentls/py.typed", "agentls/eval/agent/tasks/fix_discount.toml"):
        assert module in names, module
    assert not any(n.startswith(("server/", "providers/", "tests/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "agentls = agentls.cli:main" in text and "[agentls.providers]" in text
