/* Jail layer 4: capabilities, securebits, no_new_privs; and the rlimits.
 *
 * Inside its user namespace the zygote holds every capability (over that
 * namespace only); it gives them all up here, in every set, so that user
 * code cannot mount, change ids, or undo the layers below.  no_new_privs
 * makes execve unable to grant anything (setuid bits, file capabilities) and
 * is required by Landlock and seccomp. */
#include "layer.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int capset_empty(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	return (int)syscall(SYS_capset, &h, d);
}

static bool caps_empty(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return false;
	return true;
}

int jail_caps_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	struct jail_layer *l = &r->layer[JL_CAPS];
	int dropped = 0;
	/* The bounding set limits what any later execve could gain. */
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			dropped++;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	/* Locked securebits: uid 0 (should it ever be reached) confers no
	 * capabilities, a uid change cannot keep them, no ambient raise.
	 * Needs CAP_SETPCAP: held inside the user namespace; without one an
	 * unprivileged process holds no capability to protect. */
	bool secbits = prctl(PR_SET_SECUREBITS,
			     SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED |
			     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
			     0, 0, 0) == 0;
	if (capset_empty() < 0)
		return err_sys(e, -errno, "jail: capset (drop all)");
	if (!caps_empty())
		return err_set(e, -EPERM, "jail: capabilities remain after capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		l->state = JS_FAILED;
		return err_sys(e, -errno, "jail: PR_SET_NO_NEW_PRIVS");
	}
	l->state = JS_APPLIED;
	snprintf(l->detail, sizeof l->detail,
		 "all capability sets empty (%d dropped from the bounding set), %s, no_new_privs",
		 dropped, secbits ? "securebits locked" : "securebits not settable (no capability held)");
	(void)c;
	return 0;
}

/* ---- rlimits ---- */

/* memory_mb becomes RLIMIT_DATA, not RLIMIT_AS: numpy/OpenBLAS, glibc's
 * per-thread malloc arenas (64 MiB reserved each) and thread stacks reserve
 * far more address space than they use, so an RLIMIT_AS of memory_mb breaks
 * imports and threads long before the memory is used; RLIMIT_DATA counts
 * the private writable mappings and brk, i.e. what can actually be
 * committed.  RLIMIT_AS stays as a backstop at 4x memory_mb + 4 GiB.
 * Both are per process: a session's forks each get the same allowance
 * (max_processes bounds their number). */
static void set1(int res, rlim_t v, int *n, int *failed)
{
	struct rlimit cur, lim = { v, v };
	if (getrlimit(res, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
		lim.rlim_cur = lim.rlim_max = cur.rlim_max; /* only ever lower */
	if (setrlimit(res, &lim) == 0)
		(*n)++;
	else
		(*failed)++;
}

int jail_rlimits_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	const struct policy_limits *L = &c->policy->limits;
	struct jail_layer *l = &r->layer[JL_RLIMITS];
	const rlim_t MiB = 1024 * 1024;
	int n = 0, failed = 0;
	long procs = L->max_processes * L->max_sessions + 16; /* + zygote, checkpoints */
	rlim_t data = (rlim_t)L->memory_mb * MiB;
	rlim_t as = data * 4 + 4096 * MiB;
	rlim_t fsize = (rlim_t)L->max_file_mb * MiB;

	/* RLIMIT_NPROC counts the uid's processes and threads in the user
	 * namespace: every session together (a fork bomb stops here). */
	set1(RLIMIT_NPROC, (rlim_t)procs, &n, &failed);
#ifdef __SANITIZE_ADDRESS__
	/* AddressSanitizer builds (tests only) reserve terabytes of shadow
	 * memory: no address-space or data limit there.  Release builds always
	 * have both. */
	(void)data;
	(void)as;
#else
	set1(RLIMIT_DATA, data, &n, &failed);
	set1(RLIMIT_AS, as, &n, &failed);
#endif
	set1(RLIMIT_FSIZE, fsize, &n, &failed);
	set1(RLIMIT_NOFILE, 1024, &n, &failed);
	set1(RLIMIT_CORE, 0, &n, &failed);        /* no core files with secrets */
	set1(RLIMIT_MEMLOCK, 64 * 1024, &n, &failed);
	set1(RLIMIT_MSGQUEUE, 0, &n, &failed);
	set1(RLIMIT_NICE, 0, &n, &failed);        /* cannot raise its priority */
	set1(RLIMIT_RTPRIO, 0, &n, &failed);
	set1(RLIMIT_RTTIME, 0, &n, &failed);
	/* The rest: hard lowered to soft, so nothing can be raised later. */
	static const int rest[] = { RLIMIT_STACK, RLIMIT_CPU, RLIMIT_SIGPENDING, RLIMIT_LOCKS };
	for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
		struct rlimit cur;
		if (getrlimit(rest[i], &cur) == 0) {
			cur.rlim_max = cur.rlim_cur;
			if (setrlimit(rest[i], &cur) == 0)
				n++;
			else
				failed++;
		}
	}
	if (failed) {
		l->state = JS_FAILED;
		return err_set(e, -EPERM, "jail: %d rlimits could not be set", failed);
	}
	l->state = JS_APPLIED;
#ifdef __SANITIZE_ADDRESS__
	snprintf(l->detail, sizeof l->detail,
		 "soft = hard on %d: NPROC %ld, FSIZE %ld MiB, NOFILE 1024, CORE 0 (sanitizer build: no DATA/AS limit)",
		 n, procs, L->max_file_mb);
#else
	snprintf(l->detail, sizeof l->detail,
		 "soft = hard on %d: NPROC %ld, DATA %ld MiB, AS %ld MiB, FSIZE %ld MiB, NOFILE 1024, CORE 0",
		 n, procs, L->memory_mb, (long)(as / MiB), L->max_file_mb);
#endif
	return 0;
}
