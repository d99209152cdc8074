/* The tool catalogue, list_artifacts, verify_outputs and the workspace as
 * resources (docs/TOOLS.md).  Everything here runs in the server
 * and reads the workspace only through fsafe (no symlink followed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools.h"

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "../files/artifacts.h"
#include "../files/validate.h"
#include "exec.h"
#include "reply.h"

#define LIST_MAX 1000
#define VERIFY_MAX_FILES 200
#define VERIFY_READ_MAX (256u << 20)
#define RESOURCE_READ_MAX (8u << 20)
/* Budgets per call for what the server reads of files the sandbox wrote.
 * Sizes are apparent sizes: a sparse file of 512 MiB takes 4 KiB of disk
 * but reading it means 512 MiB of zeros, so it counts as 512 MiB.  Without
 * them, 20 such files made one list_artifacts hash 10 GiB. */
#define LIST_HASH_BUDGET ((off_t)256 << 20)
#define VERIFY_READ_BUDGET ((unsigned long long)VERIFY_READ_MAX)

/* ------------------------------------------------------------ schemas */

static cJSON *prop(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = cJSON_AddObjectToObject(props, name);
	if (type)
		cJSON_AddStringToObject(p, "type", type);
	cJSON_AddStringToObject(p, "description", desc);
	return p;
}

static cJSON *schema(cJSON **props)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "type", "object");
	*props = cJSON_AddObjectToObject(s, "properties");
	return s;
}

static void required(cJSON *schema_obj, const char *name)
{
	cJSON *r = cJSON_GetObjectItemCaseSensitive(schema_obj, "required");
	if (!r)
		r = cJSON_AddArrayToObject(schema_obj, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString(name));
}

static cJSON *nullable(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = prop(props, name, NULL, desc);
	cJSON *t = cJSON_AddArrayToObject(p, "type");
	cJSON_AddItemToArray(t, cJSON_CreateString(type));
	cJSON_AddItemToArray(t, cJSON_CreateString("null"));
	return p;
}

/* The fields of an object in a schema: one table per object, so that what
 * a reply holds is written once, as data. */
enum { F_REQ = 1, F_NULL = 2 }; /* required; may be null */
struct field {
	const char *name, *type;
	int flags;
	const char *desc;
};

/* Adds the fields to obj's properties, and the required ones to its
 * "required"; returns the properties. */
static cJSON *add_fields(cJSON *obj, const struct field *f, size_t n)
{
	cJSON *props = cJSON_GetObjectItemCaseSensitive(obj, "properties");
	if (!props)
		props = cJSON_AddObjectToObject(obj, "properties");
	for (size_t i = 0; i < n; i++) {
		if (f[i].flags & F_NULL)
			nullable(props, f[i].name, f[i].type, f[i].desc);
		else
			prop(props, f[i].name, f[i].type, f[i].desc);
		if (f[i].flags & F_REQ)
			required(obj, f[i].name);
	}
	return props;
}

/* An array property whose items are objects with these fields. */
static void object_items(cJSON *props, const char *name, const struct field *f, size_t n)
{
	cJSON *item = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(props, name), "items");
	cJSON_AddStringToObject(item, "type", "object");
	add_fields(item, f, n);
}

static void string_enum(cJSON *props, const char *name, const char *(*name_of)(int), int from, int to)
{
	cJSON *e = cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(props, name), "enum");
	for (int i = from; i < to; i++)
		cJSON_AddItemToArray(e, cJSON_CreateString(name_of(i)));
}

static const char *status_name(int i)
{
	return call_status_name((enum call_status)i);
}

static const char *state_name(int i)
{
	return call_state_name((enum call_state)i);
}

static const char *verify_status_name(int i)
{
	return i == 0 ? "completed" : "failed";
}

