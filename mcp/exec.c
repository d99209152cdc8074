/* execute_python: arguments, the artifacts of a call, and its end
 * (docs/TOOLS.md).  The process side is the supervisor's: a call is a run
 * (supervisor.h) with the request and what the reply needs around it, and
 * this file implements the run's events; the reply itself is rendered by
 * exec_render.c. */
#include "exec.h"
#include "exec_call.h"
#include "exec_render.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "../files/artifacts.h"
#include "../files/validate.h"
#include "budget.h"
#include "history.h"
#include "reply.h"
#include "schema.h"

static struct call *call_of(struct run *r)
{
	return (struct call *)r;
}

static void call_free(struct call *c);
static void exec_finish(struct call *c);
static const struct run_events call_events;

bool session_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > SESSION_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void input_error(struct server *s, const struct req *q, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void input_error(struct server *s, const struct req *q, const char *fmt, ...)
{
	char msg[2600]; /* the sessions' names, when they are all taken */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tool_reply(s, q, tool_text_result(msg, true));
}

void exec_call(struct server *s, const struct req *q, const cJSON *args, const cJSON *progress_token)
{
	const struct policy_limits *lim = &s->policy->limits;
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(args, "code");
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(args, "timeout_s");
	const cJSON *reset = cJSON_GetObjectItemCaseSensitive(args, "reset");
	const cJSON *fork = cJSON_GetObjectItemCaseSensitive(args, "fork_from");

	if (!cJSON_IsString(code)) {
		input_error(s, q, "execute_python needs \"code\": a string of Python source");
		return;
	}
	if (strlen(code->valuestring) > MCP_MAX_CODE) {
		input_error(s, q, "code is %zu bytes; the limit is %u bytes (%u MiB): put large data in a file under %s/ and read it from the code",
			    strlen(code->valuestring), MCP_MAX_CODE, MCP_MAX_CODE >> 20, s->ws.display);
		return;
	}
	const char *name = "default";
	if (session && !cJSON_IsNull(session)) {
		if (!cJSON_IsString(session) || !session_name_valid(session->valuestring)) {
			input_error(s, q, "\"session\" must be a string matching ^[A-Za-z0-9_-]{1,64}$ (for example \"default\" or \"analysis-2\")");
			return;
		}
		name = session->valuestring;
	}
	double t = lim->timeout_s;
	if (timeout && !cJSON_IsNull(timeout)) {
		if (!cJSON_IsNumber(timeout) || !(timeout->valuedouble > 0) || !isfinite(timeout->valuedouble)) {
			input_error(s, q, "\"timeout_s\" must be a number of seconds greater than 0 (at most %g)", lim->max_timeout_s);
			return;
		}
		if (timeout->valuedouble > lim->max_timeout_s) {
			input_error(s, q, "\"timeout_s\" %g is above the policy's max_timeout_s (%g): ask for at most %g seconds",
				    timeout->valuedouble, lim->max_timeout_s, lim->max_timeout_s);
			return;
		}
		t = timeout->valuedouble;
	}
	if (reset && !cJSON_IsNull(reset) && !cJSON_IsBool(reset)) {
		input_error(s, q, "\"reset\" must be true or false");
		return;
	}
	const char *parent = NULL;
	if (fork && !cJSON_IsNull(fork)) {
		if (!cJSON_IsString(fork) || !session_name_valid(fork->valuestring)) {
			input_error(s, q, "\"fork_from\" must be the name of an existing session (a string matching ^[A-Za-z0-9_-]{1,64}$)");
			return;
		}
		char why[400];
		if (sup_fork_check(s->sup, fork->valuestring, name, cJSON_IsTrue(reset), why, sizeof why) < 0) {
			input_error(s, q, "%s", why);
			return;
		}
		parent = fork->valuestring;
	}
	if (!sup_session_exists(s->sup, name) && sup_count_sessions(s->sup) >= lim->max_sessions) {
		/* What really frees a slot: nothing closes a session, and reset
		 * empties one but keeps its slot (before, the message said
		 * "reset one", which freed nothing). */
		char names[1500];
		sup_session_names(s->sup, names, sizeof names);
		int held = sup_count_sessions(s->sup);
		input_error(s, q,
			    "cannot start session \"%s\": the policy allows at most %ld sessions at once (limits.max_sessions), and this server "
			    "holds %ld: %s. A session keeps its slot until the server exits; reset: true empties a session but keeps its slot. "
			    "Run this code in one of those sessions (with reset: true on one you no longer need, for a clean interpreter under "
			    "its name), or raise limits.max_sessions in the policy; after a restart of the server only the sessions called "
			    "again take a slot",
			    name, lim->max_sessions, (long)held, names);
		return;
	}
	struct call *c = xcalloc(1, sizeof *c);
	char *code_copy = xstrdup(code->valuestring);
	c->srv = s;
	c->id = cJSON_Duplicate(q->id, 1);
	c->q = *q;
	c->q.id = c->id;
	c->progress_token = progress_token ? cJSON_Duplicate(progress_token, 1) : NULL;
	struct run *r = &c->run;
	r->ev = &call_events;
	r->code = code_copy;
	snprintf(r->session, sizeof r->session, "%s", name);
	r->timeout_ms = t * 1000.0;
	r->reset = cJSON_IsTrue(reset);
	if (parent)
		snprintf(r->fork_from, sizeof r->fork_from, "%s", parent);
	r->wants_progress = c->progress_token != NULL;
	sup_submit(s->sup, r);
}

/* The snapshots of a call (before it runs, after it ended) are walks of the
 * whole workspace, and the images among its artifacts are read to be
 * returned: both run on a worker (work.h), so a workspace the code filled
 * with entries never holds up the loop.  A scan job owns everything it
 * touches; the call gets the results on the loop, in done().
 *
 * Except a small one: when the last snapshot visited at most half of
 * SCAN_LOOP_ENTRIES entries within half of SCAN_LOOP_MS, the next is taken
 * on the loop itself, under a budget of SCAN_LOOP_ENTRIES and SCAN_LOOP_MS
 * (art_budget_begin) and reading no file's bytes.  A warm call then makes
 * no round trip to a worker, which cost two wake-ups each way: measured on
 * `1+1`, 100 to 170 us back to back and 250 to 560 us after a pause of the
 * agent's.  A snapshot that outgrows the budget (the code made files, or
 * one must be read: an image, a file's hash) is thrown away where it
 * stopped and taken again whole on a worker; the next ones stay there until
 * one is small again.  So the loop's own share is bounded whatever the
 * sandbox wrote: at most SCAN_LOOP_ENTRIES entries read and
 * SCAN_LOOP_MS (one stat that the file system holds up longer is the one
 * case it cannot cut short; the last snapshot's time keeps such a
 * workspace on the workers). */
#define SCAN_LOOP_ENTRIES 256
#define SCAN_LOOP_MS 1.0
struct scan_job {
	struct job j;
	struct call *c;              /* loop only; the job is abandoned when c goes */
	const struct workspace *ws;
	bool after;                  /* the after scan and diff, else the snapshot */
	bool images_link;            /* images as links only: nothing to read */
	void (*then)(struct run *r, void *arg);
	void *arg;
	struct art_list before, list;
	cJSON *artifacts;
	struct image images[MAX_IMAGES];
	size_t n_images;
	char **thumb_rel;
	size_t n_thumbs;
	unsigned long long ws_before, ws_after; /* the after scan: art_list_bytes */
	/* The after scan: a file created, modified or deleted (or unsure). */
	bool changed;
	size_t created;
	char **outside;              /* art_outside_dirs: sup_scratch first */
	bool has_scratch;
	unsigned long long scratch_bytes; /* what the scratch directory takes now */
	unsigned long long extra;    /* what counts besides the listed files */
	char unseen[600];            /* what the walks could not see, or "" */
	/* What the sandbox alone writes beside the listed files (.cache, the
	 * scratch and fs_write directories outside), for "did the call write a
	 * file": .logs and .sessions grow by the server's own writes too (a
	 * long output's log), so their size says nothing of the call.
	 * ULLONG_MAX when the walks could not see everything. */
	unsigned long long effect;
	/* The after scan, when the history is kept: each file the call
	 * created or modified with its SHA-256, within a budget of reading. */
	cJSON *files;
	off_t hash_left;
	/* What the walks took: the next snapshot's place (scan_submit). */
	size_t visited;
	double took_ms;
	bool spent;                  /* on the loop: the budget ran out */
	/* The after scan: its list may stand for the next snapshot while
	 * inotify reports nothing (wsnote.h), from `events` on. */
	struct wsnote *note;
	bool stands;
	unsigned long long events;
};

static void on_change(const struct art_entry *en, enum art_change ch, void *arg)
{
	struct scan_job *sj = arg;
	sj->changed = true;
	sj->created += ch == ART_CREATED;
	if (art_path_under(en->rel, art_server_dirs) || en->is_symlink)
		return;
	char disp[4200];
	if (ws_display_path(sj->ws, en->rel, disp, sizeof disp) < 0)
		return;
	/* Read while the session is stopped (the scan runs between its reply
	 * and its thaw): the bytes are the call's.  Never on the loop: a
	 * worker takes the snapshot again (art_budget_refuse). */
	if (sj->files && art_budget_refuse())
		return;
	if (sj->files)
		history_hash_file(sj->ws, en->rel, disp, (double)en->bytes, ch == ART_CREATED, sj->files, &sj->hash_left);
	if (cJSON_GetArraySize(sj->artifacts) >= 1000)
		return;
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "path", disp);
	cJSON_AddNumberToObject(a, "bytes", (double)en->bytes);
	cJSON_AddStringToObject(a, "mime", mime_from_path(en->rel));
	cJSON_AddStringToObject(a, "change", ch == ART_CREATED ? "created" : "modified");
	cJSON_AddItemToArray(sj->artifacts, a);

	enum vkind k = vkind_from_path(en->rel);
	if ((k != VK_PNG && k != VK_JPEG) || sj->n_images + sj->n_thumbs >= MAX_IMAGES || sj->images_link)
		return;
	if (en->bytes <= IMAGE_MAX_BYTES) {
		if (art_budget_refuse())
			return;
		/* At most MAX_IMAGES reads of at most IMAGE_MAX_BYTES each. */
		unsigned char *buf;
		size_t len;
		struct err e = { 0 };
		if (ws_read_file(sj->ws, en->rel, IMAGE_MAX_BYTES, &buf, &len, &e) < 0)
			return;
		unsigned w, h;
		bool ok = k == VK_PNG ? png_size(buf, len, &w, &h) : jpeg_size(buf, len, &w, &h);
		if (ok) {
			sj->images[sj->n_images].b64 = base64_encode(buf, len);
			sj->images[sj->n_images].mime = k == VK_PNG ? "image/png" : "image/jpeg";
			if (sj->images[sj->n_images].b64)
				sj->n_images++;
		}
		free(buf);
		return;
	}
	/* Too big to return as it is: the session downscales it (PIL) and the
	 * server checks what comes back. */
	sj->thumb_rel = xreallocarray(sj->thumb_rel, sj->n_thumbs + 1, sizeof *sj->thumb_rel);
	sj->thumb_rel[sj->n_thumbs++] = xstrdup(en->rel);
}

