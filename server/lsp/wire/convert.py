"""Small conversions between pygls' objects and plain Python data.

pygls hands custom methods' params over as namedtuple-like objects (and
`initializationOptions` / configuration values as whatever the JSON was);
the core wants dicts.
"""

from __future__ import annotations

from typing import Any


def position_encoding(ls: Any) -> str:
    """The position encoding agreed at initialize ("utf-16", "utf-8" or
    "utf-32"); LSP's default, "utf-16", when none was or before initialize."""
    try:
        encoding = ls.workspace.position_encoding
    except Exception:  # no workspace yet
        return "utf-16"
    value = getattr(encoding, "value", encoding)
    return str(value) if value else "utf-16"


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


def params_object(params: Any) -> dict[str, Any]:
    """A custom request's params as a dict ({} when omitted); -32602 when
    they are not an object."""
    from pygls.exceptions import JsonRpcInvalidParams

    plain = to_plain(params)
    if plain is None:
        return {}
    if not isinstance(plain, dict):
        raise JsonRpcInvalidParams("Params must be an object.")
    return plain


def session_id_param(params: Any, method: str) -> str:
    """The `sessionId` of an agentls/* request; -32602 naming the method."""
    from pygls.exceptions import JsonRpcInvalidParams

    session_id = params.get("sessionId") if isinstance(params, dict) else None
    if not isinstance(session_id, str) or not session_id:
        raise JsonRpcInvalidParams(f"{method} needs `sessionId`, a non-empty string "
                                   "(from agentls/sessions or an agentls/chat result).")
    return session_id
