"""`run_command {argv: string[], cwd?, timeout_seconds?}` (docs/protocol.md,
"Tool calls become workspace edits"; docs/security.md, "Commands").

- Runs `argv` directly with asyncio.create_subprocess_exec: never through a
  shell. A model that wants one puts "bash", "-c", "..." in argv, and the
  approval prompt shows exactly that.
- Runs only with approval: it declares its need (kind "run", the exact
  command line, its folder) and the turn's approval gate asks the user
  unless a rule allows that exact command line (features/policy/rules.py). The
  agent_core entry point `execute_tool_async` refuses: there is no way to run it
  around the gate.
- `cwd` must resolve (`..`, symlinks) inside a workspace folder; default:
  the first one.
- `timeout_seconds` (default 60, at most 600). The command runs in its own
  process group (session); on timeout or cancellation the whole group is
  killed, so a `sleep` it spawned is gone too. Processes left running in the
  group after the command itself exits are stopped as well.
- stdout and stderr are captured, each capped (the first and the last
  bytes are kept, with a note of how much was left out); stdin is empty.
- The environment is an allow-list (features/tools/command_env.py: PATH,
  HOME, locale, temp dirs, toolchain variables) plus the names in the
  `runCommand.passEnv` setting; no API key, token or other secret reaches
  the command unless the user names it there.
- The command runs under a small supervisor (features/tools/reaper.py), a
  child subreaper on Linux: when the command ends, times out or is
  cancelled, every process it left behind is stopped, daemons that left the
  process group with setsid included, and the result names them.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agentls.core.support.process_group import kill_process_group
from agentls.core.tools.contract import Progress, ToolContext, ToolNeed, ToolRefused
from agentls.features.tools.command_env import command_environment
from agentls.features.tools.single_tool import SingleTool
from agentls.features.tools.workspace import Workspace

log = logging.getLogger("agentls.tools.command")

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "MAX_TIMEOUT_SECONDS", "STREAM_CAP_BYTES", "RunCommandTool"]

DEFAULT_TIMEOUT_SECONDS = 60.0
MAX_TIMEOUT_SECONDS = 600.0
# Per stream (stdout, stderr): 64 KB in all. Half from the start, half from
# the end, which is where errors and summaries usually are.
STREAM_CAP_BYTES = 32 * 1024
_READ_CHUNK = 64 * 1024
# After the command exits, how long processes it left behind may keep its
# output pipes open before they are stopped.
LEFTOVER_GRACE_SECONDS = 0.5
# After a kill, how long to wait for the pipes to close (a process that left
# the group could hold them forever).
_KILL_WAIT_SECONDS = 2.0

_REAPER = Path(__file__).with_name("reaper.py")


@dataclass
class _Capture:
    """One output stream: the first and last `cap // 2` bytes, and a count."""

    cap: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        half = self.cap // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.cap - half:
                del self.tail[: len(self.tail) - (self.cap - half)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        return (
            bytes(self.head).decode("utf-8", errors="replace")
            + f"\n[... {omitted} bytes left out (output cap {self.cap} bytes per stream) ...]\n"
            + bytes(self.tail).decode("utf-8", errors="replace")
        )


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture,
                 output: Progress | None = None) -> None:
    """Read one stream into `capture`; its first STREAM_CAP_BYTES also go
    to `output` as they arrive (the front shows them live)."""
    if stream is None:
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        data = await stream.read(_READ_CHUNK)
        if not data:
            return
        capture.add(data)
        if output is not None and capture.total - len(data) < STREAM_CAP_BYTES:
            try:
                text = decoder.decode(data)
                if text:
                    await output(text)
            except asyncio.CancelledError:
                raise
            except Exception:  # a watcher's failure must not stop the capture
                log.debug("Tool output watcher failed", exc_info=True)
                output = None


def _kill_group(proc: asyncio.subprocess.Process) -> bool:
    """SIGKILL the command's process group (it leads its own session).
    True when there was something to kill."""
    return kill_process_group(proc)


async def _leader_exited(proc: asyncio.subprocess.Process) -> None:
    """Returns once the command itself has exited. Process.wait() also
    waits for the output pipes, which a background child may hold open."""
    # asyncio's Process offers no event for "exited, pipes still open".
    while proc.returncode is None:  # noqa: ASYNC110
        await asyncio.sleep(0.05)


def _close(proc: asyncio.subprocess.Process) -> None:
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


class RunCommandTool(SingleTool):
    name = "run_command"
    description = (
        "Run a program in the workspace and return its exit code and output. `argv` is "
        "the program and its arguments, run directly, not through a shell: no pipes, "
        "globs, variables or `&&` (for those, pass [\"bash\", \"-c\", \"...\"] explicitly). "
        "The user approves every command unless a rule allows it. Runs in `cwd` (default: "
        f"the workspace root) for at most `timeout_seconds` (default "
        f"{DEFAULT_TIMEOUT_SECONDS:g}, at most {MAX_TIMEOUT_SECONDS:g}); output is capped "
        f"at {STREAM_CAP_BYTES // 1024} KB per stream."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "argv": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "The program and its arguments, e.g. [\"pytest\", \"-q\"].",
            },
            "cwd": {
                "type": "string",
                "description": "Working folder relative to the workspace root (default: the "
                               "root).",
            },
            "timeout_seconds": {
                "type": "number",
                "description": f"Stop the command after this many seconds (default "
                               f"{DEFAULT_TIMEOUT_SECONDS:g}, at most {MAX_TIMEOUT_SECONDS:g}).",
            },
        },
        "required": ["argv"],
    }

    # -- execution ---------------------------------------------------------------
    def tool_need(self, tool_name: str, arguments: Mapping[str, Any],
                  state: dict[str, Any]) -> ToolNeed:
        argv = _argv(arguments.get("argv"))
        cwd = arguments.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ToolRefused("The argument 'cwd' must be a string.", "invalid_arguments")
        timeout = arguments.get("timeout_seconds")
        shown = float(timeout) if isinstance(timeout, int | float) \
            and not isinstance(timeout, bool) else None
        return ToolNeed("run", command=shlex.join(argv), cwd=(cwd or "").strip() or ".",
                        timeout=shown)

    async def call(self, arguments: dict[str, Any], state: dict[str, Any],
                   context: ToolContext) -> dict[str, Any]:
        config = state.get("config") or {}
        argv = _argv(arguments.get("argv"))
        timeout, capped = _timeout(arguments.get("timeout_seconds"))
        workspace = Workspace.from_tool_context(context, config)
        cwd_arg = arguments.get("cwd")
        if cwd_arg is not None and not isinstance(cwd_arg, str):
            raise ToolRefused("The argument 'cwd' must be a string.", "invalid_arguments")
        cwd = workspace.resolve(cwd_arg)
        if not cwd.is_dir():
            raise ToolRefused(f"cwd {workspace.relative(cwd)!r} is not a folder.",
                              "invalid_arguments")
        settings = config.get("settings") or {}
        passed = ((settings.get("runCommand") or {}).get("passEnv") or []
                  if isinstance(settings, dict) else [])
        env = command_environment(os.environ, passed)
        output = await self._run(argv, str(cwd), env, timeout, context.output)
        output["cwd"] = workspace.relative(cwd)
        output["timeout_seconds"] = timeout
        if capped:
            output["timeout_capped"] = True
        result: dict[str, Any] = {"success": output["exit_code"] == 0, "output": output}
        if output["timed_out"]:
            result["error"] = {"message": f"timed out after {timeout:g}s; the command and "
                                          "every process it started were killed",
                               "code": "timeout"}
        elif output["exit_code"] != 0:
            result["error"] = {"message": f"exited with code {output['exit_code']}",
                               "code": "exit_status"}
        return result

    async def _run(
        self, argv: list[str], cwd: str, env: dict[str, str], limit: float,
        output: Progress | None = None,
    ) -> dict[str, Any]:
        posix = os.name == "posix"
        fd, report_path = tempfile.mkstemp(prefix="agentls-run-", suffix=".json")
        os.close(fd)
        try:
            return await self._supervised(argv, cwd, env, limit, report_path, posix, output)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(report_path)

    async def _supervised(self, argv: list[str], cwd: str, env: dict[str, str], limit: float,
                          report_path: str, posix: bool, output: Progress | None = None
                          ) -> dict[str, Any]:
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", str(_REAPER), report_path, "--", *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=posix,
            )
        except FileNotFoundError as exc:
            raise ToolRefused(f"Program not found: {argv[0]!r} ({exc.strerror}). It must be on "
                           "PATH or a path relative to cwd.", "not_found") from exc
        except PermissionError as exc:
            raise ToolRefused(f"Cannot run {argv[0]!r}: {exc.strerror}.", "permission") from exc
        except OSError as exc:
            raise ToolRefused(f"Cannot run {argv[0]!r}: {exc.strerror or exc}.",
                           "io_error") from exc

        started = time.monotonic()
        stdout, stderr = _Capture(STREAM_CAP_BYTES), _Capture(STREAM_CAP_BYTES)
        readers = [asyncio.create_task(_drain(proc.stdout, stdout, output)),
                   asyncio.create_task(_drain(proc.stderr, stderr, output))]
        waiter = asyncio.create_task(proc.wait())
        leader = asyncio.create_task(_leader_exited(proc))
        timed_out = False
        leftovers = False
        try:
            await asyncio.wait({waiter, leader}, timeout=limit,
                               return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                if leader.done():
                    # The command exited; something it started holds the pipes.
                    remaining = max(0.0, limit - (time.monotonic() - started))
                    await asyncio.wait({waiter}, timeout=min(LEFTOVER_GRACE_SECONDS, remaining))
                    if not waiter.done():
                        leftovers = _kill_group(proc)
                else:
                    timed_out = True
                    await _stop_supervisor(proc)
            elif posix:
                # Exited and the pipes closed, but a child may live on silently.
                leftovers = _kill_group(proc)
            await asyncio.wait({waiter, *readers}, timeout=_KILL_WAIT_SECONDS)
            if not waiter.done():
                _close(proc)  # a process escaped the group and holds the pipes
        finally:
            if not waiter.done():
                await _stop_supervisor(proc)
                _kill_group(proc)
                _close(proc)
            for task in (waiter, leader, *readers):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait({waiter, leader, *readers}, timeout=_KILL_WAIT_SECONDS)
        elapsed = time.monotonic() - started
        report = _read_report(report_path)
        error = report.get("error")
        if isinstance(error, dict):
            kind, why = error.get("kind"), error.get("strerror")
            if kind == "FileNotFoundError":
                raise ToolRefused(f"Program not found: {argv[0]!r} ({why}). It must be on PATH "
                               "or a path relative to cwd.", "not_found")
            if kind == "PermissionError":
                raise ToolRefused(f"Cannot run {argv[0]!r}: {why}.", "permission")
            raise ToolRefused(f"Cannot run {argv[0]!r}: {why}.", "io_error")
        stopped = [p for p in report.get("killed") or [] if isinstance(p, dict)]
        return {
            "argv": argv,
            "exit_code": None if timed_out else proc.returncode,
            "stdout": stdout.text(),
            "stderr": stderr.text(),
            "truncated": stdout.truncated or stderr.truncated,
            "timed_out": timed_out,
            "stopped_leftover_processes": leftovers or bool(stopped),
            "stopped_processes": stopped,
            "duration_seconds": round(elapsed, 3),
        }

    # -- rendering ---------------------------------------------------------------
    def format_tool_call_preview(
        self, tool_name: str | None, payload: Any, state: dict[str, Any], **kwargs: Any
    ) -> str:
        arguments = payload if isinstance(payload, dict) else {}
        argv = arguments.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
        return f"run_command {argv!r}"

    def render(self, output: dict[str, Any]) -> str:
        argv = output.get("argv") or []
        lines = [f"$ {shlex.join(argv)}" + (f"   (in {output.get('cwd')})"
                                             if output.get("cwd") not in (None, ".") else "")]
        if output.get("timed_out"):
            lines.append(f"Timed out after {output.get('timeout_seconds', 0):g}s: the command "
                         "and every process it started were killed.")
        else:
            lines.append(f"Exit code: {output.get('exit_code')}")
        if output.get("timeout_capped"):
            lines.append(f"(timeout_seconds was capped at {MAX_TIMEOUT_SECONDS:g})")
        stopped = output.get("stopped_processes") or []
        if stopped:
            shown = ", ".join(f"{p.get('name')} (pid {p.get('pid')})" for p in stopped[:10])
            more = f" and {len(stopped) - 10} more" if len(stopped) > 10 else ""
            lines.append(f"(stopped {len(stopped)} process(es) the command left running in "
                         f"the background: {shown}{more})")
        elif output.get("stopped_leftover_processes"):
            lines.append("(processes the command left running in the background were stopped)")
        for stream in ("stdout", "stderr"):
            text = str(output.get(stream) or "")
            if text:
                lines.append(f"--- {stream} ---")
                lines.append(text.rstrip("\n"))
        if not output.get("stdout") and not output.get("stderr"):
            lines.append("(no output)")
        if output.get("truncated"):
            lines.append(f"[output cut to the first and last {STREAM_CAP_BYTES // 2048} KB of "
                         "each stream]")
        return "\n".join(lines)


async def _stop_supervisor(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the supervisor, which stops the command and everything it
    started and writes its report; the group is killed if it dawdles."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_leader_exited(proc), _KILL_WAIT_SECONDS)
    _kill_group(proc)


def _read_report(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _argv(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ToolRefused("`argv` must be a non-empty list of strings, the program first "
                       "(e.g. [\"pytest\", \"-q\"]).", "invalid_arguments")
    if not all(isinstance(a, str) for a in value):
        raise ToolRefused("Every item of `argv` must be a string.", "invalid_arguments")
    if not value[0]:
        raise ToolRefused("`argv[0]` (the program) is empty.", "invalid_arguments")
    if any("\0" in a for a in value):
        raise ToolRefused("`argv` contains a NUL character.", "invalid_arguments")
    return list(value)


def _timeout(value: Any) -> tuple[float, bool]:
    if value is None:
        return DEFAULT_TIMEOUT_SECONDS, False
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ToolRefused("`timeout_seconds` must be a number of seconds.", "invalid_arguments")
    if value <= 0:
        raise ToolRefused("`timeout_seconds` must be more than 0.", "invalid_arguments")
    if value > MAX_TIMEOUT_SECONDS:
        return MAX_TIMEOUT_SECONDS, True
    return float(value), False
