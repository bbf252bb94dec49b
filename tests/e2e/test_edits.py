"""File-changing tools over real LSP: the server runs as a subprocess, the
scripted provider issues the tool calls (its `record` file shows what the
model was sent next), and the test client plays the editor: it keeps its own
copy of the open documents, answers `workspace/applyEdit` and
`window/showMessageRequest` as a user would, applies accepted edits to its
copy (or to the disk for files it does not have open) and tells the server
with textDocument/didChange, like an editor does.

Both approval modes are covered: `annotation` (the client advertises
changeAnnotationSupport; it decides per needsConfirmation) and `message`
(no annotation support: showMessageRequest, then a plain applyEdit).

Covered: approve -> the buffer changes exactly; reject / Deny / timeout /
applied:false -> nothing changes and the next model call sees the refusal;
a version race (the buffer moves while the user is asked, or right before
the editor applies) -> refused as stale; "Allow for session" (not asked
again in the session, asked again in a new one); a new file (CreateFile),
delete and rename where the client supports resource operations, and
refused where it does not; no workspace folder -> denied with the message.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient
from pytest_lsp.client import make_test_lsp_client

from tests.e2e.helpers import plain, server_env

SERVER = [sys.executable, "-m", "agentls"]
TIMEOUT = 20.0

HANG = "<never answer>"


# --------------------------------------------------------------------------- the editor


def _offset(text: str, position: types.Position) -> int:
    """An LSP position (UTF-16 code units) -> an offset in `text`."""
    starts = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
    index = starts[position.line]
    units = 0
    while units < position.character:
        units += 2 if ord(text[index]) > 0xFFFF else 1
        index += 1
    assert units == position.character, "a position inside a surrogate pair"
    return index


def apply_text_edits(text: str, edits: Any) -> str:
    spans = sorted(((_offset(text, e.range.start), _offset(text, e.range.end), e.new_text)
                    for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@dataclass
class Editor:
    """The client side: open documents and the user's answers."""

    client: LanguageClient
    workspace: Path | None
    docs: dict[str, list[Any]] = field(default_factory=dict)  # uri -> [version, text]
    answer: str | None = "Allow once"  # showMessageRequest; None dismisses; HANG never answers
    confirm: bool = True  # annotation mode: accept changes that need confirmation
    refuse: str | None = None  # applyEdit answers applied:false with this reason
    before_apply: Callable[[], None] | None = None  # runs first in the applyEdit handler
    while_asking: Callable[[], None] | None = None  # runs when showMessageRequest arrives
    asked: list[types.ShowMessageRequestParams] = field(default_factory=list)
    edits: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    # -- documents -------------------------------------------------------------------
    def uri(self, name: str) -> str:
        assert self.workspace is not None
        return (self.workspace / name).as_uri()

    def open(self, name: str, text: str) -> str:
        uri = self.uri(name)
        self.docs[uri] = [1, text]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="plaintext", version=1,
                                                 text=text)))
        return uri

    def change(self, uri: str, text: str) -> None:
        self.docs[uri][0] += 1
        self.docs[uri][1] = text
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri,
                                                                version=self.docs[uri][0]),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    def close(self, uri: str) -> None:
        del self.docs[uri]
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))

    def text(self, name: str) -> str:
        return str(self.docs[self.uri(name)][1])

    # -- server -> client requests -------------------------------------------------------
    async def on_show_message_request(
        self, params: types.ShowMessageRequestParams
    ) -> types.MessageActionItem | None:
        self.asked.append(params)
        if self.while_asking is not None:
            self.while_asking()
        if self.answer == HANG:
            await self.release.wait()
            return None
        return types.MessageActionItem(title=self.answer) if self.answer else None

    def on_apply_edit(self, params: types.ApplyWorkspaceEditParams
                      ) -> types.ApplyWorkspaceEditResult:
        self.edits.append(params)
        if self.before_apply is not None:
            self.before_apply()
        if self.refuse is not None:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=self.refuse)
        edit = params.edit
        annotations = edit.change_annotations or {}
        if any(a.needs_confirmation for a in annotations.values()) and not self.confirm:
            return types.ApplyWorkspaceEditResult(applied=False,
                                                  failure_reason="Rejected by the user")
        changes = list(edit.document_changes or [])
        for change in changes:  # all or nothing: check versions first
            if isinstance(change, types.TextDocumentEdit):
                version = change.text_document.version
                doc = self.docs.get(change.text_document.uri)
                if version is not None and (doc is None or doc[0] != version):
                    return types.ApplyWorkspaceEditResult(
                        applied=False, failure_reason="The document version changed")
        for change in changes:
            self.apply_change(change)
        for uri, text_edits in (edit.changes or {}).items():
            self.apply_text(uri, text_edits)
        return types.ApplyWorkspaceEditResult(applied=True)

    def apply_change(self, change: Any) -> None:
        if isinstance(change, types.TextDocumentEdit):
            self.apply_text(change.text_document.uri, change.edits)
        elif isinstance(change, types.CreateFile):
            path = _path(change.uri)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        elif isinstance(change, types.DeleteFile):
            _path(change.uri).unlink()
            if change.uri in self.docs:
                self.close(change.uri)
        elif isinstance(change, types.RenameFile):
            target = _path(change.new_uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            _path(change.old_uri).rename(target)
            if change.old_uri in self.docs:
                text = self.docs[change.old_uri][1]
                self.close(change.old_uri)
                self.open(target.relative_to(self.workspace or Path("/")).as_posix(), text)

    def apply_text(self, uri: str, text_edits: Any) -> None:
        if uri in self.docs:  # an open buffer: change it and tell the server
            self.change(uri, apply_text_edits(self.docs[uri][1], text_edits))
        else:  # not open: this editor writes the file
            path = _path(uri)
            path.write_text(apply_text_edits(path.read_text(), text_edits))


def _path(uri: str) -> Path:
    from pygls.uris import to_fs_path

    return Path(to_fs_path(uri) or "")


def capabilities(*, annotations: bool, resources: bool = True, apply_edit: bool = True
                 ) -> types.ClientCapabilities:
    edit = types.WorkspaceEditClientCapabilities(
        document_changes=True,
        resource_operations=[types.ResourceOperationKind.Create,
                             types.ResourceOperationKind.Rename,
                             types.ResourceOperationKind.Delete] if resources else None,
        change_annotation_support=(types.ChangeAnnotationsSupportOptions(groups_on_label=True)
                                   if annotations else None),
    )
    return types.ClientCapabilities(
        window=types.WindowClientCapabilities(
            show_message=types.ShowMessageRequestClientCapabilities()),
        workspace=types.WorkspaceClientCapabilities(apply_edit=apply_edit, workspace_edit=edit))


@asynccontextmanager
async def editor_session(
    workspace: Path | None, state_dir: Path, settings: dict[str, Any],
    caps: types.ClientCapabilities,
) -> AsyncIterator[Editor]:
    client = make_test_lsp_client()
    editor = Editor(client, workspace)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return editor.on_apply_edit(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def show_message_request(
        params: types.ShowMessageRequestParams,
    ) -> types.MessageActionItem | None:
        return await editor.on_show_message_request(params)

    @client.feature("agentls/message")
    def on_message(params: Any) -> None:
        editor.events.append(("message", plain(params)))

    await client.start_io(*SERVER, env=server_env(AGENTLS_STATE_DIR=str(state_dir)))
    stopped = False
    try:
        folders = ([types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)]
                   if workspace is not None else None)
        await asyncio.wait_for(client.initialize_session(types.InitializeParams(
            capabilities=caps, process_id=None,
            root_uri=workspace.as_uri() if workspace is not None else None,
            workspace_folders=folders, initialization_options={"agentls": settings},
        )), TIMEOUT)
        yield editor
        editor.release.set()
        await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
        stopped = True
    finally:
        editor.release.set()
        if not stopped and client._server is not None and client._server.returncode is None:
            client._server.kill()
        await asyncio.wait_for(client.stop(), TIMEOUT)


async def chat(editor: Editor, **params: Any) -> dict[str, Any]:
    result = await asyncio.wait_for(
        editor.client.protocol.send_request_async("agentls/chat", params), TIMEOUT)
    answer: dict[str, Any] = plain(result)
    return answer


def scripted(tmp_path: Path, name: str, responses: list[dict[str, Any]],
             **settings: Any) -> tuple[dict[str, Any], Path]:
    record = tmp_path / f"{name}.jsonl"
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"responses": responses, "record": str(record)}))
    return {"provider": "scripted", "providerOptions": {"script": str(script)}, **settings}, record


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def call(tool: str, call_id: str = "c1", **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


def tool_messages(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in result["messages"] if m["role"] == "tool"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("disk line 1\ndisk line 2\n")
    return root


MODES = ["annotation", "message"]


# --------------------------------------------------------------------------- approve


@pytest.mark.parametrize("mode", MODES)
async def test_an_approved_edit_changes_the_open_buffer_exactly(
    tmp_path: Path, workspace: Path, mode: str
) -> None:
    buffer = "alpha 😀 one\r\nbeta two\r\ngamma three\r\n"  # unsaved, CRLF, non-BMP
    settings, record = scripted(tmp_path, "approve", [
        call("edit_file", path="notes.txt", edits=[
            {"old_string": "beta two", "new_string": "beta 2"},
            {"old_string": "😀 one", "new_string": "😀 ONE 🎉"}]),
        call("read_file", "c2", path="notes.txt"),
        {"text": "Done."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        uri = ed.open("notes.txt", buffer)
        result = await chat(ed, prompt="Fix the notes")
        assert result["status"] == "completed", result
        expected = "alpha 😀 ONE 🎉\r\nbeta 2\r\ngamma three\r\n"
        assert ed.text("notes.txt") == expected
        assert (workspace / "notes.txt").read_text() == "disk line 1\ndisk line 2\n"

        edit_result, read_result = tool_messages(result)
        output = edit_result["toolResult"]["output"]
        assert edit_result["toolResult"]["success"] is True
        assert output["old_text"] == buffer and output["new_text"] == expected
        assert output["changed_lines"] == [[0, 1]]
        assert output["uri"] == uri and output["applied"] is True
        assert output["path"] == str((workspace / "notes.txt").resolve())
        # the server's view followed the editor (didChange), so read_file sees it
        assert read_result["toolResult"]["output"]["content"] == expected
        assert read_result["toolResult"]["output"]["source"] == "buffer"

        [sent] = ed.edits
        assert sent.label == "agentls: edit_file notes.txt"
        [change] = sent.edit.document_changes or []
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.version == 1
        if mode == "annotation":
            assert ed.asked == []
            annotation = (sent.edit.change_annotations or {})["agentls"]
            assert annotation.needs_confirmation is True
            assert annotation.label == "agentls: edit_file notes.txt"
            assert "-beta two" in (annotation.description or "")
            assert all(isinstance(e, types.AnnotatedTextEdit) and e.annotation_id == "agentls"
                       for e in change.edits)
        else:
            [asked] = ed.asked
            assert [a.title for a in asked.actions or []] == [
                "Allow once", "Allow for session", "Deny"]
            assert "agentls: edit_file notes.txt" in asked.message
            assert "+beta 2" in asked.message
            assert sent.edit.change_annotations is None
            assert all(not isinstance(e, types.AnnotatedTextEdit) for e in change.edits)
    # the model saw the edit's summary and then the new buffer
    calls = recorded(record)
    assert calls[1]["messages"][-1]["content"] == "Edited notes.txt (changed lines: 1-2)."
    assert calls[2]["messages"][-1]["content"] == expected


# --------------------------------------------------------------------------- refusals


REFUSALS = [
    pytest.param("annotation", {"confirm": False}, "failed", "did not apply the change",
                 id="annotation-rejected"),
    pytest.param("message", {"answer": "Deny"}, "declined", "The user declined",
                 id="message-deny"),
    pytest.param("message", {"answer": None}, "declined", "dismissed", id="message-dismissed"),
    pytest.param("message", {"answer": HANG}, "timeout", "did not answer", id="message-timeout"),
    pytest.param("message", {"refuse": "Disk full"}, "failed", "Disk full",
                 id="message-applied-false"),
]


@pytest.mark.parametrize(("mode", "user", "code", "said"), REFUSALS)
async def test_a_refused_edit_changes_nothing_and_the_agent_is_told(
    tmp_path: Path, workspace: Path, mode: str, user: dict[str, Any], code: str, said: str
) -> None:
    settings, record = scripted(
        tmp_path, "refuse",
        [call("edit_file", path="notes.txt", old_string="two", new_string="2"),
         {"text": "Understood."}],
        approval={"timeoutSeconds": 0.5})
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        for key, value in user.items():
            setattr(ed, key, value)
        ed.open("notes.txt", "one\ntwo\n")
        result = await chat(ed, prompt="Change it")
        assert result["status"] == "completed", result
        assert ed.text("notes.txt") == "one\ntwo\n"
        [tool] = tool_messages(result)
        error = tool["toolResult"]["error"]
        assert tool["toolResult"]["success"] is False
        assert error["code"] == code and said in error["message"]
        assert "Nothing was written" in error["message"]
        if code in ("declined", "timeout"):
            assert ed.edits == []  # asked first, never sent
    seen = recorded(record)[1]["messages"][-1]
    assert seen["role"] == "tool"
    assert seen["content"].startswith("Error: edit_file notes.txt: ") and said in seen["content"]


# --------------------------------------------------------------------------- version races


async def test_a_buffer_changed_while_the_user_is_asked_is_refused_as_stale(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "race", [
        call("edit_file", path="notes.txt", old_string="two", new_string="2"),
        {"text": "I will read it again."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        uri = ed.open("notes.txt", "one\ntwo\n")
        ed.while_asking = lambda: ed.change(uri, "one\ntwo\nthree typed by the user\n")
        result = await chat(ed, prompt="Change it")
        assert len(ed.asked) == 1 and ed.edits == []  # approved, but never sent
        assert ed.text("notes.txt") == "one\ntwo\nthree typed by the user\n"
        error = tool_messages(result)[0]["toolResult"]["error"]
        assert error["code"] == "stale"
        assert "changed in the editor since it was read (version 1, now 2)" in error["message"]
    assert "read_file" in recorded(record)[1]["messages"][-1]["content"]


async def test_a_buffer_changed_right_before_the_editor_applies_is_refused_as_stale(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "race2", [
        call("edit_file", path="notes.txt", old_string="two", new_string="2"),
        {"text": "ok"},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        uri = ed.open("notes.txt", "one\ntwo\n")
        ed.before_apply = lambda: ed.change(uri, "one\ntwo\nuser typing\n")
        result = await chat(ed, prompt="Change it")
        assert len(ed.edits) == 1
        assert ed.text("notes.txt") == "one\ntwo\nuser typing\n"
        error = tool_messages(result)[0]["toolResult"]["error"]
        assert error["code"] == "stale" and "read_file" in error["message"]


# --------------------------------------------------------------------------- allow for session


async def test_allow_for_session_is_remembered_per_session(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "session", [
        call("edit_file", path="notes.txt", old_string="one", new_string="1"),
        call("edit_file", "c2", path="notes.txt", old_string="two", new_string="2"),
        {"text": "Both done."},
        call("edit_file", "c3", path="notes.txt", old_string="three", new_string="3"),
        {"text": "Asked again in the new session."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False)) as ed:
        ed.open("notes.txt", "one\ntwo\nthree\n")
        ed.answer = "Allow for session"
        first = await chat(ed, prompt="Number the first two lines")
        assert first["status"] == "completed"
        assert [t["toolResult"]["success"] for t in tool_messages(first)] == [True, True]
        assert len(ed.asked) == 1  # the second edit of the session was not asked
        assert ed.text("notes.txt") == "1\n2\nthree\n"

        ed.answer = "Deny"
        second = await chat(ed, prompt="And the third, in a new session")
        assert second["sessionId"] != first["sessionId"]
        assert len(ed.asked) == 2  # a new session is asked again
        assert tool_messages(second)[0]["toolResult"]["error"]["code"] == "declined"
        assert ed.text("notes.txt") == "1\n2\nthree\n"


# --------------------------------------------------------------------------- resources


@pytest.mark.parametrize("mode", MODES)
async def test_write_file_creates_a_new_file(tmp_path: Path, workspace: Path, mode: str) -> None:
    settings, _ = scripted(tmp_path, "create", [
        call("write_file", path="src/new module.txt", content="first\nsecond 😀\n"),
        {"text": "Created."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=mode == "annotation")) as ed:
        result = await chat(ed, prompt="Create it")
        [tool] = tool_messages(result)
        assert tool["toolResult"]["success"] is True, tool
        output = tool["toolResult"]["output"]
        assert output["old_text"] is None and output["changed_lines"] == [[0, 1]]
        assert (workspace / "src" / "new module.txt").read_text() == "first\nsecond 😀\n"
        [sent] = ed.edits
        create, text_edit = sent.edit.document_changes or []
        assert isinstance(create, types.CreateFile)
        assert create.uri == (workspace / "src" / "new module.txt").as_uri()
        assert isinstance(text_edit, types.TextDocumentEdit)
        assert text_edit.text_document.version is None
        if mode == "annotation":
            assert create.annotation_id == "agentls"
            assert (sent.edit.change_annotations or {})["agentls"].needs_confirmation
        assert sent.label == "agentls: write_file src/new module.txt"


async def test_delete_and_rename_where_the_editor_supports_them(
    tmp_path: Path, workspace: Path
) -> None:
    (workspace / "old.txt").write_text("keep me\n")
    (workspace / "gone.txt").write_text("bye\n")
    settings, _ = scripted(tmp_path, "resources", [
        call("rename_file", path="old.txt", new_path="moved/new.txt"),
        call("delete_file", "c2", path="gone.txt"),
        {"text": "Done."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        ed.open("old.txt", "keep me\n")
        result = await chat(ed, prompt="Tidy up")
        renamed, deleted = tool_messages(result)
        assert renamed["toolResult"]["success"] and deleted["toolResult"]["success"]
        assert not (workspace / "old.txt").exists() and not (workspace / "gone.txt").exists()
        assert (workspace / "moved" / "new.txt").read_text() == "keep me\n"
        assert ed.text("moved/new.txt") == "keep me\n"  # the editor re-opened it
        output = renamed["toolResult"]["output"]
        assert output["old_relative_path"] == "old.txt"
        assert output["relative_path"] == "moved/new.txt"
        rename, delete = ((e.edit.document_changes or [None])[0] for e in ed.edits)
        assert isinstance(rename, types.RenameFile) and rename.annotation_id == "agentls"
        assert isinstance(delete, types.DeleteFile) and delete.annotation_id == "agentls"


async def test_resource_operations_the_editor_lacks_are_refused_unasked(
    tmp_path: Path, workspace: Path
) -> None:
    settings, record = scripted(tmp_path, "noresources", [
        call("delete_file", path="notes.txt"),
        {"text": "Cannot."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False, resources=False)) as ed:
        result = await chat(ed, prompt="Delete it")
        error = tool_messages(result)[0]["toolResult"]["error"]
        assert error["code"] == "unsupported" and "deleting files" in error["message"]
        assert ed.asked == [] and ed.edits == []
        assert (workspace / "notes.txt").exists()
    assert "deleting files" in recorded(record)[1]["messages"][-1]["content"]


async def test_a_client_without_apply_edit_is_told_unsupported(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "noapply", [
        call("write_file", path="notes.txt", content="new\n"),
        {"text": "Cannot."},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=False, apply_edit=False)) as ed:
        result = await chat(ed, prompt="Write it")
        error = tool_messages(result)[0]["toolResult"]["error"]
        assert error["code"] == "unsupported" and "workspace/applyEdit" in error["message"]
        assert ed.asked == [] and ed.edits == []
        assert (workspace / "notes.txt").read_text() == "disk line 1\ndisk line 2\n"


async def test_an_unopened_file_is_edited_from_disk_with_a_null_version(
    tmp_path: Path, workspace: Path
) -> None:
    settings, _ = scripted(tmp_path, "disk", [
        call("edit_file", path="notes.txt", old_string="line 2", new_string="line two"),
        {"text": "ok"},
    ])
    async with editor_session(workspace, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Edit")
        assert tool_messages(result)[0]["toolResult"]["success"] is True
        [sent] = ed.edits
        [change] = sent.edit.document_changes or []
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.version is None
        assert (workspace / "notes.txt").read_text() == "disk line 1\ndisk line two\n"


# --------------------------------------------------------------------------- no workspace


async def test_without_a_workspace_folder_file_changes_are_denied(tmp_path: Path) -> None:
    settings, record = scripted(tmp_path, "nows", [
        call("write_file", path=str(tmp_path / "x.txt"), content="hi\n"),
        {"text": "Please open a folder."},
    ])
    async with editor_session(None, tmp_path / "state", settings,
                              capabilities(annotations=True)) as ed:
        result = await chat(ed, prompt="Write x")
        [tool] = tool_messages(result)
        assert tool["toolResult"]["success"] is False
        assert "open a folder" in tool["toolResult"]["error"]["message"]
        assert ed.asked == [] and ed.edits == []
        assert not (tmp_path / "x.txt").exists()
    assert "open a folder" in recorded(record)[1]["messages"][-1]["content"]