static cJSON *exec_output_schema(void)
{
	static const struct field f[] = {
		{ "status", "string", F_REQ, "ok, error, timeout, cancelled, crashed, memory or limits (the workspace outgrew max_workspace_mb)" },
		{ "exit_code", "integer", F_REQ, "0 ok, 1 exception, 124 timeout, 130 cancelled, 128+signal crash, 137 memory, 153 limits (128 + SIGXFSZ)" },
		{ "session", "string", F_REQ, "the session name" },
		{ "execution_count", "integer", F_REQ, "the cell number in this session" },
		{ "state", "string", F_REQ, "kept, rolled_back, new or restored (loaded from the saved state after a restart)" },
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

static cJSON *list_output_schema(void)
{
	static const struct field f[] = {
		{ "artifacts", "array", F_REQ, "the files, sorted by path" },
		{ "count", "integer", F_REQ, "number of files listed" },
		{ "total_bytes", "integer", F_REQ, "their total size" },
		{ "truncated", "boolean", F_REQ, "true when the listing stopped early or files were left unhashed" },
		{ "note", "string", 0, "present when the hashing budget ran out: how many files were not hashed" },
	};
	static const struct field item[] = {
		{ "path", "string", F_REQ, "as Python sees it" },
		{ "bytes", "integer", F_REQ, "size" },
		{ "mime", "string", F_REQ, "MIME type (inode/symlink for a link, never followed)" },
		{ "modified", "string", F_REQ, "modification time, RFC 3339 UTC" },
		{ "sha256", "string", F_REQ | F_NULL, "SHA-256 of the content (null for a link)" },
		{ "symlink", "boolean", 0, "present and true for a symbolic link" },
		{ "sha256_skipped", "string", 0, "present when the file was not hashed: the per-call hashing budget ran out" },
	};
	cJSON *props, *s = schema(&props);
	add_fields(s, f, N_ELEMENTS(f));
	object_items(props, "artifacts", item, N_ELEMENTS(item));
	return s;
}

static cJSON *verify_output_schema(void)
{
	static const struct field f[] = {
		{ "status", "string", F_REQ, "completed when every check passed and the last execution succeeded" },
		{ "exit_code", "integer", F_REQ | F_NULL, "the session's last execution, or null when it has run nothing" },
		{ "checks", "array", F_REQ, "one per file, in the order given" },
		{ "failed", "integer", F_REQ, "number of failed checks" },
		{ "truncated", "boolean", 0, "true when the reading budget left files unchecked" },
		{ "summary_path", "string", F_REQ | F_NULL, "where the summary was written, or null" },
		{ "reason", "string", 0, "present when the last execution did not succeed" },
		{ "summary_error", "string", 0, "present when the summary could not be written" },
	};
	static const struct field check[] = {
		{ "path", "string", F_REQ, "the path as given" },
		{ "ok", "boolean", F_REQ, "the file passed" },
		{ "kind", "string", F_REQ, "png, jpeg, svg, csv, json, text or any" },
		{ "bytes", "integer", F_REQ | F_NULL, "size, or null when it could not be read" },
		{ "detail", "string", F_REQ, "what was found, or what to fix" },
		{ "skipped", "boolean", 0, "present and true when the per-call reading budget ran out before this file (it fails)" },
	};
	cJSON *props, *s = schema(&props);
	add_fields(s, f, N_ELEMENTS(f));
	string_enum(props, "status", verify_status_name, 0, 2);
	object_items(props, "checks", check, N_ELEMENTS(check));
	return s;
}

static cJSON *tool(const char *name, const char *title, const char *desc, cJSON *input, bool read_only, bool destructive)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", name);
	cJSON_AddStringToObject(t, "title", title);
	cJSON_AddStringToObject(t, "description", desc);
	cJSON_AddItemToObject(t, "inputSchema", input);
	cJSON *a = cJSON_AddObjectToObject(t, "annotations");
	cJSON_AddStringToObject(a, "title", title);
	cJSON_AddBoolToObject(a, "readOnlyHint", read_only);
	cJSON_AddBoolToObject(a, "destructiveHint", destructive);
	cJSON_AddBoolToObject(a, "idempotentHint", read_only);
	cJSON_AddBoolToObject(a, "openWorldHint", 0);
	return t;
}

/* A client of an older protocol version gets only the fields its version
 * defines: a strict client may reject the others, a lax one drops them. */
static void for_version(const struct server *s, cJSON *tools)
{
	cJSON *t;
	cJSON_ArrayForEach(t, tools)
	{
		if (!reply_version_at_least(s, MCP_V_STRUCTURED)) {
			cJSON_DeleteItemFromObjectCaseSensitive(t, "outputSchema");
			cJSON_DeleteItemFromObjectCaseSensitive(t, "title");
		}
		if (!reply_version_at_least(s, MCP_V_ANNOTATIONS))
			cJSON_DeleteItemFromObjectCaseSensitive(t, "annotations");
	}
}

cJSON *tools_list(const struct server *s)
{
	cJSON *tools = cJSON_CreateArray();
	char desc[1200];
	const struct policy_limits *l = &s->policy->limits;

	cJSON *props, *in = schema(&props);
	prop(props, "code", "string", "Python source. The last expression's value is returned like a notebook's Out[] (end it with ; to hide it).");
	cJSON *sess = prop(props, "session", "string", "Session name; state (variables, imports) persists per session. Default \"default\".");
	cJSON_AddStringToObject(sess, "pattern", "^[A-Za-z0-9_-]{1,64}$");
	cJSON_AddStringToObject(sess, "default", "default");
	cJSON *to = prop(props, "timeout_s", "number", "Wall-clock limit for this call in seconds.");
	cJSON_AddNumberToObject(to, "exclusiveMinimum", 0);
	cJSON_AddNumberToObject(to, "maximum", l->max_timeout_s);
	cJSON *rs = prop(props, "reset", "boolean", "Discard the session's state first.");
	cJSON_AddBoolToObject(rs, "default", 0);
	required(in, "code");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc,
		 "Run Python in a stateful sandboxed interpreter (numpy, pandas, matplotlib preloaded; random and numpy.random seeded with %ld). "
		 "Use it for any arithmetic, statistics, data parsing or chart instead of computing in your head. "
		 "Working directory is the project root (read-only); write files under %s/outputs/. No network, no programs. "
		 "plt.show() saves figures to %s/outputs/ and returns them as %s. Timeout %g s by default (max %g). "
		 "On a timeout or crash the session rolls back to its state before the call.",
		 l->seed, s->ws.display, s->ws.display, s->opts.images_link ? "links (their paths)" : "images",
		 l->timeout_s, l->max_timeout_s);
	cJSON *t = tool("execute_python", "Run Python", desc, in, false, false);
	if (s->opts.structured_content)
		cJSON_AddItemToObject(t, "outputSchema", exec_output_schema());
	cJSON_AddItemToArray(tools, t);

	in = schema(&props);
	cJSON *p = prop(props, "path", "string", "A directory (or file) under the workspace, as Python sees it.");
	cJSON_AddStringToObject(p, "default", s->ws.display);
	prop(props, "pattern", "string", "Glob on the file name, e.g. *.png");
	cJSON *ih = prop(props, "include_hidden", "boolean", "Include dot files and folders (.logs).");
	cJSON_AddBoolToObject(ih, "default", 0);
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc, "List the files in the sandbox workspace (%s/): path, size, MIME type, modification time (UTC) and SHA-256, sorted by path.",
		 s->ws.display);
	t = tool("list_artifacts", "List workspace files", desc, in, true, false);
	cJSON_AddItemToObject(t, "outputSchema", list_output_schema());
	cJSON_AddItemToArray(tools, t);

	in = schema(&props);
	cJSON *files = prop(props, "files", "array", "Paths under the workspace, or objects {path, kind, min_bytes, required_keys, min_rows}.");
	cJSON *items = cJSON_AddObjectToObject(files, "items");
	cJSON *any = cJSON_AddArrayToObject(items, "anyOf");
	cJSON *str = cJSON_CreateObject();
	cJSON_AddStringToObject(str, "type", "string");
	cJSON_AddItemToArray(any, str);
	cJSON *obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "type", "object");
	cJSON *oprops = cJSON_AddObjectToObject(obj, "properties");
	prop(oprops, "path", "string", "file path");
	cJSON *kind = prop(oprops, "kind", "string", "defaults from the extension");
	const char *const kinds[] = { "png", "jpeg", "svg", "csv", "json", "text", "any" };
	cJSON_AddItemToObject(kind, "enum", cJSON_CreateStringArray(kinds, 7));
	prop(oprops, "min_bytes", "integer", "default 1");
	cJSON *rk = prop(oprops, "required_keys", "array", "json: keys the top-level object must have");
	cJSON *rki = cJSON_AddObjectToObject(rk, "items");
	cJSON_AddStringToObject(rki, "type", "string");
	prop(oprops, "min_rows", "integer", "csv: data rows after the header");
	required(obj, "path");
	cJSON_AddItemToArray(any, obj);
	cJSON_AddNumberToObject(files, "minItems", 1);
	cJSON *vs = prop(props, "session", "string", "Session whose last execution must have succeeded.");
	cJSON_AddStringToObject(vs, "default", "default");
	cJSON *rq = prop(props, "require_success", "boolean", "Require exit_code 0 for the session's last execution.");
	cJSON_AddBoolToObject(rq, "default", 1);
	cJSON *ws = prop(props, "write_summary", "boolean", "Write the result to outputs/output_summary.json.");
	cJSON_AddBoolToObject(ws, "default", 1);
	required(in, "files");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc,
		 "Quality gate before reporting a task done: checks that each file exists under %s/, is a regular file, is not empty and parses as its kind "
		 "(PNG, JPEG, SVG, CSV with even rows, JSON with required keys), and that the session's last execution succeeded. "
		 "Writes %s/outputs/output_summary.json. A failed check is a normal result with status \"failed\".",
		 s->ws.display, s->ws.display);
	t = tool("verify_outputs", "Verify outputs", desc, in, false, false);
	cJSON_AddItemToObject(t, "outputSchema", verify_output_schema());
	cJSON_AddItemToArray(tools, t);
	for_version(s, tools);
	return tools;
}

