"""The settings schema: frozen msgspec structs, camelCase on the wire.

What each key means and accepts lives here; where values come from (the
six sources, per-key fallback, problems) lives in `agentls.core.settings`,
which re-exports these names.

msgspec rather than pydantic: the first inline completion reads these
settings, and pydantic's import alone costs ~73 ms and ~6 MiB there
(bench/README.md, "Start-up against the floor of the stack"); msgspec's
costs ~5 ms. msgspec checks types and the `Meta` constraints; the checks
it has no words for (a regex that compiles, an http(s) URL, JSON without
secrets ...) are `_Check` markers in the same `Annotated` type, run after
it for whole structs (`__post_init__`) and for single keys (settings.py).

Like the pydantic models they replace, building a struct by hand
(`AgentlsSettings(provider="openai")`) validates and converts its values
and raises `InvalidSettings`, a ValueError, saying which key is wrong.
"""

from __future__ import annotations

import contextvars
import copy
import datetime
import math
import os
import re
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import msgspec
from msgspec import Meta

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "AgentlsSettings",
    "ApprovalRule",
    "ApprovalSettings",
    "FeatureSettings",
    "InlineCompletionSettings",
    "InstructionsSettings",
    "InvalidSettings",
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


class InvalidSettings(ValueError):
    """Settings built from Python (a constructor or `model_validate`) that are not valid."""


# --------------------------------------------------------------------------- checks


class _Check:
    """`Annotated` marker: a check msgspec cannot express, run after its own.

    `run(value)` returns the value to keep (it may copy it) or raises
    ValueError with a message that names no value.
    """

    __slots__ = ("run",)

    def __init__(self, run: Callable[[Any], Any]) -> None:
        self.run = run


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


def _accepts(text: str) -> Meta:
    """What a value must look like, for problem messages (settings.py)."""
    return Meta(extra={"accepts": text})


# inf would serialise to null in to_wire() and NaN passes no comparison.
_Seconds = Annotated[float, Meta(gt=0), _Check(_finite)]
_Count = Annotated[int, Meta(ge=0)]


# --------------------------------------------------------------------------- validation

# Set while msgspec.convert builds structs from values it has just checked
# (or from values settings.py checked): then __post_init__ runs only the
# _Check markers. Unset, a struct was built by hand and is validated whole.
_CONVERTING: contextvars.ContextVar[bool] = contextvars.ContextVar("_CONVERTING", default=False)

@contextmanager
def converting() -> Iterator[None]:
    token = _CONVERTING.set(True)
    try:
        yield
    finally:
        _CONVERTING.reset(token)


def convert(value: Any, type_: Any) -> Any:
    """msgspec's lax conversion ("50" -> 50 from environment text, 5.0 -> 5),
    as pydantic's lax mode did; true/false never pass for numbers."""
    with converting():
        return msgspec.convert(value, type_, strict=False)


def unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(bare type, Annotated metadata, accepts None) of a field's annotation."""
    metadata: list[Any] = []
    nullable = False
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            metadata.extend(extra)
        elif origin is Union or origin is types.UnionType:
            args = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation, metadata, nullable
            nullable = True
            annotation = args[0]
        else:
            return annotation, metadata, nullable


def checks_of(annotation: Any) -> list[Callable[[Any], Any]]:
    return [item.run for item in unwrap(annotation)[1] if isinstance(item, _Check)]


def location(error: msgspec.ValidationError) -> tuple[str, str]:
    """(message, camelCase location without "$") of msgspec's error text,
    e.g. ("Expected `int` <= 2000", "rules[0].tool")."""
    message, _, where = str(error).partition(" - at `$")
    where = where.removesuffix("`").lstrip(".")
    if message.startswith("Invalid enum value"):
        message = "not one of the accepted values"  # msgspec quotes the value
    return message, where


_M = TypeVar("_M", bound="_Settings")


class _Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                rename="camel"):
    """camelCase on the wire, snake_case in Python, immutable, no stray keys."""

    def __post_init__(self) -> None:
        if not _CONVERTING.get():
            _validate_whole(self)
            return
        for name, key, checks in _checks(type(self)):
            value = original = getattr(self, name)
            try:
                for check in checks:
                    value = check(value)
            except ValueError as error:
                # msgspec locates the error at this struct; name the key.
                text = str(error)
                raise ValueError(text if text.startswith(key) else f"{key}: {text}") from None
            if value is not original:
                msgspec.structs.force_setattr(self, name, value)

    @classmethod
    def model_validate(cls: type[_M], data: Mapping[str, Any]) -> _M:
        """Settings from a nested mapping with camelCase or snake_case keys;
        raises InvalidSettings naming the bad key."""
        try:
            result: _M = convert(_wire_keys(data, cls), cls)
        except msgspec.ValidationError as error:
            message, where = location(error)
            raise InvalidSettings(f"{where or cls.__name__}: {message}") from None
        return result

    @classmethod
    def model_json_schema(cls, by_alias: bool = True) -> dict[str, Any]:
        """The JSON Schema of the camelCase wire form (cold path: plugin UIs)."""
        schema: dict[str, Any] = msgspec.json.schema(cls)
        return schema

    def to_wire(self) -> dict[str, Any]:
        """The camelCase nested dict, JSON-ready; `load_settings` reads it back."""
        wire: dict[str, Any] = msgspec.to_builtins(self)
        return wire


