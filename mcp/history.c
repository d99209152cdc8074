/* The server's history of each session (history.h). */
#include "history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/userdir.h"
#include "../common/util.h"
#include "../files/artifacts.h"
#include "../interp/pyinfo.h"
#include "../policy/trust.h"

/* A session's file kept open for appending: a warm call's record is then
 * one fstatat and one write, not six system calls (a lookup, an open, an
 * fstat, geteuid, the write and a close), each about 4 us on the test VM.
 * The fstatat by name before each record is what keeps this exact: a file
 * deleted or replaced since (by a person, or a second server on the same
 * project) no longer has the kept inode, and is opened again through its
 * name, as it would have been without a kept descriptor. */
#define HISTORY_KEPT 8

struct kept_file {
	int fd; /* -1: unused */
	dev_t dev;
	ino_t ino;
	char name[128];
};

struct history {
	int dirfd;               /* the workspace's history directory, or -1 */
	char dir[PATH_MAX];
	char why[600];           /* why it is off, or "" */
	cJSON *start;            /* the start record of a new history (server) */
	uid_t euid;
	struct kept_file kept[HISTORY_KEPT];
	unsigned next_kept;      /* the slot a new file takes when all are used */
};

static void kept_init(struct history *h)
{
	h->euid = geteuid();
	for (size_t i = 0; i < HISTORY_KEPT; i++)
		h->kept[i].fd = -1;
}

static void kept_close(struct history *h)
{
	for (size_t i = 0; i < HISTORY_KEPT; i++) {
		if (h->kept[i].fd >= 0)
			close(h->kept[i].fd);
		h->kept[i].fd = -1;
	}
}

static struct history *off(struct history *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static struct history *off(struct history *h, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->why, sizeof h->why, fmt, ap);
	va_end(ap);
	if (h->dirfd >= 0)
		close(h->dirfd);
	h->dirfd = -1;
	return h;
}

/* $XDG_STATE_HOME/python-sandbox-mcp/history/<sha256 of the workspace's
 * canonical path>. */
static int dir_path(const char *ws_abs, char *out, size_t n, struct err *e)
{
	char base[PATH_MAX];
	if (userdir_state_path(base, sizeof base, e) < 0)
		return -1;
	char hex[65];
	trust_hash(ws_abs, strlen(ws_abs), hex);
	if ((size_t)snprintf(out, n, "%s/history/%.32s", base, hex) >= n)
		return err_set(e, -ENAMETOOLONG, "the state directory's path is too long");
	return 0;
}

/* Attack: a state directory inside the project (XDG_STATE_HOME pointed
 * there, or a path the policy lets the code write or read) would let the
 * sandboxed code write the history that the export and verify_outputs
 * believe.  Only a directory outside ROOT, the workspace and every listed
 * fs_write and fs_read path is used. */
