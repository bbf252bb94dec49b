"""Code blocks in a reply, applied to the files they change: the editor's
"Apply" of a chat code block (Copilot Chat, Continue and Cursor have one),
done by agentls for models that write code better in prose than in a tool
call's JSON string.

Pure logic, no I/O: `find_code_blocks` reads the fenced blocks of a reply
and the file each one names, `apply_block` merges a block into a file's
text. A Python block is merged by definition: each top-level `def`/`class`
(and constant) of the block replaces the one of the same name in the file,
new definitions are added at the end, new imports after the file's own;
the rest of the file is kept as it was. A block of imports alone goes to
the file that uses what they import without binding it. A block that is a whole version of
the file (its explicit path, and most of the file's lines or all of its
definitions) replaces the file. A non-Python block replaces the file only
when it names it.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["AppliedBlock", "CodeBlock", "apply_block", "apply_reply", "defined_names",
           "find_code_blocks", "prose_of", "read_reply"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$", re.M)
# A path is looked for at the start of each word only (word: a run of
# `_WORD`); searched for anywhere in a long word it is quadratic.
_WORD = re.compile(r"[\w./-]+")
_PATHLIKE = re.compile(r"(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8}")
MAX_PATH_CHARS = 4096  # a longer word is not a path (PATH_MAX)
_PATH_COMMENT = re.compile(
    r"^\s*(?:#|//|--|/\*)\s*(?:file(?:name)?\s*:\s*|path\s*:\s*)?"
    r"(?P<path>(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8})\s*(?:\*/)?\s*$", re.I)
_PYTHON_LANGS = {"python", "py", "python3", ""}


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language tag, the path it names (the fence's
    info, the line before the fence, or a first-line comment; None when
    none) and its text (without a path comment)."""

    lang: str
    path: str | None
    text: str


@dataclass(frozen=True)
class AppliedBlock:
    """A block merged into a file: the file's new text, and how (`whole`
    when the block replaced the file, `definitions` when merged)."""

    path: str
    new_text: str
    how: str
    names: tuple[str, ...] = ()


def find_code_blocks(reply: str, known_paths: Iterable[str] = ()) -> list[CodeBlock]:
    """The code blocks of `reply`, in order: `<file path="...">` blocks (the
    form files are shown to the model in), closed fenced blocks, or, when a
    reply has neither, the reply itself if it has a path comment. A block
    with path comments (`# path/to/x.py`) inside is split there. A path
    counts when it is one of `known_paths` (by path or by its last part);
    a `<file path>` names its path whatever it is."""
    known = _Known(known_paths)
    blocks: list[CodeBlock] = []
    tags = _file_tags(reply)
    for _start, _end, tag_path, tag_body in tags:
        tagged = _known([tag_path], known) or _clean(tag_path)
        blocks.extend(_split("", tagged, _unfence(tag_body), known))
    rest = _without(reply, tags)
    pos = 0
    fenced = False
    while True:
        opening = _FENCE.search(rest, pos)
        if opening is None:
            break
        fence = opening.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = closing.search(rest, opening.end())
        if end is None:
            break
        fenced = True
        body = rest[opening.end() + 1:end.start()] if opening.end() < len(rest) else ""
        info = opening.group("info").strip()
        lang = info.split()[0].split(":")[0].lower() if info else ""
        path = _known(_pathlike(info), known)
        if path is None:
            path = _known(_pathlike(_line_before(rest, opening.start())), known)
        indent = opening.group("indent")
        if indent:
            body = "\n".join(line[len(indent):] if line.startswith(indent) else line
                             for line in body.split("\n"))
        blocks.extend(_split(lang, path, body, known))
        pos = end.end()
    if not blocks and not fenced:
        bare = _split("", None, reply, known)
        if bare and bare[0].path is not None:
            blocks.extend(bare)
    return blocks


# The path quoted, or (small models) not: <file path=robot.py>.
_FILE_OPEN = re.compile(r"<file\s+path\s*=\s*(?:[\"'](?P<path>[^\"'<>\n]+)[\"']"
                        r"|(?P<bare>[^\s\"'<>]+))\s*>\n?")
_FILE_CLOSE = "</file>"
_LONE_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*$", re.M)