/* What counts against max_workspace_mb besides the listed files: the
 * server's own directories (.logs, .cache, .sessions: the sandbox writes
 * there too) and the directories outside the workspace that the sandbox
 * writes (its private TMPDIR without namespaces, fs_write ones).  When the
 * list itself could not see everything (too many entries, too deep), the
 * whole workspace is measured by a walk that visits more (1000000
 * entries); what that one cannot see either is named in sj->unseen.
 * Attack: 60 MB real + 300 MB sparse in .cache, 300 MB in results/ and
 * 3 x 100 MB under 70 nested directories, each under max_workspace_mb 20,
 * ended ok. */
static unsigned long long scan_extra(struct scan_job *sj, bool *whole)
{
	struct art_usage u = { 0 }, d;
	*whole = sj->list.unseen != 0;
	if (*whole) {
		art_limit_usage(sj->ws, true, (const char *const *)sj->outside, sj->has_scratch, &u, &sj->scratch_bytes);
		sj->effect = ULLONG_MAX;
	} else {
		unsigned long long cache = 0;
		for (const char *const *dir = art_server_dirs; *dir; dir++) {
			art_ws_dir_usage(sj->ws, *dir, 0, &d);
			art_usage_add(&u, &d);
			if (strcmp(*dir, ".cache") == 0)
				cache = d.unseen ? ULLONG_MAX : d.charged;
		}
		struct art_usage o;
		art_limit_usage(sj->ws, false, (const char *const *)sj->outside, sj->has_scratch, &o, &sj->scratch_bytes);
		art_usage_add(&u, &o);
		sj->effect = cache == ULLONG_MAX || o.unseen ? ULLONG_MAX : cache + o.charged;
	}
	if (u.unseen)
		art_unseen_text(u.unseen, "", u.where, sj->unseen, sizeof sj->unseen);
	return u.charged;
}

