"""The LSP edit applier, document lookup and diagnostics publisher against
a stand-in for the pygls server: mode choice by client capability, what
each mode sends (the applier renders, the core's approval gate decides: its
questions through the LSP approval channel, allow for session, timeouts
and approval.default are checked here too), the stale-version check,
applied:false, unsupported clients. The e2e tests (tests/e2e/test_edits.py)
cover the wire."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lsprotocol import types

from agentls.core.approval.gate import ApprovalGate, ApprovalQuestion, Clearance, PolicyAnswer
from agentls.core.editor.edits import EditRequest
from agentls.core.settings.schema import ApprovalSettings
from agentls.core.tools.contract import ToolNeed
from agentls.lsp.agent.channels import LspApprovalChannel
from agentls.lsp.agent.documents import LspDocumentLookup, diagnostics_publisher
from agentls.lsp.agent.edits import APPROVAL_ACTIONS, LspEditApplier, end_session_approvals

HANG = object()


@dataclass
class Doc:
    uri: str
    source: str
    version: int


class FakeProtocol:
    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.sent: list[tuple[str, Any]] = []
        self.notified: list[tuple[str, Any]] = []
        self._request_futures: dict[str, Any] = {}
        self.on_send: Any = None

    def send_request_async(self, method: str, params: Any, msg_id: str | None = None) -> Any:
        self.sent.append((method, params))
        if self.on_send is not None:
            self.on_send(method, params)
        future = asyncio.get_running_loop().create_future()
        self._request_futures[str(msg_id)] = future
        answer = self.answers.get(method)
        if answer is not HANG:
            future.set_result(answer(params) if callable(answer) else answer)
        return future

    def notify(self, method: str, params: Any) -> None:
        self.notified.append((method, params))

    def methods(self) -> list[str]:
        return [method for method, _ in self.sent]


@dataclass
class FakeServer:
    folder: Path
    annotations: bool = True
    document_changes: bool = True
    resources: tuple[str, ...] = ("create", "rename", "delete")
    apply_edit: bool = True
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)
    protocol: FakeProtocol = field(default_factory=FakeProtocol)
    docs: dict[str, Doc] = field(default_factory=dict)
    published: list[types.PublishDiagnosticsParams] = field(default_factory=list)

    @property
    def client_capabilities(self) -> types.ClientCapabilities:
        edit = types.WorkspaceEditClientCapabilities(
            document_changes=self.document_changes,
            resource_operations=[types.ResourceOperationKind(r) for r in self.resources],
            change_annotation_support=(types.ChangeAnnotationsSupportOptions()
                                       if self.annotations else None))
        return types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
            apply_edit=self.apply_edit, workspace_edit=edit))

    @property
    def workspace(self) -> Any:
        return SimpleNamespace(text_documents=self.docs,
                               position_encoding=types.PositionEncodingKind.Utf16)

    @property
    def state(self) -> Any:
        return SimpleNamespace(host=SimpleNamespace(
            settings=SimpleNamespace(approval=self.approval),
            workspace_folders=[self.folder], channels=None))

    def open(self, name: str, text: str, version: int = 1) -> str:
        uri = (self.folder / name).as_uri()
        self.docs[uri] = Doc(uri, text, version)
        return uri

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None:
        self.published.append(params)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    (root / "a.txt").write_text("one\ntwo\n")
    return root


def text_edit(uri: str, version: int | None, new: str = "2") -> dict[str, Any]:
    start, end = {"line": 1, "character": 0}, {"line": 1, "character": 3}
    return {"textDocument": {"uri": uri, "version": version},
            "edits": [{"range": {"start": start, "end": end}, "newText": new}]}


def request(edit_changes: list[dict[str, Any]], base: dict[str, int | None], *,
            tool: str = "edit_file", session: str = "s1", confirm: bool = False) -> EditRequest:
    return EditRequest(tool_name=tool, session_id=session, label=f"agentls: {tool} a.txt",
                       edit={"documentChanges": edit_changes}, preview="-two\n+2",
                       paths=("/x",), base_versions=base, confirm=confirm)


def clear(ls: FakeServer, gate: ApprovalGate | None = None, *, tool: str = "edit_file",
          session: str = "s1", verdict: str = "ask") -> Clearance:
    """The gate's decision on an edit, asked through the LSP channel."""
    gate = gate or ApprovalGate(LspApprovalChannel(ls))  # type: ignore[arg-type]
    need = ToolNeed("edit", ("/x",), remember=True, title=f"agentls: {tool} a.txt",
                    preview="-two\n+2")
    answer = PolicyAnswer(verdict, timeout=ls.approval.timeout_seconds,  # type: ignore[arg-type]
                          default=ls.approval.default)
    editor = LspEditApplier(ls)  # type: ignore[arg-type]
    return run(gate.clearance(ApprovalQuestion(tool, {}, need, session), answer,
                          editor_confirms=editor.confirms_in_editor()))


