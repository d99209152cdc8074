/* The workspace's files (see artifacts.h).
 *
 * The walk goes from directory fd to directory fd: every directory is
 * opened with openat(parent, name, O_NOFOLLOW|O_DIRECTORY), so a symlink
 * planted in the workspace (to $HOME, to /) is listed as a symlink and
 * never entered, and a directory swapped for a symlink between the stat
 * and the open makes the open fail instead of leading outside. */
#include "artifacts.h"
#include "wsnote.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <sha2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../common/pdir.h"
#include "../common/util.h"
#include "../rpc/loop.h"

/* The first place a walk could not see, and why (ART_UNSEEN_*). */
static void mark_unseen(unsigned *unseen, char *where, size_t wn, unsigned why, const char *path)
{
	if (!*unseen) {
		size_t l = strnlen(path, wn - 1);
		memcpy(where, path, l);
		where[l] = '\0';
	}
	*unseen |= why;
}

/* out = a "/" b (just a when b is empty), cut to n. */
static void join_where(char *out, size_t n, const char *a, const char *b)
{
	char tmp[PATH_MAX + 256];
	size_t la = strnlen(a, PATH_MAX), lb = strnlen(b, 255);
	memcpy(tmp, a, la);
	if (lb) {
		tmp[la++] = '/';
		memcpy(tmp + la, b, lb);
	}
	tmp[la + lb] = '\0';
	unsigned none = 0;
	mark_unseen(&none, out, n, 1, tmp);
}

/* The calling thread's budget (art_budget_begin). */
static __thread struct {
	bool on, bounded, spent;
	size_t left, visited;
	double until_ms;     /* loop_now_ms's clock */
} budget;

void art_budget_begin(size_t n, double ms)
{
	budget.on = true;
	budget.bounded = n > 0;
	budget.spent = false;
	budget.left = n;
	budget.visited = 0;
	budget.until_ms = loop_now_ms() + ms;
}

bool art_budget_refuse(void)
{
	if (!budget.on || !budget.bounded)
		return false;
	budget.spent = true;
	return true;
}

bool art_budget_end(size_t *visited)
{
	if (visited)
		*visited = budget.visited;
	bool spent = budget.spent;
	budget.on = false;
	return spent;
}

/* One entry read from a directory: false once the budget is spent (the
 * walk stops there). */
static bool budget_take(void)
{
	if (!budget.on)
		return true;
	budget.visited++;
	if (!budget.bounded)
		return true;
	if (budget.left == 0 || budget.spent || loop_now_ms() > budget.until_ms) {
		budget.spent = true;
		return false;
	}
	budget.left--;
	return true;
}

struct walk {
	const struct art_scan_opts *o;
	struct art_list *out;
	size_t max, dirs;
	bool stop;
	char path[PATH_MAX];
};

void art_list_free(struct art_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].rel);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
	l->truncated = false;
}

static int add_entry(struct art_list *l, const char *rel, const struct stat *st)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct art_entry *nv = reallocarray(l->v, ncap, sizeof *nv);
		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	char *r = xstrdup(rel);
	l->v[l->n++] = (struct art_entry){
		.rel = r,
		.bytes = st->st_size,
		.alloc = st->st_blocks * 512,
		.mtime = st->st_mtim,
		.dev = st->st_dev,
		.ino = st->st_ino,
		.is_symlink = S_ISLNK(st->st_mode),
	};
	return 0;
}

unsigned long long art_list_bytes(const struct art_list *l)
{
	unsigned long long sum = 0;
	for (size_t i = 0; i < l->n; i++)
		if (!l->v[i].is_symlink)
			sum += (unsigned long long)(l->v[i].bytes > l->v[i].alloc ? l->v[i].bytes : l->v[i].alloc);
	return sum;
}

bool art_path_under(const char *rel, const char *const *dirs)
{
	for (const char *const *d = dirs; d && *d; d++) {
		size_t n = strlen(*d);
		if (strncmp(rel, *d, n) == 0 && (rel[n] == '\0' || rel[n] == '/'))
			return true;
	}
	return false;
}