static void scan_walk_all(struct scan_job *sj)
{
	struct art_scan_opts o = { .subdir = "", .include_hidden = true, .exclude = art_server_dirs };
	struct err e = { 0 };
	if (art_scan(sj->ws, &o, &sj->list, &e) < 0) {
		log_warn("workspace %s: %s", sj->after ? "scan" : "snapshot", e.msg);
		sj->changed = true;
		snprintf(sj->unseen, sizeof sj->unseen, "the workspace itself, which the server cannot list (%.400s)", e.msg);
		return;
	}
	bool whole;
	sj->extra = scan_extra(sj, &whole);
	if (sj->after && sj->artifacts)
		art_diff(&sj->before, &sj->list, on_change, sj);
	/* What the diff does not list: files deleted (fewer left than were
	 * there and were made), and anything past a truncated list. */
	if (sj->after && (sj->before.n + sj->created > sj->list.n || sj->before.truncated || sj->list.truncated))
		sj->changed = true;
	if (sj->after) {
		/* Summed here, off the loop: the supervisor's end-of-call
		 * check of max_workspace_mb walks nothing of its own. */
		sj->ws_before = art_list_bytes(&sj->before);
		sj->ws_after = (whole ? 0 : art_list_bytes(&sj->list)) + sj->extra;
	}
}

