"""Run agent tasks through the real language server: for each task a fresh
temporary workspace holding the task's repository, `agentls` started on
stdio for it and driven over plain JSON-RPC like an editor: one
`agentls/chat` prompt, every approval question answered Allow, every
`workspace/applyEdit` written to disk; when the turn ends (or its time
limit passes: the turn is cancelled), the task's check is run
(agent_suite.check_task) and the turn's messages are measured
(agent_metrics.turn_metrics).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx

from agentls.eval.agent.metrics import transcript, turn_metrics
from agentls.eval.agent.suite import AgentTask, check_task, materialize
from agentls.eval.agent.workspace_edit import EditRefused, apply_workspace_edit
from agentls.eval.completion.execute import DEFAULT_TIME_LIMIT
from agentls.eval.completion.runner import LspProcess

__all__ = ["DEFAULT_TURN_TIME_LIMIT", "AgentEditor", "calls_since", "chat_turn", "engine_calls",
           "engine_metrics", "fixed_scratch", "run_agent_task", "run_agent_tasks",
           "seen_evaluated", "start_editor"]

DEFAULT_TURN_TIME_LIMIT = 300.0
START_TIMEOUT = 120.0  # spawn + initialize, a local model's first load included
CANCEL_GRACE = 60.0  # a cancelled turn answers once the model call stops

Progress = Callable[[int, int, dict[str, Any]], None]


def _allow(actions: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The action a user who allows everything picks: "Allow once" when
    offered, else the first action that allows; None when none does."""
    titles = [a for a in actions if isinstance(a, dict) and isinstance(a.get("title"), str)]
    for action in titles:
        if action["title"] == "Allow once":
            return action
    for action in titles:
        if action["title"].lower().startswith(("allow", "yes", "run", "trust", "approve")):
            return action
    return None


