/* Running a session's recorded cells again on a copy of the project
 * (reproduce.h).
 *
 * Why a child server on a copy: the run again must not touch the
 * original files, and must have what the session had (the same policy,
 * seed and interpreter) and nothing more.  The copy is a temporary
 * directory beside nothing of the project's; the child is this same
 * binary, started as a server on it with the same options that matter,
 * and driven over pipes with JSON-RPC, as any client would, so that its
 * cells run in the same jail as the session's did.  Its environment points
 * its state and config directories inside the copy's temporary directory:
 * no approval of the user's applies there (the project's policy is capped
 * at the built-in one, which has no network), nothing is saved or learned
 * outside it, and all of it goes when the run ends. */
#include "reproduce.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../files/artifacts.h"
#include "../policy/trust.h"
#include "history.h"

extern char **environ;

/* What the copy may take: a project past it is not run again (why says
 * so); the run again is then null, never a guess. */
#define COPY_MAX_BYTES (2ull << 30)
#define COPY_MAX_ENTRIES 100000
/* The largest line the child may answer with (its images included). */
#define LINE_MAX_BYTES (32u << 20)

/* The server is exiting: a run again in progress stops within 200 ms (its
 * worker is joined at exit, and a run may otherwise last max_timeout_s). */
static atomic_bool stopping;

void reproduce_stop(void)
{
	atomic_store(&stopping, true);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ------------------------------------------------------------ the copy */

struct copy {
	const cJSON *skip;            /* display paths not copied (the session's own outputs) */
	const char *ws_rel;           /* the workspace relative to ROOT */
	unsigned long long bytes;
	size_t entries;
	char why[300];
};

static bool skipped(struct copy *c, const char *rel)
{
	if (strcmp(rel, ".git") == 0)
		return true; /* the repository's history: no cell reads it back as data */
	size_t wl = strlen(c->ws_rel);
	if (strncmp(rel, c->ws_rel, wl) == 0 && rel[wl] == '/' && art_path_under(rel + wl + 1, art_server_dirs))
		return true;
	/* What the session's kept cells created: the run again makes it. */
	const char *how = jstr(c->skip, rel);
	return how && strcmp(how, "created") == 0;
}

static int copy_file(int sfd, int dfd, const char *name, mode_t mode, struct copy *c)
{
	/* Attack: the sandboxed code swaps a file for a FIFO between the
	 * walk's look and this open (a blocking open would hold the worker,
	 * and the server's exit, for ever): non-blocking, then a regular
	 * file only.  And a hard link, the one way a name the code can write
	 * reaches an inode outside (a key linked in where a kernel layer
	 * failed to stop it), is not copied: the run again would read it. */
	int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (in < 0)
		return 0; /* unreadable to the server: unreadable to a cell too */
	struct stat st;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
		close(in);
		return 0;
	}
	c->bytes += (unsigned long long)st.st_size;
	if (c->bytes > COPY_MAX_BYTES) {
		close(in);
		snprintf(c->why, sizeof c->why, "the project holds more than %llu MiB to copy", COPY_MAX_BYTES >> 20);
		return -EFBIG;
	}
	int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0755);
	if (out < 0) {
		close(in);
		return -errno;
	}
	off_t left = st.st_size;
	int r = 0;
	while (left > 0) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		if (n <= 0) {
			/* Fall back to read and write (another file system). */
			char buf[65536];
			n = read(in, buf, sizeof buf);
			if (n <= 0 || write(out, buf, (size_t)n) != n) {
				r = -EIO;
				break;
			}
		}
		left -= n;
	}
	close(in);
	close(out);
	return r;
}

static int copy_dir(int sfd, int dfd, const char *rel, struct copy *c, int depth)
{
	if (depth > ART_MAX_DEPTH)
		return 0;
	int fd = dup(sfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[PATH_MAX];
		if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= sizeof sub || skipped(c, sub))
			continue;
		if (++c->entries > COPY_MAX_ENTRIES) {
			snprintf(c->why, sizeof c->why, "the project holds more than %d files and directories to copy", COPY_MAX_ENTRIES);
			r = -EFBIG;
			break;
		}
		struct stat st;
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			r = copy_file(sfd, dfd, de->d_name, st.st_mode, c);
		} else if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(sfd, de->d_name, target, sizeof target - 1);
			if (n > 0) {
				target[n] = '\0';
				if (symlinkat(target, dfd, de->d_name) < 0)
					r = -errno;
			}
		} else if (S_ISDIR(st.st_mode)) {
			int s2 = openat(sfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s2 < 0)
				continue;
			int d2 = -1;
			if (mkdirat(dfd, de->d_name, (st.st_mode & 0755) | 0700) == 0)
				d2 = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = d2 < 0 ? -errno : copy_dir(s2, d2, sub, c, depth + 1);
			close(s2);
			if (d2 >= 0)
				close(d2);
		}
	}
	closedir(d);
	return r;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

