"""agentls settings: where values come from. One frozen model (its schema,
msgspec structs, in `agentls.core.settings_schema`), six sources, per-key
fallback, and workspace trust for the workspace file. Neither this module nor
the schema imports pydantic: the first inline completion loads them.

Sources, highest precedence first (docs: PROTOCOL.md, "Configuration"):

1. ``initializationOptions`` (the object under ``agentls``),
2. ``workspace/configuration`` section ``agentls``,
3. environment variables ``AGENTLS_<UPPER_SNAKE_PATH>`` with ``__`` between
   levels (``AGENTLS_BASE_URL``, ``AGENTLS_APPROVAL__MODE``),
4. ``<workspace>/.agentls.toml``; its keys that can send data or run code
   (``baseUrl``, ``apiKeyEnv``, ``linters``, ``approval.*``, ...) only once
   the user trusted the file's content (`agentls.core.workspace_trust`),
5. the user config file (``AGENTLS_CONFIG_FILE`` or
   ``platformdirs.user_config_dir("agentls")/config.toml``),
6. the defaults below.

Every source is first flattened to *leaves* (``approval.mode``,
``inlineCompletion.debounceMs``, ``approval.rules`` ...), so nested objects
merge key by key across sources while lists and ``providerOptions`` replace
whole. Each leaf is then validated on its own: a bad value falls back, for
that leaf only, to the next source down and is reported as a
`SettingsProblem`. Bad user input never raises.

``null`` in a JSON source is an explicit value for keys that accept it
(``model``, ``session.injectionSizeLimit`` ...) and means "not set" for keys
that do not, because LSP clients send null for settings the user left empty.
Empty environment variables are treated as unset, as shells make it easy to
leave them empty by accident.

API keys are not settings: `AgentlsSettings.api_key` reads them from the
environment when asked, and values of secret-looking keys are never echoed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import msgspec
import platformdirs

from .settings_schema import (
    DEFAULT_API_KEY_ENV,
    AgentlsSettings,
    ApprovalRule,
    ApprovalSettings,
    FeatureSettings,
    InlineCompletionSettings,
    InvalidSettings,
    LinterConfig,
    NextEditSettings,
    SessionSettings,
    default_settings,
)
from .settings_struct import SettingsStruct, checks_of, convert, converting, location, unwrap
from .workspace_trust import (
    MIN_WORKSPACE_TIMEOUT_SECONDS,
    TrustStore,
    WorkspaceTrust,
    digest,
    is_dangerous_key,
)

__all__ = [
    "CONFIG_FILE_ENV",
    "DEFAULT_API_KEY_ENV",
    "ENV_PREFIX",
    "NON_SETTING_ENV_VARS",
    "SOURCE_DEFAULT",
    "SOURCE_INIT_OPTIONS",
    "SOURCE_WORKSPACE_CONFIG",
    "WORKSPACE_CONFIG_FILE",
    "AgentlsSettings",
    "ApprovalRule",
    "ApprovalSettings",
    "FeatureSettings",
    "InlineCompletionSettings",
    "InvalidSettings",
    "LinterConfig",
    "LoadedSettings",
    "NextEditSettings",
    "SessionSettings",
    "SettingsProblem",
    "default_settings",
    "load_settings",
    "user_config_path",
]

ENV_PREFIX = "AGENTLS_"
CONFIG_FILE_ENV = "AGENTLS_CONFIG_FILE"
WORKSPACE_CONFIG_FILE = ".agentls.toml"
# AGENTLS_* variables that configure something other than this model; they are
# never reported as unknown settings.
NON_SETTING_ENV_VARS = frozenset({CONFIG_FILE_ENV, "AGENTLS_STATE_DIR"})
SOURCE_INIT_OPTIONS = "initializationOptions"
SOURCE_WORKSPACE_CONFIG = "workspace/configuration"
SOURCE_DEFAULT = "default"

_REDACTED = "<redacted>"
_SHOWN_MAX = 80
# Names whose values are never echoed. `token(?!s)` spares counts such as
# maxTokens, which are not secrets and whose bad values users need to see.
_SECRET_NAME = re.compile(r"key|secret|passw|credential|auth|token(?!s)", re.IGNORECASE)


@dataclass(frozen=True)
class SettingsProblem:
    """A rejected value, unknown key or unreadable source.

    `key` is the camelCase dotted path (or the variable name for environment
    variables, or "" for a whole source); `message` is ready to show a user.
    """

    key: str
    source: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class LoadedSettings:
    settings: AgentlsSettings
    problems: list[SettingsProblem]
    # wire key path ("approval.mode") -> the source that supplied the value
    sources: dict[str, str]
    # The workspace file's trust state and the keys waiting for it (None:
    # no workspace file).
    workspace_trust: WorkspaceTrust | None = None


# --------------------------------------------------------------------------- schema


def _nested_model(field: msgspec.structs.FieldInfo) -> type[SettingsStruct] | None:
    annotation = field.type
    if get_origin(annotation) is None and isinstance(annotation, type):
        if issubclass(annotation, SettingsStruct):
            return annotation
    return None


def _bounds_text(metadata: list[Any]) -> str:
    bounds = {name: getattr(item, name) for item in metadata for name in ("ge", "gt", "le", "lt")
              if isinstance(item, msgspec.Meta) and getattr(item, name, None) is not None}
    if "ge" in bounds and "le" in bounds:
        return f" from {bounds['ge']} to {bounds['le']}"
    if "gt" in bounds:
        return f" greater than {bounds['gt']}"
    if "ge" in bounds:
        return f" of {bounds['ge']} or more"
    return ""


def _accepted_text(field: msgspec.structs.FieldInfo) -> str:
    annotation, metadata, _ = unwrap(field.type)
    for item in metadata:
        extra = item.extra if isinstance(item, msgspec.Meta) else None
        if isinstance(extra, dict) and isinstance(extra.get("accepts"), str):
            return f"accepted: {extra['accepts']}"
    if get_origin(annotation) is Literal:
        return "accepted values: " + ", ".join(repr(arg) for arg in get_args(annotation))
    if annotation is bool:
        return "accepted values: true, false"
    if annotation is int:
        return "accepted: an integer" + _bounds_text(metadata)
    if annotation is float:
        return "accepted: a number" + _bounds_text(metadata)
    # Raised at import: a new field cannot ship without a text for its problems.
    raise TypeError(f"settings field {field.name} needs an _accepts(...) in its "
                    f"Annotated type: {annotation}")


_EnvKind = Literal["text", "list", "json"]


def _env_kind(field: msgspec.structs.FieldInfo) -> _EnvKind:
    """How an environment variable's text becomes a value for this field."""
    annotation = unwrap(field.type)[0]
    origin = get_origin(annotation)
    if origin is list and get_args(annotation) == (str,):
        return "list"  # JSON list or comma-separated
    if origin in (list, dict):
        return "json"
    return "text"  # msgspec's lax mode parses numbers and booleans from text


