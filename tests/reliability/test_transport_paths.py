"""Who can stand in for the server's socket, through the REAL server
(docs/security.md, "Connecting to a running server").

With a runtime folder another user can write, a fake server at the default
socket path received the editor's `initialize`: the server checked only its
own `agentls/` folder. Now every folder on the way to the socket (and the
token file) must be this user's or root's and writable by nobody else,
unless it is sticky like /tmp, as OpenSSH asks of its paths; the editors
check the same before connecting (editors/vscode/src/remoteServer.ts,
editors/nvim/lua/agentls/connect.lua).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.reliability.test_transport import TIMEOUT, free_port, server, wait_listening

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets, file modes")


def shared_folder(path: Path, mode: int) -> Path:
    path.mkdir(parents=True)
    os.chmod(path, mode)
    return path


def test_a_runtime_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    runtime = shared_folder(tmp_path / "shared", 0o777)
    with server(tmp_path, "--socket", env={"XDG_RUNTIME_DIR": str(runtime)}) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert f"{runtime} is writable by other users (mode 777)" in srv.stderr()
        assert not (runtime / "agentls" / "agentls.sock").exists()


def test_a_sticky_runtime_folder_like_tmp_is_accepted(tmp_path: Path) -> None:
    runtime = shared_folder(tmp_path / "sticky", 0o1777)
    with server(tmp_path, "--socket", env={"XDG_RUNTIME_DIR": str(runtime)}) as srv:
        path = runtime / "agentls" / "agentls.sock"
        wait_listening(srv, re.escape(f"listening on Unix socket {path}"))


def test_a_folder_above_a_chosen_socket_path_others_can_write_is_refused(tmp_path: Path) -> None:
    mine = shared_folder(tmp_path / "open", 0o777) / "mine"
    mine.mkdir(mode=0o700)
    with server(tmp_path, "--socket", str(mine / "my.sock")) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert f"{tmp_path / 'open'} is writable by other users" in srv.stderr()
        assert not (mine / "my.sock").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_on_the_way_is_refused(tmp_path: Path) -> None:
    theirs = shared_folder(tmp_path / "theirs", 0o755)
    mine = theirs / "mine"
    mine.mkdir(mode=0o700)
    os.chown(theirs, 54321, 54321)
    with server(tmp_path, "--socket", str(mine / "my.sock")) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert f"{theirs} belongs to another user (uid 54321)" in srv.stderr()


def test_the_tcp_token_file_is_not_written_below_a_folder_others_can_write(
        tmp_path: Path) -> None:
    runtime = shared_folder(tmp_path / "shared", 0o777)
    with server(tmp_path, "--tcp", "--port", str(free_port()),
                env={"XDG_RUNTIME_DIR": str(runtime)}) as srv:
        assert srv.proc.wait(TIMEOUT) == 2
        assert f"{runtime} is writable by other users" in srv.stderr()
        assert "Traceback" not in srv.stderr()
        assert not list(runtime.rglob("*.token"))


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX uids")
def test_without_xdg_runtime_dir_the_rule_is_run_user_then_tmp(tmp_path: Path) -> None:
    # The same rule as the editors' runtimeDir (remoteServer.ts, connect.lua).
    from agentls.core.support.state_dir import runtime_base

    uid = str(os.getuid())
    run_user, tmp = tmp_path / "run-user", tmp_path / "tmp"
    assert runtime_base({"XDG_RUNTIME_DIR": " /x/y "}, run_user=run_user, tmp=tmp) == Path("/x/y")
    assert runtime_base({}, run_user=run_user, tmp=tmp) == tmp / f"runtime-{uid}"
    (run_user / uid).mkdir(parents=True)
    assert runtime_base({"XDG_RUNTIME_DIR": ""}, run_user=run_user, tmp=tmp) == run_user / uid
