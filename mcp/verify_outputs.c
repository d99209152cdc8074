/* verify_outputs: checks that the files a task must produce exist and are
 * well formed (docs/TOOLS.md); runs on a worker thread, reads only through
 * fsafe, within a budget per call. */
#include "verify_outputs.h"
#include "../common/escape.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "../files/artifacts.h"
#include "../files/validate.h"
#include "exec.h"
#include "export.h"
#include "history.h"
#include "reproduce.h"
#include "reply.h"
#include "schema.h"

#define VERIFY_MAX_FILES 200
#define VERIFY_READ_MAX (256u << 20)
/* A budget per call, as list_artifacts's: sizes are apparent sizes (a
 * sparse file counts by what reading it costs). */
#define VERIFY_READ_BUDGET ((unsigned long long)VERIFY_READ_MAX)

/* An optional whole number >= 0 (at most 2^53, so the double is exact and
 * the conversion to long defined); *out is left alone when absent. */
static bool whole_number(const cJSON *v, const char *name, const char *path, long *out, char *err, size_t errsz)
{
	if (!v || cJSON_IsNull(v))
		return true;
	double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
	if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(long)d) {
		snprintf(err, errsz, "\"%s\" of %.200s must be a whole number >= 0", name, path);
		return false;
	}
	*out = (long)d;
	return true;
}

/* The recorded call of the session that last wrote the file, when it wrote
 * the bytes it has now (history.h), else null: written by something else,
 * or changed since.  Only from bytes read here: a file not read has none. */
static void add_provenance(const struct server *s, cJSON *c, const char *session, const char *rel, const unsigned char *buf,
			   size_t len, bool read)
{
	cJSON *p = NULL;
	char disp[4200], hex[65];
	if (read && ws_display_path(&s->ws, rel, disp, sizeof disp) == 0) {
		trust_hash((const char *)buf, len, hex);
		p = history_provenance(s->history, session, disp, hex);
		cJSON_AddStringToObject(c, "sha256", hex);
	}
	cJSON_AddItemToObject(c, "provenance", p ? p : cJSON_CreateNull());
}

/* A files entry: a path string, or an object with a path and what to
 * check.  The path (borrowed from spec_json) and the spec, whose required
 * keys point into keyv; NULL with err set when the entry is wrong. */
static const cJSON *parse_spec(const cJSON *spec_json, struct vspec *out, const char *keyv[64], char *err, size_t errsz)
{
	const cJSON *path = spec_json;
	const cJSON *kind = NULL, *min_bytes = NULL, *keys = NULL, *min_rows = NULL;
	if (cJSON_IsObject(spec_json)) {
		path = cJSON_GetObjectItemCaseSensitive(spec_json, "path");
		kind = cJSON_GetObjectItemCaseSensitive(spec_json, "kind");
		min_bytes = cJSON_GetObjectItemCaseSensitive(spec_json, "min_bytes");
		keys = cJSON_GetObjectItemCaseSensitive(spec_json, "required_keys");
		min_rows = cJSON_GetObjectItemCaseSensitive(spec_json, "min_rows");
		const cJSON *it;
		cJSON_ArrayForEach(it, spec_json)
		{
			if (strcmp(it->string, "path") && strcmp(it->string, "kind") && strcmp(it->string, "min_bytes") &&
			    strcmp(it->string, "required_keys") && strcmp(it->string, "min_rows")) {
				snprintf(err, errsz, "unknown key \"%.60s\" in a files entry: use path, kind, min_bytes, required_keys, min_rows", it->string);
				return NULL;
			}
		}
	}
	if (!cJSON_IsString(path)) {
		snprintf(err, errsz, "each entry of \"files\" must be a path string or an object with a \"path\" string");
		return NULL;
	}
	struct vspec spec = { .kind = vkind_from_path(path->valuestring), .min_bytes = 1 };
	if (kind && !cJSON_IsNull(kind)) {
		int k = cJSON_IsString(kind) ? vkind_parse(kind->valuestring) : -1;
		if (k < 0) {
			snprintf(err, errsz, "\"kind\" of %.200s must be one of png, jpeg, svg, csv, json, text, any", path->valuestring);
			return NULL;
		}
		spec.kind = (enum vkind)k;
	}
	if (!whole_number(min_bytes, "min_bytes", path->valuestring, &spec.min_bytes, err, errsz) ||
	    !whole_number(min_rows, "min_rows", path->valuestring, &spec.min_rows, err, errsz))
		return NULL;
	if (keys && !cJSON_IsNull(keys)) {
		if (!cJSON_IsArray(keys) || cJSON_GetArraySize(keys) > 64) {
			snprintf(err, errsz, "\"required_keys\" of %.200s must be a list of at most 64 strings", path->valuestring);
			return NULL;
		}
		const cJSON *k;
		cJSON_ArrayForEach(k, keys)
		{
			if (!cJSON_IsString(k)) {
				snprintf(err, errsz, "\"required_keys\" of %.200s must contain strings only", path->valuestring);
				return NULL;
			}
			keyv[spec.n_required_keys++] = k->valuestring;
		}
		spec.required_keys = keyv;
	}
	*out = spec;
	return path;
}

