/* One execute_python call, as exec.c (its arguments, files and events)
 * and exec_render.c (its reply) share it.  No other file includes this. */
#ifndef MCP_EXEC_CALL_H
#define MCP_EXEC_CALL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "../supervisor/supervisor.h"
#include "../files/artifacts.h"
#include "reply.h"
#include "state.h"

#define IMAGE_MAX_BYTES (256 * 1024)
#define MAX_IMAGES 8
/* Files the reply names (the text, the links and structuredContent):
 * list_artifacts lists the rest. */
#define ARTIFACTS_LISTED 25

struct image {
	char *b64;
	const char *mime;
};

/* One execute_python call, from request to reply: the supervisor's run,
 * and around it the request and what the reply needs. */
struct call {
	struct run run;          /* first: a run is its call */
	struct server *srv;
	cJSON *id;               /* owned copy of the request id */
	struct req q;            /* how to answer: q.id is id */
	cJSON *progress_token;   /* owned copy, or NULL */
	struct art_list before;
	bool before_taken;       /* the snapshot is in `before` */
	unsigned long long extra_before; /* what counts besides the listed files then */
	unsigned long long effect_before; /* scan_job.effect then */
	struct job *scan_job;    /* a walk of the workspace for this call, or NULL */
	cJSON *artifacts;        /* array of {path, bytes, mime, change} */
	bool artifacts_truncated; /* a walk stopped at its entry budget */
	char **thumb_rel;        /* images to downscale in the session */
	size_t n_thumbs, thumb_next;
	struct image images[MAX_IMAGES];
	size_t n_images;
	cJSON *files;            /* the history's: [{path, sha256, bytes, change}] */
};

#endif
