"""Inside the model's child process: a prompt that changed in the middle
keeps the evaluated text after the change.

A fill-in-the-middle prompt is `<prefix><suffix><middle>`, so each keystroke
changes the prompt where the prefix ends, and llama.cpp's prompt cache keeps
only the tokens before that point: the whole suffix (hundreds of tokens,
seconds on a laptop CPU) is evaluated again per keystroke. Here, before
llama-cpp-python's own prefix match, the cache is rearranged: the longest
run of cached tokens that the new prompt holds again after the change is
moved (RoPE shift) to its new position, and only the tokens inserted before
it are evaluated. llama-server's `--cache-reuse` does this for text removed;
this also handles text inserted, which is what typing is.

The moved run was evaluated without the inserted tokens in its view (it
still sees the text before the change, and the model's answer sees
everything). That drift is bounded: once the tokens inserted or removed in
front of the moved text since it was last evaluated whole pass
`STALE_LIMIT`, the prompt is evaluated normally. docs/local-model.md "How
it runs" has what it measured.

llama.cpp requires each sequence's new tokens to follow its last position,
so each moved run waits in a sequence of its own while the tokens before it
are evaluated in the first: the context is created with `1 + MAX_RUNS`
sequences sharing one cache (`kv_unified`, so `n_ctx` stays whole).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("agentls.providers.local")

MIN_RUN = 16  # tokens: a shorter run is evaluated again rather than moved
# The first tokens after a change are evaluated again: they carry where the
# change ended (moved as they were, the model answers as if nothing was typed).
REFRESH = 4
MAX_RUNS = 3  # each waits in its own sequence while the text before it is evaluated
STALE_LIMIT = 192  # tokens changed in front of a moved run before it is evaluated whole
# A rearrangement that evaluates at most this many tokens (a keystroke's) is
# not stopped midway: stopped, it would drop the moved runs, and the next
# keystroke would evaluate the whole suffix again (seconds on a laptop CPU).
UNSTOPPABLE_TOKENS = 64


@dataclass(frozen=True)
class Move:
    """One run of cached tokens the new prompt holds again: the prompt's
    tokens [`start`, `target`) are evaluated, then the cache's tokens
    [`source`, `source + length`) are moved to start at `target`."""

    start: int
    source: int
    target: int
    length: int

    @property
    def inserted(self) -> int:
        return self.target - self.start

    @property
    def end(self) -> int:
        """Where the run ends in the new prompt."""
        return self.target + self.length


def plan(cached: Sequence[int], prompt: Sequence[int], min_run: int = MIN_RUN,
         most: int = MAX_RUNS) -> list[Move]:
    """The runs of cached tokens, in order, that the new prompt holds again
    after their common prefix; empty when the prefix match alone does as well."""
    common = _first_difference(cached, prompt)
    if common >= len(prompt) - min_run or len(cached) - common < min_run:
        return []
    starts: dict[tuple[int, ...], list[int]] = {}
    for i in range(common, len(cached) - min_run + 1):
        starts.setdefault(tuple(cached[i:i + min_run]), []).append(i)
    moves: list[Move] = []
    head_p = head_c = common  # where the next run may start: in the prompt, in the cache
    j = head_p
    while j <= len(prompt) - min_run and len(moves) < most:
        found = [i for i in starts.get(tuple(prompt[j:j + min_run]), ()) if i >= head_c]
        if not found:
            j += 1
            continue
        source = found[0]
        length = min_run
        while (source + length < len(cached) and j + length < len(prompt)
               and cached[source + length] == prompt[j + length]):
            length += 1
        if length >= min_run + REFRESH:
            moves.append(Move(head_p, source + REFRESH, j + REFRESH, length - REFRESH))
            head_p = j + length
        head_c = source + length
        j += length
    return moves


class PromptReuse:
    """Applies `plan` to one llama-cpp-python `Llama` before its prefix match."""

    def __init__(self, llama: Any, lib: Any) -> None:
        self.llama = llama
        self.lib = lib
        self.stale = 0  # tokens changed in front of the moved text since it was evaluated whole
        self.stale_from = -1  # where the moved text starts (-1: nothing moved)
        self.usable = self._usable()
        vocab = lib.llama_model_get_vocab(llama._model.model) if self.usable else None
        self.fim_middle = int(lib.llama_vocab_fim_mid(vocab)) if vocab is not None else -1

    def _usable(self) -> bool:
        llama, lib = self.llama, self.lib
        memory = getattr(llama._ctx, "memory", None)
        if memory is None or int(llama.context_params.n_seq_max) < 1 + MAX_RUNS:
            return False
        model = llama._model.model
        if lib.llama_model_is_recurrent(model) or lib.llama_model_is_hybrid(model):
            return False
        if lib.llama_model_n_swa(model) > 0:  # a sliding window drops cells a move needs
            return False
        return bool(lib.llama_memory_can_shift(memory))

    def fim_prompt(self, prompt: Sequence[int]) -> bool:
        """A fill-in-the-middle prompt (it holds the model's middle token):
        chat prompts only grow at their end, where the prefix match keeps all."""
        return self.fim_middle >= 0 and self.fim_middle in prompt

    def decode(self, tokens: Sequence[int], position: int) -> None:
        """Evaluate `tokens` in sequence 0 from `position` (no logits kept)."""
        batch = self.llama._batch
        batch.set_batch(batch=tokens, n_past=position, logits_all=False)
        self.llama._ctx.decode(batch)

    def before_generate(self, prompt: Sequence[int],
                        evaluate: Callable[[Sequence[int], int, bool], None]) -> list[Move]:
        """Rearrange the cache for `prompt`; `evaluate(tokens, position,
        stoppable)` decodes the tokens before each run in sequence 0, and may
        raise to stop only when `stoppable`. Returns the moves made."""
        llama = self.llama
        cached = [int(t) for t in llama.input_ids[:llama.n_tokens]]
        moves = plan(cached, prompt) if self.usable and cached else []
        changed = changed_tokens(moves)
        if not moves or self.stale + changed > STALE_LIMIT:
            if _first_difference(cached, prompt) <= self.stale_from:
                self.stale, self.stale_from = 0, -1  # the moved text is evaluated whole again
            return []
        memory, lib = llama._ctx.memory, self.lib
        common = moves[0].start
        stoppable = sum(move.inserted for move in moves) > UNSTOPPABLE_TOKENS
        for parked, move in enumerate(moves, 1):  # each run waits in a sequence of its own
            lib.llama_memory_seq_cp(memory, 0, parked, move.source, move.source + move.length)
        lib.llama_memory_seq_rm(memory, 0, common, -1)
        try:
            for parked, move in enumerate(moves, 1):
                if move.inserted:
                    evaluate(prompt[move.start:move.target], move.start, stoppable)
                if move.target != move.source:
                    lib.llama_memory_seq_add(memory, parked, move.source,
                                             move.source + move.length, move.target - move.source)
                lib.llama_memory_seq_cp(memory, parked, 0, move.target, move.end)
                lib.llama_memory_seq_rm(memory, parked, -1, -1)
                llama.input_ids[move.start:move.end] = prompt[move.start:move.end]
                llama.n_tokens = move.end
        except BaseException:
            for parked in range(1, len(moves) + 1):
                lib.llama_memory_seq_rm(memory, parked, -1, -1)
            lib.llama_memory_seq_rm(memory, 0, common, -1)
            llama.n_tokens = common
            raise
        llama._requires_eval = True  # the logits are not this prompt's: decode its last token again
        self.stale += changed
        self.stale_from = moves[0].target
        return moves


def changed_tokens(moves: Sequence[Move]) -> int:
    """The tokens typed or removed in front of the moved runs: what the moved
    text did not see. The REFRESH tokens evaluated again on both sides of
    each change are the same text and do not count (counted, one key weighed
    9 and every ~20th key evaluated the whole suffix)."""
    changed, cache_end = 0, moves[0].start if moves else 0
    for move in moves:
        changed += (move.inserted - REFRESH) + (move.source - cache_end - REFRESH)
        cache_end = move.source + move.length
    return changed


def _first_difference(cached: Sequence[int], prompt: Sequence[int]) -> int:
    """The first position where the two differ (the shorter's length if none)."""
    for i, (a, b) in enumerate(zip(cached, prompt, strict=False)):
        if a != b:
            return i
    return min(len(cached), len(prompt))


def reuse_params(default_params: Callable[[], Any]) -> Callable[[], Any]:
    """llama_context_default_params, with the sequences the moves need."""

    def params() -> Any:
        value = default_params()
        value.n_seq_max = 1 + MAX_RUNS
        value.kv_unified = True  # one cache: the sequences share cells, n_ctx stays whole
        return value

    return params