/* The after scan, watched (wsnote.h): its list stands for the next
 * snapshot when every directory it listed was watched before, no event
 * came while it walked, and it saw everything. */
static void scan_walk(struct scan_job *sj)
{
	if (!sj->after || !sj->note) {
		scan_walk_all(sj);
		return;
	}
	unsigned long long e0 = wsnote_events(sj->note);
	wsnote_walk_begin(sj->note);
	scan_walk_all(sj);
	bool watched = wsnote_walk_end();
	sj->events = wsnote_events(sj->note);
	sj->stands = watched && sj->events == e0 && !sj->list.truncated && !sj->list.unseen && !sj->unseen[0] &&
		     sj->effect != ULLONG_MAX;
}

/* Walks within a budget (art_budget_begin: 0 entries bounds nothing). */
static void scan_timed(struct scan_job *sj, size_t entries, double ms)
{
	double t0 = loop_now_ms();
	art_budget_begin(entries, ms);
	scan_walk(sj);
	sj->spent = art_budget_end(&sj->visited);
	sj->took_ms = loop_now_ms() - t0;
}

static void scan_run(struct job *j)
{
	scan_timed((struct scan_job *)j, 0, 0);
}

static void scan_free(struct scan_job *sj)
{
	art_list_free(&sj->before);
	art_list_free(&sj->list);
	cJSON_Delete(sj->artifacts);
	cJSON_Delete(sj->files);
	for (size_t i = 0; i < sj->n_images; i++)
		free(sj->images[i].b64);
	for (size_t i = 0; i < sj->n_thumbs; i++)
		free(sj->thumb_rel[i]);
	free(sj->thumb_rel);
	art_dirs_free(sj->outside);
	free(sj);
}

