"""The adapters over the one provider contract: autogen's ChatCompletionClient
(over ScriptedProvider) and agent_core ProviderPlugins run as agentls providers."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from agentls.core.compat.autogen_types import (
    AssistantMessage,
    CancellationToken,
    CreateResult,
    FunctionCall,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from agentls.core.provider.contract import CompletionOptions, Provider, ProviderConfig, ToolSpec
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk, ToolCall
from agentls.providers.autogen.client import AgentlsChatCompletionClient, guess_family
from agentls.providers.autogen.messages import from_core_messages, to_core_messages
from agentls.providers.plugin_adapter import ProviderPluginAdapter
from agentls.providers.provider_factory import as_provider_factory, wrap_provider_plugin
from agentls.providers.scripted import ScriptedProvider

READ_FILE: ToolSpec = {
    "name": "read_file",
    "description": "Read a file of the workspace",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


class RecordingProvider(ScriptedProvider):
    """ScriptedProvider that also keeps the CompletionOptions it was given."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__(ProviderConfig(name="scripted", options={"script": script}))
        self.options: list[CompletionOptions] = []
        self.closed = False

    def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        self.options.append(options)
        return super()._stream(messages, tools, options)

    async def aclose(self) -> None:
        self.closed = True


def user(text: str) -> UserMessage:
    return UserMessage(content=text, source="user")


async def wait_for(condition: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


# -- AgentlsChatCompletionClient ---------------------------------------------------


async def test_a_conversation_with_a_tool_call() -> None:
    provider = RecordingProvider(
        [
            {"text": "Hello there", "usage": {"input_tokens": 10, "output_tokens": 3}},
            {
                "text": "Let me look.",
                "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}, "id": "c1"}],
                "usage": {"input_tokens": 20, "output_tokens": 5},
            },
            {"text": "It prints 1.", "usage": {"input_tokens": 30, "output_tokens": 4}},
        ]
    )
    client = AgentlsChatCompletionClient(provider)
    history: list[LLMMessage] = [SystemMessage(content="Be brief."), user("Hi")]

    first = await client.create(history)
    assert first.content == "Hello there"
    assert (first.finish_reason, first.cached, first.thought) == ("stop", False, None)
    assert first.usage == RequestUsage(prompt_tokens=10, completion_tokens=3)
    history += [AssistantMessage(content=first.content, source="assistant"), user("Read a.py")]

    second = await client.create(history, tools=[READ_FILE])
    assert second.finish_reason == "function_calls"
    assert second.content == [FunctionCall(id="c1", arguments='{"path": "a.py"}', name="read_file")]
    assert second.thought == "Let me look."
    assert provider.requests[1]["tools"] == ["read_file"]
    assert isinstance(second.content, list)
    history += [
        AssistantMessage(content=second.content, thought=second.thought, source="assistant"),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(content="print(1)", name="read_file", call_id="c1")]
        ),
    ]

    third = await client.create(history, tools=[READ_FILE])
    assert third.content == "It prints 1."
    sent = provider.requests[2]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert sent[4]["metadata"]["tool_calls"] == [
        {"tool": "read_file", "id": "c1", "arguments": {"path": "a.py"}}
    ]
    assert sent[5]["content"] == "print(1)"
    assert sent[5]["metadata"]["tool_call_id"] == "c1"

    assert client.total_usage() == RequestUsage(prompt_tokens=60, completion_tokens=12)
    assert client.actual_usage() == RequestUsage(prompt_tokens=60, completion_tokens=12)


async def test_create_stream_yields_text_then_exactly_one_result_last() -> None:
    provider = RecordingProvider([{"chunks": ["Str", "eam", "ed"], "reasoning": "hmm"}])
    client = AgentlsChatCompletionClient(provider)
    items = [item async for item in client.create_stream([user("go")])]
    assert items[:-1] == ["Str", "eam", "ed"]
    assert all(isinstance(i, str) for i in items[:-1])
    results = [i for i in items if isinstance(i, CreateResult)]
    assert len(results) == 1 and items[-1] is results[0]
    assert results[0].content == "Streamed"
    assert results[0].thought == "hmm"


