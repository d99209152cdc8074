#!/bin/sh
# The package installed with dpkg in a clean Debian 12 container with no
# network: test/packages/pkgtest-image.sh DEB CACHE_DIR IMAGE
#
# 1. The base: Debian 12 from debootstrap (packaging/debian-base.sh, cached
#    in CACHE_DIR).
# 2. The package's dependencies, as apt resolves its Depends in that base
#    (the only step with network), kept in CACHE_DIR/archives/ and fetched
#    again only when Depends changes.
# 3. In a fresh container with --network=none: apt satisfies Depends from
#    those files, dpkg -i installs the package, a user `agent` (uid 1000) is
#    made; committed as IMAGE.
# Prints the container's install log on failure.
set -eu
deb=$(realpath "${1:?usage: pkgtest-image.sh DEB CACHE_DIR IMAGE}")
cache=$(mkdir -p "${2:?}" && realpath "$2")
image=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/podman-env.sh"
psm_podman_conf "$cache/containers.conf"
base=localhost/psm-debian-base:bookworm
"$here/../../packaging/debian-base.sh" "$cache" "$base"

arch=$cache/archives lists=$cache/lists
stamp=$arch/.depends
depends=$(dpkg-deb --field "$deb" Depends)
if [ "$(cat "$stamp" 2>/dev/null)" != "$depends" ]; then
	rm -rf "$arch" "$lists"
	mkdir -p "$arch/partial" "$lists/partial"
	echo "pkgtest: downloading the package's dependencies into $arch" >&2
	podman run --rm --network=host -v "$arch:/var/cache/apt/archives" -v "$lists:/var/lib/apt/lists" \
		-v "$deb:/tmp/pkg.deb:ro" "$base" \
		sh -c 'apt-get -qq update && apt-get -qq install -y --download-only --no-install-recommends /tmp/pkg.deb' >&2
	printf '%s\n' "$depends" > "$stamp"
fi

ctr=psm-pkgtest-install-$$
trap 'podman rm -f "$ctr" >/dev/null 2>&1 || true' EXIT
# No network from here on.  apt satisfies the package's Depends from those
# files (it orders them, Pre-Depends included), then dpkg installs the
# package: dpkg refuses it if Depends is not met, and runs its postinst.
# The lists and archives are mounts: the image keeps neither.
podman run --name "$ctr" --network=none -v "$arch:/var/cache/apt/archives" -v "$lists:/var/lib/apt/lists" \
	-v "$deb:/tmp/pkg.deb:ro" -e "DEPENDS=$depends" "$base" \
	sh -c 'apt-get satisfy -y -qq --no-download --no-install-recommends "$DEPENDS" >/dev/null &&
		dpkg -i /tmp/pkg.deb && useradd -m -u 1000 -s /bin/sh agent' > "$cache/install.log" 2>&1 || {
	tail -30 "$cache/install.log" >&2
	echo "pkgtest: the install failed in a container without network (log: $cache/install.log)" >&2
	exit 1
}
old=$(podman image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
podman commit -q "$ctr" "$image" >/dev/null
# The previous run's image, now untagged (about 1.3 GB).
[ -z "$old" ] || podman rmi "$old" >/dev/null 2>&1 || true
echo "pkgtest: $image: $(basename "$deb") installed with dpkg, no network" >&2
