/* The watchdog: "is this call over a limit?"  Memory, processes, CPU
 * while a checkpoint is taken, the workspace's disk use: measured by the
 * kernel's counters, never by what the session says. */
#include "private.h"

#include "../interp/procs.h"

#include <time.h>

/* The jail's scratch is new: nothing in it counted yet. */
void scratch_none(struct sup *sup)
{
	sup->scratch_bytes = 0;
}

void workspace_over(void *arg, unsigned long long bytes, const char *unseen)
{
	struct session *s = arg;
	over_limit_stop(s, bytes, wswatch_scratch_bytes(s->watch), unseen);
}

/* The memory and process watchdog, while the session's code may run.  It
 * reads the kernel's counters of every process below the session (the
 * frozen checkpoint left out): per-process rlimits cannot see shared
 * memory, memfds, tmpfs files or how many processes share the work.
 * Attack: 8 memfds of 250 MB mapped shared under a 256 MB limit, 6 GB of
 * MAP_SHARED|MAP_ANONYMOUS, six forked children of 500 MB each. */
/* A limit's verdict on the current call: nothing more of the session is
 * read and the call's end (collecting what it made, thumbnails, the
 * freeze) stops where it is; the process's death, which the kill brings,
 * finishes the call, rolled back.  Without this, a verdict that came after
 * the call's own result, while the server was collecting its files, let
 * that end go on: the call was finished before the death, with its state
 * "kept" (or no status at all), whatever the limit. */
static void verdict_stops(struct sup *sup, struct session *s)
{
	set_expect(sup, s, P_NONE);
	loop_unwatch(sup->cfg.loop, s->ctrl);
}

/* Taking a checkpoint (or a copy) is a fork: milliseconds of CPU even for
 * gigabytes (page tables), no user code but at-fork hooks.  True when the
 * session used more, and was ended. */
static bool checkpoint_cpu_over(struct session *s)
{
	if (s->phase != P_CHECKPOINTING && s->phase != P_FORKING)
		return false;
	long cpu = watch_cpu_ms(s->hpid);
	if (cpu < 0 || s->thaw_cpu0 < 0 || cpu - s->thaw_cpu0 <= CHECKPOINT_CPU_MS)
		return false;
	log_warn("session %s: %ld ms of CPU while taking its checkpoint: ended", s->name, cpu - s->thaw_cpu0);
	snprintf(s->broke, sizeof s->broke, "it used %ld ms of CPU while taking its checkpoint", cpu - s->thaw_cpu0);
	kill_session(s);
	return true;
}

/* What the session's processes use together, as the kernel counts it: by
 * each process's resident pages, or (pss) by proportional shares with the
 * checkpoint's share added (watch.h).  lone: nothing is below the session
 * (watch_final's quiet). */
static int measure(struct sup *sup, struct session *s, struct footprint *u, bool pss, bool lone)
{
	/* The jail's own procfs lists its processes only (cheap); the host's
	 * lists every process of the machine. */
	/* The checkpoint a new one replaced is killed, and counted no more
	 * while it exits: a session of 800 MB under memory_mb 1024 was ended
	 * as the old copy and the session summed to 1.6 GB. */
	pid_t dying_h, dying_ns;
	dying_pids(s, &dying_h, &dying_ns);
	int (*look)(const char *, pid_t, pid_t, pid_t, pid_t, bool, struct footprint *) =
		pss ? watch_footprint_pss : watch_footprint;
	int wr = sup->proc_jail ? look(sup->proc, sup->zhpid, s->pid, s->ckpt_pid, dying_ns, lone, u)
				: look("/proc", sup->zhpid, s->hpid, s->ckpt_hpid, dying_h, lone, u);
	/* Without namespaces the private temp directory is no tmpfs of the
	 * jail's that watch_footprint could count: where it lies on the
	 * host's tmpfs, its size is memory too (as /tmp is with namespaces):
	 * while the call runs, at the workspace watch's last walk; once the
	 * walk after the call is in, by that walk, so that the final count
	 * (watch_final, after it) judges what the call leaves there.
	 * Attack: 400 MB written there under memory_mb 128 took host Shmem
	 * from 9 to 419 MB until the server ended.  And: 144 MB left there by
	 * a call the watchdog stopped; the next call, shorter than the
	 * watch's first walk, ended ok while the host held it. */
	if (s->cur && s->cur->collected)
		sup->scratch_bytes = s->cur->scratch_after;
	else if (s->watch)
		sup->scratch_bytes = wswatch_scratch_bytes(s->watch);
	if (wr == 0 && sup->scratch_tmpfs) {
		u->tmpfs += sup->scratch_bytes;
		u->total += sup->scratch_bytes;
	}
	return wr;
}