void tools_call(struct server *s, const cJSON *id, const cJSON *params)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	if (!cJSON_IsString(name)) {
		rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name: one of execute_python, list_artifacts, verify_outputs", NULL);
		return;
	}
	cJSON *empty = NULL;
	if (!args || cJSON_IsNull(args)) {
		empty = cJSON_CreateObject();
		args = empty;
	}
	const char *n = name->valuestring;
	bool known = !strcmp(n, "execute_python") || !strcmp(n, "list_artifacts") || !strcmp(n, "verify_outputs");
	if (!known) {
		char msg[300];
		snprintf(msg, sizeof msg, "unknown tool \"%.100s\": the tools are execute_python, list_artifacts, verify_outputs", n);
		rpc_error(id, RPC_INVALID_PARAMS, msg, NULL);
	} else if (!cJSON_IsObject(args)) {
		tool_reply(s, id, tool_text_result("\"arguments\" must be an object", true));
	} else if (!strcmp(n, "execute_python")) {
		exec_call(s, id, args, (cJSON_IsString(token) || cJSON_IsNumber(token)) ? token : NULL);
	} else if (!strcmp(n, "list_artifacts")) {
		list_artifacts_submit(s, id, args);
	} else {
		verify_outputs_submit(s, id, args);
	}
	cJSON_Delete(empty);
}