def applied(result: bool = True, reason: str | None = None) -> Any:
    return lambda params: types.ApplyWorkspaceEditResult(applied=result, failure_reason=reason)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 5))


# --------------------------------------------------------------------------- mode


@pytest.mark.parametrize(("configured", "annotations", "document_changes", "expected"), [
    ("auto", True, True, "annotation"),
    ("auto", False, True, "message"),
    ("auto", True, False, "message"),  # annotations need documentChanges
    ("message", True, True, "message"),
    ("annotation", True, True, "annotation"),
    ("annotation", False, True, "message"),  # never apply unasked on a client without them
])
def test_mode_follows_the_setting_and_the_client(
    ws: Path, configured: str, annotations: bool, document_changes: bool, expected: str
) -> None:
    ls = FakeServer(ws, annotations=annotations, document_changes=document_changes,
                    approval=ApprovalSettings(mode=configured))  # type: ignore[arg-type]
    assert LspEditApplier(ls).mode() == expected  # type: ignore[arg-type]


# --------------------------------------------------------------------------- annotation mode


@pytest.mark.parametrize("confirm", [True, False])
def test_annotation_mode_annotates_every_change(ws: Path, confirm: bool) -> None:
    ls = FakeServer(ws)
    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = applied()
    new_uri = (ws / "b.txt").as_uri()
    old_uri = ls.open("a.txt", "one\ntwo\n", 3)
    changes = [{"kind": "create", "uri": new_uri},
               text_edit(new_uri, None, "hello"),
               text_edit(old_uri, 3),
               {"kind": "rename", "oldUri": old_uri, "newUri": (ws / "c.txt").as_uri()}]
    outcome = run(LspEditApplier(ls).apply(  # type: ignore[arg-type]
        request(changes, {new_uri: None, old_uri: 3}, confirm=confirm)))
    assert outcome.applied and outcome.code == ""
    assert ls.protocol.methods() == [types.WORKSPACE_APPLY_EDIT]
    params = ls.protocol.sent[0][1]
    assert params.label == "agentls: edit_file a.txt"
    edit = params.edit
    create, created_text, edited, rename = edit.document_changes
    assert create.annotation_id == "agentls" and rename.annotation_id == "agentls"
    for change in (created_text, edited):
        assert all(isinstance(e, types.AnnotatedTextEdit) and e.annotation_id == "agentls"
                   for e in change.edits)
    assert edit.change_annotations == {"agentls": types.ChangeAnnotation(
        label="agentls: edit_file a.txt", needs_confirmation=confirm, description="-two\n+2")}


def test_a_rejected_annotated_edit_is_a_failure_saying_so(ws: Path) -> None:
    ls = FakeServer(ws)
    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = applied(False, "Rejected")
    uri = ls.open("a.txt", "one\ntwo\n")
    outcome = run(LspEditApplier(ls).apply(request([text_edit(uri, 1)], {uri: 1})))  # type: ignore[arg-type]
    assert not outcome.applied and outcome.code == "failed"
    assert "(Rejected)" in outcome.reason and "Nothing was written" in outcome.reason


# --------------------------------------------------------------------------- message mode


def test_annotation_mode_means_the_editor_confirms_and_nothing_is_asked_first(ws: Path) -> None:
    ls = FakeServer(ws)
    assert LspEditApplier(ls).confirms_in_editor()  # type: ignore[arg-type]
    cleared = clear(ls)
    assert cleared.allowed and cleared.confirm_in_editor and not cleared.asked
    assert ls.protocol.sent == []
    assert clear(ls, verdict="allow") == Clearance(True)


def test_message_mode_the_gate_asks_then_the_applier_sends_a_plain_edit(ws: Path) -> None:
    ls = FakeServer(ws, annotations=False)
    ls.protocol.answers[types.WINDOW_SHOW_MESSAGE_REQUEST] = types.MessageActionItem("Allow once")
    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = applied()
    uri = ls.open("a.txt", "one\ntwo\n")
    cleared = clear(ls)
    assert cleared.allowed and cleared.choice == "Allow once" and not cleared.confirm_in_editor
    asked = ls.protocol.sent[0][1]
    assert [a.title for a in asked.actions] == list(APPROVAL_ACTIONS)
    assert asked.message.startswith("agentls: edit_file a.txt: allow this change?\n\n-two")
    outcome = run(LspEditApplier(ls).apply(request([text_edit(uri, 1)], {uri: 1})))  # type: ignore[arg-type]
    assert outcome.applied
    assert ls.protocol.methods() == [types.WINDOW_SHOW_MESSAGE_REQUEST, types.WORKSPACE_APPLY_EDIT]
    edit = ls.protocol.sent[1][1].edit
    assert edit.change_annotations is None
    assert not isinstance(edit.document_changes[0].edits[0], types.AnnotatedTextEdit)