@dataclass(frozen=True)
class _Leaf:
    """A settable key: a field that is not itself a nested settings object."""

    model: type[SettingsStruct]
    name: str
    path: tuple[str, ...]  # snake_case attribute path
    wire: str  # camelCase dotted path
    field: msgspec.structs.FieldInfo
    accepted: str
    nullable: bool
    env_kind: _EnvKind
    checks: list[Callable[[Any], Any]]  # after msgspec's own (settings_struct.Check)
    is_bool: bool

    def default(self) -> Any:
        if self.field.default_factory is not msgspec.NODEFAULT:
            return self.field.default_factory()
        return self.field.default


def _build_schema(
) -> tuple[dict[tuple[str, ...], type[SettingsStruct]], dict[tuple[str, ...], _Leaf]]:
    nodes: dict[tuple[str, ...], type[SettingsStruct]] = {}
    leaves: dict[tuple[str, ...], _Leaf] = {}

    def walk(model: type[SettingsStruct], path: tuple[str, ...]) -> None:
        nodes[path] = model
        for field in msgspec.structs.fields(model):
            child = (*path, field.name)
            if field.encode_name != _to_camel(field.name):  # both spell the wire keys
                raise TypeError(f"{field.name}: wire name {field.encode_name}, "
                                f"expected {_to_camel(field.name)}")
            nested = _nested_model(field)
            if nested is not None:
                walk(nested, child)
                continue
            annotation, _, nullable = unwrap(field.type)
            leaves[child] = _Leaf(
                model=model, name=field.name, path=child, wire=_wire(child), field=field,
                accepted=_accepted_text(field), nullable=nullable, env_kind=_env_kind(field),
                checks=checks_of(field.type), is_bool=annotation is bool,
            )

    walk(AgentlsSettings, ())
    return nodes, leaves


