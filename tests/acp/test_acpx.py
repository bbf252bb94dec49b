"""`agentls acp` driven by a real ACP client: acpx 0.19.1 (npm), headless.

acpx starts `python -m agentls acp` as its agent (`--agent`), sends one
prompt (`exec`, a one-shot session) and, with `--format json`, prints every
JSON-RPC message of the conversation, both ways, one per line: the test
reads the protocol as the client saw it. The model is the scripted provider
(read the file, edit it, answer), configured through the user config file.
acpx answers the permission question itself: `--approve-all` or
`--deny-all`. It advertises fs.readTextFile / fs.writeTextFile and, on disk
inside --cwd, performs the writes the agent sends through fs/write_text_file.

acpx is found or installed (once, cached) by tests/acp/acpx_tool.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.acp.acpx_tool import Acpx, require_acpx

if importlib.util.find_spec("agentls.acp") is None:  # the front lands with branch `acp`
    pytest.skip("this agentls has no `agentls acp` (agentls.acp)", allow_module_level=True)

TIMEOUT = 180  # seconds for one acpx run: a loaded 2-core machine starts node and python
NOTES = "line one\nline two\r\nline three 😀\n"  # CRLF and a non-BMP char: byte-exact checks


@pytest.fixture(scope="module")
def acpx() -> Acpx:
    return require_acpx()


@dataclass
class Run:
    code: int
    messages: list[dict[str, Any]]
    stderr: str

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method and "id" in m]

    def one(self, found: list[dict[str, Any]], what: str) -> dict[str, Any]:
        """The one item of `found`; else a failure that shows the run."""
        if len(found) != 1:
            shown = "\n".join(json.dumps(m)[:300] for m in self.messages)
            raise AssertionError(f"{len(found)} x {what} (acpx exit {self.code}); traffic:\n"
                                 f"{shown}\nstderr: {self.stderr[-2000:]}")
        return found[0]

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The response to `request`. Both sides number their requests from
        0 and acpx does not print the direction, so an id can be pending
        both ways (the prompt and a permission question asked during it):
        a response answers the latest pending request with its id."""
        pending: list[dict[str, Any]] = []
        for message in self.messages:
            if "method" in message and "id" in message:
                pending.append(message)
            elif "id" in message:
                asked = next(r for r in reversed(pending) if r["id"] == message["id"])
                pending.remove(asked)
                if asked is request:
                    return message
        raise AssertionError(f"no answer to {request}")

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages
                if m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") == kind]

    def call_updates(self, call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates("tool_call") + self.updates("tool_call_update")
                if u.get("toolCallId") == call_id]


@dataclass
class Setup:
    workspace: Path
    home: Path
    config: Path
    script: Path
    record: Path

    def responses(self, responses: list[dict[str, Any]]) -> None:
        """What the scripted model answers, one response per model call."""
        self.script.write_text(json.dumps({"record": str(self.record),
                                           "responses": responses}))


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_bytes(NOTES.encode())
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "config.toml"
    script = tmp_path / "script.json"
    config.write_text('provider = "scripted"\n\n[providerOptions]\n'
                      f"script = {json.dumps(str(script))}\n")
    setup = Setup(workspace, home, config, script, tmp_path / "model-calls.jsonl")
    setup.responses([
        {"tool_calls": [{"id": "c1", "name": "read_file",
                         "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"id": "c2", "name": "edit_file", "arguments": {
            "path": "notes.txt",
            "edits": [{"old_string": "line two", "new_string": "line 2"}]}}]},
        {"text": "I changed line two.", "chunks": ["I changed ", "line two."]},
    ])
    return setup


