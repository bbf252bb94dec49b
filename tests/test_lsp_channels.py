"""The LSP implementations of the core's approval, display and observer
interfaces, against a stand-in for the pygls server (what they send, not
how pygls frames it; the e2e chat tests cover the wire)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from agentls.core.approval.gate import (
    EDIT_OPTIONS,
    ApprovalGate,
    ApprovalQuestion,
    ApprovalRequest,
    PolicyAnswer,
    options_from_labels,
)
from agentls.core.tools.contract import ToolNeed
from agentls.core.types.conversation import Message
from agentls.lsp.agent.channels import (
    LspApprovalChannel,
    LspDisplayChannel,
    LspTurnObserver,
    open_document_lookup,
)


@dataclass
class FakeDocument:
    uri: str
    source: str


@dataclass
class FakeProgress:
    sent: list[tuple[str, Any, Any]] = field(default_factory=list)
    tokens: dict[Any, Any] = field(default_factory=dict)

    def begin(self, token: Any, value: Any) -> None:
        self.tokens[token] = object()
        self.sent.append(("begin", token, value))

    def report(self, token: Any, value: Any) -> None:
        self.sent.append(("report", token, value))

    def end(self, token: Any, value: Any) -> None:
        self.sent.append(("end", token, value))


class FakeServer:
    def __init__(self, answer: str | None = "Allow") -> None:
        self.answer = answer
        self.requests: list[types.ShowMessageRequestParams] = []
        self.shown: list[types.ShowMessageParams] = []
        self.notified: list[tuple[str, Any]] = []
        self.work_done_progress = FakeProgress()
        self.protocol = self
        self.workspace = self
        self.text_documents: dict[str, FakeDocument] = {}

    def send_request_async(self, method: str, params: Any, msg_id: str) -> Any:
        assert method == types.WINDOW_SHOW_MESSAGE_REQUEST
        self.requests.append(params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(types.MessageActionItem(title=self.answer) if self.answer else None)
        return future

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.shown.append(params)

    def notify(self, method: str, params: Any) -> None:
        self.notified.append((method, params))


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 5))


def test_approval_asks_with_the_options_as_actions() -> None:
    ls = FakeServer("Allow for session")
    gate = ApprovalGate(LspApprovalChannel(ls))  # type: ignore[arg-type]
    request = ApprovalRequest(prompt="Run `make`?", options=EDIT_OPTIONS,
                              tool_name="run_command", session_id="s1")
    decision = run(gate.ask(request))
    assert decision.allowed and decision.choice == "Allow for session"
    assert gate.remembered("s1", "run_command") and not gate.remembered("s2", "run_command")
    sent = ls.requests[0]
    assert sent.message == "Run `make`?"
    assert [a.title for a in sent.actions or []] == ["Allow once", "Allow for session", "Deny"]


def test_dismissed_denied_or_unoffered_answers_are_a_deny() -> None:
    # Was: any title not starting with deny/reject/no/cancel counted as allowed.
    for answer in (None, "Deny", "Sure, go ahead", "allow once ", "Allow"):
        channel = LspApprovalChannel(FakeServer(answer))  # type: ignore[arg-type]
        decision = run(ApprovalGate(channel).ask(
            ApprovalRequest(prompt="?", options=EDIT_OPTIONS, tool_name="t", session_id="s")))
        assert not decision.allowed, answer


def test_hook_labels_become_typed_options() -> None:
    options = options_from_labels(["Allow once", "Yes, run it", "No", "Maybe later", "Deny"])
    assert [o.allows for o in options] == [True, True, False, False, False]
    ls = FakeServer("Maybe later")
    decision = run(ApprovalGate(LspApprovalChannel(ls)).ask(  # type: ignore[arg-type]
        ApprovalRequest(prompt="?", options=options)))
    assert not decision.allowed and decision.choice == "Maybe later"


def test_protected_requests_are_not_remembered_and_need_an_explicit_yes() -> None:
    class Silent:
        async def request_approval(self, request: ApprovalRequest) -> str | None:
            await asyncio.sleep(10)
            return None

    gate = ApprovalGate(LspApprovalChannel(FakeServer("Allow for session")))  # type: ignore[arg-type]
    protected = ApprovalRequest(prompt="?", options=EDIT_OPTIONS, tool_name="write_file",
                                session_id="s", protected=True)
    assert run(gate.ask(protected)).allowed
    assert not gate.remembered("s", "write_file")
    question = ApprovalQuestion("write_file", {}, ToolNeed("edit", remember=True), "s")
    assert run(gate.clearance(question, PolicyAnswer("protected"))).asked
    gate.remember("s", "write_file")
    assert run(gate.clearance(question, PolicyAnswer("protected"))).asked  # memory never answers it
    remembered = run(gate.clearance(question, PolicyAnswer("ask")))
    assert remembered.allowed and not remembered.asked
    assert run(gate.clearance(question, PolicyAnswer("something else"))).asked  # type: ignore[arg-type]
    # approval.default allow applies to ordinary calls, never to protected ones
    silent = ApprovalGate(Silent())
    quick = ApprovalRequest(prompt="?", timeout=0.05, default="allow", tool_name="x")
    assert run(silent.ask(quick)).allowed
    denied = run(silent.ask(ApprovalRequest(prompt="?", timeout=0.05, default="allow",
                                            tool_name="x", protected=True)))
    assert not denied.allowed and denied.code == "timeout"


def test_display_maps_levels_to_message_types() -> None:
    ls = FakeServer()
    display = LspDisplayChannel(ls)  # type: ignore[arg-type]
    for level in ("info", "warning", "error"):
        run(display.show_message(f"a {level}", level))  # type: ignore[arg-type]
    assert [(m.type, m.message) for m in ls.shown] == [
        (types.MessageType.Info, "a info"), (types.MessageType.Warning, "a warning"),
        (types.MessageType.Error, "a error")]


def test_observer_notifications_and_progress() -> None:
    ls = FakeServer()
    observer = LspTurnObserver(ls, "tok")  # type: ignore[arg-type]
    observer.begin()
    run(observer.on_delta("s1", 1, "Hel", "text"))
    run(observer.on_progress("s1", "Calling model"))
    run(observer.on_message("s1", 1, Message("assistant", "Hello", {"model": "m"})))
    observer.end("completed")
    assert ls.notified == [
        ("agentls/messageDelta", {"sessionId": "s1", "index": 1, "delta": "Hel", "kind": "text"}),
        ("agentls/message", {"sessionId": "s1", "index": 1,
                             "message": {"role": "assistant", "content": "Hello",
                                         "metadata": {"model": "m"}}}),
    ]
    kinds = [(kind, token) for kind, token, _ in ls.work_done_progress.sent]
    assert kinds == [("begin", "tok"), ("report", "tok"), ("end", "tok")]
    assert ls.work_done_progress.sent[1][2].message == "Calling model"
    assert ls.work_done_progress.tokens == {}  # the client's token is released


def test_observer_without_token_sends_no_progress() -> None:
    ls = FakeServer()
    observer = LspTurnObserver(ls, None)  # type: ignore[arg-type]
    observer.begin()
    run(observer.on_progress("s1", "Calling model"))
    observer.end("completed")
    assert ls.work_done_progress.sent == []


def test_document_lookup_matches_resolved_paths(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("disk")
    os.symlink(real, tmp_path / "alias.py")
    ls = FakeServer()
    ls.text_documents[(tmp_path / "alias.py").as_uri()] = FakeDocument(
        (tmp_path / "alias.py").as_uri(), "buffer")
    lookup = open_document_lookup(ls)  # type: ignore[arg-type]
    assert lookup(real) == "buffer"
    assert lookup(tmp_path / "sub" / ".." / "real.py") == "buffer"
    assert lookup(tmp_path / "other.py") is None
    ls.text_documents.clear()  # closed
    assert lookup(real) is None


def test_observer_hides_suppressed_hook_output() -> None:
    ls = FakeServer()
    observer = LspTurnObserver(ls, None)  # type: ignore[arg-type]
    quiet = Message("system", "verbose", {"source": "hook", "suppress_output": True})
    loud = Message("system", "lint: E501", {"source": "hook"})
    run(observer.on_message("s", 3, quiet))
    run(observer.on_message("s", 4, loud))
    assert [p["message"]["content"] for _, p in ls.notified] == ["lint: E501"]
