/* The learned warm-up's list of names, per project (see warmup.h). */
#include "warmup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/userdir.h"
#include "../common/util.h"
#include "../policy/trust.h"
#include "../proto/result.h"
#include "../common/escape.h"

/* The saved list: a few dozen names; anything larger was not written by
 * this program. */
#define FILE_MAX 16384
/* Names the zygote refused in this run, so that a session that keeps
 * reporting them (they stay in its sys.modules) costs one probe, not one
 * per call. */
#define REFUSED_MAX 64
/* Lists kept in the state directory, one per project: the least recently
 * written go beyond this (projects deleted long ago, test directories). */
#define FILES_MAX 256

struct entry {
	char name[WARMUP_NAME_MAX + 1];
	bool learned; /* the zygote loaded it (else a candidate, not saved) */
	bool sent;    /* sent to the current zygote */
	bool answered; /* ... and it answered */
};

struct warmup {
	bool on;
	bool store;                       /* the list is saved */
	char dirpath[PATH_MAX];           /* the state directory, when store */
	struct userdir dir;               /* ... open (-1 until it exists) */
	const struct workspace *ws;
	const struct policy *pol;
	char file[96];                    /* warm-<sha256 of ROOT>.json */
	char root[PATH_MAX];
	struct entry e[WARMUP_MAX + WARMUP_REPORT_MAX];
	size_t n;                         /* most recently used first */
	char refused[REFUSED_MAX][WARMUP_NAME_MAX + 1];
	size_t n_refused, refused_next;
	bool paused;                      /* what the zygote was told last */
	/* The names the current zygote was sent and has not answered, apart
	 * from the entries (which can go meanwhile): an answer for any other
	 * name is a lie. */
	char due[WARMUP_MAX + WARMUP_REPORT_MAX][WARMUP_NAME_MAX + 1];
	size_t n_due;
};

bool warmup_name_valid(const char *name)
{
	size_t len = 0, part = 0, parts = 1;
	if (!name)
		return false;
	for (const char *c = name; *c; c++, len++) {
		if (len >= WARMUP_NAME_MAX)
			return false;
		if (*c == '.') {
			if (part == 0 || ++parts > 8)
				return false;
			part = 0;
			continue;
		}
		bool alpha = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_';
		bool digit = *c >= '0' && *c <= '9';
		/* ASCII only: a name of other letters could look like a real
		 * module's in the logs and the saved list. */
		if (!(alpha || (digit && part > 0)) || ++part > 64)
			return false;
	}
	return part > 0;
}

/* Names no zygote is ever sent, whatever a session reports: the same rule
 * as the zygote's own (bootstrap _warm_name_refused), checked here first
 * so that such a name never reaches a process that could run it.  Any
 * __main__ part (importing one runs its program: unittest.__main__ ran a
 * test discovery in the working directory), and modules that print, open
 * a browser or a GUI, hook the interpreter's start, or are the entry
 * points of its command line. */
static const char *const denied_top[] = {
	"__main__", "_psm", "this", "antigravity", "__hello__", "__phello__", "idlelib", "tkinter", "turtle",
	"turtledemo", "test", "pip", "ensurepip", "venv", "site", "sitecustomize", "usercustomize", "pydoc", "pdb",
	"code", "readline", "rlcompleter", "timeit", "cProfile", "profile", "trace", "runpy", "doctest", "zipapp",
	"tabnanny", "py_compile", "compileall", "pickletools", "webbrowser", "lib2to3", "pytest", "_pytest", "IPython",
};
static const char *const denied_full[] = {
	"unittest.main", "http.server", "json.tool", "xmlrpc.server", "wsgiref.simple_server", "sqlite3.dump",
	"asyncio.__main__", "pydoc_data.topics",
};