/* ------------------------------------------------------------ helpers */

static void rfc3339(const struct timespec *ts, char *out, size_t n)
{
	struct tm tm;
	time_t t = ts->tv_sec;
	gmtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* file:// URI of a workspace file, percent-encoding all but unreserved
 * characters and '/'. */
char *workspace_uri(const struct workspace *ws, const char *rel);

char *workspace_uri(const struct workspace *ws, const char *rel)
{
	char path[8192];
	snprintf(path, sizeof path, "%s%s%s", ws->abs, *rel ? "/" : "", rel);
	size_t n = strlen(path);
	char *out = malloc(7 + n * 3 + 1);
	if (!out)
		return NULL;
	strcpy(out, "file://");
	char *o = out + 7;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)path[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c)) {
			*o++ = (char)c;
		} else {
			sprintf(o, "%%%02X", c);
			o += 3;
		}
	}
	*o = 0;
	return out;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static bool uri_to_path(const char *uri, char *out, size_t n)
{
	if (strncmp(uri, "file://", 7) != 0)
		return false;
	const char *p = uri + 7;
	size_t o = 0;
	for (; *p && o + 1 < n; p++) {
		if (*p == '%') {
			int h = hexval(p[1]), l = h >= 0 ? hexval(p[2]) : -1;
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return false;
			out[o++] = (char)(h * 16 + l);
			p += 2;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = 0;
	return !*p && out[0] == '/';
}

/* ------------------------------------------------------------ list_artifacts */

cJSON *list_artifacts_call(const struct server *s, const cJSON *args)
{
	const cJSON *path = cJSON_GetObjectItemCaseSensitive(args, "path");
	const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(args, "pattern");
	const cJSON *hidden = cJSON_GetObjectItemCaseSensitive(args, "include_hidden");
	char msg[1200];
	if ((path && !cJSON_IsNull(path) && !cJSON_IsString(path)) || (pattern && !cJSON_IsNull(pattern) && !cJSON_IsString(pattern)) ||
	    (hidden && !cJSON_IsNull(hidden) && !cJSON_IsBool(hidden))) {
		snprintf(msg, sizeof msg, "list_artifacts takes \"path\" (a string such as \"%s/outputs\"), \"pattern\" (a glob string such as \"*.png\") and \"include_hidden\" (true or false)",
			 s->ws.display);
		return tool_text_result(msg, true);
	}
	char rel[4096];
	struct err e = { 0 };
	const char *p = cJSON_IsString(path) ? path->valuestring : s->ws.display;
	if (ws_relpath(&s->ws, p, rel, sizeof rel, &e) < 0)
		return tool_text_result(e.msg, true);
	struct art_scan_opts o = {
		.subdir = rel,
		.pattern = cJSON_IsString(pattern) ? pattern->valuestring : NULL,
		.include_hidden = cJSON_IsTrue(hidden),
		.max_entries = LIST_MAX,
	};
	struct art_list l = { 0 };
	if (art_scan(&s->ws, &o, &l, &e) < 0)
		return tool_text_result(e.msg, true);
	cJSON *out = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(out, "artifacts");
	double total = 0;
	off_t budget = LIST_HASH_BUDGET;
	size_t skipped = 0;
	for (size_t i = 0; i < l.n; i++) {
		const struct art_entry *en = &l.v[i];
		char disp[4200], when[40], hex[65];
		if (ws_display_path(&s->ws, en->rel, disp, sizeof disp) < 0)
			continue;
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "path", disp);
		cJSON_AddNumberToObject(a, "bytes", (double)en->bytes);
		cJSON_AddStringToObject(a, "mime", en->is_symlink ? "inode/symlink" : mime_from_path(en->rel));
		rfc3339(&en->mtime, when, sizeof when);
		cJSON_AddStringToObject(a, "modified", when);
		off_t cost = 0;
		int hr = en->is_symlink ? -ELOOP : art_sha256(&s->ws, en->rel, budget, hex, &cost, NULL);
		budget -= cost;
		if (hr == 0) {
			cJSON_AddStringToObject(a, "sha256", hex);
		} else {
			cJSON_AddNullToObject(a, "sha256");
			if (hr == -EFBIG) {
				/* Say why, so the agent can ask for less. */
				char why[300];
				snprintf(why, sizeof why, "not hashed: list_artifacts hashes at most %lld MiB per call "
					 "(%lld MiB were left; sparse files count by their size): list a narrower path or pattern",
					 (long long)(LIST_HASH_BUDGET >> 20), (long long)(budget >> 20));
				cJSON_AddStringToObject(a, "sha256_skipped", why);
				skipped++;
			}
		}
		if (en->is_symlink)
			cJSON_AddBoolToObject(a, "symlink", 1);
		cJSON_AddItemToArray(arr, a);
		total += (double)en->bytes;
	}
	cJSON_AddNumberToObject(out, "count", cJSON_GetArraySize(arr));
	cJSON_AddNumberToObject(out, "total_bytes", total);
	cJSON_AddBoolToObject(out, "truncated", l.truncated || skipped > 0);
	if (skipped) {
		snprintf(msg, sizeof msg, "%zu file(s) not hashed: the budget of %lld MiB read per call ran out (their sha256 is null)",
			 skipped, (long long)(LIST_HASH_BUDGET >> 20));
		cJSON_AddStringToObject(out, "note", msg);
	}
	art_list_free(&l);
	return tool_json_result(out, false);
}

/* ------------------------------------------------------------ verify_outputs */

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

static cJSON *check_one(const struct server *s, const cJSON *spec_json, unsigned long long *budget, char *err, size_t errsz)
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
	const char *keyv[64];
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

	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "path", path->valuestring);
	char rel[4096];
	struct err e = { 0 };
	struct vresult r = { 0 };
	double bytes = -1;
	bool skipped = false;
	if (ws_relpath(&s->ws, path->valuestring, rel, sizeof rel, &e) < 0) {
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
			unsigned char *buf = NULL;
			size_t len = 0;
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
			}
			free(buf);
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
	return c;
}

