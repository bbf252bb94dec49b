"""Checkpoints over LSP (docs/protocol.md, "Checkpoints"):
`agentls/checkpoints { sessionId }` and `agentls/restoreCheckpoint
{ sessionId, turn, force? }`. The mechanism is agentls.core.checkpoints.files
(restore_turn clears the restore with the approval gate like a file edit,
then sends it through the same edit applier as the agent's edits); this
module checks params, finds the store, the editor, the gate, the approval
policies and the workspace folders, and turns errors into JSON-RPC errors.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams

from agentls.lsp.wire.convert import params_object, session_id_param

if TYPE_CHECKING:
    from agentls.core.checkpoints.store import CheckpointStore
    from agentls.lsp.server import AgentlsLanguageServer

__all__ = ["MAX_TURN", "register"]

MAX_TURN = 2**31 - 1  # a turn number the session database can hold, with room to spare


def register(server: AgentlsLanguageServer) -> None:
    # One restore at a time: two at once would both see the agent's hashes.
    lock = asyncio.Lock()

    @server.feature("agentls/checkpoints")
    async def checkpoints(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        session_id = session_id_param(params_object(params), "agentls/checkpoints")
        store = _checkpoint_store(ls)
        found = await _call(store.list_checkpoints, session_id)
        shown = _shower(ls)
        return {"checkpoints": [
            {"turn": c.turn, "messageIndex": c.message_index,
             "createdAt": c.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
             "files": [shown(p) for p in c.files]}
            for c in found
        ]}

    @server.feature("agentls/restoreCheckpoint")
    async def restore_checkpoint(ls: AgentlsLanguageServer, params: Any = None
                                 ) -> dict[str, Any]:
        args = params_object(params)
        session_id = session_id_param(args, "agentls/restoreCheckpoint")
        turn = args.get("turn")
        if isinstance(turn, bool) or not isinstance(turn, int) or not 1 <= turn <= MAX_TURN:
            raise JsonRpcInvalidParams("agentls/restoreCheckpoint needs `turn`, a turn number "
                                       "(1 for the first prompt) from agentls/checkpoints.")
        force = args.get("force", False)
        if force is not None and not isinstance(force, bool):
            raise JsonRpcInvalidParams("`force` must be true or false (or omitted).")
        await ls.wait_settings()
        async with lock:
            return await _restore(ls, session_id, turn, bool(force))


async def _restore(ls: AgentlsLanguageServer, session_id: str, turn: int, force: bool
                   ) -> dict[str, Any]:
    from agentls.core.checkpoints.files import OUTSIDE_CHECKPOINTS_NOTE, NoCheckpoint, restore_turn

    orchestrator = ls.state.host.orchestrator
    if orchestrator is not None and orchestrator.is_running(session_id):
        raise JsonRpcInvalidParams(f"Session {session_id} has a turn running; wait for it to "
                                   "end or cancel it (agentls.cancel), then restore.")
    channels = ls.state.host.channels
    if channels is None or channels.editor is None or channels.snapshots is None:
        raise JsonRpcInternalError("agentls/restoreCheckpoint: the editor connection is not "
                                   "set up yet; try again once the server has initialized.")
    shown = _shower(ls)
    with _store_errors(session_id):
        try:
            outcome = await restore_turn(
                _checkpoint_store(ls), session_id, turn, editor=channels.editor,
                lookup=channels.snapshots, workspace_folders=list(ls.state.host.workspace_folders),
                gate=channels.gate, policies=_approval_policies(ls), force=force,
                encoding=str(getattr(channels.editor, "position_encoding", "utf-16")),
                shown=shown)
        except NoCheckpoint as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
    return {
        "restored": [shown(p) for p in outcome.restored],
        "conflicts": [{"path": shown(c.path), "reason": c.reason} for c in outcome.conflicts],
        "note": OUTSIDE_CHECKPOINTS_NOTE,
    }


# --------------------------------------------------------------------------- helpers


def _approval_policies(ls: AgentlsLanguageServer) -> list[Any]:
    """The approval policies of the current settings (the turns' own)."""
    try:
        hooks = ls.state.host.get_orchestrator().agent.hooks
    except Exception:  # no provider yet: the hook modules alone
        hooks = ls.state.host.build_hooks()
    return list(hooks.approval_policies)


def _checkpoint_store(ls: AgentlsLanguageServer) -> CheckpointStore:
    from agentls.core.checkpoints.store import CheckpointStore
    from agentls.core.sessions.errors import SessionStoreError

    try:
        return CheckpointStore(ls.state.host.stores.store())
    except SessionStoreError as exc:
        raise JsonRpcInternalError(str(exc)) from exc


async def _call(function: Any, session_id: str, *args: Any) -> Any:
    """A store call off the event loop, its errors as JSON-RPC errors."""
    with _store_errors(session_id):
        return await asyncio.to_thread(function, session_id, *args)


@contextmanager
def _store_errors(session_id: str) -> Iterator[None]:
    """Session store errors as JSON-RPC errors: an unknown session is the
    caller's to fix (-32602), a database problem is ours (-32603)."""
    from agentls.core.sessions.errors import SessionNotFound, SessionStoreError

    try:
        yield
    except SessionNotFound:
        raise JsonRpcInvalidParams(
            f"Unknown sessionId {session_id!r}: no such session is stored. List them with "
            "agentls/sessions.") from None
    except SessionStoreError as exc:
        raise JsonRpcInternalError(str(exc)) from exc


def _shower(ls: AgentlsLanguageServer) -> Any:
    """path -> as the agent and the user know it: relative to its workspace
    folder (the first folder's files without its name), else absolute."""
    folders = [Path(os.path.realpath(f)) for f in ls.state.host.workspace_folders]

    def shown(path: str) -> str:
        real = Path(os.path.realpath(path))
        for index, root in enumerate(folders):
            if real.is_relative_to(root):
                rel = real.relative_to(root).as_posix()
                return rel if index == 0 else f"{root.name}/{rel}"
        return path

    return shown
