"""A full agent turn, scripted, over real LSP.

Starts the agentls language server over stdio (`python -m agentls`) with the
`scripted` provider replaying examples/demo_turn.json in a temporary
workspace, plays an editor whose user approves every edit, and prints a
transcript: the agent proposes an edit, the editor asks, the user approves,
ruff reports a problem, the agent fixes it, the turn completes.

    python examples/demo_turn.py

Needs agentls installed (`pip install -e .`) and ruff (the server's default
linter). The server never writes the file: the editor applies the edits to
its buffer, which stays unsaved. Nothing outside the temporary directory is
touched (the session database goes there too).

The client below is deliberately small and uses only the standard library:
it shows what an editor has to answer (workspace/applyEdit,
window/showMessageRequest, workspace/configuration) and what it is told
(agentls/message, window/showMessage, textDocument/publishDiagnostics).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "demo_turn.json"
PROMPT = "Add a greet(name) helper in greet.py."
TIMEOUT = 60.0
WIDTH = 10  # the transcript's speaker column


class Transcript:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, who: str, text: str) -> None:
        first, *rest = text.splitlines() or [""]
        print(f"{'[' + who + ']':<{WIDTH}} {first}".rstrip(), flush=True)
        for line in rest:
            self.more(line)

    def more(self, text: str) -> None:
        print(f"{'':<{WIDTH}}   {text}".rstrip(), flush=True)


class Editor:
    """The editor (and its user, who approves everything) on one side of a
    JSON-RPC connection to the server process."""

    def __init__(self, proc: asyncio.subprocess.Process, workspace: Path,
                 transcript: Transcript) -> None:
        self.proc = proc
        self.workspace = workspace
        self.out = transcript
        self.buffers: dict[str, tuple[str, int]] = {}  # uri -> (text, version)
        self.diagnostics: dict[str, list[dict[str, Any]]] = {}
        self.model_calls = 0
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None

    # -- JSON-RPC -------------------------------------------------------------------
    def start(self) -> None:
        self._reader = asyncio.create_task(self._read_loop())

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self._send({"id": self._next_id, "method": method, "params": params})
        return await asyncio.wait_for(future, TIMEOUT)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"method": method, "params": params})

    async def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        while True:
            length = 0
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            message = json.loads(await self.proc.stdout.readexactly(length))
            if "method" not in message:
                future = self._pending.pop(message.get("id"), None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RuntimeError(message["error"].get("message")))
                    else:
                        future.set_result(message.get("result"))
            elif "id" in message:  # a request from the server: answer it in order
                result = await self.on_request(message["method"], message.get("params"))
                await self._send({"id": message["id"], "result": result})
            else:
                await self.on_notification(message["method"], message.get("params") or {})

    # -- what the server asks ----------------------------------------------------------
    async def on_request(self, method: str, params: Any) -> Any:
        if method == "window/showMessageRequest":
            self.out.say("editor", "agentls asks (window/showMessageRequest):")
            for line in params["message"].splitlines():
                self.out.more(line)
            titles = [action["title"] for action in params.get("actions") or []]
            self.out.more("buttons: " + "  ".join(f"[{t}]" for t in titles))
            choice = "Allow once" if "Allow once" in titles else titles[0]
            self.out.say("user", f"clicks [{choice}]")
            return {"title": choice}
        if method == "workspace/applyEdit":
            return await self.apply_edit(params)
        if method == "workspace/configuration":
            return [None for _ in params.get("items") or []]
        return None  # window/workDoneProgress/create, client/registerCapability, ...

    async def apply_edit(self, params: dict[str, Any]) -> dict[str, Any]:
        edit = params["edit"]
        changes = edit.get("documentChanges")
        if changes is None:  # the `changes` form
            changes = [{"textDocument": {"uri": uri, "version": None}, "edits": edits}
                       for uri, edits in (edit.get("changes") or {}).items()]
        touched = []
        for change in changes:
            kind = change.get("kind")
            if kind == "create":
                path = _path(change["uri"])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            elif kind in ("rename", "delete"):
                raise NotImplementedError(f"the demo editor does not {kind} files")
            else:
                uri = change["textDocument"]["uri"]
                await self.edit_buffer(uri, change["edits"])
                touched.append(uri)
        shown = ", ".join(f"{self.rel(uri)} is now version {self.buffers[uri][1]} (unsaved)"
                          for uri in touched)
        self.out.say("editor", f"applies \"{params.get('label')}\" (workspace/applyEdit): {shown}")
        return {"applied": True}

    async def edit_buffer(self, uri: str, edits: list[dict[str, Any]]) -> None:
        if uri not in self.buffers:  # opening the file shows it in the editor
            text = _path(uri).read_text(encoding="utf-8")
            self.buffers[uri] = (text, 1)
            await self.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
        text, version = self.buffers[uri]
        ordered = sorted(edits, key=lambda e: (e["range"]["start"]["line"],
                                               e["range"]["start"]["character"]), reverse=True)
        for item in ordered:
            start = _offset(text, item["range"]["start"])
            end = _offset(text, item["range"]["end"])
            text = text[:start] + item["newText"] + text[end:]
        self.buffers[uri] = (text, version + 1)
        await self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version + 1},
            "contentChanges": [{"text": text}]})

    # -- what the server tells -------------------------------------------------------
    async def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "agentls/message":
            self.show_message(params["message"])
        elif method == "window/showMessage":
            level = {1: "error", 2: "warning", 3: "info", 4: "log"}.get(params.get("type"), "")
            self.out.say("agentls", f"{level}: {params['message']} (window/showMessage)")
        elif method == "textDocument/publishDiagnostics":
            uri, found = params["uri"], params.get("diagnostics") or []
            self.diagnostics[uri] = found
            if not found:
                self.out.say("editor", f"diagnostics for {self.rel(uri)}: cleared")
                return
            self.out.say("editor", f"diagnostics for {self.rel(uri)} "
                         "(textDocument/publishDiagnostics):")
            for d in found:
                start = d["range"]["start"]
                severity = {1: "error", 2: "warning", 3: "info", 4: "hint"}[d.get("severity", 1)]
                self.out.more(f"{start['line'] + 1}:{start['character'] + 1} {severity} "
                              f"{d.get('code', '')} {d['message']} [source: {d.get('source')}]")

    def show_message(self, message: dict[str, Any]) -> None:
        role, content = message.get("role"), message.get("content") or ""
        metadata = message.get("metadata") or {}
        if role == "user":
            self.out.say("user", content)
        elif role == "assistant":
            self.model_calls += 1
            if content:
                self.out.say("agent", content)
            for call in metadata.get("tool_calls") or []:
                self.out.say("agent", f"calls {call.get('tool') or call.get('name')}"
                             f"({_arguments(call.get('arguments') or {})})")
        elif role == "tool":
            self.out.say("tool", f"{metadata.get('tool_name')} -> {_first(content)}")
        elif metadata.get("source") == "hook":
            self.out.say("hook", f"{metadata.get('hook_name')} adds for the model ({role}):")
            for line in content.splitlines():
                self.out.more(line)

    def rel(self, uri: str) -> str:
        path = _path(uri)
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _offset(text: str, position: dict[str, int]) -> int:
    """A character offset for an LSP position (UTF-16 code units)."""
    lines = re.split(r"(?<=\n)", text)
    line = position["line"]
    if line >= len(lines):
        return len(text)
    start = sum(len(part) for part in lines[:line])
    units = 0
    for index, char in enumerate(lines[line]):
        if units >= position["character"] or char == "\n":
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(lines[line])


def _arguments(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        if isinstance(value, str) and "\n" in value:
            shown = f"<{len(value.splitlines())} lines>"
        else:
            shown = json.dumps(value)
        parts.append(f"{key}={shown}")
    return ", ".join(parts)


def _first(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


async def run_demo() -> int:
    out = Transcript()
    with tempfile.TemporaryDirectory(prefix="agentls-demo-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
        env["AGENTLS_STATE_DIR"] = str(Path(tmp) / "state")  # sessions stay in the temp dir
        env["AGENTLS_CONFIG_FILE"] = str(Path(tmp) / "no-user-config.toml")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentls", "--stdio",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env, cwd=str(workspace))
        editor = Editor(proc, workspace, out)
        editor.start()
        try:
            return await _turn(editor, workspace, out)
        finally:
            with contextlib.suppress(Exception):
                await editor.request("shutdown", None)
                await editor.notify("exit", None)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _turn(editor: Editor, workspace: Path, out: Transcript) -> int:
    print("agentls demo: one scripted agent turn over LSP "
          "(server: python -m agentls --stdio, provider: scripted)")
    print(f"workspace: a temporary folder; script: examples/{SCRIPT.name}; "
          "approval.mode: message\n")
    settings = {"provider": "scripted", "providerOptions": {"script": str(SCRIPT)},
                "approval": {"mode": "message"}}
    await editor.request("initialize", {
        "processId": os.getpid(), "rootUri": workspace.as_uri(),
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": "workspace"}],
        "initializationOptions": {"agentls": settings},
        "capabilities": {
            "workspace": {"applyEdit": True, "workspaceFolders": True,
                          "workspaceEdit": {"documentChanges": True,
                                            "resourceOperations": ["create"]}},
            "window": {"showMessage": {"messageActionItem": {
                "additionalPropertiesSupport": False}}},
            "textDocument": {"publishDiagnostics": {"versionSupport": True},
                             "synchronization": {"dynamicRegistration": False}},
            "general": {"positionEncodings": ["utf-16"]},
        },
    })
    await editor.notify("initialized", {})
    result = await editor.request("agentls/chat", {"prompt": PROMPT})
    status = result.get("status")
    error = result.get("error") or {}
    out.say("turn", f"{status}" + (f": {error.get('message')}" if error else "")
            + f" ({editor.model_calls} model calls)")
    for uri, (text, version) in editor.buffers.items():
        print(f"\n{editor.rel(uri)} in the editor (version {version}, unsaved; "
              f"{len(editor.diagnostics.get(uri) or [])} diagnostics):")
        for number, line in enumerate(text.splitlines(), 1):
            print(f"  {number:>2} | {line}".rstrip())
        on_disk = _path(uri).read_text(encoding="utf-8")
        print("on disk: " + ("empty (the editor created the file; the text is in the "
                             "unsaved buffer)" if not on_disk else f"{len(on_disk)} characters"))
    return 0 if status == "completed" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    try:
        return asyncio.run(asyncio.wait_for(run_demo(), TIMEOUT * 2))
    except TimeoutError:
        print("the demo timed out", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