def _to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _wire(path: tuple[str, ...]) -> str:
    return ".".join(_to_camel(name) for name in path)


def _env_name(path: tuple[str, ...]) -> str:
    return ENV_PREFIX + "__".join(name.upper() for name in path)


_NODES, _LEAVES = _build_schema()
_ENV_NAMES = sorted(_env_name(path) for path in [*_LEAVES, *_NODES] if path)


@cache
def _spellings(model: type[SettingsStruct]) -> dict[str, str]:
    """Accepted key -> attribute name: snake_case and camelCase."""
    fields = msgspec.structs.fields(model)
    return {**{field.encode_name: field.name for field in fields},
            **{field.name: field.name for field in fields}}


@cache
def _env_spellings(model: type[SettingsStruct]) -> dict[str, str]:
    """Environment names are case-insensitive: BASE_URL and BASEURL both work."""
    return {spelling.lower(): name for spelling, name in _spellings(model).items()}


def _known_keys(model: type[SettingsStruct]) -> list[str]:
    return [field.encode_name for field in msgspec.structs.fields(model)]


# --------------------------------------------------------------------------- display


def _truncate(text: str) -> str:
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 3] + "..."


def _masked(value: Any) -> Any:
    """A copy of value with secret-looking entries replaced, for display only."""
    if isinstance(value, Mapping):
        return {k: _REDACTED if isinstance(k, str) and _SECRET_NAME.search(k) else _masked(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item) for item in value]
    return value


def _shown(value: Any, wire: str) -> str:
    if _SECRET_NAME.search(wire.rsplit(".", 1)[-1]):
        return _REDACTED
    return _truncate(repr(_masked(value)))


def _jsonable(value: Any) -> Any:
    if isinstance(value, SettingsStruct):
        return value.to_wire()
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def _reason(error: msgspec.ValidationError) -> str:
    """The part of msgspec's error the accepted-values text does not already say.

    "Expected `int` <= 2000" about the value itself adds nothing to "accepted:
    an integer from 0 to 2000"; one inside it ("rules[0].tool") does. msgspec
    names keys, types and bounds, never the value (settings_struct.location
    drops the one it quotes), so nothing secret is echoed.
    """
    message, where = location(error)
    if not where:
        # lax mode reads numbers from text but never true as 1: say why
        return ": a number is required, not true/false" if "got `bool`" in message else ""
    return f": {where}: {message}"


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _Given:
    """One value for one leaf from one source, not yet validated."""

    leaf: _Leaf
    value: Any
    source: str
    error: str | None = None  # set when the source could not even decode it


_Layer = dict[tuple[str, ...], _Given]


def _unknown_key(path: tuple[str, ...], key: Any, source: str) -> SettingsProblem:
    known = _known_keys(_NODES[path])
    dotted = _truncate(".".join([*(_to_camel(p) for p in path), str(key)]))
    near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
    hint = f"did you mean {near[0]!r}? " if near else ""
    under = f" under {_wire(path)}" if path else ""
    message = (f"unknown setting {dotted!r} (from {source}); {hint}"
               f"known keys{under}: {', '.join(known)}. It is ignored.")
    return SettingsProblem(dotted, source, message)


def _collect(raw: Mapping[Any, Any], path: tuple[str, ...], source: str,
             out: _Layer, problems: list[SettingsProblem]) -> None:
    """Flatten one (nested) mapping into leaves, reporting unknown keys."""
    model = _NODES[path]
    for key, value in raw.items():
        name = _spellings(model).get(key) if isinstance(key, str) else None
        if name is None:
            problems.append(_unknown_key(path, key, source))
            continue
        child = (*path, name)
        if child in _LEAVES:
            if value is not None or _LEAVES[child].nullable:
                out[child] = _Given(_LEAVES[child], value, source)
        elif isinstance(value, Mapping):
            _collect(value, child, source, out, problems)
        elif value is not None:  # null: an empty section
            wire = _wire(child)
            problems.append(SettingsProblem(wire, source, (
                f"{wire}: {_shown(value, wire)} is not valid (from {source}); accepted: an "
                f"object with keys {', '.join(_known_keys(_NODES[child]))}. It is ignored.")))


