"""Every core model round-trips through JSON; behaviours the upstream APIs specify hold."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from agentls.core.types.conversation import Message, PartialMessage, Session, ToolDescriptor
from agentls.core.types.errors import ModelError, ProviderRequestCancelled
from agentls.core.types.messages import (
    ConfigField,
    HookResult,
    ModelInfo,
    ModelResponse,
    ModuleInfo,
    ProviderInfo,
    SessionStatus,
    StreamChunk,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)

EXAMPLES: list[BaseModel] = [
    ToolCall(id="call_123", tool="bash", arguments={"command": "ls -la"}),
    ToolResult(output="File created successfully", success=True),
    ToolResult(success=False, error={"message": "Permission denied", "code": "EPERM"}),
    ConfigField(id="api_key", display_name="API key", field_type="secret",
                prompt="Your key", env_var="OPENAI_API_KEY"),
    ProviderInfo(id="anthropic", display_name="Anthropic",
                 credential_env_vars=["ANTHROPIC_API_KEY"],
                 capabilities=["streaming", "tools", "vision"], defaults={"timeout": 300.0},
                 config_fields=[ConfigField(id="base_url", display_name="Base URL")]),
    ModelInfo(id="claude-sonnet-4-5", display_name="Claude Sonnet 4.5", context_window=200000,
              max_output_tokens=8192, capabilities=["tools"], defaults={"temperature": 1.0}),
    ModuleInfo(id="m", name="M", version="1", type="tool", mount_point="tools",
               description="d", config_schema={"type": "object"}),
    HookResult(action="ask_user", approval_prompt="ok?", approval_options=["Allow", "Deny"],
               append_to_last_tool_result=True, user_message="hi",
               user_message_level="warning"),
    SessionStatus(session_id="s", started_at=datetime(2025, 1, 1, tzinfo=UTC),
                  tool_invocations=2, total_input_tokens=5, estimated_cost=0.01),
    Usage(input_tokens=1, output_tokens=2, total_tokens=3),
    ModelResponse(id="r", model="m", content="The answer is 42.",
                  tool_calls=[ToolCall(tool="t", arguments={"a": [1, 2]}, id="c")],
                  usage=Usage(input_tokens=1, output_tokens=2, total_tokens=3),
                  finish_reason="tool_calls", reasoning_content="because"),
    ToolCallDelta(index=1, id="c", name="t", arguments='{"a"'),
    StreamChunk(delta="x", tool_call_deltas=[ToolCallDelta(arguments="1")],
                finish_reason="length", usage=Usage(total_tokens=3), reasoning="r"),
]


@pytest.mark.parametrize("model", EXAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert json.loads(again.model_dump_json()) == json.loads(text)


def test_tool_call_answers_to_name_alias() -> None:
    call = ToolCall(name="read_file", arguments={"path": "a"})
    assert call.tool == "read_file" and call.name == "read_file"
    assert ToolCall.model_validate({"name": "x"}).tool == "x"
    assert call.model_dump() == {"tool": "read_file", "arguments": {"path": "a"}, "id": None}


def test_hook_result_defaults_and_literals() -> None:
    r = HookResult()
    assert (r.action, r.context_injection_role, r.approval_timeout, r.approval_default,
            r.user_message_level, r.append_to_last_tool_result) == (
        "continue", "system", 300.0, "deny", "info", False)
    with pytest.raises(ValidationError):
        HookResult(action="explode")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        HookResult(approval_default="maybe")  # type: ignore[arg-type]


def test_frozen_response_types() -> None:
    chunk = StreamChunk(delta="a")
    with pytest.raises(ValidationError):
        chunk.delta = "b"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ModelResponse().content = "x"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        StreamChunk(finish_reason="end_turn")  # type: ignore[arg-type]


def test_model_error() -> None:
    err = ModelError("context too long", model="gpt", code="context_length")
    assert str(err) == "context too long" and err.model == "gpt"
    assert err.code == "context_length"
    again = pickle.loads(pickle.dumps(err))
    assert (again.message, again.model, again.code) == ("context too long", "gpt",
                                                          "context_length")
    assert ModelError("x").code == "" and ModelError("x").model == ""


def test_session_status_to_dict_is_json() -> None:
    status = SessionStatus(session_id="s", started_at=datetime(2025, 1, 1, tzinfo=UTC))
    data = status.to_dict()
    assert data["started_at"].startswith("2025-01-01T00:00:00")
    assert json.dumps(data)
    assert SessionStatus.model_validate(data) == status


def test_message_to_dict_camel_case_and_type_errors() -> None:
    msg = Message(role="tool", content="out", metadata={"tool_call_id": "c"},
                  multipart_content=[{"type": "text", "text": "a"}],
                  tool_result={"success": True})
    data = msg.to_dict()
    assert set(data) == {"role", "content", "metadata", "multipartContent", "toolResult"}
    assert Message.from_dict(data) == msg
    assert Message(role="user", content="x").to_dict() == {"role": "user", "content": "x"}
    with pytest.raises(TypeError, match="multipartContent must be a list or null"):
        Message.from_dict({"role": "user", "content": "", "multipartContent": "nope"})
    with pytest.raises(TypeError, match="toolResult must be an object or null"):
        Message.from_dict({"role": "user", "content": "", "toolResult": [1]})


def test_message_from_dict_deep_copies() -> None:
    data: dict[str, Any] = {"role": "user", "content": "x", "metadata": {"nested": {"a": 1}}}
    msg = Message.from_dict(data)
    data["metadata"]["nested"]["a"] = 2
    assert msg.metadata == {"nested": {"a": 1}}


def test_session_is_immutable_and_transforms_return_new() -> None:
    session = Session(session_id="s1", messages=[Message(role="user", content="Hello")])
    with pytest.raises((AttributeError, TypeError, ValidationError)):
        session.session_id = "s2"  # type: ignore[misc]
    grown = session.with_message(Message(role="assistant", content="Hi"))
    assert len(session.messages) == 1 and len(grown.messages) == 2
    assert Session.from_dict(grown.to_dict()) == grown
    assert grown.with_metadata(title="t").metadata == {"title": "t"}
    assert session.metadata == {}


def test_other_003_types() -> None:
    partial = PartialMessage(role="assistant", content="par")
    assert partial.metadata is None
    desc = ToolDescriptor(plugin_name="files", tool_name="read_file", schema={"name": "r"})
    assert desc.metadata == {}
    exc = ProviderRequestCancelled("r1")
    assert isinstance(exc, RuntimeError) and exc.request_id == "r1"
    assert str(exc) == "Provider request cancelled"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.text(max_size=50),
    metadata=st.none() | st.dictionaries(st.text(max_size=8), json_values, min_size=1,
                                         max_size=4),
    tool_result=st.none() | st.dictionaries(st.text(max_size=8), json_values, min_size=1,
                                            max_size=3),
)
def test_message_round_trip_property(role: str, content: str, metadata: Any,
                                     tool_result: Any) -> None:
    msg = Message(role=role, content=content, metadata=metadata,  # type: ignore[arg-type]
                  tool_result=tool_result)
    wire = json.loads(json.dumps(msg.to_dict()))
    assert Message.from_dict(wire) == msg
