"""Run next edit tasks (edit_tasks.py) through the real language server:
open the file as it was, send the user's edit as a didChange, ask
textDocument/copilotInlineEdit at the end of it, apply the suggested edits
and compare with the commit."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentls.core.editor.history import TextChange
from agentls.eval.completion.edit_tasks import EditTask
from agentls.eval.completion.report import edit_similarity
from agentls.eval.completion.runner import LspProcess

__all__ = ["apply_lsp_edits", "run_edit_tasks", "summarize_edits"]


def _offset(text: str, line: int, character: int) -> int:
    start = 0
    for _ in range(line):
        start = text.index("\n", start) + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    units = 0
    index = start
    while index < end and units < character:
        units += 2 if ord(text[index]) > 0xFFFF else 1
        index += 1
    return index


def apply_lsp_edits(text: str, edits: Sequence[Mapping[str, Any]]) -> str:
    spans = []
    for edit in edits:
        start, end = edit["range"]["start"], edit["range"]["end"]
        spans.append((_offset(text, start["line"], start["character"]),
                      _offset(text, end["line"], end["character"]), str(edit.get("text", ""))))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


async def run_edit_tasks(tasks: Sequence[EditTask], settings: Mapping[str, Any], *,
                         progress: Any = None) -> list[dict[str, Any]]:
    workspace = Path(tempfile.mkdtemp(prefix="agentls-eval-nes-"))
    server = await LspProcess.start([sys.executable, "-m", "agentls"])
    rows: list[dict[str, Any]] = []
    try:
        await server.request("initialize", {
            "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
            "initializationOptions": {"agentls": dict(settings)}}, timeout=60)
        await server.notify("initialized", {})
        for index, task in enumerate(tasks):
            rows.append(await _run_one(server, workspace, task))
            if progress is not None:
                progress(index + 1, len(tasks), rows[-1])
    finally:
        await server.close()
    return rows


async def _run_one(server: LspProcess, workspace: Path, task: EditTask) -> dict[str, Any]:
    uri = (workspace / task.path).as_uri()
    await server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": task.language_id, "version": 1, "text": task.before}})
    start, end, new = task.change
    await server.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": start, "character": 0},
                                      "end": {"line": end, "character": 0}}, "text": new}]})
    started = time.perf_counter()
    error = ""
    edits: list[dict[str, Any]] = []
    try:
        answer = await server.request("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": uri, "version": 2},
            "position": {"line": task.cursor[0], "character": task.cursor[1]}})
        edits = list((answer or {}).get("edits") or [])
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    latency = (time.perf_counter() - started) * 1000
    await server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    result = apply_lsp_edits(task.edited, edits)
    return {
        "id": task.id, "path": task.path, "edits": len(edits),
        "suggested": [str(e.get("text", "")) for e in edits],
        "target": _changed(task.expected, task.edited),
        "exact": result == task.expected,
        "edit_similarity": round(edit_similarity(_changed(result, task.edited),
                                                 _changed(task.expected, task.edited)), 4),
        "empty": not edits, "latency_ms": round(latency, 1), "error": error,
    }


def _changed(text: str, base: str) -> str:
    """The part of `text` that differs from `base` (common head and tail cut)."""
    return TextChange.between(base, text).text


def summarize_edits(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no next edit tasks"
    latencies = sorted(r["latency_ms"] for r in rows)
    p50 = latencies[len(latencies) // 2]
    p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
    return (f"next edit tasks {len(rows)}: exact {sum(r['exact'] for r in rows) / len(rows):.2f}  "
            f"edit sim {statistics.fmean(r['edit_similarity'] for r in rows):.2f}  "
            f"empty {sum(r['empty'] for r in rows) / len(rows):.2f}  "
            f"p50 {p50:.0f} ms  p95 {p95:.0f} ms")
