"""Hook modules: plugins that register hook handlers (policy rules,
linters, ...), found through the entry-point group `agentls.hooks`.

A hook module is a class (or instance) with a `name` and
`register(hooks, context)`; it registers its handlers on the HookRegistry
and keeps what it needs from the context. Policy lives here, in plugins and
settings; the kernel only dispatches (amplifier's kernel idea;
docs/architecture.md, "Style to follow").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentls.core.plugins.hooks import HookRegistry
from agentls.core.plugins.protocols import plugin_name

if TYPE_CHECKING:
    from agentls.core.approval.gate import ApprovalChannel, DisplayChannel
    from agentls.core.editor.edits import DocumentLookup
    from agentls.core.settings.schema import AgentlsSettings

__all__ = ["HookContext", "HookModule", "register_hook_modules"]

log = logging.getLogger("agentls.hook_modules")


@dataclass
class HookContext:
    """What a hook module may use. Anything LSP-specific (publishing
    diagnostics) comes in as a plain callable, so modules stay testable."""

    settings: AgentlsSettings
    workspace_folders: list[Path] = field(default_factory=list)
    documents: DocumentLookup | None = None
    display: DisplayChannel | None = None
    approval: ApprovalChannel | None = None
    # publish_diagnostics(uri, diagnostics: list[LSP Diagnostic dict], version)
    publish_diagnostics: Callable[[str, list[dict[str, Any]], int | None], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class HookModule(Protocol):
    name: str

    def register(self, hooks: HookRegistry, context: HookContext) -> None: ...


def register_hook_modules(
    modules: Sequence[Any], context: HookContext, *, hooks: HookRegistry | None = None
) -> HookRegistry:
    """A fresh registry with every module's handlers. A module that fails to
    register is logged and skipped: a broken linter must not stop turns."""
    hooks = hooks or HookRegistry()
    for module in modules:
        register: Callable[[HookRegistry, HookContext], None] | None = getattr(
            module, "register", None
        )
        if register is None:
            log.error("Hook module %s has no register(hooks, context); skipped",
                      plugin_name(module))
            continue
        try:
            register(hooks, context)
        except Exception:
            log.exception("Hook module %s failed to register; skipped", plugin_name(module))
    return hooks
