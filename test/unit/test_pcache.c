/* Unit tests of common/pcache.c: /proc files read through kept descriptors
 * read what a fresh open would read now (the live task's state, the
 * descriptor now at a number), never a gone task's last words, and keep at
 * most PCACHE_MAX descriptors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/pcache.h"
#include "../../common/pdir.h"
#include "../../common/pstat.h"

static int setup(void **state)
{
	(void)state;
	pcache_clear();
	return 0;
}

static pid_t sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		for (;;)
			pause();
	}
	assert_true(pid > 0);
	return pid;
}

/* The state the kernel shows now, waiting for it to become want. */
static char state_of(const char *path, char want)
{
	struct pstat ps = { 0 };
	for (int i = 0; i < 500; i++) {
		if (pstat_read_kept(AT_FDCWD, NULL, path, &ps) == 0 && ps.state == want)
			break;
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
	return ps.state;
}

/* A kept descriptor reads the task as it is now: stopped, then running. */
static void test_reads_now(void **state)
{
	(void)state;
	pid_t pid = sleeper();
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	assert_int_equal(state_of(path, 'S'), 'S');
	assert_int_equal(pcache_count(), 1);
	kill(pid, SIGSTOP);
	assert_int_equal(state_of(path, 'T'), 'T');
	kill(pid, SIGCONT);
	assert_int_equal(state_of(path, 'S'), 'S');
	assert_int_equal(pcache_count(), 1); /* the same descriptor all along */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Once its task is reaped, a kept file fails as the path does, and is
 * dropped: nothing of the gone task is read. */
static void test_gone_fails(void **state)
{
	(void)state;
	pid_t pid = sleeper();
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	assert_true(pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) > 0);
	assert_int_equal(pcache_count(), 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ssize_t n = pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf);
	assert_true(n < 0);
	assert_int_equal(pcache_count(), 0);
}

/* A children list read once (a grandchild in it) and again after its task
 * was reaped: not the old list.  (A gone task's children file reads empty
 * through a kept descriptor; the path is tried again and fails.) */
static void test_children_not_stale(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t mid = fork();
	if (mid == 0) {
		pid_t g = sleeper();
		if (write(p[1], &g, sizeof g) != sizeof g)
			_exit(1);
		for (;;)
			pause();
	}
	pid_t g = 0;
	assert_int_equal(read(p[0], &g, sizeof g), (ssize_t)sizeof g);
	char dir[64], buf[256], want[32];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)mid);
	snprintf(want, sizeof want, "%d ", (int)g);
	struct pdir d;
	assert_int_equal(pdir_open(&d, AT_FDCWD, dir), 0);
	char rel[48];
	snprintf(rel, sizeof rel, "%d/children", (int)mid);
	assert_true(pdir_read(&d, rel, buf, sizeof buf) > 0);
	pdir_close(&d);
	assert_string_equal(buf, want);
	assert_int_equal(pcache_count(), 1);
	kill(mid, SIGKILL);
	waitpid(mid, NULL, 0);
	d = (struct pdir){ .fd = -1 };
	snprintf(d.path, sizeof d.path, "%s", dir);
	ssize_t n = pdir_read(&d, rel, buf, sizeof buf);
	assert_true(n <= 0);
	assert_int_equal(pcache_count(), 0);
	kill(g, SIGKILL); /* reparented to init or a subreaper: not ours to reap */
	close(p[0]);
	close(p[1]);
}

/* fdinfo/N names the descriptor at N when read: moved, then replaced by
 * another file, each read through the kept descriptor shows it. */
static void test_fdinfo_follows(void **state)
{
	(void)state;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)getpid(), fd);
	assert_true(pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) > 0);
	assert_non_null(strstr(buf, "pos:\t0\n"));
	char tmp[16];
	assert_true(read(fd, tmp, sizeof tmp) > 0);
	assert_true(pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) > 0);
	assert_non_null(strstr(buf, "pos:\t16\n"));
	assert_int_equal(pcache_count(), 1);
	close(fd);
	assert_true(pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) < 0);
	assert_int_equal(pcache_count(), 0);
}

/* However many files are read, at most PCACHE_MAX descriptors stay, and
 * reading more closes the least recently read. */
static void test_bounded(void **state)
{
	(void)state;
	enum { N = PCACHE_MAX + 20 };
	int fds[N];
	for (int i = 0; i < N; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds[i] >= 0);
	}
	char path[64], buf[512];
	for (int i = 0; i < N; i++) {
		snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)getpid(), fds[i]);
		assert_true(pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) > 0);
	}
	assert_int_equal(pcache_count(), PCACHE_MAX);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	pcache_clear();
	assert_int_equal(pcache_count(), 0);
}

/* Relative paths without an absolute directory, and keys too long, are
 * read as read_small_at does, and nothing is kept. */
