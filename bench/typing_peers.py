"""The other rows of the typing replay (bench/bench_typing.py): the engines
agentls can run on besides its embedded model, tabby-agent as the client,
and each engine's own accounting of the requests that reached it.

- `--engine llama-server` (llama.cpp's own server, bench/llama_server.py;
  `--cache-reuse N` serves it with that option too): agentls on the `openai`
  provider pointed at its /v1; per request, its log's timings.
- `--engine llama-cpp-python` (its OpenAI server): no counters of its own.
- `--client tabby`: tabby-agent 1.5.0 over LSP (bench_vs_tabby.py installs
  and configures it), its server being bench/tabby_shim.py on the engine;
  per request, the shim's time and the engine's `usage`/`timings` if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_inline import Client
from bench_vs_tabby import MODEL_ALIAS, TABBY_VERSION, llama_cpp_python, tabby_cli, tabby_home
from llama_server import serve
from tabby_shim import Shim

MODEL = Path.home() / ".cache" / "agentls" / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
ENGINES = ("embedded", "llama-server", "llama-cpp-python")


@contextlib.contextmanager
def engine(name: str, model: str, log: Path, threads: int,
           cache_reuse: int = 0) -> Iterator[str | None]:
    """The engine's base URL while it serves (None: agentls's embedded model)."""
    if name == "embedded":
        yield None
    elif name == "llama-server":
        extra = ("--cache-reuse", str(cache_reuse)) if cache_reuse else ()
        with serve(model, log=log, threads=threads, extra=extra) as url:
            yield url
    elif name == "llama-cpp-python":
        with llama_cpp_python(model, log, threads) as url:
            yield url
    else:
        raise SystemExit(f"--engine {name!r}: one of {', '.join(ENGINES)}")


def agentls_on(url: str, settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with the `openai` provider pointed at the engine's /v1, as
    bench_vs_tabby.agentls_settings (but the debounce left at its default)."""
    inline = {**settings.get("inlineCompletion", {}), "model": MODEL_ALIAS}
    rest = {k: v for k, v in settings.items() if k not in ("provider", "inlineCompletion")}
    return {**rest, "provider": "openai", "baseUrl": url + "/v1", "inlineCompletion": inline}


# --------------------------------------------------------------------------- clients


@dataclass(frozen=True)
class Peer:
    """How one client is asked for a suggestion at each keystroke."""

    name: str
    method: str
    trigger_kind: int
    text: Callable[[dict[str, Any], int], str | None]  # (answer, cursor column) -> suggestion


def _items(message: dict[str, Any]) -> list[Any] | None:
    """An answer's items (an item list or a list with `items`); None for an error."""
    if "error" in message:
        return None
    result = message.get("result")
    return result.get("items", []) if isinstance(result, dict) else (result or [])


def inline_text(message: dict[str, Any], column: int) -> str | None:
    """The first inline item's text; None for an error or a cancelled request."""
    items = _items(message)
    if not items:
        return None if items is None else ""
    text = items[0].get("insertText", "")
    return text if isinstance(text, str) else text.get("value", "")


def tabby_text(message: dict[str, Any], column: int) -> str | None:
    """tabby-agent's first completion item: its textEdit starts at the word
    before the cursor, which the user has typed already."""
    items = _items(message)
    if not items:
        return None if items is None else ""
    edit = items[0].get("textEdit") or {}
    text = str(edit.get("newText", items[0].get("insertText", "")))
    start = int(((edit.get("range") or {}).get("start") or {}).get("character", column))
    return text[max(0, column - start):]


AGENTLS = Peer("agentls", "textDocument/inlineCompletion", 2, inline_text)
# tabby-agent 1.5.0's LSP mode serves textDocument/completion only; it
# debounces and aborts the previous request itself (its defaults kept).
TABBY = Peer(f"tabby-agent {TABBY_VERSION}", "textDocument/completion", 1, tabby_text)


async def start_tabby(shim: Shim, workdir: Path) -> tuple[asyncio.subprocess.Process, Client]:
    home = tabby_home(shim.url)
    proc = await asyncio.create_subprocess_exec(
        "node", str(tabby_cli()), "--lsp", "--stdio", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "HOME": str(home)})
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    await asyncio.wait_for(client.request("initialize", {
        "processId": None, "rootUri": workdir.as_uri(),
        "workspaceFolders": [{"uri": workdir.as_uri(), "name": "bench"}],
        "clientInfo": {"name": "agentls-bench"},
        "capabilities": {"textDocument": {"inlineCompletion": {}},
                         "workspace": {"configuration": True}}}), 120)
    client.notify("initialized", {})
    return proc, client


