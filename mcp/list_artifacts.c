/* list_artifacts: the workspace's files with sizes, types and SHA-256
 * (docs/TOOLS.md); runs on a worker thread, reads only through fsafe. */
#include "list_artifacts.h"

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
#include "reply.h"
#include "schema.h"

#define LIST_MAX 1000
/* Budgets per call for what the server reads of files the sandbox wrote.
 * Sizes are apparent sizes: a sparse file of 512 MiB takes 4 KiB of disk
 * but reading it means 512 MiB of zeros, so it counts as 512 MiB.  Without
 * them, 20 such files made one list_artifacts hash 10 GiB. */
#define LIST_HASH_BUDGET ((off_t)256 << 20)

static void rfc3339(const struct timespec *ts, char *out, size_t n)
{
	struct tm tm;
	time_t t = ts->tv_sec;
	gmtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

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
	if (ws_relpath_shown(&s->ws, p, rel, sizeof rel, &e) < 0)
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
	/* A listing that could not see everything says what it missed:
	 * "truncated" alone read as "nothing there" when 300 MB sat 70
	 * directories down. */
	msg[0] = '\0';
	unsigned unseen_part = l.unseen & ~(unsigned)ART_UNSEEN_ENTRIES;
	if (unseen_part) {
		char why[600];
		art_unseen_text(unseen_part, s->ws.display, l.where, why, sizeof why);
		snprintf(msg, sizeof msg, "not everything could be listed: the workspace holds %s; those files are missing here",
			 why);
	}
	if (l.truncated && (!unseen_part || (l.unseen & ART_UNSEEN_ENTRIES))) {
		size_t k = strlen(msg);
		snprintf(msg + k, sizeof msg - k, "%sthe listing stopped at %d entries: list a narrower path or pattern", k ? "; " : "",
			 LIST_MAX);
	}
	if (skipped) {
		size_t k = strlen(msg);
		snprintf(msg + k, sizeof msg - k, "%s%zu file(s) not hashed: the budget of %lld MiB read per call ran out (their sha256 is null)",
			 k ? "; " : "", skipped, (long long)(LIST_HASH_BUDGET >> 20));
	}
	if (msg[0])
		cJSON_AddStringToObject(out, "note", msg);
	art_list_free(&l);
	return tool_json_result(out, false);
}

cJSON *list_artifacts_schema(void)
{
	static const struct field f[] = {
		{ "artifacts", "array", F_REQ, "the files, sorted by path" },
		{ "count", "integer", F_REQ, "number of files listed" },
		{ "total_bytes", "integer", F_REQ, "their total size" },
		{ "truncated", "boolean", F_REQ, "true when the listing stopped early or files were left unhashed" },
		{ "note", "string", 0, "present when the listing could not see everything (what, and where first) or the hashing budget ran out" },
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
