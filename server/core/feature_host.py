"""What a long-running feature plugin gets from the server, and what it may
offer back (the MCP client is the first: it owns processes that live as
long as the language server).

A FeaturePlugin may define any of these optional methods; the server calls
them when present (agentls.lsp.lifecycle / status / state):

- `async start(host: FeatureHost)`: after the settings were read at
  `initialized` and the first inline completion was answered (or 2 s
  passed), and again after every settings change. Must return quickly:
  slow work (starting processes) goes into the plugin's own background
  tasks, so initialize and inline completion never wait for it.
- `async aclose()`: at shutdown; stop every process the plugin started.
- `status() -> dict`: keys added to `agentls/status` (e.g. `mcp`).
- `tool_plugins() -> list`: ToolPlugins it contributes (alongside the
  `agentls.tools` entry points); those with `tools_version` may change
  their tools at run time (core/tools.py).
- `hook_modules() -> list`: hook modules it contributes (register(hooks,
  context), as the `agentls.hooks` entry points).

Core stays free of LSP: the host carries the core's channel interfaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .approval import ApprovalChannel, DisplayChannel
    from .settings import AgentlsSettings
    from .trust_question import TrustAsker
    from .workspace_trust import TrustStore

__all__ = ["FeatureHost"]


@dataclass
class FeatureHost:
    settings: AgentlsSettings
    workspace_folders: list[Path]
    # Ask the user (window/showMessageRequest in the editor); None when no
    # client is attached (the CLI), in which case nothing is asked.
    approval: ApprovalChannel | None = None
    display: DisplayChannel | None = None
    trust_store: TrustStore | None = None
    # Asks a workspace file's trust question through the server's approval
    # gate (core/trust_question.py); None: nothing is asked (the CLI).
    trust: TrustAsker | None = None
    environ: Mapping[str, str] | None = None
    # Called (no arguments) when what the plugin offers changed (tools,
    # templates, status), so the client can be told.
    changed: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def workspace_root(self) -> Path | None:
        return self.workspace_folders[0] if self.workspace_folders else None
