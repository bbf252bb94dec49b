"""Small conversions between pygls' objects and plain Python data.

pygls hands custom methods' params over as namedtuple-like objects (and
`initializationOptions` / configuration values as whatever the JSON was);
the core wants dicts.
"""

from __future__ import annotations

from typing import Any


def to_plain(value: Any) -> Any:
    """Recursively turn pygls params (namedtuples, attrs objects) into
    dicts/lists/scalars."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if hasattr(value, "_asdict"):  # pygls' namedtuple-like params
        return {k: to_plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if hasattr(value, "__attrs_attrs__"):  # lsprotocol types
        from lsprotocol import converters

        return converters.get_converter().unstructure(value)
    return value
