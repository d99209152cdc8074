/* The supervisor's state machine (the rooms of supervisor/private.h)
 * against the fake zygote and fake sessions of sup_harness.h: rollbacks,
 * resumes, replays, timeouts and cancels at each step of a call. */
#include "sup_harness.h"
#include <math.h>

/* A prepare that the test finishes when it chooses (a snapshot of a large
 * workspace, still running on a worker). */
static struct {
	struct run *r;
	void (*ready)(struct run *r, void *arg);
	void *arg;
} pending;

static void ev_prepare_later(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	pending.r = r;
	pending.ready = ready;
	pending.arg = arg;
}

static const struct run_events events_later = {
	.prepare = ev_prepare_later,
	.collect = ev_ready,
	.next_thumb = ev_no_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

/* A scan of what the run wrote that the test finishes when it chooses. */
static const struct run_events events_collect_later = {
	.prepare = ev_ready,
	.collect = ev_prepare_later,
	.next_thumb = ev_no_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

/* Two thumbnails to make after the cell, then none; what came back. */
static int thumbs_left, thumbs_got;

static bool ev_two_thumbs(struct run *r, char *rel, size_t size)
{
	if (thumbs_left <= 0)
		return false;
	thumbs_left--;
	snprintf(rel, size, "fig-%d.png", thumbs_left);
	return true;
}

static void ev_count_thumb(struct run *r, const unsigned char *data, size_t len)
{
	thumbs_got++;
}

static const struct run_events events_thumbs = {
	.prepare = ev_ready,
	.collect = ev_ready,
	.next_thumb = ev_two_thumbs,
	.thumb = ev_count_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

static int sup_up(void **state)
{
	struct sup_config cfg = { .loop = loop, .policy = pol, .ws = &ws, .self_exe = self };
	struct err e = { 0 };
	hold(HOLD_RESUME, false);
	hold(HOLD_HELLO, false);
	hold(HOLD_RECKPT, false);
	hold(HOLD_BUSY, false);
	hold(ZYGOTE_LINGER, false);
	hold(ZYGOTE_DEAF, false);
	sup = sup_new(&cfg);
	assert_non_null(sup);
	assert_int_equal(sup_start(sup, &e), 0);
	return 0;
}

static int sup_down(void **state)
{
	sup_free(sup);
	sup = NULL;
	/* Every event about a process was one its life table takes. */
	assert_int_equal(sup_life_refused(), 0);
	/* After every event, each session waiting on its process had a deadline. */
	assert_int_equal(deadlines_missing, 0);
	return 0;
}

/* A crash during a call: the state is the one before it (the checkpoint
 * resumed), and the next call runs in that resumed copy. */
static void test_roll_back(void **state)
{
	struct trun *a = run_ok("inc");
	assert_int_equal(a->x, 1);
	assert_true(a->run.new_session);
	assert_int_equal(a->run.state, STATE_KEPT);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	assert_int_equal(b->run.exit_code, 9); /* the process's own exit status */
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1); /* not 2: the crashed call's inc was dropped */
	assert_true(c->resumed);
	assert_int_not_equal(c->pid, a->pid);
	assert_int_equal(c->run.state, STATE_KEPT);
	assert_false(c->run.new_session);
	assert_int_equal(c->run.cell, 3); /* every cell sent counts, rolled back or not */
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* A process that dies right after its result: the zygote's report of the
 * exit and the result come in the same loop turn (or the report first, on
 * its own socket).  The result is read before the death is handled, and
 * the death still ends the call as a crash rolled back (a result does not
 * end a call; verdict.h), several times over so that both orders come. */
static void test_result_then_death(void **state)
{
	trun_free(run_ok("inc"));
	for (int i = 0; i < 5; i++) {
		struct trun *b = submit("inc result_exit", 30000.0);
		wait_done(b);
		assert_int_equal(b->run.status, CALL_CRASHED);
		assert_int_equal(b->run.state, STATE_ROLLED_BACK);
		assert_int_equal(b->run.exit_code, 5);
		assert_int_equal(b->n_done, 1);
		assert_int_equal(b->x, -1); /* its result no longer stands */
		trun_free(b);
		struct trun *c = run_ok("");
		assert_int_equal(c->x, 1); /* rolled back */
		assert_true(c->resumed);
		trun_free(c);
	}
}

/* A process that sends the checkpoint of the state its call kept and dies
 * at once (the call's reply is out already): its message and the zygote's
 * report of its exit race.  Either the checkpoint is taken in before the
 * death (its parent still alive to vouch for it) and the state after the
 * call resumes, or it is refused (its parent gone, the kernel cannot tell
 * it from a stranger's process) and the next reply says that call's
 * state was lost.  Never the state of before without a word. */
static void test_checkpoint_then_death(void **state)
{
	setenv("PSM_TEST_REPLAY_MS", "0", 1); /* a checkpoint after each call */
	trun_free(run_ok("inc"));
	for (int i = 0; i < 3; i++) {
		struct trun *b = submit("inc ckpt_exit", 30000.0);
		wait_done(b);
		assert_int_equal(b->run.status, CALL_OK);
		long said = b->x;
		trun_free(b);
		struct trun *c = run_ok("");
		assert_true(c->resumed);
		if (c->x != said && !(c->x == said - 1 && c->run.note && strstr(c->run.note, "what that call did to variables was lost")))
			fail_msg("x %ld after a call that said %ld, note: %s", c->x, said, c->run.note ? c->run.note : "none");
		trun_free(c);
	}
	unsetenv("PSM_TEST_REPLAY_MS");
}

/* A session that says a saved state is loaded in a call that carried none
 * (to restart its timeout): a protocol break, rolled back like a crash; the
 * timer it wanted moved never moves. */
static void test_restored_unasked(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("say_restored inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* The resumed copy takes its own checkpoint: a second crash rolls back to
 * the same state again, and the state goes on from there. */
static void test_resume_twice(void **state)
{
	trun_free(run_ok("inc"));
	for (int i = 0; i < 2; i++) {
		struct trun *b = submit("inc crash", 30000.0);
		wait_done(b);
		assert_int_equal(b->run.state, STATE_ROLLED_BACK);
		trun_free(b);
	}
	struct trun *c = run_ok("inc");
	assert_int_equal(c->x, 2);
	assert_true(c->resumed);
	trun_free(c);
}

/* The process died before it received the cell: the cell never ran, so
 * it is sent again to the resumed checkpoint, and answered from there as
 * if nothing had happened. */
static void test_requeue_unstarted(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("die_unstarted inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_OK);
	assert_int_equal(b->run.resends, 1);
	assert_int_equal(b->x, 2); /* ran once, on the state of after a */
	assert_true(b->resumed);
	assert_int_not_equal(b->pid, a->pid);
	assert_int_equal(b->run.state, STATE_KEPT);
	assert_null(b->run.note);
	trun_free(a);
	trun_free(b);
}

/* The decision after a call that kept its state: each fact that makes a
 * second run unsafe takes a checkpoint, and so do the log's bounds and the
 * budget; only a cheap, safe cell is logged. */
static void test_replay_decide(void **state)
{
	struct replay_facts f = { .has_base = true, .plain = true, .threads = 1, .code = "x = 1", .ms = 10, .budget_ms = 1000 };
	assert_int_equal(replay_decide(&f, NULL, 0), REPLAY_LOG);
	struct replay_facts g = f;
	g.has_base = false;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_NO_BASE);
	g = f;
	g.plain = false;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_KIND);
	g = f;
	g.wrote = true;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_WROTE);
	g = f;
	g.effect = "it started a process";
	char why[64];
	assert_int_equal(replay_decide(&g, why, sizeof why), REPLAY_FORK_EFFECT);
	assert_string_equal(why, "it started a process");
	g = f;
	g.threads = 2;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_THREADS);
	g.threads = 0; /* unknown: unsure */
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_THREADS);
	g = f;
	g.code = "t = time.time()";
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_CODE);
	g.code = "import mymod";
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.import_read = true;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_CODE);
	g = f;
	g.log_n = REPLAY_MAX_CELLS - 1;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.log_n = REPLAY_MAX_CELLS;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_FULL);
	g = f;
	g.log_code = REPLAY_MAX_CODE - 3;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_FULL);
	g = f;
	g.log_ms = 985;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.log_ms = 990;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_BUDGET);
	g = f;
	g.budget_ms = 0; /* PSM_TEST_REPLAY_MS=0: a checkpoint after every call */
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_BUDGET);
	setenv("PSM_TEST_REPLAY_MS", "250", 1);
	assert_true(replay_budget_ms(0) == 250.0);
	assert_true(replay_budget_ms(300) == 250.0); /* the knob, whatever a checkpoint costs */
	setenv("PSM_TEST_REPLAY_MS", "5000", 1); /* it only tightens */
	assert_true(replay_budget_ms(0) == REPLAY_BUDGET_MS);
	setenv("PSM_TEST_REPLAY_MS", "x", 1);
	assert_true(replay_budget_ms(0) == REPLAY_BUDGET_MS);
	unsetenv("PSM_TEST_REPLAY_MS");
	assert_true(replay_budget_ms(0) == REPLAY_BUDGET_MS);
}

