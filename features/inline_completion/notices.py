"""What to tell the user when inline completion (or next edit suggestions)
cannot work.

Only errors the user can act on become notices (a wrong baseUrl, a bad key,
a missing model, a prompt too long for the model); the editor shows each
kind once, not per keystroke. Passing trouble (rate limits, timeouts, server
errors) is only logged: the next keystroke tries again anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentls.core.editor.inline_completion import UserNotice
from agentls.core.types.errors import AgentlsError, ModelError

__all__ = ["INLINE", "NEXT_EDIT", "notice_for"]

@dataclass(frozen=True, slots=True)
class _Wording:
    key: str  # the notice key's prefix
    title: str  # what the user knows the feature as
    settings: str  # its settings section


INLINE = _Wording("inline-completion", "inline completion", "inlineCompletion")
# Next edit suggestions (features/next_edit) fail the same ways and say so in
# their own words and settings.
NEXT_EDIT = _Wording("next-edit", "next edit suggestions", "nextEdit")


def _advice(code: str, wording: _Wording) -> str | None:
    section = wording.settings
    off = f"(Set {section}.enabled to false to turn {wording.title} off.)"
    advice = {
        "connection": "No suggestions until the model server answers. " + off,
        "auth": "No suggestions until the key is accepted. " + off,
        "not_found": f"Set {section}.model (or model) to a model the server offers.",
        "context_length": "Lower inlineCompletion.maxPrefixChars and "
        "inlineCompletion.maxSuffixChars so the prompt fits the model."
        if wording is INLINE else "The prompt does not fit this model: choose a model "
        f"with a larger context window in {section}.model.",
        "bad_request": "",
        "invalid_response": "",
    }
    return advice.get(code)


def _fim_advice(wording: _Wording) -> str:
    return ("If this model has no fill-in-the-middle support, set providerOptions.fim to "
            f"false (or choose a FIM model with {wording.settings}.model).")


def notice_for(
    exc: BaseException, *, fim: bool = False, wording: _Wording = INLINE
) -> UserNotice | None:
    """The notice for a failed completion, or None when it is not for the user."""
    prefix = f"agentls {wording.title}"
    if isinstance(exc, ModelError):
        code = exc.code or "model_error"
        advice = _advice(code, wording)
        if advice is None:
            return None
        if fim and code in ("bad_request", "not_found", "invalid_response"):
            advice = f"{advice} {_fim_advice(wording)}".strip()
        severity: Literal["error", "warning"] = "warning" if code == "connection" else "error"
        message = f"{prefix}: {exc.message}"
        return UserNotice(f"{wording.key}:{code}", f"{message} {advice}".strip(), severity)
    if isinstance(exc, AgentlsError):  # the provider cannot even be built
        return UserNotice(f"{wording.key}:provider", f"{prefix}: {exc}", "error")
    return None
