"""The typing replay: what a user waits for while typing real code.

Real lines of code agentls did not write (modules of installed packages,
chosen by seed) are typed into the real server over LSP at a human rate,
each keystroke a `didChange` and an automatic `textDocument/inlineCompletion`
(triggerKind 2), the previous request cancelled with `$/cancelRequest`, as
VS Code does. At each word boundary the typist pauses and waits up to
`--pause-wait` seconds for the answer to the last keystroke.

Per pause: the time from the last keystroke to the answer, whether it was
empty, and whether it was useful (its first line is what the user types
next on that line, or the start of it). Accepted characters per minute of
typing counts the useful suggestions' characters that the user then typed.

The engine's own counters (the embedded model's child, GET
/agentls/engine, found through agentls/status) give, per request, the
prompt tokens llama.cpp evaluated after its prompt cache, the tokens it
generated, the time in decode, and whether the request ran to its end,
was stopped when superseded, or never started. A server without them
(another provider, an older agentls) prints "n/a" there.

Usage: python bench/bench_typing.py [--cps 8] [--lines 6] [--seed 1]
       [--pause-wait 15] [--settings '{"provider": "local"}']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_inline import Client

# Modules of packages agentls installs, typed as found on this machine.
MODULES = ("httpx._models", "httpx._urls", "anyio._core._fileio", "pygls.workspace.text_document",
           "pathspec.pattern", "platformdirs.unix")
WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def module_text(name: str) -> tuple[str, str]:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"bench_typing: module {name} is not installed")
    return spec.origin, Path(spec.origin).read_text()


def pick_lines(text: str, count: int, rng: random.Random) -> list[int]:
    """Code lines worth typing: 16+ characters after the indentation, not a
    comment, a docstring line or a decorator, after the first 30 lines."""
    lines = text.split("\n")
    candidates = []
    in_doc = False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.count('"""') % 2 == 1 or stripped.count("'''") % 2 == 1:
            in_doc = not in_doc
            continue
        if in_doc or number < 30 or len(stripped) < 16 or len(stripped) > 90:
            continue
        if stripped.startswith(("#", "@", '"', "'")):
            continue
        candidates.append(number)
    return sorted(rng.sample(candidates, min(count, len(candidates))))


def useful(suggestion: str, rest: str) -> bool:
    """The suggestion's first line is what the user types next on the line
    (all of the rest, or a start of it of at least 3 characters)."""
    first = suggestion.split("\n", 1)[0].rstrip()
    if not first or not rest:
        return False
    return rest.startswith(first) and (len(first) >= 3 or first == rest)


def engine_url(status: dict[str, Any]) -> str | None:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "engineCounters" and isinstance(inner, str):
                    found.append(inner)
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(status)
    return found[0] if found else None


async def engine_records(client: Client) -> list[dict[str, Any]] | None:
    answer = await client.request("agentls/status", {})
    url = engine_url(answer.get("result") or {})
    if url is None:
        return None
    async with httpx.AsyncClient(timeout=10) as http:
        return list((await http.get(url)).json()["requests"])


def items_text(message: dict[str, Any]) -> str | None:
    """The first item's text; None for an error or a cancelled request."""
    if "error" in message:
        return None
    result = message.get("result")
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    if not items:
        return ""
    text = items[0].get("insertText", "")
    return text if isinstance(text, str) else text.get("value", "")