static const char *reachable(const struct workspace *ws, const struct policy *pol, const char *real)
{
	if (path_under(real, ws->root))
		return ws->root;
	if (path_under(real, ws->abs))
		return ws->abs;
	for (size_t i = 0; pol && pol->fs_write == FS_WRITE_LIST && i < pol->n_fs_write_paths; i++)
		if (pol->fs_write_paths[i][0] == '/' && path_under(real, pol->fs_write_paths[i]))
			return pol->fs_write_paths[i];
	for (size_t i = 0; pol && pol->fs_read == FS_READ_LIST && i < pol->n_fs_read_paths; i++)
		if (pol->fs_read_paths[i][0] == '/' && path_under(real, pol->fs_read_paths[i]))
			return pol->fs_read_paths[i];
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct history *history_open(const struct workspace *ws, const struct policy *pol, const char *policy_source,
			     const char *policy_sha256, const char *venv)
{
	struct history *h = xcalloc(1, sizeof *h);
	h->dirfd = -1;
	kept_init(h);
	struct err e = { 0 };
	if (dir_path(ws->abs, h->dir, sizeof h->dir, &e) < 0)
		return off(h, "no state directory: %.400s", e.msg);
	const char *seen = reachable(ws, pol, h->dir);
	if (seen)
		return off(h, "the state directory %.200s lies inside %.200s, which sandboxed code can reach: set XDG_STATE_HOME to a directory outside the project",
			   h->dir, seen);
	struct userdir ud = { .fd = -1 };
	if (userdir_open(&ud, h->dir, true, &e) < 0)
		return off(h, "%.500s", e.msg);
	char real[PATH_MAX];
	if (realpath(h->dir, real) && (seen = reachable(ws, pol, real))) {
		userdir_close(&ud);
		return off(h, "the state directory %.200s lies inside %.200s, which sandboxed code can reach: set XDG_STATE_HOME to a directory outside the project",
			   real, seen);
	}
	h->dirfd = ud.fd;
	/* For a person who looks: which workspace this directory is for. */
	userdir_write(&ud, "workspace", ws->abs, strlen(ws->abs), &e);

	cJSON *s = h->start = cJSON_CreateObject();
	cJSON_AddNumberToObject(s, "v", 1);
	cJSON_AddStringToObject(s, "kind", "start");
	cJSON_AddStringToObject(s, "root", ws->root);
	cJSON_AddStringToObject(s, "workspace", ws->display);
	cJSON_AddStringToObject(s, "policy", policy_source ? policy_source : "");
	cJSON_AddStringToObject(s, "policy_sha256", policy_sha256 ? policy_sha256 : "");
	cJSON_AddNumberToObject(s, "seed", pol ? (double)pol->limits.seed : 0);
	cJSON_AddNumberToObject(s, "memory_mb", pol ? (double)pol->limits.memory_mb : 0);
	cJSON_AddNumberToObject(s, "max_timeout_s", pol ? pol->limits.max_timeout_s : 0);
	cJSON *v = cJSON_AddObjectToObject(s, "versions");
	cJSON_AddStringToObject(v, "python", py_embedded_version());
	static const char *const dists[] = { "numpy", "pandas", "matplotlib" };
	for (size_t i = 0; i < 3; i++) {
		char ver[64];
		py_dist_version(dists[i], venv, ver, sizeof ver);
		cJSON_AddStringToObject(v, dists[i], ver);
	}
	return h;
}

struct history *history_open_read(const char *workspace_abs, char *why, size_t whyn)
{
	struct history *h = xcalloc(1, sizeof *h);
	h->dirfd = -1;
	kept_init(h);
	struct err e = { 0 };
	if (dir_path(workspace_abs, h->dir, sizeof h->dir, &e) < 0) {
		snprintf(why, whyn, "no state directory: %s", e.msg);
		return h;
	}
	struct userdir ud = { .fd = -1 };
	int r = userdir_open(&ud, h->dir, false, &e);
	if (r == 1)
		snprintf(why, whyn, "no session of %s has a history (%s does not exist): run code in it through the server first",
			 workspace_abs, h->dir);
	else if (r < 0)
		snprintf(why, whyn, "%s", e.msg);
	else
		h->dirfd = ud.fd;
	return h;
}

void history_free(struct history *h)
{
	if (!h)
		return;
	kept_close(h);
	if (h->dirfd >= 0)
		close(h->dirfd);
	cJSON_Delete(h->start);
	free(h);
}

bool history_on(const struct history *h)
{
	return h && h->dirfd >= 0;
}

const char *history_why_off(const struct history *h)
{
	return h ? h->why : "";
}

const char *history_dir(const struct history *h)
{
	return h ? h->dir : "";
}

static void file_name(char *out, size_t n, const char *session)
{
	snprintf(out, n, "%s.jsonl", session);
}

/* The whole of buf, or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The session's file open for appending, and its stat now (st): the kept
 * descriptor while the name still holds its inode, else the file opened
 * (created, or emptied with create_new) through its name and kept.  Only
 * a regular file of this user's is written: -EPERM for anything else.
 * -ENOENT: no such file and missing_ok (nothing is created). */
static int open_kept(struct history *h, const char *name, bool create_new, bool missing_ok, struct stat *st)
{
	struct kept_file *k = NULL;
	for (size_t i = 0; i < HISTORY_KEPT; i++)
		if (h->kept[i].fd >= 0 && strcmp(h->kept[i].name, name) == 0)
			k = &h->kept[i];
	if (!create_new) {
		if (fstatat(h->dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT && missing_ok)
				return -ENOENT;
		} else if (k && st->st_dev == k->dev && st->st_ino == k->ino) {
			return S_ISREG(st->st_mode) && st->st_uid == h->euid ? k->fd : -EPERM;
		}
	}
	int flags = O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (create_new ? O_TRUNC : 0);
	int fd = openat(h->dirfd, name, flags, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_uid != h->euid) {
		close(fd);
		return -EPERM;
	}
	if (!k) {
		k = &h->kept[h->next_kept++ % HISTORY_KEPT];
		snprintf(k->name, sizeof k->name, "%s", name);
	}
	if (k->fd >= 0)
		close(k->fd);
	k->fd = fd;
	k->dev = st->st_dev;
	k->ino = st->st_ino;
	return fd;
}

/* One record, one write (O_APPEND: whole lines, even with two servers on
 * the same project).  start_missing: a file that does not exist is started
 * (its start record) first. */
static int append(struct history *h, const char *session, cJSON *rec, bool create_new, bool start_missing);

static void start_new(struct history *h, const char *session)
{
	cJSON *s = cJSON_Duplicate(h->start, 1);
	cJSON_AddStringToObject(s, "session", session);
	cJSON_AddNumberToObject(s, "created_ms", (double)now_ms());
	int r = append(h, session, s, true, false);
	if (r < 0)
		log_warn("history of session %s: cannot start it in %s: %s", session, h->dir, strerror(-r));
	cJSON_Delete(s);
}

static int append(struct history *h, const char *session, cJSON *rec, bool create_new, bool start_missing)
{
	char name[128];
	file_name(name, sizeof name, session);
	struct stat st;
	int fd = open_kept(h, name, create_new, start_missing, &st);
	if (fd == -ENOENT && start_missing) {
		start_new(h, session);
		fd = open_kept(h, name, false, false, &st);
	}
	if (fd < 0)
		return fd;
	int r = 0;
	char *line = cJSON_PrintUnformatted(rec);
	if (!line)
		r = -ENOMEM;
	if (!r) {
		size_t len = strlen(line);
		line[len] = '\n';
		/* Past half the cap (a record is far smaller), whether the file
		 * already ends with the marker that says it is full. */
		static const char full[] = "{\"v\":1,\"kind\":\"full\"}\n";
		char tail[sizeof full] = "";
		bool ended = (uint64_t)st.st_size >= HISTORY_FILE_MAX / 2 &&
			     pread(fd, tail, sizeof full - 1, st.st_size - (off_t)(sizeof full - 1)) == (ssize_t)sizeof full - 1 &&
			     memcmp(tail, full, sizeof full - 1) == 0;
		if (ended || (uint64_t)st.st_size + len + 1 > HISTORY_FILE_MAX - 64) {
			/* Full: one marker, then nothing (a smaller record after it
			 * would make the history skip a call). */
			r = -EFBIG;
			if (!ended)
				write_all(fd, full, sizeof full - 1);
		} else {
			r = write_all(fd, line, len + 1);
		}
	}
	free(line);
	return r;
}

void history_reset(struct history *h, const char *session)
{
	if (history_on(h))
		start_new(h, session);
}

/* A fork starts with its parent's history: a copy of the file. */
static void copy_parent(struct history *h, const char *parent, const char *session)
{
	char from[128], to[128];
	file_name(from, sizeof from, parent);
	file_name(to, sizeof to, session);
	int in = openat(h->dirfd, from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0) {
		start_new(h, session);
		return;
	}
	int out = openat(h->dirfd, to, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* In the kernel (on the loop: a long history is copied without
	 * passing through this process), read and write where it cannot. */
	ssize_t n;
	while (out >= 0 && (n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0)) > 0)
		;
	char buf[65536];
	while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
		if (write_all(out, buf, (size_t)n) < 0)
			break;
	if (out < 0)
		log_warn("history of session %s: cannot copy %s's: %s", session, parent, strerror(errno));
	else
		close(out);
	close(in);
}

/* An image, once per content: img-<sha256 of its base64>. */
static void store_image(struct history *h, const struct hist_image *im, cJSON *list)
{
	char hex[65], name[80];
	size_t len = strlen(im->b64);
	trust_hash(im->b64, len, hex);
	snprintf(name, sizeof name, "img-%s", hex);
	struct stat st;
	if (fstatat(h->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		char tmp[96];
		snprintf(tmp, sizeof tmp, ".%s.tmp", name);
		int fd = openat(h->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return;
		int r = write_all(fd, im->b64, len);
		close(fd);
		if (r < 0 || renameat(h->dirfd, tmp, h->dirfd, name) < 0) {
			unlinkat(h->dirfd, tmp, 0);
			return;
		}
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sha256", hex);
	cJSON_AddStringToObject(o, "mime", im->mime);
	cJSON_AddItemToArray(list, o);
}

static void add_text(cJSON *o, const char *key, const char *s)
{
	if (!s) {
		cJSON_AddNullToObject(o, key);
		return;
	}
	char *t = utf8_clip(s, HISTORY_TEXT_MAX, true);
	cJSON_AddStringToObject(o, key, t ? t : "");
	free(t);
}

void history_record(struct history *h, const struct hist_call *c)
{
	if (!history_on(h))
		return;
	if (strcmp(c->state, "forked") == 0 && c->fork_from && *c->fork_from)
		copy_parent(h, c->fork_from, c->session);
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "kind", "call");
	cJSON_AddNumberToObject(r, "cell", c->cell);
	cJSON_AddNumberToObject(r, "t_ms", (double)now_ms());
	char hex[65];
	trust_hash(c->code, strlen(c->code), hex);
	cJSON_AddStringToObject(r, "code_sha256", hex);
	cJSON_AddStringToObject(r, "code", c->code);
	cJSON_AddStringToObject(r, "status", c->status);
	cJSON_AddStringToObject(r, "state", c->state);
	if (c->fork_from && *c->fork_from && strcmp(c->state, "forked") == 0)
		cJSON_AddStringToObject(r, "fork_from", c->fork_from);
	cJSON_AddNumberToObject(r, "duration_ms", (double)(long)c->duration_ms);
	cJSON_AddNumberToObject(r, "timeout_s", c->timeout_s);
	add_text(r, "stdout", c->out);
	add_text(r, "stderr", c->err);
	add_text(r, "result", c->result);
	if (c->etype || c->emsg) {
		cJSON *e = cJSON_AddObjectToObject(r, "error");
		add_text(e, "type", c->etype ? c->etype : "Error");
		add_text(e, "message", c->emsg ? c->emsg : "");
		add_text(e, "traceback", c->etb ? c->etb : "");
	} else {
		cJSON_AddNullToObject(r, "error");
	}
	cJSON *imgs = cJSON_AddArrayToObject(r, "images");
	for (size_t i = 0; i < c->n_images; i++)
		store_image(h, &c->images[i], imgs);
	cJSON_AddItemToObject(r, "files", c->files ? cJSON_Duplicate(c->files, 1) : cJSON_CreateArray());
	int e = append(h, c->session, r, false, true);
	if (e < 0 && e != -EFBIG)
		log_warn("history of session %s: cell %d not recorded in %s: %s", c->session, c->cell, h->dir, strerror(-e));
	cJSON_Delete(r);
}

void history_hash_file(const struct workspace *ws, const char *rel, const char *disp, double bytes, bool created,
		       cJSON *files, off_t *budget)
{
	if (cJSON_GetArraySize(files) >= HISTORY_FILES_MAX)
		return;
	char hex[65];
	off_t cost = 0;
	int r = *budget > 0 ? art_sha256(ws, rel, *budget, hex, &cost, NULL) : -EFBIG;
	*budget -= cost < *budget ? cost : *budget;
	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "path", disp);
	if (r == 0)
		cJSON_AddStringToObject(f, "sha256", hex);
	else
		cJSON_AddNullToObject(f, "sha256");
	cJSON_AddNumberToObject(f, "bytes", bytes);
	cJSON_AddStringToObject(f, "change", created ? "created" : "modified");
	cJSON_AddItemToArray(files, f);
}

/* --------------------------------------------------------------- reading */

FILE *history_read(const struct history *h, const char *session)
{
	if (!history_on(h)) {
		errno = ENOENT;
		return NULL;
	}
	char name[128];
	file_name(name, sizeof name, session);
	int fd = openat(h->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	/* Only a regular file of this user's (the directory is the user's
	 * own, 0700: anything else was not written by a server of theirs). */
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		errno = EPERM;
		return NULL;
	}
	FILE *f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **history_sessions(const struct history *h)
{
	size_t n = 0;
	char **v = xcalloc(1, sizeof *v);
	if (!history_on(h))
		return v;
	int fd = dup(h->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return v;
	}
	rewinddir(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l > 6 && strcmp(de->d_name + l - 6, ".jsonl") == 0 && de->d_name[0] != '.') {
			v = xreallocarray(v, n + 2, sizeof *v);
			v[n++] = xasprintf("%.*s", (int)(l - 6), de->d_name);
			v[n] = NULL;
		}
	}
	closedir(d);
	qsort(v, n, sizeof *v, cmp_str);
	return v;
}

char *history_image(const struct history *h, const char *sha256)
{
	if (!history_on(h) || strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
		return NULL;
	char name[80];
	snprintf(name, sizeof name, "img-%s", sha256);
	int fd = openat(h->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *b = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (4 << 20)) {
		b = xmalloc((size_t)st.st_size + 1);
		ssize_t n = read(fd, b, (size_t)st.st_size);
		if (n != st.st_size) {
			free(b);
			b = NULL;
		} else {
			b[n] = '\0';
		}
	}
	close(fd);
	return b;
}

cJSON *history_next(FILE *f, size_t *bad)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		cJSON *r = cJSON_ParseWithLength(line, (size_t)n);
		if (cJSON_IsObject(r)) {
			free(line);
			return r;
		}
		cJSON_Delete(r);
		if (bad)
			(*bad)++;
	}
	free(line);
	return NULL;
}

cJSON *history_at(FILE *f, long offset)
{
	if (fseek(f, offset, SEEK_SET) < 0)
		return NULL;
	return history_next(f, NULL);
}

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int int_of(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valueint : 0;
}

static void push(struct hist_lineage *l, struct hist_entry en)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xreallocarray(l->v, l->cap, sizeof *l->v);
	}
	l->v[l->n++] = en;
}

