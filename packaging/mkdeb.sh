#!/bin/sh
# Builds the Debian package from a staged `make install`, with Debian's own
# tools: dpkg-shlibdeps for the libraries the binary links, dpkg-gencontrol
# for the control file (Depends, Installed-Size, the version from the
# changelog), dpkg-deb for the archive.
#
#   packaging/mkdeb.sh STAGE VERSION OUT.deb
#
# STAGE/root holds `make install DESTDIR=STAGE/root PREFIX=/usr`; this adds
# what Debian's policy asks of a package (a stripped binary, compressed man
# pages and changelog, the copyright file, md5sums, the maintainer scripts)
# and writes OUT.deb.  Run by `make deb`.
set -eu
stage=$(cd "${1:?usage: mkdeb.sh STAGE VERSION OUT.deb}" && pwd)
version=${2:?usage: mkdeb.sh STAGE VERSION OUT.deb}
out=${3:?usage: mkdeb.sh STAGE VERSION OUT.deb}
here=$(cd "$(dirname "$0")" && pwd)
deb=$here/debian
root=$stage/root
pkg=python-sandbox-mcp
doc=$root/usr/share/doc/$pkg

# The package's version is VERSION's; the changelog must have its entry
# (scripts/release.sh writes both).
clversion=$(dpkg-parsechangelog -l "$deb/changelog" -S Version)
if [ "$clversion" != "$version" ]; then
	echo "mkdeb: VERSION says $version, packaging/debian/changelog's newest entry $clversion: cut the release with scripts/release.sh $version" >&2
	exit 1
fi
# Reproducible: every timestamp is the release's.
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$deb/changelog" -S Timestamp)
export SOURCE_DATE_EPOCH

# What dh_strip, dh_compress and dh_installdocs would do.
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/$pkg"
for m in "$root"/usr/share/man/man1/*.1; do
	if [ -L "$m" ]; then
		ln -sf "$(readlink "$m").gz" "$m.gz" && rm "$m"
	else
		gzip -9nf "$m"
	fi
done
install -m 0644 "$deb/copyright" "$doc/copyright"
gzip -9nc "$deb/changelog" > "$doc/changelog.gz"
# Policy 12.3: documents over 4 kB compressed (README.md and docs/*.md).
find "$doc" -type f -size +4k ! -name '*.gz' ! -name copyright -exec gzip -9nf {} +
install -d "$root/usr/share/lintian/overrides"
install -m 0644 "$deb/lintian-overrides" "$root/usr/share/lintian/overrides/$pkg"

# The control area.
mkdir -p "$root/DEBIAN" "$stage/src/debian"
for s in postinst prerm; do install -m 0755 "$deb/$s" "$root/DEBIAN/$s"; done
cp "$deb/control" "$deb/changelog" "$stage/src/debian/"
(
	cd "$stage/src"
	dpkg-shlibdeps -Tdebian/substvars "$root/usr/bin/$pkg"
	dpkg-gencontrol -p$pkg -P"$root" -Tdebian/substvars -fdebian/files
)
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"
mkdir -p "$(dirname "$out")"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out"
