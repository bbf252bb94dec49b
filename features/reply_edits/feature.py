"""File changes written in the reply, for models that fumble the file tools
(core/editor/reply_edits.py has the contract and why).

On when `session.editFormat` is "file-blocks", or "auto" with the embedded
`local` provider (the small models run on the user's CPU). The model is
told to write each changed file whole as `<file path="...">...</file>`, the
form files are shown to it in (mentions, named files); the file-changing
tools (write_file, edit_file, rename_file, delete_file) are not offered to
it. A final reply's blocks are read by
features/reply_edits/blocks.py: a block names its file by that tag, a fence's
info, the line before it or a first-line path comment, or (Python) by the
definitions it replaces; a Python block that is not the whole file is
merged by definition. Each changed file becomes one `write_file` call, run
through the one approval call site (core/agent/tool_calls.py): the user approves
it like any edit, checkpoints and linters see it. A `<file path>` block for
a file that does not exist creates it. Secret files (ModelFileAccess) are
never read or written this way. The files read for a reply are those it
names and the Python files the session named latest (`_candidates`), in
a worker thread (core/agent/tool_calls.py): a session naming thousands of
files costs the next reply nothing (docs/security.md, "big inputs").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.core.editor.file_access import Withheld
from agentls.core.editor.reply_edits import (
    ReplyEdits,
    ReplySources,
    resolved_edit_format,
    without_written_calls,
    written_call,
)
from agentls.features.policy.sensitive import ModelFileAccess
from agentls.features.prompt.named_files import find_named_file, named_paths
from agentls.features.tools.workspace import OutsideWorkspace, Workspace, WorkspacePathError

if TYPE_CHECKING:
    from agentls.core.types.messages import ToolCall

__all__ = ["INSTRUCTIONS", "ReplyEditsFeature", "edit_format"]

MAX_FILE_CHARS = 200_000  # a larger file is not merged
# Files named in the session that a reply may change without naming them
# (a Python block merged by definition): the latest ones only. A pasted log
# naming thousands of files must not make every reply read them all.
MAX_SEEN_PYTHON_FILES = 100
MAX_NAMED_WORDS = 500  # words of a reply and its session looked up as files
# Kept from the model: the small models reached for rename_file to "rename"
# a function (the file went) and for write_file with the attachment's tags
# inside the content (bench/HISTORY.md, "edits written in the reply"); and
# for run_command first thing, running the file they were asked to change
# and then writing it back unchanged (bench/README.md, "Agent tasks"):
# agentls itself runs the tests that cover a changed file (`_checks`).
HIDDEN_TOOLS = frozenset({"write_file", "edit_file", "rename_file", "delete_file",
                          "run_command"})
EXAMPLE_PATH = "relative/path"
# Aider's lessons for small models: whole files, names kept; and a question
# is answered in words (the 1.5B wrote the attached files back unchanged
# instead). No worked example: the 1.5B copied its code into the user's file.
# The question comes first: worded "To change files: ...", the 1.5B began
# its answers to questions with that sentence and then changed the files
# (bench/README.md, "Agent tasks"). The form on lines of its own: written
# inline in the sentence, the 1.5B wrote whole files on one line.
INSTRUCTIONS = (
    "When the user asks a question, answer it in words and write no file. When the request "
    "needs code changed, say in one sentence what you change, then write each file you "
    "change whole, with the change made, in this form:\n"
    f'<file path="{EXAMPLE_PATH}">\n'
    "the complete new content, line by line\n"
    "</file>\n"
    "A new path creates the file. Never write a file you do not change. Keep the names of "
    "existing functions and classes unless the user asks to rename them. agentls shows each "
    "change to the user for approval, applies it and runs the tests that cover the changed "
    "file."
)


def edit_format(config: dict[str, Any]) -> str:
    """"tool-calls" or "file-blocks", from `session.editFormat` ("auto": file
    blocks for the embedded local provider)."""
    settings = config.get("settings") or {}
    chosen = (settings.get("session") or {}).get("editFormat") or "auto"
    return resolved_edit_format(str(chosen), str(settings.get("provider") or ""))


class ReplyEditsFeature:
    """FeaturePlugin and ReplyEditor (see the module doc)."""

    name = "reply-edits"
    version = "0.1.0"
    priority = 60

    def is_enabled(self, config: dict[str, Any], tags: list[str], models: list[dict[str, Any]],
                   context: dict[str, Any]) -> bool:
        return edit_format(config) == "file-blocks"

    def instructions(self) -> str:
        return INSTRUCTIONS

    def hidden_tools(self) -> frozenset[str]:
        return HIDDEN_TOOLS

    def offers_tools(self, attached: Sequence[str]) -> bool:
        """No tools in a turn whose prompt carries files: the small models
        called one first (a read of the attached file, a search in it) and
        then wrote the file back unchanged; the edits they wrote straight
        away passed (bench/README.md, "Agent tasks"). Aider offers none."""
        return not attached

    def reply_edits(self, reply: str, sources: ReplySources) -> ReplyEdits:
        folders = sources.workspace_folders
        if not folders:
            return ReplyEdits()
        if "```" not in reply and "~~~" not in reply and "<file" not in reply \
                and "#" not in reply and not reply.lstrip().startswith("{"):
            return ReplyEdits(announced=self._announced(reply, reply, sources, ()))
        workspace = Workspace.of(folders, sources.documents)
        access = ModelFileAccess(folders)
        files: dict[str, str] = {}
        unseen: list[str] = []
        seen = "\n".join(sources.seen)
        for word in _candidates(reply, sources.seen):
            rel = self._readable(workspace, access, word, folders, files)
            if rel is not None and rel not in files and rel not in unseen:
                text = self._read(workspace, rel)
                if text is not None and text.strip() and text.strip() not in seen:
                    unseen.append(rel)  # its text was never shown to the model
                elif text is not None:
                    files[rel] = text
        # Imported here, not when features load (the keystroke path): pydantic,
        # and the block reader's ast/difflib.
        from agentls.core.types.messages import ToolCall
        from agentls.features.reply_edits.blocks import (
            defined_names,
            find_code_blocks,
            prose_of,
            read_reply,
            with_stdlib_imports,
        )

        named = written_call(reply)
        if named is not None:  # a function of the code "called" as a tool
            owners = [path for path, text in files.items() if named in defined_names(text)]
            return ReplyEdits(defined_in=((named, owners[0]),) if len(owners) == 1 else ())
        applied, unchanged = read_reply(reply, files)
        calls = [ToolCall(tool="write_file", arguments={"path": a.path, "content": a.new_text})
                 for a in applied]
        blocks = find_code_blocks(reply, [*files, *unseen])
        calls.extend(ToolCall(tool="write_file",
                              arguments={"path": block.path,
                                         "content": with_stdlib_imports(block.path, block.text)})
                     for block in blocks
                     if block.path is not None and block.path not in files
                     and block.path not in unseen
                     and (self._new(workspace, access, block.path)
                          or self._malformed(workspace, block.path)))
        # A file it wrote without having seen it is read for it instead: the
        # model gets the real text back and goes on from there.
        written = {block.path for block in blocks}
        calls.extend(ToolCall(tool="read_file", arguments={"path": path})
                     for path in unseen if path in written)
        prose = prose_of(reply)
        return ReplyEdits(calls=tuple(calls), unchanged=tuple(unchanged),
                          checks=_checks(folders[0], calls),
                          words=len(without_written_calls(prose).split()) >= 3,
                          announced=() if calls else self._announced(reply, prose, sources,
                                                                    unchanged))

    def _announced(self, reply: str, prose: str, sources: ReplySources,
                   unchanged: Sequence[str]) -> tuple[str, ...]:
        """The files the session showed that the reply's words say it changes
        (a change verb and the file's name in its prose), when it wrote none
        of them or only unchanged copies."""
        if not _CHANGE_WORD.search(prose):
            return ()
        seen = "\n".join(sources.seen)
        workspace = Workspace.of(sources.workspace_folders, sources.documents)
        access = ModelFileAccess(sources.workspace_folders)
        found: list[str] = []
        for word in named_paths(prose):
            rel = self._readable(workspace, access, word, sources.workspace_folders, {})
            if rel is None or rel in found or (rel not in seen and rel not in unchanged):
                continue
            found.append(rel)
        return tuple(found)

    @staticmethod
    def _readable(workspace: Workspace, access: ModelFileAccess, word: str,
                  folders: tuple[str, ...], files: dict[str, str]) -> str | None:
        if word in files:
            return word
        resolved = find_named_file(workspace, word, folders)
        if resolved is None:
            return None
        rel = workspace.relative(resolved)
        return None if isinstance(access.check(rel), Withheld) else rel

    @staticmethod
    def _read(workspace: Workspace, rel: str) -> str | None:
        try:
            read = workspace.read_text(workspace.resolve(rel), limit=MAX_FILE_CHARS + 1)
        except (OSError, WorkspacePathError, UnicodeError):
            return None
        text = read.text
        return None if text is None or len(text) > MAX_FILE_CHARS else text

    @staticmethod
    def _malformed(workspace: Workspace, path: str) -> bool:
        """A path no file can have (a NUL byte): its write_file is refused
        with the reason, which the model reads; the other blocks go on."""
        try:
            workspace.resolve(path)
        except OutsideWorkspace:
            return False  # left alone, as the instructions' example is
        except WorkspacePathError:
            return True
        return False

    @staticmethod
    def _new(workspace: Workspace, access: ModelFileAccess, path: str) -> bool:
        """A path the reply may create: in the workspace, not there yet, not
        secret, not the instructions' example (the 1.5B once wrote to it)."""
        if Path(path).is_absolute() or ".." in Path(path).parts or path == EXAMPLE_PATH:
            return False
        try:
            resolved = workspace.resolve(path)
        except WorkspacePathError:
            return False
        return not resolved.exists() and not isinstance(access.check(path), Withheld)


# Words that say a file is being changed (not "adds up", "additional").
_CHANGE_WORD = re.compile(
    r"\b(?:chang(?:e|es|ed|ing)|modif(?:y|ies|ied|ying)|updat(?:e|es|ed|ing)"
    r"|implement(?:s|ed|ing)?|rewrit(?:e|es|ing|ten)|replac(?:e|es|ed|ing)|add(?:s|ed|ing)?"
    r"|fix(?:es|ed|ing)?|edit(?:s|ed|ing)?)\b", re.IGNORECASE)


def _checks(folder: str, calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The run_command that runs the tests covering the files `calls`
    write (features/reply_edits/checks.py), when there are such tests and
    a pytest to run them; none when the reply also reads a file."""
    from agentls.core.types.messages import ToolCall
    from agentls.features.reply_edits.checks import covering_tests, pytest_argv

    if any(call.tool != "write_file" for call in calls):
        return ()
    root = Path(folder)
    changed = [str(call.arguments.get("path") or "") for call in calls]
    argv = pytest_argv(root, covering_tests(root, changed))
    return () if argv is None else (ToolCall(tool="run_command", arguments={"argv": argv}),)


def _candidates(reply: str, seen: tuple[str, ...]) -> list[str]:
    """The words that may name a file the reply changes: the reply's own,
    the session's that share a last part with one of them (a path the reply
    shortened to a name), and the Python files the session named latest (a
    block merged by its definitions names none)."""
    words = named_paths(reply)
    names = {word.rsplit("/", 1)[-1] for word in words}
    latest_first = list(dict.fromkeys(word for text in reversed(seen)
                                      for word in named_paths(text)))
    words.extend(word for word in latest_first if word.rsplit("/", 1)[-1] in names)
    words.extend([word for word in latest_first
                  if word.endswith((".py", ".pyi"))][:MAX_SEEN_PYTHON_FILES])
    return list(dict.fromkeys(words))[:MAX_NAMED_WORDS]
