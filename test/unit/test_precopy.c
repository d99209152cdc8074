/* Unit tests of interp/precopy.c against the real kernel: a descriptor that
 * would show physical page numbers is refused; after a fork, the pages
 * written since the previous fork (and only those) are noted and made the
 * process's own again, the ones left alone stay shared, and so do pages
 * copied at one round that no call wrote since; ranges said to be fresh
 * are left out; a fork of the same state copies the last set again; the
 * byte budget holds.  What is shared and what is not is read from /proc/self/pagemap,
 * the kernel's own account. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../interp/precopy.h"

#define NPAGES 96

static size_t ps;

static bool has_sys_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	return d[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

/* As the jail leaves a session: no CAP_SYS_ADMIN (so no page frame
 * numbers in pagemap). */
static void drop_sys_admin(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	d[CAP_SYS_ADMIN / 32].effective &= ~(1U << (CAP_SYS_ADMIN % 32));
	assert_int_equal(syscall(SYS_capset, &h, d), 0);
	assert_false(has_sys_admin());
}

/* Bit 56 of this process's pagemap entry for the page at p: mapped by
 * this process alone (not shared with a fork). */
static bool exclusive(const void *p)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	uint64_t e = 0;
	assert_int_equal(pread(fd, &e, sizeof e, (off_t)((uintptr_t)p / ps * sizeof e)), (ssize_t)sizeof e);
	close(fd);
	assert_true(e >> 63 & 1); /* present */
	return e >> 56 & 1;
}

/* How many of the pages [from, to) of m are this process's alone. */
static size_t exclusive_in(const unsigned char *m, size_t from, size_t to)
{
	size_t k = 0;
	for (size_t i = from; i < to; i++)
		k += exclusive(m + i * ps);
	return k;
}