def _mapping_layer(raw: Any, source: str, problems: list[SettingsProblem]) -> _Layer:
    out: _Layer = {}
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        problems.append(SettingsProblem("", source, (
            f"settings from {source} must be an object, not {type(raw).__name__}; "
            "they are ignored.")))
        return out
    _collect(raw, (), source, out, problems)
    return out


def _env_path(name: str) -> tuple[str, ...] | None:
    """AGENTLS_APPROVAL__MODE -> ("approval", "mode"); None if not a setting."""
    path: tuple[str, ...] = ()
    for segment in name[len(ENV_PREFIX):].split("__"):
        model = _NODES.get(path)
        attribute = _env_spellings(model).get(segment.lower()) if model else None
        if attribute is None:
            return None
        path = (*path, attribute)
    return path


def _unknown_env(name: str) -> SettingsProblem | None:
    """Report an AGENTLS_* variable only when it is plausibly a mistyped setting.

    Other components and tools may use their own AGENTLS_* variables, so a name
    is reported only when it is close to a setting or lies under a settings
    object (AGENTLS_APPROVAL__MODDE).
    """
    near = difflib.get_close_matches(name.upper(), _ENV_NAMES, n=1, cutoff=0.8)
    head = _env_path(name.split("__", 1)[0]) if "__" in name else None
    if not near and (head is None or head not in _NODES):
        return None
    source = f"environment ({name})"
    if near:
        hint = f"did you mean {near[0]}?"
    else:
        assert head is not None
        hint = "known names: " + ", ".join(n for n in _ENV_NAMES
                                           if n.startswith(_env_name(head) + "__"))
    return SettingsProblem(name, source, f"unknown setting {name!r} (from environment); "
                                         f"{hint} It is ignored.")


def _env_given(leaf: _Leaf, text: str, source: str) -> _Given:
    if leaf.nullable and text.strip().lower() in ("null", "none"):
        return _Given(leaf, None, source)
    if leaf.env_kind == "text":
        return _Given(leaf, text, source)
    if leaf.env_kind == "list" and not text.lstrip().startswith("["):
        return _Given(leaf, [part.strip() for part in text.split(",") if part.strip()], source)
    try:
        return _Given(leaf, json.loads(text), source)
    except ValueError as error:
        return _Given(leaf, text, source, error=f": not valid JSON ({error})")


def _env_layer(environ: Mapping[str, str], problems: list[SettingsProblem]) -> _Layer:
    """AGENTLS_* variables, named like pydantic-settings' env_prefix +
    env_nested_delimiter="__" would name them (the convention users know).

    Hand-rolled (agentls does not depend on pydantic-settings) because its
    EnvSettingsSource reads only os.environ, fails the whole source on one
    bad JSON value, drops unknown names silently and cannot say which
    variable supplied a value.
    """
    found: list[tuple[int, str, tuple[str, ...], str]] = []
    for name, text in environ.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NON_SETTING_ENV_VARS or text == "":
            continue
        path = _env_path(name)
        if path is None:
            problem = _unknown_env(name)
            if problem is not None:
                problems.append(problem)
            continue
        found.append((len(path), name, path, text))

    out: _Layer = {}
    # Whole objects (AGENTLS_APPROVAL='{"mode": ...}') first, so that a more
    # specific variable (AGENTLS_APPROVAL__MODE) wins over them.
    for _, name, path, text in sorted(found):
        source = f"environment ({name})"
        if path in _LEAVES:
            out[path] = _env_given(_LEAVES[path], text, source)
            continue
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if isinstance(value, Mapping):
            _collect(value, path, source, out, problems)
        else:
            wire = _wire(path)
            problems.append(SettingsProblem(wire, source, (
                f"{wire}: {_shown(value, wire)} is not valid (from {source}); accepted: a JSON "
                f"object, or one variable per key such as {_first_env_name_under(path)}. "
                "It is ignored.")))
    return out


