"""A hostile hook module, loaded into the REAL server through the
`agentls.hooks` entry-point group (see `plugin_env`): it raises, hangs, and
floods the context, as the environment variable AGENTLS_TEST_EVIL says
(comma-separated: raise, hang, flood, budget).

HookRegistry's per-handler timeout is 30 s by default; this module lowers
it (AGENTLS_TEST_HOOK_TIMEOUT, default 1 s) so a hang costs the test one
second, not thirty. The isolation mechanism is the same.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from agentls.core.plugins.hook_modules import HookContext
from agentls.core.plugins.hooks import HookRegistry
from agentls.core.types.messages import HookResult

FLOOD_BYTES = 2 * 1024 * 1024
FLOOD_MARK = "FLOOD-INJECTION-"
BUDGET_MARK = "BUDGET-INJECTION-"


class EvilHooks:
    name = "evil-hooks"
    version = "0.0.1"

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        hooks.handler_timeout = float(os.environ.get("AGENTLS_TEST_HOOK_TIMEOUT", "1"))
        modes = set(os.environ.get("AGENTLS_TEST_EVIL", "").split(","))

        async def raising(event: str, data: dict[str, Any]) -> HookResult:
            raise RuntimeError(f"evil hook raised on {event}")

        async def hanging(event: str, data: dict[str, Any]) -> HookResult:
            await asyncio.sleep(3600)
            return HookResult(action="deny", reason="a hung hook must never get to decide")

        async def flood(event: str, data: dict[str, Any]) -> HookResult:
            # One injection far over session.injectionSizeLimit.
            text = FLOOD_MARK + "F" * FLOOD_BYTES
            return HookResult(action="inject_context", context_injection=text)

        async def budget(event: str, data: dict[str, Any]) -> HookResult:
            # Each injection under the size limit; together over the budget.
            return HookResult(action="inject_context",
                              context_injection=BUDGET_MARK + "b" * 3000)

        async def returns_garbage(event: str, data: dict[str, Any]) -> Any:
            return {"action": "deny", "reason": "not a HookResult"}

        if "raise" in modes:
            for event in ("prompt:submit", "tool:pre", "tool:post", "provider:request"):
                hooks.register(event, raising, priority=-5000, name="evil-raise")
            hooks.register("tool:pre", returns_garbage, priority=-4000, name="evil-garbage")
        if "hang" in modes:
            for event in ("prompt:submit", "tool:pre", "tool:post"):
                hooks.register(event, hanging, priority=-3000, name="evil-hang")
        # Two handlers on one event: injections of several handlers are merged,
        # but each is held to the size limit on its own, so the flood is
        # refused and the other hook's injections still arrive.
        if "flood" in modes:
            hooks.register("tool:post", flood, name="evil-flood")
        if "budget" in modes:
            hooks.register("tool:post", budget, name="evil-budget")


def plugin_env(folder: Path, **extra: str) -> dict[str, str]:
    """Environment for a server that discovers EvilHooks: a dist-info with
    the entry point, on PYTHONPATH with the repository root."""
    dist = folder / "agentls_evil_hooks-0.0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: agentls-evil-hooks\n"
                                   "Version: 0.0.1\n")
    (dist / "entry_points.txt").write_text(
        "[agentls.hooks]\nevil-hooks = tests.reliability.evil_hooks:EvilHooks\n")
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(folder), str(root), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path.rstrip(os.pathsep), **extra}
