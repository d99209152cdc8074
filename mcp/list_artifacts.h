/* list_artifacts (docs/TOOLS.md). */
#ifndef MCP_LIST_ARTIFACTS_H
#define MCP_LIST_ARTIFACTS_H

#include <cjson/cJSON.h>

#include "state.h"

/* The reply's structuredContent; reads the workspace (a worker runs it). */
cJSON *list_artifacts_call(const struct server *s, const cJSON *args);
cJSON *list_artifacts_schema(void);

#endif
