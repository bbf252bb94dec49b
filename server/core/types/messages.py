"""Core data models: Amplifier's models (its models API and Hooks API) and
orbiter's provider-agnostic response types (orbiter's models.types).

Field names are those APIs' public names; nothing here knows about LSP or HTTP.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from agentls.core.types.errors import FinishReason

__all__ = [
    "ConfigField",
    "HookAction",
    "HookResult",
    "ModelInfo",
    "ModelResponse",
    "ModuleInfo",
    "ProviderInfo",
    "SessionStatus",
    "StreamChunk",
    "ToolCall",
    "ToolCallDelta",
    "ToolResult",
    "Usage",
]


# Every model here builds its validator on first use, not at import: the
# first inline completion needs two of them and importing the others'
# schemas cost ~30 ms of start-up (bench/bench_startup.py).
_DEFERRED = ConfigDict(defer_build=True)


# ------------------------------------------------------------ Amplifier's models API


class ToolCall(BaseModel):
    """An LLM's request to call a tool.

    Amplifier names the tool `tool`; orbiter names it `name`. Both spellings are
    accepted on input and `name` is readable as a property; `tool` is what is
    serialised.
    """

    model_config = ConfigDict(populate_by_name=True, defer_build=True)

    tool: str = Field(validation_alias=AliasChoices("tool", "name"))
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None

    @property
    def name(self) -> str:
        return self.tool


class ToolResult(BaseModel):
    """Result returned by tool execution."""

    model_config = _DEFERRED

    success: bool = True
    output: Any | None = None
    error: dict[str, Any] | None = None


class ConfigField(BaseModel):
    """One configuration field a provider needs for setup (API key, base URL, ...)."""

    model_config = _DEFERRED

    id: str
    display_name: str
    field_type: Literal["text", "secret", "choice", "boolean"] = "text"
    prompt: str = ""
    env_var: str | None = None
    choices: list[str] | None = None
    required: bool = True
    default: str | None = None
    show_when: dict[str, str] | None = None
    requires_model: bool = False


class ProviderInfo(BaseModel):
    """Metadata about a loaded provider."""

    model_config = _DEFERRED

    id: str
    display_name: str
    credential_env_vars: list[str] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    defaults: dict[str, Any] = Field(default_factory=dict)
    config_fields: list[ConfigField] = Field(default_factory=list)


class ModelInfo(BaseModel):
    """Metadata about an AI model (Amplifier's; autogen's TypedDict of the same
    name lives in `agentls.core.compat.autogen_types`)."""

    model_config = _DEFERRED

    id: str
    display_name: str
    context_window: int
    max_output_tokens: int
    capabilities: list[str] = Field(default_factory=list)
    defaults: dict[str, Any] = Field(default_factory=dict)


class ModuleInfo(BaseModel):
    """Metadata about a loaded module (plugin)."""

    model_config = _DEFERRED

    id: str
    name: str
    version: str
    type: str
    mount_point: str
    description: str
    config_schema: dict[str, Any] | None = None


HookAction = Literal["continue", "deny", "modify", "inject_context", "ask_user"]


class HookResult(BaseModel):
    """What a hook handler asks the kernel to do (Amplifier's Hooks API)."""

    model_config = _DEFERRED

    action: HookAction = "continue"
    data: dict[str, Any] | None = None
    reason: str | None = None

    # Context injection
    context_injection: str | None = None
    context_injection_role: Literal["system", "user", "assistant"] = "system"
    ephemeral: bool = False

    # Approval gates
    approval_prompt: str | None = None
    approval_options: list[str] | None = None
    approval_timeout: float = 300.0
    approval_default: Literal["allow", "deny"] = "deny"

    # Output control
    suppress_output: bool = False
    user_message: str | None = None
    user_message_level: Literal["info", "warning", "error"] = "info"

    # Injection placement control
    append_to_last_tool_result: bool = False


class SessionStatus(BaseModel):
    """Session status, counters, token usage and cost."""

    model_config = _DEFERRED

    session_id: str
    started_at: datetime
    ended_at: datetime | None = None
    status: Literal["running", "completed", "failed", "cancelled"] = "running"

    total_messages: int = 0
    tool_invocations: int = 0
    tool_successes: int = 0
    tool_failures: int = 0

    total_input_tokens: int = 0
    total_output_tokens: int = 0

    estimated_cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (datetimes as ISO 8601), as the protocol sends it."""
        return self.model_dump(mode="json")


# ------------------------------------------------------------ orbiter's models.types


# AgentlsError, ModelError, ModelErrorCode and FinishReason live in
# core/types/errors.py (no pydantic: the keystroke path needs them) and are the
# same objects here.


class Usage(BaseModel):
    """Token usage statistics."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ModelResponse(BaseModel):
    """Response from a non-streaming completion call."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str = ""
    model: str = ""
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    reasoning_content: str = ""


class ToolCallDelta(BaseModel):
    """An incremental fragment of a streamed tool call."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    index: int = 0
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class StreamChunk(BaseModel):
    """One chunk of a streamed completion.

    `reasoning` carries chain-of-thought deltas (OpenAI `reasoning_content`,
    Anthropic `thinking_delta`); it is an agentls addition to orbiter's type.
    `notice` too: something the provider wants the user to know about this
    model (not model output; the turn shows each one once per session).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    delta: str = ""
    tool_call_deltas: list[ToolCallDelta] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    usage: Usage = Field(default_factory=Usage)
    reasoning: str = ""
    notice: str = ""