/* The budget priced by what a checkpoint costs: a second for a cheap one,
 * thirty times a dear one's cost, never past REPLAY_BUDGET_MAX_MS, and the
 * floor for a cost that is not a number. */
static void test_replay_budget_priced(void **state)
{
	(void)state;
	unsetenv("PSM_TEST_REPLAY_MS");
	assert_true(replay_budget_ms(0) == REPLAY_BUDGET_MS);
	assert_true(replay_budget_ms(-5) == REPLAY_BUDGET_MS);
	assert_true(replay_budget_ms(10) == REPLAY_BUDGET_MS);     /* 300 ms: the floor */
	assert_true(replay_budget_ms(100) == 100 * REPLAY_FORK_SHARE); /* 3 s */
	assert_true(replay_budget_ms(250) == 250 * REPLAY_FORK_SHARE); /* 7.5 s */
	assert_true(replay_budget_ms(400) == REPLAY_BUDGET_MAX_MS);
	assert_true(replay_budget_ms(1e300) == REPLAY_BUDGET_MAX_MS);
	assert_true(replay_budget_ms(NAN) == REPLAY_BUDGET_MS);
	/* The decision reads the priced budget as any other. */
	struct replay_facts f = { .has_base = true, .plain = true, .threads = 1, .code = "x = 1", .ms = 300,
				  .log_ms = 2500, .budget_ms = replay_budget_ms(100) };
	assert_int_equal(replay_decide(&f, NULL, 0), REPLAY_LOG);
	f.budget_ms = replay_budget_ms(10);
	assert_int_equal(replay_decide(&f, NULL, 0), REPLAY_FORK_BUDGET);
}