def _file_tags(reply: str) -> list[tuple[int, int, str, str]]:
    """(start, end, path, body) of each `<file path="...">...</file>`, in
    order; a body ends at the first `</file>` after its opening. One pass:
    an opening with no `</file>` after it ends the search (a regex with a
    lazy body retried it from every later opening: quadratic)."""
    tags: list[tuple[int, int, str, str]] = []
    pos = 0
    while (opening := _FILE_OPEN.search(reply, pos)) is not None:
        path = opening.group("path") or opening.group("bare")
        close = reply.find(_FILE_CLOSE, opening.end())
        if close == -1:
            fenced = _fence_closed(reply, opening.end())
            if fenced is not None:
                tags.append((opening.start(), fenced, path, reply[opening.end():fenced]))
                pos = fenced
                continue
            break
        end = close + len(_FILE_CLOSE)
        tags.append((opening.start(), end, path, reply[opening.end():close]))
        pos = end
    return tags


def _fence_closed(reply: str, start: int) -> int | None:
    """Where a `<file>` body that a small model closed with a lone code fence
    instead of `</file>` ends (before that fence's line), when the body did
    not open a fence of its own; None otherwise. A body that just stops (a
    reply cut short) is never taken: writing it would cut the file."""
    following = _FILE_OPEN.search(reply, start)
    limit = following.start() if following is not None else len(reply)
    if reply[start:limit].lstrip().startswith(("```", "~~~")):
        return None
    fence = _LONE_FENCE.search(reply, start, limit)
    return fence.start() if fence is not None and fence.start() > start else None


def _without(text: str, spans: Iterable[tuple[int, int, str, str]]) -> str:
    parts: list[str] = []
    pos = 0
    for start, end, *_ in spans:
        parts.append(text[pos:start])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _line_before(text: str, start: int) -> str:
    """The last non-empty line of text[:start] (without copying it)."""
    end = start
    while end > 0 and text[end - 1] == "\n":
        end -= 1
    return text[text.rfind("\n", 0, end) + 1:end]


def _pathlike(text: str) -> list[str]:
    """The path-like words of `text`: each word's longest path prefix
    (leading `/` dropped: known paths are relative, and matched by name)."""
    found = []
    for word in _WORD.findall(text):
        if len(word) > MAX_PATH_CHARS:
            continue
        match = _PATHLIKE.match(word.lstrip("/"))
        if match:
            found.append(match.group(0))
    return found


def _unfence(body: str) -> str:
    lines = body.strip("\n").split("\n")
    if len(lines) >= 2 and lines[0].lstrip().startswith(("```", "~~~")) \
            and lines[-1].strip().startswith(("```", "~~~")):
        return "\n".join(lines[1:-1])
    return body


def _clean(path: str) -> str:
    path = path.strip()
    return path[2:] if path.startswith("./") else path


def _split(lang: str, path: str | None, body: str, known: _Known) -> list[CodeBlock]:
    """`body` as blocks: a path comment naming a known file starts a new one."""
    parts: list[tuple[str | None, list[str]]] = [(path, [])]
    for line in body.split("\n"):
        comment = _PATH_COMMENT.match(line)
        named = _known([comment.group("path")], known) if comment else None
        if named is not None:
            if any(text.strip() for text in parts[-1][1]):
                parts.append((named, []))
            else:
                parts[-1] = (parts[-1][0] or named, [])
            continue
        parts[-1][1].append(line)
    blocks = []
    for part_path, lines in parts:
        text = "\n".join(lines).strip("\n")
        if text.strip():
            blocks.append(CodeBlock(lang=lang, path=part_path, text=text + "\n"))
    return blocks


