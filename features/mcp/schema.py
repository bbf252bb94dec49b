"""A server's tool input schema, made acceptable to every provider.

Providers take a JSON Schema object for a tool's parameters, with limits:
Anthropic's `input_schema` and OpenAI's function `parameters` must be
`type: object` at the top level; OpenAI rejects `oneOf`/`anyOf`/`allOf`/
`enum`/`not` there, and a `required` entry naming no property. Servers
send anything (a missing schema, a bare `{"type": "string"}`, `$schema`
and `$id` keys, draft-specific keywords, megabytes of definitions). The
rules here keep what the model needs and never fail: a schema beyond
repair becomes "an object with any properties", and the note says so.
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["MAX_SCHEMA_CHARS", "normalize_input_schema"]

MAX_SCHEMA_CHARS = 30_000
_TOP_LEVEL_DROPPED = ("$schema", "$id", "oneOf", "anyOf", "allOf", "enum", "not", "const",
                      "if", "then", "else")
_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def normalize_input_schema(schema: Any) -> tuple[dict[str, Any], str | None]:
    """(schema every provider accepts, a note when it had to change it)."""
    if schema is None:
        return copy.deepcopy(_EMPTY), None
    if not isinstance(schema, dict):
        return copy.deepcopy(_EMPTY), f"input schema was {type(schema).__name__}, not an object"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError):
        return copy.deepcopy(_EMPTY), "input schema is not JSON"
    if size > MAX_SCHEMA_CHARS:
        return copy.deepcopy(_EMPTY), f"input schema is too large ({size} characters)"
    result = copy.deepcopy(schema)
    notes: list[str] = []
    kind = result.get("type")
    if kind != "object":
        if kind is not None or "properties" not in result:
            return copy.deepcopy(_EMPTY), f"input schema has type {kind!r}, not 'object'"
        result["type"] = "object"
    for key in _TOP_LEVEL_DROPPED:
        if key in result:
            result.pop(key)
            if key not in ("$schema", "$id"):
                notes.append(f"dropped top-level {key!r}")
    properties = result.get("properties")
    if not isinstance(properties, dict):
        if properties is not None:
            notes.append("properties was not an object")
        properties = {}
    result["properties"] = {k: v for k, v in properties.items()
                            if isinstance(k, str) and isinstance(v, dict | bool)}
    required = result.get("required")
    if required is not None:
        kept = [r for r in required if isinstance(r, str) and r in result["properties"]] \
            if isinstance(required, list) else []
        if not isinstance(required, list) or len(kept) != len(required):
            notes.append("required named unknown properties")
        if kept:
            result["required"] = kept
        else:
            result.pop("required")
    return result, "; ".join(notes) or None
