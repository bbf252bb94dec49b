"""agentls against tabby-agent 1.5.0 on HumanEval holes: same engine, same model, one run.

Holes are cut from HumanEval's reference solutions by agentls's own eval
(server/eval/completion/humaneval.py: single- and multi-line, seeded) and every
completion is put back and the problem's tests run (server/eval/completion/execute.py).

- agentls: the real server (`python -m agentls`) over LSP with default settings,
  the `openai` provider pointed at the engine's /v1 (its FIM choice is its own);
  with --engine embedded, the `local` provider given the GGUF by path.
- tabby-agent 1.5.0 (npm, installed into ~/.cache/agentls-bench/tabby-agent) over
  LSP, talking to bench/tabby_shim.py, which answers its Tabby API from the same
  engine with Tabby's FIM template for the model.

Engines: `llama-server` (llama.cpp's own, bench/llama_server.py builds it),
`llama-cpp-python` (its OpenAI server, `python -m llama_cpp.server`), `embedded`
(agentls only). Not CI; slow on 2 cores (run with nice):

    nice -n 10 .venv/bin/python bench/bench_vs_tabby.py --model /tmp/qwen/qwen05.gguf \
        --engine llama-cpp-python --engine llama-server --single 24 --multi 16 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_server import CACHE, free_port, running, serve
from tabby_shim import Shim

from agentls.eval.completion.execute import run_program
from agentls.eval.completion.humaneval import Problem, cut_holes, load_problems, problem_of
from agentls.eval.completion.runner import LspProcess
from agentls.eval.completion.tasks import Task

TABBY_VERSION = "1.5.0"
TABBY_DIR = CACHE / "tabby-agent"
MODEL_ALIAS = "qwen2.5-coder-0.5b-instruct-q4_k_m"  # the name the engine serves it under
# Both clients wait as long for an answer (agentls's eval runner and tabby-agent
# default to 120 s; a busy shared host needs more).
REQUEST_TIMEOUT_S = 300.0
LspProcess.request.__defaults__ = (REQUEST_TIMEOUT_S,)


# --------------------------------------------------------------------------- engines


@contextlib.contextmanager
def llama_cpp_python(model: str, log: Path, threads: int) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--model_alias",
           MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
           "--n_threads", str(threads)]
    with running(cmd, "/v1/models", port, log) as url:
        yield url


@contextlib.contextmanager
def engine(name: str, model: str, log: Path, threads: int) -> Iterator[str | None]:
    if name == "llama-server":
        with serve(model, log=log, threads=threads) as url:
            yield url
    elif name == "llama-cpp-python":
        with llama_cpp_python(model, log, threads) as url:
            yield url
    elif name == "embedded":
        yield None
    else:
        raise SystemExit(f"--engine {name!r}: llama-server, llama-cpp-python or embedded")


# --------------------------------------------------------------------------- clients


def agentls_settings(url: str | None, model: str) -> dict[str, Any]:
    inline: dict[str, Any] = {"debounceMs": 0}
    if url is None:
        return {"provider": "local", "inlineCompletion": {**inline, "model": model}}
    return {"provider": "openai", "baseUrl": url + "/v1",
            "inlineCompletion": {**inline, "model": MODEL_ALIAS}}


WARM_UP = Task(id="warm-up", kind="single", source="warm", path="warm.py",
               language_id="python", text="def add(a, b):\n    return \n", offset=26,
               line=1, character=11, expected="a + b")


class Client:
    """One editor-side client over LSP; `complete` times one Invoked request."""

    name = ""
    method = "textDocument/inlineCompletion"

    @staticmethod
    def first(item: dict[str, Any]) -> tuple[str, Any]:
        """An answer's first item as (text, range or None)."""
        return str(item.get("insertText", "")), item.get("range")

    def __init__(self) -> None:
        self.workspace = Path(tempfile.mkdtemp(prefix=f"{self.name}-eval-"))
        self.server: LspProcess | None = None

    async def start(self) -> None:
        raise NotImplementedError

    async def warm_up(self) -> None:
        await self.complete(WARM_UP)

    async def complete(self, task: Task) -> dict[str, Any]:
        assert self.server is not None
        uri = (self.workspace / task.source / task.path).as_uri()
        await self.server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": task.language_id, "version": 1, "text": task.text}})
        started = time.perf_counter()
        error, completion, edit_range = "", "", None
        try:
            answer = await self.server.request(self.method, {
                "textDocument": {"uri": uri},
                "position": {"line": task.line, "character": task.character},
                "context": {"triggerKind": 1}})
            items = (answer or {}).get("items") if isinstance(answer, dict) else answer
            if items:
                completion, edit_range = self.first(items[0])
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        latency = (time.perf_counter() - started) * 1000
        await self.server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        return {"task": task, "completion": completion, "range": edit_range,
                "latency_ms": latency, "error": error}

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