/* The memory a session holds as the host holds it: a page its processes
 * share (a forked worker's copy-on-write pages, the checkpoint's copy of
 * the state) once, and the checkpoint's own pages (the old version of what
 * the session changed since the copy was taken: what a rollback costs)
 * too.  Returns u (the cheap look, by each process's resident pages) while
 * that look cannot be over the limit even with every page of the
 * checkpoint counted in full, or where proportional shares cannot be read;
 * else *v, a count by proportional shares (watch_footprint_pss).
 * Attack on the other side: Pool(2) over an 800 MB frame was stopped as
 * "memory: 2468 MB" (each worker's shared pages counted in full); and two
 * sessions rewriting a 240 MB array in place under memory_mb 300 took
 * 1,002 MB of host memory (their checkpoints' old pages counted nowhere).
 * Cost: that count reads every page table of the session's processes
 * (smaps_rollup: 1.3 ms for 256 MB, 7 ms for 1 GB, 16 ms for 2 GB of 4 kB
 * pages, on this 2-core machine under load; status is 0.01 ms), so it is
 * taken at most once per ten times its own cost (a tenth of one CPU at
 * most); between two counts, the last one plus what the resident sum grew
 * by stands for it while that is under the limit (over it, a count is
 * taken sooner: below). */
static const struct footprint *counted(struct sup *sup, struct session *s, const struct footprint *u, uint64_t limit,
				       bool lone, struct footprint *v)
{
	if (sup->pss_off || u->total + u->copy_rss <= limit) {
		s->pss_next = 0;
		return u;
	}
	double now = mono_ms();
	if (s->pss_next > 0 && now < s->pss_next) {
		*v = *u;
		v->pss = true;
		v->copy = s->pss_copy;
		v->total = s->pss_total + (u->total > s->pss_base ? u->total - s->pss_base : 0);
		/* Over the limit, the estimate is the verdict, unless tasks
		 * were added since the last count: a new worker's resident sum
		 * counts the pages it shares with its parent in full (Pool(2)
		 * over a 300 MB frame under memory_mb 700 was stopped as
		 * 1,064 MB in the milliseconds after its fork, though the host
		 * held 356 MB), so a count decides, at once (waiting for one
		 * let six forked children allocating 160 MB each pass
		 * memory_mb 256 by 200 MB and more).  Code cannot make that a
		 * count per tick: a count re-bases the tasks too, so only a net
		 * new task brings the next one early, and max_processes bounds
		 * those. */
		if (v->total <= limit || u->tasks <= s->pss_tasks)
			return v;
	}
	int r = measure(sup, s, v, true, lone);
	if (r == -EACCES || r == -ENOTSUP) {
		sup->pss_off = true;
		log_info("memory: the sessions' proportional shares cannot be read here (%s): counted by resident pages",
			 r == -EACCES ? "no CAP_SYS_PTRACE over them" : "a kernel before 5.9");
		return u;
	}
	if (r < 0)
		return u;
	double cost = mono_ms() - now;
	s->pss_tasks = u->tasks;
	s->pss_next = now + (cost * 10 > WATCH_MS ? cost * 10 : WATCH_MS);
	s->pss_total = v->total;
	s->pss_copy = v->copy;
	s->pss_base = u->total;
	return v;
}

/* Where the kernel refuses this server the proportional shares (a root
 * server without CAP_SYS_PTRACE, in a container's default rules, whose
 * sessions run as nobody), the checkpoint's own pages (the old version of
 * what the call rewrote) cannot be told from the pages it shares with the
 * session.  When the session with every page of its copy could be over
 * memory_mb, the copy is given up for the rest of the call: the limit
 * holds, and the call runs on without a rollback, said in its reply (and
 * in the reply of a call that then fails, which has no state to go back
 * to).  A new copy is taken when the call is over (replay.c: no base).
 * Attack: a 400 MB array rewritten in place under memory_mb 700 ended ok
 * while the host held both versions, 840 MB (now 463 MB). */
