"""What the HTTP layer says when a model server fails: the server's error
body read in any dialect, the HTTP status classified into a ModelError code,
the summary and hint of each code, Retry-After, and the redaction that
keeps API keys out of every message. HttpClient (http.py) builds its errors
from these.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from agentls.core.types.errors import ModelError

__all__ = [
    "HINTS",
    "SUMMARIES",
    "HttpStatusError",
    "bearer_auth",
    "classify_status",
    "extract_error_message",
    "parse_retry_after",
    "read_api_key",
    "redact",
]

_REDACTED = "[redacted]"

# Phrases servers use for "the prompt does not fit" (OpenAI, vLLM, llama.cpp,
# Anthropic, Ollama); a 4xx with one of these is context_length.
_CONTEXT_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the available context",
)


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every occurrence of each secret in `text` with "[redacted]".

    Very short values are skipped: redacting "a" would shred the message and
    nothing that short is a real key.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, _REDACTED)
    return text


def read_api_key(env_var: str | None) -> str | None:
    """The key in `env_var`, read now (never cached, never stored); None if unset/blank."""
    if not env_var:
        return None
    value = os.environ.get(env_var, "").strip()
    return value or None


def bearer_auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms` (OpenAI), or
    `Retry-After` as seconds or an HTTP date. None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def extract_error_message(body: bytes | str | Any) -> tuple[str, str]:
    """(message, machine code) from an error body, whatever its dialect:
    {"error": {"message", "code"|"type"}} (OpenAI, Anthropic), {"error": "..."}
    (Ollama, llama.cpp), {"message"} / {"detail"} (FastAPI, vLLM), or text."""
    payload: Any = body
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            payload = json.loads(text)
        except ValueError:
            return " ".join(text.split())[:500], ""
    if not isinstance(payload, dict):
        return str(payload)[:500], ""
    error = payload.get("error", payload)
    if isinstance(error, str):
        return error[:500], ""
    if not isinstance(error, dict):
        return json.dumps(payload)[:500], ""
    message = error.get("message") or error.get("detail") or error.get("msg") or ""
    if not isinstance(message, str):
        message = json.dumps(message)
    code = error.get("code") or error.get("type") or ""
    return message[:500], str(code)


def classify_status(status: int, message: str = "", error_code: str = "") -> str:
    """The ModelError code for an HTTP error status (see module doc)."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    words = f"{message} {error_code}".lower()
    if any(phrase in words for phrase in _CONTEXT_WORDS):
        return "context_length"
    return "bad_request"


SUMMARIES = {
    "auth": "authentication failed",
    "not_found": "not found",
    "rate_limit": "rate limited",
    "timeout": "timed out",
    "server_error": "server error",
    "context_length": "input too long for the model",
    "bad_request": "request rejected",
    "connection": "cannot reach the server",
    "invalid_response": "invalid response",
}

# Hints name the setting to change; providers may replace any of them.
# Fields: {provider} {model} {base_url} {env} {attempts} {timeout}.
HINTS = {
    "auth": "Check the API key in the environment variable {env} "
    "(or set apiKeyEnv to the variable that holds it).",
    "auth_missing": "No API key: the environment variable {env} is not set "
    "(set it, or set apiKeyEnv to the variable that holds the key).",
    "not_found": "Model {model!r} (or the endpoint) does not exist there: list the "
    "models the server offers (agentls/models) and set `model` to one of them, "
    "and check baseUrl ({base_url}).",
    "rate_limit": "Gave up after {attempts} attempt(s); wait a moment, or check the "
    "account's rate limits and quota.",
    "timeout": "No data within {timeout:g} s; the model may be overloaded or too slow "
    "for this timeout.",
    "server_error": "Gave up after {attempts} attempt(s); try again later.",
    "context_length": "The conversation does not fit the model's context window: start "
    "a new session or send less context.",
    "bad_request": "The server rejected the request as sent.",
    "connection": "Check baseUrl ({base_url}) and that the server is running.",
    "invalid_response": "Check that baseUrl ({base_url}) points at a {provider}-compatible API.",
}


class HttpStatusError(ModelError):
    """The server answered with an HTTP error status. Besides the house-style
    message, `status` and the server's own `server_message` let a caller
    tell "this endpoint or parameter is not offered" from other failures
    (see fim_probe.py)."""

    def __init__(
        self, error: ModelError, *, status: int, server_message: str
    ) -> None:
        super().__init__(error.message, model=error.model, code=error.code)
        self.status = status
        self.server_message = server_message
