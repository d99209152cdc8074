/* execute_python: arguments, the artifacts of a call, and the reply
 * (docs/TOOLS.md).  The process side is the supervisor's: a call is a run
 * (supervisor.h) with the request and what the reply needs around it, and
 * this file implements the run's events. */
#include "exec.h"

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

#define IMAGE_MAX_BYTES (256 * 1024)
#define MAX_IMAGES 8
/* Files the reply names (the text, the links and structuredContent):
 * list_artifacts lists the rest. */
#define ARTIFACTS_LISTED 25

struct image {
	char *b64;
	const char *mime;
};

/* One execute_python call, from request to reply: the supervisor's run,
 * and around it the request and what the reply needs. */
struct call {
	struct run run;          /* first: a run is its call */
	struct server *srv;
	cJSON *id;               /* owned copy of the request id */
	struct req q;            /* how to answer: q.id is id */
	cJSON *progress_token;   /* owned copy, or NULL */
	struct art_list before;
	bool before_taken;       /* the snapshot is in `before` */
	unsigned long long extra_before; /* what counts besides the listed files then */
	unsigned long long effect_before; /* scan_job.effect then */
	struct job *scan_job;    /* a walk of the workspace for this call, or NULL */
	cJSON *artifacts;        /* array of {path, bytes, mime, change} */
	bool artifacts_truncated; /* a walk stopped at its entry budget */
	char **thumb_rel;        /* images to downscale in the session */
	size_t n_thumbs, thumb_next;
	struct image images[MAX_IMAGES];
	size_t n_images;
	cJSON *files;            /* the history's: [{path, sha256, bytes, change}] */
};

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
 * touches; the call gets the results on the loop, in done(). */
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
	 * and its thaw): the bytes are the call's. */
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

