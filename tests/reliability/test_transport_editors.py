"""The editors connect to a running server (docs/security.md): Neovim with
`connect = "tcp:HOST:PORT"` reads the token file the server wrote and sends
it in initializationOptions.agentlsToken; with `connect = "unix"` it uses the
server's socket in $XDG_RUNTIME_DIR/agentls. Both through the real server
and a real headless Neovim (tests/nvim/harness.py). The VS Code side of the
same contract is unit-tested in editors/vscode/test/remoteServer.test.ts.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from pathlib import Path

import pytest

from tests.nvim.harness import Editor, clean_env, require_nvim
from tests.reliability.test_transport import free_port, server, wait_listening


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "main.py").write_text("x = 1\n")
    return root


def attach_and_ask(tmp_path: Path, workspace: Path, runtime: Path, connect: str) -> None:
    require_nvim()
    home = tmp_path / "home"
    editor = Editor.start(workspace, home, env=clean_env(home, XDG_RUNTIME_DIR=str(runtime)))
    try:
        editor.setup_agentls(connect=connect)
        editor.cmd(f"edit {workspace / 'main.py'}")
        editor.wait_attached()
        status = editor.request("agentls/status", {})
        assert isinstance(status, dict) and "provider" in status, status
    finally:
        editor.close()


def test_neovim_connects_over_tcp_with_the_token_file(tmp_path: Path, workspace: Path) -> None:
    port = free_port()
    with server(tmp_path, "--tcp", "--port", str(port)) as srv:
        said = wait_listening(srv, r"token is in (\S+) \(mode 0600\)")
        assert Path(said.group(1)).is_file()
        attach_and_ask(tmp_path, workspace, srv.runtime, f"tcp:127.0.0.1:{port}")
        assert srv.alive()  # the editor leaving did not end the server


def test_neovim_connects_to_the_unix_socket(tmp_path: Path, workspace: Path) -> None:
    with server(tmp_path, "--socket") as srv:
        wait_listening(srv, re.escape("listening on Unix socket"))
        attach_and_ask(tmp_path, workspace, srv.runtime, "unix")
        assert srv.alive()


def test_neovim_does_not_connect_to_a_socket_in_a_folder_others_can_write(
        tmp_path: Path, workspace: Path) -> None:
    # An impostor's socket in a runtime folder any user can write: Neovim
    # says why and sends it nothing (not the `initialize`).
    require_nvim()
    runtime = tmp_path / "shared"
    (runtime / "agentls").mkdir(parents=True, mode=0o700)
    os.chmod(runtime, 0o777)
    received = bytearray()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as fake:
        fake.bind(str(runtime / "agentls" / "agentls.sock"))
        fake.listen(1)
        fake.settimeout(0.2)

        def take() -> None:
            try:
                conn, _ = fake.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    received.extend(conn.recv(65536))

        home = tmp_path / "home"
        editor = Editor.start(workspace, home, env=clean_env(home, XDG_RUNTIME_DIR=str(runtime)))
        try:
            editor.setup_agentls(connect="unix")
            editor.cmd(f"edit {workspace / 'main.py'}")
            editor.wait_until(lambda: "is writable by other users (mode 777)" in editor.messages(),
                              message="Neovim to refuse the socket")
            assert f"{runtime} is writable by other users" in editor.messages()
            take()  # had Neovim connected, its `initialize` would be waiting here
            assert bytes(received) == b""
        finally:
            editor.close()


def test_neovim_and_the_server_agree_on_the_runtime_folder_without_xdg(
        tmp_path: Path, workspace: Path) -> None:
    from agentls.core.support.state_dir import runtime_base

    require_nvim()
    home = tmp_path / "home"
    env = clean_env(home)
    assert "XDG_RUNTIME_DIR" not in env
    editor = Editor.start(workspace, home, env=env)
    try:
        parsed = editor.lua("return require('agentls.connect').parse('unix').path")
        assert parsed == str(runtime_base({}) / "agentls" / "agentls.sock")
    finally:
        editor.close()