@cache
def _checks(cls: type[_Settings]) -> list[tuple[str, str, list[Callable[[Any], Any]]]]:
    """(attribute, wire key, checks) of each field of `cls` that has checks."""
    return [(field.name, field.encode_name, found) for field in msgspec.structs.fields(cls)
            if (found := checks_of(field.type))]


def _validate_whole(settings: _Settings) -> None:
    """A hand-built struct: check and convert every value as the wire form
    would be (nested dicts become structs, 7 becomes 7.0 for seconds)."""
    try:
        # Values that are not JSON are kept as they are, so that the checks
        # refuse them rather than msgspec turning a date into text.
        builtins = msgspec.to_builtins(settings, builtin_types=_NOT_JSON)
        checked = convert(_wire_keys(builtins, type(settings)), type(settings))
    except TypeError as error:  # an object msgspec cannot represent at all
        raise InvalidSettings(f"{type(settings).__name__}: {error}") from None
    except msgspec.ValidationError as error:
        message, where = location(error)
        raise InvalidSettings(f"{where or type(settings).__name__}: {message}") from None
    for field in msgspec.structs.fields(settings):
        msgspec.structs.force_setattr(settings, field.name, getattr(checked, field.name))


_NOT_JSON = (datetime.datetime, datetime.date, datetime.time, datetime.timedelta, bytes,
             bytearray)


def _wire_keys(data: Any, cls: type[_Settings]) -> Any:
    """`data` with snake_case keys of `cls` (and nested structs) in camelCase."""
    if not isinstance(data, Mapping):
        return data
    fields = {field.name: field for field in msgspec.structs.fields(cls)}
    out: dict[Any, Any] = {}
    for key, value in data.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            out[key] = value
            continue
        nested, _, _ = unwrap(field.type)
        item = get_args(nested)[0] if get_origin(nested) is list else None
        if isinstance(nested, type) and issubclass(nested, _Settings):
            value = _wire_keys(value, nested)
        elif isinstance(item, type) and issubclass(item, _Settings) and isinstance(value, list):
            value = [_wire_keys(element, item) for element in value]
        out[field.encode_name] = value
    return out


# --------------------------------------------------------------------------- model


class ApprovalRule(_Settings, frozen=True, kw_only=True):
    """One ordered approval rule; the first rule that matches a tool call wins."""

    tool: Annotated[str, Meta(min_length=1)] = "*"  # glob on the tool name
    path: Annotated[str, Meta(min_length=1)] | None = None  # glob on the path argument
    # regex on the command line (run_command)
    command: Annotated[str | None, _Check(_regex_compiles)] = None
    action: Literal["allow", "ask", "deny"]


class LinterConfig(_Settings, frozen=True, kw_only=True):
    """A linter run after edits; `command` is an argv with a "{file}" placeholder."""

    languages: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=1)]
    command: Annotated[list[str], Meta(min_length=1)]
    timeout_seconds: _Seconds = 10.0


class InlineCompletionSettings(_Settings, frozen=True, kw_only=True):
    enabled: bool = True
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        _accepts("a model id, or null for the chat model"),
    ] = None
    debounce_ms: Annotated[int, Meta(ge=0, le=2000)] = 50
    max_prefix_chars: _Count = 6000
    max_suffix_chars: _Count = 2000
    max_tokens: Annotated[int, Meta(ge=1, le=4096)] = 128


class NextEditSettings(_Settings, frozen=True, kw_only=True):
    """Next edit suggestions (textDocument/copilotInlineEdit)."""

    enabled: bool = True
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        _accepts("a model id, or null for inlineCompletion.model"),
    ] = None
    debounce_ms: Annotated[int, Meta(ge=0, le=2000)] = 100
    # The answer is the whole editable region rewritten, so it is longer
    # than an inline completion.
    max_tokens: Annotated[int, Meta(ge=16, le=8192)] = 768