static void scan_done(struct job *j, bool abandoned)
{
	struct scan_job *sj = (struct scan_job *)j;
	struct call *c = sj->c;
	if (abandoned) {
		scan_free(sj);
		return;
	}
	c->scan_job = NULL;
	/* Where the next snapshot is taken (scan_submit). */
	c->srv->scan_on_loop = sj->visited <= SCAN_LOOP_ENTRIES / 2 && sj->took_ms <= SCAN_LOOP_MS / 2;
	if (sj->after) {
		c->artifacts_truncated = sj->before.truncated || sj->list.truncated;
		c->run.ws_before = sj->ws_before + c->extra_before;
		c->run.ws_after = sj->ws_after;
		snprintf(c->run.unseen_after, sizeof c->run.unseen_after, "%s", sj->unseen);
		c->run.scratch_after = sj->scratch_bytes;
		/* A file written where the diff does not look (.cache, outside the
		 * workspace) is a change too: the replay log must not run it again. */
		c->run.ws_changed = sj->changed || sj->effect != c->effect_before || sj->effect == ULLONG_MAX;
		c->artifacts = sj->artifacts;
		sj->artifacts = NULL;
		c->files = sj->files;
		sj->files = NULL;
		for (size_t i = 0; i < sj->n_images && c->n_images < MAX_IMAGES; i++) {
			c->images[c->n_images++] = sj->images[i];
			sj->images[i].b64 = NULL;
		}
		c->thumb_rel = sj->thumb_rel;
		c->n_thumbs = sj->n_thumbs;
		sj->thumb_rel = NULL;
		sj->n_thumbs = 0;
		struct server *srv = c->srv;
		art_list_free(&srv->snap.list);
		srv->snap.valid = sj->stands && !sj->spent;
		if (srv->snap.valid) {
			srv->snap.list = sj->list;
			memset(&sj->list, 0, sizeof sj->list);
			srv->snap.extra = sj->extra;
			srv->snap.effect = sj->effect;
			srv->snap.events = sj->events;
		}
	} else {
		art_list_free(&c->before);
		c->before = sj->list;
		memset(&sj->list, 0, sizeof sj->list);
		c->before_taken = true;
		/* A list the walk could not finish counts whole (scan_extra). */
		unsigned long long listed = art_list_bytes(&c->before);
		c->extra_before = c->before.unseen ? (sj->extra > listed ? sj->extra - listed : 0) : sj->extra;
		c->effect_before = sj->effect;
	}
	void (*then)(struct run *, void *) = sj->then;
	void *arg = sj->arg;
	scan_free(sj);
	then(&c->run, arg);
}

static struct scan_job *scan_new(struct call *c, bool after, void (*then)(struct run *r, void *arg), void *arg)
{
	struct scan_job *sj = xcalloc(1, sizeof *sj);
	sj->j.run = scan_run;
	sj->j.done = scan_done;
	sj->c = c;
	sj->ws = &c->srv->ws;
	sj->after = after;
	sj->images_link = c->srv->opts.images_link;
	const char *scratch = sup_scratch(c->srv->sup);
	const struct policy *p = c->srv->policy;
	sj->has_scratch = scratch != NULL;
	sj->outside = art_outside_dirs(sj->ws, scratch, p->fs_write == FS_WRITE_LIST ? (const char *const *)p->fs_write_paths : NULL,
				       p->fs_write == FS_WRITE_LIST ? p->n_fs_write_paths : 0);
	sj->then = then;
	sj->arg = arg;
	sj->note = c->srv->note;
	if (after) {
		/* The job reads the snapshot on its thread: it takes it. */
		sj->before = c->before;
		memset(&c->before, 0, sizeof c->before);
		sj->artifacts = c->before_taken ? cJSON_CreateArray() : NULL;
		if (sj->artifacts && history_on(c->srv->history)) {
			sj->files = cJSON_CreateArray();
			sj->hash_left = (off_t)HISTORY_HASH_BUDGET;
		}
	}
	return sj;
}

/* The snapshot before a call from the walk after the last one, taken
 * (moved: the next walk after makes the next), when inotify reported
 * nothing since that walk began (wsnote.h); false when it must walk. */
static bool snapshot_stands(struct call *c)
{
	struct server *srv = c->srv;
	if (!srv->snap.valid || !srv->note || wsnote_events(srv->note) != srv->snap.events) {
		art_list_free(&srv->snap.list);
		srv->snap.valid = false;
		return false;
	}
	art_list_free(&c->before);
	c->before = srv->snap.list;
	memset(&srv->snap.list, 0, sizeof srv->snap.list);
	srv->snap.valid = false;
	c->before_taken = true;
	c->extra_before = srv->snap.extra;
	c->effect_before = srv->snap.effect;
	log_debug("workspace: the snapshot before a call of session %s is the walk after the last call (nothing changed "
		  "since; %zu files)",
		  c->run.session, c->before.n);
	return true;
}

