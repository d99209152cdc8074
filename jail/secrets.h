/* The secrets under what fs_read shows (secrets.c): found once, when the
 * jail is built, by a bounded walk; the mount tree covers each (ns.c) and
 * Landlock grants reads around them (landlock.c).  Which names are secrets
 * is the policy's (policy/secret_names.c). */
#ifndef JAIL_SECRETS_H
#define JAIL_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include "layer.h"

#define SECRETS_MAX 4096           /* matches kept; more: not enforceable */
#define SECRETS_MAX_ENTRIES 200000 /* directory entries looked at */
#define SECRETS_MAX_DEPTH 48
struct secret_scan {
	char *paths[SECRETS_MAX]; /* absolute paths of the matches; owned */
	bool covered[SECRETS_MAX]; /* an empty mount lies over it (jail_ns_hide) */
	size_t n;
	size_t entries;
	bool overflow; /* a bound was reached: the scan is incomplete */
	bool done;
};
/* Fills s (emptied first) with the secrets under what c's policy shows:
 * 0, or a negative errno (a bound reached is not an error: s->overflow). */
int secrets_scan(const struct jail_config *c, struct secret_scan *s);
void secrets_free(struct secret_scan *s);
/* Whether a secret lies at or below dir; whether path is one. */
bool secrets_hidden_below(const struct secret_scan *s, const char *dir);
bool secrets_is_hidden(const struct secret_scan *s, const char *path);
/* Whether every secret at or below dir is covered by a mount. */
bool secrets_covered(const struct secret_scan *s, const char *dir);
/* The scan of the jail being entered, one per process (large; the zygote
 * is single-threaded): jail_enter fills the slot before Landlock, which
 * reads it through secrets_current, NULL before the scan. */
struct secret_scan *secrets_slot(void);
const struct secret_scan *secrets_current(void);

#endif
