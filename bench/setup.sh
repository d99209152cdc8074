#!/bin/sh
# Installs what `make bench` needs beyond `make setup`: Jupyter's kernel and
# client (Debian packages; PyPI is not used).  Idempotent: only missing
# packages are installed, as root directly, else via sudo.
set -eu
PKGS="python3-ipykernel python3-jupyter-client python3-numpy python3-pandas python3-matplotlib"
missing=""
for p in $PKGS; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$status" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "bench setup: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2
