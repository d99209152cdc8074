#!/bin/sh
# Installs the Node dependencies of the tests and the demo at the repository
# root (npm ci from package-lock.json), only when node_modules is missing or
# older than package-lock.json.  Idempotent.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "npm is missing: run 'make setup' (scripts/setup.sh) first" >&2
		exit 2
	fi
	echo "installing the Node dependencies (npm ci)" >&2
	npm ci --no-audit --no-fund >&2
	touch "$stamp"
fi
