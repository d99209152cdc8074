/* Which paths under ROOT are secrets the code may never read: a built-in
 * list of well-known names (keys, tokens, cloud credentials) plus the
 * policy's own fs_read_deny globs.  The jail looks for them under what
 * fs_read shows (secrets.c) and hides what it finds.
 *
 * Matching: a pattern without a slash is matched against each name at any
 * depth ("*.pem", ".env"); a built-in pattern with a slash against the path's
 * last components at any depth (".config/gcloud" also hides
 * "sub/.config/gcloud"); a policy pattern with a slash against the whole path
 * relative to ROOT ("data/private/" then a star).  fnmatch without FNM_PERIOD: "*.key"
 * also matches ".hidden.key". */
#include "policy.h"

#include <fnmatch.h>
#include <string.h>

static const char *const builtin[] = {
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
	".netrc", ".git-credentials", ".npmrc", ".pypirc", ".env", ".env.*", "*.pem", "*.key",
	"id_rsa*", "id_ed25519*", NULL,
};

const char *const *secrets_builtin(void)
{
	return builtin;
}

/* pat against rel (relative to ROOT, no leading slash). */
static bool match1(const char *pat, const char *rel, bool anywhere)
{
	if (pat[0] == '/') { /* "/x": anchored, same as "x/..." forms */
		pat++;
		anywhere = false;
	}
	if (!strchr(pat, '/')) {
		const char *base = strrchr(rel, '/');
		return fnmatch(pat, base ? base + 1 : rel, 0) == 0;
	}
	if (!anywhere)
		return fnmatch(pat, rel, FNM_PATHNAME) == 0;
	for (const char *s = rel; s; s = strchr(s, '/')) {
		if (*s == '/')
			s++;
		if (fnmatch(pat, s, FNM_PATHNAME) == 0)
			return true;
	}
	return false;
}

bool secrets_match(const struct policy *p, const char *rel)
{
	for (const char *const *q = builtin; *q; q++)
		if (match1(*q, rel, true))
			return true;
	for (size_t i = 0; p && i < p->n_fs_read_deny; i++)
		if (match1(p->fs_read_deny[i], rel, false))
			return true;
	return false;
}
