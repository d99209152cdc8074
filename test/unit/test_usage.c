/* What a call used (supervisor/usage.c), against real processes: a
 * stand-in session, its frozen checkpoint, which spent CPU time before the
 * call (its pre-copy), and that checkpoint's saver, which keeps pickling
 * while the call runs.  Neither is the call's work: the call's cpu_ms is
 * the session's own CPU time in it.  Before, the start counted the
 * checkpoint and the end did not, and both counted the saver: a call of
 * 300 ms showed 300 plus the saver's time minus the checkpoint's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "../../supervisor/private.h"
#include "../../supervisor/usage.h"
#include "family.h"

static double cpu_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Spins until this process has used ms more CPU time. */
static void burn(double ms)
{
	double end = cpu_now_ms() + ms;
	volatile unsigned long x = 0;
	while (cpu_now_ms() < end)
		x++;
}

static void say(int fd, pid_t p)
{
	if (write(fd, &p, sizeof p) != sizeof p)
		_exit(90);
}

/* The checkpoint: starts its saver (which spins until killed), spends
 * 200 ms of CPU, says so, then waits. */
static void checkpoint(int up)
{
	pid_t saver = fork();
	if (saver == 0)
		for (;;)
			burn(1000);
	if (saver < 0)
		_exit(91);
	burn(200);
	say(up, getpid());
	for (;;)
		pause();
}

/* The session: starts the checkpoint, then, each time it is told, spends
 * 300 ms of CPU and says so. */
static void session(int up, int down)
{
	pid_t ck = fork();
	if (ck == 0)
		checkpoint(up);
	if (ck < 0)
		_exit(92);
	for (char c; read(down, &c, 1) == 1;) {
		burn(300);
		say(up, getpid());
	}
	_exit(0);
}

static void test_checkpoint_and_saver_left_out(void **state)
{
	(void)state;
	int up[2], down[2];
	pid_t sess = family_start(session, up, down);
	pid_t ck = 0;
	assert_int_equal(read(up[0], &ck, sizeof ck), sizeof ck);
	int pidfd = (int)syscall(SYS_pidfd_open, sess, 0);
	assert_true(pidfd >= 0);

	for (int round = 0; round < 2; round++) {
		struct usage u;
		usage_begin(&u, sess, pidfd, ck);
		assert_true(u.cpu_start_ms >= 0);
		assert_int_equal(write(down[1], "c", 1), 1);
		pid_t said = 0;
		assert_int_equal(read(up[0], &said, sizeof said), sizeof said);
		usage_end(&u, sess, pidfd, ck);
		assert_true(u.known);
		/* 300 ms of the session's own, in clock ticks (10 ms each at
		 * both ends); the saver spun on for all of it and the
		 * checkpoint had 200 ms before it. */
		if (u.cpu_ms < 270 || u.cpu_ms > 340)
			fail_msg("round %d: cpu_ms %.0f for a call of 300 ms of CPU", round, u.cpu_ms);
		assert_true(u.peak_mb > 0);
	}

	/* Gone and reaped: its pid may be another's now, so nothing read
	 * under it stands. */
	struct usage u;
	usage_begin(&u, sess, pidfd, ck);
	family_end(NULL);
	usage_end(&u, sess, pidfd, ck);
	assert_false(u.known);
	usage_begin(&u, sess, pidfd, ck);
	assert_true(u.cpu_start_ms < 0);
	close(pidfd);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_checkpoint_and_saver_left_out, family_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