def acpx_env(setup: Setup) -> dict[str, str]:
    """acpx's and the agent's environment: acpx's state (~/.acpx) and
    agentls's under the test's folder, the scripted model's config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "ACPX_"))}
    env.update(HOME=str(setup.home), XDG_CONFIG_HOME=str(setup.home / "config"),
               XDG_STATE_HOME=str(setup.home / "state"), XDG_CACHE_HOME=str(setup.home / "cache"),
               AGENTLS_CONFIG_FILE=str(setup.config),
               AGENTLS_STATE_DIR=str(setup.home / "agentls-state"))
    return env


def run_acpx(acpx: Acpx, setup: Setup, *flags: str, prompt: str = "Fix line two of notes.txt"
             ) -> Run:
    agent = shlex.join([sys.executable, "-m", "agentls", "acp"])
    proc = subprocess.run(
        acpx.argv("--format", "json", "--cwd", str(setup.workspace), "--timeout", "120",
                  *flags, "--agent", agent, "exec", prompt),
        cwd=setup.workspace, env=acpx_env(setup), stdin=subprocess.DEVNULL, capture_output=True,
        timeout=TIMEOUT)
    out = proc.stdout.decode()
    # kept beside the test's files for a failure's post-mortem
    (setup.home.parent / "acpx-traffic.jsonl").write_text(out)
    (setup.home.parent / "acpx-stderr.txt").write_bytes(proc.stderr)
    messages = []
    for line in out.splitlines():
        if line.strip():
            message = json.loads(line)  # every line acpx prints is a JSON-RPC message
            assert message.get("jsonrpc") == "2.0", line
            messages.append(message)
    return Run(proc.returncode, messages, proc.stderr.decode(errors="replace"))


def model_calls(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def edit_call(run: Run) -> str:
    edit = run.one([u for u in run.updates("tool_call") if "edit_file" in json.dumps(u)],
                   "edit_file tool_call")
    call_id: str = edit["toolCallId"]
    return call_id


def check_common(run: Run, setup: Setup) -> tuple[dict[str, Any], dict[str, Any]]:
    """What both runs share: the handshake, the two tool calls announced,
    one permission question on the edit's call. Returns the question and
    its answer."""
    init = run.one(run.requests("initialize"), "initialize")
    assert run.answer(init)["result"]["protocolVersion"] == 1
    new = run.one(run.requests("session/new"), "session/new")
    assert new["params"]["cwd"] == str(setup.workspace)
    session_id = run.answer(new)["result"]["sessionId"]

    calls = run.updates("tool_call")
    assert len(calls) == 2, calls
    assert all(u.get("status") == "pending" for u in calls), calls
    kinds = {u["toolCallId"]: u for u in calls}
    read_id = next(i for i, u in kinds.items() if "read_file" in json.dumps(u))
    read_updates = run.call_updates(read_id)
    assert any(u.get("kind") == "read" for u in read_updates), read_updates
    assert read_updates[-1]["status"] == "completed", read_updates

    edit_id = edit_call(run)
    edit_updates = run.call_updates(edit_id)
    assert any(u.get("kind") == "edit" for u in edit_updates), edit_updates
    located = [loc["path"] for u in edit_updates for loc in u.get("locations") or []]
    assert str(setup.workspace / "notes.txt") in located, edit_updates

    question = run.one(run.requests("session/request_permission"), "session/request_permission")
    params = question["params"]
    assert params["sessionId"] == session_id
    assert params["toolCall"]["toolCallId"] == edit_id
    kinds_offered = {o["kind"] for o in params["options"]}
    assert {"allow_once", "reject_once"} <= kinds_offered, params["options"]
    # the question comes before the edit is done, never after
    done = [u for u in edit_updates if u.get("status") in ("completed", "failed")]
    assert done and run.messages.index(question) < max(
        i for i, m in enumerate(run.messages)
        if m.get("method") == "session/update" and m["params"]["update"] in done)

    prompt = run.one(run.requests("session/prompt"), "session/prompt")
    assert run.answer(prompt)["result"]["stopReason"] == "end_turn"
    assert "I changed line two." in "".join(
        u["content"]["text"] for u in run.updates("agent_message_chunk"))
    return question, run.answer(question)


def test_an_approved_edit_reaches_the_file_through_the_client(acpx: Acpx, setup: Setup) -> None:
    run = run_acpx(acpx, setup, "--approve-all")
    assert run.code == 0, run.stderr
    question, answer = check_common(run, setup)
    chosen = answer["result"]["outcome"]
    assert chosen["outcome"] == "selected"
    allowing = {o["optionId"] for o in question["params"]["options"]
                if o["kind"].startswith("allow")}
    assert chosen["optionId"] in allowing

    expected = NOTES.replace("line two", "line 2")
    assert (setup.workspace / "notes.txt").read_bytes() == expected.encode()
    # the write went through the client (its buffers and undo see it), not to disk
    write = run.one(run.requests("fs/write_text_file"), "fs/write_text_file")
    assert write["params"]["path"] == str(setup.workspace / "notes.txt")
    assert write["params"]["content"] == expected
    assert "error" not in run.answer(write)

    edit_updates = run.call_updates(edit_call(run))
    assert edit_updates[-1]["status"] == "completed", edit_updates
    diffs = [c for u in edit_updates for c in u.get("content") or [] if c.get("type") == "diff"]
    assert diffs, edit_updates
    assert diffs[-1]["path"] == str(setup.workspace / "notes.txt")
    assert diffs[-1]["oldText"] == NOTES and diffs[-1]["newText"] == expected


def test_a_denied_edit_leaves_the_file_byte_identical(acpx: Acpx, setup: Setup) -> None:
    before = (setup.workspace / "notes.txt").read_bytes()
    run = run_acpx(acpx, setup, "--deny-all")
    # acpx exits 5 when every permission question was denied
    assert run.code == 5, (run.code, run.stderr)
    question, answer = check_common(run, setup)
    chosen = answer["result"]["outcome"]
    rejecting = {o["optionId"] for o in question["params"]["options"]
                 if o["kind"].startswith("reject")}
    assert chosen["outcome"] == "selected" and chosen["optionId"] in rejecting

    assert (setup.workspace / "notes.txt").read_bytes() == before
    assert run.requests("fs/write_text_file") == []
    edit_updates = run.call_updates(edit_call(run))
    assert edit_updates[-1]["status"] == "failed", edit_updates
    # the model was told, and the turn went on to its answer
    calls = model_calls(setup.record)
    assert len(calls) == 3
    told = calls[2]["messages"][-1]
    assert told["role"] == "tool" and told["metadata"]["tool_call_id"] == "c2", told
    assert told["toolResult"]["success"] is False
    assert told["toolResult"]["error"]["code"] == "declined", told



# --------------------------------------------------------------------------- sessions


def acpx_json(acpx: Acpx, setup: Setup, *args: str) -> list[dict[str, Any]]:
    """acpx, with agentls named `agentls` in its config and a 1 s idle TTL
    for the process that owns the session (and the agent it started)."""
    proc = subprocess.run(
        acpx.argv("--format", "json", "--ttl", "1", "--timeout", "120", *args),
        cwd=setup.workspace, env=acpx_env(setup), stdin=subprocess.DEVNULL,
        capture_output=True, timeout=TIMEOUT)
    out = proc.stdout.decode()
    with (setup.home.parent / "acpx-traffic.jsonl").open("a") as log:
        log.write(f"# acpx {' '.join(args)} -> {proc.returncode}\n{out}")
    assert proc.returncode == 0, (args, proc.stderr.decode(errors="replace")[-3000:])
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_idle(acpx: Acpx, setup: Setup, name: str) -> None:
    """Until acpx's session owner for `name` has exited after its idle TTL,
    taking the agent with it (killed if it overstays)."""
    deadline = time.monotonic() + 60
    pid = None
    while time.monotonic() < deadline:
        [status] = acpx_json(acpx, setup, "agentls", "status", "-s", name)
        if status["status"] != "alive":
            return
        pid = status.get("pid")
        time.sleep(0.5)
    if isinstance(pid, int):
        os.kill(pid, signal.SIGTERM)
    raise AssertionError(f"acpx's session owner {pid} did not exit after its idle TTL")


def name_agent(setup: Setup) -> None:
    """`agentls` in acpx's global config (~/.acpx/config.json)."""
    (setup.home / ".acpx").mkdir()
    (setup.home / ".acpx" / "config.json").write_text(json.dumps({"agents": {"agentls": {
        "argv": [sys.executable, "-m", "agentls", "acp"]}}}))