static void scan_submit(struct call *c, bool after, void (*then)(struct run *r, void *arg), void *arg)
{
	if (!after && snapshot_stands(c)) {
		then(&c->run, arg);
		return;
	}
	struct scan_job *sj = scan_new(c, after, then, arg);
	if (c->srv->scan_on_loop && c->srv->work) {
		scan_timed(sj, SCAN_LOOP_ENTRIES, SCAN_LOOP_MS);
		if (!sj->spent) {
			scan_done(&sj->j, false);
			return;
		}
		/* Larger than the loop's share: thrown away, and taken again
		 * whole on a worker (the snapshot before the call goes back
		 * to the call first). */
		if (after) {
			c->before = sj->before;
			memset(&sj->before, 0, sizeof sj->before);
		}
		scan_free(sj);
		sj = scan_new(c, after, then, arg);
	}
	c->scan_job = &sj->j;
	work_submit(c->srv->work, &sj->j);
}

static bool same_request(const struct run *r, const void *request_id)
{
	return cJSON_Compare(((const struct call *)r)->id, request_id, 1);
}

bool exec_cancel(struct server *s, const cJSON *request_id)
{
	return sup_cancel(s->sup, same_request, request_id);
}

/* The run's events (supervisor.h). */

static void ev_prepare(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	scan_submit(call_of(r), false, ready, arg);
}

static void ev_collect(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	struct call *c = call_of(r);
	if (!c->before_taken) {
		/* The code never ran (stopped before its snapshot): without
		 * one, every file would look new. */
		c->artifacts = cJSON_CreateArray();
		ready(r, arg);
		return;
	}
	scan_submit(c, true, ready, arg);
}

static bool ev_next_thumb(struct run *r, char *rel, size_t size)
{
	struct call *c = call_of(r);
	if (c->thumb_next >= c->n_thumbs)
		return false;
	snprintf(rel, size, "%s", c->thumb_rel[c->thumb_next++]);
	return true;
}

static void ev_thumb(struct run *r, const unsigned char *data, size_t len)
{
	struct call *c = call_of(r);
	unsigned w, h;
	/* Never trust the session: only a well-formed PNG under the cap. */
	if (len == 0 || len > IMAGE_MAX_BYTES || !png_size(data, len, &w, &h) || c->n_images >= MAX_IMAGES)
		return;
	c->images[c->n_images].b64 = base64_encode(data, len);
	c->images[c->n_images].mime = "image/png";
	if (c->images[c->n_images].b64)
		c->n_images++;
}

/* notifications/progress, with the last line the cell printed. */
static void ev_progress(struct run *r, double progress, double elapsed_s, const char *last_line)
{
	struct call *c = call_of(r);
	/* A cancelled request's token is forgotten by the client: Claude Code
	 * drops the whole stdio connection on a progress notification it
	 * cannot match.  (One after the response cannot happen: the call is
	 * freed when it is answered.) */
	if (r->cancelled)
		return;
	cJSON *p = cJSON_CreateObject();
	cJSON_AddItemToObject(p, "progressToken", cJSON_Duplicate(c->progress_token, 1));
	cJSON_AddNumberToObject(p, "progress", (double)(long)progress);
	char msg[1200];
	size_t sl = 0;
	char *safe = text_for_model((const unsigned char *)last_line, strlen(last_line), true, &sl);
	if (safe)
		safe[utf8_prefix(safe, sl, 240)] = '\0';
	snprintf(msg, sizeof msg, "running for %.0f s%s%s", elapsed_s, safe && *safe ? ": " : "", safe ? safe : "");
	free(safe);
	cJSON_AddStringToObject(p, "message", msg);
	rpc_notify("notifications/progress", p);
}

static void ev_done(struct run *r)
{
	exec_finish(call_of(r));
}

static void ev_drop(struct run *r)
{
	call_free(call_of(r));
}

