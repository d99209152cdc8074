/* Jail layer 4, second half: the resource limits, soft = hard, so that
 * nothing the code runs can raise them again. */
#include "rlimits.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

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
