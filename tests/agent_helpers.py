"""Building an AgentBundle in tests from the few parts a test gives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentls.core.agent.bundle import AgentBundle, EditorChannels, TurnLimits
from agentls.core.approval.gate import ApprovalChannel, DisplayChannel
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.provider.contract import Provider
from agentls.core.tools.executor import ToolExecutor


def agent_bundle(
    provider: Provider,
    *,
    tools: ToolExecutor | None = None,
    hooks: HookRegistry | None = None,
    approval: ApprovalChannel | None = None,
    display: DisplayChannel | None = None,
    limits: TurnLimits | None = None,
    system_prompt: str | None = None,
    max_tokens: int | None = None,
    tool_context: Mapping[str, Any] | None = None,
) -> AgentBundle:
    """The bundle for `provider` with these parts (the rest as AgentBundle's
    defaults); `approval` is the channel of the bundle's one gate."""
    return AgentBundle(
        provider=provider, tools=tools or ToolExecutor([]), hooks=hooks or HookRegistry(),
        limits=limits or TurnLimits(), system_prompt=system_prompt, max_tokens=max_tokens,
        channels=EditorChannels(approval=approval, display=display),
        tool_context_extra=dict(tool_context or {}),
    )
