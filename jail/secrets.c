/* Secrets under a readable ROOT: which paths the code may never read.
 *
 * An agent started in the home directory makes ROOT = $HOME; a project keeps
 * its .env next to its sources.  fs_read: true would show ~/.ssh/id_rsa and
 * every API key to code that a prompt injection may have written, and the
 * model prints what it reads.  So a built-in list of well-known secrets, plus
 * the policy's own fs_read_deny globs, is looked for under what fs_read shows,
 * once, when the jail is built (a bounded walk that never follows a symlink),
 * and Landlock then grants reads around every match (landlock.c): the
 * directories on the way stay listable, the matches and everything below them
 * are not readable.  Which names are secrets: secret_names.c.  The workspace
 * and the fs_write directories are not searched: what the code may write is
 * its own. */
#include "secrets.h"

#include "../common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return dir[0] && strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

struct walk {
	const struct jail_config *c;
	struct secret_scan *s;
	char path[PATH_MAX];
	size_t rootlen; /* of ROOT in path: the relative part follows */
};

static int push(struct secret_scan *s, const char *path)
{
	if (s->n >= SECRETS_MAX) {
		s->overflow = true;
		return -E2BIG;
	}
	s->paths[s->n++] = xstrdup(path);
	return 0;
}

/* The code's own directories: not searched (their own Landlock rules). */
static bool own_dir(const struct jail_config *c, const char *path)
{
	const struct policy *p = c->policy;
	if (strcmp(path, c->workspace) == 0 || (c->venv && strcmp(path, c->venv) == 0))
		return true;
	for (size_t i = 0; p->fs_write == FS_WRITE_LIST && i < p->n_fs_write_paths; i++)
		if (strcmp(path, p->fs_write_paths[i]) == 0)
			return true;
	return false;
}

static const char *rel_of(const struct walk *w)
{
	const char *r = w->path + w->rootlen;
	return *r == '/' ? r + 1 : r;
}

/* Depth-first, never through a symlink (openat O_NOFOLLOW).  A directory this
 * uid can enter but not list could hold a secret under a known name: it is
 * treated as a match (nothing below it is granted). */
static int walk_dir(struct walk *w, int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return push(w->s, w->path);
	}
	size_t len = strlen(w->path);
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++w->s->entries > SECRETS_MAX_ENTRIES) {
			w->s->overflow = true;
			rc = -E2BIG;
			break;
		}
		if (len + 1 + strlen(de->d_name) >= sizeof w->path)
			continue; /* unreachable by a path the code could write either */
		snprintf(w->path + len, sizeof w->path - len, "/%s", de->d_name);
		if (secrets_match(w->c->policy, rel_of(w))) {
			rc = push(w->s, w->path);
		} else if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
			if (own_dir(w->c, w->path))
				goto next;
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				rc = depth < SECRETS_MAX_DEPTH ? walk_dir(w, sub, depth + 1)
							       : (close(sub), push(w->s, w->path));
			} else if (errno == EACCES && faccessat(dirfd(d), de->d_name, X_OK,
								 AT_SYMLINK_NOFOLLOW) == 0) {
				rc = push(w->s, w->path);
			}
		}
next:
		w->path[len] = '\0';
	}
	w->path[len] = '\0';
	closedir(d);
	return rc;
}

static int walk_top(struct walk *w, const char *top)
{
	/* The rel part of a listed path starts after ROOT when it is inside. */
	snprintf(w->path, sizeof w->path, "%s", top);
	w->rootlen = is_under(top, w->c->root) ? strlen(w->c->root) : strlen(top);
	if (*rel_of(w) && secrets_match(w->c->policy, rel_of(w)))
		return push(w->s, w->path);
	int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* a file, or missing: nothing below it */
	return walk_dir(w, fd, 0);
}

int secrets_scan(const struct jail_config *c, struct secret_scan *s)
{
	const struct policy *p = c->policy;
	memset(s, 0, sizeof *s);
	cleanup_free struct walk *w = xcalloc(1, sizeof *w);
	w->c = c;
	w->s = s;
	int rc = 0;
	if (p->fs_read == FS_READ_ROOT)
		rc = walk_top(w, c->root);
	else if (p->fs_read == FS_READ_LIST)
		for (size_t i = 0; rc == 0 && i < p->n_fs_read_paths; i++)
			rc = walk_top(w, p->fs_read_paths[i]);
	s->done = true;
	return rc == -E2BIG ? 0 : rc;
}

void secrets_free(struct secret_scan *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->paths[i]);
		s->covered[i] = false;
	}
	s->n = 0;
}

bool secrets_hidden_below(const struct secret_scan *s, const char *dir)
{
	for (size_t i = 0; i < s->n; i++)
		if (is_under(s->paths[i], dir))
			return true;
	return false;
}

bool secrets_covered(const struct secret_scan *s, const char *dir)
{
	for (size_t i = 0; i < s->n; i++)
		if (!s->covered[i] && is_under(s->paths[i], dir))
			return false;
	return true;
}

bool secrets_is_hidden(const struct secret_scan *s, const char *path)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->paths[i], path) == 0)
			return true;
	return false;
}

static struct secret_scan scan; /* large; the zygote is single-threaded */

struct secret_scan *secrets_slot(void)
{
	return &scan;
}

const struct secret_scan *secrets_current(void)
{
	return scan.done ? &scan : NULL;
}