def test_a_named_session_goes_on_after_the_agent_restarted(
        acpx: Acpx, setup: Setup) -> None:
    name_agent(setup)
    # each agent process replays the script from its start: both answers are this one
    setup.responses([{"text": "First answer."}])

    [created] = acpx_json(acpx, setup, "agentls", "sessions", "new", "--name", "work")
    session_id = created["acpxSessionId"]  # agentls's session id (from session/new)
    try:
        acpx_json(acpx, setup, "agentls", "-s", "work", "remember the word kiwi")
        wait_idle(acpx, setup, "work")  # the agent is gone: the next prompt starts another

        second = acpx_json(acpx, setup, "agentls", "-s", "work", "which word?")
        # acpx reconnects with session/resume when the agent offers it (agentls
        # does), else session/load (whose replay acpx does not print; tests/acp
        # checks the replay with the SDK's client)
        [load] = [m for m in second if m.get("method") in ("session/resume", "session/load")]
        assert load["params"]["sessionId"] == session_id
        assert any(m.get("result", {}).get("stopReason") == "end_turn" for m in second)
        # the new agent process continued the stored conversation
        calls = model_calls(setup.record)
        assert len(calls) == 2
        sent = [m.get("content") for m in calls[1]["messages"]]
        assert "remember the word kiwi" in sent and "First answer." in sent, sent

        [listed] = acpx_json(acpx, setup, "agentls", "sessions", "list")
        [mine] = [s for s in listed["sessions"] if s["sessionId"] == session_id]
        assert mine["cwd"] == str(setup.workspace), listed
        assert mine["title"] == "remember the word kiwi" and mine["updatedAt"], listed
    finally:
        wait_idle(acpx, setup, "work")
        acpx_json(acpx, setup, "agentls", "sessions", "close", "work")



