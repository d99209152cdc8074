#!/bin/sh
# Cuts a release: scripts/release.sh NEW_VERSION "what changed" ["more" ...]
#   1. VERSION says NEW_VERSION; packaging/debian/changelog gets an entry
#      with each argument as a bullet (the package's version and date, and
#      the man page's, come from there);
#   2. the image tag and the package file name in the docs, the Containerfile
#      and deploy/kubernetes/ follow (localhost/python-sandbox-mcp:OLD,
#      python-sandbox-mcp_OLD_);
#   3. one commit "Release NEW_VERSION", tagged vNEW_VERSION (annotated).
# Then: make test, make test-packages, make deb image, and publish the
# package and the image.
#
# scripts/release.sh --tag: tag HEAD as v$(cat VERSION) when that tag is
# missing (a release whose commit was made by hand).
set -eu
cd "$(dirname "$0")/.."
cur=$(cat VERSION)

tag_head() {
	v=$1
	if git rev-parse -q --verify "refs/tags/v$v" >/dev/null; then
		echo "release: v$v is already tagged ($(git rev-list -n1 "v$v" | cut -c1-12))"
		return 0
	fi
	clv=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
	[ "$clv" = "$v" ] || { echo "release: VERSION is $v but the changelog's newest entry is $clv" >&2; exit 1; }
	git tag -a "v$v" -m "python-sandbox-mcp $v" -m "$(dpkg-parsechangelog -l packaging/debian/changelog -S Changes | sed -n '4,$p')"
	echo "release: tagged v$v at $(git rev-parse --short HEAD)"
}

case ${1:-} in
--tag) tag_head "$cur"; exit 0 ;;
''|-*) echo "usage: scripts/release.sh NEW_VERSION \"what changed\" [...] | --tag" >&2; exit 2 ;;
esac
new=$1
shift
echo "$new" | grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+' || { echo "release: $new is not a version X.Y.Z" >&2; exit 2; }
[ $# -gt 0 ] || { echo "release: say what changed (one argument per changelog line)" >&2; exit 2; }
dpkg --compare-versions "$new" gt "$cur" || { echo "release: $new is not newer than $cur" >&2; exit 2; }
[ -z "$(git status --porcelain)" ] || { echo "release: the work tree has changes: commit them first" >&2; exit 1; }

# The maintainer line: DEBFULLNAME/DEBEMAIL, else the newest entry's.
if [ -n "${DEBFULLNAME:-}" ] && [ -n "${DEBEMAIL:-}" ]; then
	who="$DEBFULLNAME <$DEBEMAIL>"
else
	who=$(dpkg-parsechangelog -l packaging/debian/changelog -S Maintainer)
fi
{
	printf 'python-sandbox-mcp (%s) bookworm; urgency=medium\n\n' "$new"
	for line in "$@"; do printf '%s\n' "$line" | fold -s -w 74 | sed -e 's/ *$//' -e '1s/^/  * /' -e '2,$s/^/    /'; done
	printf '\n -- %s  %s\n\n' "$who" "$(date -R -u)"
	cat packaging/debian/changelog
} > packaging/debian/changelog.new
mv packaging/debian/changelog.new packaging/debian/changelog
echo "$new" > VERSION
files=$(git ls-files README.md 'docs/*.md' docs/python-sandbox-mcp.1 packaging/Containerfile 'deploy/*')
# shellcheck disable=SC2086
sed -i -e "s|python-sandbox-mcp:$cur|python-sandbox-mcp:$new|g" -e "s|python-sandbox-mcp_${cur}_|python-sandbox-mcp_${new}_|g" $files
git add VERSION packaging/debian/changelog $files
git commit -q -m "Release $new" -m "$(printf '%s\n' "$@")"
tag_head "$new"
