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

Other rows (bench/typing_peers.py, bench/README.md "Typing replay"):
`--engine llama-server|llama-cpp-python` (agentls on that server through
the `openai` provider; `--cache-reuse N` for llama-server), `--client tabby`
(tabby-agent 1.5.0 on bench/tabby_shim.py), `--floor RUN.json` (the engine
alone, prompt cached: bench/typing_floor.py), `--beside-agent` (an agent
turn on the 1.5B in another agentls process during the replay).

Usage: python bench/bench_typing.py [--cps 8] [--lines 6] [--seed 1]
       [--pause-wait 15] [--settings '{"provider": "local"}']
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from bench_vs_tabby import MODEL_ALIAS
from tabby_shim import Shim
from typing_peers import (
    AGENTLS,
    ENGINES,
    MODEL,
    TABBY,
    Peer,
    agentls_on,
    engine,
    llama_server_records,
    pct,
    report_llama_server,
    report_shim,
    start_tabby,
    warm_tabby,
)

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


async def type_line(client: Client, peer: Peer, uri: str, version: int, line: int, indent: str,
                    code: str, cps: float, pause_wait: float,
                    pauses: list[dict[str, Any]]) -> int:
    pending: tuple[int, asyncio.Future[dict[str, Any]]] | None = None
    typed = ""
    for index, char in enumerate(code):
        column = len(indent) + len(typed)
        version += 1
        keyed_at = time.time()
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": column},
                                          "end": {"line": line, "character": column}},
                                "text": char}]})
        typed += char
        if pending is not None and not pending[1].done():
            client.notify("$/cancelRequest", {"id": pending[0]})
        future = client.request(peer.method, {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": column + 1},
            "context": {"triggerKind": peer.trigger_kind}})
        pending = (client.next_id, future)
        keyed = time.perf_counter()
        at_boundary = char in WORD and (index + 1 == len(code) or code[index + 1] not in WORD)
        if at_boundary and index + 1 < len(code):
            rest = code[index + 1:]
            try:
                message = await asyncio.wait_for(asyncio.shield(future), pause_wait)
                waited = time.perf_counter() - keyed
                text = peer.text(message, column + 1)
            except TimeoutError:
                waited, text = None, None
            pauses.append({"line": line, "typed": typed, "seconds": waited,
                           "empty": text == "", "answered": text is not None,
                           "useful": text is not None and useful(text, rest),
                           "useful_chars": len(text.split("\n", 1)[0].rstrip())
                           if text and useful(text, rest) else 0,
                           "keyed_at": keyed_at, "suggestion": text})
        await asyncio.sleep(1 / cps)
    if pending is not None and not pending[1].done():
        client.notify("$/cancelRequest", {"id": pending[0]})
    return version


