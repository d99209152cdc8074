/* The workspace as MCP resources: resources/list and resources/read
 * (docs/TOOLS.md); run on a worker thread, read only through fsafe. */
#include "resources.h"

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

#define RESOURCE_READ_MAX (8u << 20)
#define RESOURCES_PAGE 1000 /* entries per page of resources/list */

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

void resources_list_run(const struct server *s, struct reply *out, const cJSON *params)
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
	/* The server's own files (saved sessions, full output logs, caches)
	 * are no resources: a client that lists them offers the model
	 * snapshots it has no use for.  They can still be read by URI (a
	 * reply names its log). */
	struct art_scan_opts o = { .subdir = "", .include_hidden = true, .max_entries = 100000, .exclude = art_server_dirs };
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
	for (i = (size_t)start; i < l.n && shown < RESOURCES_PAGE; i++) {
		const struct art_entry *en = &l.v[i];
		if (en->is_symlink || art_path_under(en->rel, art_server_dirs))
			continue;
		char *uri = ws_file_uri(&s->ws, en->rel);
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

void resources_read_run(const struct server *s, struct reply *out, const cJSON *params)
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