/* The state of a call that started from another state than the one the
 * calls before it left: new (nothing of them), restored or forked (the
 * state after the cell before this one: the calls numbered from this one
 * on were lost). */
static void cut(struct hist_lineage *l, int cell, const char *why)
{
	bool all = strcmp(why, "new") == 0;
	size_t k = 0;
	int lost_from = 0, lost_last = 0, lost_n = 0;
	for (size_t i = 0; i < l->n; i++) {
		if ((l->v[i].kind == HK_LOST && !all) || (!all && l->v[i].cell < cell)) {
			l->v[k++] = l->v[i];
			continue;
		}
		if (l->v[i].kind == HK_CELL) {
			if (!lost_n++)
				lost_from = l->v[i].cell;
			lost_last = l->v[i].cell;
		}
	}
	l->n = k;
	if (lost_n)
		push(l, (struct hist_entry){ .kind = HK_LOST, .cell = lost_from, .last = lost_last, .lost_at = cell,
					       .why = why });
}

int history_lineage(FILE *f, struct hist_lineage *l)
{
	memset(l, 0, sizeof *l);
	if (fseek(f, 0, SEEK_SET) < 0)
		return -errno;
	long off = 0;
	cJSON *r;
	while ((off = ftell(f)) >= 0 && (r = history_next(f, &l->bad))) {
		const char *kind = str_of(r, "kind");
		if (strcmp(kind, "start") == 0 && !l->start) {
			l->start = r;
			continue;
		}
		if (strcmp(kind, "full") == 0)
			l->full = true;
		if (strcmp(kind, "call") == 0) {
			const char *state = str_of(r, "state");
			int cell = int_of(r, "cell");
			bool from_saved = strcmp(state, "restored") == 0 || strcmp(state, "forked") == 0;
			/* A state that came back with cells the history never saw
			 * (kept by an older server, or a parent without one). */
			if (from_saved && cell > 1 && l->n == 0)
				push(l, (struct hist_entry){ .kind = HK_LOST, .cell = 1, .last = cell - 1, .lost_at = cell, .why = "unrecorded" });
			else if (strcmp(state, "new") == 0 || from_saved)
				cut(l, cell, strcmp(state, "new") == 0 ? "new" : strcmp(state, "restored") == 0 ? "restored" : "forked");
			/* The first call of a new, restored or forked session that
			 * timed out or crashed says that state, not rolled_back: its
			 * status says that it was undone too. */
			const char *st = str_of(r, "status");
			bool kept = strcmp(state, "rolled_back") != 0 && (strcmp(st, "ok") == 0 || strcmp(st, "error") == 0);
			push(l, (struct hist_entry){ .kind = kept ? HK_CELL : HK_ROLLED_BACK, .cell = cell, .offset = off });
		}
		cJSON_Delete(r);
	}
	return 0;
}

