"""Linter hooks: after the agent changes a file, lint the new content and
tell the agent (and the user) what is wrong, in the same turn.

Hook module `linters` (entry-point group `agentls.hooks`), on `tool:post`
for successful `write_file`, `edit_file` and `rename_file` calls:

1. The file tools' ToolResult.output gives the new text (the buffer as the
   user sees it, unsaved), the old text and the 0-based line ranges the edit
   touched (`changed_lines`).
2. Every configured linter whose `languages` match the file runs on the new
   text, and on the old text too (so findings can be told apart as new or
   pre-existing), as an asyncio subprocess with its timeout; a linter that
   cannot start, times out or fails is reported to the user once, never
   fatal.
3. Kept are findings in lines the edit touched, findings new since before
   the edit (by (code, message) multiset), and findings this hook already
   reported for the document that are still there (so a half-fixed file
   keeps its reminders).
4. They are injected (`inject_context`, role system, stored: the agent sees
   them on its next model call and fixes its own mistake), within
   `session.injectionSizeLimit` (the rest are counted, not listed); a
   `user_message` at warning level tells the user; and the same findings are
   published as diagnostics for the document (source "agentls"), replaced
   after every later edit and cleared when an edit leaves none.

Settings (`linters`, docs/protocol.md): a list of
`{languages, command, timeoutSeconds}`. In `command` (an argv, no shell):

- `{file}` is replaced by the path of a temporary copy of the new text (same
  file name, in a fresh temp dir), so unsaved buffers are linted as shown;
- `{path}` by the document's real path (for options such as ruff's
  `--stdin-filename`, which find the project configuration from it);
- a command without `{file}` gets the text on its standard input.

Commands run in the workspace folder that holds the file. `languages`
entries match the languageId derived from the file extension (`python`,
`typescript`, ...), an extension (`.py`, `py`) or a file-name glob (`*.py`);
`*` matches every file. Output is parsed as ruff's JSON when it is a JSON
list, otherwise as `file:line[:col]: [severity:] [CODE] message` lines
(flake8, pylint --output-format=parseable, mypy, eslint -f unix, gcc style).

Default (`linters` null): ruff for Python when ruff is installed (on PATH,
next to the server's Python, or importable as a module), as
`ruff check --output-format json --no-cache --force-exclude --stdin-filename {path} -`
with the text on stdin: ruff then reads the workspace's own configuration
(pyproject.toml / ruff.toml / .ruff.toml nearest the real path, including
per-file ignores and excludes). `linters: []` turns linting off.
"""


from agentls.features.linters.config import (
    Linter,
    configured_linters,
    default_linters,
    language_id_for,
    linters_for,
)
from agentls.features.linters.hook import LINTED_TOOLS, LintersHook
from agentls.features.linters.parse import Finding, parse_output
from agentls.features.linters.report import (
    DIAGNOSTIC_SOURCE,
    changed_line_ranges,
    filter_findings,
    format_injection,
    to_diagnostic,
)
from agentls.features.linters.run import LintRun, run_linter

__all__ = [
    "DIAGNOSTIC_SOURCE",
    "LINTED_TOOLS",
    "Finding",
    "LintRun",
    "Linter",
    "LintersHook",
    "changed_line_ranges",
    "configured_linters",
    "default_linters",
    "filter_findings",
    "format_injection",
    "language_id_for",
    "linters_for",
    "parse_output",
    "run_linter",
    "to_diagnostic",
]