# For --floor: the server records each FIM prompt its local provider renders
# (build_fim_prompt, providers/fim/templates.py), one JSON line with the time.
RECORDING = """
import json, sys, time
path = sys.argv.pop(1)
import agentls.providers.local.provider as local
rendered = local.build_fim_prompt
def recorded(tokens, prefix, suffix):
    prompt = rendered(tokens, prefix, suffix)
    with open(path, "a") as out:
        out.write(json.dumps({"t": time.time(), "prompt": prompt}) + "\\n")
    return prompt
local.build_fim_prompt = recorded
from agentls.cli import main
sys.exit(main())
"""
BESIDE_MODEL = MODEL.with_name("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
# A turn that decodes for minutes (the replay's length), not one that ends early.
BESIDE_PROMPT = ("Read inventory.py, then write a long, detailed tutorial on the Inventory "
                 "class: every method, its edge cases, and many usage examples.")


async def start_agentls(args: argparse.Namespace, workdir: Path, settings: dict[str, Any],
                        prompts: Path | None) -> tuple[asyncio.subprocess.Process, Client]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env.update(AGENTLS_CONFIG_FILE="/nonexistent/agentls.toml",
               AGENTLS_STATE_DIR=str(workdir / "state"))
    head = ([sys.executable, "-c", RECORDING, str(prompts)] if prompts is not None
            else [sys.executable, "-m", "agentls"])
    proc = await asyncio.create_subprocess_exec(
        *head, "--stdio", *(["--log-file", args.log_file] if args.log_file else []),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    await client.request("initialize", {"processId": None, "rootUri": workdir.as_uri(),
                                        "capabilities": {},
                                        "initializationOptions": {"agentls": settings}})
    client.notify("initialized", {})
    return proc, client


def prompt_of(pause: dict[str, Any], indent: str, prompts: list[dict[str, Any]]) -> str | None:
    """The prompt rendered for the pause's keystroke: the first recorded after
    it whose prefix ends at the cursor (none: answered from the type-ahead
    cache). The code typed on the cursor's line is after the middle token."""
    seconds = pause["seconds"] or 0.0
    for record in prompts:
        head, _, rest = str(record["prompt"]).partition("<|fim_suffix|>")
        before_cursor = head + rest.rpartition("<|fim_middle|>")[2]
        if pause["keyed_at"] <= record["t"] <= pause["keyed_at"] + seconds + 0.5 and \
                before_cursor.endswith(indent + pause["typed"]):
            return str(record["prompt"])
    return None


async def main(args: argparse.Namespace) -> None:
    if args.floor:
        from typing_floor import run_floor

        run_floor(Path(args.floor), args.model, args.threads)
        return
    engine_name = args.engine or ("llama-cpp-python" if args.client == "tabby" else "embedded")
    if args.client == "tabby" and engine_name == "embedded":
        raise SystemExit("bench_typing: --client tabby needs a server engine "
                         "(--engine llama-cpp-python or llama-server)")
    workdir = Path(tempfile.mkdtemp(prefix="agentls-typing-"))
    engine_log = workdir / f"{engine_name}.log"
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(engine(engine_name, args.model, engine_log, args.threads,
                                         args.cache_reuse))
        shim: Shim | None = None
        settings = json.loads(args.settings)
        prompts = (workdir / "prompts.jsonl"
                   if args.json and args.client == "agentls" and url is None else None)
        if args.client == "tabby":
            assert url is not None
            shim = stack.enter_context(Shim(url + "/v1", model=MODEL_ALIAS, stop_when_gone=True))
            proc, client = await start_tabby(shim, workdir)
            label = f"client {TABBY.name} (its own debounce) on bench/tabby_shim.py, " \
                    f"engine {engine_name}"
        else:
            if url is not None:
                settings = agentls_on(url, settings)
            proc, client = await start_agentls(args, workdir, settings, prompts)
            label = f"settings {args.settings if url is None else json.dumps(settings)}" + \
                    ("" if url is None else f", engine {engine_name}"
                     f"{f' --cache-reuse {args.cache_reuse}' if args.cache_reuse else ''}")
        try:
            await replay(args, workdir, client, TABBY if shim is not None else AGENTLS, shim,
                         engine_log if engine_name == "llama-server" else None, label,
                         prompts)
        finally:
            proc.terminate()
            await proc.wait()


async def replay(args: argparse.Namespace, workdir: Path, client: Client, peer: Peer,
                 shim: Shim | None, engine_log: Path | None, label: str,
                 prompts: Path | None) -> None:
    rng = random.Random(args.seed)
    pauses: list[dict[str, Any]] = []
    indents: list[str] = []
    typing_seconds = 0.0
    chosen = rng.sample(MODULES, min(args.modules, len(MODULES)))
    beside: asyncio.subprocess.Process | None = None
    # Warm: the model loads and answers once before anything is measured.
    _, text = module_text(chosen[0])
    warm_uri = (workdir / "warm.py").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": warm_uri, "languageId": "python", "version": 1, "text": text}})
    if shim is not None:
        await warm_tabby(client, shim, warm_uri)
    else:
        await asyncio.wait_for(client.request(peer.method, {
            "textDocument": {"uri": warm_uri}, "position": {"line": 40, "character": 0},
            "context": {"triggerKind": 1}}), 600)
    before = await engine_records(client) if shim is None else None
    seen = max((r["id"] for r in before), default=0) if before else 0
    logged = log_size(engine_log)
    if args.beside_agent:  # its own process, its own engine child: they share the cores
        # The same model-sharing and priority settings as the typing window's.
        typing_settings = json.loads(args.settings)
        shared = {key: typing_settings[key] for key in ("local", "providerOptions")
                  if key in typing_settings}
        beside = await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).parent / "bench_agent_real.py"),
            str(BESIDE_MODEL), "--prompt", BESIDE_PROMPT, "--settings", json.dumps(shared),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    beside_started = time.perf_counter()
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
            if args.think:  # the cursor rests on the line before the first key
                if peer is AGENTLS:  # what agentls's editor plugins send (docs/protocol.md)
                    client.notify("agentls/didMoveCursor", {
                        "textDocument": {"uri": uri},
                        "position": {"line": target, "character": len(indent)}})
                await asyncio.sleep(args.think)
            started = time.perf_counter()
            count = len(pauses)
            await type_line(client, peer, uri, 1, target, indent, code, args.cps,
                            args.pause_wait, pauses)
            indents.extend([indent] * (len(pauses) - count))
            typing_seconds += time.perf_counter() - started
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    await asyncio.sleep(1.0)  # the last cancelled request's record settles
    beside_note = None
    if beside is not None:
        beside_note = await beside_done(beside, time.perf_counter() - beside_started)
    if prompts is not None:
        recorded = json_lines(prompts)
        for pause, indent in zip(pauses, indents, strict=True):
            pause["prompt"] = prompt_of(pause, indent, recorded) if pause["answered"] else None
    after = await engine_records(client) if shim is None else None
    records = (llama_server_records(log_after(engine_log, logged))
               if engine_log is not None else None)
    report(args, label, chosen, pauses, typing_seconds, after,
           seen if before is not None else None, shim, records, beside_note)


