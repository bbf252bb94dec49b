"""Run mypy on server/, providers/ and features/ as the package `agentls`.

mypy maps modules to folders by name, and the brief fixes folder names that
differ from the import names (server/ is `agentls`, providers/ is
`agentls.providers`, features/ is `agentls.features`). Editable installs hide
the mapping behind an import hook that mypy cannot follow, so this builds a
view of symlinks under build/typecheck/agentls and checks that, with the
settings in pyproject.toml. Errors are reported against the real files.

Usage: python tools/typecheck.py [extra mypy args]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEW = ROOT / "build" / "typecheck"


def build_view() -> Path:
    package = VIEW / "agentls"
    if VIEW.exists():
        shutil.rmtree(VIEW)
    package.mkdir(parents=True)
    for entry in (ROOT / "server").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "providers").symlink_to(ROOT / "providers")
    (package / "features").symlink_to(ROOT / "features")
    return package


def main() -> int:
    build_view()
    env = {**os.environ, "MYPYPATH": str(VIEW)}
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "-p", "agentls", *sys.argv[1:]]
    proc = subprocess.run(cmd, cwd=VIEW, env=env, capture_output=True, text=True)
    # Point messages at the real files (server/..., providers/...).
    out = proc.stdout
    for sub, real in (("agentls/providers/", "providers/"), ("agentls/features/", "features/"),
                      ("agentls/", "server/")):
        out = out.replace(sub, real)
    sys.stdout.write(out)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