const char *const art_server_dirs[] = { ".logs", ".cache", ".sessions", NULL };

static bool excluded(const struct art_scan_opts *o, const char *rel)
{
	return art_path_under(rel, o->exclude);
}

/* Walks the directory dfd (owned), whose path relative to the workspace is
 * w->path[0..plen); dst its stat, when known. */
static int walk_dir(struct walk *w, int dfd, const struct stat *dst, size_t plen, int depth)
{
	/* On the heap: one per level, ART_MAX_DEPTH of them at most. */
	struct pdir *d = xmalloc(sizeof *d);
	int rc = 0;

	wsnote_dir(dfd, dst); /* watched before it is listed (wsnote.h) */
	pdir_adopt(d, dfd);
	for (;;) {
		const char *name = pdir_next(d);
		if (!name) {
			rc = -d->err;
			break;
		}
		if (!budget_take()) {
			w->out->truncated = true;
			w->stop = true;
			break;
		}
		if (!w->o->include_hidden && name[0] == '.')
			continue;
		size_t nl = strlen(name), sep = plen ? 1 : 0;
		if (plen + sep + nl >= sizeof w->path) {
			w->out->truncated = true;
			mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_NAME, w->path);
			continue;
		}
		if (sep)
			w->path[plen] = '/';
		memcpy(w->path + plen + sep, name, nl + 1);
		size_t clen = plen + sep + nl;
		if (excluded(w->o, w->path))
			continue;

		struct stat st;
		if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			/* Removed meanwhile: gone.  Anything else: not seen. */
			if (errno != ENOENT)
				mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_UNREADABLE, w->path);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (depth + 1 >= ART_MAX_DEPTH) {
				w->out->truncated = true;
				mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_DEPTH, w->path);
				continue;
			}
			if (++w->dirs > w->max) {
				w->out->truncated = true;
				mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_ENTRIES, w->path);
				w->stop = true;
				break;
			}
			/* O_NONBLOCK: harmless on a directory, and should the name
			 * have become a FIFO since the stat, O_DIRECTORY fails
			 * without opening it. */
			int cfd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
			if (cfd < 0) {
				/* Swapped for a symlink or removed: nothing to see.
				 * Unreadable (mode 0): not seen, and said. */
				if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR) {
					w->out->truncated = true;
					mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_UNREADABLE,
						    w->path);
				}
				continue;
			}
			rc = walk_dir(w, cfd, &st, clen, depth + 1);
			w->path[plen] = '\0';
			if (rc < 0 || w->stop)
				break;
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			if (w->o->pattern && fnmatch(w->o->pattern, name, 0) != 0)
				continue;
			if (w->out->n >= w->max) {
				w->out->truncated = true;
				mark_unseen(&w->out->unseen, w->out->where, sizeof w->out->where, ART_UNSEEN_ENTRIES, w->path);
				w->stop = true;
				break;
			}
			rc = add_entry(w->out, w->path, &st);
			if (rc < 0)
				break;
		}
		/* FIFOs, sockets, devices: not artifacts. */
	}
	w->path[plen] = '\0';
	pdir_close(d);
	free(d);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct art_entry *)a)->rel, ((const struct art_entry *)b)->rel);
}

int art_scan(const struct workspace *ws, const struct art_scan_opts *o, struct art_list *out, struct err *e)
{
	static const struct art_scan_opts defaults;
	struct walk *w;
	const char *sub;
	int fd, rc;

	memset(out, 0, sizeof *out);
	if (!o)
		o = &defaults;
	sub = o->subdir ? o->subdir : "";
	w = xcalloc(1, sizeof *w);
	w->o = o;
	w->out = out;
	w->max = o->max_entries ? o->max_entries : 100000;

	/* rel paths are relative to the workspace: start from the subdir,
	 * normalised ("./a//b/" -> "a/b"). */
	size_t n = 0;
	const char *s = sub, *c;
	size_t cl;
	while ((c = path_next(&s, &cl))) {
		if (n + cl + 2 >= sizeof w->path) {
			free(w);
			return err_set(e, -ENAMETOOLONG, "the directory '%s' has too long a name", sub);
		}
		if (n)
			w->path[n++] = '/';
		memcpy(w->path + n, c, cl);
		n += cl;
	}
	w->path[n] = '\0';

	struct stat st0;
	fd = ws_openat_st(ws, w->path, O_RDONLY | O_DIRECTORY, 0, &st0);
	if (fd < 0) {
		rc = ws_openat_err(e, fd, *sub ? sub : "");
		free(w);
		return rc;
	}
	rc = walk_dir(w, fd, &st0, n, 0);
	free(w);
	if (rc < 0) {
		art_list_free(out);
		return err_sys(e, rc, "cannot list the workspace");
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof out->v[0], cmp_entry);
	return 0;
}