async def test_create_stream_with_a_tool_call_still_ends_with_one_result() -> None:
    provider = RecordingProvider(
        [{"chunks": ["ok"], "tool_calls": [{"name": "read_file", "arguments": {}, "id": "x"}]}]
    )
    client = AgentlsChatCompletionClient(provider)
    items = [item async for item in client.create_stream([user("go")], tools=[READ_FILE])]
    assert items[0] == "ok"
    assert isinstance(items[-1], CreateResult) and len(items) == 2
    assert items[-1].content == [FunctionCall(id="x", arguments="{}", name="read_file")]


@pytest.mark.parametrize("reason", ["length", "content_filter", "stop"])
async def test_finish_reasons_pass_through(reason: str) -> None:
    provider = RecordingProvider([{"text": "x", "finish_reason": reason}])
    client = AgentlsChatCompletionClient(provider)
    assert (await client.create([user("go")])).finish_reason == reason


def test_other_finish_reasons_are_unknown() -> None:
    from agentls.providers.autogen.client import _result

    assert _result("x", "", {}, "eos", RequestUsage(0, 0)).finish_reason == "unknown"
    assert _result("x", "", {}, None, RequestUsage(0, 0)).finish_reason == "stop"


async def test_tool_call_arguments_stay_as_the_model_sent_them() -> None:
    provider = RecordingProvider(
        [{"tool_calls": [{"name": "read_file", "arguments": "oops", "id": "c9"}]}]
    )
    result = await AgentlsChatCompletionClient(provider).create([user("go")], tools=[READ_FILE])
    assert result.content == [FunctionCall(id="c9", arguments='"oops"', name="read_file")]


async def test_tools_may_be_objects_with_a_schema() -> None:
    class ReadFileTool:
        schema = {"name": "read_file", "description": "Read"}  # no parameters: defaulted

    provider = RecordingProvider([{"text": "x"}])
    client = AgentlsChatCompletionClient(provider)
    await client.create([user("go")], tools=[ReadFileTool()])
    assert provider.requests[0]["tools"] == ["read_file"]
    with pytest.raises(TypeError):
        await client.create([user("go")], tools=[object()])


async def test_cancellation_token_stops_a_stalled_response() -> None:
    provider = RecordingProvider([{"chunks": ["par", "tial"], "stall": True}])
    client = AgentlsChatCompletionClient(provider)
    token = CancellationToken()
    task = asyncio.create_task(client.create([user("go")], cancellation_token=token))
    await wait_for(lambda: provider.active_requests == 1)
    await asyncio.sleep(0.01)  # let it park on the stalled read
    started = time.monotonic()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1.0)
    assert time.monotonic() - started < 0.5
    assert provider.active_requests == 0
    assert client.total_usage() == RequestUsage(0, 0)


async def test_cancellation_from_another_thread_stops_create_stream() -> None:
    provider = RecordingProvider([{"chunks": ["a"], "stall": True}])
    client = AgentlsChatCompletionClient(provider)
    token = CancellationToken()
    seen: list[Any] = []

    async def consume() -> None:
        async for item in client.create_stream([user("go")], cancellation_token=token):
            seen.append(item)

    task = asyncio.create_task(consume())
    await wait_for(lambda: seen == ["a"])
    await asyncio.to_thread(token.cancel)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1.0)
    assert provider.active_requests == 0


async def test_an_already_cancelled_token_never_reaches_the_provider() -> None:
    provider = RecordingProvider([{"text": "x"}])
    token = CancellationToken()
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await AgentlsChatCompletionClient(provider).create([user("go")], cancellation_token=token)
    assert provider.requests == []


