"""Helpers around the `mcp` SDK's objects: wire-form dicts, paged lists,
prompt text, and error messages that say what happened."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentls.features.mcp.config import McpServerSpec

__all__ = ["describe", "first_of", "import_sdk", "is_connection_lost", "is_timeout", "paged",
           "render_prompt", "wire"]

LIST_PAGES_MAX = 20  # a paginator that never ends cannot hang the start


def import_sdk() -> None:
    import mcp
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401


def render_prompt(result: dict[str, Any]) -> str:
    from agentls.features.mcp.results import render_content

    parts: list[str] = []
    for message in result.get("messages") or []:
        if isinstance(message, dict):
            parts += render_content([message.get("content")])
    return "\n\n".join(p for p in parts if p)


def wire(result: Any) -> dict[str, Any]:
    if hasattr(result, "model_dump"):
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(result) if isinstance(result, dict) else {}


async def paged(method: Callable[..., Any], key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(LIST_PAGES_MAX):
        page = wire(await method(cursor=cursor))
        items += [i for i in page.get(key) or [] if isinstance(i, dict)]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return items


async def first_of(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, TimeoutError) or "timed out" in text or "timeout" in text


def is_connection_lost(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(w in text for w in ("connection closed", "closed", "broken", "eof", "exited"))


def describe(exc: BaseException, spec: McpServerSpec) -> str:
    """A message that says what happened and what to check."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exc.exceptions]
        if leaves:
            return describe(leaves[0], spec)
    if isinstance(exc, FileNotFoundError) and spec.config.command is not None:
        return (f"Cannot start {spec.config.command!r}: no such program. Install it or give its "
                "full path in `command`.")
    if isinstance(exc, PermissionError) and spec.config.command is not None:
        return f"Cannot start {spec.config.command!r}: permission denied."
    text = str(exc).strip() or type(exc).__name__
    if spec.config.url is not None and ("connect" in text.lower()
                                        or type(exc).__name__ == "ConnectError"):
        return f"Cannot connect to {spec.config.url}: {text}"
    return text[:2000]