const char *warmup_name_denied(const char *name)
{
	size_t top = strcspn(name, ".");
	for (const char *p = name; *p;) {
		size_t k = strcspn(p, ".");
		if (k == 8 && strncmp(p, "__main__", 8) == 0)
			return "a __main__ module runs a program when imported";
		p += k + (p[k] == '.');
	}
	for (size_t i = 0; i < N_ELEMENTS(denied_top); i++)
		if (strlen(denied_top[i]) == top && strncmp(name, denied_top[i], top) == 0)
			return "not a module to hold in the zygote";
	for (size_t i = 0; i < N_ELEMENTS(denied_full); i++) {
		size_t k = strlen(denied_full[i]);
		if (strncmp(name, denied_full[i], k) == 0 && (name[k] == '\0' || name[k] == '.'))
			return "not a module to hold in the zygote";
	}
	return NULL;
}

static size_t n_learned(const struct warmup *w)
{
	size_t k = 0;
	for (size_t i = 0; i < w->n; i++)
		k += w->e[i].learned;
	return k;
}

static struct entry *find(struct warmup *w, const char *name, size_t *at)
{
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->e[i].name, name) == 0) {
			if (at)
				*at = i;
			return &w->e[i];
		}
	return NULL;
}

static void remove_at(struct warmup *w, size_t i)
{
	memmove(&w->e[i], &w->e[i + 1], (w->n - i - 1) * sizeof w->e[0]);
	w->n--;
}

/* Moves entry i to the front (most recently used). */
static void to_front(struct warmup *w, size_t i)
{
	struct entry t = w->e[i];
	memmove(&w->e[1], &w->e[0], i * sizeof w->e[0]);
	w->e[0] = t;
}

static bool was_refused(const struct warmup *w, const char *name)
{
	for (size_t i = 0; i < w->n_refused; i++)
		if (strcmp(w->refused[i], name) == 0)
			return true;
	return false;
}

/* Keeps at most FILES_MAX lists in the state directory: removes the
 * oldest (by the time they were last written). */
static void prune(struct warmup *w)
{
	int fd = openat(w->dir.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct old {
		char name[96];
		struct timespec t;
	} *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		size_t len = strlen(de->d_name);
		if (strncmp(de->d_name, "warm-", 5) != 0 || len < 10 || len >= sizeof v->name ||
		    strcmp(de->d_name + len - 5, ".json") != 0 ||
		    fstatat(w->dir.fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			v = xreallocarray(v, cap, sizeof *v);
		}
		memcpy(v[n].name, de->d_name, len + 1); /* len < sizeof name: checked above */
		v[n++].t = st.st_mtim;
	}
	closedir(d);
	while (n > FILES_MAX) {
		size_t oldest = 0;
		for (size_t i = 1; i < n; i++)
			if (v[i].t.tv_sec < v[oldest].t.tv_sec ||
			    (v[i].t.tv_sec == v[oldest].t.tv_sec && v[i].t.tv_nsec < v[oldest].t.tv_nsec))
				oldest = i;
		struct err e = { 0 };
		if (strcmp(v[oldest].name, w->file) != 0)
			userdir_unlink(&w->dir, v[oldest].name, &e);
		v[oldest] = v[--n];
	}
	free(v);
}

static bool open_dir(struct warmup *w, bool create);

static void save(struct warmup *w)
{
	if (!w->store || (w->dir.fd < 0 && !open_dir(w, true)))
		return;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "version", 1);
	cJSON_AddStringToObject(j, "root", w->root);
	cJSON *mods = cJSON_AddArrayToObject(j, "modules");
	for (size_t i = 0; i < w->n; i++)
		if (w->e[i].learned)
			cJSON_AddItemToArray(mods, cJSON_CreateString(w->e[i].name));
	char *txt = cJSON_Print(j);
	cJSON_Delete(j);
	struct err e = { 0 };
	if (txt && userdir_write(&w->dir, w->file, txt, strlen(txt), &e) < 0)
		log_warn("warm-up: cannot save the learned modules: %s", e.msg);
	free(txt);
	prune(w);
}

