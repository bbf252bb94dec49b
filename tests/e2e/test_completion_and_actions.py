"""Feature completions, templates and code actions over real LSP (pytest-lsp
against the server subprocess): `/template` completions in chat documents and
prompt files, nothing in other documents, agentls/templates with a workspace
template, agentls/complete, "Fix with agent" / "Explain" / "Write tests"."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar, Union

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.e2e.helpers import plain, server_env

T = TypeVar("T")
TIMEOUT = 15  # seconds, for any one exchange with the server

PYTHON_SOURCE = "import os\n\n\ndef area(r):\n    return pi * r * r\n"


async def bounded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, TIMEOUT)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "agentls"],
                              server_env=server_env(AGENTLS_PROVIDER="scripted")),
)
async def client(lsp_client: LanguageClient, tmp_path_factory: Any):  # type: ignore[no-untyped-def]
    workspace: Path = tmp_path_factory.mktemp("workspace")
    templates = workspace / ".agentls" / "templates"
    templates.mkdir(parents=True)
    (templates / "review.md").write_text(
        "---\ndescription: Review the selection for bugs\n---\n"
        "Review this {{language}} code for bugs:\n\n{{selection}}\n")
    result = await bounded(lsp_client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), process_id=None,
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
    )))
    lsp_client.initialize_result = result  # type: ignore[attr-defined]
    lsp_client.workspace_path = workspace  # type: ignore[attr-defined]
    _fix_code_action_parsing(lsp_client)
    yield
    await bounded(lsp_client.shutdown_session())


def _fix_code_action_parsing(client: LanguageClient) -> None:
    """lsprotocol's client-side hook reads every `Command | CodeAction` with a
    `command` key as a Command, so a CodeAction carrying a Command (what the
    server sends, and valid LSP) would come back mangled. Tell them apart the
    way editors do: a Command's `command` is a string."""
    converter = client.protocol._converter

    def structure(obj: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)  # type: ignore[no-any-return]
        return converter.structure(obj, types.CodeAction)  # type: ignore[no-any-return]

    converter.register_structure_hook(
        Union[types.Command, types.CodeAction], structure)  # noqa: UP007


def _workspace(client: LanguageClient) -> Path:
    path: Path = client.workspace_path  # type: ignore[attr-defined]
    return path


def _open(client: LanguageClient, uri: str, language_id: str, text: str) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1,
                                             text=text)))


def _end(text: str) -> types.Position:
    lines = text.split("\n")
    return types.Position(line=len(lines) - 1, character=len(lines[-1]))


async def _complete(client: LanguageClient, uri: str, text: str,
                    trigger: str | None = None) -> list[types.CompletionItem]:
    context = (types.CompletionContext(trigger_kind=types.CompletionTriggerKind.TriggerCharacter,
                                       trigger_character=trigger)
               if trigger else
               types.CompletionContext(trigger_kind=types.CompletionTriggerKind.Invoked))
    result = await bounded(client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=_end(text),
        context=context)))
    if result is None:
        return []
    return list(result.items if isinstance(result, types.CompletionList) else result)


@pytest.mark.asyncio(loop_scope="function")
async def test_capabilities_advertise_completion_triggers_and_code_actions(
    client: LanguageClient,
) -> None:
    caps = client.initialize_result.capabilities  # type: ignore[attr-defined]
    assert caps.completion_provider is not None
    assert sorted(caps.completion_provider.trigger_characters) == ["/", "@"]
    assert caps.code_action_provider
    kinds = getattr(caps.code_action_provider, "code_action_kinds", None) or []
    assert types.CodeActionKind.QuickFix in kinds


@pytest.mark.asyncio(loop_scope="function")
async def test_slash_completion_in_a_chat_document(client: LanguageClient) -> None:
    uri = "agentls://chat/session-1"
    text = "Hello there\nplease /ex"
    _open(client, uri, "agentls-chat", text)
    items = await _complete(client, uri, text, trigger="/")
    by_label = {item.label: item for item in items}
    assert "/explain" in by_label, list(by_label)
    assert "/fix" not in by_label  # filtered by what is typed
    explain = by_label["/explain"]
    assert explain.detail
    edit = explain.text_edit
    assert isinstance(edit, types.TextEdit)
    # replaces "/ex" (from the slash to the cursor) with the template text
    assert edit.range.start == types.Position(line=1, character=7)
    assert edit.range.end == _end(text)
    assert edit.new_text.startswith("Explain what this code does")
    assert explain.filter_text == "/explain"
    # a client that does not say it renders Markdown gets plain documentation
    assert isinstance(explain.documentation, str) and explain.documentation
    assert explain.insert_text_format == types.InsertTextFormat.PlainText

    # a workspace template is offered too
    text2 = "/re"
    uri2 = "agentls://chat/session-2"
    _open(client, uri2, "agentls-chat", text2)
    labels = [item.label for item in await _complete(client, uri2, text2, trigger="/")]
    assert labels == ["/review"]


