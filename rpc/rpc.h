/* JSON-RPC 2.0 over stdio: the messages this process writes (one line each
 * on stdout, which carries nothing else) and the parse of one input line.
 * Nothing here knows MCP: the methods and their replies are mcp/'s. */
#ifndef RPC_RPC_H
#define RPC_RPC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* JSON-RPC's error codes. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
};

/* Sends a result, an error, a notification or a request of this process
 * (one line on stdout).  id is borrowed; result, data and params are
 * consumed.  Every string is made valid UTF-8 first. */
void rpc_result(const cJSON *id, cJSON *result);
void rpc_error(const cJSON *id, int code, const char *msg, cJSON *data);
void rpc_notify(const char *method, cJSON *params);
void rpc_request(const char *id, const char *method, cJSON *params);

/* One input line as a message: trailing CR and blanks and leading blanks
 * trimmed; the line is len bytes, not NUL-terminated.  NULL when it is blank
 * (*blank set) or not exactly one JSON value. */
cJSON *rpc_parse_line(const char *line, size_t len, bool *blank);

/* The id of a request from the first n bytes of its line only (a line too
 * long to be read whole): the value of a top-level "id" member (a number
 * or a string) that lies wholly before the cut, found by skipping the
 * members before it without building them.  NULL when none can be read
 * there; the caller frees the copy. */
cJSON *rpc_id_from_prefix(const char *p, size_t n);

#endif