static void scan_run(struct job *j)
{
	struct scan_job *sj = (struct scan_job *)j;
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

static void scan_submit(struct call *c, bool after, void (*then)(struct run *r, void *arg), void *arg)
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

/* ------------------------------------------------------------ rendering */

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->p = xrealloc(b->p, cap);
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_fmt(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_fmt(struct sbuf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void sb_section(struct sbuf *b, const char *title, const char *body)
{
	if (!body || !*body)
		return;
	sb_fmt(b, "\n%s:\n", title);
	sb_str(b, body);
	if (body[strlen(body) - 1] != '\n')
		sb_str(b, "\n");
}

static const char *json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The error the session reported, or NULL. */
static const struct result_error *result_error_of(const struct run *r)
{
	return r->result && r->result->has_error ? &r->result->error : NULL;
}

#define WITHHELD_MSG "the project's policy is not approved on this machine"

/* What the reply of a call says, gathered once for the text and the
 * structuredContent.  The strings are owned (first_note too). */
struct view {
	char *result, *etype, *emsg, *etb, *hint;
	char *errtext;          /* the error section: the traceback, else "Type: message" */
	const char *denied;     /* the permission that refused, or NULL */
	char limit[80];         /* "timeout_s: 30", or "" */
	const char *trust_note; /* the first reply of a session: what was withheld */
	char *first_note;
	bool withheld;
	size_t listed;          /* artifacts named in the text (the first ones) */
};

static void view_free(struct view *v)
{
	free(v->result);
	free(v->etype);
	free(v->emsg);
	free(v->etb);
	free(v->hint);
	free(v->errtext);
	free(v->first_note);
}

static cJSON *structured(const struct call *c, const struct view *v)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", call_status_name(c->run.status));
	cJSON_AddNumberToObject(o, "exit_code", c->run.exit_code);
	cJSON_AddStringToObject(o, "session", c->run.session);
	cJSON_AddNumberToObject(o, "execution_count", c->run.cell);
	cJSON_AddStringToObject(o, "state", call_state_name(c->run.state));
	cJSON_AddNumberToObject(o, "duration_ms", (double)(long)(c->run.duration_ms * 10) / 10.0);
	cJSON_AddStringToObject(o, "stdout", c->run.out_text ? c->run.out_text : "");
	cJSON_AddStringToObject(o, "stderr", c->run.err_text ? c->run.err_text : "");
	cJSON_AddBoolToObject(o, "output_truncated", c->run.out_truncated || c->run.err_truncated);
	const char *full = c->run.out_log ? c->run.out_log : c->run.err_log;
	if (full)
		cJSON_AddStringToObject(o, "full_output", full);
	else
		cJSON_AddNullToObject(o, "full_output");
	if (c->run.err_log && c->run.out_log)
		cJSON_AddStringToObject(o, "full_stderr", c->run.err_log);
	if (v->result)
		cJSON_AddStringToObject(o, "result", v->result);
	else
		cJSON_AddNullToObject(o, "result");
	if (v->etype || c->run.note) {
		cJSON *e = cJSON_AddObjectToObject(o, "error");
		cJSON_AddStringToObject(e, "type", v->etype ? v->etype : call_status_table[c->run.status].error_type);
		cJSON_AddStringToObject(e, "message", v->emsg ? v->emsg : c->run.note ? c->run.note : "");
		cJSON_AddStringToObject(e, "traceback", v->etb && *v->etb && v->errtext ? v->errtext : "");
		if (v->denied)
			cJSON_AddStringToObject(e, "denied_by", v->denied);
		else
			cJSON_AddNullToObject(e, "denied_by");
		if (v->hint && *v->hint)
			cJSON_AddStringToObject(e, "hint", v->hint); /* what to do instead */
		if (v->withheld)
			cJSON_AddStringToObject(e, "withheld", WITHHELD_MSG);
	} else {
		cJSON_AddNullToObject(o, "error");
	}
	/* The same artifacts as the text names: the JSON is what Claude Code
	 * and Codex show the model in place of the text, within the same
	 * budget. */
	cJSON *arts = cJSON_AddArrayToObject(o, "artifacts");
	size_t i = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, c->artifacts)
		if (i++ < v->listed)
			cJSON_AddItemToArray(arts, cJSON_Duplicate(a, 1));
	if (i > v->listed)
		cJSON_AddNumberToObject(o, "artifacts_omitted", (double)(i - v->listed));
	if (c->artifacts_truncated)
		cJSON_AddBoolToObject(o, "artifacts_truncated", 1);
	if (v->trust_note)
		cJSON_AddStringToObject(o, "note", v->trust_note);
	return o;
}

static bool limit_text_valid(const char *l)
{
	if (!l || strlen(l) > 60)
		return false;
	size_t k = strspn(l, "abcdefghijklmnopqrstuvwxyz_");
	return k > 0 && strncmp(l + k, ": ", 2) == 0 && l[k + 2] && strspn(l + k + 2, "0123456789.") == strlen(l + k + 2);
}

/* cpu_ms and peak_mb (null when the process was gone before it could be
 * measured), and the limit that stopped the call. */
static void add_usage(cJSON *sc, const struct call *c, const char *limit)
{
	if (c->run.usage.known) {
		cJSON_AddNumberToObject(sc, "cpu_ms", (double)(long)(c->run.usage.cpu_ms + 0.5));
		cJSON_AddNumberToObject(sc, "peak_mb", (double)(long)(c->run.usage.peak_mb * 10 + 0.5) / 10.0);
	} else {
		cJSON_AddNullToObject(sc, "cpu_ms");
		cJSON_AddNullToObject(sc, "peak_mb");
	}
	cJSON *e = cJSON_GetObjectItemCaseSensitive(sc, "error");
	if (limit[0] && cJSON_IsObject(e))
		cJSON_AddStringToObject(e, "limit", limit);
}

/* A process ended by a signal: the signal's name and meaning, and from
 * Python's faulthandler report (which the session writes to its stderr as
 * it dies) the line that was running, the library frame below it, and the
 * frames, moved out of stderr into the error. */
static void describe_crash(struct call *c, char **etype, char **emsg, char **etb)
{
	int sig = c->run.signal;
	char frames[4096], where[600];
	size_t a, z;
	bool report = c->run.err_text && call_fault_report(c->run.err_text, &a, &z, frames, sizeof frames, where, sizeof where);
	*etype = xstrdup(call_signal_name(sig));
	*emsg = xasprintf("the session's process was killed by %s (%s)%s%s", call_signal_name(sig), call_signal_meaning(sig),
			  report && where[0] ? ", in " : "", report ? where : "");
	if (!report)
		return;
	if (frames[0])
		*etb = xasprintf("%s: %s\nPython's stack when it crashed (most recent call first):\n%s", *etype, *emsg, frames);
	/* What the code wrote before stays its stderr. */
	char *err = c->run.err_text;
	memmove(err + a, err + z, strlen(err + z) + 1);
}

/* Whether a path of the list is shown escaped (esc_name: a name with a
 * backslash, which a plain one never has). */
static bool escaped_names(const cJSON *artifacts)
{
	const cJSON *a;
	cJSON_ArrayForEach(a, artifacts)
	{
		const char *p = json_str(a, "path");
		if (p && strchr(p, '\\'))
			return true;
	}
	return false;
}

/* s (consumed) as text_for_model shows it, for what the session said:
 * newlines and tabs kept, everything that could fake text escaped. */
static char *model_text(char *s)
{
	if (!s)
		return NULL;
	char *t = text_for_model((const unsigned char *)s, strlen(s), false, NULL);
	free(s);
	return t;
}

/* The error, the permission that refused and the limit that stopped the
 * call, from the session's (untrusted) result and the supervisor's
 * outcome. */
static void view_error(const struct call *c, const struct result_error *err, struct view *v)
{
	const struct policy_limits *l = &c->srv->policy->limits;
	const char *d = err ? err->denied_by : NULL;
	static const char *const perms[] = { "net_access", "fs_write", "fs_read", "shell_exec", "limits" };
	for (size_t i = 0; d && i < sizeof perms / sizeof perms[0]; i++)
		if (strcmp(d, perms[i]) == 0)
			v->denied = perms[i];

	if (c->run.over_limit && !v->denied)
		v->denied = "limits";
	if (c->run.status == CALL_TIMEOUT && !v->emsg) {
		v->emsg = xasprintf("the cell ran longer than its timeout (%g s) and was stopped; make it cheaper or pass a larger timeout_s (at most %g)",
				    c->run.timeout_ms / 1000.0, l->max_timeout_s);
		free(v->etype);
		v->etype = xstrdup("Timeout");
		v->denied = "limits";
	}
	if (c->run.status == CALL_LIMITS && c->run.ws_unseen[0] && !v->emsg) {
		v->emsg = xasprintf("the server could not measure all of what counts against limits.max_workspace_mb (%ld MB): it holds %s, "
				    "which counts as over the limit: the call was stopped and the session rolled back; the files stay (the server "
				    "deletes nothing): remove what it cannot see (nest directories at most 64 levels deep, keep fewer than "
				    "1000000 entries, leave every directory readable)",
				    l->max_workspace_mb, c->run.ws_unseen);
		free(v->etype);
		v->etype = xstrdup("WorkspaceLimit");
		v->denied = "limits";
	}
	if (c->run.status == CALL_LIMITS && c->run.ws_bytes && !v->emsg) {
		char tmp[200] = "";
		/* Without namespaces: TMPDIR is the host's disk (or memory). */
		if (c->run.scratch_bytes)
			snprintf(tmp, sizeof tmp, " (with the sandbox's private temporary directory, TMPDIR, which counts too: "
				 "%llu MB of it)", c->run.scratch_bytes >> 20);
		v->emsg = xasprintf("the workspace grew to %llu MB%s during this call, past limits.max_workspace_mb (%ld MB): the call was stopped "
				    "and the session rolled back; the files it wrote stay (the server deletes nothing): delete what is not needed "
				    "or raise max_workspace_mb in the policy",
				    c->run.ws_bytes >> 20, tmp, l->max_workspace_mb);
		free(v->etype);
		v->etype = xstrdup("WorkspaceLimit");
		v->denied = "limits";
	}

	/* A call stopped by a limit names the limit and its value, so the
	 * agent knows what to ask for or to make cheaper.  The session's own
	 * word (max_file_mb, max_processes) is taken only in the shape
	 * "key: number". */
	if (c->run.status == CALL_TIMEOUT)
		snprintf(v->limit, sizeof v->limit, "timeout_s: %g", c->run.timeout_ms / 1000.0);
	else if (c->run.status == CALL_MEMORY)
		snprintf(v->limit, sizeof v->limit, "memory_mb: %ld", l->memory_mb);
	else if (c->run.status == CALL_LIMITS && (c->run.ws_bytes || c->run.ws_unseen[0]))
		snprintf(v->limit, sizeof v->limit, "max_workspace_mb: %ld", l->max_workspace_mb);
	else if (v->denied && strcmp(v->denied, "limits") == 0 && err && limit_text_valid(err->limit))
		snprintf(v->limit, sizeof v->limit, "%s", err->limit);
	if (v->limit[0] && !v->denied)
		v->denied = "limits";
}

static void view_of(struct call *c, struct view *v)
{
	struct server *s = c->srv;
	const struct result_error *err = result_error_of(&c->run);
	size_t lim = (size_t)s->policy->limits.max_output_chars;
	/* The session's strings are untrusted (the decoder held them to their
	 * types and bounds only): re-sanitised, cut, and shown with their
	 * controls and invisible characters escaped. */
	v->result = model_text(utf8_clip(c->run.result ? c->run.result->value : NULL, lim + 200, false));
	v->etype = model_text(utf8_clip(err ? err->type : NULL, 200, false));
	v->emsg = model_text(utf8_clip(err ? err->message : NULL, lim, false));
	v->etb = model_text(utf8_clip(err ? err->traceback : NULL, lim + 200, true));
	v->hint = model_text(utf8_clip(err ? err->hint : NULL, 1000, false));
	if (c->run.status == CALL_CRASHED && c->run.signal && !v->etype) {
		free(v->emsg);
		free(v->etb);
		v->emsg = v->etb = NULL;
		describe_crash(c, &v->etype, &v->emsg, &v->etb);
	}
	view_error(c, err, v);

	/* Workspace trust: the first reply of each session says what the
	 * project's policy asked for and did not get, so that the agent can
	 * tell the user instead of working around a refusal it cannot explain;
	 * a refusal of a withheld key says so. */
	v->trust_note = c->run.new_session ? s->trust.note : NULL;
	/* Where the project is, when the client's roots chose it: once. */
	if (s->root_note) {
		v->first_note = v->trust_note ? xasprintf("%s\n%s", s->root_note, v->trust_note) : s->root_note;
		if (v->trust_note)
			free(s->root_note);
		s->root_note = NULL;
		v->trust_note = v->first_note;
	}
	v->withheld = v->denied && trust_key_withheld(s->trust.withheld, v->denied);
	if (v->etype || v->emsg)
		v->errtext = v->etb && *v->etb ? xstrdup(v->etb)
					       : xasprintf("%s: %s\n", v->etype ? v->etype : "Error", v->emsg ? v->emsg : "");
	size_t n = (size_t)cJSON_GetArraySize(c->artifacts);
	v->listed = n < ARTIFACTS_LISTED ? n : ARTIFACTS_LISTED;
}


/* The text block: the status line, then the sections that are not empty. */
static char *render_text(const struct call *c, const struct view *v)
{
	struct sbuf b = { 0 };
	sb_fmt(&b, "%s · exit %d · %.0f ms · session %s · cell %d", call_status_name(c->run.status), c->run.exit_code, c->run.duration_ms,
	       c->run.session, c->run.cell);
	if (c->run.state != STATE_KEPT)
		sb_fmt(&b, " · state %s", call_state_name(c->run.state));
	if (c->run.usage.known)
		sb_fmt(&b, " · cpu %.0f ms · peak %.0f MB", c->run.usage.cpu_ms, c->run.usage.peak_mb);
	sb_str(&b, "\n");
	if (c->run.note || v->trust_note) {
		struct sbuf nb = { 0 };
		if (c->run.note) {
			sb_str(&nb, c->run.note);
			sb_str(&nb, "\n");
		}
		if (v->trust_note)
			sb_str(&nb, v->trust_note);
		sb_section(&b, "note", nb.p);
		free(nb.p);
	}
	sb_section(&b, "stdout", c->run.out_text);
	sb_section(&b, "stderr", c->run.err_text);
	sb_section(&b, "result", v->result);
	if (v->etype || v->emsg) {
		struct sbuf eb = { 0 };
		sb_str(&eb, v->errtext ? v->errtext : "");
		if (v->denied && v->limit[0])
			sb_fmt(&eb, "denied_by: %s (%s)\n", v->denied, v->limit);
		else if (v->denied)
			sb_fmt(&eb, "denied_by: %s\n", v->denied);
		if (v->withheld)
			sb_str(&eb, "withheld: " WITHHELD_MSG "\n");
		if (v->hint && *v->hint) {
			sb_str(&eb, v->hint);
			sb_str(&eb, "\n");
		}
		sb_section(&b, "error", eb.p);
		free(eb.p);
	}
	size_t na = (size_t)cJSON_GetArraySize(c->artifacts);
	if (na > 0 || c->artifacts_truncated) {
		struct sbuf ab = { 0 };
		size_t i = 0;
		const cJSON *a;
		cJSON_ArrayForEach(a, c->artifacts)
		{
			if (i++ >= v->listed)
				break;
			const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(a, "bytes");
			sb_fmt(&ab, "- %s (%.0f bytes, %s, %s)\n", json_str(a, "path"),
			       cJSON_IsNumber(bytes) ? bytes->valuedouble : 0.0, json_str(a, "mime"), json_str(a, "change"));
		}
		if (na > v->listed)
			sb_fmt(&ab, "- ... and %zu more (list_artifacts lists them all)\n", na - v->listed);
		if (c->artifacts_truncated)
			sb_str(&ab, "(the workspace holds too many entries to compare them all: this list may be incomplete; "
				    "list_artifacts on a narrower path shows the rest)\n");
		if (escaped_names(c->artifacts))
			sb_str(&ab, NAMES_ESCAPED "\n");
		sb_section(&b, "artifacts", ab.p);
		free(ab.p);
	}
	if (c->run.out_log || c->run.err_log) {
		sb_str(&b, "\nfull output:");
		if (c->run.out_log)
			sb_fmt(&b, " %s", c->run.out_log);
		if (c->run.err_log)
			sb_fmt(&b, " %s", c->run.err_log);
		sb_str(&b, "\n");
	}
	return b.p ? b.p : xstrdup("");
}

/* A resource_link for each file the text names that is not returned as
 * an image: every link has its line in the artifacts: section, for the
 * clients that drop links or show them only as a name. */
static void add_links(const struct call *c, const struct view *v, cJSON *content)
{
	const struct server *s = c->srv;
	size_t i = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, c->artifacts)
	{
		if (i++ >= v->listed)
			break;
		const char *mime = json_str(a, "mime");
		bool image = mime && (strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0);
		if (!mime || (image && !s->opts.images_link))
			continue;
		const char *path = json_str(a, "path");
		char rel[4200];
		if (!path || ws_relpath_shown(&s->ws, path, rel, sizeof rel, NULL) < 0)
			continue;
		char *uri = ws_file_uri(&s->ws, rel);
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "type", "resource_link");
		cJSON_AddStringToObject(l, "uri", uri);
		free(uri);
		const char *base = strrchr(path, '/');
		cJSON_AddStringToObject(l, "name", base ? base + 1 : path);
		cJSON_AddStringToObject(l, "mimeType", mime);
		const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(a, "bytes");
		if (cJSON_IsNumber(bytes))
			cJSON_AddNumberToObject(l, "size", bytes->valuedouble);
		cJSON_AddItemToArray(content, l);
	}
}

