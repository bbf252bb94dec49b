"""The linter loop over real LSP: the server runs as a subprocess with the
scripted provider (its `record` file shows what the model was sent), the
test client plays an editor whose user approves every edit, and ruff (the
default linter) checks what the agent wrote.

Covered, in both approval modes: the model writes a Python file with an
unused import and an undefined name; the editor applies it (an unsaved
buffer, announced with didOpen/didChange); the findings are injected and the
NEXT model call carries them (path:line:col code message); the user is
warned with window/showMessage; textDocument/publishDiagnostics carries the
same findings with source "agentls"; the model's follow-up edit fixes them,
the diagnostics are cleared, and the turn completes. Also: an edit to an
open buffer whose unsaved text differs from the disk is linted as the
buffer, and findings that were there before the edit, away from it, are not
reported.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from agentls.features.linters import default_linters
from tests.e2e.helpers import initialized, plain, server_env

pytestmark = pytest.mark.skipif(not default_linters(), reason="ruff is not installed")

TIMEOUT = 30.0

BAD = "import os\n\n\ndef main():\n    print(undefined_name)\n"
GOOD = "def main():\n    print('hello')\n"


# --------------------------------------------------------------------------- the editor


def _offset(text: str, position: types.Position) -> int:
    """An LSP position (UTF-16 code units) -> an offset in `text`."""
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
    if position.line >= len(starts):
        return len(text)
    index, units = starts[position.line], 0
    while units < position.character and index < len(text):
        units += 2 if ord(text[index]) > 0xFFFF else 1
        index += 1
    return index


@dataclass
class Editor:
    """Open buffers (uri -> [version, text]) and a user who approves."""

    client: LanguageClient
    workspace: Path
    docs: dict[str, list[Any]] = field(default_factory=dict)
    diagnostics: list[tuple[str, list[types.Diagnostic], int | None]] = field(
        default_factory=list)
    asked: list[types.ShowMessageRequestParams] = field(default_factory=list)
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)

    def open(self, name: str, text: str) -> str:
        uri = (self.workspace / name).as_uri()
        self.docs[uri] = [1, text]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                                 text=text)))
        return uri

    def text(self, name: str) -> str:
        return str(self.docs[(self.workspace / name).as_uri()][1])

    def apply_edit(self, params: types.ApplyWorkspaceEditParams
                   ) -> types.ApplyWorkspaceEditResult:
        """Apply like an editor: files it creates exist (empty) on disk, text
        goes into buffers (opened when needed) that stay unsaved."""
        self.edits.append(params)
        for change in params.edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                path = Path(self.client_path(change.uri))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            elif isinstance(change, types.TextDocumentEdit):
                uri = change.text_document.uri
                if uri not in self.docs:
                    self.open(Path(self.client_path(uri)).relative_to(self.workspace)
                              .as_posix(), Path(self.client_path(uri)).read_text())
                version, text = self.docs[uri]
                spans = sorted(((_offset(text, e.range.start), _offset(text, e.range.end),
                                 e.new_text) for e in change.edits), reverse=True)
                for start, end, new in spans:
                    text = text[:start] + new + text[end:]
                self.docs[uri] = [version + 1, text]
                self.client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri,
                                                                        version=version + 1),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
            else:
                raise AssertionError(f"unexpected change {change!r}")
        return types.ApplyWorkspaceEditResult(applied=True)

    @staticmethod
    def client_path(uri: str) -> str:
        from pygls.uris import to_fs_path

        return to_fs_path(uri) or ""

    def published(self, name: str) -> list[list[types.Diagnostic]]:
        uri = (self.workspace / name).as_uri()
        return [diagnostics for u, diagnostics, _ in self.diagnostics if u == uri]


@asynccontextmanager
async def editor_session(workspace: Path, state_dir: Path, settings: dict[str, Any],
                         *, annotations: bool) -> AsyncIterator[Editor]:
    client = make_test_lsp_client()
    editor = Editor(client, workspace)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return editor.apply_edit(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def show_message_request(params: types.ShowMessageRequestParams) -> types.MessageActionItem:
        editor.asked.append(params)
        return types.MessageActionItem(title="Allow once")

    # pytest-lsp keeps only the latest diagnostics per URI; keep them all.
    features = client.protocol.fm.features
    keep_latest = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def publish_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        editor.diagnostics.append((params.uri, list(params.diagnostics), params.version))
        keep_latest(client, params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish_diagnostics

    caps = types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            show_message=types.ShowMessageRequestClientCapabilities()),
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(
                document_changes=True,
                resource_operations=[types.ResourceOperationKind.Create],
                change_annotation_support=(
                    types.ChangeAnnotationsSupportOptions() if annotations else None))),
        text_document=types.TextDocumentClientCapabilities(
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                version_support=True)))
    async with initialized(client, workspace, settings, caps, timeout=TIMEOUT,
                           env=server_env(AGENTLS_STATE_DIR=str(state_dir))):
        yield editor


def scripted(tmp_path: Path, responses: list[dict[str, Any]], **settings: Any
             ) -> tuple[dict[str, Any], Path]:
    record = tmp_path / "calls.jsonl"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    return {"provider": "scripted", "providerOptions": {"script": str(script)}, **settings}, record


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def call(tool: str, call_id: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"id": call_id, "name": tool, "arguments": arguments}]


def linter_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"]
            if m["role"] == "system" and (m.get("metadata") or {}).get("hook_name") == "linters"]


async def chat(editor: Editor, prompt: str) -> dict[str, Any]:
    result = await asyncio.wait_for(
        editor.client.protocol.send_request_async("agentls/chat", {"prompt": prompt}), TIMEOUT)
    answer: dict[str, Any] = plain(result)
    return answer


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("mode", ["annotation", "message"])
async def test_a_linter_finding_is_fed_back_and_the_agent_fixes_it(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    settings, record = scripted(tmp_path, [
        {"text": "Writing app.py.", "tool_calls": call("write_file", "c1", path="app.py",
                                                        content=BAD)},
        {"text": "Fixing what ruff found.",
         "tool_calls": call("write_file", "c2", path="app.py", content=GOOD)},
        {"text": "Done."},
    ], approval={"mode": mode})
    async with editor_session(workspace, tmp_path / "state", settings,
                              annotations=mode == "annotation") as ed:
        result = await chat(ed, "Write app.py")
        assert result["status"] == "completed", result
        assert ed.text("app.py") == GOOD  # the buffer; the agent never wrote to disk
        assert (workspace / "app.py").read_text() == ""
        assert len(ed.edits) == 2
        if mode == "message":
            assert len(ed.asked) == 2
        else:
            assert ed.asked == []
            annotation = (ed.edits[0].edit.change_annotations or {})["agentls"]
            assert annotation.needs_confirmation is True

        # The next model call after the bad edit carries the findings...
        calls = recorded(record)
        assert len(calls) == 3
        assert linter_messages(calls[0]) == []
        (injected,) = linter_messages(calls[1])
        # (the error only: an unused import is the editor's to show, not a task)
        assert "ruff found 1 problem in app.py after your write_file" in injected
        assert "F401" not in injected
        assert "app.py:5:11: F821 Undefined name `undefined_name`" in injected
        # ...after the tool result, and it stays in the history (not ephemeral)
        roles = [m["role"] for m in calls[1]["messages"]]
        assert roles[-2:] == ["tool", "system"]
        assert linter_messages(calls[2]) == [injected]  # the fix adds nothing new

        # The user was told, at warning level
        warnings = [p.message for p in ed.client.messages
                    if p.type == types.MessageType.Warning]
        assert "ruff found 2 problems in app.py after the agent's edit" in warnings

        # The editor showed exactly those findings, then cleared them
        first, last = ed.published("app.py")
        assert [(d.code, d.range.start.line, d.range.start.character, d.source, d.severity)
                for d in first] == [
            ("F401", 0, 7, "agentls", types.DiagnosticSeverity.Error),
            ("F821", 4, 10, "agentls", types.DiagnosticSeverity.Error)]
        assert last == []

        # The stored injection is part of the session the client was sent
        hook_messages = [m for m in result["messages"]
                         if (m.get("metadata") or {}).get("source") == "hook"]
        assert [m["content"] for m in hook_messages] == [injected]


async def test_the_unsaved_buffer_is_linted_and_old_findings_stay_quiet(
    tmp_path: Path, workspace: Path
) -> None:
    # On disk: an unused import (F401). In the editor (unsaved): other text
    # with an old problem away from the edit (F811 redefinition).
    (workspace / "lib.py").write_text("import sys\n")
    buffer = "def f():\n    return 1\n\n\ndef f():\n    return 2\n\n\nVALUE = 1\n"
    settings, record = scripted(tmp_path, [
        {"tool_calls": call("edit_file", "c1", path="lib.py", old_string="VALUE = 1",
                            new_string="VALUE = missing")},
        {"text": "Noted."},
    ], approval={"mode": "message"})
    async with editor_session(workspace, tmp_path / "state", settings, annotations=False) as ed:
        uri = ed.open("lib.py", buffer)
        result = await chat(ed, "Change VALUE")
        assert result["status"] == "completed", result
        (injected,) = linter_messages(recorded(record)[1])
        assert "lib.py:9:9: F821 Undefined name `missing`" in injected
        assert "F401" not in injected  # the disk's problem, not the buffer's
        assert "F811" not in injected  # there before the edit, on lines it did not touch
        (diagnostics,) = ed.published("lib.py")
        assert [d.code for d in diagnostics] == ["F821"]
        ((_, _, version),) = [d for d in ed.diagnostics if d[0] == uri]
        assert version == 2  # the buffer version the findings belong to