cJSON *verify_outputs_call(const struct server *s, const cJSON *args, bool has_exit, int exit_code)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(args, "files");
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(args, "require_success");
	const cJSON *ws = cJSON_GetObjectItemCaseSensitive(args, "write_summary");
	char msg[600];
	if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) < 1 || cJSON_GetArraySize(files) > VERIFY_MAX_FILES) {
		snprintf(msg, sizeof msg, "verify_outputs needs \"files\": a list of 1 to %d paths such as [\"%s/outputs/plot.png\"] or objects {\"path\": ..., \"kind\": ..., \"required_keys\": [...]}",
			 VERIFY_MAX_FILES, s->ws.display);
		return tool_text_result(msg, true);
	}
	if ((session && !cJSON_IsNull(session) && !cJSON_IsString(session)) || (req && !cJSON_IsNull(req) && !cJSON_IsBool(req)) ||
	    (ws && !cJSON_IsNull(ws) && !cJSON_IsBool(ws)))
		return tool_text_result("\"session\" must be a string; \"require_success\" and \"write_summary\" must be true or false", true);
	const char *sname = cJSON_IsString(session) ? session->valuestring : "default";
	if (!session_name_valid(sname))
		return tool_text_result("\"session\" must be a string matching ^[A-Za-z0-9_-]{1,64}$ (the session whose last execution is checked)", true);
	bool require = !cJSON_IsFalse(req);
	bool write = !cJSON_IsFalse(ws);

	cJSON *out = cJSON_CreateObject();
	cJSON *status = cJSON_AddStringToObject(out, "status", "completed");
	if (has_exit)
		cJSON_AddNumberToObject(out, "exit_code", exit_code);
	else
		cJSON_AddNullToObject(out, "exit_code");
	cJSON *checks = cJSON_AddArrayToObject(out, "checks");
	int failed = 0;
	bool skipped = false;
	unsigned long long budget = VERIFY_READ_BUDGET;
	const cJSON *f;
	cJSON_ArrayForEach(f, files)
	{
		cJSON *c = check_one(s, f, &budget, msg, sizeof msg);
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
	cJSON_AddNumberToObject(out, "failed", failed);
	cJSON_AddBoolToObject(out, "truncated", skipped);
	bool exec_ok = !require || (has_exit && exit_code == 0);
	if (!exec_ok) {
		if (has_exit)
			snprintf(msg, sizeof msg, "the last execution of session \"%s\" exited with %d: fix the code and run it again (or pass require_success: false)",
				 sname, exit_code);
		else
			snprintf(msg, sizeof msg, "session \"%s\" has not run any code since the server started: run the code that makes these files (or pass require_success: false)",
				 sname);
		cJSON_AddStringToObject(out, "reason", msg);
	}
	if (failed || !exec_ok)
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

/* ------------------------------------------------------------ resources */


/* ------------------------------------------------------------ off the loop */

/* What a job answers: a result, or an error with its code. */
struct reply {
	cJSON *result;
	int code;
	char msg[1024];
	cJSON *data;
};

static void reply_error(struct reply *r, int code, const char *msg, cJSON *data)
{
	r->code = code;
	snprintf(r->msg, sizeof r->msg, "%s", msg);
	r->data = data;
}

static void resources_list_run(const struct server *s, struct reply *out, const cJSON *params)
{
	const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
	long start = 0;
	if (cJSON_IsString(cursor)) {
		const char *bad = NULL;
		start = (long)strtonum(cursor->valuestring, 0, LONG_MAX, &bad);
		if (bad) {
			reply_error(out, RPC_INVALID_PARAMS, "invalid cursor: pass back the nextCursor of the previous page", NULL);
			return;
		}
	}
	struct art_scan_opts o = { .subdir = "", .include_hidden = true, .max_entries = 100000 };
	struct art_list l = { 0 };
	struct err e = { 0 };
	if (art_scan(&s->ws, &o, &l, &e) < 0) {
		reply_error(out, RPC_INTERNAL_ERROR, e.msg, NULL);
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "resources");
	long shown = 0;
	size_t i;
	for (i = (size_t)start; i < l.n && shown < LIST_MAX; i++) {
		const struct art_entry *en = &l.v[i];
		if (en->is_symlink || art_path_under(en->rel, art_cache_dirs))
			continue;
		char *uri = workspace_uri(&s->ws, en->rel);
		char disp[4200];
		ws_display_path(&s->ws, en->rel, disp, sizeof disp);
		cJSON *res = cJSON_CreateObject();
		cJSON_AddStringToObject(res, "uri", uri ? uri : "");
		cJSON_AddStringToObject(res, "name", disp);
		cJSON_AddStringToObject(res, "mimeType", mime_from_path(en->rel));
		cJSON_AddNumberToObject(res, "size", (double)en->bytes);
		cJSON_AddItemToArray(arr, res);
		free(uri);
		shown++;
	}
	if (i < l.n) {
		char next[32];
		snprintf(next, sizeof next, "%zu", i);
		cJSON_AddStringToObject(r, "nextCursor", next);
	}
	art_list_free(&l);
	out->result = r;
}

static bool textual(const char *mime)
{
	return strncmp(mime, "text/", 5) == 0 || strcmp(mime, "application/json") == 0 || strstr(mime, "xml") ||
	       strcmp(mime, "application/x-yaml") == 0;
}

static void resources_read_run(const struct server *s, struct reply *out, const cJSON *params)
{
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(params, "uri");
	char path[8192], rel[4096];
	struct err e = { 0 };
	if (!cJSON_IsString(uri)) {
		reply_error(out, RPC_INVALID_PARAMS, "resources/read needs params.uri: a file:// URI from resources/list", NULL);
		return;
	}
	cJSON *data = cJSON_CreateObject();
	cJSON_AddStringToObject(data, "uri", uri->valuestring);
	if (!uri_to_path(uri->valuestring, path, sizeof path) || ws_relpath(&s->ws, path, rel, sizeof rel, &e) < 0 || !*rel) {
		char msg[600];
		snprintf(msg, sizeof msg, "resource not found: only files under the workspace (%s) can be read, as file:// URIs from resources/list", s->ws.abs);
		reply_error(out, MCP_RESOURCE_NOT_FOUND, msg, data);
		return;
	}
	unsigned char *buf;
	size_t len;
	int r = ws_read_file(&s->ws, rel, RESOURCE_READ_MAX, &buf, &len, &e);
	if (r < 0) {
		char msg[900];
		if (r == -EFBIG)
			snprintf(msg, sizeof msg, "the file is larger than %u MiB, the limit of resources/read: read a part of it with execute_python", RESOURCE_READ_MAX >> 20);
		else
			snprintf(msg, sizeof msg, "resource not found: %s", e.msg[0] ? e.msg : strerror(-r));
		reply_error(out, MCP_RESOURCE_NOT_FOUND, msg, data);
		return;
	}
	cJSON_Delete(data);
	const char *mime = mime_from_path(rel);
	cJSON *res = cJSON_CreateObject();
	cJSON *contents = cJSON_AddArrayToObject(res, "contents");
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "uri", uri->valuestring);
	cJSON_AddStringToObject(c, "mimeType", mime);
	if (textual(mime) && utf8_valid(buf, len) && !memchr(buf, 0, len)) {
		cJSON_AddStringToObject(c, "text", (const char *)buf);
	} else {
		char *b64 = base64_encode(buf, len);
		cJSON_AddStringToObject(c, "blob", b64 ? b64 : "");
		free(b64);
	}
	cJSON_AddItemToArray(contents, c);
	free(buf);
	out->result = res;
}