/* A part the budget cuts is saved whole first, under workspace/.logs/, and
 * the cut names the file: nothing is lost.  Returns its display path, or
 * NULL when it cannot be written (the cut then says so). */
static char *save_whole(const struct call *c, const char *what, const char *text)
{
	char rel[192], disp[300];
	snprintf(rel, sizeof rel, ".logs/%s-%d.%s.log", c->run.session, c->run.cell, what);
	struct err e = { 0 };
	int fd = ws_create_new(&c->srv->ws, rel, sizeof rel, &e);
	if (fd < 0) {
		log_warn("session %s: cannot save the whole %s: %s", c->run.session, what, e.msg);
		return NULL;
	}
	/* The session's strings are untrusted: what goes to the file is
	 * valid UTF-8, as the reply is. */
	size_t len;
	char *clean = utf8_sanitize((const unsigned char *)text, strlen(text), &len);
	bool ok = clean != NULL;
	for (const char *p = clean; ok && len;) {
		ssize_t n = write(fd, p, len);
		ok = n > 0;
		if (ok) {
			p += n;
			len -= (size_t)n;
		}
	}
	close(fd);
	free(clean);
	if (!ok || ws_display_path(&c->srv->ws, rel, disp, sizeof disp) < 0) {
		log_warn("session %s: cannot save the whole %s in %s", c->run.session, what, rel);
		return NULL;
	}
	return xstrdup(disp);
}