class _Known:
    """The known paths, looked up by path and by last part (a dict each:
    a reply's every line is looked up)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths: set[str] = set()
        self.by_name: dict[str, list[str]] = {}
        for path in paths:
            if path not in self.paths:
                self.paths.add(path)
                self.by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)


def _known(words: Iterable[str], known: _Known) -> str | None:
    for word in words:
        word = _clean(word.strip("`*'\"()[]:,"))
        if word in known.paths:
            return word
        by_name = known.by_name.get(word.rsplit("/", 1)[-1], [])
        if len(by_name) == 1:
            return by_name[0]
    return None


def apply_reply(reply: str, files: Mapping[str, str]) -> list[AppliedBlock]:
    """Every block of `reply` that applies to one of `files` (path -> text),
    merged in order; a file changed by two blocks gets both."""
    return read_reply(reply, files)[0]


def read_reply(reply: str, files: Mapping[str, str]) -> tuple[list[AppliedBlock], list[str]]:
    """apply_reply's changes, and the files the reply wrote out unchanged
    (whitespace aside: an echo of a file is not an edit)."""
    current = dict(files)
    changed: dict[str, AppliedBlock] = {}
    unchanged: list[str] = []
    blocks = find_code_blocks(reply, current)
    for block in blocks:
        applied = apply_block(block, current)
        if applied is None:
            continue
        if _same_code(applied.new_text, current[applied.path]):
            if applied.path not in unchanged and applied.path not in changed:
                unchanged.append(applied.path)
            continue
        current[applied.path] = applied.new_text
        earlier = changed.get(applied.path)
        names = (earlier.names if earlier else ()) + applied.names
        how = applied.how if earlier is None or earlier.how == applied.how else "definitions"
        changed[applied.path] = AppliedBlock(applied.path, applied.new_text, how, names)
    for path, applied in changed.items():
        kept = with_stdlib_imports(path, _with_reply_imports(path, applied.new_text, blocks),
                                   files[path])
        if kept != applied.new_text:
            changed[path] = AppliedBlock(path, kept, applied.how, applied.names)
    return list(changed.values()), [path for path in unchanged if path not in changed]


def with_stdlib_imports(path: str, text: str, before: str = "") -> str:
    """`text` with the import of each standard-library name it uses and
    never binds (`random.choice(...)` with no `import random`, `timedelta(
    hours=2)` with no `from datetime import timedelta`), where `before` (the
    file's text before the reply) did not lack it already: the 1.5B's most
    common broken edit, which the tests then fail with a NameError and the
    model, told by the linter, often writes back unchanged. A name is
    imported only when the module (or class) has every attribute the code
    reads of it; what was missing before the reply stays the user's."""
    if not path.endswith((".py", ".pyi")):
        return text
    tree = _parse(text)
    missing = (_unbound_names(text) - _unbound_names(before)) & (_MODULES | set(_FROM))
    if tree is None or not missing:
        return text
    uses: dict[str, set[str | None]] = {name: set() for name in missing}
    attributes = {id(node.value): node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in uses and isinstance(node.ctx, ast.Load):
            uses[node.id].add(attributes.get(id(node)))
    lines = sorted(filter(None, (_import_line(name, read) for name, read in uses.items())))
    if not lines:
        return text
    imports = "".join(f"{line}\n" for line in lines)
    return _merge(text, tree, imports, ast.parse(imports), imports_only=True)[0]


def _import_line(name: str, read: set[str | None]) -> str | None:
    """`import name` when `name` is a module with every attribute in `read`
    (None: the name used bare), `from module import name` when the table's
    object is; else None."""
    import importlib

    if name in _MODULES and None not in read:
        module = importlib.import_module(name)
        if all(attr is not None and hasattr(module, attr) for attr in read):
            return f"import {name}"
    if name in _FROM:
        target = getattr(importlib.import_module(_FROM[name]), name, None)
        if target is not None and all(attr is None or hasattr(target, attr) for attr in read):
            return f"from {_FROM[name]} import {name}"
    return None


# Standard-library modules a bare name is taken for (imported here to check
# the attributes the code reads: none with side effects on import).
_MODULES = frozenset({
    "abc", "array", "base64", "bisect", "calendar", "cmath", "collections", "copy", "csv",
    "dataclasses", "datetime", "decimal", "enum", "fractions", "functools", "glob", "hashlib",
    "heapq", "inspect", "io", "itertools", "json", "logging", "math", "numbers", "operator",
    "os", "pathlib", "pprint", "random", "re", "secrets", "shutil", "statistics", "string",
    "struct", "sys", "tempfile", "textwrap", "time", "types", "typing", "unicodedata", "uuid",
})
# Names the small models use without their `from ... import` (unambiguous ones).
_FROM = {
    "date": "datetime", "datetime": "datetime", "timedelta": "datetime", "timezone": "datetime",
    "Counter": "collections", "OrderedDict": "collections", "defaultdict": "collections",
    "deque": "collections", "namedtuple": "collections", "lru_cache": "functools",
    "reduce": "functools", "Fraction": "fractions", "Decimal": "decimal", "Path": "pathlib",
    "dataclass": "dataclasses", "Enum": "enum",
}


def _with_reply_imports(path: str, text: str, blocks: Iterable[CodeBlock]) -> str:
    """`text` with the imports the reply wrote anywhere (a block of its own,
    or with a function a later whole file replaced) that it uses and lacks."""
    if not path.endswith((".py", ".pyi")):
        return text
    missing = _unbound_names(text)
    if not missing:
        return text
    wanted: list[str] = []
    for block in blocks:
        tree = _parse(block.text) if block.lang in _PYTHON_LANGS else None
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.Import | ast.ImportFrom) and missing & {
                    alias.asname or alias.name.split(".")[0] for alias in node.names}:
                source = ast.unparse(node) + "\n"
                if source not in wanted:
                    wanted.append(source)
    tree = _parse(text)
    if not wanted or tree is None:
        return text
    imports = "".join(wanted)
    return _merge(text, tree, imports, ast.parse(imports), imports_only=True)[0]


def _same_code(a: str, b: str) -> bool:
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]
    return lines(a) == lines(b)


