"""How the context budget's token estimate (UTF-8 bytes / 3, core/context/tokens.py)
compares with real tokenizers on this repository's own files (a
measurement, not a test).

Tokenizers: the embedded chat model's own (SmolLM2, read from its GGUF with
llama-cpp-python, vocabulary only) and tiktoken's o200k_base when tiktoken
can load it (it downloads its BPE file once; offline it is skipped).
Reported per kind of file: bytes per real token, and estimate / real (above
1.0 means the estimate over-counts, i.e. is conservative).

    .venv/bin/python bench/bench_token_estimate.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentls.core.context.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]


def smollm2() -> Callable[[str], int] | None:
    try:
        from llama_cpp import Llama

        from agentls.providers.local.models.catalog import smollm2_path
    except ImportError:
        return None
    path = smollm2_path()
    if path is None:
        return None
    model = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda text: len(model.tokenize(text.encode(), add_bos=False, special=False))


def o200k() -> Callable[[str], int] | None:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
    except Exception as exc:  # offline: the BPE file cannot be fetched
        print(f"tiktoken o200k_base unavailable ({type(exc).__name__}); skipped")
        return None
    return lambda text: len(encoding.encode_ordinary(text))


def main() -> None:
    kinds = {
        "python": sorted(p for d in ("server", "providers", "features", "tests")
                         for p in (ROOT / d).rglob("*.py")),
        "markdown": sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").glob("*.md")),
        "lua+ts": sorted((ROOT / "editors").rglob("*.lua")) + sorted(
            (ROOT / "editors/vscode/src").rglob("*.ts")),
    }
    counters = {name: fn for name, fn in (("smollm2", smollm2()), ("o200k_base", o200k()))
                if fn is not None}
    for kind, files in kinds.items():
        texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
        size = sum(len(t.encode()) for t in texts)
        estimate = sum(estimate_tokens(t) for t in texts)
        parts = [f"{kind:>9}: {len(files)} files, {size / 1024:.0f} KiB, estimate {estimate:,}"]
        for name, count in counters.items():
            real = sum(count(t) for t in texts)
            worst = min(estimate_tokens(t) / max(1, count(t)) for t in texts if len(t) > 2000)
            parts.append(f"{name} {real:,} ({size / real:.2f} bytes/token, estimate/real "
                         f"{estimate / real:.2f}, worst file {worst:.2f})")
        print("; ".join(parts))


if __name__ == "__main__":
    main()
