"""One agent turn with a real local model (not CI; bench/README.md, "The
agent loop with a real model").

The turn runs the server's own composition (app.build_agent) and turn loop
(Orchestrator.run_turn) with provider `local` and the GGUF given, on a
small workspace holding inventory.py, and asks which methods the Inventory
class has. Printed: each model call (its reply: text or tool calls, valid
or not), each tool result, the final answer, tokens and wall time; with
--prompts, the rendered prompt of every model call (what the model saw).

    nice -n 10 .venv/bin/python bench/bench_agent_real.py /tmp/qwen15/qwen15.gguf
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

INVENTORY = '''\
"""A small stock keeper."""


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, count=1):
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count=1):
        if self.items.get(name, 0) < count:
            raise ValueError(f"not enough {name}")
        self.items[name] -= count

    def count(self, name):
        return self.items.get(name, 0)

    def total(self):
        return sum(self.items.values())
'''
EXPECTED = ("__init__", "add", "remove", "count", "total")
PROMPT = "Read inventory.py and tell me which methods the Inventory class has"


async def run(model: str, *, show_prompts: bool, prompt: str, max_iterations: int,
              extra: dict[str, Any] | None = None) -> int:
    from agentls.app import build_agent
    from agentls.core.agent.orchestrator import Orchestrator
    from agentls.core.plugins.registry import PluginRegistry
    from agentls.core.settings.load import load_settings
    from agentls.core.types.conversation import Session

    workspace = Path(tempfile.mkdtemp(prefix="agentls-bench-agent-"))
    (workspace / "inventory.py").write_text(INVENTORY)
    registry = PluginRegistry.discover()
    options = {"provider": "local", "model": model,
               "session": {"maxIterations": max_iterations}, **(extra or {})}
    loaded = load_settings(init_options=options, workspace_root=workspace,
                           provider_names=registry.names("provider"), environ={},
                           user_config_file=workspace / "none.toml")
    for problem in loaded.problems:
        print("settings problem:", problem.message, file=sys.stderr)
    agent = build_agent(loaded.settings, registry, workspace_folders=[workspace])
    if show_prompts:
        _print_prompts(agent.provider)
    orchestrator = Orchestrator(agent)
    started = time.monotonic()
    try:
        result = await orchestrator.run_turn(Session("bench"), prompt)
    finally:
        await agent.provider.aclose()
    seconds = time.monotonic() - started
    calls = valid = 0
    for message in result.messages:
        meta = message.metadata or {}
        if message.role == "assistant":
            tool_calls = meta.get("tool_calls") or []
            calls += len(tool_calls)
            shown = [f"{c['tool']}({json.dumps(c['arguments'])})" for c in tool_calls]
            print(f"assistant: {message.content!r} calls={shown} "
                  f"usage={meta.get('usage')} source={meta.get('source')}")
        elif message.role == "tool":
            ok = bool((message.tool_result or {}).get("success"))
            code = ((message.tool_result or {}).get("error") or {}).get("code")
            valid += ok or code not in ("unknown_tool", "invalid_arguments", "invalid_call")
            print(f"tool {meta.get('tool_name')}: success={ok} {message.content[:120]!r}")
        else:
            print(f"{message.role}: {message.content[:200]!r}")
    answer = result.messages[-1].content if result.messages else ""
    named = [m for m in EXPECTED if m.strip("_") in answer]
    print(json.dumps({
        "model": model, "status": result.status, "error": result.error,
        "tool_calls": calls, "valid_calls": valid, "model_calls": sum(
            m.role == "assistant" and (m.metadata or {}).get("source") != "agentls"
            for m in result.messages),
        "input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens,
        "seconds": round(seconds, 1), "methods_named": f"{len(named)}/{len(EXPECTED)}",
    }, indent=1))
    return 0 if result.status == "completed" else 1


def _print_prompts(provider: Any) -> None:
    """Show the raw prompt of every native tool-call request."""
    from agentls.providers.local.tool_calls import chat_tools

    original = chat_tools.native_request

    def logged(*args: Any, **kwargs: Any) -> Any:
        request = original(*args, **kwargs)
        print("=" * 30 + " prompt\n" + request.prefix + "\n" + "=" * 30, flush=True)
        return request

    chat_tools.native_request = logged  # type: ignore[assignment]
    from agentls.providers.local import provider as local_provider

    local_provider.native_request = logged  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path to a GGUF (e.g. /tmp/qwen15/qwen15.gguf)")
    parser.add_argument("--prompts", action="store_true", help="print every rendered prompt")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--max-iterations", type=int, default=8)
    parser.add_argument("--settings", default="{}",
                        help="JSON settings added to the turn's (e.g. local, providerOptions)")
    args = parser.parse_args()
    return asyncio.run(run(args.model, show_prompts=args.prompts, prompt=args.prompt,
                           max_iterations=args.max_iterations,
                           extra=json.loads(args.settings)))


if __name__ == "__main__":
    sys.exit(main())
