"""Exercism's Python practice exercises, agentls side by side with Aider on
the same model (not CI; bench/README.md, "Exercism, side by side with Aider").

Aider's benchmark protocol (agentls/eval/exercism/exercises.py): per
exercise a temporary workspace with the stub and the tests (never the
example solution), try 1 = the exercise's docs and a note naming the files,
the tests (pytest, 180 s), and when they fail try 2 = their output and a
note that the tests are correct. Peers:

- agentls: the real server over LSP (agentls/eval/agent/runner.py), its
  default settings with provider `local` (the packaged Qwen2.5-Coder-1.5B in
  its embedded child: `python -m agentls.providers.local serve`);
- agentls-shared (`--peer agentls-shared`): the same server pointed at the
  engine aider uses (provider `openai`, `baseUrl` its /v1): the chat goes
  through llama-cpp-python's /v1/chat/completions and the GGUF's own
  template, as aider's does, and `session.editFormat` is `file-blocks`
  (what `auto` picks for the embedded model; for `openai` it would pick
  tool calls, which that endpoint does not parse for this template);
- aider (`--peer aider`): aider-chat, whole-file edits, against that same
  child started here on a loopback port serving the same GGUF with the same
  n_ctx and threads (an OpenAI-compatible llama-cpp-python server), one
  `aider --message` per try, try 2 with the chat history of try 1. Install
  it in a venv of its own, never in agentls's:
      python3 -m venv ~/aider-venv && ~/aider-venv/bin/pip install aider-chat

Both peers' prompt tokens evaluated, tokens in and out come from the
engine's own counters (GET /agentls/engine), so they are counted alike.

    flock /work/tools/cpu.lock nice .venv/bin/python bench/bench_exercism.py \\
        --exercises /path/to/exercism-python --peer aider --aider ~/aider-venv/bin/aider \\
        --limit 3 --json /tmp/exercism.json

The model's code runs (the tests, confined as agentls eval runs checks;
aider's own lint step, and agentls's run_command when the model asks, are
not): run it where that is acceptable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from agentls.eval.exercism.exercises import (
    DEFAULT_OUTPUT_CHARS,
    DEFAULT_SUBSET,
    TEST_TIME_LIMIT,
    Exercise,
    failure_prompt,
    first_prompt,
    materialize,
    practice_exercises,
    run_tests,
    select_exercises,
)
from agentls.eval.exercism.report import exercise_table, peer_summary, summary_table
from agentls.eval.exercism.runner import (
    DEFAULT_TRIES,
    DEFAULT_TURN_TIME_LIMIT,
    engine_totals,
    exercise_row,
    run_exercise,
)

MODEL_ID = "qwen2.5-coder-1.5b"
AIDER_INSTALL = ("python3 -m venv ~/aider-venv && ~/aider-venv/bin/pip install aider-chat "
                 "(its own venv, never agentls's), then pass --aider ~/aider-venv/bin/aider")
# What Aider prints when a reply is not in its edit format (base_coder.apply_updates).
AIDER_MALFORMED = ("did not conform to the edit format", "Exception while updating files")


def agentls_settings(url: str | None = None, n_ctx: int | None = None) -> dict[str, Any]:
    """The defaults, the packaged local models (or the engine at `url`, whose
    window is `n_ctx`: llama-cpp-python's /v1/models does not report it, and
    the openai provider would assume a small one and compact early); every
    question comes to the bench's editor, which allows it."""
    if url is None:
        return {"provider": "local", "approval": {"mode": "message"}}
    # the engine's secret, read from the env _clean_env hands the server
    return {"provider": "openai", "baseUrl": url + "/v1", "model": MODEL_ID,
            "apiKeyEnv": ENGINE_KEY_ENV,
            "session": {"editFormat": "file-blocks"}, "approval": {"mode": "message"},
            **({"contextWindow": n_ctx} if n_ctx else {})}


def _clean_env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    env[ENGINE_KEY_ENV] = ENGINE_TOKEN
    env["AGENTLS_CONFIG_FILE"] = str(scratch / "no-user-config.toml")  # the defaults
    # The project's environment active, as in a developer's shell: its pytest
    # is the one agentls finds to run the exercise's tests after an edit.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


# --------------------------------------------------------------------------- the engine


# The engine child answers only requests carrying the secret its parent hands
# it (providers/local/worker.py); aider and agentls-shared send it as their key.
ENGINE_TOKEN = secrets.token_urlsafe(24)
ENGINE_KEY_ENV = "BENCH_ENGINE_KEY"


def _authorized(url: str) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {ENGINE_TOKEN}"})


