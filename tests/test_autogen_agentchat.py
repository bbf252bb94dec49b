"""agentls' model client inside the real autogen-agentchat (0.7.x, dev extra):
an AssistantAgent whose model_client is AgentlsChatCompletionClient, built
from settings alone, runs a tool call against the loopback fake OpenAI
backend (tests/fakes/http_backend.py) and gets its final answer."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentls.core.compat.chat_completion_client import ChatCompletionClient
from agentls.core.types.errors import AgentlsError
from agentls.providers.autogen import AgentlsChatCompletionClient
from tests.fakes.http_backend import (
    SSE_DONE,
    FakeBackend,
    openai_chunk,
    openai_usage_chunk,
    sse,
    sse_reply,
)

autogen_agentchat = pytest.importorskip("autogen_agentchat")
from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core import models as autogen_models  # noqa: E402

CHAT = "/v1/chat/completions"
KEY_ENV = "AGENTLS_TEST_AUTOGEN_KEY"
SECRET = "sk-test-autogen-0123456789"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tool_call_reply() -> object:
    call = {"index": 0, "id": "call_add", "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": 2, "b": 3})}}
    return sse_reply([sse(openai_chunk(tool_calls=[call])),
                      sse(openai_chunk(finish_reason="tool_calls")),
                      sse(openai_usage_chunk(40, 9)), SSE_DONE])


def text_reply(text: str) -> object:
    return sse_reply([sse(openai_chunk(text)), sse(openai_chunk(finish_reason="stop")),
                      sse(openai_usage_chunk(60, 6)), SSE_DONE])


def client_for(backend: FakeBackend) -> AgentlsChatCompletionClient:
    return AgentlsChatCompletionClient.from_settings(
        provider="openai", model="test-model", base_url=backend.url + "/v1",
        api_key_env=KEY_ENV,
    )


def test_the_protocol_is_importable_by_name_and_autogen_accepts_the_client(
    fake_backend: FakeBackend,
) -> None:
    client = client_for(fake_backend)
    assert isinstance(client, ChatCompletionClient)
    assert isinstance(client, autogen_models.ChatCompletionClient)
    with pytest.raises(AgentlsError, match="no-such-provider"):
        AgentlsChatCompletionClient.from_settings(provider="no-such-provider")


async def test_assistant_agent_runs_a_tool_call_through_agentls(
    fake_backend: FakeBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    fake_backend.script("POST", CHAT, tool_call_reply(), text_reply("2 + 3 = 5."))
    client = client_for(fake_backend)
    agent = AssistantAgent("calculator", model_client=client, tools=[add],
                           reflect_on_tool_use=True)
    try:
        result = await asyncio.wait_for(agent.run(task="What is 2 + 3? Use the tool."), 20)
    finally:
        await client.close()

    kinds = [type(m).__name__ for m in result.messages]
    assert kinds == ["TextMessage", "ToolCallRequestEvent", "ToolCallExecutionEvent",
                     "TextMessage"], kinds
    execution = result.messages[2]
    assert execution.content[0].content == "5" and not execution.content[0].is_error
    assert result.messages[-1].content == "2 + 3 = 5."

    first, second = (r.json for r in fake_backend.requests_to(CHAT))
    assert first["tools"][0]["function"]["name"] == "add"
    assert first["tools"][0]["function"]["parameters"]["properties"].keys() == {"a", "b"}
    tool_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert tool_message == {"role": "tool", "tool_call_id": "call_add", "content": "5"}
    assert fake_backend.requests_to(CHAT)[0].headers["authorization"] == f"Bearer {SECRET}"
    assert client.total_usage().prompt_tokens == 100
