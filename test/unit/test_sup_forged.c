/* The supervisor against forged processes (sup_harness.h's fake zygote
 * and sessions, told what to forge): one test per row of the trust table
 * (docs/SECURITY.md). */
#include "sup_harness.h"

static const struct zlink_limits quick = {
	.start_ms = 20000, .spawn_ms = 1500, .settle_ms = 1500, .exit_ms = 1500, .warm_ms = 20000,
	.out_msgs = 64, .out_bytes = 1u << 20,
};
static int saved_err = -1;
static char cap_path[64];

/* ------------------------------------------------------------ forged processes
 *
 * One test per row of the trust table (docs/SECURITY.md): the fake zygote or
 * session sends the message out of state, with a foreign pidfd, or with a
 * path that climbs out, and the server must never signal, delete, open or
 * count anything it did not create.  The canary is a process of the test's
 * own (not below the zygote), the victim a directory outside the project;
 * both are checked from outside after the server is gone. */


/* The canary runs, and nothing stopped it. */
static bool canary_untouched(void)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)the_canary);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *f = strrchr(buf, ')');
	return f && (f[2] == 'S' || f[2] == 'R');
}

static void ws_write(const char *name, const char *text)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", ws.abs, name);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* The server's log of one test (its warnings say why a zygote was ended). */
static void capture_begin(void)
{
	snprintf(cap_path, sizeof cap_path, "%s/log", tmpdir);
	int fd = open(cap_path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved_err = dup(2);
	dup2(fd, 2);
	close(fd);
	log_threshold = LOG_WARNING;
}

static const char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	log_threshold = LOG_ERROR;
	free(captured);
	captured = calloc(1, 1 << 16);
	int fd = open(cap_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && captured) {
		ssize_t n = read(fd, captured, (1 << 16) - 1);
		(void)n;
		close(fd);
	}
	return captured ? captured : "";
}

static int forged_up(void **state)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/forged", ws.abs);
	unlink(p);
	snprintf(p, sizeof p, "%s/now", ws.abs);
	unlink(p);
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)the_canary);
	ws_write("canary", pid);
	snprintf(p, sizeof p, "%s/../..%s", climb_base, victim);
	ws_write("climb", p);
	ws_write("forge", (const char *)*state);
	struct sup_config cfg = { .loop = loop, .policy = pol, .ws = &ws, .self_exe = self, .zlink = &quick, .restart_ms = 1 };
	struct err e = { 0 };
	hold(HOLD_RESUME, false);
	hold(HOLD_HELLO, false);
	capture_begin();
	sup = sup_new(&cfg);
	assert_non_null(sup);
	assert_int_equal(sup_start(sup, &e), 0);
	return 0;
}

static int forged_down(void **state)
{
	sup_free(sup);
	sup = NULL;
	/* Every event about a process was one its life table takes. */
	assert_int_equal(sup_life_refused(), 0);
	/* After every event, each session waiting on its process had a deadline. */
	assert_int_equal(deadlines_missing, 0);
	capture_end();
	ws_write("forge", "");
	/* Checked once the server is gone: whatever it removed or signalled
	 * at its end is done. */
	char p[4200];
	snprintf(p, sizeof p, "%s/keep", victim);
	assert_int_equal(access(p, F_OK), 0);
	assert_true(canary_untouched());
	return 0;
}

/* The zygote lies while the first call's process is being spawned: the
 * zygote is ended (the log says why), and the call runs in the next one
 * with a note that says so. */
static void forged_at_spawn(void **state, const char *why)
{
	struct trun *a = submit("inc", 30000.0);
	wait_done(a);
	const char *log = capture_end();
	assert_true(canary_untouched());
	if (!strstr(log, "the zygote broke its protocol with the server") || !strstr(log, why))
		fail_msg("no \"%s\" in the log: %s", why, log);
	if (!a->run.note || !strstr(a->run.note, "broke its protocol"))
		fail_msg("the call's note: %s", a->run.note ? a->run.note : "none");
	capture_begin();
	trun_free(a);
	/* The next zygote answers truly. */
	struct trun *b = run_ok("inc");
	assert_true(b->x >= 1);
	trun_free(b);
}

