"""agentls/models for the `local` provider: the models this machine has,
each with the capabilities its GGUF shows (FIM tokens, a chat template for
chat and tools), and the recommended models to download (recommended.py).

A model without a chat template is listed without "chat" and "tools", so
an editor (or the user) sees before asking that it cannot drive the agent;
one whose template has no tool-call format (or whose template is replaced
by providerOptions.chat_format) gets "tools:grammar" instead of "tools":
its tool calls go through the JSON-schema grammar. `defaults.tool_format`
names the format ("hermes", "mistral", "llama3", or "grammar").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import agentls.providers.local.models.hub as hub
from agentls.core.types.messages import ModelInfo
from agentls.providers.local.choice import ModelChoice
from agentls.providers.local.models.catalog import CATALOG, _model_installed
from agentls.providers.local.models.downloads import DOWNLOADS
from agentls.providers.local.models.gguf_meta import ModelFacts
from agentls.providers.local.models.recommended import RECOMMENDED
from agentls.providers.local.process import _ChildSpec

_MAX_OUTPUT = 512


async def list_local_models(
    choice: ModelChoice, facts_of: Callable[[_ChildSpec], Awaitable[ModelFacts | None]]
) -> list[ModelInfo]:
    """The models of `choice` (the provider's options) and of this machine,
    each described by `facts_of` (its GGUF's facts, cached by the provider)."""
    models: list[ModelInfo] = []
    seen: set[str] = set()

    async def add(model_id: str, display_name: str, role: str, **defaults: object) -> None:
        if model_id in seen:
            return
        seen.add(model_id)
        spec = choice.spec(model_id, role)
        facts = await facts_of(spec)
        capabilities = ["streaming", *(facts.capabilities() if facts else ["completion"])]
        if spec.chat_format and "chat" not in capabilities:
            # A llama.cpp chat format stands in for the template; tools then
            # go through the grammar whatever the template could do.
            capabilities = [c for c in capabilities if c != "tools"]
            capabilities += ["chat", "tools:grammar"]
        elif spec.chat_format and "tools" in capabilities:
            capabilities[capabilities.index("tools")] = "tools:grammar"
        if facts is not None:
            defaults["tool_format"] = facts.tool_calling(spec.chat_format)
            defaults["trained_context"] = facts.context_length
            defaults["kv_cache_bytes"] = facts.kv_cache_bytes(spec.n_ctx)
            defaults["fim_tokens"] = facts.fim.family if facts.fim else None
        models.append(ModelInfo(
            id=model_id,
            display_name=display_name,
            context_window=spec.n_ctx,
            max_output_tokens=_MAX_OUTPUT,
            capabilities=capabilities,
            defaults={k: v for k, v in defaults.items() if v is not None},
        ))

    for entry in CATALOG.values():
        if _model_installed(entry.id):
            await add(entry.id, entry.display_name, "chat", use=entry.use, packaged=True)
    for custom in {p for p in (choice.model_path, choice.completion_model_path) if p}:
        await add(custom.stem, custom.name, "chat", path=str(custom))
    wanted = [choice.default_model, choice.default_completion_model]
    wanted += [job.ref.display for job in DOWNLOADS.jobs.values() if job.state == "ready"]
    for model_id in wanted:
        if hub.is_hf_reference(model_id):
            ref = hub.parse_hf_reference(model_id)
            path = hub.cached_path(ref)
            if path is not None:
                await add(ref.display, f"{ref.display} ({path.name})", "chat", path=str(path))
        elif model_id.endswith(".gguf"):
            await add(model_id, model_id, "chat", path=model_id)
    for recommended in RECOMMENDED:
        if recommended.ref in seen:
            continue
        downloaded = hub.cached_path(hub.parse_hf_reference(recommended.ref))
        if downloaded is not None:  # pulled earlier, not configured now
            await add(recommended.ref, recommended.display_name, "chat", path=str(downloaded),
                      recommended=True, purpose=recommended.purpose)
            continue
        capabilities = ["streaming", "completion"]
        capabilities += ["fim"] if recommended.fim else []
        capabilities += ["chat", "tools"] if recommended.tools else []
        models.append(ModelInfo(
            id=recommended.ref,
            display_name=recommended.display_name,
            context_window=recommended.default_n_ctx,
            max_output_tokens=_MAX_OUTPUT,
            capabilities=capabilities,
            defaults={
                "recommended": True,
                "downloaded": False,
                "purpose": recommended.purpose,
                "size_bytes": recommended.file_size,
                "min_memory_bytes": recommended.min_memory,
                "trained_context": recommended.context_window,
                "download": f"agentls pull {recommended.ref}",
                "tool_format": "hermes" if recommended.tools else None,
            },
        ))
    return models