async def test_json_output_and_extra_create_args_reach_completion_options() -> None:
    provider = RecordingProvider([{"text": "{}"}, {"text": "{}"}])
    info: ModelInfo = {
        "vision": False,
        "function_calling": True,
        "json_output": True,
        "family": ModelFamily.UNKNOWN,
        "structured_output": True,
    }
    client = AgentlsChatCompletionClient(provider, model_info=info, model="m1")
    await client.create(
        [user("json")],
        json_output=True,
        extra_create_args={"max_tokens": 50, "temperature": 0.2, "stop": "END", "seed": 7},
    )
    options = provider.options[0]
    assert (options.model, options.max_tokens, options.temperature) == ("m1", 50, 0.2)
    assert options.stop == ("END",)
    assert options.extra == {"seed": 7, "response_format": {"type": "json_object"}}
    assert options.request_id

    class Answer(BaseModel):
        value: int

    await client.create([user("json")], json_output=Answer)
    response_format = provider.options[1].extra["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Answer"


async def test_model_info_is_derived_from_the_provider_and_enforced() -> None:
    provider = RecordingProvider([{"text": "x"}])
    client = AgentlsChatCompletionClient(provider)
    assert client.model_info["function_calling"] is True  # ScriptedProvider declares "tools"
    assert client.model_info["json_output"] is False
    assert client.model_info["family"] == ModelFamily.UNKNOWN
    assert client.capabilities == {"vision": False, "function_calling": True, "json_output": False}
    with pytest.raises(ValueError, match="JSON output"):
        await client.create([user("go")], json_output=True)
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    image = UserMessage(content=["see", picture], source="u")
    with pytest.raises(ValueError, match="vision"):
        await client.create([image])
    no_tools: ModelInfo = {**client.model_info, "function_calling": False}
    with pytest.raises(ValueError, match="function calling"):
        await AgentlsChatCompletionClient(provider, model_info=no_tools).create(
            [user("go")], tools=[READ_FILE]
        )
    partial: Any = {"vision": False, "function_calling": True, "json_output": False}
    with pytest.raises(ValueError, match="'family'"):
        AgentlsChatCompletionClient(provider, model_info=partial)


async def test_token_budget_and_close() -> None:
    provider = RecordingProvider([{"text": "x"}])
    client = AgentlsChatCompletionClient(provider)
    history: list[LLMMessage] = [user("a" * 400)]
    assert client.count_tokens(history) == 104  # 400 chars / 4 + 4 per message
    assert client.count_tokens(history, tools=[READ_FILE]) > 104
    with pytest.raises(ValueError, match="context window"):
        client.remaining_tokens(history)
    assert await client.load_context_window() == 32768  # the provider's ModelInfo
    assert client.remaining_tokens(history) == 32768 - 104
    info: Any = {**client.model_info, "context_window": 1000}
    assert AgentlsChatCompletionClient(provider, model_info=info).remaining_tokens(history) == 896
    await client.close()
    assert provider.closed


def test_messages_convert_both_ways() -> None:
    history: list[LLMMessage] = [
        SystemMessage(content="sys"),
        UserMessage(content="hi", source="me"),
        AssistantMessage(content="hello", thought="greeting", source="bot"),
        AssistantMessage(
            content=[
                FunctionCall(id="1", arguments='{"a": 1}', name="f"),
                FunctionCall(id="2", arguments="not json", name="g"),
            ],
            thought="calling",
            source="bot",
        ),
        FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(content="r1", name="f", call_id="1"),
                FunctionExecutionResult(content="r2", name="g", call_id="2", is_error=True),
            ]
        ),
    ]
    core = to_core_messages(history)
    assert [m.role for m in core] == ["system", "user", "assistant", "assistant", "tool", "tool"]
    assert core[3].tool_calls[0] == {"tool": "f", "id": "1", "arguments": {"a": 1}}
    assert [m.tool_call_id for m in core[4:]] == ["1", "2"]
    assert from_core_messages(core) == history
    # Tool results without a name get it from the call they answer.
    bare = [core[3], Message(role="tool", content="r1", metadata={"tool_call_id": "1"})]
    results = from_core_messages(bare)[1]
    assert isinstance(results, FunctionExecutionResultMessage)
    assert results.content[0].name == "f"


def test_autogen_message_objects_are_accepted_by_shape() -> None:
    class ForeignUserMessage(BaseModel):  # stands in for autogen_core's own class
        content: str
        source: str
        type: str = "UserMessage"

    core = to_core_messages([ForeignUserMessage(content="hi", source="me")])
    assert core == [Message(role="user", content="hi", metadata={"source": "me"})]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-mini", "gpt-4o"),
        ("gpt-4.1", "gpt-41"),
        ("gpt-4-turbo", "gpt-4"),
        ("openai/gpt-3.5-turbo", "gpt-35"),
        ("o3-mini", "o3"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("gemini-1.5-pro-002", "gemini-1.5-pro"),
        ("codestral-latest", "codestral"),
        ("qwen2.5-coder", "unknown"),
        ("", "unknown"),
    ],
)
def test_guess_family(model: str, family: str) -> None:
    assert guess_family(model) == family


# -- ProviderPluginAdapter -------------------------------------------------------------


Natives = list[dict[str, Any]]


def last_user(native_messages: Natives) -> str:
    return next((m["content"] for m in reversed(native_messages) if m.get("role") == "user"), "")