def _first_env_name_under(path: tuple[str, ...]) -> str:
    prefix = _env_name(path) + "__"
    return next(name for name in _ENV_NAMES if name.startswith(prefix))


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user config file: $AGENTLS_CONFIG_FILE, else the platform's config dir."""
    env = os.environ if environ is None else environ
    override = env.get(CONFIG_FILE_ENV, "")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("agentls")) / "config.toml"


def _toml_layer(path: Path | None, kind: str, problems: list[SettingsProblem]) -> _Layer:
    if path is None:
        return {}
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}  # having no config file is the normal case
    except OSError as error:
        problems.append(SettingsProblem("", f"{kind} ({path})",
                                        f"cannot read {path}: {error}. It is ignored."))
        return {}
    return _toml_bytes_layer(data, path, kind, problems)


def _toml_bytes_layer(data: bytes, path: Path, kind: str, problems: list[SettingsProblem]
                      ) -> _Layer:
    source = f"{kind} ({path})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(SettingsProblem("", source, f"cannot read {path}: {error}. It is ignored."))
        return {}
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message ends with "(at line N, column M)".
        problems.append(SettingsProblem("", source, (
            f"{path} is not valid TOML: {error}. The file is ignored; "
            "the other settings sources still apply.")))
        return {}
    out: _Layer = {}
    _collect(parsed, (), source, out, problems)
    return out


def _workspace_layer(path: Path | None, store: TrustStore, problems: list[SettingsProblem]
                     ) -> tuple[_Layer, WorkspaceTrust | None]:
    """The workspace file's layer, without the keys that can send data or
    run code unless the user trusted this content (core/workspace_trust.py),
    and never with approval.default allow or a too-short approval timeout."""
    if path is None:
        return {}, None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        problems.append(SettingsProblem("", f"{WORKSPACE_CONFIG_FILE} ({path})",
                                        f"cannot read {path}: {error}. It is ignored."))
        return {}, None
    layer = _toml_bytes_layer(data, path, WORKSPACE_CONFIG_FILE, problems)
    source = f"{WORKSPACE_CONFIG_FILE} ({path})"
    for key, given in list(layer.items()):
        wire = _wire(key)
        if wire == "approval.default" and given.value == "allow":
            del layer[key]
            problems.append(SettingsProblem(wire, source, (
                f"approval.default = \"allow\" is never taken from {path}: a workspace file "
                "cannot make unanswered approvals pass. Set it in your user config file if you "
                "really want it.")))
        elif (wire == "approval.timeoutSeconds" and isinstance(given.value, int | float)
              and not isinstance(given.value, bool)
              and given.value < MIN_WORKSPACE_TIMEOUT_SECONDS):
            del layer[key]
            problems.append(SettingsProblem(wire, source, (
                f"approval.timeoutSeconds = {given.value:g} from {path} is below the "
                f"{MIN_WORKSPACE_TIMEOUT_SECONDS:g} s a workspace file may set; it is ignored.")))
    dangerous = {key: given for key, given in layer.items() if is_dangerous_key(_wire(key))}
    content = digest(data)
    if not dangerous:
        return layer, WorkspaceTrust(str(path), content, "none")
    shown = [(_wire(key), _shown(given.value, _wire(key))) for key, given in dangerous.items()]
    state = store.decision(path, content) or "pending"
    if state != "trusted":
        for key in dangerous:
            del layer[key]
    return layer, WorkspaceTrust(str(path), content, state, shown)


# --------------------------------------------------------------------------- resolution


# The words pydantic's lax mode read as booleans; msgspec's knows only
# true/false/1/0, and users' environment variables say yes/no/on/off.
_BOOL_WORDS = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True,
               "0": False, "off": False, "f": False, "false": False, "n": False, "no": False}


def _validate(given: _Given) -> tuple[bool, Any, str]:
    """(ok, value, reason) for one leaf value, validated on its own."""
    if given.error is not None:
        return False, None, given.error
    leaf = given.leaf
    value = given.value
    if leaf.is_bool and isinstance(value, str):
        value = _BOOL_WORDS.get(value.strip().lower(), value)
    try:
        value = convert(value, leaf.field.type)
        for check in leaf.checks:
            value = check(value)
    except msgspec.ValidationError as error:
        return False, None, _reason(error)
    except ValueError as error:  # a settings_struct.Check
        return False, None, f": {error}"
    return True, value, ""