@contextlib.contextmanager
def engine(gguf: Path, *, n_ctx: int, log: Path) -> Iterator[str]:
    """The local provider's own child process serving `gguf` on a loopback
    port (what agentls runs embedded); yields its base URL."""
    from agentls.providers.local.choice import _default_threads
    from agentls.providers.local.process import TOKEN_ENV

    command = [sys.executable, "-m", "agentls.providers.local", "serve", "--model", str(gguf),
               "--alias", MODEL_ID, "--n-ctx", str(n_ctx), "--n-threads",
               str(_default_threads()), "--parent-pid", str(os.getpid())]
    with open(log, "ab") as err:
        # stdin stays open: the child exits when it closes (worker.py)
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env={**os.environ, TOKEN_ENV: ENGINE_TOKEN})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("AGENTLS_LOCAL_READY"):
            raise SystemExit(f"the engine did not start (see {log}): {line!r}")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        deadline = time.monotonic() + 300
        while True:  # the model loads before /v1/models answers
            try:
                with urllib.request.urlopen(_authorized(url + "/v1/models"), timeout=10):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"the engine at {url} did not answer (see {log})") from None
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def engine_records(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(_authorized(url + "/agentls/engine"), timeout=10) as reply:
        return list(json.loads(reply.read()).get("requests") or ())


# --------------------------------------------------------------------------- aider


def aider_command(aider: str, url: str, workspace: Path, scratch: Path, message: str,
                  files: Sequence[str], *, restore: bool, auto_test: str | None) -> list[str]:
    """One try: Aider's whole-file format on the bench's engine, no git, no
    repository map, every question answered yes, the chat of earlier tries
    restored."""
    command = [
        aider, "--model", f"openai/{MODEL_ID}", "--openai-api-base", url + "/v1",
        "--edit-format", "whole",
        "--no-auto-commits", "--yes-always", "--no-git", "--no-gitignore", "--map-tokens", "0",
        "--no-pretty", "--no-stream", "--no-fancy-input", "--no-show-model-warnings",
        "--no-check-update", "--no-show-release-notes", "--no-analytics",
        "--no-detect-urls", "--no-suggest-shell-commands",
        "--chat-history-file", str(scratch / "chat.history.md"),
        "--input-history-file", str(scratch / "input.history"),
        "--llm-history-file", str(scratch / "llm.history"),
        "--restore-chat-history" if restore else "--no-restore-chat-history",
    ]
    if auto_test:
        command += ["--auto-test", "--test-cmd", auto_test]
    # A message starting with / or ! is a command to aider's CLI (its
    # benchmark calls the coder with that parsing off).
    if message[:1] in ("/", "!"):
        message = " " + message
    return [*command, "--message", message, *files]


def run_aider_exercise(exercise: Exercise, aider: str, url: str, *, tries: int,
                       turn_time_limit: float, test_time_limit: float, output_chars: int,
                       auto_test: bool) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="agentls-exercism-aider-"))
    workspace = scratch / exercise.name
    workspace.mkdir()
    materialize(exercise, workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AIDER_"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no model list from the network
    env["OPENAI_API_KEY"] = ENGINE_TOKEN  # in the env: a command line is public
    test_cmd = f"{sys.executable} -m pytest -p no:cacheprovider" if auto_test else None
    seen = {r["id"] for r in engine_records(url)}
    rows: list[dict[str, Any]] = []
    message = first_prompt(exercise)
    error = ""
    try:
        for n in range(tries):
            command = aider_command(aider, url, workspace, scratch, message,
                                    list(exercise.solution), restore=n > 0,
                                    auto_test=test_cmd)
            started = time.perf_counter()
            try:
                done = subprocess.run(command, cwd=workspace, env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, errors="replace",
                                      timeout=turn_time_limit, check=False)
                output, timed_out = done.stdout + done.stderr, False
            except subprocess.TimeoutExpired as exc:  # its output comes as bytes here
                output = "".join(part.decode("utf-8", "replace") if isinstance(part, bytes)
                                 else part or "" for part in (exc.stdout, exc.stderr))
                timed_out = True
            seconds = time.perf_counter() - started
            test = run_tests(exercise, workspace, time_limit=test_time_limit)
            rows.append({
                "passed": test.passed, "test_status": test.status,
                "test_output": test.output[-1500:], "seconds": round(seconds, 1),
                "timed_out": timed_out,
                "malformed": [m for m in AIDER_MALFORMED if m in output],
                "aider_output": output[-3000:],
            })
            if test.passed:
                break
            message = failure_prompt(exercise, test.output, output_chars)
    except OSError as exc:
        error = f"aider did not run: {exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    calls = [r for r in engine_records(url) if r["id"] not in seen]
    return exercise_row("aider", exercise, rows, calls, error)


# --------------------------------------------------------------------------- main


def _progress(done: int, total: int, row: dict[str, Any]) -> None:
    tries = " ".join("pass" if t["passed"] else "fail" for t in row["tries"])
    print(f"[{done}/{total}] {row['peer']} {row['exercise']}: {tries or '-'} "
          f"{row['seconds']:.0f} s, {row.get('engine_calls', 0)} calls, "
          f"{'well-formed' if row['well_formed'] else 'MALFORMED'}"
          f"{'  ' + row['error'][:120] if row['error'] else ''}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercises", type=Path, required=True,
                        help="a checkout of github.com/exercism/python (nothing is downloaded)")
    parser.add_argument("--seed", type=int, default=1, help="draws the subset (default 1)")
    parser.add_argument("--limit", type=int, help="run only the first N of the subset")
    parser.add_argument("--all", action="store_true", help="every practice exercise")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="of the subset, only this exercise (repeatable)")
    parser.add_argument("--peer", action="append", choices=["aider", "agentls-shared"],
                        default=[],
                        help="also run this peer on the same exercises")
    parser.add_argument("--no-agentls", action="store_true", help="run only the peers")
    parser.add_argument("--aider", help="the aider executable (default: aider on PATH)")
    parser.add_argument("--aider-auto-test", action="store_true",
                        help="also let aider run the tests itself after each edit and "
                             "retry (up to 3 more calls per try; not Aider's benchmark)")
    parser.add_argument("--model", type=Path,
                        help=f"the GGUF for aider's engine (default: the packaged {MODEL_ID})")
    parser.add_argument("--n-ctx", type=int, default=8192,
                        help="aider's engine context (default 8192, the catalog's for the 1.5B)")
    parser.add_argument("--tries", type=int, default=DEFAULT_TRIES)
    parser.add_argument("--turn-time-limit", type=float, default=DEFAULT_TURN_TIME_LIMIT)
    parser.add_argument("--test-time-limit", type=float, default=TEST_TIME_LIMIT)
    parser.add_argument("--test-output-chars", type=int, default=DEFAULT_OUTPUT_CHARS,
                        help="test output sent back in try 2 (0: all of it, as Aider does)")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    try:
        chosen = select_exercises(practice_exercises(args.exercises), seed=args.seed,
                                  count=DEFAULT_SUBSET, limit=args.limit, everything=args.all)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {e.name for e in chosen})
        if unknown:
            print(f"--only {', '.join(unknown)}: not in the subset "
                  f"({', '.join(e.name for e in chosen)})", file=sys.stderr)
            return 2
        chosen = [e for e in chosen if e.name in args.only]
    aider = None
    if "aider" in args.peer:
        aider = args.aider or shutil.which("aider")
        if not aider or not Path(aider).exists():
            print(f"--peer aider: no aider executable ({args.aider or 'none on PATH'}); "
                  f"install it: {AIDER_INSTALL}", file=sys.stderr)
            return 2
    print("exercises: " + ", ".join(e.name for e in chosen), file=sys.stderr, flush=True)
    rows: list[dict[str, Any]] = []
    shared = "agentls-shared" in args.peer
    total = len(chosen) * ((not args.no_agentls) + bool(aider) + shared)
    scratch = Path(tempfile.mkdtemp(prefix="agentls-exercism-bench-"))

    def record(row: dict[str, Any]) -> None:
        rows.append(row)
        _progress(len(rows), total, row)
        if args.json is not None:  # after every row: a run cut short keeps what it did
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({
                "command": sys.argv, "exercises": [e.name for e in chosen], "seed": args.seed,
                "totals": peer_summary(rows), "rows": rows}, indent=2))

    try:
        with contextlib.ExitStack() as stack:
            url = ""
            if aider or shared:
                if args.model is None:
                    from agentls.providers.local.models.catalog import locate_model_file

                    args.model = locate_model_file(MODEL_ID)
                url = stack.enter_context(engine(args.model, n_ctx=args.n_ctx,
                                                 log=scratch / "engine.log"))
            # Exercise by exercise, every peer on it: the machine's load hits them alike.
            for exercise in chosen:
                if not args.no_agentls:
                    record(asyncio.run(run_exercise(
                        exercise, agentls_settings(), env=_clean_env(scratch),
                        tries=args.tries, turn_time_limit=args.turn_time_limit,
                        test_time_limit=args.test_time_limit,
                        output_chars=args.test_output_chars)))
                if shared:
                    seen = {r["id"] for r in engine_records(url)}
                    row = asyncio.run(run_exercise(
                        exercise, agentls_settings(url, args.n_ctx), env=_clean_env(scratch),
                        tries=args.tries, turn_time_limit=args.turn_time_limit,
                        test_time_limit=args.test_time_limit,
                        output_chars=args.test_output_chars, peer="agentls-shared"))
                    row.update(engine_totals([r for r in engine_records(url)
                                              if r["id"] not in seen]))
                    record(row)
                if aider:
                    record(run_aider_exercise(
                        exercise, aider, url, tries=args.tries,
                        turn_time_limit=args.turn_time_limit,
                        test_time_limit=args.test_time_limit,
                        output_chars=args.test_output_chars, auto_test=args.aider_auto_test))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(exercise_table(rows))
    print()
    print(summary_table(peer_summary(rows)))
    if args.json is not None:
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
