#!/bin/sh
# packaging/check-contents.sh DEB: the package holds what it promises and
# names what it needs; one line per missing item, exit 1 on any.
set -eu
deb=${1:?usage: check-contents.sh DEB}
list=$(dpkg-deb --contents "$deb" | awk '{ print $1, $NF }' | sed 's| \./| /|')
ctl=$(dpkg-deb --field "$deb" Depends)
bad=0
need() { # MODE PATH: a file (with that mode prefix) in the package
	printf '%s\n' "$list" | grep -qx -- "$1 $2" || { echo "check-contents: $deb lacks $2 ($1)" >&2; bad=1; }
}
need -rwxr-xr-x /usr/bin/python-sandbox-mcp
need -rwxr-xr-x /usr/bin/python-sandbox-mcp-install-skill
need -rw-r--r-- /usr/share/man/man1/python-sandbox-mcp.1.gz
need -rw-r--r-- /usr/share/python-sandbox-mcp/SKILL.md
need -rwxr-xr-x /usr/share/python-sandbox-mcp/apparmor.sh
need -rw-r--r-- /usr/share/python-sandbox-mcp/apparmor/python-sandbox-mcp.in
need -rw-r--r-- /usr/share/doc/python-sandbox-mcp/copyright
need -rw-r--r-- /usr/share/doc/python-sandbox-mcp/changelog.gz
need -rw-r--r-- /usr/share/doc/python-sandbox-mcp/README.md.gz
need -rw-r--r-- /usr/share/doc/python-sandbox-mcp/docs/SECURITY.md.gz
need -rw-r--r-- /usr/share/doc/python-sandbox-mcp/docs/CONTAINERS.md.gz
# No profile in the package itself: postinst writes one where it is needed.
if printf '%s\n' "$list" | grep -q ' /etc/'; then
	echo "check-contents: $deb ships files under /etc (the AppArmor profile is postinst's to write)" >&2; bad=1
fi
for d in libpython3.11 libseccomp2 libcjson1 libyaml-0-2 python3-numpy python3-pandas python3-matplotlib python3-pil; do
	case ", $ctl," in *", $d "*|*", $d,"*) ;; *) echo "check-contents: Depends lacks $d: $ctl" >&2; bad=1 ;; esac
done
[ $bad = 0 ] && echo "check-contents: $(basename "$deb"): files and Depends as promised"
exit $bad