/* What the code text names: the clock, entropy, the process, threads,
 * temporary files; random only without a seed. */
static void test_replay_code(void **state)
{
	static const char *const unsafe[] = {
		"import time\nt = time.time()", "from datetime import datetime\nd = datetime.now()", "datetime.date.today()",
		"datetime.datetime.utcnow()", "import random\nx = random.random()", "np.random.rand(3)",
		"rng = np.random.default_rng()", "os.urandom(8)", "import secrets", "uuid.uuid4()", "uuid.uuid1()",
		"t0 = perf_counter()", "os.getpid()", "import threading", "open('/tmp/x', 'w')", "tempfile.mkstemp()",
		"np.random.seed(0); g = np.random.default_rng()",
		/* what was read may have changed since */
		"df = pd.read_csv('workspace/data.csv')", "import mymodule", "from helpers import f",
		"text = open('notes.txt').read()", "a = np.load('a.npy')", "cfg = json.load(f)", "Path('x').read_text()",
		"files = os.listdir('workspace')", "os.path.exists('workspace/go')", "glob.glob('*.csv')",
		/* effects past the session's memory */
		"urlopen(Request(url, data=b'x'))", "requests.post(url)", "s.connect(('h', 1))", "subprocess.run(['sh'])",
		"os.system('ls')", "con = sqlite3.connect('t.db')", "con.execute('INSERT INTO t VALUES (1)')",
		"df.to_csv('workspace/.cache/log.csv', mode='a')", "df.to_parquet(p)", "f.write('x')", "w.writerow(r)",
		"p.write_text('x')", "np.save('a.npy', a)", "plt.savefig('a.png')", "model.save_weights(p)", "os.remove(p)",
		"os.rename(a, b)", "shutil.copy(a, b)", "Path(p).unlink()", "json.dump(d, f)", "import ctypes",
	};
	static const char *const safe[] = {
		"x = 1", "df.groupby('k').mean()", "rng = np.random.default_rng(42)\nx = rng.normal()",
		"np.random.seed(0)\nx = np.random.rand(3)", "model.fit(X, y, random_state=0) if False else None",
		"runtime = 3; timeout_s = 2", "r = random.Random(7).random()",
		"data = get()", "spread = df.max() - df.min()", "reader_count = 2", "already = True",
		"df = df.rename(columns={'a': 'b'})", "xs.remove(3)", "s = t.replace('a', 'b')", "a = df.to_numpy()",
		"d = pd.to_datetime(s)", "sys.stdout.write('x')", "os.write(1, b'x')", "saved = 3", "writer_count = 1",
		"c = df.copy()",
	};
	char why[64];
	for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++)
		if (!replay_code_unsafe(unsafe[i], true, why, sizeof why))
			fail_msg("taken for safe: %s", unsafe[i]);
	for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
		if (replay_code_unsafe(safe[i], true, why, sizeof why))
			fail_msg("taken for unsafe (%s): %s", why, safe[i]);
	/* An import the session says read nothing beyond the installed Python
	 * (or nothing at all: the module was loaded) is no file read; the
	 * other words still count. */
	static const char *const installed[] = { "import mymodule", "from scipy import stats\nstats.ttest_ind(a, b)",
						  "from sklearn.linear_model import LinearRegression" };
	for (size_t i = 0; i < sizeof installed / sizeof installed[0]; i++)
		if (replay_code_unsafe(installed[i], false, why, sizeof why))
			fail_msg("taken for unsafe (%s): %s", why, installed[i]);
	assert_true(replay_code_unsafe("import time\nt = time.time()", false, why, sizeof why));
	assert_true(replay_code_unsafe("import json\ncfg = json.load(f)", false, why, sizeof why));
	assert_true(replay_code_unsafe("from helpers import f", true, why, sizeof why));
	assert_string_equal(why, "import (a file read)");
}

