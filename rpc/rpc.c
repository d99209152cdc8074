/* JSON-RPC over stdio: replies are written whole, one line each, in the
 * order they are made (out.h): stdout carries nothing else. */
#include "rpc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "out.h"

/* Queued (out.h): the loop never waits for the client to read. */
static void write_line(const char *s)
{
	out_line(s, strlen(s));
}

/* Every string that leaves on stdout is valid UTF-8, whatever built it:
 * a message cut with %.Ns in the middle of a character, a path or a detail
 * from the sandbox.  (cJSON prints bytes as they are.) */
static void json_sanitize(cJSON *j)
{
	for (; j; j = j->next) {
		if (cJSON_IsString(j) && j->valuestring &&
		    !utf8_valid((const unsigned char *)j->valuestring, strlen(j->valuestring))) {
			char *fixed = utf8_sanitize((const unsigned char *)j->valuestring, strlen(j->valuestring), NULL);
			if (fixed) {
				cJSON_free(j->valuestring);
				j->valuestring = fixed; /* malloc'd, as cJSON's hooks are the default */
			}
		}
		if (j->string && !utf8_valid((const unsigned char *)j->string, strlen(j->string))) {
			char *fixed = utf8_sanitize((const unsigned char *)j->string, strlen(j->string), NULL);
			if (fixed) {
				if (!(j->type & cJSON_StringIsConst))
					cJSON_free(j->string);
				j->string = fixed;
				j->type &= ~cJSON_StringIsConst;
			}
		}
		json_sanitize(j->child);
	}
}

static void send_obj(cJSON *msg)
{
	json_sanitize(msg);
	char *s = cJSON_PrintUnformatted(msg);
	if (s) {
		write_line(s);
		free(s);
	} else {
		log_error("cannot serialise a reply (out of memory)");
	}
	cJSON_Delete(msg);
}

static cJSON *envelope(const cJSON *id)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	cJSON_AddItemToObject(m, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
	return m;
}

void rpc_result(const cJSON *id, cJSON *result)
{
	cJSON *m = envelope(id);
	cJSON_AddItemToObject(m, "result", result ? result : cJSON_CreateObject());
	send_obj(m);
}

void rpc_error(const cJSON *id, int code, const char *msg, cJSON *data)
{
	cJSON *m = envelope(id);
	cJSON *e = cJSON_AddObjectToObject(m, "error");
	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", msg);
	if (data)
		cJSON_AddItemToObject(e, "data", data);
	send_obj(m);
}

void rpc_notify(const char *method, cJSON *params)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	cJSON_AddStringToObject(m, "method", method);
	if (params)
		cJSON_AddItemToObject(m, "params", params);
	send_obj(m);
}

void rpc_request(const char *id, const char *method, cJSON *params)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	cJSON_AddStringToObject(m, "id", id);
	cJSON_AddStringToObject(m, "method", method);
	if (params)
		cJSON_AddItemToObject(m, "params", params);
	send_obj(m);
}

cJSON *rpc_parse_line(const char *line, size_t len, bool *blank)
{
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	*blank = i == len;
	if (*blank)
		return NULL;
	const char *end = NULL;
	cJSON *msg = cJSON_ParseWithLengthOpts(line + i, len - i, &end, 0);
	if (msg && end && (size_t)(end - line) < len) {
		cJSON_Delete(msg); /* more after the first value */
		return NULL;
	}
	return msg;
}

/* Skips the JSON value at p[*i] (bounded by n): strings with their escapes,
 * nested arrays and objects by depth, and scalars up to a delimiter.
 * False when the value runs past n. */
static bool skip_value(const char *p, size_t n, size_t *i)
{
	size_t depth = 0;
	bool in_str = false;
	for (; *i < n; (*i)++) {
		char c = p[*i];
		if (in_str) {
			if (c == '\\')
				(*i)++;
			else if (c == '"') {
				in_str = false;
				if (depth == 0) {
					(*i)++;
					return true;
				}
			}
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']') {
			if (depth == 0)
				return true; /* the end of the enclosing object */
			if (--depth == 0) {
				(*i)++;
				return true;
			}
		} else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'))
			return true;
	}
	return false;
}

static void skip_ws(const char *p, size_t n, size_t *i)
{
	while (*i < n && (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\r' || p[*i] == '\n'))
		(*i)++;
}

cJSON *rpc_id_from_prefix(const char *p, size_t n)
{
	size_t i = 0;
	skip_ws(p, n, &i);
	if (i >= n || p[i++] != '{')
		return NULL;
	for (;;) {
		skip_ws(p, n, &i);
		if (i >= n || p[i] != '"')
			return NULL;
		size_t ks = i;
		if (!skip_value(p, n, &i))
			return NULL;
		bool is_id = i - ks == 4 && memcmp(p + ks, "\"id\"", 4) == 0;
		skip_ws(p, n, &i);
		if (i >= n || p[i++] != ':')
			return NULL;
		skip_ws(p, n, &i);
		size_t vs = i;
		if (!skip_value(p, n, &i) || i >= n) /* the value must end before the cut */
			return NULL;
		if (is_id) {
			cJSON *v = cJSON_ParseWithLength(p + vs, i - vs);
			if (v && (cJSON_IsNumber(v) || cJSON_IsString(v)))
				return v;
			cJSON_Delete(v);
			return NULL;
		}
		skip_ws(p, n, &i);
		if (i >= n || p[i++] != ',')
			return NULL;
	}
}
