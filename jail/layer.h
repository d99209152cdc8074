/* What every layer of the jail shares: the configuration it reads, the
 * report it fills, the test hook that switches layers off, and the
 * runtime paths the interpreter needs.  Each layer file (fds.c, uid.c,
 * ns.c, caps.c, rlimits.c, landlock.c, seccomp.c, secrets.c) has its own
 * header for its functions and includes this one; none includes jail.h:
 * the layers sit below jail.c, which orders them and judges the result.
 *
 * A layer's apply step fills its entry of the report and returns 0, or a
 * negative errno with e set when setting up failed outright (the caller
 * then exits: fail closed).  A layer the kernel lacks is not an error: its
 * state says so and jail_enter() decides whether the policy is still
 * enforceable. */
#ifndef JAIL_LAYER_H
#define JAIL_LAYER_H

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
	/* The namespace-free mode's private scratch directory (TMPDIR, HOME)
	 * on the host, which only the jail may write (jail.c: make_scratch).
	 * Empty in the namespace mode (/tmp is a private tmpfs there). */
	char scratch[256];
	/* System V shared memory is allowed: the jail has its own IPC
	 * namespace and a segment goes when its last process detaches
	 * (ns.c). */
	bool sysv_shm;
	/* A root server without a mount tree, the project root's: the
	 * sandbox's effective uid is 0 (no capability), its real uid 65534
	 * (uid.c). */
	bool euid0;
	/* Sessions stay dumpable (jail_config.stay_readable, granted: no
	 * mount tree, a server not run by root). */
	bool dumpable;
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
	/* memfd_create refused: the server cannot count every memfd (one
	 * sent over a socket and closed is in no process's descriptors), so
	 * none may exist.  The server sets it always. */
	bool no_memfd;
	/* The server counts its sessions by reading their smaps_rollup and
	 * /proc/PID/fd.  Without namespaces a server not run by root may read
	 * them only while they are dumpable (the same uid; no capability is
	 * needed then), so the jail keeps them so where that holds, each in a
	 * Landlock domain of its own (see jail_session_enter).  Where it does
	 * not hold (a mount tree after all), memfds are refused: the server
	 * asked for this because it could not read them otherwise. */
	bool stay_readable;
	/* The namespace-free mode's scratch directory, made by the server
	 * (jail_scratch_make), or NULL: the jail then makes its own. */
	const char *scratch;
	/* Where set, the jail opens a pidfd of the process it leaves (the one
	 * in the new pid namespace, when there is one) just before seccomp,
	 * which refuses pidfd_open, and stores it here, close-on-exec: the
	 * zygote sends it to the server with its first message. */
	int *self_pidfd;
};

/* The default read-only runtime paths for this machine's interpreter
 * (stdlib, dist-packages, shared libraries, fonts, /etc files it reads). */
const char *const *jail_default_runtime_paths(void);

/* PSM_JAIL_DISABLE=userns,landlock,...: a test hook that switches layers off
 * as if the kernel lacked them (landlock-abi-N: as if Landlock's ABI were N,
 * lower than the kernel's).  It can only remove layers, so it can only
 * make the report non-enforceable; it never widens access silently. */
bool jail_disabled(const char *layer);
/* Reads the knobs, PSM_JAIL_DISABLE and PSM_SECCOMP_PFC, once, before the
 * environment is replaced. */
void jail_knobs_read(void);
/* PSM_SECCOMP_PFC set: each seccomp filter is written on stderr as
 * libseccomp's pseudo filter code before it is loaded (a debugging aid;
 * it only prints, the filters are the same). */
bool jail_knob_pfc(void);

/* Whether memfd_create is refused: where the server cannot read the
 * sessions' descriptors (no_memfd), or where it can only because they stay
 * dumpable and the jail could not keep them so. */
static inline bool jail_memfd_refused(bool no_memfd, bool stay_readable, const struct jail_report *r)
{
	return no_memfd || (stay_readable && !r->dumpable);
}

#endif