class Agentls(Client):
    """The real server, `python -m agentls`, default settings but the engine."""

    name = "agentls"

    def __init__(self, url: str | None, model: str, home: Path) -> None:
        super().__init__()
        self.settings = agentls_settings(url, model)
        self.home = home

    async def start(self) -> None:
        home = self.home
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_DATA_HOME": str(home / ".local/share"),
               "XDG_STATE_HOME": str(home / ".state")}
        self.server = await LspProcess.start([sys.executable, "-m", "agentls"], env)
        await self.server.request("initialize", {
            "processId": None, "rootUri": self.workspace.as_uri(),
            "capabilities": {"textDocument": {"inlineCompletion": {}}},
            "initializationOptions": {"agentls": self.settings}}, timeout=60)
        await self.server.notify("initialized", {})


class Tabby(Client):
    """tabby-agent 1.5.0 over LSP (`--lsp --stdio`), its server being the shim.
    Its LSP mode offers `textDocument/completion` only (no inline completion):
    the first item's textEdit is the suggestion."""

    name = "tabby"
    method = "textDocument/completion"

    @staticmethod
    def first(item: dict[str, Any]) -> tuple[str, Any]:
        edit = item.get("textEdit") or {}
        return str(edit.get("newText", item.get("insertText", ""))), edit.get("range")

    def __init__(self, shim: Shim) -> None:
        super().__init__()
        self.shim = shim

    async def start(self) -> None:
        home = tabby_home(self.shim.url)
        self.server = await LspProcess.start(["node", str(tabby_cli()), "--lsp", "--stdio"],
                                             {**os.environ, "HOME": str(home)})
        await self.server.request("initialize", {
            "processId": None, "rootUri": self.workspace.as_uri(),
            "workspaceFolders": [{"uri": self.workspace.as_uri(), "name": "bench"}],
            "clientInfo": {"name": "agentls-bench"},
            "capabilities": {"textDocument": {"inlineCompletion": {}},
                             "workspace": {"configuration": True}}}, timeout=120)
        await self.server.notify("initialized", {})

    async def warm_up(self) -> None:
        """tabby-agent answers nothing until it has reached its server: ask
        until a completion request reaches the shim."""
        deadline = time.monotonic() + 180
        while not self.shim.requests and time.monotonic() < deadline:
            await self.complete(WARM_UP)
            if not self.shim.requests:
                await asyncio.sleep(1)
        if not self.shim.requests:
            raise RuntimeError("tabby-agent sent no completion to the shim within 180 s")
        self.shim.calls.clear()


def tabby_cli() -> Path:
    cli = TABBY_DIR / "node_modules" / "tabby-agent" / "dist" / "cli.js"
    if not cli.exists():
        TABBY_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.check_call(["npm", "install", "--no-audit", "--no-fund", "--prefix",
                               str(TABBY_DIR), f"tabby-agent@{TABBY_VERSION}"])
    return cli


def tabby_home(shim_url: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix="tabby-home-"))
    config = home / ".tabby-client" / "agent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[server]\nendpoint = "{shim_url}"\ntoken = "bench"\n'
                      f"requestTimeout = {int(REQUEST_TIMEOUT_S * 1000)}\n\n"
                      "[anonymousUsageTracking]\ndisable = true\n")
    return home


