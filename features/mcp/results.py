"""A `tools/call` result (wire form: a dict with content, structuredContent,
isError) as the text the model reads.

- text blocks as they are;
- structuredContent as JSON, unless a text block already carries the same
  data (servers usually send both);
- embedded resources: their text, or a note for binary content;
- resource links: a line naming the URI;
- images and audio: a short note with the MIME type and size (the model
  can ask for something else; providers here take text tool results);
- isError: the text is the server's error message.

The text is bounded (`MAX_RESULT_CHARS`): a server flooding a reply cannot
flood the session; the orchestrator caps it again per session settings.

Resources attached as context (`@mcp:` mentions) pass the secret-file rule
read_file asks under (`withheld_resource`): a `file:` URI that leads to
`.env`, a key or `.git/config` is not attached, whichever server offers it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["MAX_RESULT_CHARS", "attachable_contents", "render_content", "render_result",
           "withheld_resource"]

MAX_RESULT_CHARS = 200_000


def _note_binary(kind: str, block: dict[str, Any]) -> str:
    mime = block.get("mimeType") or "unknown type"
    data = block.get("data") or block.get("blob") or ""
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    return f"[{kind} {mime}, about {size} bytes, not shown to the model]"


def render_content(blocks: Any) -> list[str]:
    parts: list[str] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(_note_binary(kind, block))
        elif kind == "resource":
            resource = block.get("resource") or {}
            uri = resource.get("uri", "?")
            if isinstance(resource.get("text"), str):
                parts.append(f'<resource uri="{uri}">\n{resource["text"]}\n</resource>')
            else:
                parts.append(f'<resource uri="{uri}"/> ' + _note_binary("binary", resource))
        elif kind == "resource_link":
            name = block.get("name") or block.get("uri")
            parts.append(f"[resource link: {name} <{block.get('uri')}>]")
        elif kind is not None:
            parts.append(f"[{kind} content not shown]")
    return parts


def render_result(raw: dict[str, Any]) -> tuple[bool, str]:
    """(success, text)."""
    parts = render_content(raw.get("content"))
    structured = raw.get("structuredContent")
    if structured is not None:
        try:
            dumped = json.dumps(structured, ensure_ascii=False, indent=2)
        except (TypeError, ValueError):
            dumped = str(structured)
        already = any(_same_json(p, structured) for p in parts)
        if not already:
            parts.append(dumped)
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = (text[:MAX_RESULT_CHARS]
                + f"\n[... {len(text) - MAX_RESULT_CHARS} more characters cut by agentls]")
    failed = bool(raw.get("isError"))
    if failed and not text.strip():
        text = "The MCP server reported an error without a message."
    return not failed, text


def _same_json(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except (TypeError, ValueError):
        return False


def withheld_resource(uri: Any, folders: Sequence[str | Path]) -> str | None:
    """Why the resource `uri` is not attached as context, or None. Only
    `file:` URIs name a file to check; the secret rule applies wherever the
    file is (a server the user set up may serve files outside the
    workspace, never a secret one without read_file's question)."""
    from agentls.core.editor.file_access import Withheld
    from agentls.features.policy.sensitive import ModelFileAccess

    if not isinstance(uri, str) or not uri[:5].lower() == "file:":
        return None
    path = unquote(urlsplit(uri).path)
    if not path:
        return None
    checked = ModelFileAccess(folders).check(path, confine=False)
    return checked.reason if isinstance(checked, Withheld) else None


def attachable_contents(contents: Any, folders: Sequence[str | Path]
                        ) -> tuple[list[dict[str, Any]], list[str]]:
    """The `resources/read` contents that may be attached, and a note for
    each one withheld (a server may answer with other URIs than asked)."""
    kept: list[dict[str, Any]] = []
    notes: list[str] = []
    for content in contents if isinstance(contents, list) else []:
        if not isinstance(content, dict):
            continue
        why = withheld_resource(content.get("uri"), folders)
        if why is None:
            kept.append(content)
        else:
            notes.append(f'<resource uri="{content.get("uri")}" error="not attached: {why}"/>')
    return kept, notes
