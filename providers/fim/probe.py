"""`FimSupport`: how a server is sent fill-in-the-middle requests for a
model (a core `FimPlan`), found out by asking the server, not trusted from
what it accepts.

Three prompt forms, best first:

1. **suffix**: the engine's own FIM (`suffix` on /completions or Ollama's
   /api/generate). Servers accept `suffix` without doing FIM with it:
   llama-cpp-python's OpenAI server builds its FIM prompt with token ids
   hard-coded to 0 (the model sees padding and writes past the hole), LM
   Studio ignores it (lmstudio-bug-tracker#933). So it is used only after a
   known-answer probe (fim_templates.PROBE_*: a hole whose only correct
   fill is a name the suffix defines) came back right. A server that says
   it has no `suffix` is not probed: llama.cpp's server (`GET /props`
   answers with `default_generation_settings`; its /v1/completions rejects
   `suffix`), an Ollama model whose template takes none (no `insert`).
2. **template**: the model's own FIM tokens in a raw prompt, with its stop
   tokens (fim_templates.py). The family comes from the server's tokenizer
   where it has one (llama.cpp and vLLM `POST /tokenize`,
   llama-cpp-python `POST /extras/tokenize`: each FIM token must be one
   token), from the model's template (Ollama's /api/show), else from the
   model's name (a table of code-model families).
3. **continuation**: the prefix alone; the suffix only trims the answer.

And "none" (chat prompts) when the server has no raw completion for the
model at all: api.openai.com's 404 "This is a chat model", a route that is
not there. `providerOptions.fim` overrides: true or "suffix", "template",
"continuation", false (chat prompts).

Probe failures that say nothing about FIM (auth, 429, 5xx, a timeout) give
a plan for now that is asked again after RETRY_SECONDS. Plans are kept per
model for the provider instance, at most CACHE_SIZE of them; concurrent
first requests share one finding-out.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from agentls.core.provider.contract import FimPlan
from agentls.core.types.errors import ModelError
from agentls.providers.fim.templates import FAMILIES, FimTokens, family_by_name, probe_verdict
from agentls.providers.http.client import HttpClient
from agentls.providers.http.errors import HttpStatusError

__all__ = [
    "CACHE_SIZE",
    "PROBE_MAX_TOKENS",
    "PROBE_TIMEOUT",
    "PROPS_TIMEOUT",
    "RETRY_SECONDS",
    "FimSupport",
    "name_family",
    "props_say_llama_cpp",
    "rejection",
    "says_fim_unsupported",
    "server_root",
    "tokenizer_family",
]

logger = logging.getLogger("agentls.providers.fim.probe")

CACHE_SIZE = 64
# /props and /tokenize are asked before the first inline completion; they
# must not hold it up.
PROPS_TIMEOUT = 2.0
# The probe generates a few tokens: a CPU model loading its weights first is slow.
PROBE_TIMEOUT = 30.0
PROBE_MAX_TOKENS = 16
RETRY_SECONDS = 60.0

# Statuses that mean "this route is not here" whatever the body says.
_NO_ROUTE = frozenset({404, 405, 501})
# Statuses that mean "not offered" only when the server's words say so (a
# 400 may as well be a prompt too long or a bad max_tokens).
_MAYBE = frozenset({400, 422, 500})
_SUFFIX_WORDS = re.compile(r"suffix|\binsert\b|extra (?:fields|inputs)", re.IGNORECASE)
_UNSUPPORTED_WORDS = re.compile(
    r"unsupported|not supported|not implemented|not permitted|chat model|"
    r"completions? endpoint", re.IGNORECASE,
)
_CONTEXT_WORDS = re.compile(r"context|too long|too many tokens", re.IGNORECASE)


def rejection(status: int, message: str) -> str | None:
    """What an error answer to /completions with `suffix` means:
    "no_suffix" (raw completion works, `suffix` does not: vLLM, llama.cpp,
    older OpenAI models, Ollama's /v1 without `insert`, FastAPI validation),
    "no_completions" (no raw completion for the model: a chat model, a
    missing route), or None (a failure that says nothing about FIM)."""
    if status in _NO_ROUTE:
        return "no_completions"
    if status not in _MAYBE or _CONTEXT_WORDS.search(message):
        return None
    if status == 500:  # llama.cpp's "Unsupported param: suffix"; other 500s are failures
        return "no_suffix" if "suffix" in message.lower() else None
    if _SUFFIX_WORDS.search(message):
        return "no_suffix"
    return "no_completions" if _UNSUPPORTED_WORDS.search(message) else None


def says_fim_unsupported(status: int, message: str) -> bool:
    """Whether an error answer to a request with `suffix` means the server
    does not do the engine's FIM for the model."""
    return rejection(status, message) is not None


def server_root(base_url: str) -> str:
    """http://host:8080/v1 -> http://host:8080 (llama.cpp's /props is there)."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


async def tokenizer_family(count: Callable[[str], Awaitable[int | None]]
                           ) -> tuple[FimTokens | None, bool]:
    """The FIM family a server's tokenizer knows: the first of the table
    whose FIM tokens are each a single token, with the stops that are
    single tokens too. (family or None, whether the tokenizer answered)."""
    first = await count(FAMILIES[0][0].prefix)
    if first is None:
        return None, False
    single: dict[str, bool] = {FAMILIES[0][0].prefix: first == 1}

    async def one(text: str) -> bool:
        if text not in single:
            single[text] = await count(text) == 1
        return single[text]

    for tokens, _ in FAMILIES:
        needed = [tokens.prefix, tokens.suffix, *([tokens.middle] if tokens.middle else [])]
        single_all = True
        for token in needed:  # one at a time: most vocabularies fail the first
            if not await one(token):
                single_all = False
                break
        if not single_all:
            continue
        if tokens.family == "qwen2.5-coder" and await one("<|file_separator|>"):
            continue  # CodeGemma spells FIM as Qwen does; next in the table
        stops = tuple([stop for stop in tokens.stops if await one(stop)])
        return FimTokens(tokens.prefix, tokens.suffix, tokens.middle, tokens.family,
                         tokens.suffix_first, stops), True
    return None, True


class FimSupport:
    """What one provider instance knows about FIM on its server.

    The provider supplies three questions (async, per model):
    `suffix_blocked` (a reason the engine's FIM is not there without
    probing, or None), `probe` (the text the engine fills into the probe's
    hole through `suffix`; raises ModelError) and `find_tokens` (the
    model's FIM tokens and where they came from)."""

    def __init__(
        self,
        provider: str,
        override: Any,
        *,
        suffix_blocked: Callable[[str], Awaitable[str | None]],
        probe: Callable[[str], Awaitable[str]],
        find_tokens: Callable[[str], Awaitable[tuple[FimTokens | None, str]]],
    ) -> None:
        self.provider = provider
        self.override = _override(override)
        self._suffix_blocked = suffix_blocked
        self._probe = probe
        self._find_tokens = find_tokens
        # model -> (plan, its tokens, retry at (monotonic) or None: for good)
        self._plans: OrderedDict[str, tuple[FimPlan, FimTokens | None, float | None]] = (
            OrderedDict())
        self._pending: dict[str, asyncio.Future[tuple[FimPlan, FimTokens | None]]] = {}
        self.probes = 0  # known-answer probes sent (for status and tests)

    # -- answers ---------------------------------------------------------------
    def known(self, model: str) -> FimPlan | None:
        """The plan found out for `model` (the override's without asking),
        or None when not found out yet (or due to be asked again)."""
        if self.override in (True, False):
            return _override_plan(self.override)
        entry = self._plans.get(model)
        if entry is None or (entry[2] is not None and time.monotonic() >= entry[2]):
            return None
        return entry[0]

    def tokens(self, model: str) -> FimTokens | None:
        entry = self._plans.get(model)
        return entry[1] if entry is not None else None

    async def plan(self, model: str) -> FimPlan:
        """How to send `model` FIM requests: the override, else what the
        server showed (found out once, shared by concurrent callers)."""
        known = self.known(model)
        if known is not None:
            return known
        pending = self._pending.get(model)
        if pending is None:
            pending = asyncio.ensure_future(self._find_out(model))
            self._pending[model] = pending
            pending.add_done_callback(lambda _: self._pending.pop(model, None))
        # shield: one caller giving up must not cancel the others' answer.
        plan, _ = await asyncio.shield(pending)
        return plan

    def status(self) -> dict[str, Any]:
        """For agentls/status: the setting and each model's plan."""
        setting: Any = "auto" if self.override is None else self.override
        return {
            "setting": setting,
            "models": {model: entry[0].to_wire() for model, entry in self._plans.items()},
            "probes": self.probes,
        }

    # -- finding out -------------------------------------------------------------
    async def _find_out(self, model: str) -> tuple[FimPlan, FimTokens | None]:
        retry: float | None = None
        if self.override in ("template", "continuation"):
            return await self._fallback(model, f"providerOptions.fim is {self.override!r}",
                                        only=self.override), None
        blocked = await self._suffix_blocked(model)
        if blocked is not None:
            why = blocked
        else:
            self.probes += 1
            try:
                text = await asyncio.wait_for(self._probe(model), PROBE_TIMEOUT)
            except (ModelError, TimeoutError) as exc:
                kind = (rejection(exc.status, exc.server_message)
                        if isinstance(exc, HttpStatusError) else None)
                detail = exc.message if isinstance(exc, ModelError) else "no answer in time"
                if kind == "no_completions":
                    plan = FimPlan("none", f"no raw completion for {model} at this server "
                                   f"({detail[:160]}): chat prompts")
                    return self._keep(model, plan, None, None)
                if kind == "no_suffix":
                    why = f"the server refuses `suffix` ({detail[:120]})"
                else:
                    code = exc.code if isinstance(exc, ModelError) else "timeout"
                    why = (f"the FIM probe failed ({code}); asked again in "
                           f"{RETRY_SECONDS:.0f} s")
                    retry = time.monotonic() + RETRY_SECONDS
            else:
                honoured, verdict = probe_verdict(text)
                if honoured:
                    plan = FimPlan("suffix", f"the server's own FIM (`suffix`) {verdict} "
                                   "(known-answer probe)")
                    return self._keep(model, plan, None, None)
                why = f"the server accepts `suffix` but does not fill by it: {verdict}"
        tokens, where = await self._find_tokens(model)
        if tokens is not None:
            plan = FimPlan("template", f"{tokens.family} FIM tokens ({where}) in a raw prompt; "
                           f"not `suffix`: {why}", tokens.family)
        else:
            plan = FimPlan("continuation", f"no FIM tokens known for {model} ({where}): the "
                           f"prefix alone; not `suffix`: {why}")
        return self._keep(model, plan, tokens, retry)

    async def _fallback(self, model: str, why: str, *, only: str) -> FimPlan:
        if only == "template":
            tokens, where = await self._find_tokens(model)
            if tokens is not None:
                plan = FimPlan("template", f"{why}: {tokens.family} FIM tokens ({where})",
                               tokens.family)
                return self._keep(model, plan, tokens, None)[0]
            why = f"{why}, but no FIM tokens are known for {model} ({where})"
        return self._keep(model, FimPlan("continuation", f"{why}: the prefix alone"), None,
                          None)[0]

    def _keep(self, model: str, plan: FimPlan, tokens: FimTokens | None,
              retry: float | None) -> tuple[FimPlan, FimTokens | None]:
        previous = self._plans.get(model)
        if previous is None or previous[0] != plan:
            logger.info("%s: fill-in-the-middle for %s: %s (%s)", self.provider, model,
                        plan.form, plan.why)
        self._plans[model] = (plan, tokens, retry)
        self._plans.move_to_end(model)
        while len(self._plans) > CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan, tokens


def _override(value: Any) -> bool | str | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("template", "continuation"):
        return text
    if text in ("true", "false", "suffix"):
        return text != "false"
    logger.warning("providerOptions.fim %r: use true, false, \"suffix\", \"template\" or "
                   "\"continuation\"; finding out instead", value)
    return None


def _override_plan(value: bool) -> FimPlan:
    if value:
        return FimPlan("suffix", "providerOptions.fim is true: the server's own FIM (`suffix`)")
    return FimPlan("none", "providerOptions.fim is false: chat prompts")


async def props_say_llama_cpp(http: HttpClient) -> bool:
    """True when GET /props says the server is llama.cpp's (no `suffix`
    on /completions). Any failure or other shape: False."""
    url = server_root(http.base_url) + "/props"
    try:
        payload = await asyncio.wait_for(
            http.request_json("GET", url, model="", max_attempts=1), PROPS_TIMEOUT)
    except (ModelError, TimeoutError) as exc:
        logger.debug("%s: no /props at %s (%s)", http.provider, url, exc)
        return False
    return isinstance(payload, dict) and isinstance(
        payload.get("default_generation_settings"), dict)


def name_family(model: str) -> tuple[FimTokens | None, str]:
    tokens = family_by_name(model)
    return tokens, "from the model's name" if tokens else "its name is no known code model's"