def prose_of(reply: str) -> str:
    """`reply` without its file tags and fenced blocks: what it says in words."""
    text = _without(reply, _file_tags(reply))
    lines = text.split("\n")
    # Line numbers of each possible closing fence: every opening finds its
    # closing by a lookup, not by searching the rest of the reply.
    closings: dict[str, list[int]] = {}
    for number, line in enumerate(lines):
        if _FENCE_ONLY.fullmatch(line):
            closings.setdefault(line.strip(" \t"), []).append(number)
    kept: list[str] = []
    number = 0
    while number < len(lines):
        closed = _prose_fence_end(lines[number], number, closings) \
            if number + 1 < len(lines) else None
        if closed is None:
            kept.append(lines[number])
            number += 1
            continue
        kept.append("")  # the block goes; the line break after it stays
        number = closed + 1
    return "\n".join(kept).strip()


_FENCE_ONLY = re.compile(r"[ \t]*(?:`{3,}|~{3,})[ \t]*")
_FENCE_START = re.compile(r"[ \t]*(`{3,}|~{3,})")


def _prose_fence_end(line: str, number: int, closings: Mapping[str, list[int]]) -> int | None:
    """The line that closes a block opened at `line` (its fence exactly,
    alone on a line, after it), trying its fence and then shorter ones."""
    opening = _FENCE_START.match(line)
    if opening is None:
        return None
    fence = opening.group(1)
    for length in range(len(fence), 2, -1):
        candidates = closings.get(fence[:length], [])
        after = bisect.bisect_right(candidates, number)
        if after < len(candidates):
            return candidates[after]
    return None


def apply_block(block: CodeBlock, files: Mapping[str, str]) -> AppliedBlock | None:
    """`block` merged into the file it belongs to, or None when it belongs
    to none (an example, a shell command, a file it does not name)."""
    target: str | None = block.path
    if target is not None and target not in files:
        return None  # a file it names that is not there: not another one
    imports = _imports_block(block)
    if imports is not None and (added := _add_imports(block, imports, files)) is not None:
        return added
    if target is None:
        target = _owner(block, files)
        if target is None:
            return None
    old = files[target]
    if not _is_python(target, block.lang):
        if block.path is None:
            return None
        return AppliedBlock(target, block.text, "whole")
    new_tree = _parse(block.text)
    old_tree = _parse(old)
    if new_tree is None or old_tree is None:
        return None
    if block.path is not None and _is_whole(block.text, old, new_tree, old_tree):
        return AppliedBlock(target, block.text, "whole", tuple(_names(new_tree)))
    merged, names = _merge(old, old_tree, block.text, new_tree)
    if not names:
        return None
    return AppliedBlock(target, merged, "definitions", tuple(names))


def _imports_block(block: CodeBlock) -> ast.Module | None:
    """The block's tree when it holds imports and nothing else (a small
    model's "add these lines at the top of the file", beside or after the
    file it wrote without them)."""
    if block.lang not in _PYTHON_LANGS or (block.path is not None
                                           and not _is_python(block.path, block.lang)):
        return None
    tree = _parse(block.text)
    return tree if tree is not None and _only_imports(tree) else None


def _only_imports(tree: ast.Module) -> bool:
    return bool(tree.body) and all(isinstance(node, ast.Import | ast.ImportFrom)
                                   for node in tree.body)


def _add_imports(block: CodeBlock, tree: ast.Module,
                 files: Mapping[str, str]) -> AppliedBlock | None:
    """An imports-only block added to the file it names or, when it names
    none, to the one Python file that uses a name the imports bind without
    binding it itself; None when no import is new or no file is that one."""
    bound = {alias.asname or alias.name.split(".")[0]
             for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
             for alias in node.names if alias.name != "*"}
    if block.path is not None:
        if _only_imports(_parse(files[block.path]) or ast.Module(body=[], type_ignores=[])):
            return None  # a file of imports (an __init__.py): the block is its new text
        candidates = [block.path]
    else:
        candidates = [path for path, text in files.items()
                      if path.endswith((".py", ".pyi")) and bound & _unbound_names(text)]
    if len(candidates) != 1:
        return None
    target = candidates[0]
    old = files[target]
    old_tree = _parse(old)
    if old_tree is None:
        return None
    merged, _ = _merge(old, old_tree, block.text, tree, imports_only=True)
    if merged == old:
        return None
    return AppliedBlock(target, merged, "definitions", tuple(sorted(bound)))


