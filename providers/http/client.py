"""HTTP plumbing every HTTP provider shares (openai, anthropic, ollama).

`HttpClient` owns one lazily created httpx.AsyncClient per provider instance
and gives providers three calls:

    async with http.stream_sse("POST", "/chat/completions", body=..., model=m) as events:
        async for event in events: ...          # SSEEvent(data, event, id)
    async with http.stream_ndjson("POST", "/api/chat", body=..., model=m) as values:
        async for value in values: ...          # one parsed JSON value per line
    data = await http.request_json("GET", "/models", model=m)

Failures surface as ModelError with a code (auth, not_found, rate_limit,
timeout, server_error, context_length, bad_request, connection,
invalid_response) and a message that carries the server's own words plus a
hint; API keys are redacted from every message and log line.

Rules that matter to callers:
- Retries (429, 408, 5xx, connection failures) happen only while opening
  the request, before the body is handed out, so a streamed byte is never
  replayed.
- asyncio.CancelledError is never turned into a ModelError: BaseProvider
  translates the cancellation of the consumer task into
  ProviderRequestCancelled. The `async with` closes the response, so the
  server sees the connection close.
- The SSE/NDJSON readers are our own, over `response.aiter_bytes()`, rather
  than httpx-sse: httpx-sse (like `aiter_lines`) buffers a line without
  bound and decodes with errors="replace", so it can enforce neither the
  line-size cap nor strict UTF-8.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import anyio
import httpx

from agentls.core.provider.contract import ProviderConfig
from agentls.core.types.errors import ModelError

# The error and framing helpers live in http_errors.py and http_framing.py;
# callers import them from here as before.
from agentls.providers.http.errors import (
    HINTS,
    SUMMARIES,
    HttpStatusError,
    bearer_auth,
    classify_status,
    extract_error_message,
    parse_retry_after,
    read_api_key,
    redact,
)
from agentls.providers.http.framing import LineSplitter, ResponseFormatError, SSEDecoder, SSEEvent

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "MAX_RETRY_AFTER",
    "HttpClient",
]

logger = logging.getLogger("agentls.providers.http.client")

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_LINE_BYTES = 1 << 20  # one SSE/NDJSON line; real chunks are < 10 KiB
DEFAULT_MAX_RESPONSE_BYTES = 64 << 20  # a whole response; bounds memory, not time
MAX_RETRY_AFTER = 30.0  # longer waits help nobody typing in an editor
_ERROR_BODY_BYTES = 64 << 10  # error bodies are read only this far
_BASE_DELAY = 0.5
_MAX_DELAY = 8.0

_RETRYABLE_TRANSPORT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


# --------------------------------------------------------------------------- client


def _split_userinfo(url: str) -> tuple[tuple[str, str] | None, str]:
    """((user, password) from the URL, or None; the URL without them)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return None, url
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return (unquote(user), unquote(password)), urlunsplit(parts._replace(netloc=host))


def _option(options: Mapping[str, Any], snake: str, camel: str, default: int) -> int:
    value = options.get(snake, options.get(camel, default))
    return int(value) if isinstance(value, int | float | str) and str(value).strip() else default


