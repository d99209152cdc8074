#!/bin/sh
# Installs what `make bench` needs beyond `make setup`: Jupyter's kernel and
# client, and the data stack the agent-workload suite imports (Debian
# packages; PyPI is not used), through the project's idempotent installer.
set -eu
exec "$(dirname "$0")/../scripts/setup.sh" python3-ipykernel python3-jupyter-client \
	python3-scipy python3-sklearn python3-statsmodels python3-seaborn python3-sympy python3-openpyxl