def test_a_confirmation_the_editor_can_no_longer_render_is_refused(ws: Path) -> None:
    ls = FakeServer(ws, annotations=False)
    uri = ls.open("a.txt", "one\ntwo\n")
    outcome = run(LspEditApplier(ls).apply(  # type: ignore[arg-type]
        request([text_edit(uri, 1)], {uri: 1}, confirm=True)))
    assert not outcome.applied and "Nothing was written" in outcome.reason
    assert ls.protocol.sent == []


def test_allow_for_session_is_per_session_and_tool(ws: Path) -> None:
    ls = FakeServer(ws, annotations=False)
    ls.protocol.answers[types.WINDOW_SHOW_MESSAGE_REQUEST] = types.MessageActionItem(
        "Allow for session")
    gate = ApprovalGate(LspApprovalChannel(ls))  # type: ignore[arg-type]

    def asks(**kwargs: Any) -> int:
        before = ls.protocol.methods().count(types.WINDOW_SHOW_MESSAGE_REQUEST)
        assert clear(ls, gate, **kwargs).allowed
        return ls.protocol.methods().count(types.WINDOW_SHOW_MESSAGE_REQUEST) - before

    assert asks() == 1
    assert asks() == 0  # same session, same tool
    assert asks(tool="write_file") == 1  # another tool
    assert asks(session="s2") == 1  # another session
    # never for a protected file: asked, and "for session" is not an option there
    protected = clear(ls, gate, verdict="protected")
    assert protected.asked and not protected.allowed
    gate.forget("s1")
    assert asks() == 1
    gate.forget(None)
    assert asks(session="s2") == 1


@pytest.mark.parametrize(("answer", "code", "said"), [
    (types.MessageActionItem("Deny"), "declined", "declined the edit_file call ('Deny')"),
    (None, "dismissed", "dismissed"),
])
def test_deny_or_dismiss_is_not_cleared(ws: Path, answer: Any, code: str, said: str) -> None:
    ls = FakeServer(ws, annotations=False)
    ls.protocol.answers[types.WINDOW_SHOW_MESSAGE_REQUEST] = answer
    cleared = clear(ls)
    assert not cleared.allowed and cleared.code == code and said in cleared.reason
    assert ls.protocol.methods() == [types.WINDOW_SHOW_MESSAGE_REQUEST]


@pytest.mark.parametrize(("default", "allowed"), [("deny", False), ("allow", True)])
def test_an_unanswered_request_follows_approval_default(
    ws: Path, default: str, allowed: bool
) -> None:
    ls = FakeServer(ws, annotations=False, approval=ApprovalSettings(
        timeout_seconds=0.05, default=default))  # type: ignore[arg-type]
    ls.protocol.answers[types.WINDOW_SHOW_MESSAGE_REQUEST] = HANG
    cleared = clear(ls)
    assert cleared.allowed is allowed
    if not allowed:
        assert cleared.code == "timeout" and "within 0.05s" in cleared.reason
    # the client is told to drop the prompt, and a late answer is ignored
    assert [m for m, _ in ls.protocol.notified] == [types.CANCEL_REQUEST]
    assert ls.protocol.notified[0][1].id not in ls.protocol._request_futures


def test_without_document_changes_support_text_edits_go_as_changes(ws: Path) -> None:
    ls = FakeServer(ws, annotations=False, document_changes=False, resources=())
    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = applied()
    uri = ls.open("a.txt", "one\ntwo\n")
    assert run(LspEditApplier(ls).apply(request([text_edit(uri, 1)], {uri: 1}))).applied  # type: ignore[arg-type]
    edit = ls.protocol.sent[0][1].edit
    assert edit.document_changes is None and list(edit.changes) == [uri]


# --------------------------------------------------------------------------- refusals


def test_a_client_without_apply_edit_or_resource_operations_is_unsupported(ws: Path) -> None:
    uri = (ws / "a.txt").as_uri()
    no_apply = FakeServer(ws, apply_edit=False)
    outcome = run(LspEditApplier(no_apply).apply(request([text_edit(uri, None)], {uri: None})))  # type: ignore[arg-type]
    assert outcome.code == "unsupported" and "workspace/applyEdit" in outcome.reason
    no_delete = FakeServer(ws, resources=("create",))
    outcome = run(LspEditApplier(no_delete).apply(  # type: ignore[arg-type]
        request([{"kind": "delete", "uri": uri}], {uri: None})))
    assert outcome.code == "unsupported" and "deleting files" in outcome.reason
    assert no_apply.protocol.sent == [] and no_delete.protocol.sent == []
    # the same refusals before anyone is asked (the file tools' prepare_call)
    assert LspEditApplier(no_delete).check(  # type: ignore[arg-type]
        request([{"kind": "delete", "uri": uri}], {uri: None})) is not None


