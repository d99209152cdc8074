#!/bin/sh
# The AppArmor profile that lets python-sandbox-mcp create user namespaces
# where AppArmor restricts them (Ubuntu 23.10 and later), and takes every
# capability away from what runs in them (its child profile unpriv).
#
#   scripts/apparmor.sh install BIN   install and load the profile for BIN, only
#                                     when the host needs it; else say so, do nothing
#   scripts/apparmor.sh uninstall     unload and remove it (when present)
#   scripts/apparmor.sh check         check the profile's syntax and what it
#                                     grants; loads nothing
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
	# -Q: no kernel load, -K: no cache, -T: no cache read: a parse and a
	# compile only.  userns, io_uring and mqueue are AppArmor 4 rules
	# (Ubuntu 24.04 has it, Debian 12's parser 3.0 does not): with an older
	# parser the rest of the profile is compiled and those rules are
	# checked to be there.
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	render /usr/local/bin/python-sandbox-mcp | sed 's/[[:space:]]*#.*//' > "$tmp"
	fail() { echo "apparmor: $*" >&2; exit 1; }
	# What the profile promises, read from its text: the namespace is
	# granted to the binary, never an unconfined profile (which allows
	# every capability to all it runs), and the child the zygote enters
	# denies every capability and allows none.
	child=$(sed -n '/^  profile unpriv /,/^  }/p' "$tmp")
	top=$(sed '/^  profile unpriv /,/^  }/d' "$tmp")
	grep -q 'unconfined' "$tmp" && fail "the profile names unconfined: it must confine what it runs"
	printf '%s\n' "$top" | grep -qx '  allow userns,' || fail "the profile lacks its userns rule"
	printf '%s\n' "$top" | grep -qx '  allow change_profile -> &python-sandbox-mcp//unpriv,' ||
		fail "the profile does not let the zygote enter its child"
	printf '%s\n' "$top" | grep -qx '  allow pix /\*\* -> &python-sandbox-mcp//unpriv,' ||
		fail "programs the binary runs do not start in its child"
	[ -n "$child" ] || fail "the profile lacks its child profile unpriv"
	printf '%s\n' "$child" | grep -qx '    audit deny capability,' || fail "the child does not deny every capability"
	printf '%s\n' "$child" | grep -Eq '^ *(allow +)?(capability|userns|mount|umount|pivot_root|change_profile)' &&
		fail "the child allows a capability, a namespace, a mount or a profile change"
	if [ ! -e /etc/apparmor.d/abi/4.0 ]; then
		sed -i -e 's|^abi <abi/4.0>,|abi <abi/3.0>,|' -e '/^ *allow \(userns\|io_uring\|mqueue\),$/d' "$tmp"
		note=" (parser older than AppArmor 4: compiled without its userns, io_uring and mqueue rules)"
	fi
	# Where the kernel has no AppArmor, the parser assumes an old kernel
	# without stacking, and refuses the zygote's change_profile rule (a
	# stack): the features Debian's apparmor package pins stand in.
	feat=
	if [ ! -d /sys/kernel/security/apparmor/features ] && [ -f /usr/share/apparmor-features/features ]; then
		feat="-M /usr/share/apparmor-features/features"
	fi
	apparmor_parser $feat -Q -K -T "$tmp" 2>&1 | grep -v '^Cache read/write disabled' >&2 || true
	apparmor_parser $feat -Q -K -T "$tmp" >/dev/null 2>&1 || fail "the profile does not parse"
	# The compiled child, as the parser built it: no capability allowed,
	# sys_admin among those denied.
	built=$(apparmor_parser $feat -Q -K -T -d "$tmp" 2>/dev/null | sed -n '/^Name:[[:space:]]*unpriv$/,/^$/p')
	printf '%s\n' "$built" | grep -q '^Deny Caps:.* sys_admin' || fail "the compiled child does not deny sys_admin"
	printf '%s\n' "$built" | grep -q '^Capabilities:' && fail "the compiled child allows capabilities"
	# The profile itself: no capability over the network, among others.
	built=$(apparmor_parser $feat -Q -K -T -d "$tmp" 2>/dev/null | sed -n '/^Name:[[:space:]]*python-sandbox-mcp$/,/^$/p')
	for cap in net_admin net_raw sys_module; do
		printf '%s\n' "$built" | grep -q "^Deny Caps:.* $cap\\b" || fail "the profile does not deny $cap"
	done
	# ...and none that building the jail takes (a capability the parser
	# does not know is read as sys_admin).
	for cap in sys_admin setpcap setuid setgid sys_chroot dac_override chown kill sys_ptrace sys_resource; do
		printf '%s\n' "$built" | grep -q "^Deny Caps:.* $cap\\b" && fail "the profile denies $cap, which the jail needs"
	done
	echo "apparmor: profile ok: it grants the namespace and what building the jail takes, no capability over the network; its child denies every capability${note:-}"
	;;
*)
	echo "usage: scripts/apparmor.sh install BIN | uninstall | check" >&2
	exit 2
	;;
esac
