#!/bin/sh
# The AppArmor profile that lets python-sandbox-mcp create user namespaces
# where AppArmor restricts them (Ubuntu 23.10 and later).
#
#   scripts/apparmor.sh install BIN   install and load the profile for BIN, only
#                                     when the host needs it; else say so, do nothing
#   scripts/apparmor.sh uninstall     unload and remove it (when present)
#   scripts/apparmor.sh check         check the profile's syntax; loads nothing
#
# `make install` runs `install` on the host it installs on, and the Debian
# package's postinst runs the installed copy
# (/usr/share/python-sandbox-mcp/apparmor.sh) on the host the package is
# installed on: a package built where no profile is needed still brings it
# where one is.  Nothing here runs for a staged install (DESTDIR).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
template=$here/apparmor/python-sandbox-mcp.in
dest=/etc/apparmor.d/python-sandbox-mcp
restrict=/proc/sys/kernel/apparmor_restrict_unprivileged_userns

render() { sed "s|@BIN@|$1|" "$template"; }

case ${1:-} in
install)
	bin=${2:?usage: apparmor.sh install BIN}
	if [ ! -d /sys/kernel/security/apparmor ] || [ "$(cat "$restrict" 2>/dev/null || echo 0)" != 1 ]; then
		echo "apparmor: this host does not restrict user namespaces; no profile needed"
		exit 0
	fi
	if ! command -v apparmor_parser >/dev/null 2>&1; then
		echo "apparmor: user namespaces are restricted but apparmor_parser is missing: install the apparmor package, then run make install again (or dpkg-reconfigure python-sandbox-mcp); until then the jail runs without namespaces: Landlock + seccomp" >&2
		exit 0
	fi
	mkdir -p "$(dirname "$dest")"
	render "$bin" > "$dest"
	chmod 644 "$dest"
	apparmor_parser -r -W "$dest"
	echo "apparmor: loaded $dest (user namespaces allowed for $bin)"
	;;
uninstall)
	if [ -e "$dest" ]; then
		if command -v apparmor_parser >/dev/null 2>&1 && [ -d /sys/kernel/security/apparmor ]; then
			apparmor_parser -R "$dest" 2>/dev/null || true
		fi
		rm -f "$dest"
		echo "apparmor: removed $dest"
	fi
	;;
check)
	# -Q: no kernel load, -K: no cache, -T: no cache read: a parse only.
	# The userns rule is AppArmor 4 syntax (Ubuntu 24.04 has it, Debian
	# 12's parser 3.0 does not): with an older parser the rest of the
	# profile is checked and the rule is checked to be there.
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	render /usr/local/bin/python-sandbox-mcp > "$tmp"
	grep -qx '  userns,' "$tmp" || { echo "apparmor: the profile lacks its userns rule" >&2; exit 1; }
	if [ ! -e /etc/apparmor.d/abi/4.0 ]; then
		sed -i -e 's|^abi <abi/4.0>,|abi <abi/3.0>,|' -e '/^  userns,$/d' "$tmp"
		note=" (parser older than AppArmor 4: checked without its userns rule)"
	fi
	apparmor_parser -Q -K -T "$tmp" 2>&1 | grep -v '^Cache read/write disabled' >&2 || true
	apparmor_parser -Q -K -T "$tmp" >/dev/null 2>&1 || { echo "apparmor: the profile does not parse" >&2; exit 1; }
	echo "apparmor: profile syntax ok${note:-}"
	;;
*)
	echo "usage: scripts/apparmor.sh install BIN | uninstall | check" >&2
	exit 2
	;;
esac
