/* execute_python's reply: what a call's end says, as text, images, links
 * and structuredContent, within the reply's budget, and the call's line
 * in its session's history.  Only exec.c includes this. */
#ifndef MCP_EXEC_RENDER_H
#define MCP_EXEC_RENDER_H

#include "exec_call.h"

struct view;

/* Renders the reply of a finished call, records it in the history and
 * sends it.  The call stays the caller's to free. */
void exec_reply(struct call *c);

/* The call in its session's history (history.h), as the reply carries it
 * (v NULL: a cancelled call, which has no reply). */
void exec_record(struct call *c, const struct view *v);

#endif
