"""What a long-running feature plugin gets from the server when it starts
(the MCP client is the first: it owns processes that live as long as the
language server).

A feature that defines `async start(host: FeatureHost)` (the `Startable`
capability, core/plugins/capabilities.py) gets one after the settings were read and
again after every settings change; `aclose()` (`Closable`) at shutdown. What
it may offer back (tool plugins, hook modules, `status()` keys) is listed
in core/plugins/capabilities.py.

Core stays free of LSP: the host carries the core's channel interfaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentls.core.approval.gate import ApprovalChannel, DisplayChannel
    from agentls.core.settings.schema import AgentlsSettings
    from agentls.core.trust.question import TrustAsker
    from agentls.core.trust.workspace import TrustStore

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
    # Asks a workspace file's trust question through the host's one approval
    # gate (core/trust/question.py); None: nothing is asked (the CLI).
    trust: TrustAsker | None = None
    environ: Mapping[str, str] | None = None

    @property
    def workspace_root(self) -> Path | None:
        return self.workspace_folders[0] if self.workspace_folders else None
