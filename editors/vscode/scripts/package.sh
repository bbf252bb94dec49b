#!/usr/bin/env bash
# Builds the production bundle and packages agentls.vsix with @vscode/vsce,
# which needs Node 22+: it runs under the cached Node 24 (e2e/setup.sh node).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash e2e/setup.sh node)"
rm -rf dist
node esbuild.mjs --production
PATH="$AGENTLS_E2E_NODE24/bin:$PATH" "$AGENTLS_E2E_NODE24/bin/node" node_modules/@vscode/vsce/vsce package \
  --no-dependencies --allow-missing-repository --out agentls.vsix
ls -l agentls.vsix
