"""Settings over real LSP: initializationOptions, workspace/configuration,
didChangeConfiguration, problems shown once; bad params answered -32602."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.e2e.helpers import RawClient, plain, server_env


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "agentls"],
                              server_env=server_env()),
)
async def client(lsp_client: LanguageClient, tmp_path_factory: Any):  # type: ignore[no-untyped-def]
    script = tmp_path_factory.mktemp("script") / "hello.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    lsp_client.set_configuration({"approval": {"mode": "message"}, "model": "from-workspace"},
                                 section="agentls")
    caps = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True))
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=caps, process_id=None,
        initialization_options={"agentls": {
            "provider": "scripted", "providerOptions": {"script": str(script)},
            "approval": {"mode": "bogus"}}},
    ))
    yield
    await lsp_client.shutdown_session()


async def _status(client: LanguageClient) -> dict[str, Any]:
    result: dict[str, Any] = plain(
        await client.protocol.send_request_async("agentls/status", {}))
    return result


async def _wait_for(predicate: Any, what: str) -> None:
    for _ in range(100):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.asyncio(loop_scope="function")
async def test_sources_merge_and_bad_value_is_reported_once(client: LanguageClient) -> None:
    await _wait_for(lambda: client.messages, "a settings problem message")
    problems = [m for m in client.messages if "approval.mode" in m.message]
    assert len(problems) == 1
    assert problems[0].type == types.MessageType.Error
    assert "'bogus'" in problems[0].message and "'message'" in problems[0].message
    status = await _status(client)
    assert status["provider"]["id"] == "scripted"  # from initializationOptions
    assert status["model"] == "from-workspace"  # from workspace/configuration
    assert status["completions"] == {"served": 0, "shown": 0, "accepted": 0,
                                     "partiallyAccepted": 0, "warmed": 0,
                                     "latency": {"answers": 0, "p50Ms": None, "p90Ms": None,
                                                 "cacheHits": 0, "empty": 0,
                                                 "partial": 0}}


@pytest.mark.asyncio(loop_scope="function")
async def test_did_change_configuration_rereads(client: LanguageClient) -> None:
    client.set_configuration({"model": "changed"}, section="agentls")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    async def model() -> Any:
        return (await _status(client))["model"]
    for _ in range(100):
        if await model() == "changed":
            break
        await asyncio.sleep(0.05)
    assert await model() == "changed"


async def test_typed_request_with_bad_params_gets_invalid_params() -> None:
    raw = await RawClient.start(env=server_env(AGENTLS_PROVIDER="scripted"))
    try:
        await raw.initialize()
        answer = await raw.request("textDocument/hover", {"textDocument": 42,
                                                          "position": "nowhere"})
        assert answer["error"]["code"] == -32602
        assert "textDocument/hover" in answer["error"]["message"]
        # the server carries on
        status = await raw.request("agentls/status", {})
        assert status["result"]["provider"]["id"] == "scripted"
    finally:
        await raw.close()


# ------------------------------------------- problems on every change, inline registration


async def _session(tmp_path: Any, init: dict[str, Any], workspace_config: dict[str, Any],
                   caps: types.ClientCapabilities) -> Any:
    from pytest_lsp.client import make_test_lsp_client

    client = make_test_lsp_client()
    registrations: list[Any] = []
    unregistrations: list[Any] = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        registrations.extend({"id": r.id, "method": r.method} for r in params.registrations)

    @client.feature(types.CLIENT_UNREGISTER_CAPABILITY)
    def unregister(params: types.UnregistrationParams) -> None:
        unregistrations.extend({"id": u.id, "method": u.method}
                               for u in params.unregisterations)

    client.set_configuration(workspace_config, section="agentls")
    await client.start_io(sys.executable, "-m", "agentls",
                          env=server_env(AGENTLS_STATE_DIR=str(tmp_path / "state")))
    result = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=caps, process_id=None, initialization_options={"agentls": init})), 20)
    client.registrations = registrations  # type: ignore[attr-defined]
    client.unregistrations = unregistrations  # type: ignore[attr-defined]
    client.init_result = result  # type: ignore[attr-defined]
    return client


async def test_an_unknown_provider_is_an_invalid_value_on_every_change(tmp_path: Any) -> None:
    caps = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True))
    client = await _session(tmp_path, {}, {"provider": "no-such-provider"}, caps)
    try:
        def errors() -> list[str]:
            return [m.message for m in client.messages if m.type == types.MessageType.Error]

        await _wait_for(lambda: any("provider" in m for m in errors()), "the provider error")
        [first] = [m for m in errors() if "no-such-provider" in m]
        assert "no installed provider plugin" in first and "openai" in first and "local" in first
        assert (await _status(client))["provider"]["id"] == "local"  # kept a valid one
        # Fixed, then broken again (another key): each new problem is shown.
        # The broken settings name another provider than the fixed ones, so the
        # status shows when the server has read the fix (otherwise the next
        # break could overtake it and the server would see no change).
        for round_ in range(2):
            client.set_configuration({"provider": "openai", "approval": {"mode": "bogus"}},
                                     section="agentls")
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings=None))
            await _wait_for(lambda n=round_: sum("'bogus'" in m for m in errors()) == n + 1,
                            f"the approval.mode error, change {round_ + 1}")
            client.set_configuration({"provider": "scripted"}, section="agentls")
            client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings=None))
            for _ in range(200):
                if (await _status(client))["provider"]["id"] == "scripted":
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the fixed settings were never read")
        assert sum("'bogus'" in m for m in errors()) == 2
    finally:
        await client.shutdown_session()


async def test_inline_completion_is_registered_only_while_enabled(tmp_path: Any) -> None:
    dynamic = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(
                dynamic_registration=True)))
    client = await _session(tmp_path, {"provider": "scripted"},
                            {"inlineCompletion": {"enabled": False}}, dynamic)
    try:
        # Not advertised statically; disabled at start: not registered either.
        assert client.init_result.capabilities.inline_completion_provider is None
        # agentls/status answers once `initialized` has read the settings, and
        # `initialized` registers (or not) in that same step, before it yields:
        # a registration would have been written before this answer.
        assert (await _status(client))["provider"]["id"] == "scripted"
        assert client.registrations == []
        client.set_configuration({"inlineCompletion": {"enabled": True}}, section="agentls")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None))
        await _wait_for(lambda: client.registrations, "client/registerCapability")
        assert [r["method"] for r in client.registrations] == ["textDocument/inlineCompletion"]
        client.set_configuration({"inlineCompletion": {"enabled": False}}, section="agentls")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None))
        await _wait_for(lambda: client.unregistrations, "client/unregisterCapability")
        assert client.unregistrations[0]["id"] == client.registrations[0]["id"]
    finally:
        await client.shutdown_session()
    # A client without dynamic registration keeps the static capability.
    static = await _session(tmp_path, {"provider": "scripted"}, {},
                            types.ClientCapabilities())
    try:
        assert static.init_result.capabilities.inline_completion_provider is not None
    finally:
        await static.shutdown_session()