static void copy_uncounted(struct sup *sup, struct session *s, const struct footprint *u, uint64_t limit)
{
	struct run *c = s->cur;
	if (!sup->pss_off || s->phase != P_RUNNING || s->ckpt_pidfd < 0 || !c || u->total + u->copy_rss <= limit)
		return;
	const char *who = geteuid() == 0 ? "a root server without CAP_SYS_PTRACE" : "a server to which the kernel refuses its sessions' memory maps";
	char note[480];
	snprintf(note, sizeof note,
		 "rollback was not available for the rest of this call: the server cannot count the memory of the copy kept "
		 "to roll back to here (%s), and the session (%.0f MB) with that copy (up to %.0f MB) could have been over "
		 "memory_mb (%ld MB), so the copy was given up; a new one is taken after the call (give the server "
		 "CAP_SYS_PTRACE, or run it as another user, to keep rollback for large states)",
		 who, u->total / 1048576.0, u->copy_rss / 1048576.0, sup->cfg.policy->limits.memory_mb);
	log_info("session %s: its checkpoint's memory cannot be counted and could be over memory_mb: given up for the call",
		 s->name);
	add_note(c, note);
	copy_given_up(s, "the server cannot count its memory here, and with it the session could have been over memory_mb");
	drop_checkpoint(s);
	/* Its saver, if one is writing, dies with it (PDEATHSIG). */
	if (s->save)
		quiet_abandon_save(sup, s);
}

/* The verdict of a limit on the current call (status, exit code, note),
 * or for the next reply when no call runs; then the session is ended. */
static void over_limit_end(struct sup *sup, struct session *s, enum verdict_claim k, const char *note, const char *broke)
{
	struct run *c = s->cur;
	if (c && run_verdict(c, k, NULL)) {
		verdict_stops(sup, s);
		if (!c->note)
			set_note(c, note); /* it had none */
	}
	if (!c)
		snprintf(s->broke, sizeof s->broke, "%s", broke);
	/* Its children first, then itself: the children of a session killed
	 * alone are orphaned to the zygote and run on until the sweep that
	 * answers its exit report ends them, a round trip and a scan later.
	 * Attack: six forked children filling 160 MB each under memory_mb 256
	 * held 110 MB more in that time than when the watchdog decided (369
	 * against 259 MB).  Its checkpoint and a copy still exiting stay.
	 * Only while code runs: a copy being forked is the zygote's and the
	 * rollback's business (checkpoint.c). */
	if (s->phase == P_RUNNING && s->hpid > 0 && s->pidfd >= 0) {
		pid_t keep[2], dying_h, dying_ns;
		size_t nk = 0;
		dying_pids(s, &dying_h, &dying_ns);
		if (s->ckpt_hpid > 0)
			keep[nk++] = s->ckpt_hpid;
		if (dying_h > 0)
			keep[nk++] = dying_h;
		procs_signal_below(s->hpid, keep, nk, SIGKILL);
	}
	kill_session(s);
}

/* True when the footprint is over memory_mb or max_processes, and the
 * session was ended for it. */