/* Reads the saved list.  It lies in the user's own directory, checked by
 * userdir_read (owner, mode, no symlink); still every name is checked as a
 * session's would be, and a list for another ROOT (a hash collision, a
 * copied file) is ignored. */
static void load(struct warmup *w)
{
	char *buf = NULL;
	size_t len = 0;
	struct err e = { 0 };
	int r = userdir_read(&w->dir, w->file, FILE_MAX, &buf, &len, &e);
	if (r < 0) {
		log_warn("warm-up: the saved list is refused: %s", e.msg);
		return;
	}
	if (r == 1)
		return;
	cJSON *j = cJSON_ParseWithLength(buf, len);
	free(buf);
	const char *root = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "root"));
	const cJSON *mods = cJSON_GetObjectItemCaseSensitive(j, "modules");
	if (!root || strcmp(root, w->root) != 0 || !cJSON_IsArray(mods)) {
		log_warn("warm-up: %s/%s is not this project's list; it is ignored (and replaced)", w->dir.path, w->file);
		cJSON_Delete(j);
		return;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, mods)
	{
		const char *s = cJSON_GetStringValue(it);
		if (w->n >= WARMUP_MAX || !warmup_name_valid(s) || warmup_name_denied(s) || find(w, s, NULL))
			continue;
		struct entry *en = &w->e[w->n++];
		snprintf(en->name, sizeof en->name, "%s", s);
		en->learned = true;
	}
	cJSON_Delete(j);
	if (w->n)
		log_info("warm-up: %zu learned module(s) for this project, loaded after the first reply", w->n);
}

/* path lies in ROOT, the workspace or an fs_write directory. */
static bool project_holds(const struct workspace *ws, const struct policy *p, const char *path)
{
	if (path_under(path, ws->root) || path_under(path, ws->abs))
		return true;
	for (size_t i = 0; p->fs_write == FS_WRITE_LIST && i < p->n_fs_write_paths; i++)
		if (p->fs_write_paths[i][0] == '/' && path_under(path, p->fs_write_paths[i]))
			return true;
	return false;
}

/* Opens (with create, makes) the state directory; false when it does not
 * exist or cannot be used, which turns saving off (with a log line). */
static bool open_dir(struct warmup *w, bool create)
{
	struct err e = { 0 };
	char real[PATH_MAX];
	int r = userdir_open(&w->dir, w->dirpath, create, &e);
	if (r == 1)
		return false;
	if (r == 0 && realpath(w->dirpath, real) && project_holds(w->ws, w->pol, real))
		r = err_set(&e, -EPERM, "the state directory %s lies inside the project; set XDG_STATE_HOME to a directory outside it",
			    real);
	if (r < 0) {
		log_warn("warm-up: learned modules are kept for this run only: %s", e.msg);
		userdir_close(&w->dir);
		w->store = false;
		return false;
	}
	return true;
}

struct warmup *warmup_new(const struct workspace *ws, const struct policy *p, enum warmup_mode mode)
{
	struct warmup *w = xcalloc(1, sizeof *w);
	w->dir.fd = -1;
	w->on = mode != WARMUP_OFF;
	if (!w->on)
		return w;
	snprintf(w->root, sizeof w->root, "%s", ws->root);
	char hex[65];
	trust_hash(ws->root, strlen(ws->root), hex);
	snprintf(w->file, sizeof w->file, "warm-%s.json", hex);
	struct err e = { 0 };
	char dir[PATH_MAX];
	if (userdir_state_path(dir, sizeof dir, &e) < 0) {
		log_warn("warm-up: learned modules are kept for this run only: %s", e.msg);
		return w;
	}
	/* Attack: a state directory inside the project (XDG_STATE_HOME set
	 * there) could come with a cloned repository, or be written by the
	 * sandboxed code: a list of its choosing.  Only a directory outside
	 * ROOT, the workspace and every fs_write path is believed: judged as
	 * written (nothing is created inside the project), then as resolved. */
	w->ws = ws;
	w->pol = p;
	snprintf(w->dirpath, sizeof w->dirpath, "%s", dir);
	if (project_holds(ws, p, dir)) {
		log_warn("warm-up: learned modules are kept for this run only: the state directory %s lies inside the project; "
			 "set XDG_STATE_HOME to a directory outside it",
			 dir);
		return w;
	}
	w->store = true;
	/* Not made until there is something to save (a server that never
	 * learns anything leaves no trace). */
	if (!open_dir(w, false))
		return w;
	if (mode == WARMUP_CLEAR) {
		if (userdir_unlink(&w->dir, w->file, &e) < 0)
			log_warn("warm-up: %s", e.msg);
		else
			log_info("warm-up: the learned modules of this project were forgotten (--warmup clear)");
		return w;
	}
	load(w);
	return w;
}

