/* The supervisor: the zygote and the sessions, seen from the trusted side.
 * It forks the zygote, asks it for session processes, sends them cells,
 * drains their output, enforces timeouts and cancellations, and hands each
 * finished call to exec.c for rendering. */
#ifndef SUPERVISOR_SUPERVISOR_H
#define SUPERVISOR_SUPERVISOR_H

/* The lines around the jail's report that a --check-session server writes
 * on stderr (mcp/check.c reads them). */
#define CHECK_JAIL_BEGIN "psm-check: jail report follows"
#define CHECK_JAIL_END "psm-check: jail report ends"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "../workspace/artifacts.h"
#include "callstatus.h"
#include "../mcp/server.h"
#include "usage.h"

#define SESSION_NAME_MAX 64

struct image {
	char *b64;
	const char *mime;
};

/* One execute_python call, from request to reply. */
struct call {
	struct server *srv;
	cJSON *id;               /* owned copy of the request id */
	cJSON *progress_token;   /* owned copy, or NULL */
	char session[SESSION_NAME_MAX + 1];
	char *code;
	double timeout_ms;
	bool reset;

	/* filled as it runs */
	int cell;
	double t_start, duration_ms;
	enum call_status status; /* CALL_PENDING until decided */
	int exit_code;
	enum call_state state;   /* STATE_PENDING until decided */
	bool new_session;
	cJSON *py;               /* the session's result JSON, or NULL */
	char *out_text, *err_text;
	bool out_truncated, err_truncated;
	char *out_log, *err_log; /* display paths of full logs, or NULL */
	char *note;              /* extra line for the model, or NULL */
	struct art_list before;
	bool before_taken;       /* the snapshot is in `before` */
	struct job *scan_job;    /* a walk of the workspace for this call, or NULL */
	bool finish_pending;     /* finish_cur waits for scan_job */
	cJSON *artifacts;        /* array of {path, bytes, mime, change} */
	bool artifacts_truncated; /* a walk stopped at its entry budget */
	char **thumb_rel;        /* images to downscale in the session */
	size_t n_thumbs, thumb_next;
	struct image images[8];
	size_t n_images;
	unsigned long long ws_bytes; /* CALL_LIMITS: the workspace's size then */
	/* The workspace's files before and after the call, from the two
	 * snapshots (art_list_bytes): the end-of-call workspace check. */
	unsigned long long ws_before, ws_after;
	struct usage usage;      /* CPU time and peak memory of this call */
	bool cancelled;          /* no reply may be sent */
	bool started;            /* the session said it received the cell */
	bool over_limit;         /* ended by the server's watchdog (denied_by limits) */
	int resends;             /* sent again after the process died unstarted */
	struct call *next;
};

/* ^[A-Za-z0-9_-]{1,64}$ */
bool session_name_valid(const char *name);

struct sup *sup_new(struct server *s);
/* Forks the zygote (which warms up in the background). */
int sup_start(struct sup *sup, struct err *e);
/* No interpreter for this server: every execute_python is answered with
 * `why` (for the in-process fuzzing of the dispatcher, which must not fork). */
void sup_disable(struct sup *sup, const char *why);
/* Ends every session and the zygote, and waits for them. */
void sup_free(struct sup *sup);

/* Takes ownership of c; its reply is sent by exec_finish. */
void sup_submit(struct sup *sup, struct call *c);
/* Cancels the call with this request id: true when one was found. */
bool sup_cancel(struct sup *sup, const cJSON *request_id);
/* The exit code of the session's last execution; false when none. */
bool sup_last_exit(struct sup *sup, const char *session, int *exit_code);
int sup_count_sessions(struct sup *sup);
/* Whether any call is running or queued. */
bool sup_busy(struct sup *sup);
bool sup_session_exists(struct sup *sup, const char *session);

/* exec.c: hooks around a call. */
/* Both walk the workspace on a worker and call then(c, arg) on the loop
 * when done (at once without a worker pool); nothing happens while a scan
 * of c is already running (c->scan_job). */
void exec_before(struct call *c, void (*then)(struct call *c, void *arg), void *arg); /* snapshot */
void exec_after(struct call *c, void (*then)(struct call *c, void *arg), void *arg);  /* artifacts, images */
void exec_thumb(struct call *c, const unsigned char *data, size_t len);
void exec_finish(struct call *c);          /* reply (unless cancelled), free */
void call_free(struct call *c);

#endif