static void test_spawned_unknown(void **state)
{
	forged_at_spawn(state, "a spawn report for session process 9999, which the server never asked for");
}

static void test_spawned_foreign(void **state)
{
	forged_at_spawn(state, "whose parent is");
}

static void test_spawned_old(void **state)
{
	forged_at_spawn(state, "which started before the request");
}

static void test_spawned_claim(void **state)
{
	forged_at_spawn(state, "the message says");
}

static void test_spawned_pipe(void **state)
{
	forged_at_spawn(state, "the descriptor is no pidfd");
}

static void test_ready_again(void **state)
{
	forged_at_spawn(state, "W_READY (type 21) where the server expected none");
}

static void test_jail_again(void **state)
{
	char why[64];
	snprintf(why, sizeof why, "W_JAIL (type %d) where the server expected none", W_JAIL);
	forged_at_spawn(state, why);
}

/* The zygote's first message carries its own pidfd, which the server pins
 * it by: one naming another process (here the canary, a process of the
 * host), a descriptor that is no pidfd, or none, and that zygote is ended
 * before anything runs in it; the next one serves the call. */
static void forged_at_jail(const char *why)
{
	struct trun *a = run_ok("inc");
	trun_free(a);
	const char *log = capture_end();
	assert_true(canary_untouched());
	if (!strstr(log, "the zygote broke its protocol with the server") || !strstr(log, why))
		fail_msg("no \"%s\" in the log: %s", why, log);
	capture_begin();
}

static void test_jail_no_pidfd(void **state)
{
	forged_at_jail("its jail report came without the pidfd of its process");
}

static void test_jail_foreign_pidfd(void **state)
{
	char why[96];
	snprintf(why, sizeof why, "its jail report came with the pidfd of process %d, not of its own", (int)the_canary);
	forged_at_jail(why);
}

static void test_jail_pipe(void **state)
{
	forged_at_jail("the descriptor is no pidfd");
}

static void test_settled_unasked(void **state)
{
	forged_at_spawn(state, "W_SETTLED (type 34) where the server expected none");
}

static void test_warmed_unasked(void **state)
{
	forged_at_spawn(state, "W_WARMED (type 37) where the server expected none");
}

static void test_oversized(void **state)
{
	forged_at_spawn(state, "a W_EXITED of 1048576 bytes, over its size");
}

static void test_garbage(void **state)
{
	forged_at_spawn(state, "a W_EXITED whose body is not a JSON object");
}

static void test_silent_spawn(void **state)
{
	forged_at_spawn(state, "no answer to the spawn of session process");
}

static void test_deaf(void **state)
{
	forged_at_spawn(state, "it does not read what the server sends");
}

/* A session that dies and whose exit the zygote never reports: the call is
 * answered anyway, once the exit report's timer runs out. */
static void test_no_exit_report(void **state)
{
	/* With a checkpoint holding its socket, the session's end shows only
	 * in the zygote's report: the call runs out its time, the server kills
	 * the process, and the report of that is what never comes. */
	trun_free(run_ok("inc"));
	spin(300);
	struct trun *a = submit("crash", 1000.0);
	wait_done(a);
	const char *log = capture_end();
	if (!strstr(log, "it did not report the exit of pid"))
		fail_msg("log: %s", log);
	assert_int_not_equal(a->run.status, CALL_OK);
	capture_begin();
	trun_free(a);
	trun_free(run_ok("inc"));
}

/* Without checkpoints nothing else holds a session's socket: a session
 * that dies by itself shows as the end of its stream as well as in the
 * zygote's report, in either order.  The server read that end again after
 * the report (its death reads what the process sent before dying) and
 * killed the reaped process once more, which asked for an exit report
 * that could never come: exit_ms later the zygote was taken to have
 * broken its protocol, and every session's state was lost (seen in the
 * soak, where checkpoints are killed; every crash with `checkpoint:
 * false`). */
