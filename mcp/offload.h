/* What a request prepared on a worker thread answers (tools.c runs it off
 * the loop and sends it from the loop): a result, or an error with its
 * code. */
#ifndef MCP_OFFLOAD_H
#define MCP_OFFLOAD_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* What a job answers: a result, or an error with its code. */
struct reply {
	cJSON *result;
	int code;
	char msg[1024];
	cJSON *data;
};

static inline void reply_error(struct reply *r, int code, const char *msg, cJSON *data)
{
	r->code = code;
	snprintf(r->msg, sizeof r->msg, "%s", msg);
	r->data = data;
}

#endif
