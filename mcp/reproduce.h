/* verify_outputs' reproduce: the session's recorded cells whose effect is
 * in its state, run again in order by a child server (this same binary) on
 * a copy of the project in a temporary directory, so that nothing it
 * writes reaches the original files; each cell's output and each file it
 * wrote compared with the record.  Runs on a worker thread, bounded in
 * time by the policy's max_timeout_s in all. */
#ifndef MCP_REPRODUCE_H
#define MCP_REPRODUCE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "state.h"

struct repro {
	bool ran;               /* the cells ran again (false: why says why not) */
	char why[900];
	double ms, copy_ms;     /* the whole run again, and its copy of the project */
	unsigned long long copy_bytes;
	int cells;              /* cells run again */
	int first_cell;         /* the first cell whose output or files differed, or 0 */
	char first[900];        /* what differed there */
	int net_cell;           /* the first cell refused what a run again never
	                         * allows (the network, a write outside the copy,
	                         * a program), or 0: what differed from there on
	                         * could not be checked */
	cJSON *files;           /* {display path: sha256 in the copy, or null} after the run */
};

/* Runs the session again; fills r (repro_free it). */
void reproduce_run(const struct server *s, const char *session, struct repro *r);
void repro_free(struct repro *r);
/* The server is exiting: a run in progress ends its child and returns
 * within a fraction of a second. */
void reproduce_stop(void);

#endif
