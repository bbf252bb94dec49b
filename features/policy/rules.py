"""The approval policy: the plugin that answers the approval gate's typed
question (core/approval/gate.py: `ApprovalQuestion` -> `PolicyAnswer`) for every
tool call before it runs or anybody is asked (docs/security.md; docs/protocol.md
"Tool calls become workspace edits"). It decides from what the tool
declares it will do (`ToolNeed`: kind none / read / edit / run / call, the
paths, the command line), never from a list of tool names.

1. **Confinement** (features/policy/paths.py). Every path of the need is
   resolved the way the operating system will see it; anything outside
   every workspace folder is denied, with the reason, before any prompt.
   With no workspace folder, calls that take paths, edit files or run
   commands are denied with a message asking the user to open a folder.
   A file an edit would change or a read would read that has another hard
   link is denied (the other link may be outside the workspace, a secret).
2. **Rules.** `approval.rules` in order, then the built-in defaults by
   kind (none and read allowed; edit, run and call ask); the first rule
   whose given conditions all match wins. `tool` is a glob on the tool
   name, `path` a glob (`**` spans folders) on the workspace-relative path,
   `command` a regular expression on the command line. A `path` glob
   starting with `/` (or a drive) matches the real absolute path instead.
   Matching leans towards the stricter answer:
   - an `allow` rule must match *every* path of the call, its `command`
     must match the *whole* command line (`re.fullmatch`), and letter case
     counts;
   - `ask` and `deny` rules match when *any* path matches, their `command`
     anywhere in the command line (`re.search`), ignoring case;
   - an `allow` rule applies to a command only when it has a `command`;
   - edits of protected files (features/policy/sensitive.py) are never
     allowed by a rule nor by "Allow for session": the verdict is
     `protected` and the gate asks every time (a deny rule still denies);
   - reads of secret files ask every time unless a user rule with a `path`
     allows them;
   - a restore the user asked for (`need.by_user`) runs without a question
     unless it writes a protected or secret file.
   - in restricted mode (a workspace folder that is a home, root or
     system folder: features/policy/restricted.py) every edit, command and
     call is `protected`: asked every time, whatever the rules allow.
3. **Answers.** The verdict, the reason, the words of a command's question
   (the exact command line, its folder, its time limit),
   `approval.timeoutSeconds` / `approval.default`, and for a call blocked
   by confinement a notice the user sees once per agent session.

The decision depends only on the settings, the workspace folders and the
file system's idea of where a path leads -- never on what the model says or
what a file contains; any internal error denies (the gate fails closed).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wcmatch import fnmatch, glob

from agentls.core.approval.gate import ApprovalQuestion, PolicyAnswer
from agentls.core.plugins.hook_modules import HookContext
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.settings.schema import ApprovalRule, ApprovalSettings
from agentls.core.trust.display import visible
from agentls.features.policy.paths import DRIVE, Refused, Resolver, Target
from agentls.features.policy.restricted import restricted_folders, restricted_reason
from agentls.features.policy.sensitive import (
    PROTECTED_PATTERNS,
    protected_reason,
    secret_match,
    secret_reason,
)

__all__ = [
    "BUILTIN_ACTIONS",
    "PROTECTED_PATHS",
    "Decision",
    "Policy",
    "PolicyHooks",
]

log = logging.getLogger("agentls.policy")

# "protected": ask every time (a protected write, a secret read), whatever
# a rule or an earlier "Allow for session" says; a deny rule still denies.
Action = Literal["allow", "ask", "deny", "protected"]

# Built in, after the user's rules: what each kind of call gets when no
# rule of the user's names it.
BUILTIN_ACTIONS: dict[str, Action] = {
    "none": "allow", "read": "allow", "edit": "ask", "run": "ask", "call": "ask"}

# Files that configure agentls, the editor, git, CI or a package manager
# (features/policy/sensitive.py, the one list): rules never allow a write
# there silently, nor does "Allow for session".
PROTECTED_PATHS = PROTECTED_PATTERNS

_GLOB = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE
_NAME = fnmatch.DOTMATCH | fnmatch.BRACE


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
    cwd: str | None = None  # a command's working folder, workspace-relative


# --------------------------------------------------------------------------- rules


def _tool_matches(rule: ApprovalRule, tool: str, strict: bool) -> bool:
    flags = _NAME | (fnmatch.CASE if strict else fnmatch.IGNORECASE)
    return bool(fnmatch.fnmatch(tool, rule.tool, flags=flags))


def _path_matches(pattern: str, target: Target, strict: bool) -> bool:
    flags = _GLOB | (glob.CASE if strict else glob.IGNORECASE)
    # Relative patterns match the workspace-relative path, absolute ones the
    # real path (a relative `**/test/**` must not match every file of a
    # workspace that happens to live under /home/me/test/).
    absolute = pattern.startswith("/") or bool(DRIVE.match(pattern))
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


def _hard_linked(target: Target) -> int:
    """The link count of a regular file with other hard links, else 0."""
    try:
        info = os.lstat(target.resolved)
    except OSError:
        return 0
    if os.path.isfile(target.resolved) and not os.path.islink(target.resolved) \
            and info.st_nlink > 1:
        return info.st_nlink
    return 0


class Policy:
    """The decision, as a pure function of settings, folders and the question
    (an `ApprovalPolicy`, core/approval/gate.py)."""

    def __init__(self, approval: ApprovalSettings, folders: Sequence[str | Path]) -> None:
        self.approval = approval
        self.resolver = Resolver(folders)
        # A home, root or system folder: every change asks (restricted.py).
        self.restricted = restricted_folders(self.resolver.folders,
                                             approval.unrestricted_folders)
        self.user_rules = list(approval.rules)
        # Sessions whose user was already told about a blocked call.
        self._warned_sessions: set[str] = set()
        self._commands = [
            None if r.command is None else re.compile(r.command) for r in self.user_rules
        ]
        self._commands_ci = [
            None if r.command is None else re.compile(r.command, re.IGNORECASE)
            for r in self.user_rules
        ]
        for index, rule in enumerate(self.user_rules, start=1):
            if (rule.action == "allow" and rule.command is None
                    and _tool_matches(rule, "run_command", strict=True)):
                log.info("approval.rules #%d %s does not allow run_command: commands are "
                         "allowed only by a rule with a `command` regex", index, _rule_text(rule))

    @property
    def folders(self) -> tuple[Path, ...]:
        return self.resolver.folders

    # -- ApprovalPolicy -------------------------------------------------------------
    def decide(self, question: ApprovalQuestion) -> PolicyAnswer:
        decision = self.decision(question)
        if decision.action == "deny":
            notice = None
            if decision.security:
                # The user is told once per agent session; later blocks go to
                # the log (and to the agent, as the reason). A model probing
                # for a way out tried ~200 paths in one turn in the
                # reliability tests: one popup each buried the editor.
                if question.session_id not in self._warned_sessions:
                    self._warned_sessions.add(question.session_id)
                    notice = (f"agentls blocked {question.tool_name}: {decision.reason} Further "
                              "blocked calls in this session are only logged.")
                else:
                    log.warning("Blocked %s: %s", question.tool_name, decision.reason)
            return PolicyAnswer("deny", decision.reason, notice=notice)
        return PolicyAnswer(
            decision.action, decision.reason,
            prompt="" if decision.action == "allow" else self.prompt(question, decision),
            summary="" if decision.action == "allow" else self.summary(question, decision),
            timeout=self.approval.timeout_seconds, default=self.approval.default)

    def decision(self, question: ApprovalQuestion) -> Decision:
        try:
            return self._decide(question)
        except Refused as refused:
            return Decision("deny", refused.reason, security=refused.security)
        except Exception as exc:  # fail closed
            log.exception("Approval policy failed on %s", question.tool_name)
            return Decision("deny", f"The approval policy could not check this "
                                    f"{question.tool_name} call ({type(exc).__name__}); denied "
                                    "to be safe.")

    def _decide(self, question: ApprovalQuestion) -> Decision:
        tool, need = question.tool_name, question.need
        running = need.kind == "run"
        paths = [*need.paths, *([need.cwd or "."] if running else [])]
        if (paths or need.kind in ("edit", "run")) and not self.folders:
            if need.kind == "edit":
                reason = (f"{tool} is not available: no workspace folder is open (single-file "
                          "mode). Ask the user to open a folder, then try again.")
            else:
                reason = (f"{tool} needs a workspace folder and none is open. Ask the user "
                          "to open a folder.")
            raise Refused(reason)
        targets = [t for value in need.paths for t in self.resolver.readings("path", value)]
        cwd = None
        if running:
            if not need.command:
                raise Refused(f"{tool} gave no command line to run.", security=False)
            cwd_targets = self.resolver.readings("cwd", need.cwd or ".")
            targets += cwd_targets
            cwd = cwd_targets[0].rel
        command = need.command if running else None

        protected = next((m for t in targets if need.kind == "edit"
                          for m in [protected_reason(t.rel, t.resolved)] if m), None)
        secret = next((t for t in targets if (need.kind == "read" or need.by_user)
                       and secret_match(t.rel, t.resolved)), None)
        if need.kind in ("edit", "read"):
            for target in targets:
                links = _hard_linked(target)
                if not links:
                    continue
                if need.kind == "edit":
                    raise Refused(f"{target.rel} has {links} hard links; another one may be "
                                  "outside the workspace, so agentls will not change it. "
                                  "Nothing was written. Tell the user, who can edit it by hand.")
                # The other name may be a secret file anywhere (~/.ssh/id_rsa):
                # its content is not judged by this name.
                raise Refused(f"{target.rel} has {links} hard links; another one may be a "
                              "secret file outside the workspace, so agentls will not read "
                              "it. Tell the user, who can open it by hand.")
        restricted = (need.kind in ("edit", "run", "call") and not need.by_user
                      and bool(self.restricted))
        for index, rule in enumerate(self.user_rules):
            if not self._matches(index, rule, tool, need.kind, targets, command):
                continue
            shown = f"approval rule #{index + 1} {_rule_text(rule)}"
            if rule.action == "deny":
                return Decision("deny", f"Denied by {shown} (approval.rules in the agentls "
                                        "settings).", index + 1, cwd=cwd)
            if need.by_user:
                break  # the user asked: only deny rules and protected files count
            if protected:
                return self._protected_write(tool, protected, index + 1, cwd)
            if restricted:
                return self._restricted(index + 1, cwd)
            if secret is not None and not (rule.action == "allow" and rule.path is not None):
                return self._secret_read(tool, secret, index + 1)
            return Decision(rule.action, f"{rule.action} by {shown}", index + 1, cwd=cwd)
        if protected:
            return self._protected_write(tool, protected, None, cwd)
        if restricted:
            return self._restricted(None, cwd)
        if secret is not None:
            return self._secret_read(tool, secret, None)
        if need.by_user:
            return Decision("allow", "the user asked for it", cwd=cwd)
        action = BUILTIN_ACTIONS.get(need.kind, "ask")
        if action == "allow":
            return Decision("allow", f"allow by the built-in rule for {need.kind} calls", cwd=cwd)
        return Decision("ask", f"no approval rule matches {tool}; asking the user", cwd=cwd)

    @staticmethod
    def _protected_write(tool: str, why: str, rule: int | None, cwd: str | None
                         ) -> Decision:
        # `why` is the protected list's own reason for the file
        # (sensitive.PROTECTED): the question shows it.
        why = why.rstrip(".")
        return Decision("protected", f"{tool} changes a protected file: {why}. This always "
                        "needs the user's approval.", rule, cwd=cwd)

    def _restricted(self, rule: int | None, cwd: str | None) -> Decision:
        return Decision("protected", restricted_reason(self.restricted), rule, cwd=cwd)

    @staticmethod
    def _secret_read(tool: str, target: Target, rule: int | None) -> Decision:
        kind = secret_reason(target.rel, target.resolved) or "a secret file"
        return Decision("protected", f"{tool} reads {target.rel}, which may hold secrets "
                        f"({kind.rstrip('.')}); this needs the user's approval each time.", rule)

    def _matches(self, index: int, rule: ApprovalRule, tool: str, kind: str,
                 targets: list[Target], command: str | None) -> bool:
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
            # A command is allowed only by a rule naming it.
            return not (strict and kind == "run")
        if command is None:
            return False
        if strict:
            pattern = self._commands[index]
            return pattern is not None and pattern.fullmatch(command) is not None
        pattern = self._commands_ci[index]
        return pattern is not None and pattern.search(command) is not None

    # -- the question's words ---------------------------------------------------------
    def prompt(self, question: ApprovalQuestion, decision: Decision) -> str:
        """The question's whole text: the command line or every argument,
        nothing cut, characters that would not show as themselves escaped
        (the gate sends a text too long for a message as a document)."""
        need, tool = question.need, question.tool_name
        if need.kind == "run":
            lines = ["The agent wants to run a command (no shell):", "",
                     f"    {visible(need.command or '')}", "",
                     f"in: {visible(decision.cwd or '.')} (workspace "
                     f"{visible(str(self.folders[0]))})"]
            if need.timeout is not None:
                lines.append(f"timeout: {need.timeout:g}s")
            lines += ["", "Allow it to run once?"]
            return "\n".join(lines)
        why = f"\n\n{decision.reason}" if decision.action == "protected" else ""
        return (f"The agent wants to use the tool {visible(tool)} with:\n\n    "
                f"{_shown_input(question)}{why}\n\nAllow it once?")

    def summary(self, question: ApprovalQuestion, decision: Decision) -> str:
        """The short form of `prompt`, for when it is too long for a message."""
        need, tool = question.need, question.tool_name
        if need.kind == "run":
            command = need.command or ""
            program = visible(command.split(" ", 1)[0])[:200]
            return ("The agent wants to run a command (no shell) starting with:\n\n"
                    f"    {program}\n\n({len(command):,} characters in all) in: "
                    f"{visible(decision.cwd or '.')[:200]}\n\nAllow it to run once?")
        why = f"\n\n{decision.reason}" if decision.action == "protected" else ""
        names = [visible(str(name))[:40] for name in question.tool_input]
        listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        return (f"The agent wants to use the tool {visible(tool)[:80]} with {len(names)} "
                f"argument{'s' if len(names) != 1 else ''}" + (f" ({listed})" if names else "")
                + f", {len(_shown_input(question)):,} characters in all.{why}\n\n"
                "Allow it once?")


def _shown_input(question: ApprovalQuestion) -> str:
    try:
        shown = json.dumps(dict(question.tool_input), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        shown = repr(question.tool_input)
    return visible(shown)


class PolicyHooks:
    """Hook module `policy` (entry-point group `agentls.hooks`): contributes
    the approval policy the turn asks about every tool call."""

    name = "policy"
    version = "0.2.0"

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        hooks.add_approval_policy(Policy(context.settings.approval, context.workspace_folders))
