"""Recommended models to download, by purpose and by the machine's memory.

The packaged models (catalog.py) stay the no-download default; these are the
next step, the way Ollama users `ollama pull qwen2.5-coder:7b`: a chat model
that calls tools reliably and a code model trained for fill-in-the-middle,
each in a size for 8, 16 and 32 GB machines. Sizes are the hub's file
sizes (rounded); `min_memory` is the total RAM we ask for so the model, its
KV cache, the editor and the browser fit together.

Qwen2.5-Coder because it is the family llama.cpp's own editor plugins
(llama.vim / llama.vscode) recommend: the base models are trained for FIM
with <|fim_prefix|> tokens, the instruct models follow tool-call prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Purpose = Literal["chat", "completion"]
_GB = 1_000_000_000


@dataclass(frozen=True)
class RecommendedModel:
    ref: str  # what `model` / inlineCompletion.model takes
    purpose: Purpose
    display_name: str
    file_size: int  # bytes, as the hub lists the file
    min_memory: int  # bytes of total RAM we recommend it for
    context_window: int  # trained context
    default_n_ctx: int  # what we allocate by default (KV cache)
    fim: bool
    tools: bool

    def to_wire(self) -> dict[str, object]:
        return {
            "model": self.ref,
            "purpose": self.purpose,
            "displayName": self.display_name,
            "sizeBytes": self.file_size,
            "minMemoryBytes": self.min_memory,
            "contextWindow": self.context_window,
            "nCtx": self.default_n_ctx,
            "capabilities": (["fim"] if self.fim else []) + (["tools"] if self.tools else []),
            "download": f"agentls pull {self.ref}",
        }


RECOMMENDED: tuple[RecommendedModel, ...] = (
    RecommendedModel(
        ref="hf:bartowski/Qwen2.5-Coder-3B-Instruct-GGUF:Q4_K_M",
        purpose="chat",
        display_name="Qwen2.5-Coder 3B Instruct (Q4_K_M)",
        file_size=int(1.93 * _GB),
        min_memory=8 * _GB,
        context_window=32768,
        default_n_ctx=8192,
        fim=False,
        tools=True,
    ),
    RecommendedModel(
        ref="hf:bartowski/Qwen2.5-Coder-7B-Instruct-GGUF:Q4_K_M",
        purpose="chat",
        display_name="Qwen2.5-Coder 7B Instruct (Q4_K_M)",
        file_size=int(4.68 * _GB),
        min_memory=24 * _GB,
        context_window=32768,
        default_n_ctx=16384,
        fim=False,
        tools=True,
    ),
    RecommendedModel(
        ref="hf:ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF",
        purpose="completion",
        display_name="Qwen2.5-Coder 0.5B base (Q8_0, FIM)",
        file_size=int(0.53 * _GB),
        min_memory=4 * _GB,
        context_window=32768,
        default_n_ctx=4096,
        fim=True,
        tools=False,
    ),
    RecommendedModel(
        ref="hf:ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF",
        purpose="completion",
        display_name="Qwen2.5-Coder 1.5B base (Q8_0, FIM)",
        file_size=int(1.65 * _GB),
        min_memory=12 * _GB,
        context_window=32768,
        default_n_ctx=4096,
        fim=True,
        tools=False,
    ),
    RecommendedModel(
        ref="hf:ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF",
        purpose="completion",
        display_name="Qwen2.5-Coder 3B base (Q8_0, FIM)",
        file_size=int(3.29 * _GB),
        min_memory=24 * _GB,
        context_window=32768,
        default_n_ctx=4096,
        fim=True,
        tools=False,
    ),
)


# The one to name in messages: fits 8 GB machines. The chat list starts one
# size above the packaged 1.5B (`qwen2.5-coder-1.5b`): recommending another
# publisher's GGUF of the same model would bring nothing.
RECOMMENDED_CHAT = RECOMMENDED[0].ref


def recommended_for(total_memory: int | None) -> dict[Purpose, RecommendedModel]:
    """For each purpose, the largest recommended model this much RAM takes
    (the smallest when the memory is unknown or below every threshold)."""
    chosen: dict[Purpose, RecommendedModel] = {}
    for purpose in ("chat", "completion"):
        candidates = sorted(
            (m for m in RECOMMENDED if m.purpose == purpose), key=lambda m: m.min_memory
        )
        fitting = [m for m in candidates if total_memory and m.min_memory <= total_memory]
        chosen[purpose] = fitting[-1] if fitting else candidates[0]
    return chosen


def recommended_entry(ref: str) -> RecommendedModel | None:
    return next((m for m in RECOMMENDED if m.ref == ref), None)
