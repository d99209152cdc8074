/* The tools other than execute_python, the tool catalogue and the
 * resources (docs/TOOLS.md). */
#ifndef MCP_TOOLS_H
#define MCP_TOOLS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "state.h"

cJSON *tools_list(const struct server *s);
/* Runs a tools/call.  Either replies at once (returns true) or takes over
 * the request and replies later (execute_python). */
void tools_call(struct server *s, const cJSON *id, const cJSON *params);
/* list_artifacts and verify_outputs read the workspace on a worker thread
 * (work.h): these queue them and reply when they are done. */
void list_artifacts_submit(struct server *s, const cJSON *id, const cJSON *args);
void verify_outputs_submit(struct server *s, const cJSON *id, const cJSON *args);
/* Both read the workspace on a worker thread and reply when done. */
void resources_list(struct server *s, const cJSON *id, const cJSON *params);
void resources_read(struct server *s, const cJSON *id, const cJSON *params);

#endif
