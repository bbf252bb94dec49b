"""Read a GGUF file's metadata (the key/value header, not the tensors).

Written from the GGUF format description (llama.cpp's docs/gguf.md):
magic "GGUF", uint32 version (2 or 3), uint64 tensor count, uint64 key/value
count, then per pair a string key, a uint32 value type and the value.
Strings are a uint64 length and UTF-8 bytes; arrays a uint32 element type, a
uint64 count and the elements. Little-endian.

Used in the parent process (llama_cpp is imported only by the child): the
architecture and sizes give the KV-cache estimate, the tokenizer's special
token ids and strings the fill-in-the-middle tokens, and the chat template
whether the model has one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from agentls.providers.fim.templates import FimTokens
from agentls.providers.local.fim import fim_tokens
from agentls.providers.local.tool_calls.native_format import (
    NATIVE_FORMATS,
    ToolFormat,
    detect_tool_format,
)

__all__ = ["GgufError", "ModelFacts", "model_facts", "read_metadata"]

_SCALARS = {
    0: "<B",  # uint8
    1: "<b",  # int8
    2: "<H",  # uint16
    3: "<h",  # int16
    4: "<I",  # uint32
    5: "<i",  # int32
    6: "<f",  # float32
    7: "<?",  # bool
    10: "<Q",  # uint64
    11: "<q",  # int64
    12: "<d",  # float64
}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 64 << 20  # a chat template is a few KiB; more is a corrupt file


class GgufError(ValueError):
    """Not a GGUF file, or its header is cut short or damaged."""


def read_metadata(path: Path, *, skip_arrays_over: int | None = None) -> dict[str, Any]:
    """Every metadata key of the file. Arrays longer than `skip_arrays_over`
    (the tokenizer's 100k+ tokens) are read past and stored as their length
    only, unless None."""
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise GgufError(f"{path} is not a GGUF file (no GGUF magic)")
        version = _unpack(handle, "<I")
        if version not in (2, 3):
            raise GgufError(f"{path}: unsupported GGUF version {version}")
        _unpack(handle, "<Q")  # tensor count
        count = _unpack(handle, "<Q")
        metadata: dict[str, Any] = {"GGUF.version": version}
        for _ in range(count):
            key = _string(handle)
            kind = _unpack(handle, "<I")
            metadata[key] = _value(handle, kind, skip_arrays_over)
        return metadata


def _unpack(handle: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise GgufError("the GGUF header ends early (truncated file)")
    return struct.unpack(fmt, data)[0]


def _string(handle: BinaryIO) -> str:
    length = _unpack(handle, "<Q")
    if length > _MAX_STRING:
        raise GgufError(f"a GGUF string claims {length} bytes (corrupt header)")
    data = handle.read(length)
    if len(data) != length:
        raise GgufError("the GGUF header ends early (truncated file)")
    return data.decode("utf-8", "replace")


def _value(handle: BinaryIO, kind: int, skip_arrays_over: int | None) -> Any:
    if kind in _SCALARS:
        return _unpack(handle, _SCALARS[kind])
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item_kind = _unpack(handle, "<I")
        length = _unpack(handle, "<Q")
        if skip_arrays_over is not None and length > skip_arrays_over:
            if item_kind in _SCALARS:
                handle.seek(struct.calcsize(_SCALARS[item_kind]) * length, 1)
            elif item_kind == _STRING:
                for _ in range(length):
                    handle.seek(_unpack(handle, "<Q"), 1)
            else:
                for _ in range(length):
                    _value(handle, item_kind, skip_arrays_over)
            return {"array_length": length}
        if item_kind in _SCALARS:
            fmt = _SCALARS[item_kind]
            size = struct.calcsize(fmt)
            data = handle.read(size * length)
            if len(data) != size * length:
                raise GgufError("the GGUF header ends early (truncated file)")
            return [item[0] for item in struct.iter_unpack(fmt, data)]
        return [_value(handle, item_kind, skip_arrays_over) for _ in range(length)]
    raise GgufError(f"unknown GGUF value type {kind} (corrupt header)")


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class ModelFacts:
    """What the provider needs to know about one GGUF file."""

    architecture: str | None
    name: str | None
    context_length: int | None  # trained context
    n_layer: int | None
    n_head_kv: int | None
    head_dim: int | None
    chat_template: str | None
    fim: FimTokens | None
    bos_token: str = ""  # the strings a chat template renders as bos_token / eos_token
    eos_token: str = ""
    add_bos: bool = False  # llama.cpp adds BOS itself to a raw completion prompt

    @property
    def tool_format(self) -> ToolFormat:
        """The tool-call format the chat template speaks (tool_format.py)."""
        return detect_tool_format(self.chat_template)

    def kv_cache_bytes(self, n_ctx: int) -> int | None:
        """K and V, f16, for every layer: llama.cpp's default cache type."""
        if not (self.n_layer and self.n_head_kv and self.head_dim):
            return None
        return 2 * self.n_layer * n_ctx * self.n_head_kv * self.head_dim * 2

    def tool_calling(self, chat_format: str | None = None) -> str | None:
        """How this model calls tools: its native format, "grammar" (it can
        chat, through its template or a llama.cpp chat_format, but has no
        native format, or chat_format replaces the template), or None (it
        cannot chat)."""
        if self.chat_template and not chat_format and self.tool_format in NATIVE_FORMATS:
            return self.tool_format
        return "grammar" if self.chat_template or chat_format else None

    def capabilities(self) -> list[str]:
        found = ["completion"]
        if self.fim is not None:
            found.append("fim")
        if self.chat_template:
            # "tools": native tool calls in the template's own format;
            # "tools:grammar": none, so tool calls go through the JSON-schema
            # grammar (one call per reply, and small models misjudge when).
            found += ["chat", "tools" if self.tool_format in NATIVE_FORMATS else "tools:grammar"]
        return found


_FACTS: dict[tuple[str, int, int], ModelFacts] = {}


def model_facts(path: Path) -> ModelFacts:
    """The facts of a GGUF (read once per file version; ~0.1-0.5 s for a
    large vocabulary, so call it off the event loop)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    cached = _FACTS.get(key)
    if cached is not None:
        return cached
    meta = read_metadata(path)
    arch = meta.get("general.architecture")
    prefix = f"{arch}." if isinstance(arch, str) else ""

    def number(name: str) -> int | None:
        value = meta.get(prefix + name)
        if isinstance(value, list):  # per-layer values (some architectures)
            value = max(value) if value else None
        return int(value) if isinstance(value, int | float) else None

    heads = number("attention.head_count")
    embedding = number("embedding_length")
    head_dim = number("attention.key_length") or (
        embedding // heads if embedding and heads else None
    )
    template = meta.get("tokenizer.chat_template")
    tokens = meta.get("tokenizer.ggml.tokens")

    def token(key: str) -> str:
        index = meta.get(key)
        if isinstance(tokens, list) and isinstance(index, int) and 0 <= index < len(tokens):
            return str(tokens[index])
        return ""

    facts = ModelFacts(
        architecture=arch if isinstance(arch, str) else None,
        name=meta.get("general.name") if isinstance(meta.get("general.name"), str) else None,
        context_length=number("context_length"),
        n_layer=number("block_count"),
        n_head_kv=number("attention.head_count_kv") or heads,
        head_dim=head_dim,
        chat_template=template if isinstance(template, str) and template.strip() else None,
        fim=fim_tokens(meta),
        bos_token=token("tokenizer.ggml.bos_token_id"),
        eos_token=token("tokenizer.ggml.eos_token_id"),
        add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
    )
    _FACTS[key] = facts
    return facts
