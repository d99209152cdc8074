#!/bin/sh
# The demo of the main job: telemetry -> p95 per endpoint, spikes, a chart,
# verify_outputs, through the official MCP SDK client.
# Usage: demo/run.sh [path/to/python-sandbox-mcp]   (make demo)
# The scratch project is build/demo-project, made anew on every run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
bin=${1:-build/python-sandbox-mcp}
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
if [ ! -x "$bin" ]; then
	echo "demo: no server binary at $bin (run make first)" >&2
	exit 2
fi
cd "$repo"
test/integration/npm-deps.sh
exec node demo/demo.mjs --bin "$bin" --project "$repo/build/demo-project"
