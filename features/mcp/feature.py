"""The MCP feature plugin (entry point `mcp`): owns the servers of one
language server process and offers what they have.

- Lifecycle (core/plugins/feature_host.py): `start(host)` after the settings are
  read and after every change applies the configured servers in the
  background (nothing waits for a server); `aclose()` stops them all.
- Workspace `.mcp.json`: its servers start only after the user agreed to
  this content of the file (one question per content, asked through the
  server's TrustAsker, core/trust/question.py, like `.agentls.toml`'s, and
  remembered in the user's trust store with kind "mcp"; "Don't allow" is
  remembered too). The question shows every server whole.
- Tools: `tool_plugins()` gives McpTools (features/mcp/tools.py).
- Prompts: `agentls/templates` entries and `/` completions named
  `mcp__<server>__<prompt>`, their arguments as `{{name}}` placeholders.
- Resources: `@mcp:<server>:<uri>` mentions with completion; the hook
  module attaches their content to the prompt when it is sent.
- Status: `agentls/status` gets `mcp: [{name, state, tools, error?}]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.features.mcp.config import (
    WORKSPACE_FILE,
    WorkspaceServers,
    os_environ,
    provider_key_names,
    read_workspace_file,
    server_specs,
)
from agentls.features.prompt.mention_prefix import complete_mention_prefix

if TYPE_CHECKING:
    from agentls.core.plugins.hook_modules import HookContext
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.types.messages import HookResult

__all__ = ["ALLOW", "DONT_ALLOW", "McpFeature", "McpHooks", "find_resource_mentions"]

log = logging.getLogger("agentls.mcp")

ALLOW = "Allow"
DONT_ALLOW = "Don't allow"
TRUST_KIND = "mcp"
MENTION_PREFIX = "@mcp:"
RESOURCE_MAX_CHARS = 20_000
MAX_RESOURCE_MENTIONS = 10
TURN_WAITS_FOR_STARTING_SECONDS = 15.0

_SLASH = re.compile(r"(?:^|(?<=\s))/([\w.-]*)\Z")
_MENTION = re.compile(r"(?<!\S)@mcp:([A-Za-z0-9_.-]+):(\S+)")
_TYPING = re.compile(r"(?<!\S)@mcp:(\S*)\Z")
_TYPING_PREFIX = re.compile(r"(?<!\S)@(m|mc|mcp)?\Z")


def find_resource_mentions(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _MENTION.finditer(text)]


class McpFeature:
    name = "mcp"
    version = "0.1.0"
    priority = 60

    def __init__(self) -> None:
        self._manager: Any = None
        self._host: Any = None
        self._workspace: WorkspaceServers | None = None
        self._workspace_state = "none"  # none | pending | allowed | refused
        self._asked: set[str] = set()
        self._apply_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._specs: list[Any] = []  # the servers wanted now (applied in the background)
        self._invalid: list[tuple[str, str]] = []  # (name, problem) of invalid blocks
        self._told: set[str] = set()
        self.started = asyncio.Event()  # start(host) ran at least once

    # -- lifecycle -------------------------------------------------------------
    @property
    def manager(self) -> Any:
        if self._manager is None:
            from agentls import __version__
            from agentls.features.mcp.manager import McpManager

            environ = self._host.environ if self._host and self._host.environ is not None \
                else os_environ()
            settings = self._host.settings if self._host else None
            self._manager = McpManager(
                environ=environ,
                hidden_env=provider_key_names(settings.api_key_env if settings else None),
                client_version=__version__)
        return self._manager

    async def start(self, host: Any) -> None:
        """Apply the settings' (and the trusted workspace file's) servers, in
        the background; ask about a new workspace file once."""
        self._host = host
        if self._manager is not None:  # apiKeyEnv may have changed
            self._manager.hidden_env = provider_key_names(host.settings.api_key_env)
        self._workspace = read_workspace_file(host.workspace_root)
        self._workspace_state = self._trust_state()
        for problem in self._workspace.problems if self._workspace else []:
            log.warning("%s", problem)
        if self._workspace_state == "pending":
            self._ask_about_workspace()
        self._specs = self._wanted()
        self._spawn(self._apply())
        self.started.set()

    def _wanted(self) -> list[Any]:
        specs, invalid = server_specs(self._host.settings.mcp_servers, self._workspace,
                                      workspace_trusted=self._workspace_state == "allowed")
        self._invalid = invalid
        for _, problem in invalid:
            if problem not in self._told:
                self._told.add(problem)
                log.warning("%s", problem)
                if self._host.display is not None:
                    self._spawn(self._host.display.show_message(
                        f"agentls settings: {problem}", "error"))
        return specs

    def _trust_state(self) -> str:
        ws = self._workspace
        if ws is None or not ws.servers:
            return "none"
        store = self._host.trust_store if self._host else None
        decision = store.decision(ws.file, ws.digest, TRUST_KIND) if store else None
        return {"trusted": "allowed", "refused": "refused"}.get(decision or "", "pending")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply(self) -> None:
        if self._apply_lock is None:
            self._apply_lock = asyncio.Lock()
        async with self._apply_lock:
            specs = self._specs = self._wanted()
            if not specs and self._manager is None:
                return  # nothing configured: do not even import the SDK
            try:
                await self.manager.apply(specs)
            except Exception:
                log.exception("Applying the MCP server settings failed")

    def _ask_about_workspace(self) -> None:
        ws = self._workspace
        host = self._host
        if ws is None or host is None or ws.digest in self._asked:
            return
        if host.trust is None:
            return  # nobody to ask (the CLI): the servers stay off
        self._asked.add(ws.digest)
        self._spawn(self._ask(ws))

    def trust_question(self, ws: WorkspaceServers) -> Any:
        """The `.mcp.json` question: every server whole (core/trust_display)."""
        from agentls.core.trust.display import env_references, server_block_lines, visible
        from agentls.core.trust.question import TrustQuestion

        mine = set(self._host.settings.mcp_servers) if self._host else set()
        started = {s.name for s in ws.servers}
        body: list[str] = []
        for name, block in ws.blocks.items():
            note = (" (not started: your settings have a server of this name)" if name in mine
                    else "" if name in started else " (not started: invalid, see the log)")
            body += server_block_lines(name, block, note)
        count = len(ws.blocks)
        sends = sorted({ref for block in ws.blocks.values() if isinstance(block, dict)
                        for ref in env_references([block.get("env"), block.get("headers")])})
        summary = (f"{count} server{'s' if count != 1 else ''}: "
                   f"{', '.join(visible(name) for name in ws.blocks)}"
                   + (f"; they send your {', '.join(sends)}" if sends else ""))
        return TrustQuestion(
            file=str(ws.file), digest=ws.digest, kind=TRUST_KIND,
            heading=f"{visible(str(ws.file))} wants agentls to start these MCP servers:",
            body=body,
            footer=("Each runs as a program on this computer with your permissions and your "
                    "environment (minus the model providers' API keys unless its env names "
                    "one), or connects to that URL with those headers. A file that came with "
                    "a repository should not start programs by itself. Allow this content of "
                    "the file?"),
            summary=summary, allow_label=ALLOW, refuse_label=DONT_ALLOW,
            link_target=ws.link_target, outside=ws.outside)

    async def _ask(self, ws: WorkspaceServers) -> None:
        try:
            decision = await self._host.trust.ask(self.trust_question(ws))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("Asking about %s failed: %s", ws.file, exc)
            return
        if decision is None:
            log.info("Question about %s dismissed; its servers stay off", ws.file)
            return
        if self._workspace is ws:
            self._workspace_state = "allowed" if decision == "trusted" else "refused"
            await self._apply()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._manager is not None:
            await self._manager.aclose()

    # -- contributions ---------------------------------------------------------
    def tool_plugins(self) -> list[Any]:
        from agentls.features.mcp.tools import McpTools

        return [McpTools(self.manager)]

    def hook_modules(self) -> list[Any]:
        return [McpHooks(self)]

    def status(self) -> dict[str, Any]:
        entries = self._manager.status() if self._manager is not None else []
        # Wanted but not applied yet (the background apply has not run): starting.
        known = {e["name"] for e in entries}
        entries += [{"name": s.name, "state": "starting", "tools": [], "origin": s.origin,
                     "transport": s.config.transport}
                    for s in self._specs if s.name not in known]
        entries += [{"name": name, "state": "failed", "tools": [], "origin": "settings",
                     "error": problem} for name, problem in self._invalid]
        ws = self._workspace
        if ws is not None and self._workspace_state in ("pending", "refused"):
            running = {e["name"] for e in entries}
            why = ("waiting for you to allow " if self._workspace_state == "pending"
                   else "you did not allow ") + f"{ws.file}"
            entries += [{"name": s.name, "state": "stopped", "tools": [],
                         "origin": "workspace", "pending": True, "error": f"not started: {why}"}
                        for s in ws.servers if s.name not in running]
        return {"mcp": entries}

    # -- templates and completions --------------------------------------------
    def list_templates(self, config: dict[str, Any]) -> list[dict[str, Any]]:
        if self._manager is None:
            return []
        found = []
        for exposed, (server, raw) in sorted(self._manager.prompts.items()):
            text = self._manager.prompt_text(exposed) or ""
            description = str(raw.get("description") or f"MCP prompt {raw['name']}")
            found.append({"name": exposed, "description": f"{description} (MCP {server})",
                          "template": text, "source": "mcp"})
        return found

    def get_completions(self, config: dict[str, Any], text: str) -> list[dict[str, Any]]:
        if self._manager is None:
            return []
        line_start = text.rfind("\n") + 1
        slash = _SLASH.search(text[line_start:])
        if slash is not None:
            partial = slash.group(1).lower()
            return [{"replacement": f"/{t['name']}", "start": line_start + slash.start(),
                     "display": f"/{t['name']}", "display_meta": t["description"],
                     "kind": "snippet", "type": "mcp_prompt", "name": t["name"],
                     "documentation": t["template"]}
                    for t in self.list_templates(config) if t["name"].lower().startswith(partial)]
        resources = self._manager.resources()
        if not resources:
            return []
        typing = _TYPING.search(text)
        if typing is None:
            return complete_mention_prefix(
                text, _TYPING_PREFIX, MENTION_PREFIX, "mention an MCP resource")
        query = typing.group(1).lower()
        items = []
        for server, resource in resources:
            mention = f"{MENTION_PREFIX}{server}:{resource['uri']}"
            label = str(resource.get("name") or resource["uri"])
            if query and query not in mention.lower()[len(MENTION_PREFIX):] \
                    and query not in label.lower():
                continue
            items.append({"replacement": mention, "start": typing.start(), "display": label,
                          "display_meta": f"MCP {server}: {resource['uri']}",
                          "kind": "reference", "type": "mcp_resource"})
        return items[:50]

    def apply_completion(self, config: dict[str, Any], text: str,
                         completion: dict[str, Any]) -> str:
        if completion.get("type") == "mcp_prompt" and self._manager is not None:
            return self._manager.prompt_text(str(completion.get("name"))) or ""
        return str(completion.get("replacement") or "")


class McpHooks:
    """prompt:submit: wait (bounded) for servers still starting, and attach
    the content of `@mcp:<server>:<uri>` mentions."""

    name = "mcp-resources"
    version = "0.1.0"

    def __init__(self, feature: McpFeature) -> None:
        self.feature = feature

    def register(self, hooks: HookRegistry, context: HookContext) -> None:
        # Imported here: hooks are registered for a chat turn; the feature's
        # start, in every session, must not import the pydantic models.
        from agentls.core.types.messages import HookResult

        async def attach(event: str, data: dict[str, Any]) -> HookResult:
            prompt = data.get("prompt")
            if not self.feature.started.is_set() and context.settings.mcp_servers:
                # A prompt sent in the first seconds, before the server
                # started its features (lsp/lifecycle.py): wait for that.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.feature.started.wait(), 5)
            manager = self.feature._manager
            if not isinstance(prompt, str) or manager is None:
                return HookResult()
            if any(c.state == "starting" for c in manager.connections.values()):
                # A prompt sent right after the editor started: let the
                # servers finish starting (bounded) so their tools are offered.
                await manager.wait_settled(TURN_WAITS_FOR_STARTING_SECONDS)
            mentions = list(dict.fromkeys(find_resource_mentions(prompt)))
            if not mentions:
                return HookResult()
            blocks = []
            for server, uri in mentions[:MAX_RESOURCE_MENTIONS]:
                blocks.append(await _resource_block(manager, server, uri,
                                                    context.workspace_folders))
            return HookResult(action="modify",
                              data={**data, "prompt": prompt + "\n\n" + "\n".join(blocks)})

        hooks.register("prompt:submit", attach, priority=10, name="mcp-resources")


async def _resource_block(manager: Any, server: str, uri: str,
                          folders: list[Path] | None = None) -> str:
    from agentls.features.mcp.connection import McpCallError
    from agentls.features.mcp.results import attachable_contents, render_content, withheld_resource

    conn = manager.connections.get(server)
    if conn is None:
        return f'<resource server="{server}" uri="{uri}" error="no MCP server named {server}"/>'
    why = withheld_resource(uri, folders or [])  # the secret-file rule, as for read_file
    if why is not None:
        return f'<resource server="{server}" uri="{uri}" error="not attached: {why}"/>'
    try:
        result = await conn.read_resource(uri)
    except McpCallError as exc:
        return f'<resource server="{server}" uri="{uri}" error="{exc}"/>'
    contents, withheld = attachable_contents(result.get("contents"), folders or [])
    parts = withheld + render_content([{"type": "resource", "resource": c} for c in contents])
    text = "\n".join(parts)
    if len(text) > RESOURCE_MAX_CHARS:
        text = text[:RESOURCE_MAX_CHARS] + "\n[... cut by agentls]"
    return f'<mcp_resource server="{server}" uri="{uri}">\n{text}\n</mcp_resource>'


# Re-exported for the docs and the CLI.
WORKSPACE_FILE_NAME = WORKSPACE_FILE
