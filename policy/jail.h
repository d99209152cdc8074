/* The jail: the layers that enforce a policy around the interpreter
 * (DESIGN "The jail", CONTRACT section 3).
 *
 * The server computes a jail_config; the freshly forked zygote calls
 * jail_enter() while it is still single-threaded and before Python starts.
 * Layers, in order, each in its own file with its own probe:
 *   fds + environment -> unprivileged uid when root -> namespaces and mount
 *   tree -> capabilities, securebits, no_new_privs, rlimits -> Landlock ->
 *   seccomp (last).
 * Layers only tighten; a layer the kernel lacks is reported, never widened
 * around. */
#ifndef POLICY_JAIL_H
#define POLICY_JAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"
#include "policy.h"

enum jail_layer_id {
	JL_FDS,        /* fds closed, stdin /dev/null, minimal environment */
	JL_UID,        /* unprivileged uid/gid when the server runs as root */
	JL_USERNS,
	JL_MOUNTNS,    /* mount tree + pivot_root */
	JL_PIDNS,
	JL_NETNS,
	JL_IPCNS,
	JL_UTSNS,
	JL_CAPS,       /* capabilities dropped, securebits locked, no_new_privs */
	JL_RLIMITS,
	JL_LANDLOCK,
	JL_SECCOMP,
	JL_COUNT
};

enum jail_state { JS_NOT_NEEDED, JS_APPLIED, JS_NOT_AVAILABLE, JS_FAILED };

struct jail_layer {
	enum jail_state state;
	bool required;      /* the policy cannot be enforced without it */
	char detail[256];   /* e.g. "ABI 7, 16 fs rights, tcp, scopes" */
};

struct jail_report {
	struct jail_layer layer[JL_COUNT];
	bool enforceable;   /* every required layer applied */
	char why[512];      /* when not enforceable: what is missing */
};

struct jail_config {
	const struct policy *policy;
	const char *root;        /* canonical ROOT: Python's cwd, same path inside */
	const char *workspace;   /* canonical workspace: read-write (per fs_write) */
	const char *venv;        /* optional site-packages root, read-only; NULL */
	const char *const *runtime_ro; /* system paths the interpreter needs, NULL-terminated */
	const int *keep_fds;     /* fds to keep open (control socket); others closed */
	size_t n_keep_fds;
	const char *const *env;  /* the environment to install, NULL-terminated "K=V" */
};

/* Called in the zygote process right after fork from the server.  May fork
 * internally (to become pid 1 of a new pid namespace): on return the calling
 * process is the one to continue as the zygote; an intermediate process never
 * returns (it waits and exits with the zygote's status).  Fills *r.  Returns 0
 * when the layers were applied as far as the kernel allows (check
 * r->enforceable), negative errno when setting up failed outright. */
int jail_enter(const struct jail_config *c, struct jail_report *r, struct err *e);

/* Called in each session process right after it forks from the zygote:
 * per-session tightening (its own Landlock domain scoping signals and
 * abstract sockets, not dumpable) so sessions cannot touch each other. */
int jail_session_enter(struct err *e);

/* The default read-only runtime paths for this machine's interpreter
 * (stdlib, dist-packages, shared libraries, fonts, /etc files it reads). */
const char *const *jail_default_runtime_paths(void);

const char *jail_layer_name(enum jail_layer_id id);
const char *jail_state_name(enum jail_state s);

/* Multi-line text for --check and the start-up log.  Caller frees. */
char *jail_report_describe(const struct jail_report *r);

#endif