static void test_crash_without_checkpoint(void **state)
{
	pol->limits.checkpoint = false;
	struct trun *a = submit("crash", 5000.0);
	wait_done(a);
	assert_int_not_equal(a->run.status, CALL_OK);
	trun_free(a);
	struct trun *b = run_ok("inc");
	spin(quick.exit_ms + 1000.0); /* the exit report's timer has run out */
	struct trun *c = run_ok("inc");
	pol->limits.checkpoint = true;
	const char *log = capture_end();
	if (strstr(log, "did not report the exit") || strstr(log, "zygote ended"))
		fail_msg("log: %s", log);
	assert_int_equal(b->x, 1);
	assert_int_equal(c->x, 2); /* the same process: nothing was lost */
	assert_int_equal(c->pid, b->pid);
	capture_begin();
	trun_free(b);
	trun_free(c);
}

/* An exit report for a session that lives: nothing changes (the same
 * process keeps its state; no checkpoint is resumed in its place). */
static void test_exited_live(void **state)
{
	struct trun *a = run_ok("inc");
	hold("now", true);
	spin(400);
	struct trun *b = run_ok("inc");
	assert_int_equal(b->x, 2);
	assert_int_equal(b->pid, a->pid);
	assert_false(b->resumed);
	const char *log = capture_end();
	capture_begin();
	assert_null(strstr(log, "broke its protocol"));
	trun_free(a);
	trun_free(b);
}

/* The session sends a checkpoint that is not the one the server asked for:
 * ended as a crash, and the next reply says so; the pidfd's process is
 * never stopped or counted as the checkpoint. */
static void forged_checkpoint(void **state, const char *why)
{
	struct trun *a = run_ok("inc");
	spin(300); /* the checkpoint after the reply */
	struct trun *b = run_ok("inc");
	const char *log = capture_end();
	if (!b->run.note || !strstr(b->run.note, why))
		fail_msg("no \"%s\" in the note: %s (log: %s)", why, b->run.note ? b->run.note : "none", log);
	assert_int_equal(b->x, 1); /* a new process: the state was lost */
	assert_true(canary_untouched());
	capture_begin();
	trun_free(a);
	trun_free(b);
}

static void test_ckpt_foreign(void **state)
{
	forged_checkpoint(state, "a checkpoint that is not a new child of the session (the pidfd names process");
}

static void test_ckpt_old(void **state)
{
	forged_checkpoint(state, "which started before the request");
}

static void test_ckpt_claim(void **state)
{
	forged_checkpoint(state, "the message says");
}

static void test_ckpt_notpipe(void **state)
{
	forged_checkpoint(state, "whose second descriptor is not a pipe's read end");
}

/* ---- saved sessions on, for the saver's row ----
 * The key lives outside the project (the server refuses one inside it), in
 * a private directory of the test's own; the other rows run with saving
 * off and see none of this. */
static char state_home[] = "/tmp/psm-sup-state-XXXXXX";

static int forged_persist_up(void **state)
{
	assert_non_null(mkdtemp(state_home));
	assert_int_equal(setenv("XDG_STATE_HOME", state_home, 1), 0);
	pol->limits.persist = true;
	return forged_up(state);
}

static int forged_persist_down(void **state)
{
	int r = forged_down(state);
	pol->limits.persist = false;
	unsetenv("XDG_STATE_HOME");
	tmp_tree_remove(state_home);
	char p[4200];
	snprintf(p, sizeof p, "%s/.sessions", ws.abs);
	tmp_tree_remove(p);
	snprintf(p, sizeof p, "%s/savers", ws.abs);
	unlink(p);
	return r;
}

static bool snap_exists(const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/.sessions/default/%s", ws.abs, name);
	return access(p, F_OK) == 0;
}

static int count_lines(const char *text, const char *line)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, line)); p += strlen(line))
		n++;
	return n;
}