@pytest.mark.asyncio(loop_scope="function")
async def test_completion_in_a_prompt_file(client: LanguageClient) -> None:
    uri = (_workspace(client) / "ask.prompt.md").as_uri()
    text = "# Ask\n\nRun /te"
    _open(client, uri, "markdown", text)
    items = await _complete(client, uri, text)
    assert [item.label for item in items] == ["/tests"]


@pytest.mark.asyncio(loop_scope="function")
async def test_plain_source_file_gets_no_agentls_items(client: LanguageClient) -> None:
    uri = (_workspace(client) / "main.py").as_uri()
    text = "x = 1\n/ex"
    _open(client, uri, "python", text)
    assert await _complete(client, uri, text, trigger="/") == []
    md = (_workspace(client) / "README.md").as_uri()
    _open(client, md, "markdown", text)
    assert await _complete(client, md, text, trigger="/") == []


@pytest.mark.asyncio(loop_scope="function")
async def test_agentls_templates_lists_builtins_and_workspace_templates(
    client: LanguageClient,
) -> None:
    result = plain(await bounded(client.protocol.send_request_async("agentls/templates", {})))
    by_name = {t["name"]: t for t in result["templates"]}
    assert {"explain", "fix", "tests", "docstring", "commit", "review"} <= set(by_name)
    review = by_name["review"]
    assert review["description"] == "Review the selection for bugs"
    assert review["template"].startswith("Review this {{language}} code")
    for entry in by_name.values():
        assert set(entry) >= {"name", "description", "template"}
    # null params are accepted too
    again = plain(await bounded(client.protocol.send_request_async("agentls/templates", None)))
    assert again == result


@pytest.mark.asyncio(loop_scope="function")
async def test_agentls_complete_for_webview_input(client: LanguageClient) -> None:
    result = plain(await bounded(client.protocol.send_request_async(
        "agentls/complete", {"text": "Please /do"})))
    [item] = [i for i in result["items"] if i.get("plugin") == "templates"]
    assert item["replacement"] == "/docstring"
    assert item["start"] == len("Please ")
    assert item["display"] == "/docstring" and item["display_meta"]
    assert item["applied"].startswith("Write documentation comments")
    none = plain(await bounded(client.protocol.send_request_async(
        "agentls/complete", {"text": "no trigger here"})))
    assert [i for i in none["items"] if i.get("plugin") == "templates"] == []


async def _actions(client: LanguageClient, uri: str, where: types.Range,
                   diagnostics: list[types.Diagnostic],
                   only: list[str] | None = None) -> list[types.CodeAction]:
    result = await bounded(client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=where,
        context=types.CodeActionContext(diagnostics=diagnostics, only=only))))
    return [a for a in result or [] if isinstance(a, types.CodeAction)]


def _range(line: int, start: int, end_line: int, end: int) -> types.Range:
    return types.Range(start=types.Position(line=line, character=start),
                       end=types.Position(line=end_line, character=end))


@pytest.mark.asyncio(loop_scope="function")
async def test_fix_with_agent_for_a_diagnostic_in_range(client: LanguageClient) -> None:
    path = _workspace(client) / "geometry.py"
    path.write_text(PYTHON_SOURCE)
    uri = path.as_uri()
    _open(client, uri, "python", PYTHON_SOURCE)
    diagnostic = types.Diagnostic(
        range=_range(4, 11, 4, 13), message="Undefined name `pi`",
        severity=types.DiagnosticSeverity.Error, source="ruff", code="F821")
    cursor = _range(4, 12, 4, 12)  # an empty range inside the diagnostic

    actions = await _actions(client, uri, cursor, [diagnostic])
    assert [a.title for a in actions] == ["Fix with agent"]  # nothing selected: no Explain
    fix = actions[0]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.diagnostics and fix.diagnostics[0].message == "Undefined name `pi`"
    assert fix.command is not None and fix.command.command == "agentls.chat"
    [argument] = plain(fix.command.arguments)
    prompt = argument["prompt"]
    assert "Undefined name `pi`" in prompt
    assert "- line 5:12 error: Undefined name `pi` (ruff F821)" in prompt
    assert "    return pi * r * r" in prompt  # the selected code: the diagnostic's line
    assert "geometry.py" in prompt and "```python" in prompt
    assert argument["context"]["uri"] == uri
    assert argument["context"]["range"] == {"start": {"line": 4, "character": 0},
                                            "end": {"line": 4, "character": 21}}

    # a diagnostic elsewhere is not "in range"
    far = await _actions(client, uri, _range(0, 0, 0, 0), [diagnostic])
    assert far == []