void warmup_free(struct warmup *w)
{
	if (!w)
		return;
	userdir_close(&w->dir);
	free(w);
}

static void remember_refused(struct warmup *w, const char *name)
{
	size_t k = strnlen(name, WARMUP_NAME_MAX);
	memmove(w->refused[w->refused_next], name, k);
	w->refused[w->refused_next][k] = '\0';
	w->refused_next = (w->refused_next + 1) % REFUSED_MAX;
	if (w->n_refused < REFUSED_MAX)
		w->n_refused++;
}

void warmup_note(struct warmup *w, const char *const *imports, size_t n)
{
	_Static_assert(RESULT_IMPORTS_MAX <= WARMUP_REPORT_MAX, "one result's report fits");
	_Static_assert(RESULT_MODULE_MAX <= WARMUP_NAME_MAX, "a result's module name fits");
	if (!w || !w->on)
		return;
	/* Attack: a session writes its own result frame (it owns the control
	 * socket) with thousands of names, or names such as "../x" or
	 * "os;import x".  The decoder (proto/result.h) refuses more names than
	 * one cell could report, or an entry that is not a string; each name
	 * must be a plain dotted identifier here. */
	if (n > WARMUP_REPORT_MAX)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *s = imports[i];
		size_t at;
		if (!warmup_name_valid(s) || was_refused(w, s))
			continue;
		const char *denied = warmup_name_denied(s);
		if (denied) {
			log_info("warm-up: %s refused: %s", s, denied);
			remember_refused(w, s);
			continue;
		}
		if (find(w, s, &at)) {
			to_front(w, at);
			continue;
		}
		/* Candidates wait for the zygote's word; room for one report's
		 * worth of them. */
		if (w->n - n_learned(w) >= WARMUP_REPORT_MAX)
			continue;
		if (w->n == N_ELEMENTS(w->e))
			continue;
		memmove(&w->e[1], &w->e[0], w->n * sizeof w->e[0]);
		memset(&w->e[0], 0, sizeof w->e[0]);
		snprintf(w->e[0].name, sizeof w->e[0].name, "%s", s);
		w->n++;
	}
}

char *warmup_after_reply(struct warmup *w, int *n)
{
	*n = 0;
	if (!w || !w->on)
		return NULL;
	struct zmsg_warm *m = xcalloc(1, sizeof *m);
	_Static_assert(N_ELEMENTS(w->due) <= ZMSG_WARM_NAMES, "one W_WARM holds every name due");
	_Static_assert(WARMUP_NAME_MAX <= ZMSG_MODULE_MAX, "a W_WARM holds every name");
	for (size_t i = 0; i < w->n && w->n_due < N_ELEMENTS(w->due); i++)
		if (!w->e[i].sent) {
			snprintf(m->names[m->n_names++], sizeof m->names[0], "%s", w->e[i].name);
			w->e[i].sent = true;
			memcpy(w->due[w->n_due++], w->e[i].name, sizeof w->due[0]);
			(*n)++;
		}
	char *txt = *n ? zmsg_warm_encode(m) : NULL;
	free(m);
	return txt;
}