class ApprovalSettings(_Settings, frozen=True, kw_only=True):
    mode: Literal["auto", "annotation", "message"] = "auto"
    timeout_seconds: _Seconds = 300.0
    default: Literal["allow", "deny"] = "deny"
    # The user's own rules; the policy applies its built-in ones after them
    # (reads allowed, writes and commands ask: features/policy.py).
    rules: Annotated[
        list[ApprovalRule],
        _accepts(
            "a list of {tool, path, command, action} objects where action is 'allow', "
            "'ask' or 'deny', tool and path are globs and command is a regular expression"
        ),
    ] = msgspec.field(default_factory=list)


class SessionSettings(_Settings, frozen=True, kw_only=True):
    injection_size_limit: Annotated[
        _Count | None, _accepts("a size in bytes (0 or more), or null for no limit")
    ] = 10240
    injection_budget_per_turn: Annotated[
        _Count | None, _accepts("a number of tokens (0 or more), or null for no limit")
    ] = 10000
    max_iterations: Annotated[int, Meta(ge=1, le=1000)] = 25
    # Output cap of one model call in a chat turn, enforced on the stream
    # (server/core/stream_guard.py); sent as max_tokens only when set.
    max_output_tokens: Annotated[int, Meta(ge=16, le=1_000_000)] = 16384
    # Largest chat prompt accepted, in characters; a bigger one is refused
    # before anything is stored.
    max_prompt_chars: Annotated[int, Meta(ge=1024, le=10_000_000)] = 262_144
    # Largest tool result stored and sent to the model, in characters; a
    # bigger one keeps its head and tail with a note.
    max_tool_result_chars: Annotated[int, Meta(ge=1024, le=10_000_000)] = 100_000


class RunCommandSettings(_Settings, frozen=True, kw_only=True):
    # Environment variables run_command passes to the command besides its
    # allow-list (features/tools/command_env.py).
    pass_env: Annotated[
        list[Annotated[str, Meta(pattern=_NAME_PATTERN)]],
        _accepts("a list of environment variable names"),
    ] = msgspec.field(default_factory=list)


def _default_instruction_files() -> list[str]:
    return ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"]


class InstructionsSettings(_Settings, frozen=True, kw_only=True):
    # Project instruction files, first found wins per folder (core/instructions.py).
    files: Annotated[
        list[Annotated[str, Meta(min_length=1, pattern=r"^[^/\\]")]],
        _Check(_inside_the_folder),
        _accepts("a list of file names relative to a folder (e.g. AGENTS.md), first found wins"),
    ] = msgspec.field(default_factory=_default_instruction_files)


class FeatureSettings(_Settings, frozen=True, kw_only=True):
    disabled: Annotated[list[str], _accepts("a list of plugin names")] = msgspec.field(
        default_factory=list
    )


class AgentlsSettings(_Settings, frozen=True, kw_only=True):
    """The effective settings. Build them with `load_settings`."""

    provider: Annotated[
        str,
        Meta(pattern=_PROVIDER_PATTERN),
        _accepts(
            "local, openai, anthropic, ollama, scripted, or a plugin's provider name "
            "(letters, digits, '_', '.', '-')"
        ),
    ] = "local"
    model: Annotated[
        Annotated[str, Meta(min_length=1)] | None,
        _accepts("a model id, or null for the provider's default"),
    ] = None
    base_url: Annotated[
        str | None,
        _Check(_http_url),
        _accepts("an http:// or https:// URL, or null for the provider's public endpoint"),
    ] = None
    api_key_env: Annotated[
        Annotated[str, Meta(pattern=_NAME_PATTERN)] | None,
        _accepts(
            "the NAME of an environment variable that holds the key (never the key "
            "itself), or null for the provider's usual variable"
        ),
    ] = None
    provider_options: Annotated[
        dict[str, Any],
        _Check(_json_without_secrets),
        _accepts("an object of JSON values holding no secrets"),
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
        _accepts(
            "a list of {languages, command, timeoutSeconds} objects with non-empty "
            'languages and command (an argv list containing "{file}"), or null for ruff '
            "on Python when ruff is installed"
        ),
    ] = None
    features: FeatureSettings = msgspec.field(default_factory=FeatureSettings)
    # Tokens the chat model accepts; overrides what the provider reports
    # (core/context.py builds every request to fit it).
    context_window: Annotated[
        Annotated[int, Meta(ge=512, le=100_000_000)] | None,
        _accepts("a number of tokens (512 or more), or null for the model's own window"),
    ] = None
    instructions: InstructionsSettings = msgspec.field(default_factory=InstructionsSettings)
    run_command: RunCommandSettings = msgspec.field(default_factory=RunCommandSettings)
    # name -> server block. Each block is checked on its own when the servers
    # start (McpServerConfig in features/mcp/config.py, a model built only
    # when MCP is used): one bad block is
    # reported for that server and the others still run.
    mcp_servers: Annotated[
        dict[str, dict[str, Any]],
        _Check(_json_blocks),
        _accepts(
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
