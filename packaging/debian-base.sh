#!/bin/sh
# A Debian 12 base image built offline from Debian's mirror, for the package,
# image and pod tests: no image registry is needed.  It stands in for the
# usual base, docker.io/library/debian:12-slim, with the same apt sources.
#
#   packaging/debian-base.sh CACHE_DIR IMAGE_NAME
#
# debootstrap (minbase) into CACHE_DIR/rootfs once, kept as CACHE_DIR/rootfs.tar;
# `podman import` when IMAGE_NAME is not in podman's store.  A second run only
# checks both and returns.  MIRROR overrides the mirror.
set -eu
cache=${1:?usage: debian-base.sh CACHE_DIR IMAGE_NAME}
image=${2:?usage: debian-base.sh CACHE_DIR IMAGE_NAME}
mirror=${MIRROR:-http://deb.debian.org/debian}
tar=$cache/rootfs.tar

if [ ! -s "$tar" ]; then
	mkdir -p "$cache"
	rm -rf "$cache/rootfs" "$tar.part"
	echo "base: debootstrap bookworm (minbase) from $mirror into $cache/rootfs" >&2
	debootstrap --variant=minbase bookworm "$cache/rootfs" "$mirror" > "$cache/debootstrap.log" 2>&1 || {
		tail -20 "$cache/debootstrap.log" >&2
		echo "base: debootstrap failed (log: $cache/debootstrap.log)" >&2
		exit 1
	}
	# The sources and the trimmed-down dpkg of debian:12-slim: the
	# tests then see what a user's container sees.
	rm -f "$cache/rootfs/etc/apt/sources.list"
	cat > "$cache/rootfs/etc/apt/sources.list.d/debian.sources" <<EOS
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
	rm -rf "$cache/rootfs/var/lib/apt/lists/"* "$cache/rootfs/var/cache/apt/archives/"*.deb
	tar -C "$cache/rootfs" --numeric-owner -cf "$tar.part" .
	mv "$tar.part" "$tar"
	rm -rf "$cache/rootfs"
fi
if ! podman image exists "$image"; then
	podman import -q "$tar" "$image" >/dev/null
	echo "base: imported $image" >&2
fi