static bool same(const struct art_entry *a, const struct art_entry *b)
{
	return a->bytes == b->bytes && a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ino == b->ino && a->dev == b->dev && a->is_symlink == b->is_symlink;
}

void art_diff(const struct art_list *before, const struct art_list *after,
	      void (*fn)(const struct art_entry *en, enum art_change c, void *arg), void *arg)
{
	size_t i = 0, j = 0, nb = before ? before->n : 0;

	if (!after)
		return;
	while (j < after->n) {
		int c = i < nb ? strcmp(before->v[i].rel, after->v[j].rel) : 1;
		if (c < 0) {
			i++; /* deleted: not reported */
		} else if (c > 0) {
			fn(&after->v[j++], ART_CREATED, arg);
		} else {
			if (!same(&before->v[i], &after->v[j]))
				fn(&after->v[j], ART_MODIFIED, arg);
			i++;
			j++;
		}
	}
}

int art_sha256(const struct workspace *ws, const char *rel, off_t max, char hex[65], off_t *cost, struct err *e)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char buf[65536];
	uint8_t md[SHA256_DIGEST_LENGTH];
	SHA2_CTX ctx;
	struct stat st;
	off_t done = 0;
	int rc = 0, fd = ws_openat(ws, rel, O_RDONLY, 0);

	hex[0] = '\0';
	if (cost)
		*cost = 0;
	if (fd < 0)
		return ws_openat_err(e, fd, rel);
	if (fstat(fd, &st) < 0) {
		rc = err_sys(e, -errno, "cannot stat '%s'", rel);
		goto out;
	}
	/* The apparent size is what reading costs: holes read as zeros. */
	if (st.st_size > max) {
		rc = err_set(e, -EFBIG, "'%s' has %jd bytes, over the %jd left to hash", rel, (intmax_t)st.st_size, (intmax_t)max);
		goto out;
	}
	SHA256Init(&ctx);
	for (;;) {
		size_t want = sizeof buf;
		/* One byte past the budget tells a file that grew meanwhile. */
		if ((off_t)want > max - done + 1)
			want = (size_t)(max - done + 1);
		ssize_t r = read(fd, buf, want);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = err_sys(e, -errno, "cannot read '%s'", rel);
			goto out;
		}
		if (r == 0)
			break;
		done += r;
		if (done > max) {
			rc = err_set(e, -EFBIG, "'%s' grew past %jd bytes while it was hashed", rel, (intmax_t)max);
			goto out;
		}
		SHA256Update(&ctx, buf, (size_t)r);
	}
	SHA256Final(md, &ctx);
	for (size_t i = 0; i < sizeof md; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
out:
	if (cost)
		*cost = done;
	close(fd);
	return rc;
}

/* ---- what trees take on disk ---------------------------------------- */

void art_usage_add(struct art_usage *a, const struct art_usage *b)
{
	a->blocks += b->blocks;
	a->charged += b->charged;
	a->seen += b->seen;
	if (!a->unseen && b->unseen)
		memcpy(a->where, b->where, sizeof a->where);
	a->unseen |= b->unseen;
}

