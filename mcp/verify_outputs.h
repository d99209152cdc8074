/* verify_outputs (docs/TOOLS.md). */
#ifndef MCP_VERIFY_OUTPUTS_H
#define MCP_VERIFY_OUTPUTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "state.h"

/* The reply's structuredContent; has_exit and exit_code: the session's
 * last execution, read on the loop beforehand.  Reads the workspace (a
 * worker runs it). */
cJSON *verify_outputs_call(const struct server *s, const cJSON *args, bool has_exit, int exit_code);
cJSON *verify_outputs_schema(void);

#endif