/* Where part i was cut before, and how long it was: the budget's cut then
 * says what the two left out together, in one marker.  A stream is cut by
 * the supervisor ("[... N characters omitted (M in all); ...]"), a value or
 * a traceback by the session, to max_output_chars ("[... N characters
 * omitted ...]": the session's word, only a number to show). */
static void earlier_cut(const struct call *c, size_t i, const char *text, struct clip_spec *cs)
{
	static const char *const markers[] = { " characters omitted (", " characters omitted ...]", " characters of traceback omitted ...]" };
	bool stream = i < 2;
	if (stream && !(i == 0 ? c->run.out_truncated : c->run.err_truncated))
		return;
	for (size_t k = stream ? 0 : 1; k < (stream ? 1 : N_ELEMENTS(markers)); k++) {
		if (!budget_find_cut(text, markers[k], &cs->gap_from, &cs->gap_to))
			continue;
		const char *line = text + cs->gap_from, *num = strstr(line, "[... ");
		unsigned long long n, all;
		if (stream && num && sscanf(strstr(line, markers[k]) + strlen(markers[k]), "%llu in all", &all) == 1)
			cs->total_chars = all;
		else if (!stream && num && sscanf(num + 5, "%llu", &n) == 1)
			cs->total_chars = utf8_chars(text, strlen(text)) - utf8_chars(line, cs->gap_to - cs->gap_from) + n;
		return;
	}
	cs->gap_from = cs->gap_to = 0;
}

