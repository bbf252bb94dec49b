"""All configured MCP servers of one language server process: starting
them in the background, stopping them, restarting the ones whose block
changed, and the catalog they offer (tools, prompts, resources) under the
names the model and the user see."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentls.features.mcp.config import McpServerSpec
from agentls.features.mcp.connection import McpConnection
from agentls.features.mcp.names import assign_names
from agentls.features.mcp.schema import normalize_input_schema

__all__ = ["McpManager", "McpTool"]

log = logging.getLogger("agentls.mcp")


@dataclass(frozen=True)
class McpTool:
    exposed: str  # mcp__server__tool
    server: str
    name: str  # the server's own name for it
    description: str
    schema: dict[str, Any]
    annotations: dict[str, Any]
    note: str | None = None  # what normalising the schema changed


class McpManager:
    def __init__(self, *, environ: Mapping[str, str], hidden_env: frozenset[str],
                 client_version: str = "0") -> None:
        self.environ = environ
        self.hidden_env = hidden_env
        self.client_version = client_version
        self.connections: dict[str, McpConnection] = {}
        self.listeners: list[Callable[[], None]] = []
        self._catalog_version = -1
        self._tools: dict[str, McpTool] = {}
        self._prompts: dict[str, tuple[str, dict[str, Any]]] = {}

    # -- lifecycle -----------------------------------------------------------
    async def apply(self, specs: list[McpServerSpec]) -> None:
        """Make the running set match `specs`: stop removed or changed
        servers, start new or changed ones (in the background)."""
        wanted = {s.name: s for s in specs}
        stopping = []
        for name, conn in list(self.connections.items()):
            spec = wanted.get(name)
            if spec is None or spec.fingerprint != conn.spec.fingerprint:
                stopping.append(conn.stop())
                del self.connections[name]
        if stopping:
            await asyncio.gather(*stopping, return_exceptions=True)
        for name, spec in wanted.items():
            if name not in self.connections:
                conn = McpConnection(spec, environ=self.environ, hidden_env=self.hidden_env,
                                     on_change=self._changed, client_version=self.client_version)
                self.connections[name] = conn
                conn.start()
        self._changed()

    async def aclose(self) -> None:
        conns = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)

    async def wait_settled(self, within: float) -> None:
        """Until every server is ready or failed (for `agentls check`, tests, bench)."""
        await asyncio.gather(*(c.wait_ready(within) for c in self.connections.values()),
                             return_exceptions=True)

    def _changed(self) -> None:
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:
                log.exception("MCP change listener failed")

    # -- catalog -------------------------------------------------------------
    @property
    def version(self) -> int:
        """Moves whenever any server's lists or the set of servers change."""
        return hash(tuple((n, c.version, c.state) for n, c in sorted(self.connections.items())))

    def _rebuild(self) -> None:
        if self._catalog_version == self.version:
            return
        tools: dict[str, McpTool] = {}
        prompts: dict[str, tuple[str, dict[str, Any]]] = {}
        taken: set[str] = set()
        prompt_taken: set[str] = set()
        # The user's servers are named first (they keep their names); a
        # workspace server's names live apart (names.py: mcp__ws__...).
        for server, conn in sorted(self.connections.items(),
                                   key=lambda item: (item[1].spec.origin != "settings", item[0])):
            # A crashed server keeps its last lists: calling one of its
            # tools is what starts it again (with backoff).
            if conn.state == "stopped":
                continue
            workspace = conn.spec.origin != "settings"
            valid = [t for t in conn.tools if isinstance(t.get("name"), str) and t["name"]]
            names = assign_names(server, [t["name"] for t in valid], taken, workspace=workspace)
            for raw in valid:
                exposed = names[raw["name"]]
                if exposed in tools:
                    continue
                schema, note = normalize_input_schema(raw.get("inputSchema"))
                if note:
                    log.warning("MCP server %s, tool %s: %s; using a simplified schema",
                                server, raw["name"], note)
                annotations = raw.get("annotations")
                tools[exposed] = McpTool(
                    exposed, server, raw["name"], str(raw.get("description") or "")[:4000],
                    schema, annotations if isinstance(annotations, dict) else {}, note)
            good = [p for p in conn.prompts if isinstance(p.get("name"), str) and p["name"]]
            pnames = assign_names(server, [p["name"] for p in good], prompt_taken,
                                  workspace=workspace)
            for raw in good:
                prompts[pnames[raw["name"]]] = (server, raw)
        self._tools, self._prompts = tools, prompts
        self._catalog_version = self.version

    @property
    def tools(self) -> dict[str, McpTool]:
        self._rebuild()
        return self._tools

    @property
    def prompts(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """exposed name -> (server, prompt as listed)."""
        self._rebuild()
        return self._prompts

    def prompt_text(self, exposed: str) -> str | None:
        found = self.prompts.get(exposed)
        if found is None:
            return None
        server, raw = found
        conn = self.connections.get(server)
        return conn.prompt_texts.get(raw["name"]) if conn else None

    def resources(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, r) for name, conn in sorted(self.connections.items())
                if conn.state == "ready" for r in conn.resources
                if isinstance(r.get("uri"), str)]

    def status(self) -> list[dict[str, Any]]:
        """`agentls/status` mcp entries (no env, headers or arguments: no secrets)."""
        entries = []
        for name, conn in sorted(self.connections.items()):
            entry: dict[str, Any] = {
                "name": name, "state": conn.state,
                "tools": sorted(t.exposed for t in self.tools.values() if t.server == name),
                "origin": conn.spec.origin, "transport": conn.spec.config.transport,
            }
            if conn.error:
                entry["error"] = conn.error
            if conn.dropped_tools:
                entry["warnings"] = [f"tool {d} left out" for d in conn.dropped_tools]
            entries.append(entry)
        return entries
