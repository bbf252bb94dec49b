"""What to tell the user when inline completion cannot work.

Only errors the user can act on become notices (a wrong baseUrl, a bad key,
a missing model, a prompt too long for the model); the editor shows each
kind once, not per keystroke. Passing trouble (rate limits, timeouts, server
errors) is only logged: the next keystroke tries again anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentls.core.models import AgentlsError, ModelError

__all__ = ["UserNotice", "notice_for"]

_PREFIX = "agentls inline completion"
_OFF = "(Set inlineCompletion.enabled to false to turn inline completion off.)"

_ADVICE = {
    "connection": "No suggestions until the model server answers. " + _OFF,
    "auth": "No suggestions until the key is accepted. " + _OFF,
    "not_found": "Set inlineCompletion.model (or model) to a model the server offers.",
    "context_length": "Lower inlineCompletion.maxPrefixChars and "
    "inlineCompletion.maxSuffixChars so the prompt fits the model.",
    "bad_request": "",
    "invalid_response": "",
}
_FIM_ADVICE = (
    "If this model has no fill-in-the-middle support, set providerOptions.fim to false "
    "(or choose a FIM model with inlineCompletion.model)."
)


@dataclass(frozen=True, slots=True)
class UserNotice:
    key: str  # shown once per key
    message: str
    severity: Literal["error", "warning"]


def notice_for(exc: BaseException, *, fim: bool = False) -> UserNotice | None:
    """The notice for a failed completion, or None when it is not for the user."""
    if isinstance(exc, ModelError):
        code = exc.code or "model_error"
        if code not in _ADVICE:
            return None
        advice = _ADVICE[code]
        if fim and code in ("bad_request", "not_found", "invalid_response"):
            advice = f"{advice} {_FIM_ADVICE}".strip()
        severity: Literal["error", "warning"] = "warning" if code == "connection" else "error"
        message = f"{_PREFIX}: {exc.message}"
        return UserNotice(f"inline-completion:{code}", f"{message} {advice}".strip(), severity)
    if isinstance(exc, AgentlsError):  # the provider cannot even be built
        return UserNotice("inline-completion:provider", f"{_PREFIX}: {exc}", "error")
    return None
