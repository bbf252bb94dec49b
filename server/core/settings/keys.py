"""Which keys the settings have, as the sources spell them: the leaves
(settable keys) and nodes (nested objects) of `AgentlsSettings`, their
camelCase wire names and `AGENTLS_*` environment names, and the text that
says what each key accepts. Read from the schema (settings_schema.py) once,
at import; used by the sources (settings_sources.py) and the resolution
(settings.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, get_args, get_origin

import msgspec

from agentls.core.settings.schema import AgentlsSettings
from agentls.core.settings.struct import SettingsStruct, checks_of, unwrap

__all__ = [
    "ENV_NAMES",
    "ENV_PREFIX",
    "LEAVES",
    "NODES",
    "EnvKind",
    "Leaf",
    "camel_case",
    "env_name",
    "env_spellings",
    "known_keys",
    "spellings",
    "wire_name",
]

ENV_PREFIX = "AGENTLS_"


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


EnvKind = Literal["text", "list", "json"]


def _env_kind(field: msgspec.structs.FieldInfo) -> EnvKind:
    """How an environment variable's text becomes a value for this field."""
    annotation = unwrap(field.type)[0]
    origin = get_origin(annotation)
    if origin is list and get_args(annotation) == (str,):
        return "list"  # JSON list or comma-separated
    if origin in (list, dict):
        return "json"
    return "text"  # msgspec's lax mode parses numbers and booleans from text


@dataclass(frozen=True)
class Leaf:
    """A settable key: a field that is not itself a nested settings object."""

    model: type[SettingsStruct]
    name: str
    path: tuple[str, ...]  # snake_case attribute path
    wire: str  # camelCase dotted path
    field: msgspec.structs.FieldInfo
    accepted: str
    nullable: bool
    env_kind: EnvKind
    checks: list[Callable[[Any], Any]]  # after msgspec's own (settings_struct.Check)
    is_bool: bool

    def default(self) -> Any:
        if self.field.default_factory is not msgspec.NODEFAULT:
            return self.field.default_factory()
        return self.field.default


def _build_schema(
) -> tuple[dict[tuple[str, ...], type[SettingsStruct]], dict[tuple[str, ...], Leaf]]:
    nodes: dict[tuple[str, ...], type[SettingsStruct]] = {}
    leaves: dict[tuple[str, ...], Leaf] = {}

    def walk(model: type[SettingsStruct], path: tuple[str, ...]) -> None:
        nodes[path] = model
        for field in msgspec.structs.fields(model):
            child = (*path, field.name)
            if field.encode_name != camel_case(field.name):  # both spell the wire keys
                raise TypeError(f"{field.name}: wire name {field.encode_name}, "
                                f"expected {camel_case(field.name)}")
            nested = _nested_model(field)
            if nested is not None:
                walk(nested, child)
                continue
            annotation, _, nullable = unwrap(field.type)
            leaves[child] = Leaf(
                model=model, name=field.name, path=child, wire=wire_name(child), field=field,
                accepted=_accepted_text(field), nullable=nullable, env_kind=_env_kind(field),
                checks=checks_of(field.type), is_bool=annotation is bool,
            )

    walk(AgentlsSettings, ())
    return nodes, leaves


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def wire_name(path: tuple[str, ...]) -> str:
    return ".".join(camel_case(name) for name in path)


def env_name(path: tuple[str, ...]) -> str:
    return ENV_PREFIX + "__".join(name.upper() for name in path)


NODES, LEAVES = _build_schema()
ENV_NAMES = sorted(env_name(path) for path in [*LEAVES, *NODES] if path)


@cache
def spellings(model: type[SettingsStruct]) -> dict[str, str]:
    """Accepted key -> attribute name: snake_case and camelCase."""
    fields = msgspec.structs.fields(model)
    return {**{field.encode_name: field.name for field in fields},
            **{field.name: field.name for field in fields}}


@cache
def env_spellings(model: type[SettingsStruct]) -> dict[str, str]:
    """Environment names are case-insensitive: BASE_URL and BASEURL both work."""
    return {spelling.lower(): name for spelling, name in spellings(model).items()}


def known_keys(model: type[SettingsStruct]) -> list[str]:
    return [field.encode_name for field in msgspec.structs.fields(model)]
