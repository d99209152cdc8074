/* Tool results and replies (reply.h). */
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../supervisor/supervisor.h"
#include "../common/util.h"

cJSON *tool_text_result(const char *text, bool is_error)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *content = cJSON_AddArrayToObject(r, "content");
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "type", "text");
	cJSON_AddStringToObject(t, "text", text);
	cJSON_AddItemToArray(content, t);
	cJSON_AddBoolToObject(r, "isError", is_error);
	return r;
}

cJSON *tool_json_result(cJSON *obj, bool is_error)
{
	/* Compact: clients that show the model both the text and the
	 * structured copy pay for it twice, so no indentation on top. */
	char *txt = cJSON_PrintUnformatted(obj);
	cJSON *r = tool_text_result(txt ? txt : "{}", is_error);
	free(txt);
	cJSON_AddItemToObject(r, "structuredContent", obj);
	return r;
}

enum mcp_version reply_legacy_version(const struct server *s)
{
	return s->version_chosen ? s->legacy_version : MCP_LEGACY_LATEST;
}

cJSON *reply_server_info(enum mcp_version v)
{
	cJSON *info = cJSON_CreateObject();
	cJSON_AddStringToObject(info, "name", "python-sandbox-mcp");
	if (v >= MCP_V_STRUCTURED)
		cJSON_AddStringToObject(info, "title", "Python sandbox");
	cJSON_AddStringToObject(info, "version", PSM_VERSION);
	return info;
}

void answer(const struct server *s, const struct req *q, cJSON *result)
{
	(void)s;
	if (!result)
		result = cJSON_CreateObject();
	if (mcp_modern(q->v)) {
		if (!cJSON_HasObjectItem(result, "resultType"))
			cJSON_AddStringToObject(result, "resultType", "complete");
		if (q->ttl_ms >= 0 && !cJSON_HasObjectItem(result, "ttlMs")) {
			cJSON_AddNumberToObject(result, "ttlMs", (double)q->ttl_ms);
			/* Every list names the user's own files and paths. */
			cJSON_AddStringToObject(result, "cacheScope", "private");
		}
		cJSON *meta = cJSON_GetObjectItemCaseSensitive(result, "_meta");
		if (!cJSON_IsObject(meta)) {
			cJSON_DeleteItemFromObjectCaseSensitive(result, "_meta");
			meta = cJSON_AddObjectToObject(result, "_meta");
		}
		cJSON_AddItemToObject(meta, META_SERVER_INFO, reply_server_info(q->v));
	}
	rpc_result(q->id, result);
}

void answer_error(const struct server *s, const struct req *q, int code, const char *msg, cJSON *data)
{
	(void)s;
	/* 2026-07-28 retired -32002: a resource that is not there is invalid
	 * params. */
	if (mcp_modern(q->v) && code == MCP_RESOURCE_NOT_FOUND)
		code = RPC_INVALID_PARAMS;
	rpc_error(q->id, code, msg, data);
}

/* A resource_link block as a line of text, for versions that lack it. */
static void link_as_line(const cJSON *l, char *out, size_t n)
{
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(l, "size");
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "name"));
	const char *uri = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "uri"));
	const char *mime = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "mimeType"));
	if (cJSON_IsNumber(size))
		snprintf(out, n, "- %s: %s (%s, %.0f bytes)\n", name ? name : "", uri ? uri : "", mime ? mime : "", size->valuedouble);
	else
		snprintf(out, n, "- %s: %s (%s)\n", name ? name : "", uri ? uri : "", mime ? mime : "");
}

void tool_reply(struct server *s, const struct req *q, cJSON *result)
{
	if (result && (q->v < MCP_V_STRUCTURED || s->opts.links_text)) {
		/* Before structuredContent and resource_link existed: the JSON
		 * is already in the text block; each link becomes a line of it.
		 * The same lines with --resource-links text, for the clients that
		 * reject a whole result that holds a resource_link. */
		if (q->v < MCP_V_STRUCTURED)
			cJSON_DeleteItemFromObjectCaseSensitive(result, "structuredContent");
		cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
		cJSON *text = NULL;
		char *lines = NULL;
		size_t len = 0;
		for (cJSON *b = content ? content->child : NULL, *next; b; b = next) {
			next = b->next;
			const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "type"));
			if (type && !text && strcmp(type, "text") == 0)
				text = b;
			if (!type || strcmp(type, "resource_link") != 0)
				continue;
			char line[9000];
			link_as_line(b, line, sizeof line);
			lines = xrealloc(lines, len + strlen(line) + 1);
			memcpy(lines + len, line, strlen(line) + 1);
			len += strlen(line);
			cJSON_Delete(cJSON_DetachItemViaPointer(content, b));
		}
		cJSON *t = cJSON_GetObjectItemCaseSensitive(text, "text");
		if (lines && cJSON_IsString(t)) {
			size_t tl = strlen(t->valuestring);
			char *joined = xmalloc(tl + len + 16);
			sprintf(joined, "%s%s\nlinks:\n%s", t->valuestring,
				tl && t->valuestring[tl - 1] == '\n' ? "" : "\n", lines);
			cJSON_SetValuestring(t, joined);
			free(joined);
		}
		free(lines);
	}
	answer(s, q, result);
}

void reply_call_done(struct server *s)
{
	if (!s->stopping || (s->wait_calls && (sup_busy(s->sup) || s->jobs > 0)) || sup_saving(s->sup))
		return;
	log_info("%s, shutting down", s->wait_calls ? "all calls answered and every state saved" : "every state saved");
	loop_stop(s->loop);
}
