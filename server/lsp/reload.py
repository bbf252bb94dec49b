"""Re-reading the settings: what lifecycle (initialized,
didChangeConfiguration) and trust (a trust answer) both do after the
settings changed. A module of its own so neither imports the other.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:
    from agentls.lsp.server import AgentlsLanguageServer

__all__ = ["close_retired_providers", "prepare_models", "report_problems"]

log = logging.getLogger("agentls.lsp.lifecycle")


def report_problems(ls: AgentlsLanguageServer, problems: list[Any]) -> None:
    """Show each problem the settings have now and did not have at the last
    report: a change that brings a problem back shows it again."""
    current = [f"agentls settings: {problem.message}" for problem in problems]
    before = ls.state.reported_problems
    ls.state.reported_problems = set(current)
    for message in current:
        if message not in before:
            ls.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=message)
            )
            log.warning("%s", message)


def report_restricted(ls: AgentlsLanguageServer) -> None:
    """Tell the user once when a workspace folder runs in restricted mode
    (a home, root or system folder), and again if that changes."""
    notice = ls.state.host.restricted_notice()
    if notice is not None and notice != ls.state.reported_restricted:
        ls.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Warning, message=notice))
        log.warning("%s", notice)
    ls.state.reported_restricted = notice


async def close_retired_providers(ls: AgentlsLanguageServer) -> None:
    retired = ls.state.host.take_retired_providers()
    successor: Any = None
    if retired:
        # A provider that runs models here (local) keeps the previous one's
        # serving models until its own are ready, instead of a gap.
        try:
            successor = ls.state.host.provider()
        except Exception:  # settings that cannot build one were reported already
            successor = None
    from agentls.core.plugins.capabilities import TakesOver
    from agentls.core.plugins.registry import offers

    for provider in retired:
        if offers(successor, TakesOver):
            try:
                successor.take_over(provider)
            except Exception:
                log.exception("Handing the previous provider's models over failed")
        try:
            closing = provider.aclose()
            if inspect.isawaitable(closing):
                await closing
        except Exception:
            log.exception("Closing the previous provider failed")


def prepare_models(ls: AgentlsLanguageServer) -> None:
    """Start fetching the models the settings name (`hf:` downloads, in the
    background) as soon as they are chosen, so the editor shows progress
    then rather than at the first request. Only when a download is named:
    the provider is otherwise built on first use (start-up stays fast)."""
    settings = ls.state.host.settings
    named = {
        key: name
        for key, name in (
            ("model", settings.model),
            ("inlineCompletion.model", settings.inline_completion.model),
            ("nextEdit.model", settings.next_edit.model),
        )
        if name
    }
    if not any(name.startswith(("hf:", "hf.co/", "huggingface.co/")) for name in named.values()):
        return
    from agentls.core.plugins.capabilities import ModelPreparer
    from agentls.core.plugins.registry import offers

    try:
        provider = ls.state.host.provider()
        if offers(provider, ModelPreparer):
            provider.prepare_models(named)
    except Exception as exc:  # shown when the model is used; never stop the server
        log.warning("Could not prepare the configured models: %s", exc)