void history_lineage_free(struct hist_lineage *l)
{
	free(l->v);
	cJSON_Delete(l->start);
	memset(l, 0, sizeof *l);
}

/* The last record of session's history that names path: its time, the
 * sha256 it recorded for the file, its cell, code_sha256 and state (cell
 * -1 when none names it). */
struct prov_hit {
	double t_ms;
	int cell;
	char sha[65], code[65], state[16];
};

static void last_write(const struct history *h, const char *session, const char *needle, const char *path, struct prov_hit *hit)
{
	hit->cell = -1;
	FILE *f = history_read(h, session);
	if (!f)
		return;
	/* A quick look for the path's quoted name first, so that most lines
	 * are never parsed. */
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (!strstr(line, needle))
			continue;
		cJSON *r = cJSON_ParseWithLength(line, (size_t)n);
		const cJSON *fl = cJSON_GetObjectItemCaseSensitive(r, "files"), *fe;
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "t_ms");
		cJSON_ArrayForEach(fe, fl)
		{
			if (strcmp(str_of(fe, "path"), path) != 0)
				continue;
			snprintf(hit->sha, sizeof hit->sha, "%s", str_of(fe, "sha256"));
			snprintf(hit->code, sizeof hit->code, "%s", str_of(r, "code_sha256"));
			snprintf(hit->state, sizeof hit->state, "%s", str_of(r, "state"));
			hit->cell = int_of(r, "cell");
			hit->t_ms = cJSON_IsNumber(t) ? t->valuedouble : 0;
		}
		cJSON_Delete(r);
	}
	free(line);
	fclose(f);
}

