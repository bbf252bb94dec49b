"""The settings schema: frozen msgspec structs, camelCase on the wire.

What each key means and accepts lives here; where values come from (the
six sources, per-key fallback, problems) lives in `agentls.core.settings.load`,
which re-exports these names.

msgspec rather than pydantic: the first inline completion reads these
settings, and pydantic's import alone costs ~73 ms and ~6 MiB there
(bench/README.md, "Start-up against the floor of the stack"); msgspec's
costs ~5 ms. msgspec checks types and the `Meta` constraints (bounds,
lengths, patterns, Literal choices); the rules it has no words for (a regex
that compiles, an http(s) URL, JSON without secrets ...) are `Check`
markers in the same `Annotated` type (core/settings/struct.py runs them).
Every field that is not a bool, Literal, int or float carries an
`accepts(...)` text for problem messages; settings.py refuses to import
without one.

Like the pydantic models they replace, building a struct by hand
(`AgentlsSettings(provider="openai")`) validates and converts its values
and raises `InvalidSettings`, a ValueError, saying which key is wrong.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from agentls.core.settings.struct import Check, SettingsStruct, accepts

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
# Python's `$` also matches before a trailing newline ("NAME\n"); `(?!\n)`
# makes these patterns mean what JSON Schema readers take them to mean.
_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$(?!\n)"
_PROVIDER_PATTERN = r"^[A-Za-z0-9_.-]+$(?!\n)"


# --------------------------------------------------------------------------- checks

def _finite(value: float) -> float:
    # inf would serialise to null in to_wire(); msgspec's gt=0 lets it through.
    if not math.isfinite(value):
        raise ValueError("the number must be finite")
    return value


def _regex_compiles(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"command is not a valid regular expression ({error})") from None
    return value


def _inside_the_folder(value: list[str]) -> list[str]:
    for name in value:
        if ".." in name.replace("\\", "/").split("/"):
            raise ValueError(f"{name!r} leaves the folder; name a file inside it")
    return value


def _http_url(value: str | None) -> str | None:
    if value is None:
        return None
    from urllib.parse import urlsplit  # only when a baseUrl is set

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        raise ValueError("baseUrl must be an http:// or https:// URL")
    return value


def _json_blocks(value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    for name, block in value.items():
        for key, item in block.items():
            _check_json(item, f"mcpServers.{name}.{key}")
    # The caller keeps its dicts; frozen settings must not change under us.
    return copy.deepcopy(value)


def _json_without_secrets(value: dict[str, Any]) -> dict[str, Any]:
    _check_option_value(value, "providerOptions")
    return copy.deepcopy(value)


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


# inf would serialise to null in to_wire() and NaN passes no comparison.
_Seconds = Annotated[float, Meta(gt=0), Check(_finite)]
_Count = Annotated[int, Meta(ge=0)]


# --------------------------------------------------------------------------- model


class ApprovalRule(SettingsStruct, frozen=True, kw_only=True):
    """One ordered approval rule; the first rule that matches a tool call wins."""

    tool: Annotated[str, Meta(min_length=1)] = "*"  # glob on the tool name
    path: Annotated[str, Meta(min_length=1)] | None = None  # glob on the path argument
    # regex on the command line (run_command)
    command: Annotated[str | None, Check(_regex_compiles)] = None
    action: Literal["allow", "ask", "deny"]


class LinterConfig(SettingsStruct, frozen=True, kw_only=True):
    """A linter run after edits; `command` is an argv with a "{file}" placeholder."""

    languages: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=1)]
    command: Annotated[list[str], Meta(min_length=1)]
    timeout_seconds: _Seconds = 10.0


class InlineCompletionSettings(SettingsStruct, frozen=True, kw_only=True):
    enabled: bool = True
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        accepts("a model id, or null for the chat model"),
    ] = None
    debounce_ms: Annotated[int, Meta(ge=0, le=2000)] = 50
    max_prefix_chars: _Count = 6000
    max_suffix_chars: _Count = 2000
    max_tokens: Annotated[int, Meta(ge=1, le=4096)] = 128
    # Ask for the completion after a suggestion as soon as it is answered
    # (features/inline_completion/flights.py). Off by default: a paid API would
    # bill each one, and the embedded engine (one llama.cpp context) loses
    # its prompt cache to it (bench/README.md, "Typing replay").
    speculative: bool = False
    # A request the editor sent while the user types is answered with what
    # the model has streamed after this long (Continue's "show whatever we
    # have"); the rest comes to the next keystrokes from the cache. 0: read
    # the whole answer first.
    show_partial_after_ms: Annotated[int, Meta(ge=0, le=10000)] = 300


class NextEditSettings(SettingsStruct, frozen=True, kw_only=True):
    """Next edit suggestions (textDocument/copilotInlineEdit)."""

    enabled: bool = True
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        accepts("a model id, or null for inlineCompletion.model"),
    ] = None
    debounce_ms: Annotated[int, Meta(ge=0, le=2000)] = 100
    # The answer is the whole editable region rewritten, so it is longer
    # than an inline completion.
    max_tokens: Annotated[int, Meta(ge=16, le=8192)] = 768


class ApprovalSettings(SettingsStruct, frozen=True, kw_only=True):
    mode: Literal["auto", "annotation", "message"] = "auto"
    timeout_seconds: _Seconds = 300.0
    default: Literal["allow", "deny"] = "deny"
    # The user's own rules; the policy applies its built-in ones after them
    # (reads allowed, writes and commands ask: features/policy/rules.py).
    rules: Annotated[
        list[ApprovalRule],
        accepts(
            "a list of {tool, path, command, action} objects where action is 'allow', "
            "'ask' or 'deny', tool and path are globs and command is a regular expression"
        ),
    ] = msgspec.field(default_factory=list)
    # Home, root or system folders the user opens on purpose: no restricted
    # mode there (features/policy/restricted.py). Never from the workspace file.
    unrestricted_folders: Annotated[
        list[str], accepts("a list of absolute folder paths (~ allowed)")
    ] = msgspec.field(default_factory=list)


class SessionSettings(SettingsStruct, frozen=True, kw_only=True):
    injection_size_limit: Annotated[
        _Count | None, accepts("a size in bytes (0 or more), or null for no limit")
    ] = 10240
    injection_budget_per_turn: Annotated[
        _Count | None, accepts("a number of tokens (0 or more), or null for no limit")
    ] = 10000
    max_iterations: Annotated[int, Meta(ge=1, le=1000)] = 25
    # Output cap of one model call in a chat turn, enforced on the stream
    # (server/core/agent/stream_guard.py); sent as max_tokens only when set.
    max_output_tokens: Annotated[int, Meta(ge=16, le=1_000_000)] = 16384
    # Largest chat prompt accepted, in characters; a bigger one is refused
    # before anything is stored.
    max_prompt_chars: Annotated[int, Meta(ge=1024, le=10_000_000)] = 262_144
    # Largest tool result stored and sent to the model, in characters; a
    # bigger one keeps its head and tail with a note.
    max_tool_result_chars: Annotated[int, Meta(ge=1024, le=10_000_000)] = 100_000
    # How the agent writes file changes (features/reply_edits/feature.py): with the
    # file tools ("tool-calls"), or whole files in its reply that agentls
    # turns into the same approved edits ("file-blocks"); "auto" picks
    # file-blocks for the embedded local models, tool-calls otherwise.
    edit_format: Literal["auto", "tool-calls", "file-blocks"] = "auto"
    # With file-blocks: how many times in a turn the tests that cover the
    # files a reply changed are run after it (through the approval gate,
    # as any command), a failure going back to the model; 0: never
    # (features/reply_edits/checks.py).
    test_after_edits: Annotated[int, Meta(ge=0, le=10)] = 1


class RunCommandSettings(SettingsStruct, frozen=True, kw_only=True):
    # Environment variables run_command passes to the command besides its
    # allow-list (features/tools/command_env.py).
    pass_env: Annotated[
        list[Annotated[str, Meta(pattern=_NAME_PATTERN)]],
        accepts("a list of environment variable names"),
    ] = msgspec.field(default_factory=list)


def _default_instruction_files() -> list[str]:
    return ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"]


class InstructionsSettings(SettingsStruct, frozen=True, kw_only=True):
    # Project instruction files, first found wins per folder (core/context/instructions.py).
    files: Annotated[
        list[Annotated[str, Meta(min_length=1, pattern=r"^[^/\\]")]],
        Check(_inside_the_folder),
        accepts("a list of file names relative to a folder (e.g. AGENTS.md), first found wins"),
    ] = msgspec.field(default_factory=_default_instruction_files)


class LocalSettings(SettingsStruct, frozen=True, kw_only=True):
    """The embedded local models (providers/local, docs/local-model.md)."""

    # One set of model processes for all of the user's agentls, through the
    # per-user model host (providers/local/shared/); false: one set per window.
    shared: bool = True
    # How long the model host keeps a model nobody uses, and itself once no
    # agentls is connected (the first agentls to start it sets it).
    host_idle_seconds: Annotated[float, Meta(ge=1, le=86400), Check(_finite)] = 300.0


class FeatureSettings(SettingsStruct, frozen=True, kw_only=True):
    disabled: Annotated[list[str], accepts("a list of plugin names")] = msgspec.field(
        default_factory=list
    )


class AgentlsSettings(SettingsStruct, frozen=True, kw_only=True):
    """The effective settings. Build them with `load_settings`."""

    provider: Annotated[
        str,
        Meta(pattern=_PROVIDER_PATTERN),
        accepts(
            "local, openai, anthropic, ollama, scripted, or a plugin's provider name "
            "(letters, digits, '_', '.', '-')"
        ),
    ] = "local"
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        accepts("a model id, or null for the provider's default"),
    ] = None
    base_url: Annotated[
        str | None,
        Check(_http_url),
        accepts("an http:// or https:// URL, or null for the provider's public endpoint"),
    ] = None
    api_key_env: Annotated[
        Annotated[str, Meta(pattern=_NAME_PATTERN)] | None,
        accepts(
            "the NAME of an environment variable that holds the key (never the key "
            "itself), or null for the provider's usual variable"
        ),
    ] = None
    provider_options: Annotated[
        dict[str, Any],
        Check(_json_without_secrets),
        accepts("an object of JSON values holding no secrets"),
    ] = msgspec.field(default_factory=dict)
    request_timeout_seconds: _Seconds = 60.0
    connect_timeout_seconds: _Seconds = 10.0
    inline_completion: InlineCompletionSettings = msgspec.field(
        default_factory=InlineCompletionSettings)
    next_edit: NextEditSettings = msgspec.field(default_factory=NextEditSettings)
    approval: ApprovalSettings = msgspec.field(default_factory=ApprovalSettings)
    session: SessionSettings = msgspec.field(default_factory=SessionSettings)
    linters: Annotated[
        list[LinterConfig] | None,
        accepts(
            "a list of {languages, command, timeoutSeconds} objects with non-empty "
            'languages and command (an argv list containing "{file}"), or null for ruff '
            "on Python when ruff is installed"
        ),
    ] = None
    features: FeatureSettings = msgspec.field(default_factory=FeatureSettings)
    local: LocalSettings = msgspec.field(default_factory=LocalSettings)
    # Tokens the chat model accepts; overrides what the provider reports
    # (core/context/fitting.py builds every request to fit it).
    context_window: Annotated[
        Annotated[int, Meta(ge=512, le=100_000_000)] | None,
        accepts("a number of tokens (512 or more), or null for the model's own window"),
    ] = None
    instructions: InstructionsSettings = msgspec.field(default_factory=InstructionsSettings)
    run_command: RunCommandSettings = msgspec.field(default_factory=RunCommandSettings)
    # name -> server block. Each block is checked on its own when the servers
    # start (McpServerConfig in features/mcp/server_config.py, a model built only
    # when MCP is used): one bad block is
    # reported for that server and the others still run.
    mcp_servers: Annotated[
        dict[str, dict[str, Any]],
        Check(_json_blocks),
        accepts(
            "an object of server name -> {command, args, env, cwd} for a stdio server or "
            "{url, headers} for a streamable HTTP server"
        ),
    ] = msgspec.field(default_factory=dict)

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


def default_settings() -> AgentlsSettings:
    """The settings of a fresh install with no configuration at all."""
    return AgentlsSettings()
