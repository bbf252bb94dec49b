"""One real agent turn through `agentls acp` with default settings (the
packaged model), over raw NDJSON, every permission answered allow_once:
prints the tool calls, the answer, the update counts and the time.

    .venv/bin/python bench/acp_real_turn.py [AGENTLS]   (the agentls to run)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT = "Read inventory.py and tell me which methods the Inventory class has."
INVENTORY = ("class Inventory:\n    def add(self, item): ...\n"
             "    def remove(self, item): ...\n    def count(self): ...\n")


def main() -> None:
    given = sys.argv[1] if len(sys.argv) > 1 else shutil.which("agentls") or "agentls"
    agentls = str(Path(given).resolve()) if "/" in given else given
    folder = tempfile.mkdtemp(prefix="acp-real-")
    Path(folder, "inventory.py").write_text(INVENTORY)
    proc = subprocess.Popen([agentls, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=folder, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    send({"id": 0, "method": "initialize",
          "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    send({"id": 1, "method": "session/new", "params": {"cwd": folder, "mcpServers": []}})
    started = time.time()
    kinds: dict[str, int] = {}
    text: list[str] = []
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == 1 and "result" in message:
            sid = message["result"]["sessionId"]
            send({"id": 2, "method": "session/prompt", "params": {
                "sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}})
        elif message.get("method") == "session/update":
            update = message["params"]["update"]
            kind = update["sessionUpdate"]
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind == "agent_message_chunk":
                text.append(update["content"].get("text", ""))
            elif kind == "tool_call":
                print("tool_call:", update.get("title"), update.get("kind"))
        elif "method" in message and "id" in message:  # a permission question
            send({"id": message["id"], "result": {
                "outcome": {"outcome": "selected", "optionId": "allow_once"}}})
        elif message.get("id") == 2:
            print("answer:", json.dumps(message.get("result") or message.get("error"))[:300])
            break
    print("updates:", kinds)
    print("text:", "".join(text)[:500])
    print("seconds:", round(time.time() - started, 1))
    proc.stdin.close()
    proc.wait(timeout=30)


if __name__ == "__main__":
    main()
