"""Slash commands of the ACP front: what `available_commands_update` lists
(agentls's own commands, the prompt templates and the MCP servers'
prompts, from the features that offer TemplateSource) and the three the
front runs itself: `/compact`, `/checkpoints`, `/restore N`. A template
or MCP prompt (`/name args`) is expanded by the prompt enrichers like in
the language server's chat."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

if TYPE_CHECKING:
    from agentls.acp.workspace import AcpWorkspace
    from agentls.core.types.conversation import Session

__all__ = ["OWN_COMMANDS", "available_commands", "own_command", "run_command"]

log = logging.getLogger("agentls.acp.commands")

OWN_COMMANDS = {
    "compact": ("Summarise the conversation so far to free the model's context window", None),
    "checkpoints": ("List the checkpoints (files as they were before each turn)", None),
    "restore": ("Restore the files as they were before turn N (see /checkpoints)",
                "turn number, e.g. 2"),
}


def available_commands(workspace: AcpWorkspace) -> list[AvailableCommand]:
    from agentls.core.plugins.capabilities import TemplateSource
    from agentls.core.plugins.registry import offering

    found = [_command(name, description, hint)
             for name, (description, hint) in OWN_COMMANDS.items()]
    names = set(OWN_COMMANDS)
    try:
        config = workspace.host.feature_config()
        for source in offering(workspace.host.features(), TemplateSource):
            for template in source.list_templates(config):
                name = str(template.get("name") or "")
                if not name or name in names:
                    continue
                names.add(name)
                found.append(_command(name, str(template.get("description") or name),
                                      "more text for the prompt (optional)"))
    except Exception:  # a feature bug must not cost the session its commands
        log.exception("Listing the templates failed")
    return found


def _command(name: str, description: str, hint: str | None) -> AvailableCommand:
    return AvailableCommand(
        name=name, description=description,
        input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None)


def own_command(text: str) -> tuple[str, str] | None:
    """(`compact` | `checkpoints` | `restore`, the rest) for a prompt that is
    one of the front's own commands, else None."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, rest = stripped[1:].partition(" ")
    return (name, rest.strip()) if name in OWN_COMMANDS else None


async def run_command(workspace: AcpWorkspace, session: Session, name: str, rest: str) -> str:
    """Run one of the front's commands; the text to show. ValueError with
    what to change for bad input."""
    if name == "compact":
        return await _compact(workspace, session)
    if name == "checkpoints":
        return await _checkpoints(workspace, session.session_id)
    return await _restore(workspace, session.session_id, rest)


async def _compact(workspace: AcpWorkspace, session: Session) -> str:
    from agentls.core.sessions.rows import message_text

    orchestrator = workspace.host.get_orchestrator()
    summary = await orchestrator.compact(session)
    if summary is None:
        return "Nothing to compact yet."
    return "Compacted the conversation. Summary:\n\n" + message_text(summary)


async def _checkpoints(workspace: AcpWorkspace, session_id: str) -> str:
    from agentls.core.checkpoints.store import CheckpointStore

    store = CheckpointStore(workspace.host.stores.store())
    found = await asyncio.to_thread(store.list_checkpoints, session_id)
    if not found:
        return "No checkpoints in this session yet (one is kept before each turn that " \
               "changes files)."
    shown = _shower(workspace.root)
    lines = [f"- turn {c.turn} ({c.created_at:%Y-%m-%d %H:%M} UTC): "
             + (", ".join(shown(p) for p in c.files) or "no files")
             for c in found]
    return "Checkpoints (restore with /restore N):\n\n" + "\n".join(lines)


async def _restore(workspace: AcpWorkspace, session_id: str, rest: str) -> str:
    from agentls.core.checkpoints.files import OUTSIDE_CHECKPOINTS_NOTE, NoCheckpoint, restore_turn
    from agentls.core.checkpoints.store import CheckpointStore

    words = rest.split()
    force = "--force" in words
    numbers = [w for w in words if w != "--force"]
    if len(numbers) != 1 or not numbers[0].isdigit() or not 1 <= int(numbers[0]) < 2**31:
        raise ValueError("Usage: /restore N [--force], N a turn number from /checkpoints "
                         "(1 for the first prompt).")
    channels = workspace.channels
    assert channels.editor is not None and channels.snapshots is not None
    orchestrator = workspace.host.get_orchestrator()
    shown = _shower(workspace.root)
    try:
        outcome = await restore_turn(
            CheckpointStore(workspace.host.stores.store()), session_id, int(numbers[0]),
            editor=channels.editor, lookup=channels.snapshots,
            workspace_folders=[workspace.root], gate=channels.gate,
            policies=list(orchestrator.agent.hooks.approval_policies), force=force,
            encoding="utf-16", shown=shown)
    except NoCheckpoint as exc:
        raise ValueError(str(exc)) from None
    lines = [f"Restored: {', '.join(shown(p) for p in outcome.restored) or 'nothing'}."]
    lines += [f"Not restored, {shown(c.path)}: {c.reason}" for c in outcome.conflicts]
    return "\n".join([*lines, "", OUTSIDE_CHECKPOINTS_NOTE])


def _shower(root: Path) -> Any:
    real_root = Path(os.path.realpath(root))

    def shown(path: str) -> str:
        real = Path(os.path.realpath(path))
        return real.relative_to(real_root).as_posix() if real.is_relative_to(real_root) \
            else path

    return shown
