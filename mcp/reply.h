/* Replies, shaped for the protocol version of the request they answer:
 * the modern era's resultType, cache hints and serverInfo, and tool results
 * without what an older version lacks. */
#ifndef MCP_REPLY_H
#define MCP_REPLY_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "protocol.h"
#include "state.h"

/* A request as its reply needs it: the id (borrowed: a reply sent later
 * keeps its own copy and points here at it), the protocol version the reply
 * follows (the one the request's _meta names, else the one initialize
 * chose), and how long a client may cache the result (-1: not a cacheable
 * result). */
struct req {
	const cJSON *id;
	enum mcp_version v;
	long ttl_ms;
};

/* The version of a legacy-era request: initialize's choice, else the
 * latest legacy version. */
enum mcp_version reply_legacy_version(const struct server *s);

/* Sends a result (consumed; NULL for an empty one).  In the modern era it
 * gets resultType "complete", the server's identity in _meta and, for a
 * cacheable result, ttlMs and cacheScope. */
void answer(const struct server *s, const struct req *q, cJSON *result);
/* Sends an error; data is consumed.  Resource-not-found is -32602 in the
 * modern era, -32002 before. */
void answer_error(const struct server *s, const struct req *q, int code, const char *msg, cJSON *data);

/* The server's name, title and version. */
cJSON *reply_server_info(enum mcp_version v);

/* Sends a tool result shaped for the request's version: before 2025-06-18
 * no structuredContent, and each resource_link becomes a line of the text
 * block.  result is consumed. */
void tool_reply(struct server *s, const struct req *q, cJSON *result);

/* Tool results. */
cJSON *tool_text_result(const char *text, bool is_error);
/* A result whose structuredContent is `obj` and whose text is the same JSON. */
cJSON *tool_json_result(cJSON *obj /* consumed */, bool is_error);

/* A request that was answered later (a call, a worker's reply) has been
 * answered: at the end of input, the last one ends the server. */
void reply_call_done(struct server *s);

#endif