static const struct run_events call_events = {
	.prepare = ev_prepare,
	.collect = ev_collect,
	.next_thumb = ev_next_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

static void exec_finish(struct call *c)
{
	if (c->run.cancelled) {
		/* The spec: no response for a cancelled request. */
		exec_record(c, NULL);
		call_free(c);
		return;
	}
	if (c->run.status == CALL_PENDING) {
		c->run.status = CALL_ERROR;
		c->run.exit_code = call_status_exit_code(CALL_ERROR, 0, false);
	}
	if (c->run.state == STATE_PENDING || (c->run.new_session && c->run.state == STATE_KEPT))
		c->run.state = c->run.new_session ? STATE_NEW : STATE_KEPT;
	exec_reply(c);
	call_free(c);
}

static void call_free(struct call *c)
{
	if (!c)
		return;
	cJSON_Delete(c->id);
	cJSON_Delete(c->progress_token);
	run_outcome_free(&c->run);
	cJSON_Delete(c->artifacts);
	cJSON_Delete(c->files);
	free(c->run.code);
	art_list_free(&c->before);
	work_abandon(c->scan_job);
	for (size_t i = 0; i < c->n_thumbs; i++)
		free(c->thumb_rel[i]);
	free(c->thumb_rel);
	for (size_t i = 0; i < c->n_images; i++)
		free(c->images[i].b64);
	free(c);
}

/* ------------------------------------------------------------ schema */

static const char *status_name(int i)
{
	return call_status_name((enum call_status)i);
}

static const char *state_name(int i)
{
	return call_state_name((enum call_state)i);
}

cJSON *exec_output_schema(void)
{
	static const struct field f[] = {
		{ "status", "string", F_REQ, "ok, error, timeout, cancelled, crashed, memory or limits (the workspace outgrew max_workspace_mb)" },
		{ "exit_code", "integer", F_REQ, "0 ok, 1 exception, 124 timeout, 130 cancelled, 128+signal crash, 137 memory, 153 limits (128 + SIGXFSZ)" },
		{ "session", "string", F_REQ, "the session name" },
		{ "execution_count", "integer", F_REQ, "the cell number in this session" },
		{ "state", "string", F_REQ, "kept, rolled_back, new, restored (loaded from the saved state after a restart) or forked (the first call of a copy made with fork_from)" },
		{ "duration_ms", "number", F_REQ, "wall-clock time of the call" },
		{ "cpu_ms", "number", F_REQ | F_NULL, "CPU time of the session's processes during the call (null when they ended before it could be read)" },
		{ "peak_mb", "number", F_REQ | F_NULL, "peak resident memory of the session's processes during the call, MB" },
		{ "stdout", "string", F_REQ, "captured standard output (head and tail when long)" },
		{ "stderr", "string", F_REQ, "captured standard error (head and tail when long)" },
		{ "output_truncated", "boolean", F_REQ, "true when output was cut" },
		{ "full_output", "string", F_REQ | F_NULL, "the file under workspace/.logs/ that holds the whole output" },
		{ "result", "string", F_REQ | F_NULL, "repr of the final expression" },
		{ "error", "object", F_REQ | F_NULL, "the exception, or why the call was stopped" },
		{ "note", "string", 0, "first call of a session: what the project's policy asked for and was withheld, and how the user approves it" },
		{ "artifacts", "array", F_REQ, "files created or modified by this call" },
		{ "artifacts_omitted", "integer", 0, "present when the call made more files than the reply names: how many more (list_artifacts lists them)" },
		{ "artifacts_truncated", "boolean", 0, "present and true when the workspace held more entries than the comparison walks: the list may be incomplete" },
	};
	static const struct field err[] = {
		{ "type", "string", 0, "exception type" },
		{ "message", "string", 0, "exception message" },
		{ "traceback", "string", 0, "the user's own frames" },
		{ "denied_by", "string", F_NULL, "the policy permission that refused the operation" },
		{ "hint", "string", 0, "when the sandbox refused something: what to do instead" },
		{ "limit", "string", 0, "the limit that stopped the call and its value, e.g. timeout_s: 30" },
		{ "withheld", "string", 0, "present when the refused permission is one the project's policy asks for but is not approved for on this machine" },
	};
	static const struct field art[] = {
		{ "path", "string", 0, "as Python sees it" },
		{ "bytes", "integer", 0, "size" },
		{ "mime", "string", 0, "MIME type" },
		{ "change", "string", 0, "created or modified" },
	};
	cJSON *props, *s = schema(&props);
	add_fields(s, f, N_ELEMENTS(f));
	string_enum(props, "status", status_name, CALL_OK, CALL_STATUS_COUNT);
	string_enum(props, "state", state_name, STATE_KEPT, CALL_STATE_COUNT);
	add_fields(cJSON_GetObjectItemCaseSensitive(props, "error"), err, N_ELEMENTS(err));
	object_items(props, "artifacts", art, N_ELEMENTS(art));
	return s;
}