static cJSON *check_one(const struct server *s, const cJSON *spec_json, const char *session, unsigned long long *budget,
			char *err, size_t errsz)
{
	struct vspec spec;
	const char *keyv[64];
	const cJSON *path = parse_spec(spec_json, &spec, keyv, err, errsz);
	if (!path)
		return NULL;
	cJSON *c = cJSON_CreateObject();
	/* As given, but never with a control or an invisible character raw:
	 * the form list_artifacts shows. */
	char raw[4096], shown[4096 * 4];
	if (unesc_name(raw, sizeof raw, path->valuestring) == 0 && esc_name(shown, sizeof shown, raw) >= 0)
		cJSON_AddStringToObject(c, "path", shown);
	else
		cJSON_AddStringToObject(c, "path", "(a path that names no file)");
	char rel[4096];
	struct err e = { 0 };
	struct vresult r = { 0 };
	double bytes = -1;
	bool skipped = false, read = false;
	unsigned char *buf = NULL;
	size_t len = 0;
	if (ws_relpath_shown(&s->ws, path->valuestring, rel, sizeof rel, &e) < 0) {
		snprintf(r.detail, sizeof r.detail, "%.480s", e.msg);
	} else {
		int fd = ws_openat(&s->ws, rel, O_RDONLY, 0);
		struct stat st;
		if (fd < 0) {
			if (fd == -ENOENT)
				snprintf(r.detail, sizeof r.detail, "does not exist: create it under %s/ (e.g. %s/outputs/)", s->ws.display, s->ws.display);
			else if (fd == -ELOOP || fd == -EXDEV)
				snprintf(r.detail, sizeof r.detail, "is a symbolic link (or lies behind one); links are not followed: write the file itself");
			else
				snprintf(r.detail, sizeof r.detail, "cannot be opened: %s", strerror(-fd));
		} else if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			snprintf(r.detail, sizeof r.detail, "is not a regular file");
			close(fd);
		} else {
			close(fd);
			bytes = (double)st.st_size;
			if ((size_t)st.st_size > VERIFY_READ_MAX) {
				snprintf(r.detail, sizeof r.detail, "is %.0f bytes, over the %u MiB that verify_outputs reads",
					 bytes, VERIFY_READ_MAX >> 20);
			} else if ((unsigned long long)st.st_size > *budget) {
				/* Not checked is not passed: the gate stays shut. */
				snprintf(r.detail, sizeof r.detail,
					 "not checked: verify_outputs reads at most %llu MiB per call (sparse files count by their size) "
					 "and the files before this one used it; verify this file in a separate call",
					 VERIFY_READ_BUDGET >> 20);
				skipped = true;
			} else if (ws_read_file(&s->ws, rel, *budget, &buf, &len, &e) < 0) {
				snprintf(r.detail, sizeof r.detail, "cannot be read: %.480s", e.msg);
			} else {
				*budget -= len;
				validate_buffer(&spec, buf, len, &r);
				bytes = (double)len;
				read = true;
			}
		}
	}
	cJSON_AddBoolToObject(c, "ok", r.ok);
	cJSON_AddStringToObject(c, "kind", vkind_name(spec.kind));
	if (bytes >= 0)
		cJSON_AddNumberToObject(c, "bytes", bytes);
	else
		cJSON_AddNullToObject(c, "bytes");
	cJSON_AddStringToObject(c, "detail", r.detail);
	if (skipped)
		cJSON_AddBoolToObject(c, "skipped", 1);
	add_provenance(s, c, session, rel, buf, len, read);
	free(buf);
	return c;
}