@pytest.mark.asyncio(loop_scope="function")
async def test_explain_and_write_tests_for_a_selection(client: LanguageClient) -> None:
    path = _workspace(client) / "geometry.py"
    path.write_text(PYTHON_SOURCE)
    uri = path.as_uri()
    _open(client, uri, "python", PYTHON_SOURCE)
    selection = _range(3, 0, 4, 21)

    actions = await _actions(client, uri, selection, [])
    by_title = {a.title: a for a in actions}
    assert set(by_title) == {"Explain", "Write tests"}
    for title, start in (("Explain", "Explain what this code does"),
                         ("Write tests", "Write tests for this code")):
        command = by_title[title].command
        assert command is not None and command.command == "agentls.chat"
        [argument] = plain(command.arguments)
        assert argument["prompt"].startswith(start)
        assert "def area(r):\n    return pi * r * r" in argument["prompt"]
        assert argument["context"]["range"] == {"start": {"line": 3, "character": 0},
                                                "end": {"line": 4, "character": 21}}
    assert by_title["Explain"].kind == "agentls.explain"

    only_fixes = await _actions(client, uri, selection, [], only=[types.CodeActionKind.QuickFix])
    assert only_fixes == []


@pytest.mark.asyncio(loop_scope="function")
async def test_no_code_actions_in_chat_documents(client: LanguageClient) -> None:
    uri = "agentls://chat/session-3"
    _open(client, uri, "agentls-chat", "explain this\n")
    diagnostic = types.Diagnostic(range=_range(0, 0, 0, 7), message="x")
    assert await _actions(client, uri, _range(0, 0, 0, 7), [diagnostic]) == []
    prompt_file = (_workspace(client) / "a.prompt.md").as_uri()
    _open(client, prompt_file, "markdown", "explain this\n")
    assert await _actions(client, prompt_file, _range(0, 0, 0, 7), [diagnostic]) == []


# -- the generic plumbing, in process: any enabled FeaturePlugin's completions --


class _MentionLike:
    """A stand-in third-party feature completing `@` at a word start."""

    name = "fake-mentions"
    version = "1"
    priority = 10

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        at = text.rfind("@")
        if at < 0:
            return []
        return [
            {"replacement": "@file:src/a.py", "start": at, "display": "a.py",
             "display_meta": "src/a.py", "kind": "file"},
            {"replacement": "whole", "start": 0},  # starts on an earlier line: clamped
            {"display": "no replacement: skipped"},
        ]


class _Broken:
    name = "broken"
    version = "1"
    priority = 20

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        raise RuntimeError("plugin bug")


def _in_process_server(tmp_path: Path) -> Any:
    from agentls.lsp.handlers import create_server
    from agentls.lsp.state import ServerState

    server = create_server(ServerState(environ={"AGENTLS_CONFIG_FILE": str(tmp_path / "none")}))
    server.state.host.workspace_root = tmp_path
    server.state.host.registry.register("feature", "fake-mentions", _MentionLike())
    server.state.host.registry.register("feature", "broken", _Broken())
    return server


def test_every_enabled_plugin_feeds_document_completions(tmp_path: Path) -> None:
    from pygls.workspace import TextDocument

    from agentls.lsp.suggestions.completion import document_completions

    server = _in_process_server(tmp_path)
    text = "first line\n\N{GRINNING FACE} see @sr"
    uri = "agentls://chat/x"
    document = TextDocument(uri, text, version=1, language_id="agentls-chat")
    cursor = types.Position(line=1, character=len("\N{GRINNING FACE} see @sr") + 1)  # UTF-16
    result = document_completions(server, document, cursor)
    by_label = {item.label: item for item in result.items
                if item.data["plugin"] in ("fake-mentions", "broken")}
    assert set(by_label) == {"a.py", "whole"}  # the broken plugin is skipped, not fatal
    mention = by_label["a.py"]
    assert mention.kind == types.CompletionItemKind.File
    assert mention.detail == "src/a.py"
    assert mention.text_edit.new_text == "@file:src/a.py"
    # the emoji is two UTF-16 units: "@" is at character 7 on the client's side
    assert mention.text_edit.range.start == types.Position(line=1, character=7)
    assert mention.text_edit.range.end == cursor
    assert by_label["whole"].text_edit.range.start == types.Position(line=1, character=0)


def test_disabled_features_give_no_completions_templates_or_actions(tmp_path: Path) -> None:
    from pygls.workspace import TextDocument

    from agentls.lsp.agent.code_actions import build_actions
    from agentls.lsp.suggestions.completion import feature_completions, list_templates

    server = _in_process_server(tmp_path)
    document = TextDocument((tmp_path / "a.py").as_uri(), "x = pi\n", version=1,
                            language_id="python")
    diagnostic = types.Diagnostic(range=_range(0, 4, 0, 6), message="undefined")

    def actions() -> list[str]:
        return [a.title for a in build_actions(server, document, _range(0, 0, 0, 6),
                                               [diagnostic], lambda kind: True, True)]

    assert actions() == ["Fix with agent", "Explain", "Write tests"]
    assert {i["plugin"] for i in feature_completions(server, "/ex")} == {"templates"}
    assert "fake-mentions" in {i["plugin"] for i in feature_completions(server, "@")}
    assert list_templates(server)
    server.state.host.reload_settings(
        init_options={"features": {"disabled": ["templates", "fake-mentions"]}})
    assert feature_completions(server, "/ex") == []
    assert "fake-mentions" not in {i["plugin"] for i in feature_completions(server, "@")}
    assert list_templates(server) == []
    assert actions() == []  # actions are built from templates