async def type_line(client: Client, uri: str, version: int, line: int, indent: str, code: str,
                    cps: float, pause_wait: float, pauses: list[dict[str, Any]]) -> int:
    pending: tuple[int, asyncio.Future[dict[str, Any]]] | None = None
    typed = ""
    for index, char in enumerate(code):
        column = len(indent) + len(typed)
        version += 1
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": column},
                                          "end": {"line": line, "character": column}},
                                "text": char}]})
        typed += char
        if pending is not None and not pending[1].done():
            client.notify("$/cancelRequest", {"id": pending[0]})
        future = client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": column + 1},
            "context": {"triggerKind": 2}})
        pending = (client.next_id, future)
        keyed = time.perf_counter()
        at_boundary = char in WORD and (index + 1 == len(code) or code[index + 1] not in WORD)
        if at_boundary and index + 1 < len(code):
            rest = code[index + 1:]
            try:
                message = await asyncio.wait_for(asyncio.shield(future), pause_wait)
                waited = time.perf_counter() - keyed
                text = items_text(message)
            except TimeoutError:
                waited, text = None, None
            pauses.append({"line": line, "typed": typed, "seconds": waited,
                           "empty": text == "", "answered": text is not None,
                           "useful": text is not None and useful(text, rest),
                           "useful_chars": len(text.split("\n", 1)[0].rstrip())
                           if text and useful(text, rest) else 0})
        await asyncio.sleep(1 / cps)
    if pending is not None and not pending[1].done():
        client.notify("$/cancelRequest", {"id": pending[0]})
    return version


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="agentls-typing-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env.update(AGENTLS_CONFIG_FILE="/nonexistent/agentls.toml",
               AGENTLS_STATE_DIR=str(workdir / "state"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", "--stdio",
        *(["--log-file", args.log_file] if args.log_file else []), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    settings = json.loads(args.settings)
    await client.request("initialize", {"processId": None, "rootUri": workdir.as_uri(),
                                        "capabilities": {},
                                        "initializationOptions": {"agentls": settings}})
    client.notify("initialized", {})
    pauses: list[dict[str, Any]] = []
    typing_seconds = 0.0
    chosen = rng.sample(MODULES, min(args.modules, len(MODULES)))
    try:
        # Warm: the model loads and answers once before anything is measured.
        _, text = module_text(chosen[0])
        warm_uri = (workdir / "warm.py").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": warm_uri, "languageId": "python", "version": 1, "text": text}})
        await asyncio.wait_for(client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": warm_uri}, "position": {"line": 40, "character": 0},
            "context": {"triggerKind": 1}}), 600)
        before = await engine_records(client)
        seen = max((r["id"] for r in before), default=0) if before else 0
        per_module = max(1, args.lines // len(chosen))
        for number, name in enumerate(chosen):
            _, text = module_text(name)
            lines = text.split("\n")
            for target in pick_lines(text, per_module, rng):
                original = lines[target]
                indent = original[: len(original) - len(original.lstrip())]
                code = original.strip()
                lines_now = list(lines)
                lines_now[target] = indent
                uri = (workdir / f"m{number}_{target}.py").as_uri()
                client.notify("textDocument/didOpen", {"textDocument": {
                    "uri": uri, "languageId": "python", "version": 1,
                    "text": "\n".join(lines_now)}})
                started = time.perf_counter()
                await type_line(client, uri, 1, target, indent, code, args.cps, args.pause_wait,
                                pauses)
                typing_seconds += time.perf_counter() - started
                client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        await asyncio.sleep(1.0)  # the last cancelled request's record settles
        after = await engine_records(client)
    finally:
        proc.terminate()
        await proc.wait()
    report(args, chosen, pauses, typing_seconds, after, seen if before is not None else None)


def report(args: argparse.Namespace, modules: list[str], pauses: list[dict[str, Any]],
           typing_seconds: float, records: list[dict[str, Any]] | None, seen: int | None) -> None:
    answered = [p for p in pauses if p["answered"] and not p["empty"]]
    latencies = [p["seconds"] for p in answered]
    use = [p for p in pauses if p["useful"]]
    print(f"bench_typing: {len(pauses)} pauses over {typing_seconds:.0f} s of typing at "
          f"{args.cps} chars/s, seed {args.seed}, modules {', '.join(modules)}")
    print(f"  settings {args.settings}; pause wait {args.pause_wait} s")
    if latencies:
        print(f"  keystroke -> non-empty suggestion  p50 {statistics.median(latencies):.2f} s  "
              f"p90 {pct(latencies, 0.9):.2f} s  ({len(answered)} of {len(pauses)} pauses)")
    else:
        print(f"  keystroke -> non-empty suggestion  none in {len(pauses)} pauses")
    print(f"  empty answers {sum(p['empty'] for p in pauses)}, no answer within the wait "
          f"{sum(not p['answered'] for p in pauses)}, useful {len(use)} of {len(pauses)}")
    minutes = typing_seconds / 60 or 1
    print(f"  accepted characters per minute of typing "
          f"{sum(p['useful_chars'] for p in use) / minutes:.0f}")
    if records is None or seen is None:
        print("  engine counters: n/a (no engineCounters in agentls/status)")
        return
    mine = [r for r in records if r["id"] > seen]
    evaluated = [r["prompt_evaluated"] for r in mine if r["outcome"] != "skipped"]
    outcomes = {k: sum(r["outcome"] == k for r in mine) for k in ("done", "stopped", "skipped")}
    engine_s = sum(r["eval_ms"] for r in mine) / 1000
    print(f"  engine: {len(mine)} requests reached it ({outcomes['done']} ran to the end, "
          f"{outcomes['stopped']} stopped when superseded, {outcomes['skipped']} never started); "
          f"{engine_s:.1f} s in decode, {engine_s / max(1, len(use)):.1f} s per useful suggestion")
    if evaluated:
        print(f"  prompt tokens evaluated per request (after the prompt cache): p50 "
              f"{statistics.median(evaluated):.0f}  p90 {pct(evaluated, 0.9):.0f}  "
              f"max {max(evaluated)}; generated p50 "
              f"{statistics.median([r['generated'] for r in mine]):.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"pauses": pauses, "engine": mine}, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cps", type=float, default=8.0, help="characters per second")
    parser.add_argument("--lines", type=int, default=6, help="lines typed in all")
    parser.add_argument("--modules", type=int, default=3, help="modules the lines come from")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pause-wait", type=float, default=15.0)
    parser.add_argument("--settings", default='{"provider": "local"}',
                        help="agentls settings (initializationOptions) as JSON")
    parser.add_argument("--json", help="write every pause and engine record here")
    parser.add_argument("--log-file", help="the server's log (its --log-file)")
    asyncio.run(main(parser.parse_args()))