def log_size(log: Path | None) -> int:
    return log.stat().st_size if log is not None and log.exists() else 0


def log_after(log: Path, offset: int) -> str:
    return log.read_bytes()[offset:].decode(errors="replace")


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def beside_done(proc: asyncio.subprocess.Process, replay_seconds: float) -> str:
    """How the agent turn beside the replay went (stopped if still running)."""
    if proc.returncode is None:
        proc.terminate()
        await proc.wait()
        return f"the agent turn beside was still running after {replay_seconds:.0f} s (stopped)"
    assert proc.stdout is not None
    out = (await proc.stdout.read()).decode(errors="replace")
    found = out[out.rfind("\n{"):] if "\n{" in out else ""
    try:
        summary = json.loads(found)
        return (f"the agent turn beside ({BESIDE_MODEL.name}) ended {summary['status']} in "
                f"{summary['seconds']} s, {summary['model_calls']} model calls")
    except (ValueError, KeyError):
        return f"the agent turn beside exited with {proc.returncode}"


def report(args: argparse.Namespace, label: str, modules: list[str],
           pauses: list[dict[str, Any]], typing_seconds: float,
           records: list[dict[str, Any]] | None, seen: int | None, shim: Shim | None,
           server_records: list[dict[str, Any]] | None, beside: str | None) -> None:
    answered = [p for p in pauses if p["answered"] and not p["empty"]]
    latencies = [p["seconds"] for p in answered]
    use = [p for p in pauses if p["useful"]]
    print(f"bench_typing: {len(pauses)} pauses over {typing_seconds:.0f} s of typing at "
          f"{args.cps} chars/s, seed {args.seed}, modules {', '.join(modules)}")
    print(f"  {label}; pause wait {args.pause_wait} s; the cursor rests {args.think} s "
          "on each line before its first key")
    if beside is not None:
        print(f"  {beside}")
    if latencies:
        print(f"  keystroke -> non-empty suggestion  p50 {statistics.median(latencies):.2f} s  "
              f"p90 {pct(latencies, 0.9):.2f} s  ({len(answered)} of {len(pauses)} pauses)")
    else:
        print(f"  keystroke -> non-empty suggestion  none in {len(pauses)} pauses")
    # Every pause, one left without a suggestion counted as the whole wait:
    # the rows above leave those out, which flatters a run that answers fewer.
    waits = [p["seconds"] if p["answered"] and not p["empty"] else args.pause_wait
             for p in pauses]
    lines: dict[int, list[float]] = {}
    for pause, wait in zip(pauses, waits, strict=True):
        lines.setdefault(pause["line"], []).append(wait)
    firsts = [f"{waited[0]:.2f}" for waited in lines.values()]
    mid = [wait for waited in lines.values() for wait in waited[1:]]
    if waits:
        print(f"  every pause (unanswered = {args.pause_wait:g} s)  "
              f"p50 {statistics.median(waits):.2f} s  p90 {pct(waits, 0.9):.2f} s; "
              f"first key of each line {', '.join(firsts)} s"
              + (f"; the others p90 {pct(mid, 0.9):.2f} s, max {max(mid):.2f} s" if mid else ""))
    print(f"  empty answers {sum(p['empty'] for p in pauses)}, no answer within the wait "
          f"{sum(not p['answered'] for p in pauses)}, useful {len(use)} of {len(pauses)}")
    minutes = typing_seconds / 60 or 1
    print(f"  accepted characters per minute of typing "
          f"{sum(p['useful_chars'] for p in use) / minutes:.0f}")
    dump: dict[str, Any] = {"label": label, "pauses": pauses}
    try:
        if shim is not None:
            report_shim(shim.calls, args.engine or "llama-cpp-python")
            dump["engine"] = shim.calls
        elif server_records is not None:
            report_llama_server(server_records, len(use))
            dump["engine"] = server_records
        elif args.engine == "llama-cpp-python":
            print("  engine counters: n/a (llama-cpp-python's server keeps none)")
        elif records is None or seen is None:
            print("  engine counters: n/a (no engineCounters in agentls/status)")
        else:
            dump["engine"] = report_embedded(records, seen, len(use))
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(dump, indent=1))