/* The temporary directory, everything in it, never following a link. */
static void rm_tree(const char *dir)
{
	if (dir[0])
		nftw(dir, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* ------------------------------------------------------------ the child */

struct child {
	pid_t pid;
	int in, out;                 /* its stdin (we write), its stdout (we read) */
	char *buf;
	size_t len, cap;
	double deadline;             /* monotonic ms */
	int next_id;
	char errlog[PATH_MAX + 64];  /* its stderr */
};

static int child_start(const struct server *s, const char *tmp, const char *root, struct child *ch, char *why, size_t n)
{
	int pin[2], pout[2];
	if (pipe2(pin, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(pout, O_CLOEXEC) < 0) {
		close(pin[0]);
		close(pin[1]);
		return -errno;
	}
	char state[PATH_MAX + 64], config[PATH_MAX + 64], tmpd[PATH_MAX + 64], errlog[PATH_MAX + 64];
	/* The state directory inside the copy's ROOT: the child keeps no
	 * history, saves no session and learns no warm-up (each is refused
	 * where the sandbox could reach it), so it leaves nothing behind. */
	snprintf(state, sizeof state, "XDG_STATE_HOME=%s/.psm-state", root);
	snprintf(config, sizeof config, "XDG_CONFIG_HOME=%s/config", tmp);
	snprintf(tmpd, sizeof tmpd, "TMPDIR=%s/tmp", tmp);
	snprintf(errlog, sizeof errlog, "%s/stderr.log", tmp);
	snprintf(ch->errlog, sizeof ch->errlog, "%s", errlog);
	char *env[16];
	size_t k = 0;
	env[k++] = state;
	env[k++] = config;
	env[k++] = tmpd;
	static const char *const keep[] = { "HOME=", "PATH=", "LANG=", "LC_ALL=", "USER=", "LOGNAME=" };
	for (char **e = environ; *e && k < 14; e++)
		for (size_t i = 0; i < N_ELEMENTS(keep); i++)
			if (strncmp(*e, keep[i], strlen(keep[i])) == 0)
				env[k++] = *e;
	env[k] = NULL;
	char exe[sizeof s->opts.self_exe], rootarg[PATH_MAX + 8], wsarg[PATH_MAX];
	snprintf(exe, sizeof exe, "%s", s->opts.self_exe);
	snprintf(rootarg, sizeof rootarg, "%s", root);
	snprintf(wsarg, sizeof wsarg, "%s", s->ws.display);
	char a1[] = "--root", a2[] = "--workspace", a3[] = "--structured-content", a4[] = "--warmup", a5[] = "off",
	     a6[] = "--log-level", a7[] = "warning", a8[] = "--skill", a9[] = "--timeout", a10[] = "--memory";
	char *argv[16] = { exe, a1, rootarg, a2, wsarg, a3, a4, a5, a6, a7 };
	size_t ac = 10;
	/* The policy the session had: a --skill file (the copy's, when it lies
	 * in the project; no approval applies in the child, so it is capped at
	 * the built-in policy as any project's), and the flags that tightened
	 * it.  Its seed is the session's. */
	char skillarg[PATH_MAX + 8], real[PATH_MAX], tmo[32], mem[32];
	if (s->opts.skill && realpath(s->opts.skill, real)) {
		size_t rl = strlen(s->ws.root);
		if (path_under(real, s->ws.root))
			snprintf(skillarg, sizeof skillarg, "%s%s", root, real + rl);
		else
			snprintf(skillarg, sizeof skillarg, "%s", real);
		argv[ac++] = a8;
		argv[ac++] = skillarg;
	}
	if (s->opts.timeout_s >= 0) {
		snprintf(tmo, sizeof tmo, "%g", s->opts.timeout_s);
		argv[ac++] = a9;
		argv[ac++] = tmo;
	}
	if (s->opts.memory_mb >= 0) {
		snprintf(mem, sizeof mem, "%ld", s->opts.memory_mb);
		argv[ac++] = a10;
		argv[ac++] = mem;
	}
	argv[ac] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
	posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	int r = posix_spawn(&ch->pid, exe, &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(pin[0]);
	close(pout[1]);
	if (r != 0) {
		close(pin[1]);
		close(pout[0]);
		snprintf(why, n, "cannot start a server for the run again: %s", strerror(r));
		return -r;
	}
	ch->in = pin[1];
	ch->out = pout[0];
	return 0;
}

/* Writes one line, within the deadline. */
static int child_send(struct child *ch, cJSON *msg)
{
	char *t = cJSON_PrintUnformatted(msg);
	size_t len = strlen(t);
	t[len] = '\n';
	size_t off = 0;
	int r = 0;
	while (off < len + 1) {
		int left = (int)(ch->deadline - mono_ms());
		struct pollfd p = { .fd = ch->in, .events = POLLOUT };
		if (left <= 0 || atomic_load(&stopping)) {
			r = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, left < 200 ? left : 200) <= 0)
			continue;
		ssize_t w = write(ch->in, t + off, len + 1 - off);
		if (w < 0 && errno != EINTR && errno != EAGAIN) {
			r = -errno;
			break;
		}
		if (w > 0)
			off += (size_t)w;
	}
	free(t);
	return r;
}

/* The response to request id (notifications and other lines skipped), or
 * NULL: the deadline passed, or the child ended. */
static cJSON *child_wait(struct child *ch, int id, int *err)
{
	for (;;) {
		char *nl = ch->buf ? memchr(ch->buf, '\n', ch->len) : NULL;
		if (nl) {
			size_t l = (size_t)(nl - ch->buf) + 1;
			cJSON *m = cJSON_ParseWithLength(ch->buf, l - 1);
			memmove(ch->buf, ch->buf + l, ch->len - l);
			ch->len -= l;
			const cJSON *mid = cJSON_GetObjectItemCaseSensitive(m, "id");
			if (cJSON_IsNumber(mid) && mid->valueint == id)
				return m;
			cJSON_Delete(m);
			continue;
		}
		int left = (int)(ch->deadline - mono_ms());
		struct pollfd p = { .fd = ch->out, .events = POLLIN };
		if (left <= 0 || atomic_load(&stopping)) {
			*err = atomic_load(&stopping) ? -ECANCELED : -ETIMEDOUT;
			return NULL;
		}
		if (poll(&p, 1, left < 200 ? left : 200) <= 0)
			continue;
		if (ch->len + 65536 > ch->cap) {
			if (ch->cap >= LINE_MAX_BYTES) {
				*err = -EMSGSIZE;
				return NULL;
			}
			ch->cap = ch->cap ? ch->cap * 2 : 1 << 20;
			ch->buf = xrealloc(ch->buf, ch->cap);
		}
		ssize_t n = read(ch->out, ch->buf + ch->len, ch->cap - ch->len);
		if (n == 0) {
			*err = -EPIPE;
			return NULL;
		}
		if (n > 0)
			ch->len += (size_t)n;
	}
}

static cJSON *request(struct child *ch, const char *method, cJSON *params, int *err)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	int id = ++ch->next_id;
	cJSON_AddNumberToObject(m, "id", id);
	cJSON_AddStringToObject(m, "method", method);
	cJSON_AddItemToObject(m, "params", params);
	*err = child_send(ch, m);
	cJSON_Delete(m);
	return *err ? NULL : child_wait(ch, id, err);
}

/* Ends the child: end of input (it ends its sessions and exits), then,
 * after a few seconds, SIGKILL. */
static void child_end(struct child *ch)
{
	if (ch->in >= 0)
		close(ch->in);
	ch->in = -1;
	for (int i = 0; ch->pid > 0 && i < (atomic_load(&stopping) ? 4 : 100); i++) {
		if (waitpid(ch->pid, NULL, WNOHANG) == ch->pid) {
			ch->pid = 0;
			break;
		}
		usleep(50000);
	}
	if (ch->pid > 0) {
		kill(ch->pid, SIGKILL);
		waitpid(ch->pid, NULL, 0);
		ch->pid = 0;
	}
	if (ch->out >= 0)
		close(ch->out);
	ch->out = -1;
	free(ch->buf);
	ch->buf = NULL;
}

/* ------------------------------------------------------------ comparing */

/* How a difference ends when the run again could not judge the cell. */
#define UNCHECKED "(its files could not be checked)"

static bool same_str(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && strcmp(a, b) == 0);
}

/* Two outputs as replies carry them: the same text, or, when the reply cut
 * it, the same head and tail around the marker (which names a log file by
 * session and cell number, and the run again numbers its cells from 1). */
static bool same_cut(const char *a, const char *b)
{
	if (same_str(a, b))
		return true;
	const char *ma = a ? strstr(a, "\n[... ") : NULL, *mb = b ? strstr(b, "\n[... ") : NULL;
	if (!ma || !mb || ma - a != mb - b || memcmp(a, b, (size_t)(ma - a)) != 0)
		return false;
	const char *ea = strstr(ma, "]\n"), *eb = strstr(mb, "]\n");
	return ea && eb && strcmp(ea, eb) == 0;
}

/* The SHA-256 of a file of the copy (its display path), read beneath the
 * copy's workspace as every file of a workspace is (no symlink, no FIFO,
 * no hard link: the run again's session wrote there), or false. */
static bool copy_sha(const struct workspace *cws, const char *disp, char hex[65])
{
	char rel[PATH_MAX];
	return ws_relpath_shown(cws, disp, rel, sizeof rel, NULL) == 0 &&
	       art_sha256(cws, rel, (off_t)HISTORY_HASH_BUDGET, hex, NULL, NULL) == 0;
}

/* How the cell run again differs from its record, in words ("" when it
 * does not). */
static void compare_cell(const cJSON *rec, const cJSON *sc, const struct workspace *cws, char *out, size_t n)
{
	out[0] = '\0';
	const char *st = jstr(rec, "status"), *st2 = jstr(sc, "status");
	const cJSON *e2 = cJSON_GetObjectItemCaseSensitive(sc, "error");
	const char *denied = jstr(e2, "denied_by");
	/* A cell that ended well in the session and was refused, run again,
	 * what a run again never allows (the network, a write outside the
	 * copy: the original project's files by their absolute path, or a
	 * directory only the session's approved policy opened; a program):
	 * not a difference the run again can judge, and every file from there
	 * on is left unchecked (null), never said to differ. */
	if (denied && (!st || strcmp(st, "ok") == 0)) {
		const char *what = strcmp(denied, "net_access") == 0   ? "the network, which a run again does not have"
				   : strcmp(denied, "fs_write") == 0   ? "a write the run again does not allow (outside the copy of the project)"
				   : strcmp(denied, "shell_exec") == 0 ? "to run a program, which a run again does not allow"
								       : NULL;
		if (what) {
			snprintf(out, n, "it needed %s %s", what, UNCHECKED);
			return;
		}
	}
	if (!same_str(st, st2)) {
		snprintf(out, n, "it ended as %.20s, not %.20s%s%.200s", st2 ? st2 : "?", st ? st : "?", jstr(e2, "type") ? ": " : "",
			 jstr(e2, "type") ? jstr(e2, "type") : "");
		return;
	}
	if (!same_cut(jstr(rec, "stdout"), jstr(sc, "stdout"))) {
		snprintf(out, n, "it printed something else");
		return;
	}
	const cJSON *r1 = cJSON_GetObjectItemCaseSensitive(rec, "result"), *r2 = cJSON_GetObjectItemCaseSensitive(sc, "result");
	if (!same_str(cJSON_IsString(r1) ? r1->valuestring : NULL, cJSON_IsString(r2) ? r2->valuestring : NULL)) {
		snprintf(out, n, "its value is another");
		return;
	}
	const cJSON *e1 = cJSON_GetObjectItemCaseSensitive(rec, "error");
	if (cJSON_IsObject(e1) && !same_str(jstr(e1, "type"), jstr(e2, "type"))) {
		snprintf(out, n, "it raised %.100s, not %.100s", jstr(e2, "type") ? jstr(e2, "type") : "nothing", jstr(e1, "type"));
		return;
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(rec, "files"))
	{
		const char *p = jstr(f, "path"), *h = jstr(f, "sha256");
		char hex[65];
		if (!p || !h)
			continue;
		if (!copy_sha(cws, p, hex)) {
			snprintf(out, n, "it did not write %.300s", p);
			return;
		}
		if (strcmp(hex, h) != 0) {
			snprintf(out, n, "it wrote other bytes to %.300s", p);
			return;
		}
	}
}

/* ------------------------------------------------------------ the run */

static cJSON *init_params(void)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "protocolVersion", "2025-06-18");
	cJSON_AddObjectToObject(p, "capabilities");
	cJSON *ci = cJSON_AddObjectToObject(p, "clientInfo");
	cJSON_AddStringToObject(ci, "name", "python-sandbox-mcp-reproduce");
	cJSON_AddStringToObject(ci, "version", PSM_VERSION);
	return p;
}