class HttpClient:
    """One provider's HTTP side: base URL, key lookup, retries, error mapping.

    Options read from ProviderConfig.options (snake_case or camelCase):
    max_attempts (3), max_line_bytes (1 MiB), max_response_bytes (64 MiB).
    """

    def __init__(
        self,
        config: ProviderConfig,
        *,
        provider: str,
        default_base_url: str,
        default_api_key_env: str | None = None,
        auth_headers: Callable[[str], dict[str, str]] = bearer_auth,
        hints: Mapping[str, str] | None = None,
    ) -> None:
        self.provider = provider
        # Credentials in baseUrl (http://user:pass@proxy/v1) are sent as Basic
        # auth, as httpx does with them, but kept out of base_url, which every
        # error message and agentls/status show.
        credentials, self.base_url = _split_userinfo(
            (config.base_url or default_base_url).rstrip("/"))
        self._url_password = credentials[1] if credentials else None
        self._url_auth = httpx.BasicAuth(*credentials) if credentials else None
        self.api_key_env = config.api_key_env or default_api_key_env
        self.connect_timeout = config.connect_timeout
        self.read_timeout = config.request_timeout
        self.max_attempts = max(1, _option(config.options, "max_attempts", "maxAttempts", 3))
        self.max_line_bytes = _option(
            config.options, "max_line_bytes", "maxLineBytes", DEFAULT_MAX_LINE_BYTES
        )
        self.max_response_bytes = _option(
            config.options, "max_response_bytes", "maxResponseBytes", DEFAULT_MAX_RESPONSE_BYTES
        )
        self._auth_headers = auth_headers
        self._hints = {**HINTS, **(hints or {})}
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:  # never shows a key (not held) or the URL password
        return f"HttpClient(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- small helpers ---------------------------------------------------------
    def api_key(self) -> str | None:
        return read_api_key(self.api_key_env)

    def url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path  # e.g. a server-root route when baseUrl ends in /v1
        return f"{self.base_url}/{path.lstrip('/')}"

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(
                connect=self.connect_timeout,
                read=self.read_timeout,
                write=self.read_timeout,
                pool=self.connect_timeout,
            )
            self._client = httpx.AsyncClient(
                timeout=timeout, auth=self._url_auth, verify=self._tls_context())
        return self._client

    def _tls_context(self) -> ssl.SSLContext | bool:
        """The default verification for https endpoints. A plain-http endpoint
        (a local server: llama.cpp, Ollama, vLLM) never uses TLS (redirects are
        not followed), so it gets a context with verification on and no CA
        certificates loaded: any TLS use would fail closed, and loading
        certifi's bundle (~20 ms, ~1 MiB at the first request) is skipped."""
        if urlsplit(self.base_url).scheme.lower() == "https":
            return True
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def error(
        self, code: str, detail: str, *, model: str, url: str | None = None, attempts: int = 1
    ) -> ModelError:
        """A ModelError in the house style: what failed, the server's words,
        a hint; keys redacted. Providers use it for in-stream errors too."""
        where = f" ({url})" if url else ""
        hint_key = "auth_missing" if code == "auth" and self.api_key() is None else code
        hint = self._hints.get(hint_key, "").format(
            provider=self.provider,
            model=model,
            base_url=self.base_url,
            env=self.api_key_env or "(none configured)",
            attempts=attempts,
            timeout=self.read_timeout,
        )
        summary = SUMMARIES.get(code, "request failed")
        message = f"{self.provider}: {summary}{where}: {detail}".rstrip(": ")
        if hint:
            message = f"{message}. {hint}" if not message.endswith(".") else f"{message} {hint}"
        return ModelError(self.redact(message), model=model, code=code)

    def error_from_body(self, payload: Any, *, model: str, status: int = 400) -> ModelError:
        """A ModelError for an error the server sent as data (an HTTP error
        body, or an error event inside a 200 stream)."""
        message, error_code = extract_error_message(payload)
        code = classify_status(status, message, error_code)
        if status < 400 and code == "bad_request":
            code = "server_error"  # a mid-stream failure is the server's, not ours
        return self.error(code, message or f"HTTP {status}", model=model)

    def redact(self, text: str) -> str:
        return redact(text, [self.api_key(), self._url_password])

    # -- public calls ----------------------------------------------------------
    @asynccontextmanager
    async def stream_sse(
        self,
        method: str,
        path: str,
        *,
        model: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        max_attempts: int | None = None,
    ) -> AsyncIterator[AsyncIterator[SSEEvent]]:
        """Open a streaming request and yield its server-sent events
        (max_attempts: instead of the configured number, e.g. 1 for a probe
        whose failure is an answer, not something to wait out)."""
        headers = {"Accept": "text/event-stream", **(headers or {})}
        async with self._open(method, path, model=model, body=body, headers=headers,
                              max_attempts=max_attempts) as response:
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("application/json"):
                # The server ignored stream=true, or sent an error as JSON with 200.
                raw = await self._read_capped(response, _ERROR_BODY_BYTES)
                if b'"error"' in raw:
                    raise self.error_from_body(raw, model=model, status=response.status_code)
                raise self.error(
                    "invalid_response",
                    f"expected an event stream, got JSON: {raw[:200]!r}",
                    model=model,
                    url=str(response.url),
                )
            events = self._events(response, model)
            try:
                yield events
            finally:
                await events.aclose()

    @asynccontextmanager
    async def stream_ndjson(
        self,
        method: str,
        path: str,
        *,
        model: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[AsyncIterator[Any]]:
        """Open a streaming request and yield one parsed JSON value per line."""
        headers = {"Accept": "application/x-ndjson", **(headers or {})}
        async with self._open(method, path, model=model, body=body, headers=headers) as response:
            values = self._ndjson(response, model)
            try:
                yield values
            finally:
                await values.aclose()

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        model: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        max_attempts: int | None = None,
    ) -> Any:
        """A non-streaming call returning the parsed JSON body (size-capped)."""
        headers = {"Accept": "application/json", **(headers or {})}
        async with self._open(method, path, model=model, body=body, headers=headers,
                              max_attempts=max_attempts) as response:
            url = str(response.url)
            try:
                raw = await self._read_capped(response, self.max_response_bytes, strict=True)
                return json.loads(raw.decode("utf-8"))
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, url, model) from exc
            except (ValueError, ResponseFormatError) as exc:  # JSON and UTF-8 errors
                raise self.error("invalid_response", str(exc), model=model, url=url) from None

    # -- internals -------------------------------------------------------------
    @asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        model: str,
        body: Any,
        headers: Mapping[str, str],
        max_attempts: int | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """Send with retries; yield a 2xx response with its body unread, and
        close it on exit (also on cancellation, so the server sees it)."""
        attempts_allowed = max_attempts or self.max_attempts
        url = self.url(path)
        key = self.api_key()
        all_headers = {**headers, **(self._auth_headers(key) if key else {})}
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self.client().build_request(method, url, json=body, headers=all_headers)
                response = await self.client().send(request, stream=True)
            except httpx.HTTPError as exc:
                error = self._transport_error(exc, url, model, attempts=attempt)
                if attempt < attempts_allowed and isinstance(exc, _RETRYABLE_TRANSPORT):
                    await self._backoff(attempt, None, f"{type(exc).__name__} from {url}")
                    continue
                raise error from exc
            except httpx.InvalidURL as exc:
                raise self.error("connection", f"invalid URL {url!r}: {exc}", model=model) from exc
            if response.is_success:
                break
            try:
                raw = await self._read_capped(response, _ERROR_BODY_BYTES)
            finally:
                await response.aclose()
            message, error_code = extract_error_message(raw)
            code = classify_status(response.status_code, message, error_code)
            retryable = response.status_code in (408, 429) or response.status_code >= 500
            retry_after = parse_retry_after(response.headers)
            # A server asking us to wait longer than the request timeout is not
            # waited out: the caller (an editor) configured how long a request
            # may take, and retrying earlier than asked would be refused anyway.
            too_long = retry_after is not None and retry_after > self.read_timeout
            if retryable and attempt < attempts_allowed and not too_long:
                await self._backoff(attempt, retry_after, f"HTTP {response.status_code} from {url}")
                continue
            detail = f"HTTP {response.status_code}" + (f": {message}" if message else "")
            if retryable and too_long and attempt < attempts_allowed:
                detail += (f"; the server asked to retry after {retry_after:g} s, longer than "
                           f"the request timeout ({self.read_timeout:g} s)")
            raise HttpStatusError(
                self.error(code, detail, model=model, url=url, attempts=attempt),
                status=response.status_code,
                server_message=self.redact(message),
            )
        try:
            yield response
        finally:
            await response.aclose()

    async def _backoff(self, attempt: int, retry_after: float | None, why: str) -> None:
        if retry_after is not None:
            # Never earlier than asked; a little jitter so clients do not stampede.
            delay = min(retry_after, MAX_RETRY_AFTER) * (1 + 0.1 * random.random())
        else:
            # Never longer than the request timeout (see _open).
            ceiling = min(_MAX_DELAY, _BASE_DELAY * 2 ** (attempt - 1), self.read_timeout)
            delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        logger.warning(
            "%s: %s; retrying in %.2f s (attempt %d of %d)",
            self.provider,
            self.redact(why),
            delay,
            attempt + 1,
            self.max_attempts,
        )
        await anyio.sleep(delay)

    def _transport_error(
        self, exc: httpx.HTTPError, url: str, model: str, *, attempts: int = 1
    ) -> ModelError:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            detail = f"could not connect within {self.connect_timeout:g} s"
            return self.error("connection", detail, model=model, url=url, attempts=attempts)
        if isinstance(exc, httpx.TimeoutException):
            return self.error("timeout", "read timed out", model=model, url=url)
        if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol):
            return self.error("connection", reason, model=model, url=url, attempts=attempts)
        if isinstance(exc, httpx.TransportError):
            detail = f"connection closed mid-response ({reason})"
            return self.error("connection", detail, model=model, url=url, attempts=attempts)
        return self.error("invalid_response", reason, model=model, url=url)

    async def _read_capped(
        self, response: httpx.Response, limit: int, *, strict: bool = False
    ) -> bytes:
        """Up to `limit` bytes of the body; with strict, more is an error."""
        data = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    if strict:
                        raise ResponseFormatError(
                            f"response larger than {limit} bytes (max_response_bytes)"
                        )
                    break
        except httpx.HTTPError:
            if strict:
                raise
        return bytes(data[:limit])

    async def _lines(self, response: httpx.Response, model: str) -> AsyncGenerator[str, None]:
        url = str(response.url)
        splitter = LineSplitter(
            max_line_bytes=self.max_line_bytes, max_total_bytes=self.max_response_bytes
        )
        try:
            async for chunk in response.aiter_bytes():
                for line in splitter.feed(chunk):
                    yield line
            for line in splitter.close():
                yield line
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, url, model) from exc
        except ResponseFormatError as exc:
            raise self.error("invalid_response", str(exc), model=model, url=url) from None

    async def _events(self, response: httpx.Response, model: str) -> AsyncGenerator[SSEEvent, None]:
        decoder = SSEDecoder()
        lines = self._lines(response, model)
        try:
            async for line in lines:
                event = decoder.feed(line)
                if event is not None:
                    yield event
        finally:
            await lines.aclose()

    async def _ndjson(self, response: httpx.Response, model: str) -> AsyncGenerator[Any, None]:
        lines = self._lines(response, model)
        try:
            async for line in lines:
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as exc:
                    raise self.error(
                        "invalid_response",
                        f"a line is not JSON ({exc}): {line[:200]!r}",
                        model=model,
                        url=str(response.url),
                    ) from None
                yield value
        finally:
            await lines.aclose()
