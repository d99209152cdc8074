/* The tool table (name, schema, description, annotations, how a call runs),
 * tools/list and tools/call, and the resources requests, which read the
 * workspace on a worker thread (docs/TOOLS.md). */
#ifndef MCP_TOOLS_H
#define MCP_TOOLS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "protocol.h"
#include "reply.h"
#include "state.h"

/* The rows of the table, for code that names a tool in words. */
enum tool_id { TOOL_EXEC, TOOL_LIST, TOOL_VERIFY, TOOL_COUNT };

const char *tool_name(enum tool_id t);

/* tools/list's "tools", with the fields protocol version v defines. */
cJSON *tools_list(const struct server *s, enum mcp_version v);

/* The server's instructions (initialize, server/discover): what the
 * sandbox holds and allows, from the policy, the workspace and the
 * installed stack.  Caller frees. */
char *tools_instructions(const struct server *s);

/* tools/call: answers at once (an unknown tool, bad arguments), or takes
 * the request over and answers when the call is done. */
void tools_call(struct server *s, const struct req *q, const cJSON *params);

/* resources/list and resources/read: read the workspace on a worker
 * thread and answer when done. */
void resources_list(struct server *s, const struct req *q, const cJSON *params);
void resources_read(struct server *s, const struct req *q, const cJSON *params);

#endif
