"""The settings schema: one frozen pydantic model, camelCase on the wire.

What each key means and accepts lives here; where values come from (the
six sources, per-key fallback, problems) lives in `agentls.core.settings`,
which re-exports these names.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "AgentlsSettings",
    "ApprovalRule",
    "ApprovalSettings",
    "FeatureSettings",
    "InlineCompletionSettings",
    "InstructionsSettings",
    "LinterConfig",
    "NextEditSettings",
    "RunCommandSettings",
    "SessionSettings",
    "default_settings",
]

DEFAULT_API_KEY_ENV: Mapping[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
# providerOptions entries refused outright: a key must live in the environment.
_SECRET_OPTIONS = frozenset(
    {"apikey", "key", "secret", "secretkey", "clientsecret", "password", "token",
     "accesstoken", "authtoken", "bearertoken", "authorization"}
)


# --------------------------------------------------------------------------- model


def _reject_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; for a count or a timeout that is
    # always a mistake the user should hear about.
    if isinstance(value, bool):
        raise ValueError("a number is required, not true/false")
    return value


_NoBool = BeforeValidator(_reject_bool)
# inf would serialise to null in to_wire() and NaN passes no comparison.
_Seconds = Annotated[float, _NoBool, Field(gt=0, allow_inf_nan=False)]
_Count = Annotated[int, _NoBool, Field(ge=0)]


def _accepts(text: str) -> dict[str, Any]:
    """Field metadata: what a value must look like, for problem messages."""
    return {"accepts": text}


class _Model(BaseModel):
    """camelCase on the wire, snake_case in Python, immutable, no stray keys."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class ApprovalRule(_Model):
    """One ordered approval rule; the first rule that matches a tool call wins."""

    tool: str = Field("*", min_length=1)  # glob on the tool name
    path: str | None = Field(None, min_length=1)  # glob on the path argument
    command: str | None = None  # regex on the command line (run_command)
    action: Literal["allow", "ask", "deny"]

    @field_validator("command")
    @classmethod
    def _command_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"command is not a valid regular expression ({error})") from None
        return value


class LinterConfig(_Model):
    """A linter run after edits; `command` is an argv with a "{file}" placeholder."""

    languages: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    command: list[str] = Field(min_length=1)
    timeout_seconds: _Seconds = 10.0


class InlineCompletionSettings(_Model):
    enabled: bool = True
    model: str | None = Field(
        None, min_length=1, json_schema_extra=_accepts("a model id, or null for the chat model")
    )
    debounce_ms: Annotated[int, _NoBool, Field(ge=0, le=2000)] = 50
    max_prefix_chars: _Count = 6000
    max_suffix_chars: _Count = 2000
    max_tokens: Annotated[int, _NoBool, Field(ge=1, le=4096)] = 128


class NextEditSettings(_Model):
    """Next edit suggestions (textDocument/copilotInlineEdit)."""

    enabled: bool = True
    model: str | None = Field(
        None, min_length=1,
        json_schema_extra=_accepts("a model id, or null for inlineCompletion.model"),
    )
    debounce_ms: Annotated[int, _NoBool, Field(ge=0, le=2000)] = 100
    # The answer is the whole editable region rewritten, so it is longer
    # than an inline completion.
    max_tokens: Annotated[int, _NoBool, Field(ge=16, le=8192)] = 768


class ApprovalSettings(_Model):
    mode: Literal["auto", "annotation", "message"] = "auto"
    timeout_seconds: _Seconds = 300.0
    default: Literal["allow", "deny"] = "deny"
    # The user's own rules; the policy applies its built-in ones after them
    # (reads allowed, writes and commands ask: features/policy.py).
    rules: list[ApprovalRule] = Field(
        default_factory=list,
        json_schema_extra=_accepts(
            "a list of {tool, path, command, action} objects where action is 'allow', "
            "'ask' or 'deny', tool and path are globs and command is a regular expression"
        ),
    )


class SessionSettings(_Model):
    injection_size_limit: _Count | None = Field(
        10240, json_schema_extra=_accepts("a size in bytes (0 or more), or null for no limit")
    )
    injection_budget_per_turn: _Count | None = Field(
        10000, json_schema_extra=_accepts("a number of tokens (0 or more), or null for no limit")
    )
    max_iterations: Annotated[int, _NoBool, Field(ge=1, le=1000)] = 25
    # Output cap of one model call in a chat turn, enforced on the stream
    # (server/core/stream_guard.py); sent as max_tokens only when set.
    max_output_tokens: Annotated[int, _NoBool, Field(ge=16, le=1_000_000)] = 16384
    # Largest chat prompt accepted, in characters; a bigger one is refused
    # before anything is stored.
    max_prompt_chars: Annotated[int, _NoBool, Field(ge=1024, le=10_000_000)] = 262_144
    # Largest tool result stored and sent to the model, in characters; a
    # bigger one keeps its head and tail with a note.
    max_tool_result_chars: Annotated[int, _NoBool, Field(ge=1024, le=10_000_000)] = 100_000


class RunCommandSettings(_Model):
    # Environment variables run_command passes to the command besides its
    # allow-list (features/tools/command_env.py).
    pass_env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list,
        json_schema_extra=_accepts("a list of environment variable names"),
    )


