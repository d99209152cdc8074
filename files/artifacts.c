/* The workspace's files (see artifacts.h).
 *
 * The walk goes from directory fd to directory fd: every directory is
 * opened with openat(parent, name, O_NOFOLLOW|O_DIRECTORY), so a symlink
 * planted in the workspace (to $HOME, to /) is listed as a symlink and
 * never entered, and a directory swapped for a symlink between the stat
 * and the open makes the open fail instead of leading outside. */
#include "artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <sha2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../common/util.h"

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
 * w->path[0..plen). */
static int walk_dir(struct walk *w, int dfd, size_t plen, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			rc = errno ? -errno : 0;
			break;
		}
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (!w->o->include_hidden && name[0] == '.')
			continue;
		size_t nl = strlen(name), sep = plen ? 1 : 0;
		if (plen + sep + nl >= sizeof w->path) {
			w->out->truncated = true;
			continue;
		}
		if (sep)
			w->path[plen] = '/';
		memcpy(w->path + plen + sep, name, nl + 1);
		size_t clen = plen + sep + nl;
		if (excluded(w->o, w->path))
			continue;

		struct stat st;
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		if (S_ISDIR(st.st_mode)) {
			if (depth + 1 >= ART_MAX_DEPTH) {
				w->out->truncated = true;
				continue;
			}
			if (++w->dirs > w->max) {
				w->out->truncated = true;
				w->stop = true;
				break;
			}
			/* O_NONBLOCK: harmless on a directory, and should the name
			 * have become a FIFO since the stat, O_DIRECTORY fails
			 * without opening it. */
			int cfd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
			if (cfd < 0)
				continue; /* swapped for a symlink or removed */
			rc = walk_dir(w, cfd, clen, depth + 1);
			w->path[plen] = '\0';
			if (rc < 0 || w->stop)
				break;
		} else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			if (w->o->pattern && fnmatch(w->o->pattern, name, 0) != 0)
				continue;
			if (w->out->n >= w->max) {
				w->out->truncated = true;
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
	closedir(d);
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

	fd = ws_openat(ws, w->path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0) {
		rc = ws_openat_err(e, fd, *sub ? sub : "");
		free(w);
		return rc;
	}
	rc = walk_dir(w, fd, n, 0);
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

struct usage {
	size_t seen, max;
	unsigned long long bytes;
	bool stop;
};

/* Sums the allocated blocks beneath the directory dfd (owned). */
static void usage_dir(struct usage *u, int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (!u->stop && (de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (++u->seen > u->max) {
			u->stop = true;
			break;
		}
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		u->bytes += (unsigned long long)st.st_blocks * 512u;
		if (!S_ISDIR(st.st_mode) || depth + 1 >= ART_MAX_DEPTH)
			continue;
		int cfd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (cfd >= 0)
			usage_dir(u, cfd, depth + 1);
	}
	closedir(d);
}

int art_dir_usage(const char *dir, size_t max_entries, unsigned long long *bytes, bool *complete)
{
	struct usage u = { .max = max_entries ? max_entries : 1000000 };
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	*bytes = 0;
	*complete = false;
	if (fd < 0)
		return -errno;
	usage_dir(&u, fd, 0);
	*bytes = u.bytes;
	*complete = !u.stop;
	return 0;
}

int art_disk_usage(const struct workspace *ws, size_t max_entries, unsigned long long *bytes, bool *complete,
		   struct err *e)
{
	struct usage u = { .max = max_entries ? max_entries : 1000000 };
	int fd = ws_openat(ws, "", O_RDONLY | O_DIRECTORY, 0);

	*bytes = 0;
	*complete = false;
	if (fd < 0)
		return ws_openat_err(e, fd, "");
	usage_dir(&u, fd, 0);
	*bytes = u.bytes;
	*complete = !u.stop;
	return 0;
}