/* Why require_success fails, or false when it holds. */
static bool exec_reason(const struct verify_sessions *vs, bool named, char *msg, size_t n)
{
	const char *sname = vs->checked;
	if (vs->has_exit && vs->exit_code == 0)
		return false;
	if (vs->has_exit)
		snprintf(msg, n, "the last execution of session \"%s\" exited with %d: fix the code and run it again (or pass require_success: false)",
			 sname, vs->exit_code);
	else if (vs->n_ran == 0)
		snprintf(msg, n,
			 "no session has run any code since the server started (a restart does not keep the exit code of a call made before it, "
			 "so the server cannot vouch for one): run the code that makes these files again, or pass require_success: false to check "
			 "the files alone");
	else
		snprintf(msg, n,
			 "session \"%s\"%s has not run any code since the server started; the sessions that did: %s. Pass the session that made "
			 "these files as \"session\", run that code in \"%s\", or pass require_success: false",
			 sname, named ? "" : " (the default)", vs->ran, sname);
	return true;
}

/* notebook: the export of the session, written under the workspace (and
 * named in the summary, which is written after it).  0, or -1 with the
 * reason in msg. */
static int write_notebook(const struct server *s, const char *shown, const char *session, cJSON *out, char *msg, size_t n)
{
	char rel[4096], disp[4200];
	struct err e = { 0 };
	size_t l = strlen(shown);
	bool py = l > 3 && strcmp(shown + l - 3, ".py") == 0;
	if (!py && !(l > 6 && strcmp(shown + l - 6, ".ipynb") == 0)) {
		snprintf(msg, n, "\"notebook\" must name a .ipynb or .py file under %s/ (for example %s/outputs/analysis.ipynb)", s->ws.display,
			 s->ws.display);
		return -1;
	}
	if (ws_relpath_shown(&s->ws, shown, rel, sizeof rel, &e) < 0 || art_path_under(rel, art_server_dirs)) {
		snprintf(msg, n, "\"notebook\" must name a file under %s/, outside its .logs, .cache and .sessions (for example %s/outputs/analysis.ipynb)%s%.300s",
			 s->ws.display, s->ws.display, e.msg[0] ? ": " : "", e.msg);
		return -1;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		die_oom();
	int r = export_write(s->history, session, py, f, msg, n);
	fclose(f);
	if (r == 0 && ws_write_file(&s->ws, rel, buf, len, &e) < 0) {
		snprintf(msg, n, "could not write the notebook: %.500s", e.msg);
		r = -1;
	}
	free(buf);
	if (r < 0) {
		if (!history_on(s->history))
			snprintf(msg, n, "no notebook: the server keeps no history here (%.400s)", history_why_off(s->history));
		return -1;
	}
	ws_display_path(&s->ws, rel, disp, sizeof disp);
	cJSON_AddStringToObject(out, "notebook", disp);
	return 0;
}

/* reproduce: each check's file as the run again left it, against the
 * bytes it has now.  Returns how many were not reproduced. */
static int add_reproduced(const struct server *s, const char *session, cJSON *out, cJSON *checks)
{
	struct repro r;
	reproduce_run(s, session, &r);
	cJSON *o = cJSON_AddObjectToObject(out, "reproduce");
	cJSON_AddBoolToObject(o, "ran", r.ran);
	cJSON_AddNumberToObject(o, "ms", (double)(long)r.ms);
	cJSON_AddNumberToObject(o, "copy_ms", (double)(long)r.copy_ms);
	cJSON_AddNumberToObject(o, "copy_bytes", (double)r.copy_bytes);
	cJSON_AddNumberToObject(o, "cells", r.cells);
	if (r.first_cell) {
		cJSON_AddNumberToObject(o, "first_cell", r.first_cell);
		cJSON_AddStringToObject(o, "first_difference", r.first);
	} else {
		cJSON_AddNullToObject(o, "first_cell");
		cJSON_AddNullToObject(o, "first_difference");
	}
	if (!r.ran)
		cJSON_AddStringToObject(o, "error", r.why);
	int bad = 0;
	cJSON *c;
	cJSON_ArrayForEach(c, checks)
	{
		const cJSON *prov = cJSON_GetObjectItemCaseSensitive(c, "provenance");
		const char *now = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "sha256"));
		const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "path"));
		if (!cJSON_IsObject(prov) || !r.ran || !now || !path) {
			cJSON_AddNullToObject(c, "reproduced");
			continue;
		}
		const char *writer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(prov, "session"));
		if (!writer || strcmp(writer, session) != 0) {
			/* Another session's cell wrote these bytes: running this
			 * session's cells again says nothing of them. */
			cJSON_AddNullToObject(c, "reproduced");
			const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "detail"));
			char *nd = xasprintf("%s; not run again: written by session \"%s\", not \"%s\" (pass it as session to run its cells again)",
					     d ? d : "", writer ? writer : "?", session);
			cJSON_ReplaceItemInObjectCaseSensitive(c, "detail", cJSON_CreateString(nd));
			free(nd);
			continue;
		}
		const char *again = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.files, path));
		bool same = again && strcmp(again, now) == 0;
		if (!same && r.net_cell) {
			/* Not a difference the run again can judge: the cell that
			 * needed the network could not do what it did. */
			cJSON_AddNullToObject(c, "reproduced");
			const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "detail"));
			char *nd = xasprintf("%s; could not be checked: run again, %s", d ? d : "", r.first);
			cJSON_ReplaceItemInObjectCaseSensitive(c, "detail", cJSON_CreateString(nd));
			free(nd);
			continue;
		}
		cJSON_AddBoolToObject(c, "reproduced", same);
		if (same)
			continue;
		bad++;
		cJSON_AddItemToObject(c, "ok", cJSON_CreateFalse());
		const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "detail"));
		char *nd = r.first_cell ? xasprintf("%s; not reproduced: run again, %s", d ? d : "", r.first)
					: xasprintf("%s; not reproduced: run again, the cells gave the same outputs but %s", d ? d : "",
						    again ? "this file came out with other bytes" : "this file was not written");
		cJSON_ReplaceItemInObjectCaseSensitive(c, "detail", cJSON_CreateString(nd));
		free(nd);
	}
	repro_free(&r);
	return bad;
}

