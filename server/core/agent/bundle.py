"""The agent a front runs turns with, as one frozen value.

`AgentBundle` is everything a turn needs that the settings decide: the
provider and model, the tools, the hook handlers, the chat's prompt
enrichers, the limits, the context settings, the workspace, and the
editor's channels. `agentls.app.build_agent` is the one function that makes
it (from settings, the plugin registry and the channels); the language
server holds one and swaps it when the settings change, the CLI and the
autogen adapter build theirs the same way. The Orchestrator receives it
(`Orchestrator(bundle)`, `Orchestrator.use(bundle)`); a running turn keeps
the bundle it started with.

`EditorChannels` is what a front lends the agent: the approval channel and
the one approval gate, the display, the edit applier, the document lookups
and diagnostics publishing. Core sees these interfaces only; the LSP layer
implements them (lsp/agent/channels.py, lsp/agent/edits.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentls.core.approval.gate import ApprovalChannel, ApprovalGate, DisplayChannel
from agentls.core.context.system_prompt import default_system_prompt
from agentls.core.support.size_caps import DEFAULT_MAX_TOOL_RESULT_CHARS

if TYPE_CHECKING:
    from agentls.core.approval.documents import DocumentOpener
    from agentls.core.context.instructions import ProjectInstructions
    from agentls.core.editor.edits import DocumentLookup, EditApplier
    from agentls.core.editor.prompt_enrichment import PromptEnricher
    from agentls.core.editor.reply_edits import ReplyEditor
    from agentls.core.plugins.hooks import HookRegistry
    from agentls.core.plugins.injections import InjectionLimits
    from agentls.core.provider.contract import Provider, ToolSpec
    from agentls.core.tools.executor import ToolExecutor

__all__ = ["AgentBundle", "ContextSettings", "EditorChannels", "TurnLimits"]

# Imported by the LSP layer at start-up (EditorChannels): the turn's
# machinery (tools, hooks, pydantic models) is imported when a bundle is
# made, not with this module.

# publish_diagnostics(uri, diagnostics: list[LSP Diagnostic dict], version)
PublishDiagnostics = Callable[[str, list[dict[str, Any]], "int | None"], None]


@dataclass(frozen=True)
class TurnLimits:
    max_iterations: int = 25
    injection: InjectionLimits = field(default_factory=lambda: _injection_limits())
    # Tool results over this many characters keep head and tail (size_caps).
    max_tool_result_chars: int | None = DEFAULT_MAX_TOOL_RESULT_CHARS
    # Runs of the tests that check a reply's edits, per turn (ReplyEdits.checks).
    test_after_edits: int = 1


@dataclass(frozen=True)
class EditorChannels:
    """The editor's side of a turn, as core interfaces. Every field may be
    missing (the CLI, the autogen adapter and unit tests have no editor):
    then nothing is asked (the gate denies), shown or applied."""

    approval: ApprovalChannel | None = None
    # The one approval gate: the orchestrator (ask_user) and the edit
    # applier (file changes) share it, so "Allow for session" answers are
    # one memory. Its channel is `approval` when that is given.
    gate: ApprovalGate = field(default_factory=ApprovalGate)
    display: DisplayChannel | None = None
    # Opens a question too long for a message in the editor (the gate's
    # `opener` when given; core/approval/documents.py).
    opener: DocumentOpener | None = None
    # path -> the text of the open buffer with that path, or None.
    documents: Callable[[Path], str | None] | None = None
    # The edit applier (approval + workspace/applyEdit) and the versioned
    # document lookup the file tools build edits against.
    editor: EditApplier | None = None
    snapshots: DocumentLookup | None = None
    publish_diagnostics: PublishDiagnostics | None = None

    def __post_init__(self) -> None:
        if self.approval is not None:
            self.gate.channel = self.approval
        if self.opener is not None:
            self.gate.opener = self.opener


@dataclass(frozen=True)
class ContextSettings:
    """How requests are fitted to the model (core/context/fitting.py)."""

    window_override: int | None = None  # the `contextWindow` setting
    instructions: ProjectInstructions | None = None  # AGENTS.md and friends


@dataclass(frozen=True)
class AgentBundle:
    """One agent, frozen: what build_agent made from one set of inputs.

    Fields that hold objects (tools, hooks, the gate) are shared, not
    copied: the tool executor re-reads tools that change at run time, and
    the gate keeps the session's "Allow for session" answers."""

    provider: Provider
    model: str | None = None
    tools: ToolExecutor = field(default_factory=lambda: _no_tools())
    hooks: HookRegistry = field(default_factory=lambda: _no_hooks())
    # Feature contracts the chat uses, by plugin order (core/editor/prompt_enrichment.py).
    enrichers: tuple[PromptEnricher, ...] = ()
    # Edits written in the reply (core/editor/reply_edits.py; `session.editFormat`).
    reply_editor: ReplyEditor | None = None
    limits: TurnLimits = field(default_factory=TurnLimits)
    # Enforced on the stream whatever the request said (stream_guard); None:
    # max_tokens, if any.
    output_cap: int | None = None
    max_tokens: int | None = None  # sent with each request (None: the provider's default)
    # None: leave the orchestrator's context manager as it is.
    context: ContextSettings | None = None
    workspace: str | None = None  # the first workspace folder (system prompt)
    # None: not known here (tools fall back to the folders in their config).
    workspace_folders: tuple[str, ...] | None = None
    channels: EditorChannels = field(default_factory=EditorChannels)
    system_prompt: str | None = None  # None: the default one (core/context/system_prompt.py)
    # More keys for every tool call's context (an embedding application's
    # own); the keys above win over them.
    tool_context_extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gate(self) -> ApprovalGate:
        return self.channels.gate

    def model_name(self) -> str:
        """The model requests name: the bundle's, else the provider's default."""
        return self.model or getattr(self.provider, "default_model", "") or ""

    def offered_tools(self, attached: Sequence[str] = ()) -> list[ToolSpec]:
        """The tools the model is offered in a turn whose prompt carries the
        `attached` files: all but those the reply editor keeps from it (it
        still runs them for the reply's edits), or none when it says so."""
        specs = self.tools.specs
        editor = self.reply_editor
        if editor is None:
            return specs
        if not editor.offers_tools(attached):
            return []
        hidden = editor.hidden_tools()
        return [spec for spec in specs if spec.get("name") not in hidden]

    def system_text(self, attached: Sequence[str] = ()) -> str:
        """The system prompt sent: the bundle's own, else the default one for
        its workspace, offered tools and reply editor."""
        if self.system_prompt is not None:
            return self.system_prompt
        editor = self.reply_editor
        return default_system_prompt(
            workspace=self.workspace,
            tools=[spec["name"] for spec in self.offered_tools(attached)],
            extra=editor.instructions() if editor is not None else "",
        )

    def tool_context(self) -> dict[str, Any]:
        """What every tool call's context starts from (the turn adds the
        session, the trigger and the approval verdict)."""
        channels = self.channels
        context: dict[str, Any] = dict(self.tool_context_extra)
        if self.workspace_folders is not None:
            context["workspace_folders"] = list(self.workspace_folders)
        for key, value in (("documents", channels.documents), ("snapshots", channels.snapshots),
                           ("editor", channels.editor)):
            if value is not None:
                context[key] = value
        return context


def _injection_limits() -> InjectionLimits:
    from agentls.core.plugins.injections import InjectionLimits

    return InjectionLimits()


def _no_tools() -> ToolExecutor:
    from agentls.core.tools.executor import ToolExecutor

    return ToolExecutor([])


def _no_hooks() -> HookRegistry:
    from agentls.core.plugins.hooks import HookRegistry

    return HookRegistry()
