"""`FimSupport`: whether an OpenAI-compatible server does fill-in-the-middle
(`POST /completions` with `suffix`) for a model, found out by asking the
server, not by guessing from the model's name.

There is no standard capability listing for OpenAI-compatible servers, so:

- `providerOptions.fim` true/false decides when set (the override).
- A cheap hint first, once per server: llama.cpp's server answers
  `GET /props` (at the server root) with `default_generation_settings`, and
  its /v1/completions rejects `suffix` outright ("Unsupported param:
  suffix", sent as HTTP 500), so a llama.cpp server means "no" without a
  probe. (Its /props lists no FIM tokens; its FIM is the separate /infill.)
- Otherwise the first FIM-eligible request is the probe: it goes to
  /completions with `suffix`, without retries. A 2xx stream means yes. An
  answer saying the endpoint, the model or `suffix` is not offered means
  no, and the caller gets FimUnsupported so it sends the chat prompt for
  that same request. What servers answer (read from their sources):
    api.openai.com, a chat model   404 "This is a chat model and not
                                   supported in the v1/completions endpoint"
    api.openai.com, older models   400 "Unrecognized request argument
                                   supplied: suffix"
    vLLM                           400 "suffix is not currently supported"
    llama.cpp server               500 "Unsupported param: suffix"
    Ollama /v1, no `insert`        400 "... does not support insert"
    FastAPI-style validation       422 (extra fields not permitted)
    a server without the route     404 / 405 / 501
  llama-cpp-python's server accepts `suffix` (2xx). A server that accepts
  `suffix` and ignores it (LM Studio has no FIM: lmstudio-bug-tracker#933)
  cannot be told apart from one that uses it: `providerOptions.fim: false`.
- Auth failures (401/403), 429, timeouts, connection errors and other 5xx
  say nothing about FIM: they are reported as usual and not remembered, so
  the next request probes again.

Answers are kept per model for the provider instance (one base URL), at
most CACHE_SIZE of them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from typing import Any

from agentls.core.errors import ModelError

from .http import HttpClient, HttpStatusError

__all__ = ["CACHE_SIZE", "PROPS_TIMEOUT", "FimSupport", "says_fim_unsupported"]

logger = logging.getLogger("agentls.providers.fim_probe")

CACHE_SIZE = 64
# /props is asked before the first inline completion; it must not hold it up.
PROPS_TIMEOUT = 2.0

# Statuses that mean "this route is not here" whatever the body says.
_NO_ROUTE = frozenset({404, 405, 501})
# Statuses that mean "not offered" only when the server's words say so (a
# 400 may as well be a prompt too long or a bad max_tokens).
_MAYBE = frozenset({400, 422, 500})
_UNSUPPORTED_WORDS = re.compile(
    r"suffix|\binsert\b|unsupported|not supported|not implemented|not permitted|"
    r"extra (?:fields|inputs)|chat model|completions? endpoint",
    re.IGNORECASE,
)
_CONTEXT_WORDS = re.compile(r"context|too long|too many tokens", re.IGNORECASE)


def says_fim_unsupported(status: int, message: str) -> bool:
    """Whether an error answer to /completions with `suffix` means the
    server does not do FIM for the model (see the module doc)."""
    if status in _NO_ROUTE:
        return True
    if status not in _MAYBE or _CONTEXT_WORDS.search(message):
        return False
    if status == 500:  # llama.cpp's "Unsupported param: suffix"; other 500s are failures
        return "suffix" in message.lower()
    return bool(_UNSUPPORTED_WORDS.search(message))


def _server_root(base_url: str) -> str:
    """http://host:8080/v1 -> http://host:8080 (llama.cpp's /props is there)."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


class FimSupport:
    """What one provider instance knows about FIM on its server."""

    def __init__(self, http: HttpClient, override: Any) -> None:
        self._http = http
        self.override: bool | None = None if override is None else bool(override)
        self._answers: OrderedDict[str, bool] = OrderedDict()
        self._server_says_no: bool | None = None  # from /props; None: not asked yet
        self._props_pending: asyncio.Future[bool] | None = None
        self.probes = 0  # /completions requests sent to find out (for status and tests)

    def known(self, model: str) -> bool | None:
        """The override, else what the server said, else None (not found out)."""
        if self.override is not None:
            return self.override
        if self._server_says_no:
            return False
        return self._answers.get(model)

    def needs_probe(self, model: str) -> bool:
        return self.known(model) is None

    async def decide(self, model: str) -> bool:
        """Whether to try FIM for `model`: the known answer, else the server
        hint, else True (the request itself is the probe)."""
        known = self.known(model)
        if known is not None:
            return known
        if self._server_says_no is None:
            if self._props_pending is None:
                self._props_pending = asyncio.ensure_future(self._ask_props())
            # shield: one caller giving up must not cancel the others' answer.
            self._server_says_no = await asyncio.shield(self._props_pending)
        return not self._server_says_no

    def record(self, model: str, value: bool, why: str) -> None:
        if self._answers.get(model) is value:
            return
        logger.info("%s: fill-in-the-middle for %s at %s: %s (%s)", self._http.provider, model,
                    self._http.base_url, "yes" if value else "no", why)
        self._answers[model] = value
        self._answers.move_to_end(model)
        while len(self._answers) > CACHE_SIZE:
            self._answers.popitem(last=False)

    def learn_from(self, model: str, error: ModelError) -> bool:
        """After a failed probe: True (and remembered) when the error says
        the server has no FIM for the model; False for anything else."""
        if not isinstance(error, HttpStatusError):
            return False
        if not says_fim_unsupported(error.status, error.server_message):
            return False
        self.record(model, False, f"HTTP {error.status}: {error.server_message[:120]}")
        return True

    def status(self) -> dict[str, Any]:
        """For agentls/status: the setting and what each model got."""
        return {
            "setting": "auto" if self.override is None else self.override,
            "server": "llama.cpp (no suffix on /completions)" if self._server_says_no else None,
            "models": dict(self._answers),
            "probes": self.probes,
        }

    async def _ask_props(self) -> bool:
        """True when GET /props says the server is llama.cpp's (no `suffix`
        on /completions). Any failure or other shape: False (probe instead)."""
        url = _server_root(self._http.base_url) + "/props"
        try:
            payload = await asyncio.wait_for(
                self._http.request_json("GET", url, model="", max_attempts=1), PROPS_TIMEOUT
            )
        except (ModelError, TimeoutError) as exc:
            logger.debug("%s: no /props at %s (%s)", self._http.provider, url, exc)
            return False
        is_llama_cpp = isinstance(payload, dict) and isinstance(
            payload.get("default_generation_settings"), dict
        )
        if is_llama_cpp:
            logger.info("%s: %s is llama.cpp's server (GET /props), whose /completions takes "
                        "no `suffix`: inline completion uses chat prompts", self._http.provider,
                        self._http.base_url)
        return is_llama_cpp