static bool footprint_over(struct sup *sup, struct session *s, const struct footprint *u, uint64_t limit, long max_tasks)
{
	const struct policy_limits *L = &sup->cfg.policy->limits;
	char note[640], broke[200];
	if (u->total > limit) {
		log_info("session %s: %.0f MB in use (anon %.0f, shared %.0f, memfd %.0f, tmpfs %.0f, checkpoint %.0f, %s) "
			 "over memory_mb %ld: ended",
			 s->name, u->total / 1048576.0, u->anon / 1048576.0, u->shmem / 1048576.0, u->memfd / 1048576.0,
			 u->tmpfs / 1048576.0, u->copy / 1048576.0, u->pss ? "proportional shares" : "resident pages",
			 L->memory_mb);
		char ckpt[120] = "", files[200] = "", copy[340] = "";
		if (u->pss && u->copy >= 1048576)
			snprintf(ckpt, sizeof ckpt, "%.0f MB of it the checkpoint's copy of what the session changed since it was taken",
				 u->copy / 1048576.0);
		/* A rollback leaves files: without this the next call is
		 * stopped the same way, and nothing says why. */
		if (u->tmpfs >= 1048576)
			snprintf(files, sizeof files,
				 "%.0f MB %sfiles in /tmp, /dev/shm or TMPDIR, which a rollback does not remove: delete those "
				 "you do not need in the next cell",
				 u->tmpfs / 1048576.0, ckpt[0] ? "" : "of it ");
		if (ckpt[0] || files[0])
			snprintf(copy, sizeof copy, " (%s%s%s)", ckpt, ckpt[0] && files[0] ? "; " : "", files);
		snprintf(note, sizeof note,
			 "the session's processes used %.0f MB together%s, over memory_mb (%ld MB): "
			 "shared memory, memfds, files in /tmp and /dev/shm, child processes and the copy kept for a rollback all count",
			 u->total / 1048576.0, copy, L->memory_mb);
		snprintf(broke, sizeof broke, "its processes used %.0f MB while taking its checkpoint, over memory_mb",
			 u->total / 1048576.0);
		over_limit_end(sup, s, V_MEMORY, note, broke);
		return true;
	}
	if (u->tasks > max_tasks) {
		log_info("session %s: %ld processes and threads, over max_processes %ld: ended", s->name, u->tasks, L->max_processes);
		snprintf(note, sizeof note,
			 "the session ran %ld processes and threads at once, over max_processes (%ld), so it was ended",
			 u->tasks, L->max_processes);
		snprintf(broke, sizeof broke, "%ld processes and threads while taking its checkpoint, over max_processes",
			 u->tasks);
		/* Ended by SIGKILL, as its death will say: decided now, so
		 * nothing the process sends meanwhile stands (a crash,
		 * verdict.c). */
		over_limit_end(sup, s, V_PROCESSES, note, broke);
		return true;
	}
	return false;
}

static bool watch_look(struct sup *sup, struct session *s, double *next, bool lone);

static void watch_fired(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	look_fired(s, LOOK_WATCH);
	if (!proc_alive(s) || s->phase == P_IDLE || s->phase == P_NONE)
		return;
	/* A new process is measured once the zygote's report of it is in.
	 * Attack: the first look came before that report (a spawn slower than
	 * 20 ms, on a loaded machine) and the watchdog stopped for the whole
	 * call: a fresh session filled 2.2 GB of memfds under memory_mb 256. */
	if (s->hpid <= 0) {
		look_arm(sup, s, LOOK_WATCH, WATCH_MS, watch_fired);
		return;
	}
	double next = WATCH_MS;
	if (watch_look(sup, s, &next, false))
		return;
	look_arm(sup, s, LOOK_WATCH, next, watch_fired);
}

/* One look of the watchdog; true when the session was ended for a limit.
 * *next: when to look again.  lone: as measure's. */
static bool watch_look(struct sup *sup, struct session *s, double *next, bool lone)
{
	const struct policy_limits *L = &sup->cfg.policy->limits;
	if (checkpoint_cpu_over(s))
		return true;
	struct footprint u, v;
	int wr = measure(sup, s, &u, false, lone);
	if (wr == 0) {
		uint64_t limit = (uint64_t)L->memory_mb << 20;
		long max_tasks = L->max_processes;
		if (s->phase == P_CHECKPOINTING || s->phase == P_FORKING) {
			/* The new checkpoint is a fork, counted until the server
			 * has it, and so is its saver (saved sessions), a fork of
			 * it.  Each shows the session's shared pages in its RSS:
			 * the sum may count the session three times here (a
			 * session of 128 MB under memory_mb 256 showed 561 MB and
			 * was ended with a limit of twice), and those are more
			 * tasks. */
			limit *= 3;
			max_tasks += 3;
		}
		const struct footprint *judged = counted(sup, s, &u, limit, lone, &v);
		if (footprint_over(sup, s, judged, limit, max_tasks))
			return true;
		s->look_gen = s->proc_gen;
		s->look_at = mono_ms();
		s->look_files = u.memfd + u.tmpfs;
		if (judged == &u)
			copy_uncounted(sup, s, &u, limit);
		/* Far below the limits, the looks are further apart (each reads
		 * every process's status and descriptors: 0.4 ms of the server's
		 * CPU, 21 ms a second at 20 ms apart, a fifth of a 2-core machine
		 * with 50 agents), never so far apart that memory filled at the
		 * machine's fastest passes the limit by more than its tolerance
		 * before the next look. */
		if (s->phase != P_CHECKPOINTING && s->phase != P_FORKING)
			*next = watch_next_ms(judged, limit, max_tasks);
	}
	return false;
}

