/* execute_python's reply (docs/TOOLS.md): what the call's end says,
 * gathered once (a view) for the text and the structuredContent, the links
 * and images, all fitted to the reply's budget; and the call's line in its
 * session's history. */
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
#include "../files/validate.h"
#include "budget.h"
#include "history.h"
#include "reply.h"

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
	if (c->run.status == CALL_TIMEOUT && c->run.thumb_late && !v->emsg) {
		v->emsg = xasprintf("the cell finished, but downscaling its images for the reply took longer than the %.0f s left "
				    "for it, and the session was stopped; the image files stay in the workspace: "
				    "draw smaller figures (a lower dpi or figsize) or pass a larger timeout_s (at most %g)",
				    c->run.thumb_ms / 1000.0, l->max_timeout_s);
		free(v->etype);
		v->etype = xstrdup("Timeout");
		v->denied = "limits";
	}
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
void exec_record(struct call *c, const struct view *v)
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

void exec_reply(struct call *c)
{
	struct server *s = c->srv;
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
	exec_record(c, &v);
	tool_reply(s, &c->q, r);
	view_free(&v);
}