def report_embedded(records: list[dict[str, Any]], seen: int, useful: int) -> list[dict[str, Any]]:
    ours = [r for r in records if r["id"] > seen]
    # Background requests here are the warm-ups at a resting cursor (--think).
    warm = [r for r in ours if r.get("background")]
    mine = [r for r in ours if not r.get("background")]
    if warm:
        warm_evaluated = statistics.median(r["prompt_evaluated"] for r in warm)
        print(f"  warm-ups at the resting cursor: {len(warm)} ("
              f"{sum(r['outcome'] == 'preempted' for r in warm)} preempted by a keystroke), "
              f"prompt tokens evaluated p50 {warm_evaluated:.0f}, "
              f"{sum(r['eval_ms'] for r in warm) / 1000:.1f} s in decode")
    evaluated = [r["prompt_evaluated"] for r in mine if r["outcome"] != "skipped"]
    outcomes = {k: sum(r["outcome"] == k for r in mine) for k in ("done", "stopped", "skipped")}
    engine_s = sum(r["eval_ms"] for r in mine) / 1000
    print(f"  engine: {len(mine)} requests reached it ({outcomes['done']} ran to the end, "
          f"{outcomes['stopped']} stopped when superseded, {outcomes['skipped']} never started); "
          f"{engine_s:.1f} s in decode, {engine_s / max(1, useful):.1f} s per useful suggestion")
    if evaluated:
        print(f"  prompt tokens evaluated per request (after the prompt cache): p50 "
              f"{statistics.median(evaluated):.0f}  p90 {pct(evaluated, 0.9):.0f}  "
              f"max {max(evaluated)}; generated p50 "
              f"{statistics.median([r['generated'] for r in mine]):.0f}")
    return ours


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cps", type=float, default=8.0, help="characters per second")
    parser.add_argument("--lines", type=int, default=6, help="lines typed in all")
    parser.add_argument("--modules", type=int, default=3, help="modules the lines come from")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pause-wait", type=float, default=15.0)
    parser.add_argument("--think", type=float, default=0.0, metavar="SECONDS",
                        help="the cursor rests on each line this long before its first key "
                             "(agentls is told where, as its editor plugins tell it)")
    parser.add_argument("--settings", default='{"provider": "local"}',
                        help="agentls settings (initializationOptions) as JSON")
    parser.add_argument("--json", help="write every pause and engine record here (with the "
                                       "embedded engine, each pause's rendered prompt too)")
    parser.add_argument("--log-file", help="the server's log (its --log-file)")
    parser.add_argument("--client", choices=("agentls", "tabby"), default="agentls")
    parser.add_argument("--engine", choices=ENGINES,
                        help="embedded (agentls's default), llama-server or llama-cpp-python "
                             "(tabby's default)")
    parser.add_argument("--cache-reuse", type=int, default=0,
                        help="llama-server's --cache-reuse N (0: not given)")
    parser.add_argument("--model", default=str(MODEL), help="the GGUF server engines serve")
    parser.add_argument("--threads", type=int, default=2, help="server engine threads")
    parser.add_argument("--floor", metavar="RUN.json",
                        help="no replay: the engine alone on the prompts of an embedded run's "
                             "--json (bench/typing_floor.py)")
    parser.add_argument("--beside-agent", action="store_true",
                        help=f"an agent turn on {BESIDE_MODEL.name} in another process while "
                             "typing")
    asyncio.run(main(parser.parse_args()))