/* What save_whole keeps of part i: a stream as it came (the supervisor
 * logs one it cut itself), a traceback as the session sent it, before the
 * server's own cut. */
static const char *whole_text(const struct call *c, const struct view *v, size_t i, const char *part)
{
	const struct result_error *err = result_error_of(&c->run);
	const char *raw = i == 3 && v->etb && *v->etb && err ? err->traceback : NULL;
	return raw ? raw : part;
}

/* The reply within its budget (--max-reply-kb): what the call printed,
 * its value and its traceback share what the rest of the text and the
 * links leave, and each longer than its share keeps its head and tail. */
static void fit_budget(struct call *c, struct view *v, size_t links_bytes)
{
	long kb = c->srv->opts.max_reply_kb > 0 ? c->srv->opts.max_reply_kb : REPLY_DEFAULT_KB;
	size_t total = (size_t)kb * 1024, lines = (size_t)kb * REPLY_LINES_PER_KB;
	char **part[4] = { &c->run.out_text, &c->run.err_text, &v->result, &v->errtext };
	static const char *const what[4] = { "stdout", "stderr", "value", "error" };
	/* What is left once everything else is counted. */
	char *saved[4];
	for (size_t i = 0; i < 4; i++) {
		saved[i] = *part[i];
		*part[i] = NULL;
	}
	char *fixed = render_text(c, v);
	size_t fixed_b = strlen(fixed) + links_bytes, fixed_l = text_lines(fixed);
	free(fixed);
	size_t want_b[4], want_l[4], got_b[4], got_l[4];
	for (size_t i = 0; i < 4; i++) {
		*part[i] = saved[i];
		/* The section's blank line and title are the part's too. */
		want_b[i] = saved[i] ? strlen(saved[i]) + 12 : 0;
		want_l[i] = saved[i] ? text_lines(saved[i]) + 2 : 0;
	}
	/* Lines first: a part cut to its share of lines (many short lines)
	 * needs fewer bytes than its length, and leaves the rest to the
	 * others (a long line of stderr). */
	budget_share(want_l, 4, lines > fixed_l ? lines - fixed_l : 0, got_l);
	for (size_t i = 0; i < 4; i++) {
		if (!saved[i] || want_l[i] <= got_l[i])
			continue;
		struct clip_spec probe = { .max_bytes = (size_t)-1 / 2, .max_lines = got_l[i] > 2 + 4 ? got_l[i] - 2 : 4,
					   .where = "the whole output is in workspace/.logs/SESSION-CELL.stream.1.log" };
		bool cut;
		char *t = budget_clip(saved[i], &probe, &cut);
		if (strlen(t) + 12 < want_b[i])
			want_b[i] = strlen(t) + 12;
		free(t);
	}
	budget_share(want_b, 4, total > fixed_b ? total - fixed_b : 0, got_b);
	for (size_t i = 0; i < 4; i++) {
		if (!saved[i] || (want_b[i] <= got_b[i] && want_l[i] <= got_l[i]))
			continue;
		/* Never less than a few lines of each: a budget too small for the
		 * rest still shows where everything is. */
		size_t b = got_b[i] > 12 + 300 ? got_b[i] - 12 : 300, l = got_l[i] > 2 + 4 ? got_l[i] - 2 : 4;
		char **log = i == 0 ? &c->run.out_log : i == 1 ? &c->run.err_log : NULL;
		/* The value is still in the session: the server only ever gets
		 * its repr cut to max_output_chars. */
		char *whole = i == 2 ? NULL : log && *log ? xstrdup(*log) : save_whole(c, what[i], whole_text(c, v, i, saved[i]));
		if (log && !*log && whole)
			*log = xstrdup(whole);
		char *where = i == 2 ? xstrdup("the value is _ in the session until the next one: print parts of it")
			      : whole ? xasprintf("the whole %s is in %s", i < 2 ? "output" : what[i], whole)
				      : xstrdup("the whole text could not be saved");
		bool clipped;
		struct clip_spec cs = { .max_bytes = b, .max_lines = l, .where = where };
		earlier_cut(c, i, saved[i], &cs);
		*part[i] = budget_clip(saved[i], &cs, &clipped);
		free(saved[i]);
		free(where);
		free(whole);
		if (i == 0)
			c->run.out_truncated = true;
		if (i == 1)
			c->run.err_truncated = true;
	}
}