def _rejection(given: _Given, reason: str, value: Any, source: str) -> SettingsProblem:
    leaf = given.leaf
    fallback = _shown(_jsonable(value), leaf.wire)
    if fallback.endswith("..."):
        # A truncated list of rules helps nobody; say where the value comes from.
        fallback = "the default" if source == SOURCE_DEFAULT else f"the value from {source}"
    elif source != SOURCE_DEFAULT:
        fallback += f" (from {source})"
    message = (f"{leaf.wire}: {_shown(given.value, leaf.wire)} is not valid "
               f"(from {given.source}){reason}; {leaf.accepted}. Using {fallback} instead.")
    return SettingsProblem(leaf.wire, given.source, message)


def _resolve(layers: list[_Layer], problems: list[SettingsProblem],
             provider_names: Collection[str] | None = None
             ) -> tuple[dict[tuple[str, ...], Any], dict[str, str]]:
    """Per leaf: the highest-precedence valid value, else the default.
    `provider_names`: the installed provider plugins; another name is
    invalid like any bad value (it falls back and is reported)."""
    values: dict[tuple[str, ...], Any] = {}
    sources: dict[str, str] = {}
    for path, leaf in _LEAVES.items():
        chosen: tuple[Any, str] | None = None
        rejected: list[tuple[_Given, str]] = []
        for layer in layers:
            given = layer.get(path)
            if given is None:
                continue
            ok, value, reason = _validate(given)
            if (ok and provider_names is not None and path == ("provider",)
                    and value not in provider_names):
                ok, reason = False, (": no installed provider plugin has that name; installed: "
                                     + ", ".join(sorted(provider_names)))
            if not ok:
                # Reported even when a higher source shadows it: `agentls check`
                # should show every broken line of configuration.
                rejected.append((given, reason))
            elif chosen is None:
                chosen = (value, given.source)
        if chosen is None:
            chosen = (leaf.default(), SOURCE_DEFAULT)
        values[path], sources[leaf.wire] = chosen
        problems.extend(_rejection(given, reason, *chosen) for given, reason in rejected)
    return values, sources


def _build(values: dict[tuple[str, ...], Any], path: tuple[str, ...] = ()) -> Any:
    """The settings object from validated leaf values, without validating again."""
    model = _NODES[path]
    return model(**{field.name: (_build(values, (*path, field.name))
                                 if (*path, field.name) in _NODES else values[(*path, field.name)])
                    for field in msgspec.structs.fields(model)})


def load_settings(
    *,
    init_options: Mapping[str, Any] | None = None,
    workspace_config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    workspace_root: Path | None = None,
    user_config_file: Path | None = None,
    trust_store: TrustStore | None = None,
    provider_names: Collection[str] | None = None,
) -> LoadedSettings:
    """Merge all sources into valid settings; never raises for bad input.

    `init_options` is the object under "agentls" in initializationOptions and
    `workspace_config` the "agentls" section of workspace/configuration.
    `environ` defaults to os.environ; `user_config_file` to `user_config_path()`;
    `trust_store` (the user's workspace-trust decisions) to the one in the
    user state directory. With `provider_names` (the installed provider
    plugins), any other `provider` is an invalid value.
    """
    env = os.environ if environ is None else environ
    problems: list[SettingsProblem] = []
    workspace_file = workspace_root / WORKSPACE_CONFIG_FILE if workspace_root else None
    workspace_layer, trust = _workspace_layer(
        workspace_file, trust_store if trust_store is not None else TrustStore.default(env),
        problems)
    layers = [  # highest precedence first
        _mapping_layer(init_options, SOURCE_INIT_OPTIONS, problems),
        _mapping_layer(workspace_config, SOURCE_WORKSPACE_CONFIG, problems),
        _env_layer(env, problems),
        workspace_layer,
        _toml_layer(user_config_file or user_config_path(env), "user config", problems),
    ]
    values, sources = _resolve(layers, problems, provider_names)
    with converting():  # every leaf was checked by _validate
        settings = _build(values)
    return LoadedSettings(settings=settings, problems=problems, sources=sources,
                          workspace_trust=trust)
