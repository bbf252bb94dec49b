#!/usr/bin/env bash
# CI for the VS Code extension (called from .ci/run): install from the
# lockfile, build, type-check, unit-test, package, then the end-to-end tests
# in a real VS Code (e2e/run.sh installs and caches what they need).
set -euo pipefail
cd "$(dirname "$0")"
exec </dev/null  # CI has no standard input; no tool may wait on a prompt
step() { echo "== vscode: $1"; }
t0=$(date +%s)

step "npm ci"
npm ci --no-audit --no-fund --loglevel=error
step "build"
npm run --silent build
step "typecheck"
npm run --silent typecheck
step "unit tests"
npm run --silent test
step "package"
npm run --silent package
t1=$(date +%s)

step "end-to-end tests (code-server + headless Chromium)"
AGENTLS_E2E_VSIX="$PWD/agentls.vsix" bash e2e/run.sh
t2=$(date +%s)
echo "== vscode: build/typecheck/test/package $((t1 - t0))s, e2e $((t2 - t1))s"
