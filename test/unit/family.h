/* A stand-in session for the tests that read the kernel's view of one
 * (test_kview, test_usage): a child of the test, in a process group of its
 * own, that the test is the subreaper of, with a pipe up (what it says)
 * and a pipe down (what it is told).  The teardown ends the group and
 * reaps everything that came to the test, the test failed or not. */
#ifndef TEST_UNIT_FAMILY_H
#define TEST_UNIT_FAMILY_H

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t family_group;

/* Forks body(up, down) as the session; its pid. */
static pid_t family_start(void (*body)(int up, int down), int up[2], int down[2])
{
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	assert_int_equal(pipe2(down, O_CLOEXEC), 0);
	pid_t sess = fork();
	assert_true(sess >= 0);
	if (sess == 0) {
		setpgid(0, 0); /* its group: what the teardown ends */
		body(up[1], down[0]);
		_exit(0);
	}
	setpgid(sess, sess);
	family_group = sess;
	return sess;
}

/* The teardown: the group's orphans come to the test (their subreaper)
 * and are reaped with it. */
static int family_end(void **state)
{
	(void)state;
	if (family_group > 0) {
		kill(-family_group, SIGKILL);
		while (waitpid(-1, NULL, 0) > 0)
			;
	}
	family_group = 0;
	return 0;
}

#endif