class EchoStreamPlugin:
    """Like agent_core's EchoProvider, but streaming: chunks through stream_api,
    text through process_chunk partials, tool calls from finalize."""

    name = "echo-stream"
    version = "1.0.0"

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.request_ids: list[str | None] = []
        self.seen: list[list[dict[str, Any]]] = []
        self.release = threading.Event()
        self.exited = threading.Event()

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config, "requests": 0}

    def to_native_messages(
        self, messages: list[dict[str, Any]], state: dict[str, Any]
    ) -> list[dict[str, Any]]:
        self.seen.append(messages)
        return [{"role": m["role"], "content": m["content"]} for m in messages]

    def initialize_request(
        self, native_messages: list[dict[str, Any]], state: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return native_messages, {**state, "requests": state["requests"] + 1, "text": ""}

    def stream_api(
        self, native_messages: Natives, state: dict[str, Any], *, request_id: str | None = None
    ) -> Iterator[dict[str, Any]]:
        self.request_ids.append(request_id)
        try:
            prompt = last_user(native_messages)
            for piece in ["Echo", ": ", prompt]:
                yield {"text": piece}
            if prompt == "stall":
                self.release.wait(5)  # until cancel_request
                return
            yield {"done": "!"}  # the last piece arrives only in the final message
        finally:
            self.exited.set()

    def process_chunk(
        self, native_chunk: dict[str, Any], native_messages: Natives, state: dict[str, Any]
    ) -> tuple[Natives, Natives, Natives, dict[str, Any]]:
        text = state["text"] + native_chunk.get("text", "")
        if "done" in native_chunk:
            final = {"role": "assistant", "content": text + native_chunk["done"]}
            return [], [final], [*native_messages, final], {**state, "text": ""}
        partial = {"role": "assistant", "content": text}
        return [partial], [], native_messages, {**state, "text": text}

    def finalize(
        self, native_messages: list[dict[str, Any]], state: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        if last_user(native_messages) != "read please":
            return [], native_messages, state
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
            "metadata": {"usage": {"prompt_tokens": 7, "completion_tokens": 2}},
        }
        return [call], [*native_messages, call], state

    def cancel_request(self, request_id: str) -> bool:
        self.cancelled.append(request_id)
        self.release.set()
        return True


class EchoProvider:
    """agent_core's EchoProvider (call_api answers; its stream_api yields nothing)."""

    name = "echo"
    version = "1.0.0"

    def get_config_schema(self) -> dict[str, Any]:
        return {"model": {"type": "string", "default": "echo-1"}}

    def init(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"config": config}

    def call_api(
        self, native_messages: list[dict[str, Any]], state: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        msg = {"role": "assistant", "content": f"Echo: {last_user(native_messages)}"}
        return ([], [msg], [*native_messages, msg], state)

    def stream_api(
        self, native_messages: list[dict[str, Any]], state: dict[str, Any]
    ) -> Iterator[dict[str, Any]]:
        yield from []


class CallOnlyPlugin:
    """Implements call_api and nothing else."""

    name = "call-only"

    def call_api(
        self, native_messages: Natives, state: dict[str, Any], *, request_id: str | None = None
    ) -> tuple[Natives, Natives, Natives, dict[str, Any]]:
        msg = {"role": "assistant", "content": f"Echo: {last_user(native_messages)}"}
        return ([], [msg], [*native_messages, msg], state)


CONFIG = ProviderConfig(name="plugin", model="echo-1")


def adapter(plugin: Any) -> ProviderPluginAdapter:
    return ProviderPluginAdapter(plugin, CONFIG)


async def test_plugin_text_streams_as_new_suffixes() -> None:
    plugin = EchoStreamPlugin()
    provider = adapter(plugin)
    stream = provider.stream([Message(role="user", content="hi")])
    chunks = [c async for c in stream]
    assert [c.delta for c in chunks if c.delta] == ["Echo", ": ", "hi", "!"]
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage.input_tokens > 0 and chunks[-1].usage.output_tokens > 0  # estimated
    assert plugin.request_ids == [stream.request_id]

    response = await provider.complete([Message(role="user", content="again")])
    assert response.content == "Echo: again!"
    assert provider._state["requests"] == 2  # the state a request ends with is kept


async def test_plugin_tool_call_from_finals() -> None:
    plugin = EchoStreamPlugin()
    provider = adapter(plugin)
    history = [
        Message(role="user", content="earlier"),
        Message(role="assistant", content="", metadata={"tool_calls": [{"tool": "x", "id": "c0"}]}),
        Message(role="tool", content="done", metadata={"tool_call_id": "c0"}),
        Message(role="user", content="read please"),
    ]
    response = await provider.complete(history, [READ_FILE])
    assert response.tool_calls == [ToolCall(tool="read_file", arguments={"path": "a.py"}, id="t1")]
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 2)
    assert response.content == "Echo: read please!"
    assert plugin.seen[0][2]["metadata"] == {"tool_call_id": "c0"}  # core dicts reach the plugin


async def test_plugin_cancellation_by_request_id() -> None:
    plugin = EchoStreamPlugin()
    provider = adapter(plugin)
    stream = provider.stream(
        [Message(role="user", content="stall")], options=CompletionOptions(request_id="r1")
    )
    seen: list[str] = []

    async def consume() -> None:
        async for chunk in stream:
            seen.append(chunk.delta)

    task = asyncio.create_task(consume())
    await wait_for(lambda: "".join(seen) == "Echo: stall")
    started = time.monotonic()
    assert provider.cancel_request("r1") is True
    with pytest.raises(ProviderRequestCancelled):
        await asyncio.wait_for(task, 1.0)
    assert time.monotonic() - started < 0.5
    assert plugin.cancelled == ["r1"]
    assert provider.active_requests == 0
    assert await asyncio.to_thread(plugin.exited.wait, 2)  # the worker thread ended too
    assert provider.cancel_request("r1") is False


async def test_plugin_is_told_when_its_consumer_goes_away() -> None:
    plugin = EchoStreamPlugin()
    provider = adapter(plugin)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await provider.complete([Message(role="user", content="stall")])
    assert len(plugin.cancelled) == 1
    assert provider.active_requests == 0


async def test_plugin_with_only_call_api() -> None:
    provider = adapter(CallOnlyPlugin())
    chunks = [c async for c in provider.stream([Message(role="user", content="hi")])]
    assert [c.delta for c in chunks if c.delta] == ["Echo: hi"]
    assert chunks[-1].finish_reason == "stop"
    assert "streaming" not in provider.get_info().capabilities
    assert provider.name == "call-only"


async def test_the_seeds_echo_provider_answers_through_call_api() -> None:
    response = await adapter(EchoProvider()).complete([Message(role="user", content="hi")])
    assert response.content == "Echo: hi"


def test_a_plugin_without_an_api_is_refused() -> None:
    class Nothing:
        name = "nothing"

    with pytest.raises(TypeError, match="neither stream_api nor call_api"):
        adapter(Nothing())


async def test_plugin_errors_become_model_errors() -> None:
    class Broken(CallOnlyPlugin):
        def call_api(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("backend down")

    from agentls.core.types.errors import ModelError

    with pytest.raises(ModelError, match="backend down") as info:
        await adapter(Broken()).complete([Message(role="user", content="hi")])
    assert isinstance(info.value.__cause__, ConnectionError)


async def test_as_provider_factory() -> None:
    from_class = as_provider_factory(EchoStreamPlugin)(CONFIG)
    assert isinstance(from_class, ProviderPluginAdapter) and isinstance(from_class, Provider)
    instance = CallOnlyPlugin()
    from_instance = as_provider_factory(instance)(CONFIG)
    assert isinstance(from_instance, ProviderPluginAdapter) and from_instance.plugin is instance
    assert as_provider_factory(ScriptedProvider) is ScriptedProvider
    from_function = as_provider_factory(lambda config: EchoProvider())(CONFIG)
    assert isinstance(from_function, ProviderPluginAdapter)
    assert isinstance(wrap_provider_plugin(EchoProvider, CONFIG).plugin, EchoProvider)
    with pytest.raises(TypeError):
        as_provider_factory(42)


async def test_autogen_client_over_a_provider_plugin() -> None:
    client = AgentlsChatCompletionClient(adapter(EchoStreamPlugin()))
    items = [i async for i in client.create_stream([user("hi")])]
    assert items[:-1] == ["Echo", ": ", "hi", "!"]
    last = items[-1]
    assert isinstance(last, CreateResult) and last.content == "Echo: hi!"
    assert client.total_usage().prompt_tokens > 0
    assert json.loads(json.dumps(last.model_dump()))["finish_reason"] == "stop"