/* Cheap cells are logged (no checkpoint): a crash resumes the checkpoint of
 * cell 1 and runs cells 2 and 3 again, and the reply says so. */
static void test_replay_rollback(void **state)
{
	struct trun *a = run_ok("inc");
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	assert_non_null(b->run.note);
	/* The fake session's value carries its pid: another process, another
	 * output, which the note names. */
	if (!strstr(b->run.note, "the copy taken after cell 1 was resumed and cells 2 to 3 run again") ||
	    !strstr(b->run.note, "cell 2 gave another output when run again"))
		fail_msg("note: %s", b->run.note);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 3); /* cells 2 and 3 ran again; 4 did not */
	assert_true(c->resumed);
	assert_int_not_equal(c->pid, a->pid);
	assert_int_equal(c->run.cell, 5);
	/* The replay ended with a checkpoint of cell 3's state: a second
	 * crash runs only cell 5 (logged) again. */
	struct trun *d = submit("inc crash", 30000.0);
	wait_done(d);
	if (!d->run.note || !strstr(d->run.note, "the copy taken after cell 3 was resumed and cell 5 run again"))
		fail_msg("note: %s", d->run.note ? d->run.note : "(none)");
	struct trun *e = run_ok("");
	assert_int_equal(e->x, 3);
	trun_free(a);
	trun_free(b);
	trun_free(c);
	trun_free(d);
	trun_free(e);
}

/* A cell whose second run fails (its status changed): the replay stops,
 * the state is the one after the cell before it, and the reply says so. */
static void test_replay_fails(void **state)
{
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc fail_resumed"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	if (!b->run.note || !strstr(b->run.note, "cell 3 failed when run again") || !strstr(b->run.note, "the state is as after cell 2") ||
	    !strstr(b->run.note, "what cells 3 to 4 did to variables is gone"))
		fail_msg("note: %s", b->run.note ? b->run.note : "(none)");
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 2); /* cells 1 and 2, not the half-done 3 */
	trun_free(b);
	trun_free(c);
}