cJSON *history_provenance(const struct history *h, const char *session, const char *path, const char *sha256)
{
	if (!history_on(h) || !sha256)
		return NULL;
	cJSON *p = cJSON_CreateString(path);
	char *q = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	char *needle = q ? xasprintf("\"path\":%s", q) : NULL;
	free(q);
	if (!needle)
		return NULL;
	/* The last write of the file in any session's history: the session
	 * asked about first, so that it keeps a tie (a fork's copy of its
	 * parent's records); another replaces it only with a later record. */
	struct prov_hit best, hit;
	char who[128];
	last_write(h, session, needle, path, &best);
	snprintf(who, sizeof who, "%s", session);
	char **v = history_sessions(h);
	for (size_t i = 0; v[i]; i++) {
		if (strcmp(v[i], session) != 0) {
			last_write(h, v[i], needle, path, &hit);
			if (hit.cell >= 0 && (best.cell < 0 || hit.t_ms > best.t_ms)) {
				best = hit;
				snprintf(who, sizeof who, "%s", v[i]);
			}
		}
		free(v[i]);
	}
	free(v);
	free(needle);
	if (best.cell < 0 || strcmp(best.sha, sha256) != 0)
		return NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "session", who);
	cJSON_AddNumberToObject(o, "cell", best.cell);
	cJSON_AddStringToObject(o, "code_sha256", best.code);
	cJSON_AddStringToObject(o, "state", best.state);
	return o;
}
