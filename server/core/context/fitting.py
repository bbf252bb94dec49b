"""Context that always fits: each model request is built to fit the model.

Budget: estimated input tokens + the output reserve <= the context window
(the `contextWindow` setting, else what the provider reports for the model,
else a safe default per provider; lowered when a provider's context_length
error names the real limit). When the history does not fit, in order:

1. Tool results of older turns are cut to a head/tail excerpt with a note
   (oldest first, only as many as needed).
2. Compaction: the model summarises the oldest turns (core/context/compaction.py).
   The summary is stored as a message with metadata.source = "compaction"
   and `compacted_through` = how many stored messages it replaces; every
   original message stays stored. Requests then send the summary (in the
   system prompt) and the messages after it, so a resumed session uses the
   stored summary, not a new one.
3. Only if the current turn alone does not fit: its own tool results are
   cut too (oldest first), then the turn fails with a message saying what
   to do.

Never split: the newest user prompt is always sent whole, and compaction
cuts only at a user prompt, so a tool call and its result are always sent
together (providers reject orphans). A failed compaction (the model erred
mid-summary) stores nothing: the session stays exactly as it was.

Hook events context:pre_compact (a `deny` vetoes) and context:post_compact.
The window itself and the Budget it leaves are core/context/window_size.py's.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from agentls.core.context.compaction import (
    excerpt,
    is_compaction,
    is_prompt,
    latest_summary,
    summarise,
    without_attachments,
)
from agentls.core.context.instructions import (
    InstructionFile,
    ProjectInstructions,
    render_instructions,
)
from agentls.core.context.tokens import TokenCounter, counter_for
from agentls.core.context.window_size import Budget, learned_window, lookup_window
from agentls.core.provider.contract import Provider, ToolSpec
from agentls.core.types import events
from agentls.core.types.conversation import Message
from agentls.core.types.errors import ModelError

__all__ = [


    "ContextHost",
    "ContextManager",
    "ContextOverflow",
    "RequestPlan",


]

# Requests this small fit every model agentls supports: no window lookup.
SMALL_REQUEST_TOKENS = 1500
MESSAGE_OVERHEAD_TOKENS = 4  # role and framing per message (OpenAI's own rule of thumb)
OLD_RESULT_EXCERPT_CHARS = 1200
MIN_EXCERPT_CHARS = 400
# After a compaction the kept recent turns take at most this share of the
# input budget, so the next compaction is many calls away, not the next one.
KEEP_FRACTION = 0.3
KEEP_FRACTION_AFTER_ERROR = 0.15
# Calibration from reported usage needs a sample big enough to mean something.
MIN_CALIBRATION_SAMPLE = 500
MAX_CALIBRATION = 4.0
FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file", "delete_file", "rename_file"})


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class RequestPlan:
    messages: list[Message]  # system first, then what is sent
    estimated_tokens: int
    budget: Budget
    fits: bool
    cut_older: int = 0  # older tool results sent as excerpts
    cut_current: int = 0  # current-turn tool results sent as excerpts
    unattached: int = 0  # older prompts sent without their attached files
    instruction_files: list[str] = field(default_factory=list)
    summary_of: int = 0  # stored messages replaced by the summary sent


@dataclass
class ContextHost:
    """What the context manager needs from a running turn (or a manual
    compaction): the session's stored messages as they are now, hooks, and
    a way to store (and announce) the summary message."""

    session_id: str
    messages: Callable[[], Sequence[Message]]
    veto: Callable[[str, dict[str, Any]], Awaitable[str | None]]
    emit: Callable[[str, dict[str, Any]], Awaitable[Any]]
    store: Callable[[Message], Awaitable[None]]
    progress: Callable[[str], Awaitable[None]]


class CompactionVetoed(ModelError):
    """A context:pre_compact hook said no."""


class ContextOverflow(ModelError):
    """Even the current turn alone cannot be made to fit (code context_length)."""


class ContextManager:
    """Builds each model request to fit (see the module doc). One per
    orchestrator; its per-model knowledge (windows, calibration) is shared
    by every session of the process."""

    def __init__(
        self,
        *,
        window: int | None = None,
        instructions: ProjectInstructions | None = None,
    ) -> None:
        self.window_override = window
        self.instructions = instructions
        self._reported: dict[tuple[int, str], int] = {}  # (provider id, model) -> window
        self._learned: dict[str, int] = {}  # model -> window named by a context_length error
        self._calibration: dict[str, float] = {}  # counter name -> reported / estimated
        self._last_estimate: dict[str, int] = {}  # session -> estimate of its last request
        self._sizes: dict[tuple[int, str], tuple[Message, int]] = {}
        self.compactions = 0  # model calls spent on compaction, for the benchmark
        self.compaction_seconds = 0.0

    def with_settings(self, *, window: int | None,
                      instructions: ProjectInstructions | None) -> ContextManager:
        """A manager for other settings (the next agent bundle's) that shares
        what this one learned about models: windows, calibration, sizes."""
        other = ContextManager(window=window, instructions=instructions)
        other._reported, other._learned = self._reported, self._learned
        other._calibration, other._last_estimate = self._calibration, self._last_estimate
        other._sizes = self._sizes
        return other

    # -- window and counting ---------------------------------------------------------
    async def window(self, provider: Provider, model: str) -> int:
        learned = self._learned.get(model)
        if self.window_override:
            return min(self.window_override, learned or self.window_override)
        key = (id(provider), model)
        reported = self._reported.get(key)
        if reported is None:
            reported = await lookup_window(provider, model)
            self._reported[key] = reported
        return min(reported, learned or reported)

    def counter(self, provider: Provider, model: str) -> TokenCounter:
        # A provider that knows its model's tokenizer offers it (the local
        # provider: the GGUF's own); else tiktoken or the estimate.
        own = getattr(provider, "token_counter", None)
        if callable(own):
            counter = own(model)
            if counter is not None:
                return cast(TokenCounter, counter)
        return counter_for(getattr(provider, "name", ""), model)

    def _factor(self, counter: TokenCounter) -> float:
        return self._calibration.get(counter.name, 1.0)

    def message_tokens(self, message: Message, counter: TokenCounter) -> int:
        # Cached per message object (and counter: a tokenizer that finished
        # loading replaces the estimate): a 30-turn session is counted once.
        key = (id(message), counter.name)
        cached = self._sizes.get(key)
        if cached is not None and cached[0] is message:
            return cached[1]
        content = message.content
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        tokens = counter.count(text) + MESSAGE_OVERHEAD_TOKENS
        if message.multipart_content:
            tokens += counter.count(json.dumps(message.multipart_content, default=str))
        calls = (message.metadata or {}).get("tool_calls")
        if calls:
            tokens += counter.count(json.dumps(calls, default=str))
        if len(self._sizes) > 20_000:
            self._sizes.clear()
        self._sizes[key] = (message, tokens)
        return tokens

    def calibrate(self, session_id: str, reported_input_tokens: int, counter_name: str) -> None:
        """The provider reported how many input tokens the last request
        really had: scale later estimates up when they were low."""
        estimate = self._last_estimate.get(session_id)
        if not estimate or estimate < MIN_CALIBRATION_SAMPLE or reported_input_tokens <= 0:
            return
        ratio = reported_input_tokens / estimate * self._calibration.get(counter_name, 1.0)
        if ratio > self._calibration.get(counter_name, 1.0):
            self._calibration[counter_name] = min(MAX_CALIBRATION, ratio)

    # -- instructions --------------------------------------------------------------------
    def prompt_instructions(self) -> list[str]:
        """The instruction files a new prompt starts with (shown with the prompt)."""
        if self.instructions is None:
            return []
        root = self.instructions.root_file()
        return [root.shown()] if root is not None else []

    def _instruction_files(self, sent: Sequence[Message]) -> list[InstructionFile]:
        if self.instructions is None:
            return []
        return self.instructions.files_for(_touched_paths(sent))

    async def instruction_files(self, messages: Sequence[Message]) -> list[InstructionFile]:
        """The instruction files for the messages a request would send,
        looked up in a worker thread: the lookup stats files, and a model can
        name thousands of paths (the event loop must stay free)."""
        if self.instructions is None:
            return []
        _, covered = latest_summary(messages)
        tail = [m for i, m in enumerate(messages) if i >= covered and not is_compaction(m)]
        return await asyncio.to_thread(self._instruction_files, tail)

    # -- planning (pure) ---------------------------------------------------------------
    def plan(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        ephemeral: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        turn_start: int,
        budget: Budget,
        counter: TokenCounter,
        cut_current: bool = False,
        instruction_files: Sequence[InstructionFile] | None = None,
    ) -> RequestPlan:
        """`instruction_files`: as `instruction_files()` found them for these
        messages (None: looked up here, on the caller's thread)."""
        factor = self._factor(counter)

        def tokens(message: Message) -> int:
            return math.ceil(self.message_tokens(message, counter) * factor)

        summary, covered = latest_summary(messages)
        tail = [(i, m) for i, m in enumerate(messages) if i >= covered and not is_compaction(m)]
        files = (list(instruction_files) if instruction_files is not None
                 else self._instruction_files([m for _, m in tail]))
        system_text = system
        # At most a quarter of the input budget (~3 characters a token).
        section = render_instructions(files, max_chars=budget.input_limit * 3 // 4)
        if section:
            system_text += "\n\n" + section
        if summary is not None:
            system_text += (
                "\n\nSummary of the earlier part of this conversation (it was compacted to fit "
                "the model's context window; the user still sees the full transcript):\n"
                f"<summary>\n{summary.content}\n</summary>"
            )
        fixed = math.ceil((counter.count(system_text) + MESSAGE_OVERHEAD_TOKENS) * factor)
        if tools:
            fixed += math.ceil(counter.count(json.dumps(list(tools), default=str)) * factor)
        fixed += sum(tokens(m) for m in ephemeral)
        sizes = [tokens(m) for _, m in tail]
        total = fixed + sum(sizes)
        sent = [m for _, m in tail]
        limit = budget.input_limit
        excerpt_chars = _older_excerpt_chars(budget)

        def cut_results(current: bool, chars_for: Callable[[int], int], label: str) -> int:
            """Cut tool results (older turns' or the current turn's), oldest
            first, until the request fits; how many were cut."""
            nonlocal total
            cut_count = 0
            for pos, (index, message) in enumerate(tail):
                if total <= limit:
                    break
                if (index >= turn_start) != current or message.role != "tool":
                    continue
                cut = excerpt(message, chars_for(pos), label)
                if cut is None:
                    continue
                new = tokens(cut)
                if new < sizes[pos]:
                    total += new - sizes[pos]
                    sizes[pos], sent[pos] = new, cut
                    cut_count += 1
            return cut_count

        # 1. older turns' tool results, only as many as needed
        cut_older = cut_results(False, lambda _pos: excerpt_chars, "older")
        # 2. older turns' attached files, which the model can read again
        unattached = 0
        for pos, (index, message) in enumerate(tail):
            if total <= limit or index >= turn_start:
                break
            slim = without_attachments(message)
            if slim is not None:
                new = tokens(slim)
                total += new - sizes[pos]
                sizes[pos], sent[pos] = new, slim
                unattached += 1
        cut_now = 0
        if cut_current:
            # 3. last resort: the current turn's own results, each cut just
            # enough (never below an excerpt worth reading; 120: the
            # excerpt's own note)
            cut_now = cut_results(True, lambda pos: max(
                MIN_EXCERPT_CHARS, int((sizes[pos] - (total - limit) - 120) * 3 / factor)),
                "current")
        return RequestPlan(
            messages=[Message("system", system_text), *sent, *ephemeral],
            estimated_tokens=total,
            budget=budget,
            fits=total <= limit,
            cut_older=cut_older,
            cut_current=cut_now,
            unattached=unattached,
            instruction_files=[f.shown() for f in files],
            summary_of=covered,
        )

    # -- building a request ---------------------------------------------------------------
    async def prepare(
        self,
        host: ContextHost,
        *,
        provider: Provider,
        model: str,
        system: str,
        ephemeral: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        turn_start: int,
        output_cap: int | None,
        force_compact: bool = False,
    ) -> RequestPlan:
        """The request for the next model call, compacting first when the
        history does not fit. ModelError (code context_length) when even the
        current turn alone cannot be made to fit."""
        counter = self.counter(provider, model)
        args: dict[str, Any] = {
            "system": system, "ephemeral": ephemeral, "tools": tools,
            "turn_start": turn_start, "counter": counter,
            "instruction_files": await self.instruction_files(host.messages()),
        }
        plan = self.plan(messages=host.messages(), budget=Budget(1 << 40, 0), **args)
        if plan.estimated_tokens <= SMALL_REQUEST_TOKENS and not force_compact \
                and not self.window_override and model not in self._learned:
            return self._sent(host, plan)
        budget = Budget.for_window(await self.window(provider, model), output_cap)
        plan = self.plan(messages=host.messages(), budget=budget, **args)
        # After a context_length error, leaving out attached files the model
        # can read again loses less than a summary of the conversation.
        if plan.fits and (not force_compact or plan.unattached):
            return self._sent(host, plan)
        vetoed: str | None = None
        try:
            await self.compact(
                host, provider=provider, model=model, turn_start=turn_start, budget=budget,
                reason="context_length" if force_compact else "budget",
                estimated_tokens=plan.estimated_tokens,
            )
        except CompactionVetoed as exc:
            vetoed = str(exc)
        # Compaction changed which messages are sent, so which paths they touch.
        args["instruction_files"] = await self.instruction_files(host.messages())
        plan = self.plan(messages=host.messages(), budget=budget, **args)
        if not plan.fits:
            plan = self.plan(messages=host.messages(), budget=budget, cut_current=True, **args)
        if not plan.fits:
            why = f" Compaction was vetoed: {vetoed}" if vetoed else ""
            raise ContextOverflow(
                f"The conversation does not fit the model's context window ({budget.window:,} "
                f"tokens, {budget.output_reserve:,} kept for the answer) even after compacting: "
                f"this turn alone needs about {plan.estimated_tokens:,}.{why} Start a new session "
                "(the summary of this one is in its transcript), ask for smaller steps, or use a "
                "model with a larger window (the contextWindow setting, if the model's is larger "
                "than agentls assumed).",
                model=model, code="context_length",
            )
        return self._sent(host, plan)

    def _sent(self, host: ContextHost, plan: RequestPlan) -> RequestPlan:
        self._last_estimate[host.session_id] = plan.estimated_tokens
        return plan

    def learn(self, model: str, error: ModelError, session_id: str, window: int) -> None:
        """A context_length error: believe the limit it names, else assume
        the window is a fifth smaller than the request that failed."""
        limit, used = learned_window(str(error))
        estimate = self._last_estimate.get(session_id, 0)
        if used and estimate and used > estimate:
            name = counter_for("", model).name
            self._calibration[name] = min(
                MAX_CALIBRATION, max(self._calibration.get(name, 1.0), used / estimate * 1.05))
        if limit is None:
            # The request that failed was about estimate (+ the answer's
            # reserve) tokens: assume the window is somewhat below that.
            limit = int(min(window, (estimate or window) * 1.25) * 0.8)
        self._learned[model] = max(512, min(limit, self._learned.get(model, limit)))

    # -- compaction ---------------------------------------------------------------------
    async def compact(
        self,
        host: ContextHost,
        *,
        provider: Provider,
        model: str,
        turn_start: int | None = None,
        budget: Budget | None = None,
        reason: str = "manual",
        estimated_tokens: int = 0,
        output_cap: int | None = None,
    ) -> Message | None:
        """Summarise the oldest turns and store the summary. None when there
        is nothing to compact; CompactionVetoed when a hook said no;
        ModelError when the model failed (nothing is stored then)."""
        messages = list(host.messages())
        if turn_start is None:
            turn_start = len(messages)
        if budget is None:
            budget = Budget.for_window(await self.window(provider, model), output_cap)
        counter = self.counter(provider, model)
        summary, covered = latest_summary(messages)
        keep = KEEP_FRACTION_AFTER_ERROR if reason == "context_length" else KEEP_FRACTION
        through = self._choose_cut(messages, covered, turn_start, budget, counter, keep,
                                   everything=reason == "manual")
        if through is None:
            return None
        data = {
            "reason": reason,
            "messages": sum(1 for m in messages[covered:through] if not is_compaction(m)),
            "compacted_through": through,
            "estimated_tokens": estimated_tokens,
            "context_window": budget.window,
        }
        veto = await host.veto(events.CONTEXT_PRE_COMPACT, data)
        if veto is not None:
            raise CompactionVetoed(veto, model=model, code="context_length")
        await host.progress("Compacting the conversation")
        started = asyncio.get_running_loop().time()
        text, calls = await summarise(
            provider, model, host.session_id, summary.content if summary else "",
            [m for m in messages[covered:through] if not is_compaction(m)],
            window=budget.window, input_limit=budget.input_limit, counter=counter,
            factor=self._factor(counter),
        )
        elapsed = asyncio.get_running_loop().time() - started
        self.compactions += calls
        self.compaction_seconds += elapsed
        message = Message("system", text, {
            "source": "compaction",
            "compacted_through": through,
            "reason": reason,
            "model_calls": calls,
            "model": model,
            "timestamp": _now(),
        })
        await host.store(message)
        await host.emit(events.CONTEXT_POST_COMPACT, {
            **data, "summary_tokens": counter.count(text), "model_calls": calls,
        })
        return message

    def _choose_cut(
        self,
        messages: Sequence[Message],
        covered: int,
        turn_start: int,
        budget: Budget,
        counter: TokenCounter,
        keep: float,
        *,
        everything: bool,
    ) -> int | None:
        """Where the summary ends: a user prompt (never between a tool call
        and its result), after at least one message not yet summarised; the
        earliest such point whose recent turns fit in `keep` of the budget."""
        boundaries = [i for i in range(covered + 1, turn_start) if is_prompt(messages[i])]
        if turn_start > covered and any(
            not is_compaction(m) for m in messages[covered:turn_start]
        ):
            boundaries.append(turn_start)
        if not boundaries:
            return None
        if everything:
            return boundaries[-1]
        allowance = budget.input_limit * keep
        factor = self._factor(counter)
        for boundary in boundaries:
            recent = 0
            for message in messages[boundary:turn_start]:
                if is_compaction(message):
                    continue
                if message.role == "tool":
                    message = excerpt(message, _older_excerpt_chars(budget), "older") or message
                recent += self.message_tokens(message, counter)
            if recent * factor <= allowance:
                return boundary
        return boundaries[-1]

def _older_excerpt_chars(budget: Budget) -> int:
    # A small window cannot afford 1200 characters per old result.
    return max(MIN_EXCERPT_CHARS, min(OLD_RESULT_EXCERPT_CHARS, budget.input_limit * 3 // 10))


def _touched_paths(sent: Sequence[Message]) -> list[str]:
    """The paths the file tools were called with in these messages, each once."""
    touched: dict[str, None] = {}
    for message in sent:
        for call in (message.metadata or {}).get("tool_calls") or ():
            if not isinstance(call, dict) or call.get("tool") not in FILE_TOOLS:
                continue
            arguments = call.get("arguments")
            if isinstance(arguments, dict):
                for key in ("path", "new_path"):
                    value = arguments.get(key)
                    if isinstance(value, str):
                        touched.setdefault(value)
    return list(touched)
