/* Tool results and replies, shaped for the protocol version the client
 * negotiated. */
#ifndef MCP_REPLY_H
#define MCP_REPLY_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "state.h"

/* Whether the negotiated protocol version is `version` or later. */
bool reply_version_at_least(const struct server *s, const char *version);

/* Sends a tool result shaped for the negotiated version: before 2025-06-18
 * no structuredContent, and each resource_link becomes a line of the text
 * block.  result is consumed. */
void tool_reply(struct server *s, const cJSON *id, cJSON *result);

/* Tool results. */
cJSON *tool_text_result(const char *text, bool is_error);
/* A result whose structuredContent is `obj` and whose text is the same JSON. */
cJSON *tool_json_result(cJSON *obj /* consumed */, bool is_error);

/* A request that was answered later (a call, a worker's reply) has been
 * answered: at the end of input, the last one ends the server. */
void reply_call_done(struct server *s);

#endif
