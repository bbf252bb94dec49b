"""`agentls check`: start each configured MCP server once, list its tools
or say why it failed (with its stderr tail), then stop it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentls.features.mcp.config import (
    os_environ,
    provider_key_names,
    read_workspace_file,
    server_specs,
)

__all__ = ["McpCheck", "check_servers"]

TRUST_KIND = "mcp"


@dataclass
class McpCheck:
    name: str
    origin: str
    target: str  # command line or URL (no env, no headers)
    state: str  # ready | failed | skipped
    tools: list[str] = field(default_factory=list)
    error: str | None = None


async def check_servers(settings: Any, workspace_root: Path | None, trust_store: Any = None,
                        environ: Mapping[str, str] | None = None,
                        within: float = 60.0) -> list[McpCheck]:
    from agentls import __version__
    from agentls.features.mcp.manager import McpManager

    workspace = read_workspace_file(workspace_root)
    trusted = False
    reports: list[McpCheck] = []
    if workspace is not None and workspace.servers:
        decision = (trust_store.decision(workspace.file, workspace.digest, TRUST_KIND)
                    if trust_store is not None else None)
        trusted = decision == "trusted"
        if not trusted:
            why = ("you did not allow it" if decision == "refused"
                   else "it has not been allowed yet (the editor asks when agentls starts)")
            reports += [McpCheck(s.name, "workspace", s.describe(), "skipped",
                                 error=f"not started: {workspace.file} lists it and {why}")
                        for s in workspace.servers if s.name not in settings.mcp_servers]
    for problem in workspace.problems if workspace else []:
        reports.append(McpCheck("(.mcp.json)", "workspace", str(workspace.file if workspace
                                                                else ""), "failed",
                                error=problem))
    specs, invalid = server_specs(settings.mcp_servers, workspace, workspace_trusted=trusted)
    reports += [McpCheck(name, "settings", "", "failed", error=problem)
                for name, problem in invalid]
    if not specs:
        return reports
    manager = McpManager(environ=environ if environ is not None else os_environ(),
                         hidden_env=provider_key_names(settings.api_key_env),
                         client_version=__version__)
    try:
        await manager.apply(specs)
        await manager.wait_settled(within)
        status = {e["name"]: e for e in manager.status()}
        for spec in specs:
            entry = status.get(spec.name, {})
            state = entry.get("state", "failed")
            reports.append(McpCheck(
                spec.name, spec.origin, spec.describe(),
                "ready" if state == "ready" else "failed", list(entry.get("tools", [])),
                entry.get("error") or (None if state == "ready"
                                       else f"did not start within {within:g}s")))
    finally:
        await manager.aclose()
    return reports
