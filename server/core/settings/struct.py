"""The base of the settings structs (core/settings/schema.py): msgspec
structs that validate like the pydantic models they replaced.

msgspec checks types and `Meta` constraints while converting; a `Check` in a
field's `Annotated` type adds what msgspec cannot say, run in
`__post_init__` for whole structs and by core/settings/load.py for single keys.
A struct built by hand (`AgentlsSettings(provider="openai")`) is validated
and converted whole, as pydantic did, and raises `InvalidSettings`.
"""

from __future__ import annotations

import contextvars
import datetime
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import msgspec
from msgspec import Meta

__all__ = [
    "Check",
    "InvalidSettings",
    "SettingsStruct",
    "accepts",
    "checks_of",
    "convert",
    "converting",
    "location",
    "unwrap",
]


class InvalidSettings(ValueError):
    """Settings built from Python (a constructor or `model_validate`) that are not valid."""


class Check:
    """`Annotated` marker: a check msgspec cannot express, run after its own.

    `run(value)` returns the value to keep (it may copy it) or raises
    ValueError with a message that names no value.
    """

    __slots__ = ("run",)

    def __init__(self, run: Callable[[Any], Any]) -> None:
        self.run = run


def accepts(text: str) -> Meta:
    """What a value must look like, for problem messages (settings.py)."""
    return Meta(extra={"accepts": text})


# --------------------------------------------------------------------------- validation

# Set while msgspec.convert builds structs from values it has just checked
# (or from values settings.py checked): then __post_init__ runs only the
# Check markers. Unset, a struct was built by hand and is validated whole.
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
    return [item.run for item in unwrap(annotation)[1] if isinstance(item, Check)]


def location(error: msgspec.ValidationError) -> tuple[str, str]:
    """(message, camelCase location without "$") of msgspec's error text,
    e.g. ("Expected `int` <= 2000", "rules[0].tool")."""
    message, _, where = str(error).partition(" - at `$")
    where = where.removesuffix("`").lstrip(".")
    if message.startswith("Invalid enum value"):
        message = "not one of the accepted values"  # msgspec quotes the value
    return message, where


_M = TypeVar("_M", bound="SettingsStruct")


class SettingsStruct(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
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
def _checks(cls: type[SettingsStruct]) -> list[tuple[str, str, list[Callable[[Any], Any]]]]:
    """(attribute, wire key, checks) of each field of `cls` that has checks."""
    return [(field.name, field.encode_name, found) for field in msgspec.structs.fields(cls)
            if (found := checks_of(field.type))]


def _validate_whole(settings: SettingsStruct) -> None:
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


def _wire_keys(data: Any, cls: type[SettingsStruct]) -> Any:
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
        if isinstance(nested, type) and issubclass(nested, SettingsStruct):
            value = _wire_keys(value, nested)
        elif (isinstance(item, type) and issubclass(item, SettingsStruct)
              and isinstance(value, list)):
            value = [_wire_keys(element, item) for element in value]
        out[field.encode_name] = value
    return out
