"""The real server process over real LSP (pytest-lsp): initialize, shutdown."""

from __future__ import annotations

import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "agentls", "--stdio"]),
)
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), process_id=None)
    )
    lsp_client.initialize_result = result  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="function")
async def test_initialize_reports_name_and_version(client: LanguageClient) -> None:
    from agentls import __version__

    result: types.InitializeResult = client.initialize_result  # type: ignore[attr-defined]
    info = result.server_info
    assert info is not None
    assert info.name == "agentls" and info.version == __version__
    caps = result.capabilities
    sync = caps.text_document_sync
    assert getattr(sync, "change", sync) == types.TextDocumentSyncKind.Incremental