cJSON *verify_outputs_call(const struct server *s, const cJSON *args, const struct verify_sessions *vs)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(args, "files");
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(args, "require_success");
	const cJSON *ws = cJSON_GetObjectItemCaseSensitive(args, "write_summary");
	const cJSON *nbarg = cJSON_GetObjectItemCaseSensitive(args, "notebook");
	const cJSON *rep = cJSON_GetObjectItemCaseSensitive(args, "reproduce");
	char msg[1400];
	if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) < 1 || cJSON_GetArraySize(files) > VERIFY_MAX_FILES) {
		snprintf(msg, sizeof msg, "verify_outputs needs \"files\": a list of 1 to %d paths such as [\"%s/outputs/plot.png\"] or objects {\"path\": ..., \"kind\": ..., \"required_keys\": [...]}",
			 VERIFY_MAX_FILES, s->ws.display);
		return tool_text_result(msg, true);
	}
	if ((session && !cJSON_IsNull(session) && !cJSON_IsString(session)) || (req && !cJSON_IsNull(req) && !cJSON_IsBool(req)) ||
	    (ws && !cJSON_IsNull(ws) && !cJSON_IsBool(ws)))
		return tool_text_result("\"session\" must be a string; \"require_success\" and \"write_summary\" must be true or false", true);
	if (rep && !cJSON_IsNull(rep) && !cJSON_IsBool(rep))
		return tool_text_result("\"reproduce\" must be true or false", true);
	if (nbarg && !cJSON_IsNull(nbarg) && !cJSON_IsString(nbarg))
		return tool_text_result("\"notebook\" must be a path string such as \"workspace/outputs/analysis.ipynb\"", true);
	const char *sname = cJSON_IsString(session) ? session->valuestring : "default";
	if (!session_name_valid(sname))
		return tool_text_result("\"session\" must be a string matching ^[A-Za-z0-9_-]{1,64}$ (the session whose last execution is checked)", true);
	bool require = !cJSON_IsFalse(req);
	bool write = !cJSON_IsFalse(ws);
	/* The session the result names (the one given; without one, "default"
	 * when it ran code, else the one whose call ended last) is also the one
	 * whose history gives the provenance, the notebook and the run again:
	 * an agent that worked in a named session only and gave no session
	 * would otherwise be told that no recorded cell wrote its files. */
	if (vs->checked[0])
		sname = vs->checked;

	cJSON *out = cJSON_CreateObject();
	cJSON *status = cJSON_AddStringToObject(out, "status", "completed");
	cJSON_AddStringToObject(out, "session", sname);
	if (vs->has_exit)
		cJSON_AddNumberToObject(out, "exit_code", vs->exit_code);
	else
		cJSON_AddNullToObject(out, "exit_code");
	cJSON *checks = cJSON_AddArrayToObject(out, "checks");
	int failed = 0;
	bool skipped = false;
	unsigned long long budget = VERIFY_READ_BUDGET;
	const cJSON *f;
	cJSON_ArrayForEach(f, files)
	{
		cJSON *c = check_one(s, f, sname, &budget, msg, sizeof msg);
		if (!c) {
			cJSON_Delete(out);
			return tool_text_result(msg, true);
		}
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "ok")))
			failed++;
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "skipped")))
			skipped = true;
		cJSON_AddItemToArray(checks, c);
	}
	if (cJSON_IsTrue(rep))
		failed += add_reproduced(s, sname, out, checks);
	cJSON_AddNumberToObject(out, "failed", failed);
	cJSON_AddBoolToObject(out, "truncated", skipped);
	bool exec_ok = !require || !exec_reason(vs, cJSON_IsString(session), msg, sizeof msg);
	if (!exec_ok)
		cJSON_AddStringToObject(out, "reason", msg);
	bool nb_ok = true;
	if (cJSON_IsString(nbarg) && write_notebook(s, nbarg->valuestring, sname, out, msg, sizeof msg) < 0) {
		cJSON_AddStringToObject(out, "notebook_error", msg);
		nb_ok = false;
	}
	if (failed || !exec_ok || !nb_ok)
		cJSON_SetValuestring(status, "failed");
	if (write) {
		char disp[4200];
		ws_display_path(&s->ws, "outputs/output_summary.json", disp, sizeof disp);
		cJSON_AddStringToObject(out, "summary_path", disp);
		char *txt = cJSON_Print(out);
		struct err e = { 0 };
		if (!txt || ws_write_file(&s->ws, "outputs/output_summary.json", txt, strlen(txt), &e) < 0) {
			log_warn("output_summary.json: %s", e.msg);
			cJSON_ReplaceItemInObjectCaseSensitive(out, "summary_path", cJSON_CreateNull());
			snprintf(msg, sizeof msg, "could not write the summary: %.500s", e.msg[0] ? e.msg : "out of memory");
			cJSON_AddStringToObject(out, "summary_error", msg);
		}
		free(txt);
	} else {
		cJSON_AddNullToObject(out, "summary_path");
	}
	return tool_json_result(out, false);
}

