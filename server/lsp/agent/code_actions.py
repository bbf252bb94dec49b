"""textDocument/codeAction: "Fix with agent", "Explain", "Write tests"
(docs/protocol.md). Each is a Command `agentls.chat` with arguments
[{prompt, context: {uri, range}}], the prompt rendered from the template of
the same purpose (`fix`, `explain`, `tests`) by the feature that serves it,
so a workspace's `.agentls/templates/fix.md` changes what is asked.

- "Fix with agent" (quickfix): when diagnostics overlap the range; the prompt
  carries those diagnostics and the whole lines they and the range cover.
- "Explain" / "Write tests" (kinds `agentls.explain` / `agentls.tests`): when
  something is selected (a non-empty range); the prompt carries the selection.

Only real files (file:// URIs) get actions; chat documents and prompt files
do not. With the templates feature disabled there are no actions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from agentls.core.plugins.protocols import FeaturePlugin, plugin_call, plugin_name
from agentls.lsp.suggestions.completion import is_prompt_document
from agentls.lsp.wire.convert import to_plain

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.agent.code_actions")

CHAT_COMMAND = "agentls.chat"
EXPLAIN_KIND = "agentls.explain"
TESTS_KIND = "agentls.tests"
KINDS = [types.CodeActionKind.QuickFix, EXPLAIN_KIND, TESTS_KIND]


def register(server: AgentlsLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=KINDS, resolve_provider=False),
    )
    def code_action(
        ls: AgentlsLanguageServer, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        uri = params.text_document.uri
        if not uri.startswith("file://"):
            return []
        opened = ls.workspace.text_documents.get(uri)
        if is_prompt_document(uri, opened.language_id if opened else None):
            return []
        wanted = _wanted(params.context.only)
        fixes = (
            [d for d in params.context.diagnostics if _overlaps(d.range, params.range)]
            if wanted(types.CodeActionKind.QuickFix) else []
        )
        selected = not _is_empty(params.range)
        if not fixes and not (selected and (wanted(EXPLAIN_KIND) or wanted(TESTS_KIND))):
            return []
        document = opened or ls.workspace.get_text_document(uri)
        try:
            return build_actions(ls, document, params.range, fixes, wanted, selected)
        except OSError as exc:  # a file that is neither open nor readable
            log.warning("No code actions for %s: %s", uri, exc)
            return []


def build_actions(
    ls: AgentlsLanguageServer,
    document: TextDocument,
    selection: types.Range,
    fixes: list[types.Diagnostic],
    wanted: Callable[[str], bool],
    selected: bool,
) -> list[types.CodeAction]:
    language = document.language_id or Path(document.uri).suffix.lstrip(".") or "text"
    path = _display_path(ls, document)
    actions: list[types.CodeAction] = []
    if fixes:
        lines_range, code = _whole_lines(document, [selection, *(d.range for d in fixes)])
        diagnostics = [to_plain(d) for d in fixes]
        prompt = template_prompt(ls, "fix", selection=code, language=language, path=path,
                                 diagnostics=diagnostics)
        if prompt:
            actions.append(types.CodeAction(
                title="Fix with agent",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=fixes,
                command=_chat_command("Fix with agent", prompt, document.uri, lines_range),
            ))
    if selected:
        code = document.text_in_client_range(selection)
        for title, kind, template in (("Explain", EXPLAIN_KIND, "explain"),
                                      ("Write tests", TESTS_KIND, "tests")):
            if not wanted(kind):
                continue
            prompt = template_prompt(ls, template, selection=code, language=language,
                                     path=path, diagnostics=[])
            if prompt:
                actions.append(types.CodeAction(
                    title=title, kind=kind,
                    command=_chat_command(title, prompt, document.uri, selection),
                ))
    return actions


def template_prompt(ls: AgentlsLanguageServer, name: str, **context: Any) -> str:
    """The template `name` rendered by the first enabled feature that lists
    it (TemplateSource)."""
    from agentls.core.plugins.capabilities import TemplateSource
    from agentls.core.plugins.registry import offering

    config = {**ls.state.host.feature_config(), "template": name, **context}
    for plugin in offering(ls.state.host.features(), TemplateSource):
        try:
            if not any(t.get("name") == name for t in plugin.list_templates(config) or []):
                continue
            text = plugin_call(plugin, FeaturePlugin, "get_template", config)
        except Exception:
            log.exception("Template %r of %s failed; skipped", name, plugin_name(plugin))
            continue
        if isinstance(text, str) and text:
            return text
    return ""


def _chat_command(title: str, prompt: str, uri: str, where: types.Range) -> types.Command:
    return types.Command(
        title=title,
        command=CHAT_COMMAND,
        arguments=[{"prompt": prompt, "context": {"uri": uri, "range": to_plain(where)}}],
    )


def _wanted(only: Sequence[str] | None) -> Callable[[str], bool]:
    """CodeActionContext.only: a kind is wanted when it equals or falls under
    one of the requested kinds (`refactor` covers `refactor.extract`)."""
    if not only:
        return lambda kind: True
    prefixes = [_kind_value(o) for o in only]

    def wanted(kind: str) -> bool:
        value = _kind_value(kind)
        return any(value == p or value.startswith(p + ".") for p in prefixes)

    return wanted


def _kind_value(kind: str) -> str:
    # lsprotocol's kinds are (str, Enum): str() would give "CodeActionKind.QuickFix".
    return str(getattr(kind, "value", kind))


def _key(position: types.Position) -> tuple[int, int]:
    return position.line, position.character


def _is_empty(where: types.Range) -> bool:
    return _key(where.start) >= _key(where.end)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    """Touching counts: a cursor at either end of a diagnostic is "in" it."""
    return _key(a.start) <= _key(b.end) and _key(b.start) <= _key(a.end)


def _whole_lines(
    document: TextDocument, ranges: list[types.Range]
) -> tuple[types.Range, str]:
    """The whole lines every range touches, as a range and as text. A range
    ending at character 0 of a line does not take that line."""
    from pygls.workspace.position_codec import ServerTextPosition

    lines = document.lines
    if not lines:
        return types.Range(start=types.Position(line=0, character=0),
                           end=types.Position(line=0, character=0)), ""
    first = min(r.start.line for r in ranges)
    last = max(
        r.end.line - 1 if r.end.character == 0 and r.end.line > r.start.line else r.end.line
        for r in ranges
    )
    first = max(0, min(first, len(lines) - 1))
    last = max(first, min(last, len(lines) - 1))
    text = "".join(lines[first:last + 1]).rstrip("\r\n")
    end_column = len(lines[last].rstrip("\r\n"))
    end = document.position_to_client_units(ServerTextPosition(last, end_column))
    return types.Range(start=types.Position(line=first, character=0), end=end), text


def _display_path(ls: AgentlsLanguageServer, document: TextDocument) -> str:
    """Relative to the workspace folder it is in, else absolute."""
    if not document.path:
        return document.uri
    path = Path(document.path)
    for folder in ls.state.host.workspace_folders or ([ls.state.host.workspace_root]
                                                 if ls.state.host.workspace_root else []):
        try:
            return path.relative_to(folder).as_posix()
        except ValueError:
            continue
    return str(path)
