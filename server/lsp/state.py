"""What one server process knows: settings (with their sources), the plugin
registry, the provider, the session store, counters. Built lazily, so the
first `initialize` answer does not wait for any of it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentls.core.edit_history import EditHistory
    from agentls.core.orchestrator import Orchestrator
    from agentls.core.progress import ProgressSink
    from agentls.core.provider import Provider
    from agentls.core.registry import PluginRegistry
    from agentls.core.session_store import SessionStore
    from agentls.core.settings import AgentlsSettings, LoadedSettings, SettingsProblem
    from agentls.core.workspace_trust import TrustStore

    from .channels import TurnWiring

log = logging.getLogger("agentls.lsp.state")

# Settings whose change means the provider must be rebuilt.
_PROVIDER_KEYS = ("provider", "model", "baseUrl", "apiKeyEnv", "providerOptions",
                  "requestTimeoutSeconds", "connectTimeoutSeconds")


@dataclass
class CompletionCounters:
    served: int = 0  # non-empty inline completion answers
    shown: int = 0  # textDocument/didShowCompletion received
    accepted: int = 0  # agentls.inlineCompletionAccepted run

    def to_wire(self) -> dict[str, int]:
        return {"served": self.served, "shown": self.shown, "accepted": self.accepted}


@dataclass
class PromptCounters:
    """What inline completion sent to the model (agentls/status
    `inlinePrompts`; read by `agentls eval`)."""

    requests: int = 0  # model calls
    chars: int = 0  # prompt characters
    input_tokens: int = 0  # as the provider reported (0 when it does not)

    def to_wire(self) -> dict[str, int]:
        return {"requests": self.requests, "chars": self.chars,
                "inputTokens": self.input_tokens}


@dataclass
class NextEditCounters:
    served: int = 0  # non-empty copilotInlineEdit answers
    accepted: int = 0  # agentls.nextEditAccepted run

    def to_wire(self) -> dict[str, int]:
        return {"served": self.served, "accepted": self.accepted}


class ServerState:
    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        self.environ = environ
        # The plugin registry, the trust store and the settings are built on
        # first use, after the initialize answer: pydantic, the entry-point
        # scan and the settings files are not needed to answer it.
        self._registry: PluginRegistry | None = None
        self.init_options: dict[str, Any] = {}
        self.workspace_config: dict[str, Any] = {}
        self.workspace_root: Path | None = None  # the first workspace folder
        self.workspace_folders: list[Path] = []
        # The user's workspace-trust decisions (user state dir, never the workspace).
        self._trust_store: TrustStore | None = None
        self._loaded: LoadedSettings | None = None
        # feature(): the plugins found by name, for the settings load they were found under.
        self._features_for: tuple[object, dict[str, Any]] = (None, {})
        self.counters = CompletionCounters()
        self.next_edit_counters = NextEditCounters()
        self.prompt_counters = PromptCounters()
        self._edit_history: EditHistory | None = None
        self._provider: Provider | None = None
        self._retired: list[Provider] = []  # replaced providers, closed by lifecycle
        self._provider_error: str | None = None
        # Where providers show downloads and slow loads (lsp/progress.py).
        self.progress: ProgressSink | None = None
        self._store: SessionStore | None = None
        self._told: set[str] = set()
        # Settings problems shown at the last report (lifecycle.report_problems).
        self.reported_problems: set[str] = set()
        # Agent turns: one orchestrator per process (get_orchestrator), wired to
        # the client by agentls.lsp.chat.
        self.orchestrator: Orchestrator | None = None
        self.turn_wiring: TurnWiring | None = None
        self._orchestrator_inputs: tuple[object, ...] = ()
        # Set once the first inline completion was answered (lsp.inline).
        self.inline_warm: Any = None

    # -- settings --------------------------------------------------------------
    @property
    def registry(self) -> PluginRegistry:
        if self._registry is None:
            from agentls.core.registry import PluginRegistry

            self._registry = PluginRegistry.discover()
        return self._registry

    @property
    def trust_store(self) -> TrustStore:
        if self._trust_store is None:
            from agentls.core.workspace_trust import TrustStore

            self._trust_store = TrustStore.default(self.environ)
        return self._trust_store

    @property
    def loaded(self) -> LoadedSettings:
        if self._loaded is None:
            self.reload_settings()
        assert self._loaded is not None
        return self._loaded

    @property
    def settings(self) -> AgentlsSettings:
        return self.loaded.settings

    def set_init_options(self, options: Mapping[str, Any]) -> None:
        """initializationOptions, read with the other sources on first use."""
        self.init_options = dict(options)
        self._loaded = None

    def reload_settings(
        self,
        *,
        init_options: Mapping[str, Any] | None = None,
        workspace_config: Mapping[str, Any] | None = None,
    ) -> list[SettingsProblem]:
        """Re-read every source. Invalid values fall back per key, so the
        result is always usable; the problems are for the user to fix."""
        if init_options is not None:
            self.init_options = dict(init_options)
        if workspace_config is not None:
            self.workspace_config = dict(workspace_config)
        # The registry's entry-point scan first: it also answers pydantic's
        # plugin scan, which importing the settings schema would start.
        provider_names = self.registry.names("provider")
        from agentls.core.settings import load_settings

        previous = self._loaded
        before = ({k: previous.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
                  if previous is not None else None)
        self._loaded = load_settings(
            init_options=self.init_options,
            workspace_config=self.workspace_config,
            environ=self.environ,
            workspace_root=self.workspace_root,
            trust_store=self.trust_store,
            provider_names=provider_names,
        )
        after = {k: self._loaded.settings.to_wire().get(k) for k in _PROVIDER_KEYS}
        if before is not None and before != after:
            self.drop_provider()
        return list(self._loaded.problems)

    # -- the user's edits (next edit suggestions) --------------------------------
    @property
    def edit_history(self) -> EditHistory:
        if self._edit_history is None:
            from agentls.core.edit_history import EditHistory

            self._edit_history = EditHistory()
        return self._edit_history

    # -- provider ----------------------------------------------------------------
    def provider(self) -> Provider:
        """The configured provider, built on first use. AgentlsError with
        what to change when it cannot be built."""
        if self._provider is None:
            try:
                from agentls.app import build_provider

                self._provider = build_provider(self.settings, self.registry)
                self._provider_error = None
                attach = getattr(self._provider, "attach_progress", None)
                if self.progress is not None and callable(attach):
                    attach(self.progress)
            except Exception as exc:  # AgentlsError saying what to change
                self._provider_error = str(exc)
                raise
        return self._provider

    def drop_provider(self) -> None:
        """Forget the provider (settings changed); it is closed in the background
        by whoever holds the event loop (see lifecycle)."""
        old, self._provider = self._provider, None
        if old is not None:
            self._retired.append(old)

    def take_retired_providers(self) -> list[Provider]:
        retired = list(self._retired)
        self._retired.clear()
        return retired

    # -- sessions ------------------------------------------------------------------
    def store(self) -> SessionStore:
        if self._store is None:
            from agentls.core.session_store import SessionStore

            self._store = SessionStore.open_default(self.environ or _os_environ())
        return self._store

    def close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- plugins -------------------------------------------------------------------
    def feature_config(self) -> dict[str, Any]:
        """The `config` dict every FeaturePlugin/ToolPlugin hook receives."""
        return {
            "settings": self.settings.to_wire(),
            "workspace_root": str(self.workspace_root) if self.workspace_root else None,
            "workspace_folders": [str(p) for p in self.workspace_folders],
        }

    def features(self) -> list[Any]:
        """Enabled feature plugins, by priority (features.disabled applies)."""
        config = self.feature_config()
        return self.registry.enabled(
            "feature", config, tags=self.registry.collect_tags(config),
            disabled=self.settings.features.disabled,
        )

    def feature(self, name: str, method: str) -> Any | None:
        """One enabled feature plugin by name that has `method` (None when
        off, missing or without it), without loading the others unless its
        enablement needs their tags. Looked up once per settings load: the
        per-keystroke handlers ask on every request."""
        loaded = self.loaded
        if self._features_for[0] is not loaded:
            self._features_for = (loaded, {})
        known = self._features_for[1]
        if name not in known:
            found = self.registry.enabled_one(
                "feature", name, self.feature_config(), disabled=self.settings.features.disabled,
            )
            known[name] = found if callable(getattr(found, method, None)) else None
        return known[name]

    def tools(self) -> list[Any]:
        """Enabled tool plugins (features.disabled applies to them too), and
        those the enabled features contribute (MCP servers' tools)."""
        config = self.feature_config()
        return [*self.registry.enabled(
            "tool", config, tags=self.registry.collect_tags(config),
            disabled=self.settings.features.disabled,
        ), *self.contributed("tool_plugins")]

    def contributed(self, method: str) -> list[Any]:
        """What enabled features offer through an optional `method()`
        (core/feature_host.py: tool_plugins, hook_modules)."""
        found: list[Any] = []
        for feature in self.features():
            offer = getattr(feature, method, None)
            if not callable(offer):
                continue
            try:
                found.extend(offer() or [])
            except Exception:
                log.exception("%s of feature %s failed; skipped", method,
                              getattr(feature, "name", feature))
        return found

    async def warm_up(self, limit: float = 2.0) -> None:
        """Until the first inline completion was answered, at most `limit` s."""
        import asyncio

        if self.inline_warm is None:
            self.inline_warm = asyncio.Event()
        try:
            await asyncio.wait_for(self.inline_warm.wait(), limit)
        except TimeoutError:
            pass

    def feature_host(self, wiring: Any = None, trust: Any = None) -> Any:
        """What long-running features get at start (core/feature_host.py);
        `trust`: the TrustAsker workspace-trust questions go through."""
        from agentls.core.feature_host import FeatureHost

        wiring = wiring or self.turn_wiring
        return FeatureHost(
            settings=self.settings,
            workspace_folders=list(self.workspace_folders),
            approval=wiring.approval if wiring else None,
            display=wiring.display if wiring else None,
            trust_store=self.trust_store,
            trust=trust,
            environ=self.environ,
        )

    # -- agent turns -----------------------------------------------------------------
    def hook_modules(self) -> list[Any]:
        """Enabled hook modules (policy rules, linters, ...), and those the
        enabled features contribute."""
        config = self.feature_config()
        return [*self.registry.enabled(
            "hook", config, tags=self.registry.collect_tags(config),
            disabled=self.settings.features.disabled,
        ), *self.contributed("hook_modules")]

    def build_hooks(self) -> Any:
        """A HookRegistry with every enabled hook module registered against
        the current settings and LSP wiring."""
        from agentls.core.hook_modules import HookContext, register_hook_modules

        wiring = self.turn_wiring
        context = HookContext(
            settings=self.settings,
            workspace_folders=list(self.workspace_folders),
            documents=wiring.snapshots if wiring else None,
            display=wiring.display if wiring else None,
            approval=wiring.approval if wiring else None,
            publish_diagnostics=wiring.publish_diagnostics if wiring else None,
        )
        return register_hook_modules(self.hook_modules(), context)

    def get_orchestrator(self) -> Orchestrator:
        """The turn loop, built on first use. After a settings change (new
        provider, tools or limits) the same object is re-pointed rather than
        replaced, so running turns stay cancellable and the per-session
        statuses of this process are kept. AgentlsError when the provider
        cannot be built."""
        provider = self.provider()
        inputs = (provider, self.loaded, tuple(self.workspace_folders), self.turn_wiring)
        if self.orchestrator is not None and all(
            a is b for a, b in zip(inputs, self._orchestrator_inputs, strict=True)
        ):
            return self.orchestrator
        from agentls.core.injections import InjectionLimits
        from agentls.core.orchestrator import Orchestrator, TurnLimits
        from agentls.core.tools import ToolExecutor

        session = self.settings.session
        wiring = self.turn_wiring
        if self.orchestrator is None:
            from agentls.core.checkpoint_store import CheckpointStore

            store = self.store()
            self.orchestrator = Orchestrator(provider, sink=store)
            self.orchestrator.checkpoints = CheckpointStore(store)
        core = self.orchestrator
        core.provider = provider
        core.model = self.settings.model
        core.tools = ToolExecutor(self.tools(), self.feature_config())
        # Enforced on the stream (closing the HTTP call stops the server's
        # generation too), not sent as max_tokens: providers keep their own
        # per-model defaults (the local provider's small one, Anthropic's
        # per-model maximum, providerOptions.maxTokens) and models that reject
        # max_tokens (OpenAI o-series) keep working.
        core.output_cap = session.max_output_tokens
        core.limits = TurnLimits(
            max_iterations=session.max_iterations,
            max_tool_result_chars=session.max_tool_result_chars,
            injection=InjectionLimits(
                size_limit=session.injection_size_limit,
                budget_per_turn=session.injection_budget_per_turn,
            ),
        )
        core.workspace = str(self.workspace_root) if self.workspace_root else None
        from agentls.core.instructions import ProjectInstructions

        # The secret-file rule every file text sent to the model goes through
        # (composition; the shape issue moves this into app.py).
        from agentls.features.sensitive_paths import ModelFileAccess

        core.context.window_override = self.settings.context_window
        core.context.instructions = ProjectInstructions(
            self.workspace_root, self.settings.instructions.files,
            reader=ModelFileAccess(self.workspace_folders or
                                   ([self.workspace_root] if self.workspace_root else [])),
        )
        if wiring is not None:
            core.gate = wiring.gate  # shared with the edit applier
        core.approval = wiring.approval if wiring else None
        core.display = wiring.display if wiring else None
        core.tool_context = {
            "workspace_folders": [str(p) for p in self.workspace_folders],
            "documents": wiring.documents if wiring else None,
            "snapshots": wiring.snapshots if wiring else None,
            "editor": wiring.editor if wiring else None,
        }
        core.hooks = self.build_hooks()
        self._orchestrator_inputs = inputs
        return core

    def session_statuses(self) -> list[Any]:
        """SessionStatus of the sessions this process ran (filled by chat)."""
        orchestrator = getattr(self, "orchestrator", None)
        return list(orchestrator.statuses()) if orchestrator is not None else []

    # -- user notices ----------------------------------------------------------------
    def first_time(self, key: str) -> bool:
        """True once per key: errors the user can act on are shown once, not
        per keystroke."""
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def forget_notice(self, key: str) -> None:
        self._told.discard(key)


def _os_environ() -> Mapping[str, str]:
    import os

    return os.environ
