/* verify_outputs (docs/TOOLS.md). */
#ifndef MCP_VERIFY_OUTPUTS_H
#define MCP_VERIFY_OUTPUTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "state.h"

/* What the supervisor knows of the sessions, read on the loop beforehand. */
struct verify_sessions {
	char checked[72];  /* the session whose last execution is checked */
	bool has_exit;     /* it ran code in this server's life: its exit code */
	int exit_code;
	int n_ran;         /* the sessions that ran code, named in ran */
	char ran[480];
};

/* The reply's structuredContent.  Reads the workspace (a worker runs
 * it). */
cJSON *verify_outputs_call(const struct server *s, const cJSON *args, const struct verify_sessions *vs);
cJSON *verify_outputs_schema(void);

#endif
