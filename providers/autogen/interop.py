"""Speaking real autogen types when the caller does (optional autogen).

agentls' model client works without autogen, on the look-alike types of
`agentls.core.compat.autogen_types`. An autogen agent (autogen-agentchat's
AssistantAgent) checks results with isinstance against autogen's own
classes (CreateResult, FunctionCall), so when the messages it passes in are
autogen objects the result is converted to autogen's classes. autogen is
never imported here: only a module the caller already loaded is used.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["as_autogen_result", "autogen_models", "register_with_autogen", "speaks_autogen"]

_registered: set[type] = set()


def autogen_models() -> ModuleType | None:
    """`autogen_core.models` when the process has loaded it, else None."""
    return sys.modules.get("autogen_core.models")


def speaks_autogen(messages: Sequence[Any]) -> bool:
    """True when the caller passed autogen's own message objects."""
    return autogen_models() is not None and any(
        type(m).__module__.startswith("autogen_core") for m in messages
    )


def as_autogen_result(result: Any) -> Any:
    """An agentls CreateResult as autogen's CreateResult (same fields)."""
    models = autogen_models()
    if models is None:
        return result
    return models.CreateResult.model_validate(result.model_dump())


def register_with_autogen(cls: type) -> None:
    """Make `cls` a virtual subclass of autogen's ChatCompletionClient (an
    ABC), so isinstance checks against autogen's class accept it."""
    models = autogen_models()
    if models is None or cls in _registered:
        return
    models.ChatCompletionClient.register(cls)
    _registered.add(cls)
