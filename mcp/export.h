/* `python-sandbox-mcp export`: a session's history (history.h) as a
 * Jupyter notebook (nbformat 4) or a `# %%` script that, run top to bottom
 * at ROOT, does what the session's state holds: the cells whose effect is
 * in the state, in order, with their outputs; a call rolled back or lost
 * as one markdown line. */
#ifndef MCP_EXPORT_H
#define MCP_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "history.h"

/* Writes the export of `session` to out.  0; -ENOENT when the session has
 * no history (why names those that have one); other -errno (why says). */
int export_write(const struct history *h, const char *session, bool py, FILE *out, char *why, size_t whyn);

/* The subcommand: argv[0] is "export".  The process's exit code. */
int export_main(int argc, char **argv);

#endif
