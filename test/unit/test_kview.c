/* The kernel's view of a session (supervisor/kview.c) against real
 * processes: a stand-in session (a subreaper), the checkpoint it replaced
 * (killed) and that checkpoint's saver, which wrote the last save and
 * ended before its parent could reap it, beside the checkpoint that
 * replaced it.  The saver comes to the session
 * only once the checkpoint has died, and the session reaps it during the
 * next cell, adding what it wrote to its own counters: the view taken
 * before the cell must already count it as the session's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../../supervisor/private.h"
#include "../../supervisor/kview.h"
#include "../../proto/result.h"
#include "family.h"

#define SAVED (1u << 20)

/* Two processes say their news on one pipe, each tagged with who. */
struct news {
	char who;
	pid_t pid;
};

static void put_pid(int fd, char who, pid_t p)
{
	struct news n = { who, p };
	if (write(fd, &n, sizeof n) != sizeof n)
		_exit(90);
}

static void get_pids(int fd, pid_t *ck, pid_t *cur, pid_t *saver)
{
	for (int i = 0; i < 3; i++) {
		struct news n = { 0, 0 };
		assert_int_equal(read(fd, &n, sizeof n), sizeof n);
		*(n.who == 'c' ? ck : n.who == 'k' ? cur : saver) = n.pid;
	}
}

/* The checkpoint: forks its saver, which writes SAVED bytes and ends;
 * waits until it has ended without reaping it, says so, then stops. */
static void checkpoint(int up)
{
	pid_t saver = fork();
	if (saver == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		static char buf[64 << 10];
		for (unsigned n = 0; n < SAVED; n += sizeof buf)
			if (write(null, buf, sizeof buf) != sizeof buf)
				_exit(91);
		_exit(0);
	}
	siginfo_t si;
	if (saver < 0 || waitid(P_PID, (id_t)saver, &si, WEXITED | WNOWAIT) < 0)
		_exit(92);
	put_pid(up, 's', saver);
	for (;;)
		pause();
}

/* The session: a subreaper that starts the checkpoint, then, when told,
 * reaps everything that comes to it and says so. */
static void session(int up, int down)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		_exit(93);
	/* Its own stdout and stderr: the test's are shared with whatever
	 * else writes to the same file (`make -j2 unit > log` runs other
	 * tests beside this one), whose writes move the offset the view
	 * compares, and were taken for the cell's. */
	int null = open("/dev/null", O_WRONLY);
	if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		_exit(97);
	close(null);
	pid_t ck = fork();
	if (ck == 0)
		checkpoint(up);
	put_pid(up, 'c', ck);
	/* The checkpoint that replaced it: frozen, its only other child. */
	pid_t cur = fork();
	if (cur == 0)
		for (;;)
			pause();
	if (cur < 0)
		_exit(96);
	put_pid(up, 'k', cur);
	char c;
	if (read(down, &c, 1) != 1)
		_exit(94);
	/* The old checkpoint, then its saver (the current one lives on). */
	int reaped = 0;
	while (reaped < 2 && waitpid(-1, NULL, 0) > 0)
		reaped++;
	if (write(up, "r", 1) != 1)
		_exit(95);
	for (;;)
		pause();
}

static int pidfd_of(pid_t p)
{
	return (int)syscall(SYS_pidfd_open, p, 0);
}

static void test_saver_of_a_dying_checkpoint(void **state)
{
	(void)state;
	int up[2], down[2];
	pid_t sess = family_start(session, up, down);
	pid_t saver = 0, ck = 0, cur = 0;
	get_pids(up[0], &ck, &cur, &saver);
	assert_true(saver > 0 && ck > 0 && cur > 0);

	struct session *s = xcalloc(1, sizeof *s);
	s->hpid = sess;
	s->pidfd = pidfd_of(sess);
	s->ckpt_hpid = cur;
	assert_true(s->pidfd >= 0);
	/* The checkpoint replaced: killed, as the server does, and still
	 * the session's child with its saver below it when the cell goes. */
	struct kview *a = xmalloc(sizeof *a), *b = xmalloc(sizeof *b);
	assert_int_equal(kill(ck, SIGSTOP), 0);
	kview_read(s, a, NULL);
	assert_true(a->valid && a->own);
	bool listed = false;
	for (int i = 0; i < a->nkids; i++)
		if (a->kid[i] == saver) {
			listed = true;
			assert_true(a->kid_wchar[i] >= SAVED);
		}
	assert_true(listed);

	/* The cell: the checkpoint dies, its saver comes to the session,
	 * which reaps both (its wchar grows by the saver's). */
	assert_int_equal(kill(ck, SIGKILL), 0);
	assert_int_equal(write(down[1], "c", 1), 1);
	char c;
	assert_int_equal(read(up[0], &c, 1), 1);
	kview_read(s, b, NULL);
	assert_true(b->valid && b->own);
	assert_true(b->wchar - a->wchar >= SAVED);

	/* The one byte it wrote to say it was done is its output here. */
	struct cell_result r = { .status = RESULT_OK };
	char why[160];
	const char *eff = kview_effect(a, b, 1, &r, why, sizeof why);
	if (eff)
		fail_msg("the saver's bytes were taken for the cell's: %s", eff);

	family_end(NULL);
	close(s->pidfd);
	free(a);
	free(b);
	free(s);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
}

/* kview_runs, what a kept view before a cell rests on (replay.c): a
 * stopped process that is not woken reads the same line however long it
 * waits, and one woken for a moment (a SIGCONT, then stopped again) does
 * not; a process that is gone reads nothing. */
static void test_runs_line(void **state)
{
	(void)state;
	pid_t p = fork();
	if (p == 0) {
		for (;;)
			pause();
	}
	assert_true(p > 0);
	struct session *s = xcalloc(1, sizeof *s);
	s->hpid = p;
	s->pidfd = pidfd_of(p);
	assert_true(s->pidfd >= 0);
	assert_int_equal(kill(p, SIGSTOP), 0);
	char a[96], b[96];
	int st;
	assert_int_equal(waitpid(p, &st, WUNTRACED), p);
	assert_true(kview_runs(s, a, sizeof a));
	usleep(20000);
	assert_true(kview_runs(s, b, sizeof b));
	assert_string_equal(a, b);
	/* Woken and stopped again: it ran (to stop, at least). */
	assert_int_equal(kill(p, SIGCONT), 0);
	assert_int_equal(waitpid(p, &st, WCONTINUED), p);
	assert_int_equal(kill(p, SIGSTOP), 0);
	assert_int_equal(waitpid(p, &st, WUNTRACED), p);
	assert_true(kview_runs(s, b, sizeof b));
	assert_string_not_equal(a, b);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	assert_false(kview_runs(s, b, sizeof b));
	close(s->pidfd);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_saver_of_a_dying_checkpoint, family_end),
		cmocka_unit_test(test_runs_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
