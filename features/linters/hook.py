"""The `linters` hook module on `tool:post`: lint the new text of an
edited file, inject and publish what is new or in touched lines, and
clear what an edit fixed."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.core.types.messages import HookResult
from agentls.features.linters.config import Linter, configured_linters, linters_for
from agentls.features.linters.parse import Finding
from agentls.features.linters.report import (
    _summary,
    changed_line_ranges,
    filter_findings,
    format_injection,
    split_lines,
    to_diagnostic,
)
from agentls.features.linters.run import LintRun, run_linter

if TYPE_CHECKING:
    from agentls.core.plugins.hook_modules import HookContext
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.settings.schema import AgentlsSettings

log = logging.getLogger("agentls.linters")

LINTED_TOOLS = frozenset({"write_file", "edit_file", "rename_file"})
# Tools after which diagnostics this hook published for a path are dropped.
CLEARING_TOOLS = frozenset({"delete_file", "rename_file"})
HOOK_PRIORITY = 100  # late on tool:post: after anything that may rewrite results
HANDLER_MARGIN_SECONDS = 3.0  # linters stop this long before the hook registry gives up


@dataclass
class _Edit:
    tool_name: str
    path: Path
    uri: str
    old_text: str | None
    new_text: str | None
    changed: list[tuple[int, int]] | None
    old_path: Path | None = None  # rename_file: where the file was
    old_uri: str | None = None
    shown: str | None = None  # the path as the agent knows it (relative_path)
    unchanged: bool = False  # write_file with identical content: no edit was sent


class LintersHook:
    """Hook module `linters`. One instance per server process; `register`
    may be called again (settings changed) with a new context, and what was
    published or reported carries over."""

    name = "linters"
    description = "Lint files the agent edits and feed the findings back to it"

    def __init__(self) -> None:
        # uri -> (linter, code, message) counts of the findings last published
        self._outstanding: dict[str, Counter[tuple[str, str, str]]] = {}
        self._reported_failures: set[tuple[str, str]] = set()

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        resolved: list[list[Linter]] = []
        # The registry abandons a handler after `handler_timeout`; linters
        # are stopped a little earlier, so a slow one is reported as timed
        # out and the others' findings still arrive.
        limit = hooks.handler_timeout
        cap = max(limit - HANDLER_MARGIN_SECONDS, limit / 2) if limit is not None else None

        def linters() -> list[Linter]:
            if not resolved:  # resolved on first use: `which` is not free
                found = configured_linters(context.settings)
                if cap is not None:
                    found = [replace(linter, timeout=min(linter.timeout, cap))
                             for linter in found]
                resolved.append(found)
            return resolved[0]

        async def on_tool_post(event: str, data: dict[str, Any]) -> HookResult:
            return await self.handle(data, context, linters)

        hooks.register("tool:post", on_tool_post, priority=HOOK_PRIORITY, name=self.name)

    # -- one tool call -------------------------------------------------------------
    async def handle(
        self,
        data: Mapping[str, Any],
        context: HookContext,
        linters: Callable[[], list[Linter]],
    ) -> HookResult:
        edit = _edit_from(data, context.workspace_folders)
        if edit is None:
            return HookResult()
        if edit.old_path is not None:
            old_uri = edit.old_uri or edit.old_path.as_uri()
            if old_uri != edit.uri:
                self._clear(old_uri, context)
        if edit.new_text is None or edit.tool_name not in LINTED_TOOLS:
            self._clear(edit.uri, context)
            return HookResult()
        if edit.unchanged:
            return HookResult()
        snapshot = await _snapshot(context, edit.path)
        language_id = getattr(snapshot, "language_id", None) if snapshot is not None else None
        matching = linters_for(linters(), edit.path, language_id)
        if not matching:
            self._clear(edit.uri, context)
            return HookResult()

        new_text = edit.new_text
        changed = edit.changed
        if changed is None:
            changed = changed_line_ranges(edit.old_text, new_text)
        need_baseline = edit.old_text is not None and not _covers_all(changed, new_text)
        cwd = _cwd_for(edit.path, context.workspace_folders)
        env = _linter_env(context.settings)
        old_path = edit.old_path or edit.path

        async def lint(linter: Linter) -> tuple[LintRun, LintRun | None]:
            new_run = run_linter(linter, new_text, edit.path, cwd=cwd, env=env)
            if not need_baseline or edit.old_text is None:
                return await new_run, None
            old_run = run_linter(linter, edit.old_text, old_path, cwd=cwd, env=env)
            new_result, old_result = await asyncio.gather(new_run, old_run)
            return new_result, old_result

        runs = await asyncio.gather(*(lint(linter) for linter in matching))

        problems: list[str] = []
        kept: list[Finding] = []
        told: list[Finding] = []  # what the agent is sent (Linter.inject_codes)
        omitted = 0
        outstanding = self._outstanding.get(edit.uri, Counter())
        for new_run, old_run in runs:
            if new_run.failure is not None:
                self._note_failure(new_run, problems)
                continue
            baseline: list[Finding] | None
            if old_run is None:
                # A new file (all findings are new) or an edit that touched
                # every line (all findings are in touched lines).
                baseline = []
            elif old_run.failure is not None:
                baseline = None  # unknown: keep touched lines only
            else:
                baseline = old_run.findings
            found = filter_findings(
                new_run.findings, changed=changed, baseline=baseline, outstanding=outstanding
            )
            kept.extend(found)
            codes = new_run.linter.inject_codes
            told.extend(f for f in found if codes is None or (f.code or "").startswith(codes))
            omitted += new_run.omitted
        kept.sort(key=lambda f: (f.line, f.column))

        shown_path = edit.shown or _shown_path(edit.path, context.workspace_folders)
        self._publish(edit.uri, kept, new_text, snapshot, context)
        messages = [*problems]
        if kept:
            messages.insert(0, f"{_summary(kept)} in {shown_path} after the agent's edit")
        user_message = "\n".join(messages) or None
        if not told:
            if user_message:
                return HookResult(user_message=user_message, user_message_level="warning")
            return HookResult()
        told.sort(key=lambda f: (f.line, f.column))
        max_bytes, max_chars = _injection_limits(context.settings)
        injection = format_injection(
            told, shown_path=shown_path, tool_name=edit.tool_name,
            max_bytes=max_bytes, max_chars=max_chars, omitted=omitted,
        )
        if injection is None:
            return HookResult(user_message=user_message, user_message_level="warning")
        return HookResult(
            action="inject_context",
            context_injection=injection,
            context_injection_role="system",
            ephemeral=False,
            user_message=user_message,
            user_message_level="warning",
        )

    def _note_failure(self, run: LintRun, problems: list[str]) -> None:
        key = (run.linter.name + " " + " ".join(run.linter.command), run.failure_kind or "")
        log.warning("Linter %s: %s", run.linter.name, run.failure)
        if key in self._reported_failures:
            return
        self._reported_failures.add(key)
        problems.append(
            f"agentls: the linter {run.linter.name} {run.failure}; the agent's edits are not "
            "checked with it. Fix the `linters` setting or install the linter."
        )

    # -- diagnostics -----------------------------------------------------------------
    def _publish(
        self,
        uri: str,
        findings: Sequence[Finding],
        text: str,
        snapshot: Any,
        context: HookContext,
    ) -> None:
        if not findings:
            self._clear(uri, context)
            return
        version = None
        if snapshot is not None and getattr(snapshot, "text", None) == text:
            version = getattr(snapshot, "version", None)
        lines = split_lines(text)
        encoding = _encoding(context)
        diagnostics = [to_diagnostic(f, lines, encoding) for f in findings]
        self._outstanding[uri] = Counter(f.key for f in findings)
        _call_publish(context, uri, diagnostics, version)

    def _clear(self, uri: str, context: HookContext) -> None:
        if self._outstanding.pop(uri, None) is not None:
            _call_publish(context, uri, [], None)


def _call_publish(
    context: HookContext, uri: str, diagnostics: list[dict[str, Any]], version: int | None
) -> None:
    publish = context.publish_diagnostics
    if publish is None:
        return
    try:
        publish(uri, diagnostics, version)
    except Exception:
        log.exception("Publishing linter diagnostics for %s failed", uri)


def _encoding(context: HookContext) -> str:
    """The negotiated position encoding when the LSP side tells it
    (`extra["position_encoding"]`, or the document lookup's
    `position_encoding`; a str or a callable), else UTF-16."""
    value = context.extra.get("position_encoding")
    if value is None:
        value = getattr(context.documents, "position_encoding", None)
    if callable(value):
        try:
            value = value()
        except Exception:
            value = None
    value = getattr(value, "value", value)
    return str(value) if value in ("utf-8", "utf-16", "utf-32") else "utf-16"


def _edit_from(data: Mapping[str, Any], folders: Sequence[Path]) -> _Edit | None:
    tool_name = data.get("tool_name")
    if tool_name not in LINTED_TOOLS and tool_name not in CLEARING_TOOLS:
        return None
    result = data.get("result")
    if not isinstance(result, Mapping) or not result.get("success"):
        return None
    output = result.get("output")
    if not isinstance(output, Mapping) or output.get("applied") is False:
        return None
    raw_path = output.get("path")
    if not isinstance(raw_path, str) or not raw_path:
        return None
    path = Path(raw_path)
    uri = output.get("uri") if isinstance(output.get("uri"), str) else None
    old_text = output.get("old_text")
    new_text = output.get("new_text")
    changed = _ranges(output.get("changed_lines"))
    old_path = None
    old_uri = output.get("old_uri") if isinstance(output.get("old_uri"), str) else None
    if tool_name == "rename_file":
        tool_input = data.get("tool_input")
        source = tool_input.get("path") if isinstance(tool_input, Mapping) else None
        if isinstance(output.get("old_path"), str):
            source = output["old_path"]
        if isinstance(source, str) and source:
            candidate = Path(source)
            if not candidate.is_absolute() and folders:
                candidate = folders[0] / candidate
            if candidate != path:
                old_path = candidate
    return _Edit(
        tool_name=str(tool_name),
        path=path,
        uri=uri or path.as_uri(),
        old_text=old_text if isinstance(old_text, str) else None,
        new_text=new_text if isinstance(new_text, str) else None,
        changed=changed,
        old_path=old_path,
        old_uri=old_uri,
        shown=output["relative_path"] if isinstance(output.get("relative_path"), str) else None,
        unchanged=output.get("unchanged") is True,
    )


def _ranges(value: Any) -> list[tuple[int, int]] | None:
    if not isinstance(value, list):
        return None
    ranges: list[tuple[int, int]] = []
    for item in value:
        if (
            isinstance(item, list | tuple) and len(item) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in item)
        ):
            ranges.append((int(item[0]), int(item[1])))
    return ranges


def _covers_all(changed: Sequence[tuple[int, int]], text: str) -> bool:
    count = len(split_lines(text))
    covered: set[int] = set()
    for start, end in changed:
        covered.update(range(max(start, 0), min(end, count - 1) + 1))
    return len(covered) >= count


async def _snapshot(context: HookContext, path: Path) -> Any:
    lookup = context.documents
    if lookup is None:
        return None
    try:
        return await asyncio.to_thread(lookup, str(path))
    except Exception:
        log.debug("Document lookup for %s failed", path, exc_info=True)
        return None


def _containing_folder(path: Path, folders: Sequence[Path]) -> Path | None:
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        if path == folder or folder in path.parents:
            return folder
    return None


def _cwd_for(path: Path, folders: Sequence[Path]) -> Path | None:
    folder = _containing_folder(path, folders)
    if folder is not None and folder.is_dir():
        return folder
    return path.parent if path.parent.is_dir() else None


def _shown_path(path: Path, folders: Sequence[Path]) -> str:
    folder = _containing_folder(path, folders)
    if folder is not None and path != folder:
        return path.relative_to(folder).as_posix()
    return str(path)


def _linter_env(settings: AgentlsSettings) -> dict[str, str]:
    """The server's environment without the provider's API key."""
    drop = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    name = settings.api_key_env_name()
    if name:
        drop.add(name)
    return {k: v for k, v in os.environ.items() if k not in drop}


def _injection_limits(settings: AgentlsSettings) -> tuple[int | None, int | None]:
    """session.injectionSizeLimit in bytes; the per-turn token budget as
    characters (the orchestrator estimates tokens as characters / 4)."""
    session = settings.session
    budget = session.injection_budget_per_turn
    return session.injection_size_limit, (budget * 4 if budget is not None else None)
