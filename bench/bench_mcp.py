"""MCP client costs, in one run.

1. initialize -> tools ready: spawn `agentls` over stdio with one stdio MCP
   server (`mcp-server-time`) in `mcpServers`, send initialize/initialized,
   and poll `agentls/status` (every 20 ms) until the server is `ready` with
   its tools. Reported from the initialize answer, and from spawn. For
   reference, the same server started by the MCP client alone (no language
   server): spawn -> tools listed.
2. Added latency per tool call, against a hand-written MCP server
   (tests/fakes/mcp_raw_server.py, `echo`), interleaved round by round:
   - floor: one JSON-RPC line written to the server's stdin and its answer
     read back, by hand (the pipe + the server's own work);
   - SDK: `McpConnection.call_tool` (the official SDK's client session);
   - agentls: the MCP ToolPlugin's execute (policy verdict "allow", so no
     question), including rendering the result for the model.
   The difference to the floor is what agentls and the SDK add per call.
3. Inline completion while MCP servers start: right after `initialized`,
   inline completions (provider openai against bench_inline.py's instant
   loopback backend, each at a new position so none is a cache hit) are
   asked one after the other for 6 s, with and without two stdio MCP
   servers starting (the SDK import and their start-up fall in that window).

Usage: python bench/bench_mcp.py [--rounds 5] [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RAW = str(REPO / "tests" / "fakes" / "mcp_raw_server.py")
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


class Lsp:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.proc.stdin.drain()

    async def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = (await self.proc.stdout.readline()).strip()
            if not line:
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        data: dict[str, Any] = json.loads(await self.proc.stdout.readexactly(length))
        return data

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        msg_id = self.next_id
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        while True:
            message = await self.read()
            if message.get("id") == msg_id and "method" not in message:
                return message.get("result")
            if "method" in message and "id" in message:  # server -> client request
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})


async def tools_ready_once(workdir: Path) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLS_")}
    env.update(AGENTLS_CONFIG_FILE="/nonexistent/agentls.toml",
               AGENTLS_STATE_DIR=str(workdir / "state"))
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
    lsp = Lsp(proc)
    try:
        await lsp.request("initialize", {
            "processId": None, "rootUri": None, "capabilities": {},
            "initializationOptions": {"agentls": {"provider": "scripted",
                                                  "mcpServers": {"time": TIME}}}})
        answered = time.perf_counter()
        await lsp.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        while True:
            status = await lsp.request("agentls/status", {})
            entry = next((e for e in status.get("mcp", []) if e["name"] == "time"), None)
            if entry and entry["state"] == "ready" and entry["tools"]:
                ready = time.perf_counter()
                break
            if entry and entry["state"] == "failed":
                raise RuntimeError(entry.get("error"))
            await asyncio.sleep(0.02)
        await lsp.request("shutdown", None)
        await lsp.send({"jsonrpc": "2.0", "method": "exit", "params": None})
        await asyncio.wait_for(proc.wait(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return ready - answered, ready - started


async def client_alone_once() -> float:
    from agentls.features.mcp.config import McpServerSpec
    from agentls.features.mcp.connection import McpConnection
    from agentls.features.mcp.server_config import McpServerConfig

    started = time.perf_counter()
    conn = McpConnection(McpServerSpec("time", McpServerConfig(**TIME)),
                         environ=os.environ, hidden_env=frozenset())
    conn.start()
    ok = await conn.wait_ready(60)
    elapsed = time.perf_counter() - started
    await conn.stop()
    if not ok:
        raise RuntimeError(conn.error)
    return elapsed


async def call_latencies(calls: int) -> tuple[list[float], list[float], list[float]]:
    from agentls.features.mcp.config import McpServerSpec
    from agentls.features.mcp.manager import McpManager
    from agentls.features.mcp.server_config import McpServerConfig
    from agentls.features.mcp.tools import McpTools

    # floor: the same server, driven by hand
    proc = await asyncio.create_subprocess_exec(
        sys.executable, RAW, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    async def raw_call(msg_id: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        line = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"text": "hi"}}})
        proc.stdin.write(line.encode() + b"\n")
        await proc.stdin.drain()
        await proc.stdout.readline()

    manager = McpManager(environ=os.environ, hidden_env=frozenset())
    await manager.apply([McpServerSpec("raw", McpServerConfig(command=sys.executable,
                                                               args=[RAW]))])
    await manager.wait_settled(60)
    conn = manager.connections["raw"]
    tools = McpTools(manager)
    state = tools.init({})
    floor, sdk, plugin = [], [], []
    try:
        for _ in range(20):  # warm up all three paths
            await raw_call(0)
            await conn.call_tool("echo", {"text": "hi"})
        for i in range(calls):
            t0 = time.perf_counter()
            await raw_call(i + 1)
            t1 = time.perf_counter()
            await conn.call_tool("echo", {"text": "hi"})
            t2 = time.perf_counter()
            result = await tools.execute_tool_async("mcp__raw__echo", {"text": "hi"}, state,
                                                    context={"approval": "allow"})
            t3 = time.perf_counter()
            assert result["success"], result
            floor.append(t1 - t0)
            sdk.append(t2 - t1)
            plugin.append(t3 - t2)
    finally:
        proc.stdin.close()
        await proc.wait()
        await manager.aclose()
    return floor, sdk, plugin


async def inline_during_start(port: int, workdir: Path, with_mcp: bool,
                              seconds: float = 6.0) -> list[float]:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_inline import Client, document, inline_params

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLS_", "OPENAI_"))}
    env.update(AGENTLS_CONFIG_FILE="/nonexistent/agentls.toml",
               AGENTLS_STATE_DIR=str(workdir / "state"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentls", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    client = Client(proc.stdout, proc.stdin)
    settings: dict[str, Any] = {"provider": "openai", "baseUrl": f"http://127.0.0.1:{port}/v1",
                                "model": "qwen2.5-coder-1.5b"}
    if with_mcp:
        settings["mcpServers"] = {"time": TIME, "raw": {"command": sys.executable,
                                                        "args": [RAW]}}
    latencies: list[float] = []
    try:
        await client.request("initialize", {"processId": None, "rootUri": None,
                                            "capabilities": {},
                                            "initializationOptions": {"agentls": settings}})
        client.notify("initialized", {})
        uri = (workdir / "doc.py").as_uri()
        text = document()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        lines = text.splitlines()
        deadline = time.perf_counter() + seconds
        index = 0
        while time.perf_counter() < deadline:
            line = 2 + (index * 4) % (len(lines) - 4)
            index += 1
            started = time.perf_counter()
            answer = await client.request("textDocument/inlineCompletion",
                                          inline_params(uri, line + 1, 4 + index % 10,
                                                        invoked=True))
            latencies.append(time.perf_counter() - started)
            assert "result" in answer, answer
        await client.request("shutdown", None)
        client.notify("exit", None)
        await asyncio.wait_for(proc.wait(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return latencies


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    from importlib.metadata import version

    import mcp  # noqa: F401  (its version is printed)

    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU(s), "
          f"mcp {version('mcp')}, mcp-server-time {version('mcp-server-time')}")
    after_init, from_spawn, alone = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            a, b = await tools_ready_once(Path(tmp))
            after_init.append(a)
            from_spawn.append(b)
            alone.append(await client_alone_once())
    print(f"\ninitialize -> tools ready (stdio mcp-server-time), median of {args.rounds}:")
    print(f"  from the initialize answer  {ms(after_init)} ms")
    print(f"  from spawning agentls       {ms(from_spawn)} ms")
    print(f"  MCP client alone (no LSP)   {ms(alone)} ms   (spawn -> tools listed)")
    floor, sdk, plugin = await call_latencies(args.calls)
    print(f"\nper tool call (raw echo server), median of {args.calls}:")
    print(f"  floor (hand-written JSON-RPC over the pipe)   {ms(floor)} ms")
    print(f"  McpConnection.call_tool (SDK)                 {ms(sdk)} ms   "
          f"(+{(statistics.median(sdk) - statistics.median(floor)) * 1000:.2f} ms)")
    print(f"  McpTools.execute (agentls tool path)          {ms(plugin)} ms   "
          f"(+{(statistics.median(plugin) - statistics.median(floor)) * 1000:.2f} ms)")

    backend = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).with_name("bench_inline.py")), "--backend",
        stdout=asyncio.subprocess.PIPE)
    assert backend.stdout is not None
    port = int(await asyncio.wait_for(backend.stdout.readline(), 30))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            without = await inline_during_start(port, Path(tmp), with_mcp=False)
            with_servers = await inline_during_start(port, Path(tmp), with_mcp=True)
    finally:
        backend.kill()
        await backend.wait()
    print("\ninline completion in the 6 s after initialized (sequential, no cache hits):")
    for label, values in (("without MCP servers", without),
                          ("two stdio MCP servers starting", with_servers)):
        ordered = sorted(values)
        p95 = ordered[int(len(ordered) * 0.95) - 1]
        print(f"  {label:32s} {len(values):5d} answers, p50 {ms(values)} ms, "
              f"p95 {p95 * 1000:7.2f} ms, max {max(values) * 1000:7.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