/* The last line the child wrote on its stderr, for a message. */
static void errlog_tail(const char *path, char *out, size_t n)
{
	char buf[4096];
	out[0] = '\0';
	ssize_t len = read_small(path, buf, sizeof buf);
	if (len <= 0)
		return;
	buf[len] = '\0';
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	char *nl = strrchr(buf, '\n');
	snprintf(out, n, "%.300s", nl ? nl + 1 : buf);
}

/* Runs each kept cell; fills r->first*. */
static void run_cells(const struct server *s, struct child *ch, FILE *f, const struct hist_lineage *l, const struct workspace *cws,
		      struct repro *r)
{
	int err = 0;
	cJSON *resp = request(ch, "initialize", init_params(), &err);
	if (!resp) {
		char tail[400] = "";
		errlog_tail(ch->errlog, tail, sizeof tail);
		snprintf(r->why, sizeof r->why, "the server for the run again did not start (%s)%s%.400s", strerror(-err),
			 tail[0] ? ": " : "", tail);
		return;
	}
	cJSON_Delete(resp);
	cJSON *note = cJSON_CreateObject();
	cJSON_AddStringToObject(note, "jsonrpc", "2.0");
	cJSON_AddStringToObject(note, "method", "notifications/initialized");
	child_send(ch, note);
	cJSON_Delete(note);
	r->ran = true;
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].kind != HK_CELL)
			continue;
		cJSON *rec = history_at(f, l->v[i].offset);
		if (!rec)
			continue;
		const cJSON *to = cJSON_GetObjectItemCaseSensitive(rec, "timeout_s");
		double left = (ch->deadline - mono_ms()) / 1000.0;
		double t = cJSON_IsNumber(to) && to->valuedouble > 0 ? to->valuedouble : s->policy->limits.timeout_s;
		if (t > left)
			t = left;
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "name", "execute_python");
		cJSON *a = cJSON_AddObjectToObject(p, "arguments");
		cJSON_AddStringToObject(a, "code", jstr(rec, "code") ? jstr(rec, "code") : "");
		cJSON_AddNumberToObject(a, "timeout_s", t > 0.001 ? t : 0.001);
		resp = t > 0.001 ? request(ch, "tools/call", p, &err) : (cJSON_Delete(p), err = -ETIMEDOUT, NULL);
		int cell = l->v[i].cell;
		if (!resp) {
			snprintf(r->first, sizeof r->first, "the run again stopped at cell %d: %s (it is bounded by max_timeout_s, %g s, in all)",
				 cell, err == -ETIMEDOUT ? "out of time" : strerror(-err), s->policy->limits.max_timeout_s);
			r->first_cell = r->first_cell ? r->first_cell : cell;
			cJSON_Delete(rec);
			break;
		}
		r->cells++;
		const cJSON *sc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(resp, "result"), "structuredContent");
		char what[600];
		if (!sc)
			snprintf(what, sizeof what, "the server for the run again answered no result");
		else
			compare_cell(rec, sc, cws, what, sizeof what);
		if (what[0] && !r->first_cell) {
			r->first_cell = cell;
			if (strstr(what, UNCHECKED))
				r->net_cell = cell;
			snprintf(r->first, sizeof r->first, "cell %d %s", cell, what);
		}
		cJSON_Delete(resp);
		cJSON_Delete(rec);
	}
}

