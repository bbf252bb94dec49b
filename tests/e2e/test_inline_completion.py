"""Inline completion over real LSP: the server runs as a subprocess
(pytest-lsp's client) with provider `openai` pointed at the loopback fake
backend, so the real HTTP code runs against the vendors' wire format.

Covered: capabilities; the FIM path (/v1/completions with `suffix`) and the
chat path (/v1/chat/completions, fences stripped); supersede (the older
request answers at once with no items, its HTTP connection is closed);
$/cancelRequest (-32800, connection closed); type-ahead answered from the
cache with no backend request; didShowCompletion / accept counted in
agentls/status; a down backend (no items, one window/showMessage); a missing
model; bad params (-32602); unknown documents; features.disabled.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from tests.e2e.helpers import RawClient, plain, server_env
from tests.fakes.http_backend import (
    SSE_DONE,
    STALL,
    FakeBackend,
    error_reply,
    openai_chunk,
    sse,
    sse_reply,
)

SERVER = [sys.executable, "-m", "agentls"]
TIMEOUT = 20.0  # every request and wait here is bounded by this
DOC = "def area(r):\n    return \n\nprint(area(2))\n"
CURSOR = types.Position(line=1, character=11)  # after "return "
# The server's own FIM (`suffix`), set: which form a server gets is
# tests/e2e/test_inline_openai_fim.py's subject.
FIM_SETTINGS = {"model": "qwen2.5-coder-1.5b", "inlineCompletion": {"debounceMs": 0},
                "providerOptions": {"fim": True}}
CHAT_SETTINGS = {"model": "gpt-4o-mini", "inlineCompletion": {"debounceMs": 0}}


def fim_reply(text: str) -> Any:
    end = openai_chunk(text="", finish_reason="stop")
    return sse_reply([sse(openai_chunk(text=text)), sse(end), SSE_DONE])


def chat_reply(text: str) -> Any:
    return sse_reply([sse(openai_chunk(text)), sse(openai_chunk(finish_reason="stop")), SSE_DONE])


def stalled_reply() -> Any:
    return sse_reply([sse(openai_chunk(text="")), STALL])


@dataclass
class Server:
    client: LanguageClient
    workspace: Path
    capabilities: types.ServerCapabilities
    next_id: int = 0

    def open(self, text: str = DOC, name: str = "area.py", language: str = "python") -> str:
        uri = (self.workspace / name).as_uri()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1,
                                                 text=text)))
        return uri

    def type_text(self, uri: str, version: int, at: types.Position, text: str) -> None:
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=at, end=at), text=text)]))

    def send_inline(self, uri: str, at: types.Position = CURSOR, *, invoked: bool = True,
                    msg_id: str | None = None) -> asyncio.Future[Any]:
        kind = (types.InlineCompletionTriggerKind.Invoked if invoked
                else types.InlineCompletionTriggerKind.Automatic)
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=at,
            context=types.InlineCompletionContext(trigger_kind=kind))
        self.next_id += 1
        return asyncio.ensure_future(self.client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id or f"ic-{self.next_id}"))

    async def inline(self, uri: str, at: types.Position = CURSOR, **kwargs: Any
                     ) -> dict[str, Any]:
        return as_json(self.client, await asyncio.wait_for(self.send_inline(uri, at, **kwargs),
                                                           TIMEOUT))

    async def request(self, method: str, params: Any) -> Any:
        return plain(await asyncio.wait_for(
            self.client.protocol.send_request_async(method, params), TIMEOUT))

    def shown(self) -> list[str]:
        return [m.message for m in self.client.messages]


def as_json(client: LanguageClient, value: Any) -> Any:
    if hasattr(value, "__attrs_attrs__"):
        return client.protocol._converter.unstructure(value)
    return plain(value)


async def wait_until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def agentls(tmp_path: Path, settings: dict[str, Any]) -> AsyncIterator[Server]:
    client = make_test_lsp_client()
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    await client.start_io(*SERVER, env=server_env(AGENTLS_STATE_DIR=str(tmp_path / "state"),
                                                  OPENAI_API_KEY=""))
    stopped = False
    try:
        result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
            capabilities=types.ClientCapabilities(), process_id=None,
            root_uri=workspace.as_uri(),
            initialization_options={"agentls": {"provider": "openai", **settings}},
        )), TIMEOUT)
        yield Server(client, workspace, result.capabilities)
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        stopped = True
    finally:
        if not stopped and client._server is not None and client._server.returncode is None:
            client._server.kill()


def base_url(backend: FakeBackend) -> str:
    return backend.url + "/v1"


# --------------------------------------------------------------------------- paths


async def test_fim_path(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("3.14 * r * r\n\ndef other():"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        assert server.capabilities.inline_completion_provider is not None
        uri = server.open()
        answer = await server.inline(uri)
        (item,) = answer["items"]
        assert item["insertText"] == "3.14 * r * r"  # cut at the end of the block
        assert item["range"] == {"start": {"line": 1, "character": 11},
                                 "end": {"line": 1, "character": 11}}
        assert item["command"]["command"] == "agentls.inlineCompletionAccepted"
        assert len(item["command"]["arguments"]) == 1
        (sent,) = fake_backend.requests_to("/v1/completions")
        assert sent.json["prompt"] == "def area(r):\n    return "
        assert sent.json["suffix"] == "\n\nprint(area(2))\n"
        assert sent.json["model"] == "qwen2.5-coder-1.5b"
        assert sent.json["max_tokens"] == 128 and sent.json["stream"] is True
        assert not fake_backend.requests_to("/v1/chat/completions")


async def test_a_lone_carriage_return_ends_a_line(tmp_path: Path,
                                                  fake_backend: FakeBackend) -> None:
    """LSP counts "\\r\\n", "\\n" and a lone "\\r" as line ends (old Mac files,
    some generated ones): the cursor's position means the same place to the
    server as to the editor."""
    fake_backend.script("POST", "/v1/completions", fim_reply("3.14 * r * r"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open("# area\rdef area(r):\r\n    return \n\nprint(area(2))\n")
        answer = await server.inline(uri, types.Position(line=2, character=11))
        assert [item["insertText"] for item in answer["items"]] == ["3.14 * r * r"]
        (sent,) = fake_backend.requests_to("/v1/completions")
        assert sent.json["prompt"].endswith("def area(r):\r\n    return ")
        assert sent.json["suffix"] == "\n\nprint(area(2))\n"


async def test_fim_enabled_by_provider_option(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("r ** 2"))
    settings = {**CHAT_SETTINGS, "model": "my-local-model", "providerOptions": {"fim": True},
                "inlineCompletion": {"debounceMs": 0, "maxTokens": 16}}
    async with agentls(tmp_path, {**settings, "baseUrl": base_url(fake_backend)}) as server:
        answer = await server.inline(server.open())
        assert [i["insertText"] for i in answer["items"]] == ["r ** 2"]
        assert fake_backend.requests_to("/v1/completions")[0].json["max_tokens"] == 16


async def test_chat_path(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/chat/completions",
                        chat_reply("```python\n    return 3.14 * r * r\n```"))
    async with agentls(tmp_path, {**CHAT_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        answer = await server.inline(server.open())
        assert [i["insertText"] for i in answer["items"]] == ["3.14 * r * r"]
        (sent,) = fake_backend.requests_to("/v1/chat/completions")
        system, user = sent.json["messages"]
        assert system["role"] == "system" and "only the code" in system["content"]
        assert "    return <FILL_HERE>\n\nprint(area(2))" in user["content"]
        # The one probe: the fake has no /v1/completions (404), so chat from then on.
        assert len(fake_backend.requests_to("/v1/completions")) == 1


# --------------------------------------------------------------------------- supersede, cancel


async def test_newer_request_supersedes_and_closes_the_older_call(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", "/v1/completions", stalled_reply(), fim_reply("2 * r"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        older = server.send_inline(uri)
        await wait_until(lambda: fake_backend.requests_to("/v1/completions"), "the first call")
        server.type_text(uri, 2, CURSOR, " ")
        started = time.monotonic()
        newer = server.send_inline(uri, types.Position(line=1, character=12))
        older_answer = as_json(server.client, await asyncio.wait_for(older, TIMEOUT))
        assert time.monotonic() - started < 1.0  # at once, not when the model is done
        assert older_answer == {"items": []}
        first = fake_backend.requests_to("/v1/completions")[0]
        assert fake_backend.wait_for_disconnect(first, timeout=5)
        newer_answer = as_json(server.client, await asyncio.wait_for(newer, TIMEOUT))
        assert [i["insertText"] for i in newer_answer["items"]] == ["2 * r"]


async def test_cancel_request_answers_request_cancelled_and_closes_the_call(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", "/v1/completions", stalled_reply())
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        pending = server.send_inline(uri, msg_id="to-cancel")
        await wait_until(lambda: fake_backend.requests_to("/v1/completions"), "the call")
        started = time.monotonic()
        server.client.protocol.notify("$/cancelRequest", types.CancelParams(id="to-cancel"))
        with pytest.raises(JsonRpcException) as raised:
            await asyncio.wait_for(pending, TIMEOUT)
        assert raised.value.code == -32800
        assert time.monotonic() - started < 1.0
        first = fake_backend.requests_to("/v1/completions")[0]
        assert fake_backend.wait_for_disconnect(first, timeout=5)


async def test_burst_of_automatic_triggers_makes_one_call(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("x"))
    settings = {**FIM_SETTINGS, "inlineCompletion": {"debounceMs": 80}}
    async with agentls(tmp_path, {**settings, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        pending = []
        for index, char in enumerate("3.14"):
            at = types.Position(line=1, character=11 + index)
            server.type_text(uri, index + 2, at, char)
            pending.append(server.send_inline(uri, types.Position(line=1, character=12 + index),
                                              invoked=False))
            await asyncio.sleep(0.02)
        answers = [as_json(server.client, a)
                   for a in await asyncio.wait_for(asyncio.gather(*pending), TIMEOUT)]
        assert answers[:-1] == [{"items": []}] * 3
        assert [i["insertText"] for i in answers[-1]["items"]] == ["x"]
        assert len(fake_backend.requests_to("/v1/completions")) == 1


# --------------------------------------------------------------------------- cache, counters


async def test_type_ahead_is_answered_from_the_cache(
    tmp_path: Path, fake_backend: FakeBackend
) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("3.14 * r * r"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        first = await server.inline(uri)
        assert first["items"][0]["insertText"] == "3.14 * r * r"
        server.type_text(uri, 2, CURSOR, "3.1")
        at = types.Position(line=1, character=14)
        second = await server.inline(at=at, uri=uri, invoked=False)
        assert second["items"][0]["insertText"] == "4 * r * r"
        assert second["items"][0]["range"]["start"] == {"line": 1, "character": 14}
        # A backend call would be made before the answer; one more round trip
        # covers one the server might have started after it.
        await server.request("agentls/status", {})
        # no new backend request (providerOptions.fim set: no FIM finding-out either)
        assert len(fake_backend.requests_to("/v1/completions")) == 1
        assert len(fake_backend.requests) == 1


async def test_shown_and_accepted_counters(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("r * r"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        (item,) = (await server.inline(uri))["items"]
        server.client.protocol.notify("textDocument/didShowCompletion", {"item": item})
        server.client.protocol.notify("textDocument/didPartiallyAcceptCompletion",
                                      {"item": item, "acceptedLength": 1})
        command = item["command"]
        accept = types.ExecuteCommandParams(command=command["command"],
                                            arguments=command["arguments"])
        await server.request(types.WORKSPACE_EXECUTE_COMMAND, accept)
        await server.request(types.WORKSPACE_EXECUTE_COMMAND, accept)  # counted once
        status = await server.request("agentls/status", {})
        latency = status["completions"].pop("latency")
        assert status["completions"] == {"served": 1, "shown": 1, "accepted": 1,
                                         "partiallyAccepted": 1, "warmed": 0}
        # One answer, with a suggestion, from the model: what the user waited.
        assert latency["answers"] == 1 and latency["empty"] == 0
        assert latency["cacheHits"] == 0 and latency["p50Ms"] is not None
        assert 0 < latency["p50Ms"] == latency["p90Ms"]
        with pytest.raises(JsonRpcException) as raised:
            await server.request(types.WORKSPACE_EXECUTE_COMMAND,
                                 types.ExecuteCommandParams(command=command["command"],
                                                            arguments=[]))
        assert raised.value.code == -32602


# --------------------------------------------------------------------------- errors


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_backend_down_answers_empty_and_tells_once(tmp_path: Path) -> None:
    settings = {**FIM_SETTINGS, "baseUrl": f"http://127.0.0.1:{_closed_port()}/v1"}
    async with agentls(tmp_path, settings) as server:
        uri = server.open()
        for _ in range(3):
            assert await server.inline(uri) == {"items": []}
        # The notice goes out before the answer it belongs to: after the third
        # answer and one more round trip, a second notice would be here.
        status = await server.request("agentls/status", {})
        assert status["completions"]["served"] == 0
        told = [m for m in server.shown() if "inline completion" in m]
        assert len(told) == 1, told
        assert "baseUrl" in told[0] and "cannot reach" in told[0]


async def test_missing_model_is_told_once(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/completions",
                        error_reply(404, "The model 'qwen2.5-coder-1.5b' does not exist",
                                    code="model_not_found"))
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        assert await server.inline(uri) == {"items": []}
        assert await server.inline(uri) == {"items": []}
        await wait_until(lambda: server.shown(), "a message")
        await server.request("agentls/status", {})  # a second notice would be here by now
        (told,) = [m for m in server.shown() if "inline completion" in m]
        assert "does not exist" in told and "inlineCompletion.model" in told


async def test_bad_params_and_unknown_documents(tmp_path: Path, fake_backend: FakeBackend) -> None:
    async with agentls(tmp_path, {**FIM_SETTINGS, "baseUrl": base_url(fake_backend)}) as server:
        uri = server.open()
        with pytest.raises(JsonRpcException) as raised:
            await server.inline(uri, types.Position(line=40, character=0))
        assert raised.value.code == -32602 and "line 40" in str(raised.value)
        unknown = (server.workspace / "never-opened.py").as_uri()
        assert await server.inline(unknown) == {"items": []}
        assert not fake_backend.requests


async def test_unparsable_params_get_invalid_params(fake_backend: FakeBackend) -> None:
    raw = await RawClient.start(env=server_env(AGENTLS_PROVIDER="openai",
                                               AGENTLS_BASE_URL=base_url(fake_backend)))
    try:
        await raw.initialize()
        answer = await raw.request(types.TEXT_DOCUMENT_INLINE_COMPLETION,
                                   {"textDocument": {"uri": "file:///x.py"},
                                    "position": {"line": "one"}}, timeout=TIMEOUT)
        assert answer["error"]["code"] == -32602
        assert "textDocument/inlineCompletion" in answer["error"]["message"]
    finally:
        await raw.close()


async def test_disabled_feature_answers_nothing(tmp_path: Path, fake_backend: FakeBackend) -> None:
    fake_backend.script("POST", "/v1/completions", fim_reply("r"))
    settings = {**FIM_SETTINGS, "features": {"disabled": ["inline-completion"]},
                "baseUrl": base_url(fake_backend)}
    async with agentls(tmp_path, settings) as server:
        assert await server.inline(server.open()) == {"items": []}
        assert not fake_backend.requests
