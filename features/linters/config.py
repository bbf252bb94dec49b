"""Which linters run: the `linters` setting, the ruff default, and
matching a file to linters by languageId, extension or glob."""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from agentls.core.settings.schema import AgentlsSettings


# Extension -> LSP languageId (the common ones; VS Code's identifiers).
_LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascriptreact", ".ts": "typescript", ".mts": "typescript",
    ".cts": "typescript", ".tsx": "typescriptreact",
    ".rs": "rust", ".go": "go", ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift", ".cs": "csharp",
    ".rb": "ruby", ".php": "php", ".lua": "lua", ".sh": "shellscript", ".bash": "shellscript",
    ".zsh": "shellscript", ".json": "json", ".jsonc": "jsonc", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".md": "markdown", ".markdown": "markdown", ".html": "html",
    ".htm": "html", ".css": "css", ".scss": "scss", ".less": "less", ".sql": "sql",
    ".vue": "vue", ".svelte": "svelte", ".r": "r", ".dart": "dart", ".scala": "scala",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml",
    ".zig": "zig", ".nim": "nim", ".tf": "terraform", ".proto": "proto3",
}
_LANGUAGE_BY_NAME: dict[str, str] = {
    "Dockerfile": "dockerfile", "Makefile": "makefile", "makefile": "makefile",
    "GNUmakefile": "makefile",
}


@dataclass(frozen=True)
class Linter:
    """One linter command (a `linters` entry, or the ruff default)."""

    name: str
    languages: tuple[str, ...]
    command: tuple[str, ...]
    timeout: float = 10.0
    output: Literal["auto", "ruff-json"] = "auto"
    # Finding codes (prefixes) sent back to the agent; None: all of them.
    # The editor is shown every finding either way.
    inject_codes: tuple[str, ...] | None = None

    @property
    def uses_stdin(self) -> bool:
        return not any("{file}" in arg for arg in self.command)


def language_id_for(path: str | PurePath) -> str | None:
    """The LSP languageId most editors give a file of this name."""
    pure = PurePath(path)
    return _LANGUAGE_BY_NAME.get(pure.name) or _LANGUAGE_BY_EXTENSION.get(pure.suffix.lower())


def _matches(languages: Iterable[str], path: str | PurePath, language_id: str | None) -> bool:
    pure = PurePath(path)
    ids = {i.lower() for i in (language_id, language_id_for(pure)) if i}
    suffix = pure.suffix.lower()
    for entry in languages:
        wanted = entry.strip()
        low = wanted.lower()
        if low == "*" or low in ids:
            return True
        if suffix and low in (suffix, suffix.lstrip(".")):
            return True
        if any(c in wanted for c in "*?[") and fnmatch.fnmatch(pure.name, wanted):
            return True
    return False


def linters_for(
    linters: Sequence[Linter], path: str | PurePath, language_id: str | None = None
) -> list[Linter]:
    """The linters whose `languages` match this file."""
    return [linter for linter in linters if _matches(linter.languages, path, language_id)]


def _ruff_command() -> tuple[str, ...] | None:
    found = shutil.which("ruff")
    if found:
        return (found,)
    # The server's own environment (an editor may start it by absolute path,
    # with the virtualenv's bin/ not on PATH).
    bindir = Path(sys.executable).parent
    for name in ("ruff", "ruff.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return (str(candidate),)
    if importlib.util.find_spec("ruff") is not None:
        return (sys.executable, "-m", "ruff")
    return None


# What the default ruff sends back to the agent: errors that break the code
# (syntax, invalid comparisons and statements, undefined names), the set
# Aider's auto-lint and flake8's "fatal" selection use. A style finding
# pushed as "fix them now" made a small model break code that passed its
# tests (bench/README.md, "Agent tasks").
ERROR_CODES = ("E9", "F63", "F7", "F82")


def default_linters() -> list[Linter]:
    """ruff for Python when ruff is installed, else nothing."""
    ruff = _ruff_command()
    if ruff is None:
        return []
    return [
        Linter(
            name="ruff",
            languages=("python",),
            command=(*ruff, "check", "--output-format", "json", "--no-cache",
                     "--force-exclude", "--stdin-filename", "{path}", "-"),
            timeout=10.0,
            output="ruff-json",
            inject_codes=ERROR_CODES,
        )
    ]


def _linter_name(command: Sequence[str]) -> str:
    """`ruff` for ["ruff", ...], ["/venv/bin/ruff", ...] and ["python", "-m", "ruff", ...]."""
    first = PurePath(command[0]).name
    if first.lower().startswith("python") and len(command) > 2 and command[1] == "-m":
        return command[2]
    return first.removesuffix(".exe") or command[0]


def configured_linters(settings: AgentlsSettings) -> list[Linter]:
    if settings.linters is None:
        return default_linters()
    return [
        Linter(
            name=_linter_name(config.command),
            languages=tuple(config.languages),
            command=tuple(config.command),
            timeout=config.timeout_seconds,
        )
        for config in settings.linters
    ]