enum tool_kind { T_LIST, T_VERIFY, T_RES_LIST, T_RES_READ };

/* A request whose reply reads the workspace: prepared on a worker thread,
 * sent from the loop.  The copies of id and params belong to the job. */
struct tool_job {
	struct job j;
	struct server *s;     /* run() reads only s->ws, which never changes */
	enum tool_kind kind;
	cJSON *id, *params;
	bool has_exit;        /* verify_outputs: read on the loop beforehand */
	int exit_code;
	struct reply out;
};

static void tool_job_run(struct job *j)
{
	struct tool_job *t = (struct tool_job *)j;
	switch (t->kind) {
	case T_LIST: t->out.result = list_artifacts_call(t->s, t->params); break;
	case T_VERIFY: t->out.result = verify_outputs_call(t->s, t->params, t->has_exit, t->exit_code); break;
	case T_RES_LIST: resources_list_run(t->s, &t->out, t->params); break;
	case T_RES_READ: resources_read_run(t->s, &t->out, t->params); break;
	}
}

static void tool_job_done(struct job *j, bool abandoned)
{
	struct tool_job *t = (struct tool_job *)j;
	struct server *s = t->s;
	if (abandoned) {
		cJSON_Delete(t->out.result);
		cJSON_Delete(t->out.data);
	} else if (t->out.result && (t->kind == T_LIST || t->kind == T_VERIFY)) {
		tool_reply(s, t->id, t->out.result);
	} else if (t->out.result) {
		rpc_result(t->id, t->out.result);
	} else {
		rpc_error(t->id, t->out.code ? t->out.code : RPC_INTERNAL_ERROR, t->out.msg[0] ? t->out.msg : "out of memory", t->out.data);
	}
	cJSON_Delete(t->id);
	cJSON_Delete(t->params);
	free(t);
	if (!abandoned) {
		s->jobs--;
		reply_call_done(s);
	}
}

