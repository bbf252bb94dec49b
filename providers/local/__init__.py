"""The `local` provider: llama.cpp (llama-cpp-python) running a small GGUF
model that a Python package ships, so a fresh install works offline with no
account and no key.

Out of process, on purpose: a native crash (llama.cpp segfaults on some CPUs
when built with the wrong flags) must never take down the editor's language
server. Each model runs in a child process, `python -m
agentls.providers.local serve ...`; every call is delegated to the `openai`
provider's HTTP code pointed at that child's loopback port, with the
child's token. With `local.shared` one model host per user runs them for all
of the user's agentls (shared/).

The modules, in the order a request meets them:

- provider.py: LocalProvider: the calls, and the limits (FIM only with the
  GGUF's FIM tokens, one tool call per reply without a native format).
- choice.py: providerOptions and which model serves a request (catalog id,
  .gguf path, `hf:` reference; the previous model serves during a download).
- catalog.py: the packaged models (Qwen2.5-Coder 0.5B for completion and
  1.5B for chat by default), and whether llama-cpp-python[server] is
  installed; packaged.py: finding their chunk packages, joining them once
  into the cache and checking the pinned SHA-256.
- hub.py, downloads.py: `hf:` models through huggingface_hub, in background
  threads with progress and cancel; pull.py: `agentls pull`;
  recommended.py: the models to download by purpose and memory.
- gguf_meta.py, fim.py: the GGUF header (architecture, KV-cache size, chat
  template, FIM tokens) and FIM prompts; listing.py: agentls/models.
- tool_format.py, chat_template.py, chat_tools.py: tool calls in the GGUF's
  own format (Hermes/Qwen, Mistral, Llama 3): detecting it, rendering the
  prompt with the GGUF's chat template, parsing the calls in the reply.
- tool_grammar.py: messages for a GGUF chat template, and tool calls through
  a JSON-schema grammar (the schema and the decoder of the reply), for
  models without a native format.
- child_calls.py: one call to a child (load progress, a restart when it
  died between requests, a crash or an overlong prompt explained).
- serving.py: which child serves each role, and the switch to a newly
  chosen model once it has loaded.
- process.py: starting, supervising and restarting the child processes,
  and leaving no orphans.
- shared/: the per-user model host, which holds one child per model for
  all of the user's agentls (host.py), and a child held through it
  (link.py: the socket checked, the host started when nobody answers).
- worker.py (run by __main__.py): the child itself.

Importing this package does not import llama_cpp (the extra may be absent):
only the child does.
"""

from __future__ import annotations

from agentls.providers.local.models.catalog import (
    CATALOG,
    CMAKE_ARGS,
    DEFAULT_CHAT_MODEL,
    DEFAULT_COMPLETION_MODEL,
    GEMMA3,
    INSTALL_COMMAND,
    PACKAGED,
    QWEN_05B,
    QWEN_15B,
    SMOLLM2,
    CatalogModel,
    gemma3_chunk_paths,
    installed_parts,
    locate_model_file,
    missing_runtime,
    runtime_error,
    smollm2_path,
)
from agentls.providers.local.models.catalog import GEMMA3_FILE as GEMMA3_FILE
from agentls.providers.local.models.catalog import SMOLLM2_FILE as SMOLLM2_FILE

# The children not yet reaped (the same dict, never rebound; tests read it).
from agentls.providers.local.process import _CHILDREN as _CHILDREN
from agentls.providers.local.provider import LocalProvider
from agentls.providers.local.tool_calls.grammar import (
    ToolReplyDecoder,
    to_local_messages,
    tool_reply_schema,
)

__all__ = [
    "CATALOG",
    "CMAKE_ARGS",
    "DEFAULT_CHAT_MODEL",
    "DEFAULT_COMPLETION_MODEL",
    "GEMMA3",
    "INSTALL_COMMAND",
    "PACKAGED",
    "QWEN_05B",
    "QWEN_15B",
    "SMOLLM2",
    "CatalogModel",
    "LocalProvider",
    "ToolReplyDecoder",
    "gemma3_chunk_paths",
    "installed_parts",
    "locate_model_file",
    "missing_runtime",
    "runtime_error",
    "smollm2_path",
    "to_local_messages",
    "tool_reply_schema",
]
