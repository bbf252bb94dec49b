"""Turn what a model sent into what the editor shows.

Models run on past the point where a completion should end, repeat the code
after the cursor, loop on a line, close brackets the user never opened, and
chat models wrap code in markdown. Each step below is a small pure function
of the completion and the `CursorContext`; `postprocess` runs them in order.
The result is never whitespace only ("" means "no suggestion").
"""

from __future__ import annotations

import re
from itertools import islice

from agentls.features.inline_completion.document import CursorContext
from agentls.features.inline_completion.prompt import FILL_MARKER

__all__ = [
    "cut_at_block_end",
    "cut_end_tokens",
    "cut_repeated_lines",
    "cut_suffix_repeat",
    "cut_unbalanced",
    "drop_doubled_space",
    "open_brackets",
    "postprocess",
    "reached_end",
    "start_on_blank_line",
    "strip_echo",
    "strip_fences",
    "trim_first_indent",
    "trim_line_overlap",
]

_OPENERS = "([{"
_CLOSER_OF = {"(": ")", "[": "]", "{": "}"}
_OPENER_OF = {")": "(", "]": "[", "}": "{"}
_BRACKET = re.compile(r"[()\[\]{}]")
# Single-line string literals; brackets inside them are not code.
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|`(?:\\.|[^`\\\n])*`')
_FENCE_OPEN = re.compile(r"```[\w+#.-]*[ \t]*\n")
# Line endings after which the next lines are the body of a new block.
_BLOCK_OPENERS = (":", "{", "(", "[", "=>", "->", " do", " then", "begin")
_BLOCK_CLOSERS = ("end", "fi", "done", "esac", "end;", "end,")
_BRACKET_SCAN_CHARS = 6000  # how much of the prefix decides which brackets are open
# The end-of-fill tokens of the FIM families (providers/fim/templates.py),
# when an engine writes them out as text instead of stopping on them.
_END_TOKENS = re.compile(
    r"<\|(?:endoftext|fim_(?:prefix|suffix|middle|pad)|file_sep|repo_name|im_end|EOT"
    r"|file_separator)\|>|<(?:fim_(?:prefix|suffix|middle|pad)|file_sep|EOT)>|<end_of_turn>"
    "|<\uff5cend\u2581of\u2581sentence\uff5c>"
)
_SUFFIX_SCAN_LINES = 60  # how far after the cursor the code that follows is looked for
_SUFFIX_REPEAT_LINES = 6  # a completion line equal to one of these suffix lines ends it
_MIN_REPEAT_CHARS = 14  # ... if at least this long (`return False` recurs legitimately)


def postprocess(
    raw: str, ctx: CursorContext, *, chat: bool = False, truncated: bool = False
) -> str:
    """The completion to show for `raw` model output at `ctx` ("" for none).

    chat: the text came from a chat model (fences, echoed code possible).
    truncated: the model stopped at max_tokens, so its last line is cut off.
    """
    text = cut_end_tokens(raw.replace("\r\n", "\n"))
    if chat:
        text = strip_echo(strip_fences(text).replace(FILL_MARKER, ""), ctx)
    if not text.strip():
        return ""
    text = drop_doubled_space(text, ctx)
    if ctx.mid_line:
        text = trim_line_overlap(text.split("\n", 1)[0], ctx)
    else:
        text = trim_first_indent(start_on_blank_line(text, ctx), ctx)
        if truncated and "\n" in text.strip("\n"):
            text = text[: text.rstrip("\n").rfind("\n")]
        text = cut_at_block_end(text, ctx)
        text = cut_suffix_repeat(text, ctx)
        text = cut_repeated_lines(text, ctx.line_prefix)
        text = cut_unbalanced(text, ctx)
    text = text.rstrip()
    if not text.strip():
        return ""
    return text.replace("\n", "\r\n") if ctx.eol == "\r\n" else text


def drop_doubled_space(text: str, ctx: CursorContext) -> str:
    """After code that ends with a space (`x = len(data) `), a completion
    that starts with one more (` - 2`) would leave two: the model saw the
    typed space as the end of its own text (a space before a word is part
    of the word's token) and wrote it again. A comment keeps its two
    spaces (`x = 1  # why`)."""
    line = ctx.line_prefix
    if (line.endswith(" ") and not line.endswith("  ") and line.strip()
            and text.startswith(" ") and text[1:2].strip() and text[1:2] != "#"):
        return text[1:]
    return text


def reached_end(text: str, ctx: CursorContext) -> bool:
    """While streaming: has the completion already passed its end? (Then
    the rest of the stream is not needed.)"""
    if ctx.mid_line:
        return "\n" in text
    last = text.rfind("\n")
    if last <= 0:
        return False
    complete = text[:last]
    if len(cut_at_block_end(complete, ctx)) < len(complete):
        return True
    # Run into the code after the cursor: postprocess cuts there, whatever
    # comes next (a single-line hole's model writes the rest of the function).
    lines = trim_first_indent(start_on_blank_line(complete, ctx), ctx).split("\n")
    found = _suffix_repeat_at(lines, ctx)
    if found is None:
        return False
    index, needs_next = found
    return not needs_next or any(line.strip() for line in lines[index + 1 :])


def cut_end_tokens(text: str) -> str:
    """Everything before the first end-of-fill token written out as text
    (`<|endoftext|>`, `<|fim_pad|>`, `<|file_sep|>`, ...): an engine that
    does not stop on the model's stop tokens sends what follows them too."""
    match = _END_TOKENS.search(text)
    return text if match is None else text[: match.start()]


# --------------------------------------------------------------------------- chat replies


def strip_fences(text: str) -> str:
    """The code inside the first markdown fence (chat models add them even
    when told not to); inline `code` loses its backticks."""
    match = _FENCE_OPEN.search(text)
    if match is not None:
        body = text[match.end() :]
        end = body.find("```")
        if end >= 0:
            body = body[:end]
            if body.endswith("\n"):
                body = body[:-1]
        return body
    stripped = text.strip()
    if len(stripped) > 2 and stripped[0] == stripped[-1] == "`" and stripped.count("`") == 2:
        return stripped[1:-1]
    return text


def strip_echo(text: str, ctx: CursorContext) -> str:
    """Drop code before the cursor that a chat model repeated."""
    lines = ctx.prefix[-2000:].split("\n")
    for count in (3, 2):
        if len(lines) >= count:
            echo = "\n".join(lines[-count:])
            if echo.strip() and echo.strip() != ctx.line_prefix.strip():
                if text.startswith(echo):
                    return text[len(echo) :]
                if text.startswith(echo.lstrip(" \t")):
                    return text[len(echo.lstrip(" \t")) :]
    line = ctx.line_prefix
    if line.strip():
        unindented = text.lstrip(" \t")
        if unindented.startswith(line.lstrip(" \t")):
            return unindented[len(line.lstrip(" \t")) :]
    elif line and text.startswith(line):
        return text[len(line) :]  # the model indented again what is indented
    return text


# --------------------------------------------------------------------------- lines


def start_on_blank_line(text: str, ctx: CursorContext) -> str:
    """On a line that is blank up to the cursor (the indented empty line
    under `def mul(a, b):`), a completion that starts with a line break
    would leave that line behind as trailing whitespace and put the code on
    the next one: "\n    return a * b" becomes "return a * b". The
    indentation already typed is not repeated; a deeper one is kept."""
    if ctx.line_prefix.strip() or not text.startswith(("\n", "\r\n")):
        return text
    body = text.lstrip("\r\n")
    if not body.strip():
        return text
    typed = ctx.line_prefix
    if typed and body.startswith(typed):
        return body[len(typed) :]
    if _width(body) <= _width(typed):
        return body.lstrip(" \t")
    return body


def trim_first_indent(text: str, ctx: CursorContext) -> str:
    """On a line blank up to the cursor, a fill that starts with more
    indentation (the model wrote the line's indentation again: "    while x:"
    after the cursor at column 4) cannot go deeper than the line before,
    nor deeper than the cursor when that line opens a block and the cursor
    is already in its body: the excess is dropped, the later lines are left
    as written."""
    if ctx.line_prefix.strip() or text[:1] not in (" ", "\t"):
        return text
    if _body_says_indented_twice(text, ctx):
        return text.lstrip(" \t")
    previous = next((line for line in reversed(ctx.prefix.split("\n")[:-1][-50:])
                     if line.strip()), None)
    if previous is None:
        return text
    if previous.rstrip().endswith(_BLOCK_OPENERS):
        # The cursor already stands deeper than the opener: that is the body.
        return text.lstrip(" \t") if _width(ctx.line_prefix) > _width(previous) else text
    if _width(ctx.line_prefix + text) <= _width(previous):
        return text
    indent = previous[: len(previous) - len(previous.lstrip(" \t"))]
    body = text.lstrip(" \t")
    if indent.startswith(ctx.line_prefix):
        return indent[len(ctx.line_prefix) :] + body
    return body


def _body_says_indented_twice(text: str, ctx: CursorContext) -> bool:
    """A first line that opens a block (`    if flg == 0:` after the cursor at
    column 4) whose body is not deeper than that line as shown, but deeper
    than the line without its own indentation: the model wrote the
    indentation the cursor already has."""
    lines = text.split("\n")
    if not lines[0].rstrip().endswith(_BLOCK_OPENERS):
        return False
    body = next((line for line in lines[1:] if line.strip()), None)
    if body is None:
        return False
    shown = _width(ctx.line_prefix + lines[0])
    return _width(ctx.line_prefix) < _width(body) <= shown


def _width(line: str) -> int:
    stripped = line.lstrip(" \t")
    return len(line[: len(line) - len(stripped)].expandtabs(4))


def _floor(ctx: CursorContext) -> tuple[int, int]:
    """The least indentation a completion's line may have (on a line that is
    blank up to the cursor or ends a statement): the hole ends where the code
    after it starts, so a completion may leave the cursor's block as far as
    the following code does (the rest of a loop, the function's last
    `return`), never further; the first line after the cursor that is not
    deeper than the cursor tells (a deeper one is the body of a block the
    hole itself opens). At the end of the document, or when the code after is
    at column 0 (the next top-level definition), the completion may not
    leave the top-level block it is in. Also returns that following line's
    indentation (-1 if none)."""
    base = _width(ctx.line_prefix)
    reference = None
    for line in ctx.suffix.split("\n", _SUFFIX_SCAN_LINES)[1:_SUFFIX_SCAN_LINES]:
        if line.strip() and _width(line) <= base:
            reference = _width(line)
            break
    if not reference:
        return (1 if base > 0 else 0), (-1 if reference is None else 0)
    return min(base, reference), reference


def cut_at_block_end(text: str, ctx: CursorContext) -> str:
    """Stop where the hole's block ends. When the cursor's line opens a block
    (`if x` + `:`), that block is the completion: it stops at the first line
    back at the line's indentation (a closing bracket or `end` there is kept:
    it closes the block). Otherwise a completion may close nested blocks it
    is in, down to the indentation of the code that follows (`_floor`); a
    line below that ends it (a closer there is kept, for cut_suffix_repeat
    to weigh against the suffix), unless it opens a block whose body is the
    code that follows (`if n == 0:` before a deeper `return 0`) or the
    fill's own next lines (an `else:` branch the hole holds whole): then the
    completion goes on inside that block (never a new top-level definition)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    base = _width(ctx.line_prefix)
    head = ctx.line_prefix + lines[0]
    opens = bool(ctx.line_prefix.strip()) and head.rstrip().endswith(_BLOCK_OPENERS)
    floor, following = (base + 1, -1) if opens else _floor(ctx)
    for index in range(1, len(lines)):
        line = lines[index]
        content = line.strip()
        if not content:
            continue
        width = _width(line)
        if width < floor:
            if width == floor - 1 and (content[0] in ")]}" or content in _BLOCK_CLOSERS):
                return "\n".join(lines[: index + 1])
            if 0 < width < following and content.endswith(_BLOCK_OPENERS):
                # Its body is the code that follows, or lines of the fill's
                # own before it (an `else:` branch the hole holds whole).
                floor, following = width + 1, -1
                continue
            return "\n".join(lines[:index])
    return text


def cut_suffix_repeat(text: str, ctx: CursorContext) -> str:
    """Stop before the completion reaches the code after the cursor: the
    first line equal to the next non-blank line of the suffix, or to one of
    the few after it (a model that skips a branch and writes the function's
    `return` again); short lines (`else:`, `return 0`) and lines the code
    before the cursor also has count only as the next line."""
    lines = text.split("\n")
    found = _suffix_repeat_at(lines, ctx)
    return text if found is None else "\n".join(lines[: found[0]])


def _suffix_repeat_at(lines: list[str], ctx: CursorContext) -> tuple[int, bool] | None:
    """Where cut_suffix_repeat cuts `lines` (the index of the first line not
    kept), and whether that needed the next non-blank line to decide (a line
    equal to the suffix's next one ends the fill only when what follows is
    the suffix's too)."""
    following = list(islice((line.rstrip() for line in ctx.suffix.split("\n", 40)[1:40]
                             if line.strip()), _SUFFIX_REPEAT_LINES))
    if not following:
        return None
    target, later = following[0], set(following[1:_SUFFIX_REPEAT_LINES])
    before: set[str] | None = None  # the prefix's lines, read when a line is in `later`
    if ((ctx.line_prefix + lines[0]).rstrip() == target and not ctx.line_suffix.strip()
            and not _goes_its_own_way(lines[1:], following[1:2])):
        return 0, len(following) > 1
    for index in range(1, len(lines)):
        line = lines[index].rstrip()
        if not line.strip():
            continue
        if line == target:
            if _goes_its_own_way(lines[index + 1 :], following[1:2]):
                continue  # the hole has a line like the suffix's (`ret += [x]` in both branches)
            return index, len(following) > 1
        if len(line.strip()) >= _MIN_REPEAT_CHARS and line in later:
            if before is None:
                before = {seen.rstrip() for seen in ctx.prefix[-4000:].split("\n")}
            if line not in before:
                return index, False
    return None


def _goes_its_own_way(rest: list[str], after_target: list[str]) -> bool:
    """After a line equal to the suffix's next one, does the completion go
    on with code that is not the suffix's (`else:` where the suffix has
    `return ret`)? Then that line was part of the hole, not the model
    running into the suffix."""
    nxt = next((line.rstrip() for line in rest if line.strip()), None)
    return nxt is not None and bool(after_target) and nxt != after_target[0]


def cut_repeated_lines(text: str, line_prefix: str = "") -> str:
    """Stop where the model starts to loop: a line equal to the one before
    (indentation included: `return False` closing two blocks is no loop),
    or a run of 2-4 lines repeating the run before it. The first line is
    compared as the editor shows it, after `line_prefix` (the cursor's line
    before the cursor)."""
    lines = text.split("\n")
    shown = [line_prefix + lines[0], *lines[1:]]
    for index in range(1, len(lines)):
        content = lines[index].rstrip()
        if len(content.strip()) >= 4 and content == shown[index - 1].rstrip():
            return "\n".join(lines[:index])
        for period in (2, 3, 4):
            if index < period or index + period > len(lines):
                continue
            run = lines[index : index + period]
            if run == lines[index - period : index] and any(len(r.strip()) >= 4 for r in run):
                return "\n".join(lines[:index])
    return text


# --------------------------------------------------------------------------- brackets


def _blank_strings(text: str) -> str:
    """`text` with string literals blanked out (same length)."""
    if "'" not in text and '"' not in text and "`" not in text:
        return text
    return _STRING.sub(lambda m: " " * len(m.group()), text)


def open_brackets(text: str) -> list[str]:
    """The brackets `text` leaves open, innermost last (string literals
    ignored; closers with no opener in `text` are ignored too, as `text` is
    usually a window that starts mid-file)."""
    stack: list[str] = []
    for char in _BRACKET.findall(_blank_strings(text)):
        if char in _OPENERS:
            stack.append(char)
        elif stack and stack[-1] == _OPENER_OF[char]:
            stack.pop()
    return stack


def _apply(stack: list[str], text: str) -> tuple[list[str], int]:
    """Push/pop `text`'s brackets on a copy of `stack`; also return the
    index of the first closer that matches nothing (-1 if none)."""
    stack = list(stack)
    for match in _BRACKET.finditer(_blank_strings(text)):
        char = match.group()
        if char in _OPENERS:
            stack.append(char)
        elif stack and stack[-1] == _OPENER_OF[char]:
            stack.pop()
        else:
            return stack, match.start()
    return stack, -1


def cut_unbalanced(text: str, ctx: CursorContext) -> str:
    """Stop before the first closing bracket that closes nothing the prefix
    or the completion opened (a whole line of closers goes with it)."""
    if not _BRACKET.search(text) or _apply([], text)[1] < 0:
        return text  # closes only what it opened itself: the prefix cannot matter
    _, bad = _apply(open_brackets(ctx.prefix[-_BRACKET_SCAN_CHARS:]), text)
    if bad < 0:
        return text
    line_start = text.rfind("\n", 0, bad) + 1
    if not text[line_start:bad].strip():
        return text[: max(0, line_start - 1)]
    return text[:bad]


def trim_line_overlap(text: str, ctx: CursorContext) -> str:
    """Mid-line: drop the end of the completion that repeats the text after
    the cursor (`foo(a, b)` before an auto-closed `)` becomes `foo(a, b`).

    Brackets decide when the line suffix has any: the overlap is removed only
    if the line would otherwise close more than is open, so `)` completing
    `print(len(x` before `)` is kept.
    """
    after = ctx.line_suffix
    if _BRACKET.search(after):
        opened = open_brackets(ctx.prefix[-_BRACKET_SCAN_CHARS:])
        stack, bad = _apply(opened, text)
        if bad >= 0:
            text = text[:bad]
            stack, _ = _apply(opened, text)
        if _apply(stack, after)[1] < 0:
            return text
        for size in range(min(len(text), len(after)), 0, -1):
            if text.endswith(after[:size]):
                trimmed = text[:-size]
                if _apply(_apply(opened, trimmed)[0], after)[1] < 0:
                    return trimmed
        return text
    tail = after.strip()
    if tail and text.rstrip().endswith(tail):
        return text.rstrip()[: -len(tail)]
    return text
