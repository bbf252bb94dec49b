"""Pure parts of the ACP front: how the gate's options become ACP
permission options (protected questions never get allow_always), and
which raw messages the transport refuses before the SDK sees them."""

from __future__ import annotations

from agentls.acp.stdio import _invalid
from agentls.acp.updates import permission_options, tool_kind
from agentls.core.approval.gate import EDIT_OPTIONS, ONCE_OPTIONS, ApprovalOption, ApprovalRequest


def kinds(request: ApprovalRequest) -> list[tuple[str, str]]:
    return [(o.option_id, o.kind) for o in permission_options(request)]


def test_the_gates_options_map_to_acp_kinds() -> None:
    # ids as shared/PROTOCOL.md binds them: allow_once, allow_session, reject_once
    assert kinds(ApprovalRequest("edit?", options=EDIT_OPTIONS)) == [
        ("allow_once", "allow_once"), ("allow_session", "allow_always"),
        ("reject_once", "reject_once")]
    assert kinds(ApprovalRequest("run?", options=ONCE_OPTIONS)) == [
        ("allow_once", "allow_once"), ("reject_once", "reject_once")]


def test_a_protected_question_never_offers_always() -> None:
    # even if a caller put a remembering option on a protected question
    assert kinds(ApprovalRequest("edit .git/config?", options=EDIT_OPTIONS, protected=True)) == [
        ("allow_once", "allow_once"), ("reject_once", "reject_once")]
    trust = (ApprovalOption("trust", "Trust", allows=True),
             ApprovalOption("refuse", "Don't trust", allows=False))
    assert kinds(ApprovalRequest("trust?", options=trust, protected=True)) == [
        ("trust", "allow_once"), ("refuse", "reject_once")]


def test_tool_kinds() -> None:
    assert [tool_kind(n) for n in ("read_file", "search_text", "edit_file", "delete_file",
                                   "rename_file", "run_command")] == [
        "read", "search", "edit", "delete", "move", "execute"]
    assert tool_kind("mcp__git__status", "call") == "other"
    assert tool_kind("third_party_reader", "read") == "read"


def test_the_transport_refuses_what_the_sdk_cannot_route() -> None:
    assert _invalid([1, 2]) is not None
    assert _invalid("text") is not None
    assert _invalid({"jsonrpc": "2.0", "id": 1, "method": 3}) is not None
    assert _invalid({"jsonrpc": "2.0", "params": {}}) is not None  # neither method nor id
    assert _invalid({"jsonrpc": "2.0", "id": True, "method": "initialize"}) is not None
    assert _invalid({"jsonrpc": "2.0", "id": 1, "method": "x", "params": 5}) is not None
    assert _invalid({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}) is None
    assert _invalid({"jsonrpc": "2.0", "id": "a", "result": {}}) is None  # a response
    assert _invalid({"jsonrpc": "2.0", "method": "session/cancel", "params": {}}) is None