class InstructionsSettings(_Model):
    # Project instruction files, first found wins per folder (core/instructions.py).
    files: list[Annotated[str, Field(min_length=1, pattern=r"^[^/\\]")]] = Field(
        default_factory=lambda: ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"],
        json_schema_extra=_accepts(
            "a list of file names relative to a folder (e.g. AGENTS.md), first found wins"
        ),
    )

    @field_validator("files")
    @classmethod
    def _inside_the_folder(cls, value: list[str]) -> list[str]:
        for name in value:
            if ".." in name.replace("\\", "/").split("/"):
                raise ValueError(f"{name!r} leaves the folder; name a file inside it")
        return value


class FeatureSettings(_Model):
    disabled: list[str] = Field(
        default_factory=list, json_schema_extra=_accepts("a list of plugin names")
    )


class AgentlsSettings(_Model):
    """The effective settings. Build them with `load_settings`."""

    provider: str = Field(
        "local",
        pattern=r"^[A-Za-z0-9_.-]+$",
        json_schema_extra=_accepts(
            "local, openai, anthropic, ollama, scripted, or a plugin's provider name "
            "(letters, digits, '_', '.', '-')"
        ),
    )
    model: str | None = Field(
        None,
        min_length=1,
        json_schema_extra=_accepts("a model id, or null for the provider's default"),
    )
    base_url: str | None = Field(
        None,
        json_schema_extra=_accepts(
            "an http:// or https:// URL, or null for the provider's public endpoint"
        ),
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        json_schema_extra=_accepts(
            "the NAME of an environment variable that holds the key (never the key "
            "itself), or null for the provider's usual variable"
        ),
    )
    provider_options: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra=_accepts("an object of JSON values holding no secrets"),
    )
    request_timeout_seconds: _Seconds = 60.0
    connect_timeout_seconds: _Seconds = 10.0
    inline_completion: InlineCompletionSettings = Field(default_factory=InlineCompletionSettings)
    next_edit: NextEditSettings = Field(default_factory=NextEditSettings)
    approval: ApprovalSettings = Field(default_factory=ApprovalSettings)
    session: SessionSettings = Field(default_factory=SessionSettings)
    linters: list[LinterConfig] | None = Field(
        None,
        json_schema_extra=_accepts(
            "a list of {languages, command, timeoutSeconds} objects with non-empty "
            'languages and command (an argv list containing "{file}"), or null for ruff '
            "on Python when ruff is installed"
        ),
    )
    features: FeatureSettings = Field(default_factory=FeatureSettings)
    # Tokens the chat model accepts; overrides what the provider reports
    # (core/context.py builds every request to fit it).
    context_window: Annotated[int, _NoBool, Field(ge=512, le=100_000_000)] | None = Field(
        None, json_schema_extra=_accepts("a number of tokens (512 or more), or null for the "
                                         "model's own window")
    )
    instructions: InstructionsSettings = Field(default_factory=InstructionsSettings)
    run_command: RunCommandSettings = Field(default_factory=RunCommandSettings)
    # name -> server block. Each block is checked on its own when the servers
    # start (McpServerConfig in features/mcp/config.py, a model built only
    # when MCP is used): one bad block is
    # reported for that server and the others still run.
    mcp_servers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        json_schema_extra=_accepts(
            "an object of server name -> {command, args, env, cwd} for a stdio server or "
            "{url, headers} for a streamable HTTP server"
        ),
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
            raise ValueError("baseUrl must be an http:// or https:// URL")
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _json_blocks(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, block in value.items():
            for key, item in block.items():
                _check_json(item, f"mcpServers.{name}.{key}")
        return copy.deepcopy(value)

    @field_validator("provider_options")
    @classmethod
    def _json_without_secrets(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_option_value(value, "providerOptions")
        # The caller keeps its dict; frozen settings must not change under us.
        return copy.deepcopy(value)

    def to_wire(self) -> dict[str, Any]:
        """The camelCase nested dict, JSON-ready; `load_settings` reads it back."""
        return self.model_dump(mode="json", by_alias=True)

    def api_key_env_name(self) -> str | None:
        """The environment variable the provider's key is read from, if any."""
        return self.api_key_env or DEFAULT_API_KEY_ENV.get(self.provider)

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The provider's API key, read now; it is never kept on the settings."""
        name = self.api_key_env_name()
        if name is None:
            return None
        value = (os.environ if environ is None else environ).get(name, "").strip()
        return value or None


def _check_json(value: Any, where: str) -> None:
    """Plain JSON values only (to_wire must round-trip them)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: object keys must be strings")
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: numbers must be finite")
    elif not isinstance(value, str | int | float | bool | None):
        raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def _check_option_value(value: Any, where: str) -> None:
    """providerOptions must be plain JSON (to_wire) and hold no secrets."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: object keys must be strings")
            if re.sub(r"[^a-z]", "", key.lower()) in _SECRET_OPTIONS:
                raise ValueError(
                    f"{where}.{key} looks like a secret; secrets are not settings: put it in "
                    "an environment variable and name that variable with apiKeyEnv"
                )
            _check_option_value(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_option_value(item, f"{where}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: numbers must be finite")
    elif not isinstance(value, str | int | float | bool | None):
        raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def default_settings() -> AgentlsSettings:
    """The settings of a fresh install with no configuration at all."""
    return AgentlsSettings()

