"""Feature completions: textDocument/completion (trigger `@` and `/`),
agentls/complete and agentls/templates (docs/protocol.md).

Generic over the enabled FeaturePlugins: each one's get_completions(config,
text_before_cursor) entries ({replacement, start, display, display_meta, ...})
become CompletionItems whose textEdit replaces from `start` to the cursor.
An entry the plugin's apply_completion expands (a `/template` becomes the
template text) inserts the expansion; apply_completion is asked at once,
as if the entry had been accepted, because LSP reports no acceptance back.

Only chat prompt documents (languageId `agentls-chat`) and prompt files
(`*.prompt.md`) get items; any other document is answered with an empty
list before any plugin is consulted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from agentls.core.plugins.protocols import FeaturePlugin, plugin_call, plugin_name
from agentls.lsp.wire.convert import to_plain

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from agentls.lsp.server import AgentlsLanguageServer

log = logging.getLogger("agentls.lsp.suggestions.completion")

CHAT_LANGUAGE_ID = "agentls-chat"
PROMPT_FILE_SUFFIX = ".prompt.md"
TRIGGER_CHARACTERS = ["@", "/"]
MAX_ITEMS_PER_PLUGIN = 200

_KINDS = {kind.name.lower(): kind for kind in types.CompletionItemKind}


def register(server: AgentlsLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False),
    )
    def completion(
        ls: AgentlsLanguageServer, params: types.CompletionParams
    ) -> types.CompletionList:
        uri = params.text_document.uri
        document = ls.workspace.text_documents.get(uri)
        if not is_prompt_document(uri, document.language_id if document else None):
            return types.CompletionList(is_incomplete=False, items=[])
        if document is None:  # not opened: a prompt file on disk
            document = ls.workspace.get_text_document(uri)
        try:
            return document_completions(ls, document, params.position)
        except OSError as exc:  # a prompt file that is neither open nor readable
            log.warning("No completions for %s: %s", uri, exc)
            return types.CompletionList(is_incomplete=False, items=[])

    @server.feature("agentls/complete")
    def complete(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        args = to_plain(params)
        text = args.get("text") if isinstance(args, Mapping) else None
        if not isinstance(text, str):
            from pygls.exceptions import JsonRpcInvalidParams

            raise JsonRpcInvalidParams("agentls/complete needs params { text: string }")
        return {"items": feature_completions(ls, text)}

    @server.feature("agentls/templates")
    def templates(ls: AgentlsLanguageServer, params: Any = None) -> dict[str, Any]:
        return {"templates": list_templates(ls)}


def is_prompt_document(uri: str, language_id: str | None) -> bool:
    return language_id == CHAT_LANGUAGE_ID or uri.lower().endswith(PROMPT_FILE_SUFFIX)


def list_templates(ls: AgentlsLanguageServer) -> list[dict[str, Any]]:
    """Templates of every enabled feature that serves them (TemplateSource),
    the first plugin (by priority) winning a name."""
    from agentls.core.plugins.capabilities import TemplateSource
    from agentls.core.plugins.registry import offering

    config = ls.state.host.feature_config()
    found: dict[str, dict[str, Any]] = {}
    for plugin in offering(ls.state.host.features(), TemplateSource):
        try:
            for entry in plugin.list_templates(config) or []:
                if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                    found.setdefault(entry["name"], dict(entry))
        except Exception:
            log.exception("list_templates of %s failed; skipped", plugin_name(plugin))
    return [found[name] for name in sorted(found)]


def feature_completions(
    ls: AgentlsLanguageServer, text: str, text_after: str = ""
) -> list[dict[str, Any]]:
    """Every enabled plugin's completion dicts for `text` (before the cursor),
    each with `plugin` and, when apply_completion expands it, `applied`."""
    config = ls.state.host.feature_config()
    results: list[dict[str, Any]] = []
    for plugin in ls.state.host.features():
        name = plugin_name(plugin)
        try:
            entries = plugin_call(plugin, FeaturePlugin, "get_completions", config, text) or []
        except Exception:
            log.exception("get_completions of %s failed; skipped", name)
            continue
        for entry in list(entries)[:MAX_ITEMS_PER_PLUGIN]:
            if not isinstance(entry, Mapping):
                continue
            item = dict(entry)
            applied = _apply(plugin, config, text, text_after, item)
            if applied:
                item["applied"] = applied
            item["plugin"] = name
            results.append(item)
    return results


def document_completions(
    ls: AgentlsLanguageServer, document: TextDocument, position: types.Position
) -> types.CompletionList:
    source = document.source
    cursor = min(document.offset_at_position(position), len(source))
    before, after = source[:cursor], source[cursor:]
    line_start = before.rfind("\n") + 1
    takes = _item_capabilities(ls)
    snippets = bool(takes and takes.snippet_support)
    # Markdown documentation only to a client that says it renders it.
    markdown = bool(takes and types.MarkupKind.Markdown in (takes.documentation_format or ()))
    items = []
    for index, entry in enumerate(feature_completions(ls, before, after)):
        replacement = entry.get("replacement")
        if not isinstance(replacement, str):
            continue
        start = entry.get("start")
        start = start if isinstance(start, int) and 0 <= start <= cursor else cursor
        start = max(start, line_start)  # an LSP completion edit stays on the cursor's line
        # (pygls maps an offset at the very end of a document to the next line)
        start_position = position if start == cursor else document.client_position_at_offset(start)
        edit_range = types.Range(start=start_position, end=position)
        items.append(_to_item(entry, replacement, edit_range, index, snippets=snippets,
                               markdown=markdown))
    # Plugins filter by what is typed (and may cap their lists): ask again as it changes.
    return types.CompletionList(is_incomplete=True, items=items)


def _item_capabilities(ls: AgentlsLanguageServer) -> types.ClientCompletionItemOptions | None:
    # Not set before initialize (an in-process server in tests).
    capabilities = getattr(ls.protocol, "client_capabilities", None)
    document = capabilities.text_document if capabilities else None
    completion = document.completion if document else None
    return completion.completion_item if completion else None


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def as_snippet(text: str) -> str:
    """Plain text as an LSP snippet that expands to the same text, with each
    `{{name}}` placeholder a tab stop holding its name (the same name, the
    same stop)."""
    stops: dict[str, int] = {}
    parts: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        parts.append(_escaped(text[position:match.start()]))
        name = match.group(1)
        number = stops.setdefault(name, len(stops) + 1)
        parts.append(f"${{{number}:{name}}}")
        position = match.end()
    parts.append(_escaped(text[position:]))
    return "".join(parts)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _to_item(
    entry: Mapping[str, Any], replacement: str, edit_range: types.Range, index: int,
    *, snippets: bool = False, markdown: bool = False,
) -> types.CompletionItem:
    """One CompletionItem. To a client that takes snippets the text goes as a
    snippet: editors insert only the first word of a plain-text item whose
    text has spaces (Neovim's vim.lsp.completion does), but expand a
    snippet whole, and a template's placeholders become tab stops."""
    label = entry.get("display") or replacement
    detail = entry.get("display_meta")
    documentation = entry.get("documentation")
    kind = entry.get("kind")
    text = str(entry.get("applied") or replacement)
    return types.CompletionItem(
        label=str(label),
        kind=_KINDS.get(kind.lower(), types.CompletionItemKind.Text)
        if isinstance(kind, str) else types.CompletionItemKind.Text,
        detail=str(detail) if detail else None,
        documentation=(types.MarkupContent(kind=types.MarkupKind.Markdown,
                                           value=str(documentation))
                       if markdown else str(documentation))
        if documentation else None,
        filter_text=replacement,
        sort_text=f"{index:05d}",
        insert_text_format=types.InsertTextFormat.Snippet if snippets
        else types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=edit_range,
                                 new_text=as_snippet(text) if snippets else text),
        data={"plugin": entry.get("plugin")},
    )


def _apply(
    plugin: Any, config: dict[str, Any], before: str, after: str, entry: dict[str, Any]
) -> str:
    """apply_completion as if `entry` had been accepted: the text it gets is
    the buffer with the replacement in place."""
    start = entry.get("start")
    start = start if isinstance(start, int) and 0 <= start <= len(before) else len(before)
    replacement = entry.get("replacement")
    if not isinstance(replacement, str):
        return ""
    applied_text = before[:start] + replacement + after
    try:
        result = plugin_call(plugin, FeaturePlugin, "apply_completion", config, applied_text,
                             dict(entry))
    except Exception:
        log.exception("apply_completion of %s failed; the plain replacement is used",
                      plugin_name(plugin))
        return ""
    return result if isinstance(result, str) else ""
