#!/bin/sh
# End-to-end tests of python-sandbox-mcp through the official MCP TypeScript
# SDK client and raw stdio.  Usage: test/integration/run.sh [path/to/python-sandbox-mcp]
# Installs the Node dependencies (package-lock.json) when missing or stale.
# Environment: PSM_KEEP=1 keeps the temporary project dirs; PSM_STDERR=1 shows
# the servers' stderr; extra arguments after the binary go to `node --test`
# (e.g. a single test file).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-build/python-sandbox-mcp}
[ $# -gt 0 ] && shift
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
if [ ! -x "$bin" ]; then
	echo "integration: no server binary at $bin (run make first)" >&2
	exit 2
fi

cd "$repo"
"$repo/test/integration/npm-deps.sh"

export PSM_BIN="$bin"
# Four files at once: on two cores three left about an eighth of the CPU
# idle (the servers wait on timers, children and the disk); four fill it.
# The tests wait on conditions, not on times, so the added load only makes
# them slower.
conc=${PSM_TEST_CONCURRENCY:-4}
if [ $# -gt 0 ]; then
	exec node --test --test-concurrency=$conc --test-timeout=300000 "$@"
fi
exec node --test --test-concurrency=$conc --test-timeout=300000 test/integration/*.test.mjs
