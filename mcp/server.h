/* The MCP server: lifecycle and dispatch of JSON-RPC over stdio
 * (docs/TOOLS.md).  One thread, one event loop; stdout carries MCP messages
 * only. */
#ifndef MCP_SERVER_H
#define MCP_SERVER_H

#include <stddef.h>

#include "state.h"

int server_run(struct server *s);

/* The supervisor of this server's sessions (not started). */
struct sup *server_sup_new(struct server *s);

/* Handles one complete line (one JSON-RPC message); replies go to stdout.
 * Exposed for the unit tests of the protocol layer. */
void server_handle_line(struct server *s, char *line, size_t len);

#endif
