"""The pure parts of the Copilot chat's client tools: registration params,
the client's tool results and confirmation answers as agentls reads them.
The wire is covered end to end in tests/e2e/test_copilot_chat.py."""

from __future__ import annotations

import pytest

from agentls.core.approval.gate import EDIT_OPTIONS, ONCE_OPTIONS, ApprovalRequest
from agentls.core.tools.contract import ToolRefused
from agentls.lsp.copilot.conversation_tools import (
    ClientTools,
    LiveConversations,
    _chosen,
    _tool_result,
    parse_tools,
)


def test_parse_tools_keeps_name_description_and_schema() -> None:
    tools = parse_tools({"tools": [
        {"name": "create_file", "description": "Create a file.",
         "inputSchema": {"type": "object", "properties": {"filePath": {"type": "string"}}}},
        {"name": "get_errors"},
    ]})
    assert tools["create_file"] == {
        "name": "create_file", "description": "Create a file.",
        "parameters": {"type": "object", "properties": {"filePath": {"type": "string"}}}}
    assert tools["get_errors"]["parameters"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize("params", [
    {}, {"tools": {}}, {"tools": ["x"]}, {"tools": [{"name": ""}]},
    {"tools": [{"name": "a b"}]}, {"tools": [{"name": "a", "description": 3}]},
    {"tools": [{"name": f"t{i}"} for i in range(200)]},
])
def test_parse_tools_refuses_bad_params(params: dict) -> None:
    with pytest.raises(ValueError):
        parse_tools(params)


@pytest.mark.parametrize(("answer", "expected"), [
    ({"status": "success", "content": [{"value": "one"}, {"value": "two"}]},
     {"success": True, "result": "one\ntwo"}),
    ([{"status": "success", "content": [{"value": "ok"}]}, None],
     {"success": True, "result": "ok"}),
    ({"status": "error", "content": [{"value": "boom"}]},
     {"success": False, "error": {"message": "boom", "code": "tool_error"}}),
    ({"status": "cancelled", "content": []},
     {"success": False, "error": {"message": "The editor reported 'cancelled' for 't'.",
                                  "code": "cancelled"}}),
])
def test_tool_results(answer: object, expected: dict) -> None:
    assert _tool_result("t", answer) == expected


@pytest.mark.parametrize("answer", [None, "done", [], 7])
def test_no_tool_result_is_a_failure(answer: object) -> None:
    result = _tool_result("t", answer)
    assert result["success"] is False and "sent no result" in result["error"]["message"]


@pytest.mark.parametrize(("answer", "expected"), [
    ({"result": "accept"}, "allow_once"),
    ([{"result": "accept"}, None], "allow_once"),
    ({"result": "dismiss"}, "deny"),
    ({"result": "always"}, None),
    (None, None),
])
def test_confirmation_answers(answer: object, expected: str | None) -> None:
    for options in (EDIT_OPTIONS, ONCE_OPTIONS):  # accept never means "for session"
        assert _chosen(ApprovalRequest("q", options=options), answer) == expected


def test_a_client_tool_declares_its_paths() -> None:
    tools = ClientTools(None, LiveConversations())
    need = tools.tool_need("get_errors", {"filePaths": ["a.py", "b.py"], "filePath": "c.py"},
                           {})
    assert need.kind == "call" and set(need.paths) == {"a.py", "b.py", "c.py"}
    assert "get_errors" in need.question and "a.py" in need.question
    with pytest.raises(ToolRefused):
        tools.tool_need("create_file", {"filePath": ["x"]}, {})
