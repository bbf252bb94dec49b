"""Asking the user to trust the workspace file (`.agentls.toml`), over
window/showMessageRequest; the mechanism is agentls.core.workspace_trust.

Until the user answers, the file's keys that can send data or run code are
ignored (the settings loader already left them out). "Trust" records the
content hash and reloads the settings; "Don't trust" records the refusal so
the question is not repeated at every start (a changed file asks again).
Dismissing asks again at the next start. The question never blocks
initialize, inline completion or chat.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from agentls.core.workspace_trust import TrustDecision, WorkspaceTrust

    from .server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.trust")

TRUST = "Trust"
DONT_TRUST = "Don't trust"
_VALUES_SHOWN = 12


def question(trust: WorkspaceTrust) -> str:
    lines = [f"{trust.file} wants to set keys that can send your data or run commands:", ""]
    lines += [f"    {key} = {value}" for key, value in trust.keys[:_VALUES_SHOWN]]
    if len(trust.keys) > _VALUES_SHOWN:
        lines.append(f"    ... and {len(trust.keys) - _VALUES_SHOWN} more")
    lines += ["", "They are ignored until you trust this file. A file that came with a "
              "repository can point agentls at another server with your API key, or run "
              "programs. Trust this content of the file?"]
    return "\n".join(lines)


def schedule_trust_question(ls: AgentlsLanguageServer) -> None:
    """Ask in the background when the workspace file waits for trust (once
    per file content and process); tell once when the user refused it."""
    trust = ls.state.loaded.workspace_trust
    if trust is None or trust.state in ("none", "trusted"):
        return
    if trust.state == "refused":
        if ls.state.first_time(f"trust-refused:{trust.file}:{trust.digest}"):
            ls.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=(f"agentls ignores {', '.join(trust.pending)} from {trust.file}: you "
                         "chose not to trust this file. Run `agentls trust` in the workspace "
                         "to change that.")))
        return
    if not ls.state.first_time(f"trust-asked:{trust.file}:{trust.digest}"):
        return
    task = asyncio.ensure_future(_ask(ls, trust))
    ls.background_tasks.add(task)
    task.add_done_callback(ls.background_tasks.discard)


async def _ask(ls: AgentlsLanguageServer, trust: WorkspaceTrust) -> None:
    # Imported here: channels brings the approval gate and the edit applier,
    # which a session without a workspace file to trust never needs.
    from .channels import send_request

    params = types.ShowMessageRequestParams(
        type=types.MessageType.Warning, message=question(trust),
        actions=[types.MessageActionItem(title=TRUST),
                 types.MessageActionItem(title=DONT_TRUST)])
    try:
        chosen: Any = await send_request(ls, types.WINDOW_SHOW_MESSAGE_REQUEST, params)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("Asking to trust %s failed: %s", trust.file, exc)
        return
    title = getattr(chosen, "title", None)
    if title not in (TRUST, DONT_TRUST):
        log.info("Trust question for %s dismissed; keys stay ignored", trust.file)
        return
    decision: TrustDecision = "trusted" if title == TRUST else "refused"
    try:
        ls.state.trust_store.record(trust.file, trust.digest, decision)
    except OSError as exc:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Error,
            message=f"agentls could not remember your answer for {trust.file}: {exc}"))
    from .reload import close_retired_providers, report_problems

    # Re-read: a trusted file's keys apply now; a refused one is reported as such.
    report_problems(ls, ls.state.reload_settings())
    await close_retired_providers(ls)
    from .inline_registration import sync

    await sync(ls)
    log.info("Workspace file %s %s (sha256 %s)", trust.file, decision, trust.digest[:12])
