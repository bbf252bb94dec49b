"""A `session/prompt`'s blocks as the user message the core stores, and
the client's MCP servers in the settings' shape.

Text blocks are the prompt; a `file://` resource link becomes an `@file:`
mention, so its text reaches the model through the prompt enrichers and
the secret-file rule like a typed mention; an embedded text resource (the
client chose to send its text) is attached after the prompt.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from acp.schema import EmbeddedResourceContentBlock, ResourceContentBlock, TextContentBlock

if TYPE_CHECKING:
    from agentls.acp.workspace import AcpWorkspace

__all__ = ["client_servers", "prompt_text", "user_message"]

log = logging.getLogger("agentls.acp.prompt")


def prompt_text(blocks: list[Any]) -> tuple[str, list[str]]:
    """The typed text, with file links as `@file:` mentions (read through
    the secret-file rule), and the embedded resources as attachments."""
    texts: list[str] = []
    attachments: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            texts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            uri = block.uri
            parts = urlsplit(uri)
            texts.append(f'@file:"{unquote(parts.path)}"' if parts.scheme == "file" else uri)
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            body = getattr(resource, "text", None)
            if isinstance(body, str):
                attachments.append(f'<resource uri="{resource.uri}">\n{body}\n</resource>')
    return " ".join(t for t in texts if t), attachments


async def user_message(workspace: AcpWorkspace, enrichers: Any, text: str,
                        attachments: list[str]) -> Any:
    from agentls.core.editor.prompt_enrichment import PromptDraft, PromptSources
    from agentls.core.types.conversation import Message

    channels = workspace.channels
    sources = PromptSources(workspace_folders=(str(workspace.root),),
                            documents=channels.documents)

    def enrich() -> PromptDraft:
        draft = PromptDraft(text)
        for enricher in enrichers:
            try:
                draft = enricher.enrich_prompt(draft, sources)
            except Exception:
                log.exception("Prompt enricher %s failed; skipped",
                              getattr(enricher, "name", enricher))
        return draft

    draft = await asyncio.to_thread(enrich) if enrichers else PromptDraft(text)
    blocks = [*draft.attachments, *attachments]
    if not blocks and draft.text == text:
        return Message("user", text)
    return Message("user", "\n\n".join([draft.text, *blocks]),
                   {**draft.metadata, "prompt": text})


def client_servers(servers: list[Any] | None) -> dict[str, dict[str, Any]]:
    """The client's MCP servers in the settings' `mcpServers` shape."""
    found: dict[str, dict[str, Any]] = {}
    for server in servers or []:
        name = getattr(server, "name", "")
        if not name:
            continue
        if getattr(server, "command", None):
            found[name] = {"command": server.command, "args": list(server.args),
                           "env": {e.name: e.value for e in server.env}}
        elif getattr(server, "url", None) and getattr(server, "type", "") == "http":
            found[name] = {"url": server.url,
                           "headers": {h.name: h.value for h in server.headers}}
        else:
            log.warning("MCP server %s: only stdio and http servers are supported", name)
    return found