/* The display paths the kept cells wrote, each "created" or "modified"
 * (its first change): a file they created is not copied (the run again
 * makes it); all are hashed in the copy after the run. */
static cJSON *created_by(FILE *f, const struct hist_lineage *l)
{
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].kind != HK_CELL)
			continue;
		cJSON *rec = history_at(f, l->v[i].offset);
		const cJSON *fe;
		cJSON_ArrayForEach(fe, cJSON_GetObjectItemCaseSensitive(rec, "files"))
		{
			const char *p = jstr(fe, "path"), *ch = jstr(fe, "change");
			if (p && ch && !cJSON_GetObjectItemCaseSensitive(o, p))
				cJSON_AddStringToObject(o, p, ch);
		}
		cJSON_Delete(rec);
	}
	return o;
}

void reproduce_run(const struct server *s, const char *session, struct repro *r)
{
	memset(r, 0, sizeof *r);
	double t0 = mono_ms();
	FILE *f = history_read(s->history, session);
	if (!f) {
		snprintf(r->why, sizeof r->why, "session \"%s\" has no recorded cells to run again", session);
		return;
	}
	if (s->ws.display[0] == '/') {
		fclose(f);
		snprintf(r->why, sizeof r->why, "the workspace lies outside the project: a copy of the project would not hold it");
		return;
	}
	struct hist_lineage l;
	history_lineage(f, &l);
	cJSON *made = created_by(f, &l);
	/* Attack, or accident: a TMPDIR inside the project would put the copy
	 * inside what it copies (and in the sandbox's reach). */
	const char *tbase = getenv("TMPDIR");
	char treal[PATH_MAX];
	if (!tbase || tbase[0] != '/' || !realpath(tbase, treal) || path_under(treal, s->ws.root))
		tbase = "/tmp";
	char tmp[PATH_MAX], root[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s/psm-repro-XXXXXX", tbase);
	if (!mkdtemp(tmp)) {
		snprintf(r->why, sizeof r->why, "cannot make a temporary directory for the copy: %s", strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	snprintf(root, sizeof root, "%s/root", tmp);
	char sub[PATH_MAX + 16];
	snprintf(sub, sizeof sub, "%s/tmp", tmp);
	mkdir(sub, 0700);
	snprintf(sub, sizeof sub, "%s/config", tmp);
	mkdir(sub, 0700);
	struct copy c = { .skip = made, .ws_rel = s->ws.display };
	int sfd = open(s->ws.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dfd = mkdir(root, 0755) == 0 ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	double tc = mono_ms();
	int cr = sfd >= 0 && dfd >= 0 ? copy_dir(sfd, dfd, "", &c, 0) : -EIO;
	r->copy_ms = mono_ms() - tc;
	r->copy_bytes = c.bytes;
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	if (cr < 0) {
		snprintf(r->why, sizeof r->why, "the project could not be copied for the run again: %s", c.why[0] ? c.why : strerror(-cr));
		goto out;
	}
	struct workspace cws = { .dirfd = -1 };
	struct err e = { 0 };
	if (ws_open(&cws, root, s->ws.display, &e) < 0) {
		snprintf(r->why, sizeof r->why, "the copy's workspace cannot be opened: %.500s", e.msg);
		goto out;
	}
	struct child ch = { .in = -1, .out = -1, .deadline = t0 + s->policy->limits.max_timeout_s * 1000.0 };
	if (child_start(s, tmp, root, &ch, r->why, sizeof r->why) == 0) {
		run_cells(s, &ch, f, &l, &cws, r);
		child_end(&ch);
		r->files = cJSON_CreateObject();
		const cJSON *m;
		cJSON_ArrayForEach(m, made)
		{
			char hex[65];
			if (copy_sha(&cws, m->string, hex))
				cJSON_AddStringToObject(r->files, m->string, hex);
			else
				cJSON_AddNullToObject(r->files, m->string);
		}
	}
	ws_close(&cws);
out:
	rm_tree(tmp);
	cJSON_Delete(made);
	history_lineage_free(&l);
	fclose(f);
	r->ms = mono_ms() - t0;
}

void repro_free(struct repro *r)
{
	cJSON_Delete(r->files);
	r->files = NULL;
}