def _unbound_names(text: str) -> set[str]:
    """Names `text` reads that nothing in it binds (nor builtins): what an
    import it lacks would bind. Empty when it does not parse."""
    tree = _parse(text)
    if tree is None:
        return set()
    loaded: set[str] = set()
    bound: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


def _is_python(path: str, lang: str) -> bool:
    return path.endswith((".py", ".pyi")) and lang in _PYTHON_LANGS


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _owner(block: CodeBlock, files: Mapping[str, str]) -> str | None:
    """The one Python file that defines a top-level name the block defines."""
    tree = _parse(block.text)
    if tree is None or block.lang not in _PYTHON_LANGS:
        return None
    wanted = set(_names(tree))
    if not wanted:
        return None
    owners = []
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        other = _parse(text)
        if other is not None and wanted & set(_names(other)):
            owners.append(path)
    return owners[0] if len(owners) == 1 else None


def defined_names(text: str) -> list[str]:
    """The top-level names a Python text defines ([] when it does not parse)."""
    tree = _parse(text)
    return _names(tree) if tree is not None else []


def _names(tree: ast.Module) -> list[str]:
    return [name for node in tree.body for name in _node_names(node)]


def _node_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _is_whole(new: str, old: str, new_tree: ast.Module, old_tree: ast.Module) -> bool:
    """A named block is the whole file when it keeps most of the file's
    lines, or has as many definitions as the file (a rename changes one)."""
    old_names = _names(old_tree)
    new_names = _names(new_tree)
    if old_names and len(new_names) >= len(old_names) and not any(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) for node in new_tree.body
    ):
        return True
    ratio = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines()).ratio()
    return ratio >= 0.6


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based first line (decorators included) and end line (exclusive)."""
    start = node.lineno
    decorators = getattr(node, "decorator_list", None) or []
    if decorators:
        start = min(start, *(d.lineno for d in decorators))
    return start - 1, (node.end_lineno or node.lineno)


def _merge(
    old: str, old_tree: ast.Module, new: str, new_tree: ast.Module, *, imports_only: bool = False
) -> tuple[str, list[str]]:
    old_lines = old.splitlines(keepends=True)
    if old_lines and not old_lines[-1].endswith("\n"):
        old_lines[-1] += "\n"
    new_lines = new.splitlines(keepends=True)
    where: dict[str, ast.stmt] = {}
    for node in old_tree.body:
        for name in _node_names(node):
            where.setdefault(name, node)
    old_imports = {ast.unparse(node) for node in old_tree.body
                   if isinstance(node, ast.Import | ast.ImportFrom)}
    replacements: dict[int, tuple[int, list[str]]] = {}
    added: list[list[str]] = []
    imports: list[str] = []
    names: list[str] = []
    for node in new_tree.body:
        start, end = _span(node)
        segment = new_lines[start:end]
        if segment and not segment[-1].endswith("\n"):
            segment[-1] += "\n"
        if isinstance(node, ast.Import | ast.ImportFrom):
            if ast.unparse(node) not in old_imports:
                imports.append("".join(segment))
            continue
        node_names = _node_names(node)
        if not node_names:
            continue  # an example call, a print: not part of the file
        target = where.get(node_names[0])
        if target is not None:
            if "".join(segment) != "".join(old_lines[_span(target)[0]:_span(target)[1]]):
                replacements[_span(target)[0]] = (_span(target)[1], segment)
                names.append(node_names[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            added.append(segment)
            names.append(node_names[0])
    if not names and not (imports and (replacements or added or imports_only)):
        return old, []
    out: list[str] = []
    index = 0
    while index < len(old_lines):
        if index in replacements:
            end, segment = replacements[index]
            out.extend(segment)
            index = end
        else:
            out.append(old_lines[index])
            index += 1
    for segment in added:
        while out and not out[-1].strip():
            out.pop()
        out.extend(["\n", "\n"] if out else [])
        out.extend(segment)
    if imports:
        last_import = max((_span(node)[1] for node in old_tree.body
                           if isinstance(node, ast.Import | ast.ImportFrom)), default=0)
        offset = _shifted(last_import, replacements)
        out[offset:offset] = imports + (["\n"] if last_import == 0 and out else [])
    return "".join(out), names


def _shifted(line: int, replacements: Mapping[int, tuple[int, list[str]]]) -> int:
    """Where old line `line` is in the merged text (replacements sit after
    the imports, so only those before it count)."""
    shift = 0
    for start, (end, segment) in replacements.items():
        if end <= line:
            shift += len(segment) - (end - start)
    return line + shift
