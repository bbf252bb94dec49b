"""The log's redacting filter (agentls.core.support.log_redaction); through the real
server in tests/reliability/test_transport_files.py."""

from __future__ import annotations

import logging

from agentls.core.support.log_redaction import REDACTED, SecretRedactor, secret_names


def _record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    return logging.LogRecord("x", logging.INFO, __file__, 1, message, args,
                             (type(exc), exc, None) if exc else None)


def test_registered_values_are_replaced_in_message_args_and_tracebacks() -> None:
    redactor = SecretRedactor()
    redactor.add(["header-secret-123", "short"])
    record = _record("sent %s and %s", "header-secret-123", "short",
                     exc=ValueError("echo: header-secret-123"))
    assert redactor.filter(record)
    assert record.getMessage() == f"sent {REDACTED} and short"  # too short to be a secret
    assert record.exc_text is not None and "header-secret-123" not in record.exc_text


def test_bearer_credentials_and_longer_secrets_first() -> None:
    redactor = SecretRedactor()
    redactor.add(["abcdefgh", "abcdefgh-and-more"])
    text = redactor.redact("Authorization: Bearer eyJhbGciOi.xyz abcdefgh-and-more")
    assert text == f"Authorization: Bearer {REDACTED} {REDACTED}"


def test_secret_variable_names() -> None:
    names = secret_names({"OPENAI_API_KEY": "", "GITHUB_TOKEN": "", "DB_PASSWORD": "",
                          "HOME": "", "KEYBOARD": "", "PATH": "", "MONKEY": ""})
    assert sorted(names) == ["DB_PASSWORD", "GITHUB_TOKEN", "OPENAI_API_KEY"]