static const char *verify_status_name(int i)
{
	return i == 0 ? "completed" : "failed";
}

cJSON *verify_outputs_schema(void)
{
	static const struct field f[] = {
		{ "status", "string", F_REQ, "completed when every check passed and the last execution succeeded" },
		{ "session", "string", F_REQ, "the session whose last execution was looked at: the one named, else default when it ran code, else the one that ran last" },
		{ "exit_code", "integer", F_REQ | F_NULL, "the session's last execution, or null when it has run nothing" },
		{ "checks", "array", F_REQ, "one per file, in the order given" },
		{ "failed", "integer", F_REQ, "number of failed checks" },
		{ "truncated", "boolean", 0, "true when the reading budget left files unchecked" },
		{ "summary_path", "string", F_REQ | F_NULL, "where the summary was written, or null" },
		{ "reason", "string", 0, "present when the last execution did not succeed" },
		{ "summary_error", "string", 0, "present when the summary could not be written" },
		{ "notebook", "string", 0, "where the export of the session was written (when notebook was given)" },
		{ "notebook_error", "string", 0, "why the notebook could not be written (the status is then failed)" },
		{ "reproduce", "object", 0, "with reproduce: the run again: ran, ms (how long it took), copy_ms, copy_bytes, cells, first_cell and first_difference (null when none differed), error (why it could not run)" },
	};
	static const struct field check[] = {
		{ "path", "string", F_REQ, "the path as given" },
		{ "ok", "boolean", F_REQ, "the file passed" },
		{ "kind", "string", F_REQ, "png, jpeg, svg, csv, json, text or any" },
		{ "bytes", "integer", F_REQ | F_NULL, "size, or null when it could not be read" },
		{ "detail", "string", F_REQ, "what was found, or what to fix" },
		{ "skipped", "boolean", 0, "present and true when the per-call reading budget ran out before this file (it fails)" },
		{ "sha256", "string", 0, "SHA-256 of the bytes checked" },
		{ "reproduced", "boolean", F_NULL, "with reproduce: true when the run again wrote the same bytes, false (detail says the first cell that differed), null when the session did not write them or the run again could not run" },
		{ "provenance", "object", F_REQ | F_NULL, "the recorded call, of any session, that last wrote these exact bytes: {session, cell, code_sha256, state}; null when something else wrote them or they changed since" },
	};
	cJSON *props, *s = schema(&props);
	add_fields(s, f, N_ELEMENTS(f));
	string_enum(props, "status", verify_status_name, 0, 2);
	object_items(props, "checks", check, N_ELEMENTS(check));
	return s;
}
