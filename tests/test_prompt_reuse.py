"""How a changed prompt keeps the cached tokens it holds again after the
change (providers/local/prompt_reuse.py): the plan is pure logic, tested
here; the real engine under typing is tests/e2e/test_local_engine_work.py."""

from __future__ import annotations

from agentls.providers.local.prompt_reuse import MIN_RUN, REFRESH, Move, changed_tokens, plan

SUFFIX = list(range(1000, 1300))


def test_a_keystroke_before_the_suffix_moves_the_suffix_and_evaluates_the_key() -> None:
    cached = list(range(200)) + SUFFIX
    prompt = [*list(range(200)), 7777, *SUFFIX]
    (move,) = plan(cached, prompt)
    assert move == Move(start=200, source=200 + REFRESH, target=201 + REFRESH,
                        length=len(SUFFIX) - REFRESH)
    # Evaluated: the key and the first tokens after it, which carry where the change ended.
    assert move.inserted == 1 + REFRESH and move.end == len(prompt)


def test_a_changed_last_token_of_the_prefix_is_a_replacement() -> None:
    cached = [*range(200), 5, *SUFFIX]  # "retur" tokenized as one token...
    prompt = [*range(200), 6, *SUFFIX]  # ..."return" as another
    (move,) = plan(cached, prompt)
    assert move.start == 200 and move.target == move.source  # nothing shifts


def test_a_backspace_moves_the_suffix_back() -> None:
    cached = [*list(range(200)), 8, 9, *SUFFIX]
    prompt = list(range(200)) + SUFFIX
    (move,) = plan(cached, prompt)
    assert move.target - move.source == -2


def test_text_only_appended_is_left_to_the_prefix_match() -> None:
    cached = list(range(300))
    assert plan(cached, list(range(400))) == []
    assert plan(cached, cached) == []


def test_a_short_run_after_the_change_is_evaluated_rather_than_moved() -> None:
    cached = list(range(200)) + list(range(1000, 1000 + MIN_RUN + REFRESH - 1))
    prompt = [*list(range(200)), 7777, *cached[200:]]
    assert plan(cached, prompt) == []


def test_nothing_in_common_after_the_change_means_no_move() -> None:
    cached = list(range(200)) + list(range(5000, 5300))
    prompt = list(range(200)) + list(range(6000, 6300))
    assert plan(cached, prompt) == []


def test_a_whole_line_typed_since_moves_the_suffix_by_its_length() -> None:
    cached = list(range(200)) + SUFFIX
    prompt = list(range(200)) + list(range(9000, 9040)) + SUFFIX
    (move,) = plan(cached, prompt)
    assert (move.source, move.target) == (200 + REFRESH, 240 + REFRESH)


def test_a_window_that_dropped_its_first_lines_and_a_keystroke_move_two_runs() -> None:
    # The prompt's window start moved (its first 30 tokens gone) and a key was typed.
    head, prefix = [1], list(range(100, 400))
    cached = head + list(range(10, 40)) + prefix + SUFFIX
    prompt = head + prefix + [7777] + SUFFIX
    first, second = plan(cached, prompt)
    assert first.start == 1 and first.source == 31 + REFRESH and first.target == 1 + REFRESH
    assert first.end == 1 + len(prefix)
    assert second.start == first.end and second.inserted == 1 + REFRESH
    assert second.end == len(prompt)


def test_the_drift_counts_the_keys_typed_and_removed_not_the_tokens_evaluated_again() -> None:
    cached = list(range(200)) + SUFFIX
    typed = plan(cached, [*range(200), 7777, *SUFFIX])
    removed = plan([*range(200), 8, 9, *SUFFIX], list(range(200)) + SUFFIX)
    replaced = plan([*range(200), 5, *SUFFIX], [*range(200), 6, *SUFFIX])
    line = plan(cached, list(range(200)) + list(range(9000, 9040)) + SUFFIX)
    assert [changed_tokens(m) for m in (typed, removed, replaced, line)] == [1, 2, 2, 40]
    # Two runs: 30 tokens the window dropped, then one key.
    head, prefix = [1], list(range(100, 400))
    two = plan(head + list(range(10, 40)) + prefix + SUFFIX, head + prefix + [7777] + SUFFIX)
    assert len(two) == 2 and changed_tokens(two) == 31
    assert changed_tokens([]) == 0
