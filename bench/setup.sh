#!/bin/sh
# Installs what `make bench` needs beyond `make setup`: Jupyter's kernel and
# client (Debian packages; PyPI is not used), through the project's
# idempotent installer.
set -eu
exec "$(dirname "$0")/../scripts/setup.sh" python3-ipykernel python3-jupyter-client