static void test_unkeyed(void **state)
{
	(void)state;
	int dfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char buf[1024];
	assert_true(pcache_read(dfd, NULL, "stat", buf, sizeof buf) > 0);
	assert_true(pcache_read(dfd, "", "stat", buf, sizeof buf) > 0);
	assert_int_equal(pcache_count(), 0);
	char lng[200];
	memset(lng, '/', sizeof lng - 1);
	lng[sizeof lng - 1] = '\0';
	memcpy(lng + sizeof lng - 12, "/proc/self/", 11);
	assert_true(pcache_read(dfd, lng, "stat", buf, sizeof buf) > 0);
	assert_int_equal(pcache_count(), 0);
	close(dfd);
	/* Not /proc: a file replaced by a rename would be read stale. */
	char tmp[] = "/tmp/psm-pcache-XXXXXX";
	int fd = mkstemp(tmp);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "one", 3), 3);
	close(fd);
	assert_int_equal(pcache_read(AT_FDCWD, NULL, tmp, buf, sizeof buf), 3);
	assert_int_equal(pcache_count(), 0);
	unlink(tmp);
}

/* The listing of a process's threads (pdir_open_tasks), read as a caller
 * reads it: each name, and its stat and children through pdir_read. */
static int tasks_of(pid_t pid, bool *opened, char names[][24], int max)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	struct pdir d;
	assert_int_equal(pdir_open_tasks(&d, -1, dir), 0);
	*opened = d.fd >= 0;
	int n = 0;
	for (const char *t; (t = pdir_next(&d));) {
		assert_true(n < max);
		snprintf(names[n++], 24, "%s", t);
		char rel[64], buf[1024];
		snprintf(rel, sizeof rel, "%s/stat", t);
		assert_true(pdir_read(&d, rel, buf, sizeof buf) > 0);
		/* The one thread's stat is the process's, read by the listing
		 * (pdir_one_stat): the same process and parent as its own read
		 * a moment later (the state may have moved meanwhile); a
		 * listing of several has none to give, nor does another name. */
		struct pstat one, own;
		bool has = pdir_one_stat(&d, t, &one);
		assert_true(has == (d.fd < 0));
		assert_false(pdir_one_stat(&d, "1", &one) && strcmp(t, "1") != 0);
		if (has) {
			assert_int_equal(pstat_parse(buf, &own), 0);
			assert_int_equal(one.start, own.start);
			assert_int_equal(one.ppid, own.ppid);
			assert_int_equal(one.num_threads, 1);
		}
		snprintf(rel, sizeof rel, "%s/children", t);
		assert_true(pdir_read(&d, rel, buf, sizeof buf) >= 0);
	}
	assert_int_equal(d.err, 0);
	pdir_close(&d);
	return n;
}

/* One thread: the process itself, and no directory opened; its files are
 * read by path (none kept yet) and then through kept descriptors. */
static void test_tasks_one(void **state)
{
	(void)state;
	pid_t pid = sleeper();
	char names[4][24], want[24];
	bool opened;
	snprintf(want, sizeof want, "%d", (int)pid);
	assert_int_equal(tasks_of(pid, &opened, names, 4), 1);
	assert_false(opened);
	assert_string_equal(names[0], want);
	assert_int_equal(tasks_of(pid, &opened, names, 4), 1);
	assert_false(opened);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void *park(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A child with a second thread; with leader_exits, its first thread then
 * exits alone (the leader a zombie while the other runs). */
static pid_t threaded(bool leader_exits)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, park, NULL) != 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		if (leader_exits)
			syscall(SYS_exit, 0);
		park(NULL);
	}
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	close(p[1]);
	return pid;
}

/* Two threads, both listed from the directory; with leader_exits, the
 * first one exited while the other runs (the leader a zombie). */
static void two_listed(bool leader_exits)
{
	pid_t pid = threaded(leader_exits);
	if (leader_exits) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
		assert_int_equal(state_of(path, 'Z'), 'Z');
	}
	char names[4][24];
	bool opened;
	assert_int_equal(tasks_of(pid, &opened, names, 4), 2);
	assert_true(opened);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_tasks_two(void **state)
{
	(void)state;
	two_listed(false);
}

/* A leader that exited while another thread runs still counts in
 * num_threads: listed, never taken for "one thread, the leader" (whose
 * children file would not be the live thread's). */
static void test_tasks_leader_gone(void **state)
{
	(void)state;
	two_listed(true);
}

/* clear_refs written through a kept descriptor: once opened, and never
 * into a task that is gone. */
static void test_write_kept(void **state)
{
	(void)state;
	pid_t pid = sleeper();
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)pid);
	assert_int_equal(pcache_write(path, "5", 1), 1);
	assert_int_equal(pcache_count(), 1);
	assert_int_equal(pcache_write(path, "5", 1), 1);
	assert_int_equal(pcache_count(), 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_true(pcache_write(path, "5", 1) < 0);
	assert_int_equal(pcache_count(), 0);
	assert_int_equal(pcache_write("/tmp/x", "5", 1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_reads_now, setup),     cmocka_unit_test_setup(test_gone_fails, setup),
		cmocka_unit_test_setup(test_children_not_stale, setup), cmocka_unit_test_setup(test_fdinfo_follows, setup),
		cmocka_unit_test_setup(test_bounded, setup),       cmocka_unit_test_setup(test_unkeyed, setup),
		cmocka_unit_test_setup(test_tasks_one, setup),     cmocka_unit_test_setup(test_tasks_two, setup),
		cmocka_unit_test_setup(test_tasks_leader_gone, setup), cmocka_unit_test_setup(test_write_kept, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
