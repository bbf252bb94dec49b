"""`/template` completions for a client that takes snippets (Neovim, VS Code):
the expansion goes as a snippet with the template's placeholders as tab
stops, because editors insert only the first word of a plain-text item with
spaces. A client without snippet support keeps plain text
(test_completion_and_actions.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from agentls.lsp.suggestions.completion import as_snippet
from tests.e2e.helpers import server_env
from tests.e2e.test_completion_and_actions import _complete, _open, bounded

SNIPPET_CLIENT = types.ClientCapabilities(text_document=types.TextDocumentClientCapabilities(
    completion=types.CompletionClientCapabilities(
        completion_item=types.ClientCompletionItemOptions(
            snippet_support=True, documentation_format=[types.MarkupKind.Markdown]))))


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "agentls"],
                              server_env=server_env(AGENTLS_PROVIDER="scripted")),
)
async def client(lsp_client: LanguageClient, tmp_path_factory: Any):  # type: ignore[no-untyped-def]
    workspace: Path = tmp_path_factory.mktemp("workspace")
    templates = workspace / ".agentls" / "templates"
    templates.mkdir(parents=True)
    (templates / "price.md").write_text(
        "Check {{path}}: prices like $5 {in braces} and a \\ stay as written;"
        " {{path}} again.\n")
    await bounded(lsp_client.initialize_session(types.InitializeParams(
        capabilities=SNIPPET_CLIENT, process_id=None, root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")])))
    yield
    await bounded(lsp_client.shutdown_session())


@pytest.mark.asyncio(loop_scope="function")
async def test_a_template_goes_as_a_snippet_with_tab_stops(client: LanguageClient) -> None:
    uri = "agentls://chat/session-1"
    text = "/pri"
    _open(client, uri, "agentls-chat", text)
    items = await _complete(client, uri, text, trigger="/")
    assert [item.label for item in items] == ["/price"]
    item = items[0]
    assert item.insert_text_format == types.InsertTextFormat.Snippet
    assert isinstance(item.documentation, types.MarkupContent)  # it renders Markdown
    assert item.documentation.kind == types.MarkupKind.Markdown
    assert isinstance(item.text_edit, types.TextEdit)
    assert item.text_edit.new_text == (
        "Check ${1:path}: prices like \\$5 {in braces\\} and a \\\\ stay as written;"
        " ${1:path} again.\n")


def test_as_snippet_escapes_and_numbers_placeholders() -> None:
    assert as_snippet("plain words") == "plain words"
    assert as_snippet("{{a}} {{b}} {{a}}") == "${1:a} ${2:b} ${1:a}"
    assert as_snippet("$HOME } \\") == "\\$HOME \\} \\\\"
    assert as_snippet("{{not a name}} {x}") == "{{not a name\\}\\} {x\\}"