class AgentEditor(LspProcess):
    """The editor for one task: applies edits to the workspace's files on
    disk (it opens no buffer) and allows every question."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        super().__init__(proc)
        self.root = Path(".")
        self.questions: list[str] = []
        self.edits_applied = 0
        self.edits_refused: list[str] = []
        self.streamed: list[dict[str, Any]] = []  # agentls/message notifications

    async def answer(self, method: str, params: Any) -> Any:
        if method == "window/showMessageRequest":
            self.questions.append(str(params.get("message", ""))[:200])
            return _allow(params.get("actions") or [])
        if method == "workspace/applyEdit":
            try:
                apply_workspace_edit(params.get("edit") or {}, self.root)
            except (EditRefused, OSError) as exc:
                self.edits_refused.append(str(exc))
                return {"applied": False, "failureReason": str(exc)}
            self.edits_applied += 1
            return {"applied": True}
        if method == "window/showDocument":
            return {"success": True}
        return await super().answer(method, params)

    def notified(self, method: str, params: Any) -> None:
        if method == "agentls/message" and isinstance(params.get("message"), dict):
            self.streamed.append(params["message"])


def _initialize_params(workspace: Path, settings: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "processId": os.getpid(), "rootUri": workspace.as_uri(),
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": workspace.name}],
        "capabilities": {
            "window": {"showMessage": {}, "showDocument": {"support": True}},
            "workspace": {"applyEdit": True, "workspaceEdit": {
                "documentChanges": True,
                "resourceOperations": ["create", "rename", "delete"]}}},
        "initializationOptions": {"agentls": dict(settings)},
    }


async def start_editor(workspace: Path, settings: Mapping[str, Any], *,
                       command: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
                       state_dir: Path) -> tuple[AgentEditor, str]:
    """agentls started on stdio for `workspace` and initialized with
    `settings`, its sessions kept in `state_dir`; (the editor, an error
    saying why the server did not start, or ""). Close the editor after."""
    command = list(command or [sys.executable, "-m", "agentls"])
    server_env = dict(os.environ if env is None else env)
    server_env["AGENTLS_STATE_DIR"] = str(state_dir)  # sessions stay out of the user's
    editor = await AgentEditor.start(command, server_env)
    editor.root = await asyncio.to_thread(workspace.resolve)  # edits are confined to it
    try:
        await editor.request("initialize", _initialize_params(workspace, settings),
                             timeout=START_TIMEOUT)
        await editor.notify("initialized", {})
    except (TimeoutError, EOFError, RuntimeError) as exc:
        return editor, f"the server did not start: {type(exc).__name__}: {exc}"
    return editor, ""


async def chat_turn(editor: AgentEditor, prompt: str, time_limit: float, *,
                    session_id: str | None = None
                    ) -> tuple[dict[str, Any] | None, bool, str]:
    """One `agentls/chat` turn (in `session_id`'s session when given; a
    turn past `time_limit` is cancelled): (the chat result, whether the
    limit passed, an error)."""
    params: dict[str, Any] = {"prompt": prompt}
    if session_id:
        params["sessionId"] = session_id
    msg_id, future = await editor.send_request("agentls/chat", params)
    try:
        return await asyncio.wait_for(asyncio.shield(future), time_limit), False, ""
    except TimeoutError:
        await editor.notify("$/cancelRequest", {"id": msg_id})
    except (EOFError, RuntimeError) as exc:
        return None, False, f"{type(exc).__name__}: {exc}"
    try:
        return await asyncio.wait_for(future, CANCEL_GRACE), True, ""
    except (TimeoutError, EOFError, RuntimeError) as exc:
        return None, True, f"the cancelled turn did not end ({type(exc).__name__})"


async def engine_calls(editor: LspProcess, since: float) -> list[dict[str, Any]]:
    """The local engine's own records of this server's chat model calls
    (providers/local/engine_work.py; the provider renders the chat template
    and sends /v1/completions) received from `since` (time.time()) on, oldest
    first; [] for other backends. The child may be shared through the model
    host, so its ledger also holds earlier servers' calls."""
    try:
        status = await editor.request("agentls/status", {}, timeout=30)
    except (TimeoutError, EOFError, RuntimeError):
        return []
    # The chat model's child: the completion model's serves inline requests.
    chat_model = (status or {}).get("model")
    running = [m for m in (status or {}).get("localModels") or ()
               if isinstance(m, dict) and m.get("engineCounters")]
    urls = [m["engineCounters"] for m in running if m.get("model") == chat_model] or [
        m["engineCounters"] for m in running]
    calls: list[dict[str, Any]] = []
    # trust_env off: a proxy from the environment must not carry loopback calls
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        for url in urls:
            try:
                ledger = (await client.get(url)).json()
            except (httpx.HTTPError, ValueError):
                continue
            calls += list(ledger.get("requests") or ())
    return calls_since(calls, since)


def calls_since(records: Sequence[Mapping[str, Any]], since: float) -> list[dict[str, Any]]:
    """The engine records received at or after `since`, oldest first."""
    return sorted((dict(r) for r in records if float(r.get("received") or 0) >= since),
                  key=lambda r: r["received"])


