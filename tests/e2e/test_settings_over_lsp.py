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
    assert status["completions"] == {"served": 0, "shown": 0, "accepted": 0}


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