async def run_interleaved(tasks: Sequence[Task], clients: Sequence[Client],
                          problems: Sequence[Problem], engine_name: str,
                          log: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every task to every client in turn, so a busy host's load swings fall on
    both alike. The first client alternates within each kind of hole: the
    engine's prompt cache serves the second client the prompt prefix the first
    one just sent, and with the kinds interleaved a plain alternation would put
    the same client first on every hole of a kind. Each completion is judged
    at once and, with `log`, appended to it as a JSON line (a cut-short run
    keeps what it measured)."""
    rows: dict[str, list[dict[str, Any]]] = {c.name: [] for c in clients}
    seen: dict[str, int] = {}
    try:
        for client in clients:
            await client.start()
            await client.warm_up()
        for index, task in enumerate(tasks):
            turn = seen[task.kind] = seen.get(task.kind, -1) + 1
            order = list(clients) if turn % 2 == 0 else list(reversed(clients))
            for client in order:
                row = await client.complete(task)
                judge([row], problems)
                row["first"] = client is order[0]
                rows[client.name].append(row)
                print(f"  [{index + 1}/{len(tasks)}] {client.name:<8} {task.id:<22} "
                      f"{'P' if row['passed'] else '.'} {row['latency_ms'] / 1000:6.1f} s "
                      f"{row['error'][:60]}", file=sys.stderr, flush=True)
                if log is not None:
                    with log.open("a") as out:
                        out.write(json.dumps(_public(engine_name, client.name, row)) + "\n")
    finally:
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()
    return rows


# --------------------------------------------------------------------------- scoring


def _public(engine_name: str, client: str, row: dict[str, Any]) -> dict[str, Any]:
    return {"engine": engine_name, "client": client, "id": row["task"].id,
            "kind": row["task"].kind, "completion": row["completion"],
            "passed": row["passed"], "latency_ms": round(row["latency_ms"]),
            "error": row["error"], "first": row["first"]}


def _offset(text: str, position: dict[str, int]) -> int:
    start = 0
    for _ in range(position["line"]):
        start = text.index("\n", start) + 1
    return start + position["character"]  # HumanEval's code is ASCII


def filled_program(problem: Problem, row: dict[str, Any]) -> str:
    task: Task = row["task"]
    start = end = task.offset
    if row["range"]:
        start, end = _offset(task.text, row["range"]["start"]), _offset(task.text,
                                                                        row["range"]["end"])
    filled = task.text[:start] + row["completion"] + task.text[end:]
    return f"{filled}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"


def judge(rows: list[dict[str, Any]], problems: Sequence[Problem]) -> None:
    for row in rows:
        result = run_program(filled_program(problem_of(row["task"], problems), row))
        row["passed"] = result.passed


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("single", "multi", "all"):
        chosen = [r for r in rows if kind in ("all", r["task"].kind)]
        if not chosen:
            continue
        out[kind] = {"tasks": len(chosen),
                     "pass_at_1": round(sum(r["passed"] for r in chosen) / len(chosen), 3),
                     "empty": sum(1 for r in chosen if not r["completion"].strip()),
                     "errors": sum(1 for r in chosen if r["error"]),
                     "p50_ms": round(statistics.median(r["latency_ms"] for r in chosen))}
        first = [r["latency_ms"] for r in chosen if r["first"]]
        if first:  # asked first: no prompt prefix left in the engine's cache by the other client
            out[kind]["p50_first_ms"] = round(statistics.median(first))
    return out


def markdown(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = ["| engine | client | pass@1 single | pass@1 multi | pass@1 all "
             "| p50 all (single / multi) | p50 asked first | empty |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def share(t: dict[str, Any]) -> str:
        return (f"{t.get('pass_at_1', 0):.3f} "
                f"({round(t.get('pass_at_1', 0) * t.get('tasks', 0))}/{t.get('tasks', 0)})")

    def secs(t: dict[str, Any], key: str = "p50_ms") -> str:
        return f"{t[key] / 1000:.1f}" if key in t else "-"

    for engine_name, clients in results.items():
        for client, t in clients.items():
            single, multi, both = t.get("single", {}), t.get("multi", {}), t["all"]
            lines.append(
                f"| {engine_name} | {client} | {share(single)} | {share(multi)} | "
                f"{both['pass_at_1']:.3f} | {secs(both)} s ({secs(single)} / {secs(multi)}) | "
                f"{secs(both, 'p50_first_ms')} s | {both['empty']} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def interleave(first: Sequence[Task], second: Sequence[Task]) -> list[Task]:
    """Single- and multi-line holes alternating, so a run cut short has both."""
    out: list[Task] = []
    for index in range(max(len(first), len(second))):
        out.extend(group[index] for group in (first, second) if index < len(group))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF (Qwen2.5-Coder)")
    parser.add_argument("--engine", action="append", default=[],
                        help="llama-server, llama-cpp-python, embedded (repeatable)")
    parser.add_argument("--clients", default="agentls,tabby")
    parser.add_argument("--single", type=int, default=24)
    parser.add_argument("--multi", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="engine threads (default 2)")
    parser.add_argument("--json", type=Path, help="write every completion and the totals")
    parser.add_argument("--log", type=Path, help="append each judged completion (JSON lines)")
    args = parser.parse_args(argv)
    engines = args.engine or ["llama-cpp-python"]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    problems = load_problems()
    singles = cut_holes(problems, count=args.single, seed=args.seed, kinds=["single"])
    multis = cut_holes(problems, count=args.multi, seed=args.seed, kinds=["multi"])
    tasks = interleave(singles, multis)
    logs = Path(tempfile.mkdtemp(prefix="bench-vs-tabby-"))
    results: dict[str, dict[str, dict[str, Any]]] = {}
    dump: list[dict[str, Any]] = []
    for engine_name in engines:
        results[engine_name] = {}
        with engine(engine_name, args.model, logs / f"{engine_name}.log", args.threads) as url:
            with Shim((url or "") + "/v1", model=MODEL_ALIAS) as shim:
                chosen: list[Client] = []
                if "agentls" in clients:
                    chosen.append(Agentls(url, args.model, logs / "home"))
                if "tabby" in clients and url is not None:
                    chosen.append(Tabby(shim))
                print(f"{engine_name}: {len(tasks)} tasks x {[c.name for c in chosen]}",
                      file=sys.stderr, flush=True)
                per_client = asyncio.run(run_interleaved(tasks, chosen, problems,
                                                         engine_name, args.log))
        for client, rows in per_client.items():
            results[engine_name][client] = totals(rows)
            print(f"  {engine_name} / {client}: {json.dumps(results[engine_name][client])}",
                  file=sys.stderr, flush=True)
            dump.extend(_public(engine_name, client, r) for r in rows)
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "tasks": dump}, indent=1))
    print(f"engine logs: {logs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