static bool watch_final(struct sup *sup, struct session *s, bool lone)
{
	if (!proc_alive(s) || s->hpid <= 0 || !s->cur)
		return false;
	/* The count by proportional shares is due now, whenever the last was:
	 * between two counts the pages the call rewrote (whose old version
	 * the checkpoint keeps) do not show.  Attack: a 400 MB array
	 * rewritten in place in 370 ms under memory_mb 700 ended "ok" between
	 * two counts, its checkpoint holding 400 MB more until the next one
	 * replaced it. */
	s->pss_next = 0;
	double next;
	return watch_look(sup, s, &next, lone);
}

/* The count after a call, by the clock: whether the last look at this
 * process was recent enough to bound what it can hold now.  Only where the
 * bound's parts are all known: no scratch directory on the host's tmpfs
 * (its size is the walk's, taken at another time than the look). */
static bool final_may_wait(struct sup *sup, struct session *s)
{
	if (s->look_at <= 0 || s->look_gen != s->proc_gen || sup->scratch_tmpfs || !s->cur)
		return false;
	double since = mono_ms() - s->look_at;
	return since >= 0 && since <= WATCH_INTERVAL_MS;
}

/* Quiet, the session is one stopped process: its threads and resident
 * pages, and its checkpoint's, are two reads of status; what they cannot
 * say (its memfds, the jail's /tmp and /dev/shm) is bounded by the last
 * look plus what every CPU of the machine can fill since, at twice the
 * fastest fill measured (watch.h).  A descriptor received meanwhile adds
 * nothing the bound misses: memfds cannot be made (zstart.c), a file of
 * the jail's tmpfs is in its size wherever its descriptors are, and what
 * the session maps of it is in its resident pages, read now.  While that
 * bound, with every page of the checkpoint counted in full, is within
 * memory_mb, the look could not find the session over it: it is not taken
 * (its reads of the session's descriptors and of the two tmpfs cost a warm
 * call back to back 30 to 40 us of the server's CPU).  Anything else takes
 * it: a last look more than WATCH_INTERVAL_MS ago, a bound over a limit.
 * Attacks tried by memory_steps.test.mjs: calls back to back each filling
 * part of memory_mb, so that only the sum is over (the bound grows with the
 * time since the look, which such a fill needs: the call that passes the
 * limit is stopped as before); threads started in a short call (counted
 * exactly here).  A child left running is no quiet: the full look
 * (hostile_memory.test.mjs's forked children).  And a process the last look
 * was not of (a rollback's copy, a new process: proc_gen) has no bound: its
 * descriptors were never read. */
static bool final_bounded(struct sup *sup, struct session *s)
{
	const struct policy_limits *L = &sup->cfg.policy->limits;
	if (!final_may_wait(sup, s) || s->phase != P_FREEZING)
		return false;
	double since = mono_ms() - s->look_at;
	struct footprint u;
	int r = sup->proc_jail ? watch_session_rss(sup->proc, s->pid, s->ckpt_pid, &u)
			       : watch_session_rss("/proc", s->hpid, s->ckpt_hpid, &u);
	if (r < 0)
		return false;
	double bound = (double)u.total + (double)u.copy_rss + (double)s->look_files + 2.0 * watch_fill_bytes(since);
	return bound <= (double)((uint64_t)L->memory_mb << 20) && u.tasks <= L->max_processes;
}

bool final_look(struct sup *sup, struct session *s, bool quiet)
{
	if (quiet && final_bounded(sup, s))
		return false;
	return watch_final(sup, s, quiet);
}

void stop_watch(struct sup *sup, struct session *s)
{
	look_cancel(sup, s, LOOK_WATCH);
}

void start_watch(struct sup *sup, struct session *s)
{
	/* A count by proportional shares is for the process it was taken of,
	 * in that phase: none stands for the next. */
	s->pss_next = 0;
	/* The first look soon: a call may start near the limit. */
	if (!look_armed(s, LOOK_WATCH))
		look_arm(sup, s, LOOK_WATCH, WATCH_NEAR_MS, watch_fired);
}
