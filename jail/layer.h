/* What the jail's layer files share (policy/jail_*.c, landlock.c,
 * seccomp.c, secrets.c): the configuration and the report they fill, the
 * test hook, and each layer's entry points, which jail.c calls in order.
 * A layer file includes this header only, never jail.h: the layers sit
 * below jail.c, which orders them and judges the result. */
#ifndef POLICY_LAYER_H
#define POLICY_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../common/err.h"
#include "../policy/policy.h"

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
	char detail[384];   /* e.g. "ABI 7, 16 fs rights, tcp, scopes" */
};

struct jail_report {
	struct jail_layer layer[JL_COUNT];
	bool enforceable;   /* every required layer applied */
	char why[512];      /* when not enforceable: what is missing */
	/* The mode: false with the mount namespace (the mount tree hides and
	 * confines); true without it, where Landlock and seccomp do that work
	 * alone ("Landlock + seccomp", see jail.c: judge). */
	bool nsfree;
	/* The namespace-free mode's private scratch directory (TMPDIR, HOME),
	 * a fresh mkdtemp directory on the host only the jail may write; the
	 * server removes it when it exits.  Empty in the namespace mode
	 * (/tmp is a private tmpfs there). */
	char scratch[256];
	/* System V shared memory is allowed: the jail has its own IPC
	 * namespace and a segment goes when its last process detaches
	 * (jail_ns.c). */
	bool sysv_shm;
	/* A root server without a mount tree, the project root's: the
	 * sandbox's effective uid is 0 (no capability), its real uid 65534
	 * (jail_uid.c). */
	bool euid0;
	char remedy[512];   /* what the user can do to get the missing layers */
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
	/* --check: change nothing on the host (no chown of root-owned
	 * writable directories; the report says what serving would do). */
	bool no_host_changes;
	/* memfd_create refused: the server cannot count memfds (it cannot
	 * read the sessions' descriptors), so none may exist. */
	bool no_memfd;
};

/* The default read-only runtime paths for this machine's interpreter
 * (stdlib, dist-packages, shared libraries, fonts, /etc files it reads). */
const char *const *jail_default_runtime_paths(void);

/* ---- What jail.c calls in each layer file ----
 * Each layer has a probe (what this kernel offers, no side effects) and an
 * apply step that fills its entry of the report and returns 0, or a negative
 * errno with e set when setting up failed outright (the caller then exits:
 * fail closed).  A layer the kernel lacks is not an error: its state says
 * so and jail_enter() decides whether the policy is still enforceable. */

/* PSM_JAIL_DISABLE=userns,landlock,...: a test hook that switches layers off
 * as if the kernel lacked them (landlock-abi-N: as if Landlock's ABI were N,
 * lower than the kernel's).  It can only remove layers, so it can only
 * make the report non-enforceable; it never widens access silently. */
bool jail_disabled(const char *layer);
/* Reads PSM_JAIL_DISABLE (once, before the environment is replaced). */
void jail_disabled_read(void);

int jail_fds_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

/* The unprivileged ids the sandbox runs as when the server is root. */
void jail_uid_choose(const struct jail_config *c, uid_t *uid, gid_t *gid);
/* chown: whether root-owned writable directories must be chowned to the
 * sandbox uid (not when jail_ns_prepare ID-mapped them).  no_tree: no mount
 * tree shows the project (it was refused already): a root-owned project is
 * then reached with the effective uid 0 kept (see jail_uid.c). */
int jail_uid_apply(const struct jail_config *c, bool chown, bool no_tree, struct jail_report *r,
		   struct err *e);

/* Whether a user namespace can be made as (uid, gid); with mount, also
 * whether that namespace can then make a mount namespace (an AppArmor
 * restriction leaves a new user namespace without capabilities). */
bool jail_userns_probe(uid_t uid, gid_t gid, bool mount);
/* As root, before the uid switch: clones the mount sources, ID-mapped to
 * the sandbox uid when it is 65534 (see jail_ns.c).  1 when ID-mapped. */
int jail_ns_prepare(const struct jail_config *c, uid_t uid, gid_t gid, struct err *e);
/* As root, before the uid switch: the IPC namespace, made here so that its
 * shared memory rule can be set (see jail_ns.c). */
void jail_ns_ipc_early(struct jail_report *r);
/* Namespaces, then a fork (pid 1 of the new pid namespace; the intermediate
 * never returns), then the mount tree and pivot_root. */
int jail_ns_apply(const struct jail_config *c, bool with_userns,
		  struct jail_report *r, struct err *e);
struct secret_scan;
/* In the mount tree, while the mount calls are still allowed: an empty
 * read-only mount over each secret the scan found (s->covered); the count
 * goes into the mount layer's detail. */
void jail_ns_hide(struct secret_scan *s, struct jail_layer *l);

int jail_caps_apply(const struct jail_config *c, struct jail_report *r, struct err *e);
int jail_rlimits_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

int landlock_abi(void); /* 0 when Landlock is unavailable */
/* private_tmp: /tmp and /dev/shm are the mount tree's private tmpfs;
 * otherwise r->scratch (when set) is the only scratch space granted. */
int landlock_apply(const struct jail_config *c, bool private_tmp,
		   struct jail_report *r, struct err *e);
/* What a session may read of /proc: everything (a pid namespace's own
 * /proc, or none), or only its own entry and a few system-wide files (the
 * host's /proc; _NO_SYS also leaves out /proc/sys, whose root-only
 * sysctls an effective uid 0 could read). */
enum session_proc { SESSION_PROC_ALL, SESSION_PROC_OWN, SESSION_PROC_OWN_NO_SYS };
/* A nested domain with the signal and abstract-socket scopes (ABI >= 6)
 * and, unless SESSION_PROC_ALL, reads of /proc cut down to what proc
 * allows: 1 applied, 0 not available, negative errno on failure. */
int landlock_scope_session(enum session_proc proc, struct err *e);


/* Secrets under what fs_read shows (secrets.c): found once, when the jail
 * is built, by a bounded walk; Landlock then grants reads around them. */
#define SECRETS_MAX 4096           /* matches kept; more: not enforceable */
#define SECRETS_MAX_ENTRIES 200000 /* directory entries looked at */
#define SECRETS_MAX_DEPTH 48
struct secret_scan {
	char *paths[SECRETS_MAX]; /* absolute paths of the matches; owned */
	bool covered[SECRETS_MAX]; /* an empty mount lies over it (jail_ns_hide) */
	size_t n;
	size_t entries;
	bool overflow; /* a bound was reached: the scan is incomplete */
	bool done;
};
int secrets_scan(const struct jail_config *c, struct secret_scan *s);
void secrets_free(struct secret_scan *s);
bool secrets_hidden_below(const struct secret_scan *s, const char *dir);
bool secrets_is_hidden(const struct secret_scan *s, const char *path);
/* Whether every secret at or below dir is covered by a mount. */
bool secrets_covered(const struct secret_scan *s, const char *dir);
/* The scan of the jail being entered (filled by jail_enter before
 * Landlock, through jail_secret_slot), or NULL before. */
const struct secret_scan *jail_secret_scan(void);
struct secret_scan *jail_secret_slot(void);

bool seccomp_probe(void);
int seccomp_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

#endif
