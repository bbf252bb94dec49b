"""A stdio MCP server written by hand (newline-delimited JSON-RPC), so the
tests control every byte: it misbehaves on request.

    python mcp_raw_server.py            # the tools below

Prompts: `summarize {topic}`.

Tools:
- `echo {text}`: answers the text;
- `crash`: exits the process in the middle of the call;
- `hang`: never answers;
- `flood`: answers 3 MB of text and writes 5 MB to stderr first;
- `garbage`: prints a line that is not JSON on stdout, then answers;
- `fail`: answers isError with a message;
- `touch {path}`: creates the file (to prove a denied call ran nothing);
- `getenv {name}`: the variable's value, or "<unset>";
- `steps`: reports progress twice (when asked to), then answers;
- `grow`: adds a tool `grown` and sends notifications/tools/list_changed;
- plus tools whose names collide once sanitised (`a.b`, `a b`), a 100
  character name, and tools with schemas no provider accepts.

MCP_RAW_PID_FILE: a file the server writes its pid to.
MCP_RAW_LOG: a file the server appends every message it receives to (JSON lines).
MCP_RAW_EXTRA_TOOLS: comma-separated names of more tools (answer "called <name>").
Set MCP_RAW_CRASH_AT_START=1 to exit before answering initialize (after
writing to stderr).
"""

import json
import os
import sys
import time

LONG = "x" * 100
TOOLS = [
    {"name": "echo", "description": "Echo text", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "crash", "inputSchema": {"type": "object"}},
    {"name": "hang", "inputSchema": {"type": "object"}},
    {"name": "flood", "inputSchema": {"type": "object"}},
    {"name": "garbage", "inputSchema": {"type": "object"}},
    {"name": "fail", "inputSchema": {"type": "object"}},
    {"name": "touch", "inputSchema": {"type": "object",
                                      "properties": {"path": {"type": "string"}}}},
    {"name": "getenv", "inputSchema": {"type": "object",
                                       "properties": {"name": {"type": "string"}}}},
    {"name": "grow", "inputSchema": {"type": "object"}},
    {"name": "steps", "inputSchema": {"type": "object"}},
    {"name": "a.b", "description": "first", "inputSchema": {"type": "object"}},
    {"name": "a b", "description": "second", "inputSchema": {"type": "object"}},
    {"name": LONG, "inputSchema": {"type": "object"}},
    {"name": "bad_schema_string", "inputSchema": {"type": "string"}},
    {"name": "bad_schema_anyof", "inputSchema": {
        "anyOf": [{"type": "object"}], "type": "object", "$schema": "x",
        "properties": {"q": {"type": "string"}}, "required": ["q", "missing"]}},
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(msg_id, result):
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def text(value, is_error=False):
    return {"content": [{"type": "text", "text": value}], "isError": is_error}


def call(msg_id, name, arguments, meta=None):
    if name == "steps":
        token = (meta or {}).get("progressToken")
        for step in (1, 2):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": step, "total": 2,
                    "message": f"step {step}"}})
        answer(msg_id, text("two steps done"))
    elif name == "echo":
        answer(msg_id, text(f"echo: {arguments.get('text')}"))
    elif name == "crash":
        sys.stderr.write("raw server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "hang":
        return
    elif name == "flood":
        chunk = "e" * 65536 + "\n"
        for _ in range(80):
            sys.stderr.write(chunk)
        sys.stderr.flush()
        answer(msg_id, text("f" * 3_000_000))
    elif name == "garbage":
        sys.stdout.write("this is not json {{{\n")
        sys.stdout.flush()
        answer(msg_id, text("after garbage"))
    elif name == "touch":
        with open(arguments["path"], "w") as handle:
            handle.write("touched\n")
        answer(msg_id, text(f"touched {arguments['path']}"))
    elif name == "getenv":
        answer(msg_id, text(os.environ.get(arguments.get("name", ""), "<unset>")))
    elif name == "grow":
        TOOLS.append({"name": "grown", "inputSchema": {"type": "object"}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        answer(msg_id, text("grew a tool"))
    elif name == "fail":
        answer(msg_id, text("the fail tool always fails", is_error=True))
    else:
        answer(msg_id, text(f"called {name}"))


def main():
    for extra in filter(None, os.environ.get("MCP_RAW_EXTRA_TOOLS", "").split(",")):
        TOOLS.append({"name": extra, "inputSchema": {"type": "object"}})
    if os.environ.get("MCP_RAW_PID_FILE"):
        with open(os.environ["MCP_RAW_PID_FILE"], "a") as handle:
            handle.write(f"{os.getpid()}\n")
    sys.stderr.write("raw server: started\n")
    sys.stderr.flush()
    if os.environ.get("MCP_RAW_CRASH_AT_START"):
        sys.stderr.write("raw server: missing configuration, giving up\n")
        sys.exit(2)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if os.environ.get("MCP_RAW_LOG"):
            with open(os.environ["MCP_RAW_LOG"], "a") as handle:
                handle.write(json.dumps({"method": method, "id": msg_id,
                                         "params": msg.get("params")}) + "\n")
        if msg_id is None:
            continue  # notifications
        if method == "initialize":
            answer(msg_id, {"protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {"listChanged": True}, "prompts": {}},
                            "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list":
            answer(msg_id, {"tools": TOOLS})
        elif method == "tools/call":
            call(msg_id, msg["params"]["name"], msg["params"].get("arguments") or {},
                 msg["params"].get("_meta"))
        elif method == "prompts/list":
            answer(msg_id, {"prompts": [{"name": "summarize", "description": "Summarize a topic",
                                         "arguments": [{"name": "topic", "required": True}]}]})
        elif method == "prompts/get":
            topic = (msg["params"].get("arguments") or {}).get("topic", "?")
            answer(msg_id, {"messages": [{"role": "user", "content": {
                "type": "text", "text": f"Summarize {topic} in three bullet points."}}]})
        elif method == "ping":
            answer(msg_id, {})
        else:
            send({"jsonrpc": "2.0", "id": msg_id,
                  "error": {"code": -32601, "message": f"no method {method}"}})
    time.sleep(0)


if __name__ == "__main__":
    main()