def engine_metrics(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Prompt tokens the engine evaluated per model call, and the share of
    their prompts the calls after a turn's first evaluated (the rest came
    from llama.cpp's prompt cache)."""
    if not calls:
        return {}
    later = calls[1:]
    later_prompt = sum(r.get("prompt_kept", 0) + r.get("prompt_evaluated", 0) for r in later)
    return {
        "engine_prompt_evaluated": [int(r.get("prompt_evaluated", 0)) for r in calls],
        "engine_prompt_tokens": [int(r.get("prompt_kept", 0) + r.get("prompt_evaluated", 0))
                                 for r in calls],
        "engine_seen_evaluated": seen_evaluated(calls),
        "later_calls_evaluated_share": (
            round(sum(r.get("prompt_evaluated", 0) for r in later) / later_prompt, 3)
            if later_prompt else None),
    }


def seen_evaluated(calls: Sequence[Mapping[str, Any]]) -> list[int]:
    """Per call after the first, the tokens of the call before it (its prompt
    and its reply) that the engine evaluated again instead of taking from its
    prompt cache (up to the shorter of the two, for a prompt may shrink when
    the conversation is compacted): 0 when a call paid only for what is new
    in its prompt. A call's last generated token is never in the cache
    (llama.cpp evaluates a token only to sample the next), so up to one per
    call is expected."""
    seen = []
    for before, call in pairwise(calls):
        held = (int(before.get("prompt_kept", 0)) + int(before.get("prompt_evaluated", 0))
                + int(before.get("generated", 0)))
        prompt = int(call.get("prompt_kept", 0)) + int(call.get("prompt_evaluated", 0))
        seen.append(max(0, min(held, prompt) - int(call.get("prompt_kept", 0))))
    return seen


def fixed_scratch(kind: str, name: str) -> Path:
    """An empty folder for one task, at the same path on every run: the
    system prompt names the workspace, and at temperature 0 a path of other
    random letters is a different prompt and may get another reply (an
    Exercism exercise passed in one run and failed in the next on that
    alone). One run of a task at a time per temporary folder ($TMPDIR)."""
    scratch = Path(tempfile.gettempdir()) / kind / name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    return scratch


async def run_agent_task(task: AgentTask, settings: Mapping[str, Any], *,
                         command: Sequence[str] | None = None,
                         env: Mapping[str, str] | None = None,
                         turn_time_limit: float = DEFAULT_TURN_TIME_LIMIT,
                         check_time_limit: float = DEFAULT_TIME_LIMIT) -> dict[str, Any]:
    """One task, start to check, in a workspace of its own (removed after)."""
    scratch = fixed_scratch("agentls-agent-eval", task.id)
    workspace = scratch / "repo"
    workspace.mkdir()
    materialize(task, workspace)
    row: dict[str, Any] = task.to_dict()
    result: dict[str, Any] | None = None
    timed_out = False
    started, since = time.perf_counter(), time.time()
    editor, error = await start_editor(workspace, settings, command=command, env=env,
                                       state_dir=scratch / "state")
    try:
        ready = time.perf_counter()
        if not error:
            result, timed_out, error = await chat_turn(editor, task.prompt, turn_time_limit)
        ended = time.perf_counter()
        engine = await engine_calls(editor, since) if not error else []
    finally:
        await editor.close()
    try:
        messages = (result or {}).get("messages") or editor.streamed
        metrics = turn_metrics(messages, result)
        check = check_task(task, workspace, metrics["answer"], time_limit=check_time_limit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if result is not None and result.get("error") and not error:
        failure = result["error"]
        error = f"{failure.get('code', '')}: {failure.get('message', '')}"[:500]
    row.update(
        passed=check.passed, check=check.status, check_detail=check.detail[-400:],
        status=(result or {}).get("status", "none"), timed_out=timed_out, error=error,
        notices=[m[:300] for m in editor.messages[-3:]],
        start_s=round(ready - started, 2), time_s=round(ended - ready, 2),
        approvals=len(editor.questions), edits_applied=editor.edits_applied,
        edits_refused=len(editor.edits_refused), **metrics, **engine_metrics(engine),
        transcript=transcript(messages))
    return row


async def run_agent_tasks(tasks: Sequence[AgentTask], settings: Mapping[str, Any], *,
                          command: Sequence[str] | None = None,
                          env: Mapping[str, str] | None = None,
                          turn_time_limit: float = DEFAULT_TURN_TIME_LIMIT,
                          check_time_limit: float = DEFAULT_TIME_LIMIT,
                          progress: Progress | None = None) -> list[dict[str, Any]]:
    """The tasks one after another, each with its own server."""
    rows: list[dict[str, Any]] = []
    for index, task in enumerate(tasks):
        rows.append(await run_agent_task(task, settings, command=command, env=env,
                                         turn_time_limit=turn_time_limit,
                                         check_time_limit=check_time_limit))
        if progress is not None:
            progress(index + 1, len(tasks), rows[-1])
    return rows