static pid_t fork_sleeper(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Gone with the test, a failed one too (it would hold the
		 * test's stdout open for whoever reads it to its end). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

static void end(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The session's pages, NPAGES of them all written, then the previous
 * checkpoint (*before): a sleeping fork that shares every one of them. */
static unsigned char *pages_then_checkpoint(pid_t *before)
{
	assert_true(precopy_open() >= 0);
	unsigned char *m = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	memset(m, 1, NPAGES * ps);
	*before = fork_sleeper();
	return m;
}

/* Both checkpoints end, and the pages go. */
static void end_all(unsigned char *m, pid_t before, pid_t after)
{
	end(before);
	end(after);
	munmap(m, NPAGES * ps);
}

/* n pages aligned to windows of win pages (windows are counted from
 * address 0), all written, then the previous checkpoint (*before): a
 * sleeping fork that shares every one of them.  *raw is the mapping to
 * unmap, (n + win) pages. */
static unsigned char *windows_then_checkpoint(size_t win, size_t n, unsigned char **raw, pid_t *before)
{
	assert_true(precopy_open() >= 0);
	*raw = mmap(NULL, (n + win) * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(*raw != MAP_FAILED);
	unsigned char *m = (unsigned char *)(((uintptr_t)*raw + win * ps - 1) / (win * ps) * (win * ps));
	memset(m, 1, n * ps);
	*before = fork_sleeper();
	return m;
}

static void test_refused_where_page_frames_show(void **state)
{
	(void)state;
	if (has_sys_admin()) {
		/* Root with CAP_SYS_ADMIN sees physical addresses: refused. */
		assert_int_equal(precopy_open(), -EPERM);
		drop_sys_admin();
	}
	int fd = precopy_open();
	assert_true(fd >= 64);
	/* Close-on-exec: no program the code could run inherits it. */
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static void test_copies_what_was_written_since_the_last_fork(void **state)
{
	(void)state;
	/* The previous checkpoint: everything is shared with it now. */
	pid_t before;
	unsigned char *m = pages_then_checkpoint(&before);
	for (size_t i = 0; i < NPAGES; i++)
		assert_false(exclusive(m + i * ps));
	/* The call: writes every third page. */
	for (size_t i = 0; i < NPAGES; i += 3)
		m[i * ps] = 2;
	assert_true(precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000) >= NPAGES / 3 * ps - NPAGES / 3 * ps / 8);
	/* The new checkpoint, then the pre-copy in this process. */
	pid_t after = fork_sleeper();
	for (size_t i = 0; i < NPAGES; i++)
		assert_false(exclusive(m + i * ps));
	precopy_run(1000, -1);
	size_t written = 0, copied = 0;
	for (size_t i = 0; i < NPAGES; i++) {
		if (i % 3 == 0) {
			written++;
			copied += exclusive(m + i * ps);
		} else {
			/* Never written: still shared with both forks. */
			assert_false(exclusive(m + i * ps));
		}
	}
	/* One page in 64 (by address) is left out of each round so a page
	 * no longer written leaves the set: here at most two of the 32
	 * written pages (96 pages span two rounds of 64). */
	assert_true(copied >= written - (written + 7) / 8);
	assert_true(copied > 0);
	/* The contents are untouched. */
	for (size_t i = 0; i < NPAGES; i++)
		assert_int_equal(m[i * ps], i % 3 == 0 ? 2 : 1);
	/* And the checkpoint kept its own copies: it is another process. */
	struct precopy_stats st;
	precopy_last(&st);
	assert_true(st.copied <= st.bytes);
	end_all(m, before, after);
}

static void test_budget_holds(void **state)
{
	(void)state;
	pid_t before;
	unsigned char *m = pages_then_checkpoint(&before);
	memset(m, 2, NPAGES * ps); /* all of them written */
	size_t budget = 8 * ps;
	size_t noted = precopy_scan(budget, (size_t)4 << 30, 1000);
	assert_true(noted > 0);
	assert_true(noted <= budget);
	pid_t after = fork_sleeper();
	precopy_run(1000, -1);
	struct precopy_stats st;
	precopy_last(&st);
	assert_true(st.copied <= budget);
	size_t copied = 0;
	for (size_t i = 0; i < NPAGES; i++)
		copied += exclusive(m + i * ps);
	assert_true(copied * ps <= budget);
	end_all(m, before, after);
}

/* A call waiting (something to read on stop_fd): nothing is copied, and
 * the notes are forgotten. */
static void test_stops_when_a_call_waits(void **state)
{
	(void)state;
	pid_t before;
	unsigned char *m = pages_then_checkpoint(&before);
	memset(m, 2, NPAGES * ps);
	assert_true(precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000) > 0);
	pid_t after = fork_sleeper();
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	precopy_run(1000, p[0]);
	struct precopy_stats st;
	precopy_last(&st);
	assert_int_equal(st.copied, 0);
	for (size_t i = 0; i < NPAGES; i++)
		assert_false(exclusive(m + i * ps));
	/* The notes are gone: a later run has nothing to copy. */
	precopy_run(1000, -1);
	precopy_last(&st);
	assert_int_equal(st.copied, 0);
	close(p[0]);
	close(p[1]);
	end_all(m, before, after);
}

/* Copied at one checkpoint, left alone by the next call: not copied again
 * at the next.  Four windows of 64 pages are written, checkpointed and
 * copied; the next call rewrites the first two windows whole and leaves
 * the last two.  Their pages are the process's alone after the copy
 * whether written or not, so the kernel's bit cannot tell; the page of
 * each window the copy left out can, and the last two windows must all
 * stay shared after the next checkpoint (before, 63 of each 64 were
 * copied again at every round). */
static void test_copied_pages_no_call_writes_leave_the_set(void **state)
{
	(void)state;
	const size_t win = 64, n = 4 * win;
	unsigned char *raw;
	pid_t c0;
	unsigned char *m = windows_then_checkpoint(win, n, &raw, &c0);
	memset(m, 2, n * ps); /* the first call writes all of it */
	assert_true(precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000) > 0);
	pid_t c1 = fork_sleeper();
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, n), n - 4); /* one page a window left out */
	memset(m, 3, 2 * win * ps); /* the next call: the first two windows */
	precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000);
	pid_t c2 = fork_sleeper();
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, 2 * win), 2 * win - 2);
	assert_int_equal(exclusive_in(m, 2 * win, n), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(m[i * ps], i < 2 * win ? 3 : 2);
	/* The page of the first window this round left out. */
	size_t out = win;
	for (size_t i = 0; i < win; i++)
		if (!exclusive(m + i * ps))
			out = i;
	assert_true(out < win);
	/* A fork without a scan (precopy_unknown): what was copied is shared
	 * again, and the next scan reads its bits as any other page's.  The
	 * call writes the first window but the page left out: known copied,
	 * its pages would go with that page's bit; they were all written. */
	precopy_unknown();
	pid_t c3 = fork_sleeper();
	for (size_t i = 0; i < win; i++)
		if (i != out)
			m[i * ps] = 4;
	precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000);
	pid_t c4 = fork_sleeper();
	precopy_run(1000, -1);
	/* 63 written, less the one this round leaves out. */
	assert_int_equal(exclusive_in(m, 0, win), win - 2);
	assert_int_equal(exclusive_in(m, win, n), 0);
	end(c0);
	end(c1);
	end(c2);
	end(c3);
	end(c4);
	munmap(raw, (n + win) * ps);
}

/* Memory allocated afresh since the last fork is the process's alone
 * because it is new: the ranges precopy_skip names are left out of the
 * scan (the allocator's new blocks), the rest written is noted as before.
 * Without the skip the fresh block would be noted and copied (and, first
 * in address order, could take the whole budget). */
