"""Where settings values come from: each source (initializationOptions,
workspace/configuration, `AGENTLS_*` environment variables, the workspace's
`.agentls.toml` under workspace trust, the user config file) flattened to a
layer of not-yet-validated leaf values, with the problems found on the way
(unknown keys, unreadable files). settings.py validates and merges them.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from agentls.core.settings.keys import (
    ENV_NAMES,
    ENV_PREFIX,
    LEAVES,
    NODES,
    Leaf,
    camel_case,
    env_name,
    env_spellings,
    known_keys,
    spellings,
    wire_name,
)
from agentls.core.trust.display import setting_lines, shown_value
from agentls.core.trust.workspace import (
    MIN_WORKSPACE_TIMEOUT_SECONDS,
    TrustStore,
    WorkspaceTrust,
    digest,
    is_dangerous_key,
    locate,
)

__all__ = [
    "CONFIG_FILE_ENV",
    "NON_SETTING_ENV_VARS",
    "SOURCE_INIT_OPTIONS",
    "SOURCE_WORKSPACE_CONFIG",
    "WORKSPACE_CONFIG_FILE",
    "Given",
    "Layer",
    "SettingsProblem",
    "env_layer",
    "mapping_layer",
    "shown",
    "toml_layer",
    "user_config_path",
    "workspace_layer",
]

CONFIG_FILE_ENV = "AGENTLS_CONFIG_FILE"
WORKSPACE_CONFIG_FILE = ".agentls.toml"
# AGENTLS_* variables that configure something other than this model; they are
# never reported as unknown settings.
NON_SETTING_ENV_VARS = frozenset({CONFIG_FILE_ENV, "AGENTLS_STATE_DIR"})
SOURCE_INIT_OPTIONS = "initializationOptions"
SOURCE_WORKSPACE_CONFIG = "workspace/configuration"

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


def shown(value: Any, wire: str) -> str:
    """A rejected value in a problem message: short, secrets masked. Never
    for a trust question, which shows every value whole (trust_display)."""
    if _SECRET_NAME.search(wire.rsplit(".", 1)[-1]):
        return _REDACTED
    return _truncate(repr(_masked(value)))


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Given:
    """One value for one leaf from one source, not yet validated."""

    leaf: Leaf
    value: Any
    source: str
    error: str | None = None  # set when the source could not even decode it


Layer = dict[tuple[str, ...], Given]


def _unknown_key(path: tuple[str, ...], key: Any, source: str) -> SettingsProblem:
    known = known_keys(NODES[path])
    dotted = _truncate(".".join([*(camel_case(p) for p in path), str(key)]))
    near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
    hint = f"did you mean {near[0]!r}? " if near else ""
    under = f" under {wire_name(path)}" if path else ""
    message = (f"unknown setting {dotted!r} (from {source}); {hint}"
               f"known keys{under}: {', '.join(known)}. It is ignored.")
    return SettingsProblem(dotted, source, message)


def _collect(raw: Mapping[Any, Any], path: tuple[str, ...], source: str,
             out: Layer, problems: list[SettingsProblem]) -> None:
    """Flatten one (nested) mapping into leaves, reporting unknown keys."""
    model = NODES[path]
    for key, value in raw.items():
        name = spellings(model).get(key) if isinstance(key, str) else None
        if name is None:
            problems.append(_unknown_key(path, key, source))
            continue
        child = (*path, name)
        if child in LEAVES:
            if value is not None or LEAVES[child].nullable:
                out[child] = Given(LEAVES[child], value, source)
        elif isinstance(value, Mapping):
            _collect(value, child, source, out, problems)
        elif value is not None:  # null: an empty section
            wire = wire_name(child)
            problems.append(SettingsProblem(wire, source, (
                f"{wire}: {shown(value, wire)} is not valid (from {source}); accepted: an "
                f"object with keys {', '.join(known_keys(NODES[child]))}. It is ignored.")))


def mapping_layer(raw: Any, source: str, problems: list[SettingsProblem]) -> Layer:
    out: Layer = {}
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
        model = NODES.get(path)
        attribute = env_spellings(model).get(segment.lower()) if model else None
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
    near = difflib.get_close_matches(name.upper(), ENV_NAMES, n=1, cutoff=0.8)
    head = _env_path(name.split("__", 1)[0]) if "__" in name else None
    if not near and (head is None or head not in NODES):
        return None
    source = f"environment ({name})"
    if near:
        hint = f"did you mean {near[0]}?"
    else:
        assert head is not None
        hint = "known names: " + ", ".join(n for n in ENV_NAMES
                                           if n.startswith(env_name(head) + "__"))
    return SettingsProblem(name, source, f"unknown setting {name!r} (from environment); "
                                         f"{hint} It is ignored.")


def _env_given(leaf: Leaf, text: str, source: str) -> Given:
    if leaf.nullable and text.strip().lower() in ("null", "none"):
        return Given(leaf, None, source)
    if leaf.env_kind == "text":
        return Given(leaf, text, source)
    if leaf.env_kind == "list" and not text.lstrip().startswith("["):
        return Given(leaf, [part.strip() for part in text.split(",") if part.strip()], source)
    try:
        return Given(leaf, json.loads(text), source)
    except ValueError as error:
        return Given(leaf, text, source, error=f": not valid JSON ({error})")


def env_layer(environ: Mapping[str, str], problems: list[SettingsProblem]) -> Layer:
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

    out: Layer = {}
    # Whole objects (AGENTLS_APPROVAL='{"mode": ...}') first, so that a more
    # specific variable (AGENTLS_APPROVAL__MODE) wins over them.
    for _, name, path, text in sorted(found):
        source = f"environment ({name})"
        if path in LEAVES:
            out[path] = _env_given(LEAVES[path], text, source)
            continue
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if isinstance(value, Mapping):
            _collect(value, path, source, out, problems)
        else:
            wire = wire_name(path)
            problems.append(SettingsProblem(wire, source, (
                f"{wire}: {shown(value, wire)} is not valid (from {source}); accepted: a JSON "
                f"object, or one variable per key such as {_first_env_name_under(path)}. "
                "It is ignored.")))
    return out


def _first_env_name_under(path: tuple[str, ...]) -> str:
    prefix = env_name(path) + "__"
    return next(name for name in ENV_NAMES if name.startswith(prefix))


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user config file: $AGENTLS_CONFIG_FILE, else the platform's config dir."""
    env = os.environ if environ is None else environ
    override = env.get(CONFIG_FILE_ENV, "")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("agentls")) / "config.toml"


