"""The approval policy: a `tool:pre` hook that decides, before anything runs
or anybody is asked, whether a tool call is allowed, needs the user, or is
denied (issue 5 item 3; PROTOCOL.md "Tool calls become workspace edits").

1. **Confinement.** Every path in the tool input (`path`, `new_path`,
   `cwd`, ...) is resolved the way the operating system will see it:
   relative to the first workspace folder, `..` and symlinks resolved (for a
   file that does not exist yet, through its deepest existing parent),
   letter case canonicalised on case-insensitive file systems, and on POSIX
   also read with `\\` as a separator (`..\\..\\x`); Windows drive and UNC
   paths are refused there. Anything outside every workspace folder is
   denied, with the reason, before any prompt. With no workspace folder,
   tools that take paths, change files or run commands are denied with a
   message asking the user to open a folder.
2. **Rules.** `approval.rules` in order, then the built-in defaults
   (reads allowed, writes and run_command ask); the first rule whose given
   conditions all match wins; no match asks. `tool` is a glob on the tool
   name, `path` a glob (`**` spans folders) on the workspace-relative path,
   `command` a regular expression on the command line (`shlex.join(argv)`).
   A `path` glob starting with `/` (or a drive) matches the real absolute
   path instead.
   Matching leans towards the stricter answer:
   - an `allow` rule must match *every* path of the call, its `command`
     must match the *whole* command line (`re.fullmatch`), and letter case
     counts;
   - `ask` and `deny` rules match when *any* path matches, their `command`
     anywhere in the command line (`re.search`), ignoring case;
   - an `allow` rule applies to run_command only when it has a `command`
     (run_command always asks unless a rule allows the exact command);
   - writes to protected files (features/sensitive_paths.py: what
     configures agentls, the editor, git, CI, the shell environment or a
     package manager, at any depth) are never allowed by a rule nor by
     "Allow for session": the verdict `protected` travels with the edit
     request and the approval gate asks every time (a deny rule still
     denies), so an agent cannot rewrite its own policy or plant a hook
     without the user seeing it;
   - reads of secret files (`.env*`, keys, `.git/config`, `.netrc`, ...)
     ask every time unless a user rule with a `path` allows them.
3. **Answers.** allow -> `modify` with `data["approval"] = "allow"` (the
   orchestrator tells the tool no prompt is needed); deny -> `deny` naming
   the rule; ask / protected -> for file-changing tools `modify` with
   `data["approval"]` = "ask" or "protected" (the edit applier asks in the
   editor through the core's ApprovalGate), for run_command and every other
   tool `ask_user` with the tool and its input (the exact command line),
   options "Allow once" / "Deny", and `approval.timeoutSeconds` /
   `approval.default` (deny for protected calls).

The decision depends only on the settings, the workspace folders and the
file system's idea of where a path leads -- never on what the model says or
what a file contains. A second handler at the end of the `tool:pre` chain
re-checks the call when another hook changed its input after the policy
decided (or when the first handler did not answer), and any internal error
denies: the policy fails closed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import shlex
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from wcmatch import fnmatch, glob

from agentls.core.hook_modules import HookContext
from agentls.core.hooks import HookRegistry
from agentls.core.models import HookResult
from agentls.core.settings import ApprovalRule, ApprovalSettings
from agentls.features.sensitive_paths import PROTECTED_PATTERNS, protected_match, secret_match

__all__ = [
    "APPROVAL_OPTIONS",
    "BUILTIN_RULES",
    "COMMAND_TOOL",
    "FILE_CHANGING_TOOLS",
    "PROTECTED_PATHS",
    "Decision",
    "Policy",
    "PolicyHooks",
]

log = logging.getLogger("agentls.policy")

# "protected": ask every time (a protected write, a secret read), whatever
# a rule or an earlier "Allow for session" says; a deny rule still denies.
Action = Literal["allow", "ask", "deny", "protected"]

PRIORITY = -1000  # before every other tool:pre handler
RECHECK_PRIORITY = 1000  # after every other tool:pre handler
APPROVAL_OPTIONS = ("Allow once", "Deny")

COMMAND_TOOL = "run_command"
# Tools that ask through the core's ApprovalGate themselves when the
# verdict is "ask" (with Allow for session), like the file-changing tools'
# edit applier: MCP servers' tools (features/mcp/tools.py).
GATED_TOOL_PREFIXES = ("mcp__",)
FILE_CHANGING_TOOLS = frozenset({"write_file", "edit_file", "delete_file", "rename_file"})
READ_TOOLS = frozenset({"read_file", "list_files", "search_text"})
# Path arguments a tool cannot do without (an empty or missing one is denied).
REQUIRED_PATHS: Mapping[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "write_file": ("path",),
    "edit_file": ("path",),
    "delete_file": ("path",),
    "rename_file": ("path", "new_path"),
}
# Tools whose missing path means the (first) workspace folder.
DEFAULT_PATH_TOOLS: Mapping[str, str] = {
    "list_files": "path",
    "search_text": "path",
    COMMAND_TOOL: "cwd",
}
# Argument names read as paths for any tool (a plugin's too).
PATH_KEYS = ("path", "new_path", "old_path", "file_path", "cwd", "directory")
PATH_LIST_KEYS = ("paths",)

# Built in, after the user's rules: reads inside the workspace are allowed;
# writes and commands ask (as does anything no rule names).
BUILTIN_RULES: tuple[ApprovalRule, ...] = tuple(
    [ApprovalRule(tool=tool, action="allow") for tool in sorted(READ_TOOLS)]
    + [ApprovalRule(tool=tool, action="ask") for tool in sorted(FILE_CHANGING_TOOLS)]
    + [ApprovalRule(tool=COMMAND_TOOL, action="ask")]
)

# Files that configure agentls, the editor, git, CI or a package manager
# (features/sensitive_paths.py, the one list): rules never allow a write
# there silently, nor does "Allow for session".
PROTECTED_PATHS = PROTECTED_PATTERNS

_GLOB = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE
_NAME = fnmatch.DOTMATCH | fnmatch.BRACE
_DRIVE = re.compile(r"^[A-Za-z]:([\\/]|$)")
_PROMPT_INPUT_MAX = 2000


@dataclass(frozen=True)
class Decision:
    """What the policy says about one tool call."""

    action: Action
    reason: str
    # 1-based index into approval.rules, or None (built-in rule, confinement,
    # no match)
    rule: int | None = None
    # confinement / no workspace: worth telling the user, not only the agent
    security: bool = False
    command: str | None = None  # the command line of run_command
    cwd: str | None = None  # run_command's working folder, workspace-relative


@dataclass(frozen=True)
class _Target:
    """One resolved reading of one path argument."""

    argument: str
    given: str
    resolved: Path
    folder: Path
    rel: str  # posix path relative to `folder` ("." for the folder itself)


class _Refused(Exception):
    def __init__(self, reason: str, *, security: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.security = security


# --------------------------------------------------------------------------- paths


def _is_case_insensitive(folder: Path) -> bool:
    """Whether `folder` lives on a case-insensitive file system (macOS and
    Windows defaults): the same path with its letters' case swapped exists
    and is the same directory."""
    probe = folder
    while probe != probe.parent:
        swapped = probe.name.swapcase()
        if swapped != probe.name:
            other = probe.parent / swapped
            try:
                return os.path.samefile(probe, other)
            except OSError:
                return False
        probe = probe.parent
    return os.path.normcase("A") == "a"


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _canonical_case(path: Path) -> Path:
    """`path` with each existing component spelled as the directory lists
    it (on a case- or normalisation-insensitive file system `SRC/App.py`
    and `src/app.py` are one file; rules must see one spelling)."""
    parts = path.parts
    current = Path(parts[0])
    for index, name in enumerate(parts[1:], start=1):
        candidate = current / name
        if not os.path.lexists(candidate):
            return current.joinpath(*parts[index:])
        try:
            entries = os.listdir(current)
        except OSError:
            current = candidate
            continue
        if name not in entries:
            folded = _fold(name)
            match = next((entry for entry in entries if _fold(entry) == folded), None)
            if match is not None:
                candidate = current / match
        current = candidate
    return current


class _Resolver:
    """Resolves tool paths against the workspace folders (POSIX and Windows)."""

    def __init__(self, folders: Sequence[str | Path]) -> None:
        resolved: list[Path] = []
        for folder in folders:
            text = str(folder).strip()
            if not text:
                continue
            try:
                resolved.append(Path(os.path.realpath(Path(text).expanduser())))
            except (OSError, ValueError):
                log.warning("Workspace folder %r cannot be resolved; ignored", text)
        self.fold_case = any(_is_case_insensitive(f) for f in resolved)
        self.folders = tuple(_canonical_case(f) if self.fold_case else f for f in resolved)

    def readings(self, argument: str, value: str) -> list[_Target]:
        """Every way the OS, a tool or a confused model may read `value`
        (as given, stripped, a file:// URI decoded, `\\` as a separator on
        POSIX); each must land inside a workspace folder, else _Refused."""
        text = value.strip()
        if not text:
            raise _Refused(f"The argument {argument!r} is empty; give a path inside the "
                           "workspace.", security=False)
        if "\0" in value:
            raise _Refused(f"The argument {argument!r} contains a NUL character; not a path.")
        texts = [value, text]
        if text.startswith("file://"):
            texts.append(unquote(urlsplit(text).path))
        if os.sep == "/":
            for reading in list(texts):
                if _DRIVE.match(reading) or reading.startswith("\\\\"):
                    raise _Refused(
                        f"{value!r} is a Windows drive or network path, which is outside the "
                        f"workspace folders ({self._shown_folders()}). Use a path relative to "
                        "the workspace root, with '/' between folders."
                    )
                if "\\" in reading:
                    # The OS reads a backslash as part of a name, a model may
                    # mean a separator: both readings must stay inside.
                    texts.append(reading.replace("\\", "/"))
        unique = list(dict.fromkeys(texts))
        return [self._target(argument, value, t) for t in unique]

    def _target(self, argument: str, given: str, text: str) -> _Target:
        raw = Path(text)
        candidate = raw if raw.is_absolute() else self.folders[0] / raw
        try:
            resolved = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:
            raise _Refused(f"{given!r} cannot be resolved ({exc}); denied.") from exc
        # realpath leaves a symlink loop unresolved; a path that still holds a
        # symlink leads who knows where.
        probe = resolved
        while probe != probe.parent:
            if probe.is_symlink():
                raise _Refused(f"{given!r} goes through a symlink loop ({probe}); denied.")
            probe = probe.parent
        if self.fold_case:
            resolved = _canonical_case(resolved)
        for folder in self.folders:
            if resolved == folder or resolved.is_relative_to(folder):
                rel = resolved.relative_to(folder).as_posix()
                return _Target(argument, given, resolved, folder, rel or ".")
        raise _Refused(
            f"{given!r} resolves to {resolved}, which is outside the workspace folders "
            f"({self._shown_folders()}). Tools may only touch files inside them; use a path "
            "relative to the workspace root."
        )

    def _shown_folders(self) -> str:
        return ", ".join(str(f) for f in self.folders) or "none open"


# --------------------------------------------------------------------------- rules


def _tool_matches(rule: ApprovalRule, tool: str, strict: bool) -> bool:
    flags = _NAME | (fnmatch.CASE if strict else fnmatch.IGNORECASE)
    return bool(fnmatch.fnmatch(tool, rule.tool, flags=flags))


def _path_matches(pattern: str, target: _Target, strict: bool) -> bool:
    flags = _GLOB | (glob.CASE if strict else glob.IGNORECASE)
    # Relative patterns match the workspace-relative path, absolute ones the
    # real path (a relative `**/test/**` must not match every file of a
    # workspace that happens to live under /home/me/test/).
    absolute = pattern.startswith("/") or bool(_DRIVE.match(pattern))
    subject = target.resolved.as_posix() if absolute else target.rel
    return bool(glob.globmatch(subject, pattern, flags=flags))


def _rule_text(rule: ApprovalRule) -> str:
    shown = {"tool": rule.tool}
    if rule.path is not None:
        shown["path"] = rule.path
    if rule.command is not None:
        shown["command"] = rule.command
    shown["action"] = rule.action
    return json.dumps(shown)


class Policy:
    """The decision, as a pure function of settings, folders and the call."""

    def __init__(self, approval: ApprovalSettings, folders: Sequence[str | Path]) -> None:
        self.approval = approval
        self.resolver = _Resolver(folders)
        self.user_rules = list(approval.rules)
        # Sessions whose user was already told about a blocked call.
        self._warned_sessions: set[Any] = set()
        self._commands = [
            None if r.command is None else re.compile(r.command) for r in self.user_rules
        ]
        self._commands_ci = [
            None if r.command is None else re.compile(r.command, re.IGNORECASE)
            for r in self.user_rules
        ]
        for index, rule in enumerate(self.user_rules, start=1):
            if (rule.action == "allow" and rule.command is None
                    and _tool_matches(rule, COMMAND_TOOL, strict=True)):
                log.info("approval.rules #%d %s does not allow run_command: commands are "
                         "allowed only by a rule with a `command` regex", index, _rule_text(rule))

    @property
    def folders(self) -> tuple[Path, ...]:
        return self.resolver.folders

    def decide(self, tool_name: str, tool_input: Mapping[str, Any]) -> Decision:
        try:
            return self._decide(tool_name, tool_input)
        except _Refused as refused:
            return Decision("deny", refused.reason, security=refused.security)
        except Exception as exc:  # fail closed
            log.exception("Approval policy failed on %s", tool_name)
            return Decision("deny", f"The approval policy could not check this {tool_name} "
                                    f"call ({type(exc).__name__}); denied to be safe.")

    def _decide(self, tool: str, tool_input: Mapping[str, Any]) -> Decision:
        arguments = self._path_arguments(tool, tool_input)
        command = self._command_line(tool, tool_input)
        needs_folder = bool(arguments) or tool in FILE_CHANGING_TOOLS or tool == COMMAND_TOOL
        if needs_folder and not self.folders:
            if tool in FILE_CHANGING_TOOLS:
                reason = (f"{tool} is not available: no workspace folder is open (single-file "
                          "mode). Ask the user to open a folder, then try again.")
            else:
                reason = (f"{tool} needs a workspace folder and none is open. Ask the user "
                          "to open a folder.")
            raise _Refused(reason)
        targets = [t for name, value in arguments for t in self.resolver.readings(name, value)]
        cwd = next((t.rel for t in targets if t.argument == "cwd"), None)
        if tool == COMMAND_TOOL and cwd is None:
            cwd = "."

        protected = next((m for t in targets if tool in FILE_CHANGING_TOOLS
                          for m in [protected_match(t.rel)] if m), None)
        secret = next((t.rel for t in targets if tool in READ_TOOLS and secret_match(t.rel)),
                      None)
        for index, rule in enumerate([*self.user_rules, *BUILTIN_RULES]):
            user_index = index + 1 if index < len(self.user_rules) else None
            if not self._matches(index, rule, tool, targets, command):
                continue
            shown = (f"approval rule #{user_index} {_rule_text(rule)}" if user_index
                     else f"the built-in rule {_rule_text(rule)}")
            if rule.action == "deny":
                return Decision("deny", f"Denied by {shown} (approval.rules in the agentls "
                                        "settings).", user_index, command=command, cwd=cwd)
            if protected:
                return self._protected_write(tool, protected, user_index, command, cwd)
            if secret is not None and not (rule.action == "allow" and user_index is not None
                                           and rule.path is not None):
                return self._secret_read(tool, secret, user_index)
            return Decision(rule.action, f"{rule.action} by {shown}", user_index,
                            command=command, cwd=cwd)
        if protected:
            return self._protected_write(tool, protected, None, command, cwd)
        if secret is not None:
            return self._secret_read(tool, secret, None)
        return Decision("ask", f"no approval rule matches {tool}; asking the user",
                        command=command, cwd=cwd)

    @staticmethod
    def _protected_write(tool: str, pattern: str, rule: int | None, command: str | None,
                         cwd: str | None) -> Decision:
        return Decision("protected", f"{tool} changes a file that configures agentls, the "
                        f"editor, git, CI or a package manager (matches {pattern}); this "
                        "always needs the user's approval.", rule, command=command, cwd=cwd)

    @staticmethod
    def _secret_read(tool: str, rel: str, rule: int | None) -> Decision:
        return Decision("protected", f"{tool} reads {rel}, which may hold secrets (keys, "
                        "tokens, passwords); this needs the user's approval each time.", rule)

    def _matches(self, index: int, rule: ApprovalRule, tool: str, targets: list[_Target],
                 command: str | None) -> bool:
        strict = rule.action == "allow"
        if not _tool_matches(rule, tool, strict):
            return False
        if rule.path is not None:
            if not targets:
                return False
            hits = [_path_matches(rule.path, t, strict) for t in targets]
            if not (all(hits) if strict else any(hits)):
                return False
        if rule.command is None:
            # run_command is allowed only by a rule naming the command.
            return not (strict and tool == COMMAND_TOOL)
        if command is None or index >= len(self.user_rules):
            return False
        if strict:
            pattern = self._commands[index]
            return pattern is not None and pattern.fullmatch(command) is not None
        pattern = self._commands_ci[index]
        return pattern is not None and pattern.search(command) is not None

    @staticmethod
    def _path_arguments(tool: str, tool_input: Mapping[str, Any]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for key in PATH_KEYS:
            if key not in tool_input:
                continue
            value = tool_input[key]
            if value is None and key == DEFAULT_PATH_TOOLS.get(tool):
                continue
            if not isinstance(value, str):
                raise _Refused(f"The argument {key!r} of {tool} must be a string path, not "
                               f"{type(value).__name__}.", security=False)
            if not value.strip() and key == DEFAULT_PATH_TOOLS.get(tool):
                continue  # "" means the workspace root for these
            found.append((key, value))
        for key in PATH_LIST_KEYS:
            values = tool_input.get(key)
            if values is None:
                continue
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise _Refused(f"The argument {key!r} of {tool} must be a list of string "
                               "paths.", security=False)
            found.extend((key, v) for v in values)
        for key in REQUIRED_PATHS.get(tool, ()):
            if not any(name == key for name, _ in found):
                raise _Refused(f"{tool} needs the argument {key!r}: a path inside the "
                               "workspace.", security=False)
        default = DEFAULT_PATH_TOOLS.get(tool)
        if default is not None and not any(name == default for name, _ in found):
            found.append((default, "."))
        return found

    @staticmethod
    def _command_line(tool: str, tool_input: Mapping[str, Any]) -> str | None:
        if tool != COMMAND_TOOL:
            return None
        argv = tool_input.get("argv")
        if (not isinstance(argv, list) or not argv
                or not all(isinstance(a, str) for a in argv) or not argv[0]):
            raise _Refused("run_command needs `argv`: a non-empty list of strings, the program "
                           "first (no shell; put \"bash\", \"-c\", \"...\" in argv to use one).",
                           security=False)
        if any("\0" in a for a in argv):
            raise _Refused("run_command: argv contains a NUL character.", security=False)
        return shlex.join(argv)

    # -- answers --------------------------------------------------------------
    def prompt(self, tool: str, tool_input: Mapping[str, Any], decision: Decision) -> str:
        if tool == COMMAND_TOOL:
            lines = ["The agent wants to run a command (no shell):", "",
                     f"    {decision.command}", "",
                     f"in: {decision.cwd or '.'} (workspace {self.folders[0]})"]
            timeout = tool_input.get("timeout_seconds")
            if isinstance(timeout, int | float) and not isinstance(timeout, bool):
                lines.append(f"timeout: {timeout:g}s")
            lines += ["", "Allow it to run once?"]
            return "\n".join(lines)
        try:
            shown = json.dumps(dict(tool_input), ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            shown = repr(tool_input)
        if len(shown) > _PROMPT_INPUT_MAX:
            shown = shown[:_PROMPT_INPUT_MAX] + " ..."
        why = f"\n\n{decision.reason}" if decision.action == "protected" else ""
        return (f"The agent wants to use the tool {tool} with:\n\n    {shown}{why}\n\n"
                "Allow it once?")

    def answer(self, data: dict[str, Any]) -> HookResult:
        tool = data.get("tool_name")
        raw_input = data.get("tool_input")
        if not isinstance(tool, str) or not isinstance(raw_input, Mapping):
            return HookResult(action="deny", reason="A tool call without a tool name or input "
                                                    "cannot be checked; denied.")
        decision = self.decide(tool, raw_input)
        if decision.action == "deny":
            message = None
            if decision.security:
                # The user is told once per agent session; later blocks go to
                # the log (and to the agent, as the reason). A model probing
                # for a way out tried ~200 paths in one turn in the
                # reliability tests: one popup each buried the editor.
                session = data.get("session_id")
                if session not in self._warned_sessions:
                    self._warned_sessions.add(session)
                    message = (f"agentls blocked {tool}: {decision.reason} Further blocked "
                               "calls in this session are only logged.")
                else:
                    log.warning("Blocked %s: %s", tool, decision.reason)
            return HookResult(action="deny", reason=decision.reason, user_message=message,
                              user_message_level="warning")
        checked = {"tool_name": tool, "tool_input": copy.deepcopy(dict(raw_input))}
        base = {k: v for k, v in data.items() if k != "approval"}
        if decision.action == "allow":
            return HookResult(action="modify",
                              data={**base, "approval": "allow", "policy_checked": checked})
        if tool in FILE_CHANGING_TOOLS or tool.startswith(GATED_TOOL_PREFIXES):
            # The edit applier (or the MCP tool) asks in the editor;
            # "protected" travels with the call and wins over session memory.
            verdict = "protected" if decision.action == "protected" else "ask"
            return HookResult(action="modify",
                              data={**base, "approval": verdict, "policy_checked": checked})
        return HookResult(
            action="ask_user",
            reason=f"{tool} needs the user's approval ({decision.reason}).",
            approval_prompt=self.prompt(tool, raw_input, decision),
            approval_options=list(APPROVAL_OPTIONS),
            approval_timeout=self.approval.timeout_seconds,
            approval_default="deny" if decision.action == "protected" else self.approval.default,
        )


class PolicyHooks:
    """Hook module `policy` (entry-point group `agentls.hooks`)."""

    name = "policy"
    version = "0.1.0"

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        policy = Policy(context.settings.approval, context.workspace_folders)

        async def policy_tool_pre(event: str, data: dict[str, Any]) -> HookResult:
            return policy.answer(data)

        async def policy_recheck(event: str, data: dict[str, Any]) -> HookResult:
            checked = data.get("policy_checked")
            if (isinstance(checked, dict) and checked.get("tool_name") == data.get("tool_name")
                    and checked.get("tool_input") == data.get("tool_input")):
                return HookResult()
            # Another hook changed the call after the policy decided, or the
            # first handler did not answer: decide again on what will run.
            return policy.answer(data)

        hooks.register("tool:pre", policy_tool_pre, priority=PRIORITY, name="policy")
        hooks.register("tool:pre", policy_recheck, priority=RECHECK_PRIORITY,
                       name="policy-recheck")

