#!/bin/sh
# Installs the Debian packages that the build, the demo and the tests need,
# only those that are missing (idempotent).  As root directly, else via sudo.
# Extra package names as arguments are installed too (bench/ passes its own).
# --full also installs the data stack an analyst expects beyond numpy, pandas
# and matplotlib (scipy, scikit-learn, statsmodels, seaborn, sympy, openpyxl),
# which the sandboxed interpreter then imports like the rest.
set -eu

FULL="python3-scipy python3-sklearn python3-statsmodels python3-seaborn python3-sympy python3-openpyxl"
extra=""
for a in "$@"; do
	case $a in
	--full) extra="$extra $FULL" ;;
	-*) echo "setup.sh: unknown option $a (use --full, or name extra Debian packages)" >&2; exit 2 ;;
	*) extra="$extra $a" ;;
	esac
done

PKGS="gcc make pkg-config libc6-dev libcjson-dev libseccomp-dev libbsd-dev libmd-dev
libexpat1-dev libyaml-dev libssl-dev libpython3-dev libxxhash-dev python3 python3-numpy python3-pandas python3-matplotlib
python3-pil python3-joblib libcmocka-dev apparmor dpkg-dev lintian
python3-nbformat python3-nbclient python3-ipykernel"
# python3-joblib: the tests check joblib's default backend in the sandbox.
# python3-nbformat, -nbclient, -ipykernel: the export's test validates the
# notebook against its schema and runs it in a plain Python kernel.
# apparmor: its parser checks the AppArmor profile's syntax (make test).
# dpkg-dev, lintian: make deb builds the Debian package, make test lints it.
# The container tests (make test-packages) pass podman, runc, debootstrap,
# catatonit and containernetworking-plugins as extra packages.
# The test clients (the official MCP TypeScript SDK) run on Node.js.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
PKGS="$PKGS $extra"

missing=""
for p in $PKGS; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$status" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "setup: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
# shellcheck disable=SC2086
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $missing >&2