async def warm_tabby(client: Client, shim: Shim, uri: str) -> None:
    """tabby-agent answers nothing until it has reached its server: ask
    until a completion reaches the shim and is answered."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 600
    while not shim.calls and loop.time() < deadline:
        await asyncio.wait_for(client.request(TABBY.method, {
            "textDocument": {"uri": uri}, "position": {"line": 40, "character": 0},
            "context": {"triggerKind": 1}}), 600)
        if not shim.calls:
            await asyncio.sleep(1)
    if not shim.calls:
        raise SystemExit("bench_typing: tabby-agent sent no completion to the shim")
    shim.calls.clear()


# --------------------------------------------------------------------------- counters

_TASK = re.compile(r"task (\d+) \|")
_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"^.*\|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def llama_server_records(log: str) -> list[dict[str, Any]]:
    """Per task, from llama-server's log: a finished one prints its prompt
    tokens evaluated (after its cache) and generated; a cancelled one only
    that it stopped."""
    records: dict[int, dict[str, Any]] = {}
    for line in log.splitlines():
        task = _TASK.search(line)
        if task is None:  # a slot without a task logs "task -1"
            continue
        record = records.setdefault(int(task.group(1)), {
            "prompt_evaluated": None, "generated": None, "eval_ms": 0.0, "outcome": "stopped"})
        if (found := _PROMPT.search(line)) is not None:
            record["prompt_evaluated"] = int(found.group(2))
            record["eval_ms"] += float(found.group(1))
            record["outcome"] = "done"
        elif (found := _EVAL.search(line)) is not None:
            record["generated"] = int(found.group(2))
            record["eval_ms"] += float(found.group(1))
    return list(records.values())


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report_llama_server(records: list[dict[str, Any]], useful: int) -> None:
    done = [r for r in records if r["outcome"] == "done"]
    engine_s = sum(r["eval_ms"] for r in done) / 1000
    print(f"  engine (llama-server's log): {len(records)} requests reached its slot "
          f"({len(done)} ran to the end, {len(records) - len(done)} stopped when superseded, "
          f"their work not logged); {engine_s:.1f} s in prompt + decode of those that ran "
          f"to the end, {engine_s / max(1, useful):.1f} s per useful suggestion")
    evaluated = [r["prompt_evaluated"] for r in done]
    if evaluated:
        print(f"  prompt tokens evaluated per request (after the prompt cache, those that ran to "
              f"the end): p50 {statistics.median(evaluated):.0f}  p90 {pct(evaluated, 0.9):.0f}"
              f"  max {max(evaluated)}; generated p50 "
              f"{statistics.median([r['generated'] or 0 for r in done]):.0f}")


def report_shim(calls: list[dict[str, Any]], engine_name: str) -> None:
    stopped = sum(c["outcome"] == "stopped" for c in calls)
    seconds = [c["ms"] / 1000 for c in calls if c["outcome"] == "done"]
    timing = (f"engine call p50 {statistics.median(seconds):.2f} s  p90 {pct(seconds, 0.9):.2f} s"
              if seconds else "no engine call ran to the end")
    print(f"  engine ({engine_name} has no counters of agentls's; the shim's side): "
          f"{len(calls)} completions asked ({len(calls) - stopped} answered, {stopped} dropped "
          f"when tabby-agent went); {timing}")
    prompts = [c["timings"]["prompt_n"] for c in calls if (c.get("timings") or {}).get("prompt_n")
               is not None]
    if prompts:
        print(f"  prompt tokens evaluated per request (the engine's timings): p50 "
              f"{statistics.median(prompts):.0f}  p90 {pct(prompts, 0.9):.0f}  max {max(prompts)}")
        return
    usage = [c["usage"]["prompt_tokens"] for c in calls if (c.get("usage") or {}).get(
        "prompt_tokens") is not None]
    if usage:
        print(f"  prompt tokens per request (the engine's usage: the whole prompt, its cache "
              f"not told): p50 {statistics.median(usage):.0f}  max {max(usage)}")
    else:
        print("  prompt tokens evaluated per request: n/a (the engine's replies carry neither "
              "usage nor timings)")
