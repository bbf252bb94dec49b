"""The typed tool contract (core/tools/contract.py, core/tools/executor.py): an
agent_core tool (execute_tool_async with a context dict) runs through the one adapter
and sees no orchestrator and no verdict; a tool that declares no need is
asked about; the ToolContext is frozen and a caller's reserved keys never
reach a tool."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentls.core.agent.orchestrator import Orchestrator
from agentls.core.approval.gate import ApprovalRequest
from agentls.core.provider.contract import ProviderConfig
from agentls.core.tools.contract import ToolContext, ToolNeed, ToolRefused, default_need
from agentls.core.tools.executor import ToolExecutor
from agentls.core.types.conversation import Session
from agentls.core.types.messages import ToolCall
from agentls.providers.scripted import ScriptedProvider
from tests.agent_helpers import agent_bundle


class SeedTool:
    """A third-party tool written against agent_core's ToolPlugin only."""

    name = "seed"
    version = "1"

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []

    def get_tool_schemas(self, state: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
        return [{"name": "stamp", "parameters": {"type": "object"}}]

    async def execute_tool_async(self, tool_name: str | None, payload: Any,
                                 state: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        self.contexts.append(kwargs["context"])
        return {"success": True, "result": "stamped"}


class Answering:
    def __init__(self, label: str) -> None:
        self.label = label
        self.requests: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> str | None:
        self.requests.append(request)
        return next(o.id for o in request.options if o.label == self.label)


async def turn(tool: SeedTool, channel: Answering | None) -> list[Any]:
    provider = ScriptedProvider(ProviderConfig(name="scripted", options={"script": [
        {"tool_calls": [{"id": "c1", "name": "stamp", "arguments": {"x": 1}}]},
        {"text": "ok"}]}))
    orch = Orchestrator(agent_bundle(provider, tools=ToolExecutor([tool]), approval=channel,
                                     tool_context={"workspace_folders": ["/ws"], "core": "sneaky",
                                                   "approval": "allow", "team": "blue"}))
    result = await orch.run_turn(Session("s1"), "go")
    return [m for m in result.messages if m.role == "tool"]


async def test_a_seed_tool_is_asked_about_and_gets_a_dict_without_core_or_verdict() -> None:
    tool, channel = SeedTool(), Answering("Allow once")
    [result] = await turn(tool, channel)
    assert result.tool_result["success"] is True
    [request] = channel.requests  # declared nothing: asked, Allow once / Deny
    assert request.tool_name == "stamp"
    assert [o.label for o in request.options] == ["Allow once", "Deny"]
    [context] = tool.contexts
    assert "core" not in context and "approval" not in context
    assert context["session_id"] == "s1" and context["workspace_folders"] == ["/ws"]
    assert context["trigger_source"] == "core" and context["team"] == "blue"


async def test_a_seed_tool_without_an_approval_channel_does_not_run() -> None:
    tool = SeedTool()
    [result] = await turn(tool, None)
    assert tool.contexts == [] and result.tool_result["error"]["code"] == "denied"


def test_the_context_is_frozen_and_reserved_keys_are_dropped() -> None:
    context = ToolContext.from_mapping({"core": object(), "approval": "allow", "x": 1},
                                       session_id="s")
    assert dict(context.extra) == {"x": 1}
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.session_id = "other"  # type: ignore[misc]


def test_the_default_need_asks_and_confines_path_arguments() -> None:
    need = default_need({"file_path": "a", "paths": ["b", "c"], "n": 3})
    assert need == ToolNeed("call", ("a", "b", "c"))
    with pytest.raises(ToolRefused):
        default_need({"path": ["a"]})
    executor = ToolExecutor([SeedTool()])
    assert executor.need(ToolCall(id="c", tool="stamp", arguments={})).kind == "call"