const char *art_unseen_text(unsigned unseen, const char *shown, const char *where, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *what;
	} why[] = {
		{ ART_UNSEEN_DEPTH, "directories nested deeper than 64 levels" },
		{ ART_UNSEEN_ENTRIES, "more entries than the server walks" },
		{ ART_UNSEEN_UNREADABLE, "a directory or file the server cannot read" },
		{ ART_UNSEEN_NAME, "a path longer than the server handles" },
	};
	size_t k = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < N_ELEMENTS(why) && k < n; i++)
		if (unseen & why[i].bit) {
			int r = snprintf(buf + k, n - k, "%s%s", k ? " and " : "", why[i].what);
			k += r > 0 ? (size_t)r : 0;
		}
	if (unseen && k < n)
		snprintf(buf + k, n - k, " (first at %s%s%s)", shown, *shown && where && *where ? "/" : "", where ? where : "");
	return buf;
}

struct usage {
	struct art_usage *u;
	size_t max;
	const struct stat *skip; /* a directory left out (the workspace), or NULL */
	bool stop;
	char path[PATH_MAX];
};

static void usage_mark(struct usage *w, unsigned why)
{
	mark_unseen(&w->u->unseen, w->u->where, sizeof w->u->where, why, w->path);
}

/* Sums what is beneath the directory dfd (owned, dst its stat when known),
 * whose path under the tree is w->path[0..plen) (for messages only: the
 * walk goes by fds). */
static void usage_dir(struct usage *w, int dfd, const struct stat *dst, size_t plen, int depth)
{
	struct pdir *d = xmalloc(sizeof *d); /* one per level, as walk_dir */

	wsnote_dir(dfd, dst);
	pdir_adopt(d, dfd);
	while (!w->stop) {
		const char *name = pdir_next(d);
		if (!name) {
			if (d->err)
				usage_mark(w, ART_UNSEEN_UNREADABLE);
			break;
		}
		struct stat st;
		if (!budget_take()) {
			w->stop = true;
			break;
		}
		size_t nl = strlen(name), sep = plen ? 1 : 0, clen = plen;
		if (plen + sep + nl < sizeof w->path) {
			if (sep)
				w->path[plen] = '/';
			memcpy(w->path + plen + sep, name, nl + 1);
			clen = plen + sep + nl;
		}
		if (++w->u->seen > w->max) {
			usage_mark(w, ART_UNSEEN_ENTRIES);
			w->stop = true;
			break;
		}
		if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT) /* removed meanwhile: gone */
				usage_mark(w, ART_UNSEEN_UNREADABLE);
			w->path[plen] = '\0';
			continue;
		}
		unsigned long long blocks = (unsigned long long)st.st_blocks * 512u;
		w->u->blocks += blocks;
		w->u->charged += S_ISREG(st.st_mode) && (unsigned long long)st.st_size > blocks
					 ? (unsigned long long)st.st_size : blocks;
		if (S_ISDIR(st.st_mode) && !(w->skip && st.st_dev == w->skip->st_dev && st.st_ino == w->skip->st_ino)) {
			if (depth + 1 >= ART_MAX_DEPTH) {
				usage_mark(w, ART_UNSEEN_DEPTH);
			} else {
				int cfd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
				if (cfd >= 0)
					usage_dir(w, cfd, &st, clen, depth + 1);
				else if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR)
					usage_mark(w, ART_UNSEEN_UNREADABLE); /* mode 0, or out of descriptors */
			}
		}
		w->path[plen] = '\0';
	}
	pdir_close(d);
	free(d);
}

/* fd's stat in st when known, else NULL. */
static void usage_walk(struct art_usage *u, int fd, const struct stat *st, size_t max_entries, const struct stat *skip)
{
	struct usage *w = xcalloc(1, sizeof *w);
	w->u = u;
	w->max = max_entries ? max_entries : 1000000;
	w->skip = skip;
	usage_dir(w, fd, st, 0, 0);
	free(w);
}

int art_dir_usage(const char *dir, const struct workspace *skip_ws, size_t max_entries, struct art_usage *u)
{
	struct stat ws_st;
	bool skip = skip_ws && fstat(skip_ws->dirfd, &ws_st) == 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	memset(u, 0, sizeof *u);
	if (fd < 0) {
		int rc = -errno;
		if (rc != -ENOENT)
			mark_unseen(&u->unseen, u->where, sizeof u->where, ART_UNSEEN_UNREADABLE, "");
		return rc;
	}
	usage_walk(u, fd, NULL, max_entries, skip ? &ws_st : NULL);
	return 0;
}

