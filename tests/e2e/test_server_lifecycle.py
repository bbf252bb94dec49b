"""The real server process over real LSP (pytest-lsp): initialize, shutdown."""

from __future__ import annotations

import sys
from typing import Any

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


def test_exit_while_initialized_still_runs_is_quiet(tmp_path: Any) -> None:
    """An editor that sends initialize, initialized, shutdown and exit at once
    (the `initialized` handler still waiting on settings when exit comes)
    gets a clean exit: status 0 and no traceback in the log."""
    import json
    import subprocess

    from tests.e2e.helpers import server_env

    def frame(message: dict[str, Any]) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    done = subprocess.run(
        [sys.executable, "-m", "agentls", "--stdio"], input=b"".join(map(frame, messages)),
        capture_output=True, timeout=60,
        env=server_env(AGENTLS_STATE_DIR=str(tmp_path / "state")))
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr, done.stderr.decode()[-2000:]