def test_stale_documents_are_refused_before_anything_is_sent(ws: Path) -> None:
    ls = FakeServer(ws)
    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = applied()
    applier = LspEditApplier(ls)  # type: ignore[arg-type]
    uri = ls.open("a.txt", "one\ntwo\n", 5)
    moved = run(applier.apply(request([text_edit(uri, 4)], {uri: 4})))
    assert moved.code == "stale" and "(version 4, now 5)" in moved.reason
    assert "read_file" in moved.reason

    del ls.docs[uri]
    closed = run(applier.apply(request([text_edit(uri, 5)], {uri: 5})))
    assert closed.code == "stale" and "was closed" in closed.reason

    ls.open("a.txt", "one\ntwo\n", 1)
    opened = run(applier.apply(request([text_edit(uri, None)], {uri: None})))
    assert opened.code == "stale" and "was opened in the editor" in opened.reason

    exists = run(applier.apply(request([{"kind": "create", "uri": uri}], {})))
    assert exists.code == "stale" and "exists now" in exists.reason

    gone_uri = (ws / "gone.txt").as_uri()
    gone = run(applier.apply(request([{"kind": "delete", "uri": gone_uri}], {gone_uri: None})))
    assert gone.code == "stale" and "no longer exists" in gone.reason
    assert ls.protocol.sent == []


def test_applied_false_after_the_document_moved_is_stale(ws: Path) -> None:
    ls = FakeServer(ws)
    uri = ls.open("a.txt", "one\ntwo\n", 1)

    def editor_moves_first(params: Any) -> types.ApplyWorkspaceEditResult:
        ls.docs[uri].version = 2  # the user typed; the editor refuses the old version
        return types.ApplyWorkspaceEditResult(applied=False, failure_reason="version")

    ls.protocol.answers[types.WORKSPACE_APPLY_EDIT] = editor_moves_first
    outcome = run(LspEditApplier(ls).apply(request([text_edit(uri, 1)], {uri: 1})))  # type: ignore[arg-type]
    assert outcome.code == "stale"


# --------------------------------------------------------------------------- session end


def test_end_session_approvals_reaches_the_wired_gate(ws: Path) -> None:
    gate = ApprovalGate()
    gate.remember("s1", "edit_file")
    gate.remember("s2", "edit_file")
    ls = SimpleNamespace(state=SimpleNamespace(host=SimpleNamespace(gate=gate)))
    end_session_approvals(ls, "s1")
    assert not gate.remembered("s1", "edit_file")
    assert gate.remembered("s2", "edit_file")
    end_session_approvals(ls)
    assert not gate.remembered("s2", "edit_file")
    end_session_approvals(SimpleNamespace())  # no wiring: nothing to do


# --------------------------------------------------------------------------- lookup


def test_lookup_prefers_the_open_buffer_and_stays_in_the_workspace(
    ws: Path, tmp_path: Path
) -> None:
    ls = FakeServer(ws)
    lookup = LspDocumentLookup(ls)  # type: ignore[arg-type]
    assert lookup.position_encoding == "utf-16"
    disk = lookup(str(ws / "a.txt"))
    assert disk is not None and disk.version is None and disk.text == "one\ntwo\n"
    assert disk.uri == (ws / "a.txt").as_uri()

    os.symlink(ws / "a.txt", ws / "link.txt")
    uri = ls.open("link.txt", "unsaved\n", 7)  # opened through the symlink
    snap = lookup(str(ws / "a.txt"))
    assert snap is not None and (snap.uri, snap.text, snap.version) == (uri, "unsaved\n", 7)

    (tmp_path / "outside.txt").write_text("x")
    assert lookup(str(tmp_path / "outside.txt")) is None
    assert lookup(str(ws / "missing.txt")) is None
    assert lookup(str(ws)) is None  # a folder


# --------------------------------------------------------------------------- diagnostics


def test_diagnostics_are_published_with_version_and_invalid_ones_dropped(ws: Path) -> None:
    ls = FakeServer(ws)
    publish = diagnostics_publisher(ls)  # type: ignore[arg-type]
    good = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}},
            "message": "F401 unused import", "severity": 2, "source": "agentls", "code": "F401"}
    publish("file:///x.py", [good, {"message": "no range"}], 4)
    publish("file:///x.py", [], None)
    first, cleared = ls.published
    assert first.uri == "file:///x.py" and first.version == 4
    [diagnostic] = first.diagnostics
    assert diagnostic.message == "F401 unused import" and diagnostic.source == "agentls"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert cleared.diagnostics == [] and cleared.version is None