int art_ws_dir_usage(const struct workspace *ws, const char *rel, size_t max_entries, struct art_usage *u)
{
	struct stat st;
	int fd = ws_openat_st(ws, rel, O_RDONLY | O_DIRECTORY, 0, &st);
	memset(u, 0, sizeof *u);
	if (fd < 0) {
		if (fd != -ENOENT)
			mark_unseen(&u->unseen, u->where, sizeof u->where, ART_UNSEEN_UNREADABLE, "");
		return fd;
	}
	usage_walk(u, fd, &st, max_entries, NULL);
	return 0;
}

int art_disk_usage(const struct workspace *ws, size_t max_entries, struct art_usage *u, struct err *e)
{
	struct stat st;
	int fd = ws_openat_st(ws, "", O_RDONLY | O_DIRECTORY, 0, &st);
	memset(u, 0, sizeof *u);
	if (fd < 0) {
		mark_unseen(&u->unseen, u->where, sizeof u->where, ART_UNSEEN_UNREADABLE, "");
		return ws_openat_err(e, fd, "");
	}
	usage_walk(u, fd, &st, max_entries, NULL);
	return 0;
}

char **art_outside_dirs(const struct workspace *ws, const char *scratch, const char *const *fs_write, size_t n)
{
	char **v = xcalloc(n + 2, sizeof *v);
	size_t k = 0;
	if (scratch && *scratch)
		v[k++] = xstrdup(scratch);
	for (size_t i = 0; i < n; i++) {
		const char *p = fs_write[i];
		if (!p || p[0] != '/' || path_under(p, ws->abs))
			continue; /* counted with the workspace */
		bool inside = false;
		for (size_t j = 0; j < n && !inside; j++)
			if (j != i && fs_write[j] && fs_write[j][0] == '/' && !path_under(fs_write[j], ws->abs) &&
			    path_under(p, fs_write[j]) && (strcmp(p, fs_write[j]) != 0 || j < i))
				inside = true; /* counted with the one that holds it */
		if (!inside)
			v[k++] = xstrdup(p);
	}
	return v;
}

char **art_dirs_dup(const char *const *dirs)
{
	size_t n = 0;
	while (dirs && dirs[n])
		n++;
	char **v = xcalloc(n + 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = xstrdup(dirs[i]);
	return v;
}

void art_dirs_free(char **dirs)
{
	for (size_t i = 0; dirs && dirs[i]; i++)
		free(dirs[i]);
	free(dirs);
}

void art_limit_usage(const struct workspace *ws, bool with_ws, const char *const *outside, bool has_scratch,
		     struct art_usage *u, unsigned long long *scratch_bytes)
{
	struct art_usage d;
	memset(u, 0, sizeof *u);
	if (with_ws)
		art_disk_usage(ws, 0, u, NULL);
	if (u->unseen) {
		char w[sizeof u->where];
		memcpy(w, u->where, sizeof w);
		join_where(u->where, sizeof u->where, ws->display, w);
	}
	if (scratch_bytes)
		*scratch_bytes = 0;
	for (size_t i = 0; outside && outside[i]; i++) {
		art_dir_usage(outside[i], ws, 0, &d);
		if (d.unseen) {
			char w[sizeof d.where];
			memcpy(w, d.where, sizeof w);
			join_where(d.where, sizeof d.where, outside[i], w);
		}
		if (i == 0 && has_scratch && scratch_bytes)
			*scratch_bytes = d.blocks;
		art_usage_add(u, &d);
	}
}

void art_limit_measure(const struct workspace *ws, const char *scratch, const char *const *fs_write, size_t n,
		       struct art_usage *u)
{
	char **outside = art_outside_dirs(ws, scratch, fs_write, n);
	art_limit_usage(ws, true, (const char *const *)outside, scratch && *scratch, u, NULL);
	art_dirs_free(outside);
}