/* A session hands a saver's pipe, with a plausible save stream in it, with
 * every checkpoint, also those the server took without asking for a saver
 * (W_TAKE_CHECKPOINT {}): the server closes those unread (the session sees
 * its pipe broken before its next cell) and writes nothing to the
 * session's snapshot; the one it asks for (at exit, {"save": true}) it
 * reads and saves.
 * Attack: a session that has the server copy, hash and write its whole
 * state after every call, the CPU that saving only at rest spares. */
static void test_ckpt_saver_unasked(void **state)
{
	/* A checkpoint after every call (cheap cells are only logged
	 * otherwise, replay.c): three pipes to judge. */
	setenv("PSM_TEST_REPLAY_MS", "0", 1);
	const char *log = capture_end();
	if (strstr(log, "sessions will not be saved"))
		fail_msg("saving is off in this test: %s", log);
	capture_begin();
	for (int i = 0; i < 3; i++)
		trun_free(run_ok("inc"));
	spin(300); /* the last call's checkpoint */
	log = capture_end(); /* what fails below is said on stderr */
	char seen[4096];
	read_ws_file("savers", seen, sizeof seen);
	/* Two pipes judged at the next cell, nothing written meanwhile. */
	if (count_lines(seen, "unasked: closed unread\n") != 2 || strstr(seen, "unasked: still held") || strstr(seen, "asked: sent"))
		fail_msg("what the session saw of its unasked pipes: %s", seen);
	assert_false(snap_exists("state.snap"));
	assert_false(snap_exists(".state.tmp"));
	/* At exit the server asks for the saver: that pipe is read. */
	capture_begin();
	sup_shutdown(sup);
	for (int i = 0; i < 200 && !snap_exists("state.snap"); i++)
		spin(50);
	read_ws_file("savers", seen, sizeof seen);
	if (count_lines(seen, "unasked: closed unread\n") != 3 || strstr(seen, "unasked: still held") || count_lines(seen, "asked: sent\n") != 1)
		fail_msg("what the session saw of its pipes: %s", seen);
	assert_true(snap_exists("state.snap"));
	log = capture_end();
	if (strstr(log, "not saved") || strstr(log, "broke its protocol"))
		fail_msg("log: %s", log);
	capture_begin();
	unsetenv("PSM_TEST_REPLAY_MS");
}

#define FORGED(fn, name) cmocka_unit_test_prestate_setup_teardown(fn, forged_up, forged_down, (void *)name)

int main(int argc, char **argv)
{
	sup_fake_main(argc, argv);
	log_threshold = LOG_ERROR;
	const struct CMUnitTest tests[] = {
		FORGED(test_spawned_unknown, "spawned-unknown"),
		FORGED(test_spawned_foreign, "spawned-foreign"),
		FORGED(test_spawned_old, "spawned-old"),
		FORGED(test_spawned_claim, "spawned-claim"),
		FORGED(test_spawned_pipe, "spawned-pipe"),
		FORGED(test_ready_again, "ready-again"),
		FORGED(test_jail_again, "jail-again"),
		FORGED(test_jail_no_pidfd, "jail-no-pidfd"),
		FORGED(test_jail_foreign_pidfd, "jail-foreign-pidfd"),
		FORGED(test_jail_pipe, "jail-pipe"),
		FORGED(test_settled_unasked, "settled-unasked"),
		FORGED(test_warmed_unasked, "warmed-unasked"),
		FORGED(test_oversized, "oversized"),
		FORGED(test_garbage, "garbage"),
		FORGED(test_silent_spawn, "silent-spawn"),
		FORGED(test_deaf, "deaf"),
		FORGED(test_no_exit_report, "no-exit-report"),
		FORGED(test_crash_without_checkpoint, "honest"),
		FORGED(test_exited_live, "exited-live"),
		FORGED(test_ckpt_foreign, "ckpt-foreign"),
		FORGED(test_ckpt_old, "ckpt-old"),
		FORGED(test_ckpt_claim, "ckpt-claim"),
		FORGED(test_ckpt_notpipe, "ckpt-notpipe"),
		cmocka_unit_test_prestate_setup_teardown(test_ckpt_saver_unasked, forged_persist_up, forged_persist_down,
							 (void *)"ckpt-saver"),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