/* The call in its session's history (history.h), as the reply carries
 * it (v NULL: a cancelled call, which has no reply). */
static void record(struct call *c, const struct view *v)
{
	struct history *h = c->srv->history;
	if (c->run.reset && c->run.state != STATE_FORKED)
		history_reset(h, c->run.session);
	if (!c->run.started)
		return; /* never reached the interpreter */
	struct hist_image im[MAX_IMAGES];
	for (size_t i = 0; i < c->n_images; i++)
		im[i] = (struct hist_image){ .b64 = c->images[i].b64, .mime = c->images[i].mime };
	enum call_state st = c->run.state;
	if (st == STATE_PENDING)
		st = call_status_table[c->run.status].rolls_back ? STATE_ROLLED_BACK : c->run.new_session ? STATE_NEW : STATE_KEPT;
	struct hist_call hc = {
		.session = c->run.session,
		.cell = c->run.cell,
		.code = c->run.code,
		.status = call_status_name(c->run.status),
		.state = call_state_name(st),
		.reset = c->run.reset,
		.fork_from = c->run.fork_from,
		.duration_ms = c->run.duration_ms,
		.timeout_s = c->run.timeout_ms / 1000.0,
		.out = c->run.out_text,
		.err = c->run.err_text,
		.result = v ? v->result : NULL,
		.etype = v ? v->etype : NULL,
		.emsg = v ? v->emsg : c->run.note,
		.etb = v && v->etb && *v->etb ? v->errtext : NULL,
		.images = im,
		.n_images = c->n_images,
		.files = c->files,
	};
	history_record(h, &hc);
}

