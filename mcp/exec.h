/* execute_python: its arguments, the call's files and images, and the
 * reply (docs/TOOLS.md).  The process side is the supervisor's. */
#ifndef MCP_EXEC_H
#define MCP_EXEC_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "reply.h"
#include "state.h"

/* ^[A-Za-z0-9_-]{1,64}$ */
bool session_name_valid(const char *name);

/* Checks the arguments and queues the call: it is answered when done. */
void exec_call(struct server *s, const struct req *q, const cJSON *args, const cJSON *progress_token);

/* notifications/cancelled: the call with this request id gets no reply
 * and its session is rolled back; true when there was one. */
bool exec_cancel(struct server *s, const cJSON *request_id);

/* The outputSchema of execute_python's structuredContent. */
cJSON *exec_output_schema(void);

#endif