/* Under PSM_TEST_REPLAY_MS=0 every call takes its checkpoint, as before the
 * log: a crash resumes the last call's state, nothing is run again. */
static void test_replay_off(void **state)
{
	setenv("PSM_TEST_REPLAY_MS", "0", 1);
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	unsetenv("PSM_TEST_REPLAY_MS");
	assert_null(strstr(b->run.note, "run again"));
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 2);
	trun_free(b);
	trun_free(c);
}

static bool same_run(const struct run *r, const void *key)
{
	return r == key;
}

/* A call cancelled while the session resumes: it is dropped (no reply),
 * and the session goes on once resumed. */
static void test_cancel_while_resuming(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_RESUME, true);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	/* The resumed copy has not said hello: c waits in the queue. */
	struct trun *c = submit("inc", 30000.0);
	spin(300);
	assert_false(c->done);
	assert_true(sup_busy(sup));
	assert_true(sup_cancel(sup, same_run, &c->run));
	assert_true(c->dropped);
	assert_false(c->done);
	assert_false(sup_cancel(sup, same_run, &c->run)); /* gone from the queue */
	hold(HOLD_RESUME, false);
	struct trun *d = run_ok("");
	assert_int_equal(d->x, 1); /* c never ran */
	assert_true(d->resumed);
	trun_free(b);
	trun_free(c);
	trun_free(d);
}

/* The resumed copy says hello but never takes its own checkpoint (a
 * hostile copy, or one that hangs): dropped after RESUME_MS, and the call
 * that waited for it runs in a new process, its reply saying that the
 * state is gone. */
static void test_resumed_never_answers(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_RECKPT, true);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = submit("inc", 30000.0);
	wait_done(c);
	assert_int_equal(c->run.status, CALL_OK);
	assert_int_equal(c->x, 1); /* a new process: the state before was lost */
	assert_false(c->resumed);
	if (!c->run.note || !strstr(c->run.note, "the copy it was rolled back to did not answer within 1 s") ||
	    !strstr(c->run.note, "this call starts a new interpreter"))
		fail_msg("the reply does not say the state was lost: %s", c->run.note ? c->run.note : "(no note)");
	hold(HOLD_RECKPT, false);
	trun_free(b);
	trun_free(c);
}

/* A crashed call is finished once the scan of what it wrote is in (off
 * the loop); that scan comes back while the resumed copy is being frozen:
 * the freeze goes on, and the next call runs in the resumed copy.  Before,
 * the late finish cancelled the freeze's timer, and the copy was dropped
 * at RESUME_MS with the state. */
static void test_late_scan_during_resume(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_BUSY, true);
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_collect_later;
	b->run.code = strdup("inc crash");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	pending.r = NULL;
	sup_submit(sup, &b->run);
	for (int i = 0; i < 100 && !pending.r; i++)
		spin(20);
	assert_non_null(pending.r); /* the crash is in; its scan runs */
	spin(300);                  /* the copy resumed, checkpointed, runs */
	assert_false(b->done);
	pending.ready(pending.r, pending.arg);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	hold(HOLD_BUSY, false);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	assert_true(c->resumed);
	if (c->run.note && strstr(c->run.note, "did not answer"))
		fail_msg("the resumed copy was dropped: %s", c->run.note);
	trun_free(b);
	trun_free(c);
}

static int resume_short_up(void **state)
{
	setenv("PSM_TEST_RESUME_MS", "1000", 1);
	return sup_up(state);
}

static int resume_short_down(void **state)
{
	unsetenv("PSM_TEST_RESUME_MS");
	return sup_down(state);
}

/* The cell's time ran out before the session said it had started it: a
 * timeout (never sent again), rolled back. */
