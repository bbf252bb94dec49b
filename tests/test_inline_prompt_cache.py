"""A prompt the engine can keep: while the user types within a line, each
keystroke's FIM prompt is the one before with the typed characters added at
its end (the code typed on the cursor's line goes after the middle token,
and the window's start moves in steps, not with each keystroke), so every
engine's prompt cache keeps all of it and evaluates only the new tokens."""

from __future__ import annotations

from itertools import pairwise

from agentls.core.editor.inline_completion import OpenDocument
from agentls.features.inline_completion.document import cursor_context
from agentls.features.inline_completion.neighbours import NeighbourIndex
from agentls.features.inline_completion.prompt import build_prompt
from agentls.providers.fim.templates import build_fim_prompt, family_by_name

QWEN = family_by_name("qwen2.5-coder")
BODY = "".join(f"value_{i} = compute({i})  # step {i}\n" for i in range(400))
LINE = "result = combine(value_1, value_2)"


def prompts_while_typing(budget: int) -> list[str]:
    """The raw FIM prompt after each keystroke of LINE, typed at the end of
    BODY (with code after it), through the inline feature's own steps."""
    assert QWEN is not None
    after = "\n\nprint(result)\n"
    out = []
    for typed in range(1, len(LINE) + 1):
        text = BODY + LINE[:typed] + after
        ctx = cursor_context(text, len(BODY) + typed, max_prefix_chars=budget,
                             max_suffix_chars=2000)
        prompt = build_prompt(ctx, fim=True, language_id="python", path="m.py",
                              max_prefix_chars=budget)
        out.append(build_fim_prompt(QWEN, prompt.prefix, prompt.suffix))
    return out


def test_a_keystroke_within_a_line_only_adds_to_the_prompts_end() -> None:
    prompts = prompts_while_typing(2000)
    for before, after in pairwise(prompts):
        assert after.startswith(before) and len(after) == len(before) + 1
    assert prompts[-1].endswith("<|fim_middle|>" + LINE)
    assert "\n<|fim_suffix|>\n\nprint(result)\n" in prompts[-1]  # the line starts the fill


def test_the_window_start_moves_in_steps_of_an_eighth_of_the_budget() -> None:
    """Moving over 1,500 characters of lines, the cursor at every offset."""
    budget = 2000
    starts = set()
    text = BODY * 3
    for offset in range(len(text) - 1500, len(text)):
        ctx = cursor_context(text, offset, max_prefix_chars=budget, max_suffix_chars=100)
        starts.add(offset - len(ctx.prefix))
        assert budget * 3 // 4 - 40 <= len(ctx.prefix) <= budget  # a line is under 40 chars
    # 1,500 keystrokes: the start moved about once per 250 characters, not 1,500 times
    assert len(starts) <= 1500 // (budget // 8) + 2


def test_the_neighbours_are_chosen_from_the_lines_before_the_cursors_line() -> None:
    util = OpenDocument("file:///w/util.py", "python", 1,
                        "def parse_config(path):\n    return load_yaml(path)\n\n\n"
                        "def render_table(rows):\n    return rows\n")
    index = NeighbourIndex()
    head = "config = parse_config(path)\n"
    chosen = [index.snippets(head + typed, [util], 1000) for typed in
              ("t", "table = ren", "table = render_table(")]
    assert chosen[0] == chosen[1] == chosen[2] and "parse_config" in chosen[0][0].text


def test_with_neighbour_snippets_the_prompt_start_still_stays_within_a_line() -> None:
    """The snippets' room comes off the prefix in steps too (it used to be
    cut from the cursor back, so the start moved every few keystrokes)."""
    assert QWEN is not None
    index = NeighbourIndex()
    other = OpenDocument("file:///w/other.py", "python", 1, "".join(
        f"def combine_{i}(value_398, value_399):\n    return compute(value_398) + {i}\n"
        for i in range(12)))
    after = "\n\nprint(result)\n"
    prompts = []
    for typed in range(1, len(LINE) + 1):
        text = BODY + LINE[:typed] + after
        ctx = cursor_context(text, len(BODY) + typed, max_prefix_chars=2000,
                             max_suffix_chars=2000)
        snippets = index.snippets(ctx.prefix, [other], 900)
        prompt = build_prompt(ctx, fim=True, language_id="python", path="m.py",
                              max_prefix_chars=2000, snippets=snippets)
        assert len(prompt.prefix) <= 2000 + len(LINE)
        prompts.append(build_fim_prompt(QWEN, prompt.prefix, prompt.suffix))
    assert "other.py" in prompts[0] and "combine_" in prompts[0]  # the snippets are there
    for before, now in pairwise(prompts):
        assert now.startswith(before)