static void submit_tool(struct server *s, enum tool_kind kind, const cJSON *id, const cJSON *params, bool has_exit, int exit_code)
{
	struct tool_job *t = xcalloc(1, sizeof *t);
	t->id = cJSON_Duplicate(id, 1);
	t->params = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
	t->s = s;
	t->kind = kind;
	t->has_exit = has_exit;
	t->exit_code = exit_code;
	t->j.run = tool_job_run;
	t->j.done = tool_job_done;
	s->jobs++;
	work_submit(s->work, &t->j);
}

void resources_list(struct server *s, const cJSON *id, const cJSON *params)
{
	submit_tool(s, T_RES_LIST, id, params, false, 0);
}

void resources_read(struct server *s, const cJSON *id, const cJSON *params)
{
	submit_tool(s, T_RES_READ, id, params, false, 0);
}

/* The session whose last exit verify_outputs checks, read here on the loop
 * (the supervisor's state is the loop's alone). */
void verify_outputs_submit(struct server *s, const cJSON *id, const cJSON *args)
{
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	const char *sname = cJSON_IsString(session) ? session->valuestring : "default";
	int exit_code = 0;
	bool has_exit = session_name_valid(sname) && sup_last_exit(s->sup, sname, &exit_code);
	submit_tool(s, T_VERIFY, id, args, has_exit, exit_code);
}

void list_artifacts_submit(struct server *s, const cJSON *id, const cJSON *args)
{
	submit_tool(s, T_LIST, id, args, false, 0);
}