char *warmup_busy(const struct warmup *w, bool busy)
{
	if (!w || !w->on || busy == w->paused)
		return NULL;
	/* Nothing sent is unanswered: the zygote has no module loading and no
	 * probe to stop, so a pause would only wake it, at the start of every
	 * call and again after its reply, for the CPU the call waits for.
	 * Names sent later are sent after a reply (warmup_after_reply), and
	 * the next call that starts while they load pauses them. */
	if (busy && w->n_due == 0)
		return NULL;
	struct zmsg_warm *m = xcalloc(1, sizeof *m);
	m->has_pause = true;
	m->pause = busy;
	char *txt = zmsg_warm_encode(m);
	free(m);
	return txt;
}

void warmup_busy_sent(struct warmup *w, bool busy)
{
	if (w)
		w->paused = busy;
}

/* Removes entry at and remembers the name as refused for this run. */
static void refuse(struct warmup *w, size_t at, const char *why)
{
	char q[320];
	/* The reason is the zygote's (untrusted) text: quoted for the log. */
	log_info("warm-up: %s refused: %s", w->e[at].name, why ? esc_bytes(q, sizeof q, why, strlen(why), 300) : "no reason given");
	bool was_learned = w->e[at].learned;
	remember_refused(w, w->e[at].name);
	remove_at(w, at);
	if (was_learned)
		save(w);
}

void warmup_zygote_started(struct warmup *w)
{
	if (!w)
		return;
	w->paused = false;
	/* Attack: a name whose import kills the zygote itself (not its
	 * probe) would be sent again to every new zygote, a crash loop that
	 * ends with the server refusing to run code.  A name the last zygote
	 * was sent and never answered is dropped: the cost, when the zygote
	 * died of something else, is learning it again. */
	for (size_t i = w->n; i-- > 0;)
		if (w->e[i].sent && !w->e[i].answered)
			refuse(w, i, "the zygote ended before it had loaded it");
	for (size_t i = 0; i < w->n; i++)
		w->e[i].sent = w->e[i].answered = false;
	w->n_due = 0;
}

bool warmup_outcome(struct warmup *w, const struct zmsg_warmed *m)
{
	const char *name = m->name;
	size_t at, k;
	for (k = 0; w && k < w->n_due; k++)
		if (strcmp(w->due[k], name) == 0)
			break;
	if (!w || k == w->n_due)
		return false;
	memmove(w->due[k], w->due[k + 1], (w->n_due - k - 1) * sizeof w->due[0]);
	w->n_due--;
	if (!w->on || !warmup_name_valid(name) || !find(w, name, &at))
		return true; /* forgotten meanwhile */
	struct entry *en = &w->e[at];
	if (m->ok) {
		log_info("warm-up: %s loaded in the zygote (%.0f ms, %ld imports, the longest %.0f ms)", name,
			 m->ms >= 0 ? m->ms : 0.0, m->steps >= 0 ? m->steps : 0, m->longest_ms >= 0 ? m->longest_ms : 0.0);
		en->answered = true;
		if (en->learned)
			return true;
		en->learned = true;
		log_info("warm-up: learned %s", name);
		/* Over the bound: the least recently used learned name goes. */
		while (n_learned(w) > WARMUP_MAX) {
			size_t i = w->n;
			while (i-- > 0 && !w->e[i].learned)
				;
			log_info("warm-up: forgot %s (at most %d modules are kept)", w->e[i].name, WARMUP_MAX);
			remove_at(w, i);
		}
		save(w);
		return true;
	}
	refuse(w, at, m->why);
	return true;
}

size_t warmup_count(const struct warmup *w)
{
	return w ? n_learned(w) : 0;
}

const char *warmup_name(const struct warmup *w, size_t i)
{
	for (size_t k = 0; w && k < w->n; k++)
		if (w->e[k].learned && i-- == 0)
			return w->e[k].name;
	return NULL;
}