static void test_timeout_while_starting(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("hang_unstarted inc", 300.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_TIMEOUT);
	assert_int_equal(b->run.exit_code, 124);
	assert_int_equal(b->run.resends, 0);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	assert_true(c->resumed);
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* A new session's process that never says hello: the call times out on
 * its own timer, the process is ended, and the next call gets a new one. */
static void test_timeout_before_hello(void **state)
{
	hold(HOLD_HELLO, true);
	struct trun *a = submit("inc", 300.0);
	wait_done(a);
	assert_int_equal(a->run.status, CALL_TIMEOUT);
	assert_int_equal(a->run.exit_code, 124);
	assert_int_equal(a->run.state, STATE_NEW); /* no checkpoint: the state is gone */
	hold(HOLD_HELLO, false);
	struct trun *b = run_ok("inc");
	assert_int_equal(b->x, 1); /* a never ran */
	assert_true(b->run.new_session);
	assert_false(b->resumed);
	trun_free(a);
	trun_free(b);
}

/* A call cancelled while its snapshot is still being taken: its process is
 * ended and rolled back; once the snapshot is in, the call is finished
 * (no reply: cancelled) and the session serves the next call.  (It used to
 * stay the session's current call for good.) */
static void test_cancel_while_preparing(void **state)
{
	trun_free(run_ok("inc"));
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_later;
	b->run.code = strdup("inc");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	memset(&pending, 0, sizeof pending);
	sup_submit(sup, &b->run);
	for (int i = 0; i < 300 && !pending.r; i++)
		spin(20); /* once a's checkpoint is in */
	assert_ptr_equal(pending.r, &b->run);
	assert_true(sup_cancel(sup, same_run, &b->run));
	spin(300); /* the process is ended, its checkpoint resumes */
	assert_false(b->done);
	pending.ready(pending.r, pending.arg);
	wait_done(b);
	assert_true(b->run.cancelled);
	assert_int_equal(b->run.status, CALL_CANCELLED);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	trun_free(b);
	trun_free(c);
}

/* The first call of a session, which crashes: no copy to roll back to, so
 * the call ends as soon as the scan of what it wrote is in; returned with
 * that scan held (pending), the crash in. */
static struct trun *crash_scan_held(void)
{
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_collect_later;
	b->run.code = strdup("inc crash");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	pending.r = NULL;
	sup_submit(sup, &b->run);
	for (int i = 0; i < 100 && !pending.r; i++)
		spin(20);
	assert_non_null(pending.r);
	return b;
}

/* A run's end is posted to the supervisor's outbox and handed to the
 * layer above at a safe point, never from inside the handler that ended
 * it.  A cancel that comes while the done waits there finds no run to
 * cancel; the run is answered once, with its outcome, not as cancelled,
 * and the session goes on. */
static void test_cancel_while_done_posted(void **state)
{
	struct trun *b = crash_scan_held(); /* the crash is in; its scan runs */
	spin(300);
	/* The scan ends outside the loop: the run's end is decided now, and
	 * its done posted, not handed over from inside. */
	pending.ready(pending.r, pending.arg);
	assert_false(b->done);
	assert_true(sup_busy(sup)); /* the outbox holds an unanswered run */
	assert_false(sup_cancel(sup, same_run, &b->run));
	assert_int_equal(b->n_done, 1); /* the face's drain handed it over */
	assert_false(b->run.cancelled);
	assert_int_equal(b->run.status, CALL_CRASHED);
	spin(300);
	assert_int_equal(b->n_done, 1);
	struct trun *c = run_ok("inc");
	assert_int_equal(c->x, 1); /* a new interpreter */
	trun_free(b);
	trun_free(c);
}

/* The supervisor freed while its outbox holds a run's end and the next
 * start: the ended run is answered once, the queued one dropped, nothing
 * starts, and no timer of the freed supervisor fires on the loop after
 * it (the sanitizers' build checks for a leak or a use after free). */
static void test_free_with_done_posted(void **state)
{
	struct trun *b = crash_scan_held();
	struct trun *c = submit("inc", 30000.0); /* queued behind b */
	spin(100);
	assert_false(c->done);
	pending.ready(pending.r, pending.arg); /* b's done and the next start posted */
	assert_false(b->done);
	sup_free(sup);
	sup = NULL;
	assert_int_equal(b->n_done, 1);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_true(c->dropped);
	assert_int_equal(c->n_done, 0);
	spin(200);
	assert_int_equal(b->n_done, 1);
	trun_free(b);
	trun_free(c);
}

/* The zygote's socket closes a moment before it can be reaped: as pid 1
 * of its pid namespace it first ends every session below it, which took
 * longer than 200 ms under a sanitizer build on a loaded machine.  The
 * reply must still say it was killed (from outside), not that it ended
 * its link and was ended by the server. */
static void test_zygote_lingers_dying(void **state)
{
	trun_free(run_ok("inc"));
	hold(ZYGOTE_LINGER, true);
	spin(1500); /* its socket closed, then its death, then the restart */
	struct trun *b = submit("inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_OK);
	assert_int_equal(b->x, 1); /* a new process: the state was lost */
	if (!b->run.note || !strstr(b->run.note, "zygote") || !strstr(b->run.note, "was killed (SIGKILL") ||
	    strstr(b->run.note, "ended its link"))
		fail_msg("the reply does not say the zygote was killed: %s", b->run.note ? b->run.note : "(no note)");
	trun_free(b);
}

/* A zygote that closes its socket and lives on is ended after the bound
 * (linger_ms, 5 s): the server does not wait for it for good, and says
 * what happened. */
static void test_zygote_closes_and_lives(void **state)
{
	trun_free(run_ok("inc"));
	hold(ZYGOTE_DEAF, true);
	spin(zlink_defaults.linger_ms + 1500);
	struct trun *b = submit("inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_OK);
	assert_int_equal(b->x, 1); /* a new process: the old zygote was ended */
	if (!b->run.note || !strstr(b->run.note, "ended its link to the server (end of stream)"))
		fail_msg("the reply does not say the zygote ended its link: %s", b->run.note ? b->run.note : "(no note)");
	trun_free(b);
}

/* A session that stops itself once its result is sent (as the real one
 * does) is thawed for the thumbnails only once it is seen stopped, and
 * answers both; one that does not stop itself (a session of its own mind)
 * reads them as they come.  Either way the call ends ok, well before its
 * deadline, and the next call runs in the same process. */
static void thumbs_with(const char *code)
{
	thumbs_left = 2;
	thumbs_got = 0;
	struct trun *t = calloc(1, sizeof *t);
	assert_non_null(t);
	t->run.ev = &events_thumbs;
	t->run.code = strdup(code);
	snprintf(t->run.session, sizeof t->run.session, "default");
	t->run.timeout_ms = 20000.0;
	double t0 = loop_now_ms();
	sup_submit(sup, &t->run);
	wait_done(t);
	assert_int_equal(t->run.status, CALL_OK);
	assert_int_equal(thumbs_got, 2);
	assert_true(loop_now_ms() - t0 < 10000.0);
	struct trun *b = run_ok("inc");
	assert_int_equal(b->pid, t->pid);
	assert_int_equal(b->x, t->x + 1);
	trun_free(t);
	trun_free(b);
}

static void test_thumbs_after_self_stop(void **state)
{
	trun_free(run_ok("inc selfstop"));
	thumbs_with("inc selfstop");
}

static void test_thumbs_without_self_stop(void **state)
{
	trun_free(run_ok("inc"));
	thumbs_with("inc");
}

int main(int argc, char **argv)
{
	sup_fake_main(argc, argv);
	log_threshold = LOG_ERROR;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roll_back, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_result_then_death, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_checkpoint_then_death, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_restored_unasked, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_resume_twice, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_requeue_unstarted, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_resuming, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_resumed_never_answers, resume_short_up, resume_short_down),
		cmocka_unit_test_setup_teardown(test_late_scan_during_resume, resume_short_up, resume_short_down),
		cmocka_unit_test_setup_teardown(test_timeout_while_starting, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_timeout_before_hello, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_preparing, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_done_posted, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_free_with_done_posted, sup_up, sup_down),
		cmocka_unit_test(test_replay_decide),
		cmocka_unit_test(test_replay_budget_priced),
		cmocka_unit_test(test_replay_code),
		cmocka_unit_test_setup_teardown(test_replay_rollback, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_replay_fails, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_replay_off, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_zygote_lingers_dying, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_zygote_closes_and_lives, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_thumbs_after_self_stop, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_thumbs_without_self_stop, sup_up, sup_down),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