def toml_layer(path: Path | None, kind: str, problems: list[SettingsProblem]) -> Layer:
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
                      ) -> Layer:
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
    out: Layer = {}
    _collect(parsed, (), source, out, problems)
    return out


def workspace_layer(path: Path | None, store: TrustStore, problems: list[SettingsProblem]
                     ) -> tuple[Layer, WorkspaceTrust | None]:
    """The workspace file's layer, without the keys that can send data or
    run code unless the user trusted this content (core/trust/workspace.py),
    and never with approval.default allow, a too-short approval timeout or
    approval.unrestrictedFolders."""
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
        wire = wire_name(key)
        if wire == "approval.default" and given.value == "allow":
            del layer[key]
            problems.append(SettingsProblem(wire, source, (
                f"approval.default = \"allow\" is never taken from {path}: a workspace file "
                "cannot make unanswered approvals pass. Set it in your user config file if you "
                "really want it.")))
        elif wire == "approval.unrestrictedFolders":
            del layer[key]
            problems.append(SettingsProblem(wire, source, (
                f"approval.unrestrictedFolders is never taken from {path}: a workspace file "
                "cannot lift restricted mode. Set it in your user config file.")))
        elif (wire == "approval.timeoutSeconds" and isinstance(given.value, int | float)
              and not isinstance(given.value, bool)
              and given.value < MIN_WORKSPACE_TIMEOUT_SECONDS):
            del layer[key]
            problems.append(SettingsProblem(wire, source, (
                f"approval.timeoutSeconds = {given.value:g} from {path} is below the "
                f"{MIN_WORKSPACE_TIMEOUT_SECONDS:g} s a workspace file may set; it is ignored.")))
    dangerous = {key: given for key, given in layer.items() if is_dangerous_key(wire_name(key))}
    content = digest(data)
    link_target, outside = locate(path)
    if not dangerous:
        return layer, WorkspaceTrust(str(path), content, "none", link_target=link_target,
                                     outside=outside)
    # Shown whole in the trust question: every value, nothing cut or masked
    # (the file's own text; your variables' values never appear).
    listed = [(wire_name(key), shown_value(given.value)) for key, given in dangerous.items()]
    lines = [line for key, given in dangerous.items()
             for line in setting_lines(wire_name(key), given.value)]
    state = store.decision(path, content) or "pending"
    if state != "trusted":
        for key in dangerous:
            del layer[key]
    return layer, WorkspaceTrust(str(path), content, state, listed, lines,
                                 link_target=link_target, outside=outside)