static void test_skipped_ranges_are_not_noted(void **state)
{
	(void)state;
	pid_t before;
	unsigned char *m = pages_then_checkpoint(&before);
	/* The call writes the first half of the old pages, and fills a
	 * block of its own of NPAGES pages. */
	for (size_t i = 0; i < NPAGES / 2; i++)
		m[i * ps] = 2;
	unsigned char *fresh = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(fresh != MAP_FAILED);
	memset(fresh, 5, NPAGES * ps);
	uintptr_t at = (uintptr_t)fresh;
	size_t len = NPAGES * ps;
	precopy_skip(&at, &len, 1);
	precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000);
	pid_t after = fork_sleeper();
	precopy_run(1000, -1);
	/* The fresh block stays shared with the new fork, untouched. */
	assert_int_equal(exclusive_in(fresh, 0, NPAGES), 0);
	/* The old pages written are copied (less one in 64 by address). */
	assert_true(exclusive_in(m, 0, NPAGES / 2) >= NPAGES / 2 - 2);
	assert_int_equal(exclusive_in(m, NPAGES / 2, NPAGES), 0);
	/* A skip holds for one scan: the next one notes the block (it was
	 * written since the last fork, by nothing but the call above). */
	memset(fresh, 6, NPAGES * ps);
	assert_true(precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000) >= (NPAGES - 2) * ps);
	precopy_forget();
	end_all(m, before, after);
	munmap(fresh, NPAGES * ps);
}

/* A fork of the same state (a save at rest's checkpoint, no call since)
 * shares again what the last run copied, and a scan there would drop it
 * all (nothing wrote the windows' left-out pages).  precopy_again copies
 * again what calls keep writing: pages copied once and written again by
 * the next call (sure), not those one call wrote once.  Within its
 * budget. */
static void test_again_after_a_fork_of_the_same_state(void **state)
{
	(void)state;
	/* Two windows of 64 pages, aligned: whether a page is sure depends
	 * on its window's left-out page, which must be one of these. */
	const size_t win = 64, n = 2 * win;
	unsigned char *raw;
	pid_t before;
	unsigned char *m = windows_then_checkpoint(win, n, &raw, &before);
	memset(m, 2, n * ps); /* a call writes all of them */
	precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000);
	pid_t c1 = fork_sleeper();
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, n), n - 2); /* one page a window left out */
	/* A save's checkpoint: written once, so not sure yet; nothing is
	 * copied, and the pages are shared again. */
	assert_int_equal(precopy_again((size_t)64 << 20), 0);
	pid_t s1 = fork_sleeper();
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, n), 0);
	/* The next call writes them all again: the scan knows them as
	 * copied (the run after precopy_again kept that record) and their
	 * windows written: sure, all but the two the first round left out
	 * (copied now for the first time), less this round's two. */
	memset(m, 3, n * ps);
	precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000);
	pid_t c2 = fork_sleeper();
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, n), n - 2);
	/* The next save's checkpoint copies the sure ones again. */
	assert_true(precopy_again((size_t)64 << 20) >= (n - 4) * ps);
	pid_t s2 = fork_sleeper();
	assert_int_equal(exclusive_in(m, 0, n), 0);
	precopy_run(1000, -1);
	assert_int_equal(exclusive_in(m, 0, n), n - 4);
	/* And again, within a budget of 8 pages. */
	assert_int_equal(precopy_again(8 * ps), 8 * ps);
	pid_t s3 = fork_sleeper();
	precopy_run(1000, -1);
	struct precopy_stats st;
	precopy_last(&st);
	assert_int_equal(st.copied, 8 * ps);
	assert_true(exclusive_in(m, 0, n) <= 8);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(m[i * ps], 3);
	end(before);
	end(c1);
	end(s1);
	end(c2);
	end(s2);
	end(s3);
	munmap(raw, (n + win) * ps);
}

/* No descriptor (a checkpoint's copy of the session, or a jail without
 * /proc): nothing is noted, nothing copied, nothing fails. */
static void test_without_pagemap_nothing(void **state)
{
	(void)state;
	precopy_close();
	assert_int_equal(precopy_scan((size_t)64 << 20, (size_t)4 << 30, 1000), 0);
	precopy_run(1000, -1);
	struct precopy_stats st;
	precopy_last(&st);
	assert_int_equal(st.copied, 0);
}

int main(void)
{
	ps = (size_t)sysconf(_SC_PAGESIZE);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_where_page_frames_show),
		cmocka_unit_test(test_copies_what_was_written_since_the_last_fork),
		cmocka_unit_test(test_budget_holds),
		cmocka_unit_test(test_stops_when_a_call_waits),
		cmocka_unit_test(test_copied_pages_no_call_writes_leave_the_set),
		cmocka_unit_test(test_skipped_ranges_are_not_noted),
		cmocka_unit_test(test_again_after_a_fork_of_the_same_state),
		cmocka_unit_test(test_without_pagemap_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
