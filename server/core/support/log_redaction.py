"""Secrets never reach the log: a logging filter that replaces them.

Two kinds of secret are known to the process: values it was handed to send
somewhere (an MCP server's header and `env` values, registered with
`register_secret` where they are resolved) and the values of environment
variables whose names say they hold one (`*_KEY`, `*TOKEN*`, `*SECRET*`,
`*PASSWORD*`, `*AUTH*`, `*CRED*`; registered at start-up with
`register_environment`). Any of them in a log record's message or traceback
is replaced by `<redacted>`, whatever logger wrote it (ours, the MCP SDK,
httpx, pygls). Besides the known values, `Authorization: Bearer ...`-shaped
text is redacted too.

The filter goes on the log handlers (cli.py), so every record that is
written passes it.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"
# Shorter values would redact ordinary words and numbers.
MIN_SECRET_CHARS = 8
_SECRET_NAME = re.compile(r"(^|_)(API_?)?KEY$|TOKEN|SECRET|PASSW(OR)?D|AUTH|CRED|COOKIE",
                          re.IGNORECASE)
_BEARER = re.compile(r"(\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)


class SecretRedactor(logging.Filter):
    """Replaces registered secret values in every record it sees."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS}
        with self._lock:
            if fresh <= self._secrets:
                return
            self._secrets |= fresh
            # Longest first, so a secret containing another is replaced whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def redact(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler's error path
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


# One per process: log handlers are per process too.
REDACTOR = SecretRedactor()


def register_secret(*values: str) -> None:
    """Values that must never be logged (header values, credentials)."""
    REDACTOR.add(values)


def secret_names(environ: Mapping[str, str]) -> list[str]:
    return [name for name in environ if _SECRET_NAME.search(name)]


def register_environment(environ: Mapping[str, str] = os.environ) -> None:
    """The values of variables whose names say they hold a secret."""
    REDACTOR.add(environ[name] for name in secret_names(environ))
