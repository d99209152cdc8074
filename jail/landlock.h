/* Jail layer: Landlock, the zygote's domain and each session's (landlock.c). */
#ifndef JAIL_LANDLOCK_H
#define JAIL_LANDLOCK_H

#include <stdbool.h>

#include "layer.h"

/* The running kernel's Landlock ABI (as lowered by the test hook), 0 when
 * Landlock is unavailable. */
int landlock_abi(void);
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

#endif
