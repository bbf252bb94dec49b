"""Inside the model's child process: a `json_schema` field on a
`/v1/completions` request becomes the GBNF `grammar` llama-cpp-python's
server takes, converted by llama-cpp-python's own schema converter.

Its OpenAI server constrains chat completions by `response_format`, but a
raw-prompt completion (how agentls sends a chat template it rendered itself,
chat_tools.native_request) takes only a GBNF string; the parent does not
import llama_cpp, so the child converts. Conversions are cached by schema
(a turn sends the same tool schemas on every call).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

FIELD = "json_schema"
_PATH = "/v1/completions"
_CACHE_SIZE = 16


class SchemaGrammar:
    """ASGI middleware: rewrites the body of a POST /v1/completions that
    carries `json_schema` (a JSON Schema object) into one with `grammar`;
    any other request passes untouched. A schema the converter rejects is
    answered 400 with the converter's reason."""

    def __init__(self, app: App, convert: Callable[[str], str]) -> None:
        self.app = app
        self.convert = convert
        self._cache: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or \
                scope.get("path") != _PATH:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            payload = json.loads(body) if FIELD.encode() in body else None
        except ValueError:
            payload = None  # the server itself answers a body it cannot parse
        if isinstance(payload, dict) and FIELD in payload:
            try:
                payload["grammar"] = self._grammar(payload.pop(FIELD))
            except Exception as exc:  # the converter's own errors vary
                await _bad_request(send, f"json_schema: {exc}")
                return
            body = json.dumps(payload).encode()
            scope = dict(scope)
            scope["headers"] = [(k, v) for k, v in scope.get("headers", [])
                                if k.lower() != b"content-length"]
            scope["headers"].append((b"content-length", str(len(body)).encode()))
        await self.app(scope, _replay([{"type": "http.request", "body": body,
                                        "more_body": False}], then=receive), send)

    def _grammar(self, schema: Any) -> str:
        key = json.dumps(schema, sort_keys=True)
        found = self._cache.get(key)
        if found is None:
            found = self.convert(json.dumps(schema))
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = found
        return found


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A receive() that hands out `messages`, then defers to `then` (a
    client disconnect arrives there)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive


async def _bad_request(send: Send, message: str) -> None:
    await send_json(send, 400, {"error": {"message": message, "type": "invalid_request_error"}})


async def send_json(send: Send, status: int, payload: Any) -> None:
    """A whole JSON response from an ASGI middleware of the child."""
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
