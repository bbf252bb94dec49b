"""The local model child's bearer token (providers/local/worker.py,
RequireToken): its loopback port is open to every local user, so only
requests with the token reach the model; the engine's counters stay open."""

from __future__ import annotations

from typing import Any

import pytest

from agentls.providers.local.worker import RequireToken

TOKEN = "s3cret-token-of-the-child-0123456789"


async def call(path: str, method: str = "POST", auth: str | None = None) -> tuple[int, bool]:
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    headers = [(b"authorization", auth.encode())] if auth is not None else []
    scope = {"type": "http", "path": path, "method": method, "headers": headers}
    await RequireToken(app, TOKEN)(scope, receive, send)
    return sent[0]["status"], bool(reached)


@pytest.mark.parametrize("auth", [None, "", "Bearer", "Bearer wrong", f"Basic {TOKEN}",
                                  f"Bearer {TOKEN}x", f"bearer {TOKEN[:-1]}"])
async def test_a_request_without_the_token_reaches_nothing(auth: str | None) -> None:
    assert await call("/v1/completions", auth=auth) == (401, False)
    assert await call("/v1/models", "GET", auth=auth) == (401, False)


async def test_the_token_lets_a_request_through_and_the_counters_are_open() -> None:
    assert await call("/v1/completions", auth=f"Bearer {TOKEN}") == (200, True)
    assert await call("/agentls/engine", "GET") == (200, True)
    assert await call("/agentls/engine", "POST") == (401, False)
