#!/bin/sh
# The package, image and pod tests: test/packages/run.sh deb|image|pod ...
# (make test-deb, test-image, test-pod; make test-packages runs all three).
#   deb    the package installed with dpkg in a clean Debian 12 container with
#          no network, served to the official MCP SDK client as a user
#   image  make image on the offline Debian 12 base, run under podman's defaults
#   pod    deploy/kubernetes/agent-pod.yaml under podman kube play
# Needs root and podman (scripts/setup.sh podman runc debootstrap catatonit
# containernetworking-plugins python3-openpyxl, which the make targets run).
# The Debian base (debootstrap) and the package's dependencies are cached in
# build/base/: a second run downloads nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
version=$(cat VERSION)
arch=$(dpkg --print-architecture)
deb=build/python-sandbox-mcp_${version}_$arch.deb
cache=$repo/build/base
base=localhost/psm-debian-base:bookworm
[ -s "$deb" ] || { echo "test/packages: $deb is missing: run make deb first" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "test/packages: run as root (podman builds and runs the test containers)" >&2; exit 2; }

. "$here/podman-env.sh"
psm_podman_conf "$cache/containers.conf"
packaging/debian-base.sh "$cache" "$base"
test/integration/npm-deps.sh

built=no
image() { # once per run
	[ $built = no ] || return 0
	# The product's own target, on the offline base, with the cached
	# dependencies (a mount: the image keeps none of them).
	make --no-print-directory image IMAGE_BASE="$base" IMAGE_FLAGS="-v $cache/archives:/var/cache/apt/archives"
	built=yes
}

for what in "$@"; do
	case $what in
	deb)
		test/packages/pkgtest-image.sh "$deb" "$cache" "localhost/psm-pkgtest:$version"
		PSM_PKGTEST_IMAGE=localhost/psm-pkgtest:$version node --test --test-timeout=600000 test/packages/deb.test.mjs
		;;
	image)
		image
		node --test --test-timeout=600000 test/packages/image.test.mjs
		;;
	pod)
		image
		node --test --test-timeout=600000 test/packages/pod.test.mjs
		;;
	*) echo "usage: test/packages/run.sh deb|image|pod ..." >&2; exit 2 ;;
	esac
done
