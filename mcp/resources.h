/* The workspace as MCP resources (docs/TOOLS.md). */
#ifndef MCP_RESOURCES_H
#define MCP_RESOURCES_H

#include <cjson/cJSON.h>

#include "offload.h"
#include "state.h"

/* resources/list and resources/read, prepared on a worker into out. */
void resources_list_run(const struct server *s, struct reply *out, const cJSON *params);
void resources_read_run(const struct server *s, struct reply *out, const cJSON *params);

#endif
