"""Completion tasks cut from real code at run time.

Sources are files nobody here wrote: the Python sources of installed
packages (httpx, pydantic, anyio, pygls by default) or a user's own
repository. Nothing is copied anywhere: each task is the file's text with
one part masked, built in memory when the eval runs.

Three kinds, at places chosen by a seeded random generator (the same seed
gives the same tasks for the same installed versions):

- `line`: the rest of one line after its indentation (the cursor sits on an
  indented line that is otherwise empty, like `def mul(a, b):` + Enter);
- `body`: the body of a function (Python files, found with `ast`), cursor at
  the body's indentation;
- `span`: a few tokens in the middle of a line, with code after the cursor.
"""

from __future__ import annotations

import ast
import importlib.util
import random
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentls.core.editor.positions import code_units

__all__ = ["KINDS", "Task", "cut_tasks", "package_sources", "quotas", "repository_sources"]

KINDS = ("line", "body", "span")
MAX_FILE_CHARS = 200_000
_LANGUAGES = {".py": "python", ".ts": "typescript", ".js": "javascript", ".go": "go",
              ".rs": "rust", ".lua": "lua"}


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    kind: str
    source: str  # where the file came from (package name or repository)
    path: str  # relative to the source's root
    language_id: str
    text: str  # the document with the part masked
    offset: int  # the cursor (code points)
    line: int  # the cursor as an LSP position (UTF-16)
    character: int
    expected: str

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["text"]  # not stored: the file is someone else's code
        return data


def package_sources(modules: Sequence[str]) -> list[tuple[str, Path, Path]]:
    """(package, root, file) for the .py files of installed packages."""
    found: list[tuple[str, Path, Path]] = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        roots = list(spec.submodule_search_locations or [])
        if not roots and spec.origin:
            roots = [str(Path(spec.origin).parent)]
        for root in roots:
            base = Path(root)
            for path in sorted(base.rglob("*.py")):
                if "tests" not in path.parts:
                    found.append((name, base.parent, path))
    return found


def repository_sources(repo: Path) -> list[tuple[str, Path, Path]]:
    """(repo name, root, file) for the tracked source files of a repository
    (git ls-files; every file under it when it is not a git checkout).
    A file that is a link, or below a linked folder, is left out: it may
    lead out of the repository, and its text would go to the provider."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True,
                                text=True, timeout=30, check=True).stdout.split("\0")
        paths = [repo / line for line in listed if line]
    except (OSError, subprocess.SubprocessError):
        paths = sorted(p for p in repo.rglob("*") if p.is_file())
    return [(repo.name, repo, p) for p in paths
            if p.suffix in _LANGUAGES and "node_modules" not in p.parts
            and _inside_without_links(repo, p)]


def _inside_without_links(repo: Path, path: Path) -> bool:
    """`path` is a regular file below `repo` reached through no symbolic link."""
    try:
        relative = path.relative_to(repo)
    except ValueError:
        return False
    here = repo
    for part in relative.parts:
        here = here / part
        try:
            if here.is_symlink():
                return False
        except OSError:
            return False
    return path.is_file()


def quotas(count: int, kinds: Sequence[str]) -> dict[str, int]:
    """`count` spread evenly over `kinds`, the first ones taking the rest."""
    return {kind: count // len(kinds) + (1 if index < count % len(kinds) else 0)
            for index, kind in enumerate(kinds)}


def cut_tasks(files: Iterable[tuple[str, Path, Path]], *, count: int, seed: int,
              kinds: Sequence[str] = KINDS) -> list[Task]:
    """`count` tasks, spread evenly over `kinds`."""
    rng = random.Random(seed)
    candidates = list(files)
    rng.shuffle(candidates)
    wanted = quotas(count, kinds)
    tasks: list[Task] = []
    for source, root, path in candidates:
        if all(wanted[k] <= 0 for k in kinds):
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not text.strip() or len(text) > MAX_FILE_CHARS or "\r" in text:
            continue
        language = _LANGUAGES.get(path.suffix, "plaintext")
        for kind in kinds:
            if wanted[kind] <= 0:
                continue
            cut = _CUTTERS[kind](text, rng, language)
            if cut is None:
                continue
            masked, offset, expected = cut
            line = masked.count("\n", 0, offset)
            line_start = masked.rfind("\n", 0, offset) + 1
            character = code_units(masked[line_start:offset])
            relative = path.relative_to(root).as_posix()
            tasks.append(Task(id=f"{kind}:{relative}:{line + 1}", kind=kind, source=source,
                              path=relative, language_id=language, text=masked, offset=offset,
                              line=line, character=character, expected=expected))
            wanted[kind] -= 1
            break  # one task per file: spread over many files
    return tasks


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line) of lines worth predicting: code, not comments, not
    docstring-looking, 8-100 characters of content."""
    found: list[tuple[int, str]] = []
    offset = 0
    for line in text.split("\n"):
        content = line.strip()
        if (8 <= len(content) <= 100 and not content.startswith(("#", "//", "\"", "'", "*"))
                and not content.startswith(("@", "import ", "from "))):
            found.append((offset, line))
        offset += len(line) + 1
    return found


def _cut_line(text: str, rng: random.Random, language: str) -> tuple[str, int, str] | None:
    lines = _code_lines(text)
    if not lines:
        return None
    start, line = lines[rng.randrange(len(lines))]
    indent = len(line) - len(line.lstrip(" \t"))
    cursor = start + indent
    return text[:cursor] + text[start + len(line):], cursor, line[indent:]


def _cut_span(text: str, rng: random.Random, language: str) -> tuple[str, int, str] | None:
    lines = [(o, line) for o, line in _code_lines(text) if len(line.strip()) >= 20]
    if not lines:
        return None
    start, line = lines[rng.randrange(len(lines))]
    indent = len(line) - len(line.lstrip(" \t"))
    # Cut at word boundaries: from after some token to before the line's tail.
    bounds = [i for i in range(indent + 1, len(line) - 2)
              if (not line[i - 1].isalnum() and line[i - 1] != "_") or not line[i].isalnum()]
    if len(bounds) < 2:
        return None
    first = bounds[rng.randrange(len(bounds) // 2 + 1)]
    ends = [b for b in bounds if first + 3 <= b <= first + 30]
    if not ends:
        return None
    last = ends[rng.randrange(len(ends))]
    expected = line[first:last]
    if not expected.strip():
        return None
    cursor = start + first
    return text[:cursor] + text[start + last:], cursor, expected


def _cut_body(text: str, rng: random.Random, language: str) -> tuple[str, int, str] | None:
    if language != "python":
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    functions = [node for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                 and node.end_lineno is not None
                 and 2 <= node.end_lineno - node.body[0].lineno + 1 <= 10]
    if not functions:
        return None
    node = functions[rng.randrange(len(functions))]
    body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None),
                                                    ast.Constant) and len(body) > 1:
        body = body[1:]  # keep the docstring: it is context, not the task
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    first, last = body[0].lineno - 1, (node.end_lineno or body[-1].lineno) - 1
    line_start = starts[first]
    line = text[line_start : starts[first + 1] - 1]
    indent = len(line) - len(line.lstrip(" \t"))
    cursor = line_start + indent
    end = starts[last + 1] - 1  # the end of the body's last line
    expected = text[cursor:end]
    if len(expected) > 600 or not expected.strip():
        return None
    return text[:cursor] + text[end:], cursor, expected


_CUTTERS = {"line": _cut_line, "body": _cut_body, "span": _cut_span}