def test_acpx_cancel_stops_the_turn_mid_stream(acpx: Acpx, setup: Setup) -> None:
    name_agent(setup)
    setup.responses([{"chunks": ["partial "], "stall": True}])  # streams, then waits
    acpx_json(acpx, setup, "agentls", "sessions", "new", "--name", "stop")
    out = setup.home.parent / "prompt.jsonl"
    try:
        with out.open("wb") as sink:
            prompt = subprocess.Popen(
                acpx.argv("--format", "json", "--ttl", "1", "--timeout", "120", "agentls",
                          "-s", "stop", "go"),
                cwd=setup.workspace, env=acpx_env(setup), stdin=subprocess.DEVNULL,
                stdout=sink, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while b"agent_message_chunk" not in out.read_bytes():  # mid-stream now
                assert prompt.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)
            acpx_json(acpx, setup, "agentls", "cancel", "-s", "stop")
            prompt.wait(timeout=60)
        finally:
            if prompt.poll() is None:
                prompt.kill()
        messages = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        cancel = [m for m in messages if m.get("method") == "session/cancel"]
        assert cancel, messages
        [asked] = [m for m in messages if m.get("method") == "session/prompt"]
        answers = [m for m in messages if m.get("id") == asked["id"] and "result" in m
                   and "stopReason" in m["result"]]
        assert [a["result"]["stopReason"] for a in answers] == ["cancelled"], messages
        assert messages.index(cancel[0]) < messages.index(answers[0])
    finally:
        wait_idle(acpx, setup, "stop")
        acpx_json(acpx, setup, "agentls", "sessions", "close", "stop")
