"""What list_files and search_text leave out, as git would: the
`.gitignore` files at every level of the tree (each applies to its own
folder and below, a deeper one overriding a shallower one, negations
included) and `.git/info/exclude`, matched by `pathspec`'s GitIgnoreSpec
(the well-kept implementation of git's rules), plus tool and dependency
folders nobody wants an agent to wade through.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = ["DEFAULT_IGNORED_DIRS", "IgnoreRules"]

DEFAULT_IGNORED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
    }
)
_MAX_BYTES = 64 * 1024


def _spec(path: Path) -> GitIgnoreSpec | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(_MAX_BYTES).splitlines()
    except OSError:
        return None
    # Imported on first use: the tools are loaded in every session (for
    # their tags), and most never list or search a folder.
    from pathspec import GitIgnoreSpec

    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError:
        return None


class IgnoreRules:
    """Ignore rules for one workspace folder; `.gitignore` files are read
    lazily, once per folder visited."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, GitIgnoreSpec | None] = {}  # folder rel path -> its rules
        self._exclude = _spec(root / ".git" / "info" / "exclude")

    def _folder_spec(self, rel_dir: str) -> GitIgnoreSpec | None:
        if rel_dir not in self._specs:
            base = self.root / rel_dir if rel_dir else self.root
            self._specs[rel_dir] = _spec(base / ".gitignore")
        return self._specs[rel_dir]

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        """`rel`: posix path relative to the folder. Deeper .gitignore files
        decide first; the first that has an opinion (match or negation) wins,
        then .git/info/exclude."""
        name = rel.rsplit("/", 1)[-1]
        if is_dir and name in DEFAULT_IGNORED_DIRS:
            return True
        parts = rel.split("/")
        subject = rel + "/" if is_dir else rel
        for depth in range(len(parts) - 1, -1, -1):
            rel_dir = "/".join(parts[:depth])
            spec = self._folder_spec(rel_dir)
            if spec is None:
                continue
            local = subject[len(rel_dir) + 1:] if rel_dir else subject
            result = spec.check_file(local)
            if result.include is not None:
                return bool(result.include)
        if self._exclude is not None:
            result = self._exclude.check_file(subject)
            if result.include is not None:
                return bool(result.include)
        return False