static void exec_finish(struct call *c)
{
	struct server *s = c->srv;
	if (c->run.cancelled) {
		/* The spec: no response for a cancelled request. */
		record(c, NULL);
		call_free(c);
		return;
	}
	if (c->run.status == CALL_PENDING) {
		c->run.status = CALL_ERROR;
		c->run.exit_code = call_status_exit_code(CALL_ERROR, 0, false);
	}
	if (c->run.state == STATE_PENDING || (c->run.new_session && c->run.state == STATE_KEPT))
		c->run.state = c->run.new_session ? STATE_NEW : STATE_KEPT;

	struct view v = { 0 };
	view_of(c, &v);
	/* The links first: Codex shows each as its JSON, inside the same
	 * budget as the text. */
	cJSON *links = cJSON_CreateArray();
	add_links(c, &v, links);
	char *lj = cJSON_PrintUnformatted(links);
	fit_budget(c, &v, lj ? strlen(lj) : 0);
	free(lj);

	char *text = render_text(c, &v);
	cJSON *r = tool_text_result(text, c->run.status != CALL_OK);
	free(text);
	cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
	for (size_t i = 0; i < c->n_images; i++) {
		cJSON *im = cJSON_CreateObject();
		cJSON_AddStringToObject(im, "type", "image");
		cJSON_AddStringToObject(im, "data", c->images[i].b64);
		cJSON_AddStringToObject(im, "mimeType", c->images[i].mime);
		cJSON_AddItemToArray(content, im);
	}
	while (cJSON_GetArraySize(links) > 0)
		cJSON_AddItemToArray(content, cJSON_DetachItemFromArray(links, 0));
	cJSON_Delete(links);
	if (s->opts.structured_content) {
		cJSON *sc = structured(c, &v);
		add_usage(sc, c, v.limit);
		cJSON_AddItemToObject(r, "structuredContent", sc);
	}
	record(c, &v);
	tool_reply(s, &c->q, r);
	view_free(&v);
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
