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

from agentls.core.approval import ApprovalRequest, ask_for_approval
from agentls.core.session_types import Message
from agentls.lsp.channels import (
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

    async def window_show_message_request_async(
        self, params: types.ShowMessageRequestParams
    ) -> types.MessageActionItem | None:
        self.requests.append(params)
        return types.MessageActionItem(title=self.answer) if self.answer else None

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.shown.append(params)

    def notify(self, method: str, params: Any) -> None:
        self.notified.append((method, params))


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 5))


def test_approval_asks_with_the_options_as_actions() -> None:
    ls = FakeServer("Allow for session")
    request = ApprovalRequest(prompt="Run `make`?", options=("Allow once", "Allow for session",
                                                            "Deny"), tool_name="run_command")
    decision = run(ask_for_approval(LspApprovalChannel(ls), request))  # type: ignore[arg-type]
    assert decision.allowed and decision.choice == "Allow for session"
    sent = ls.requests[0]
    assert sent.message == "Run `make`?"
    assert [a.title for a in sent.actions or []] == ["Allow once", "Allow for session", "Deny"]


def test_dismissed_or_denied_approval_is_a_deny() -> None:
    for answer in (None, "Deny"):
        channel = LspApprovalChannel(FakeServer(answer))  # type: ignore[arg-type]
        decision = run(ask_for_approval(channel, ApprovalRequest(prompt="?")))
        assert not decision.allowed


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
