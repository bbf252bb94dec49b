"""agentls settings: where values come from. One frozen model (its schema,
msgspec structs, in `agentls.core.settings.schema`), six sources, per-key
fallback, and workspace trust for the workspace file. Neither this module nor
the schema imports pydantic: the first inline completion loads them.

Sources, highest precedence first (docs/protocol.md, "Configuration"):

1. ``initializationOptions`` (the object under ``agentls``),
2. ``workspace/configuration`` section ``agentls``,
3. environment variables ``AGENTLS_<UPPER_SNAKE_PATH>`` with ``__`` between
   levels (``AGENTLS_BASE_URL``, ``AGENTLS_APPROVAL__MODE``),
4. ``<workspace>/.agentls.toml``; its keys that can send data or run code
   (``baseUrl``, ``apiKeyEnv``, ``linters``, ``approval.*``, ...) only once
   the user trusted the file's content (`agentls.core.trust.workspace`),
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

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentls.core.settings.keys import LEAVES, NODES
from agentls.core.settings.schema import (
    AgentlsSettings,
)
from agentls.core.settings.sources import (
    SOURCE_INIT_OPTIONS,
    SOURCE_WORKSPACE_CONFIG,
    WORKSPACE_CONFIG_FILE,
    Given,
    Layer,
    SettingsProblem,
    env_layer,
    mapping_layer,
    shown,
    toml_layer,
    user_config_path,
    workspace_layer,
)
from agentls.core.settings.struct import (
    SettingsStruct,
    convert,
    converting,
    location,
)
from agentls.core.trust.workspace import TrustStore, WorkspaceTrust

__all__ = ["SOURCE_DEFAULT", "LoadedSettings", "load_settings"]

SOURCE_DEFAULT = "default"


@dataclass(frozen=True)
class LoadedSettings:
    settings: AgentlsSettings
    problems: list[SettingsProblem]
    # wire key path ("approval.mode") -> the source that supplied the value
    sources: dict[str, str]
    # The workspace file's trust state and the keys waiting for it (None:
    # no workspace file).
    workspace_trust: WorkspaceTrust | None = None


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


# --------------------------------------------------------------------------- resolution


# The words pydantic's lax mode read as booleans; msgspec's knows only
# true/false/1/0, and users' environment variables say yes/no/on/off.
_BOOL_WORDS = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True,
               "0": False, "off": False, "f": False, "false": False, "n": False, "no": False}


def _validate(given: Given) -> tuple[bool, Any, str]:
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


def _rejection(given: Given, reason: str, value: Any, source: str) -> SettingsProblem:
    leaf = given.leaf
    fallback = shown(_jsonable(value), leaf.wire)
    if fallback.endswith("..."):
        # A truncated list of rules helps nobody; say where the value comes from.
        fallback = "the default" if source == SOURCE_DEFAULT else f"the value from {source}"
    elif source != SOURCE_DEFAULT:
        fallback += f" (from {source})"
    message = (f"{leaf.wire}: {shown(given.value, leaf.wire)} is not valid "
               f"(from {given.source}){reason}; {leaf.accepted}. Using {fallback} instead.")
    return SettingsProblem(leaf.wire, given.source, message)


def _resolve(layers: list[Layer], problems: list[SettingsProblem],
             provider_names: Collection[str] | None = None
             ) -> tuple[dict[tuple[str, ...], Any], dict[str, str]]:
    """Per leaf: the highest-precedence valid value, else the default.
    `provider_names`: the installed provider plugins; another name is
    invalid like any bad value (it falls back and is reported)."""
    values: dict[tuple[str, ...], Any] = {}
    sources: dict[str, str] = {}
    for path, leaf in LEAVES.items():
        chosen: tuple[Any, str] | None = None
        rejected: list[tuple[Given, str]] = []
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
    model = NODES[path]
    return model(**{field.name: (_build(values, (*path, field.name))
                                 if (*path, field.name) in NODES else values[(*path, field.name)])
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
    workspace, trust = workspace_layer(
        workspace_file, trust_store if trust_store is not None else TrustStore.default(env),
        problems)
    layers = [  # highest precedence first
        mapping_layer(init_options, SOURCE_INIT_OPTIONS, problems),
        mapping_layer(workspace_config, SOURCE_WORKSPACE_CONFIG, problems),
        env_layer(env, problems),
        workspace,
        toml_layer(user_config_file or user_config_path(env), "user config", problems),
    ]
    values, sources = _resolve(layers, problems, provider_names)
    with converting():  # every leaf was checked by _validate
        settings = _build(values)
    return LoadedSettings(settings=settings, problems=problems, sources=sources,
                          workspace_trust=trust)
