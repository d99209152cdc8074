/* See forkfd.h. */
#include "forkfd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/pstat.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* Where glibc keeps the thread's id (struct pthread's tid, which fork()
 * has the kernel write with CLONE_CHILD_SETTID): its offset from
 * pthread_self(), stable across glibc 2.2x-2.3x for each architecture.
 * Checked before use (forkfd_init); -1: not known, the child keeps its
 * parent's id there (only pthread_kill of the main thread from another
 * thread, and PI mutexes, look at it). */
#if defined(__x86_64__)
#define TID_OFFSET 0x2d0
#elif defined(__aarch64__)
#define TID_OFFSET 0xd0
#else
#define TID_OFFSET (-1)
#endif

static long tid_offset = -1;
static void *robust_head;
static size_t robust_len;

static pid_t *tid_slot(void)
{
	return tid_offset < 0 ? NULL : (pid_t *)((char *)pthread_self() + tid_offset);
}

void forkfd_init(void)
{
	long len = 0;
	if (syscall(SYS_get_robust_list, 0, &robust_head, &len) < 0)
		robust_head = NULL;
	robust_len = (size_t)len;
	tid_offset = -1;
	if (TID_OFFSET < 0 || *(pid_t *)((char *)pthread_self() + TID_OFFSET) != (pid_t)syscall(SYS_gettid))
		return;
	/* A real fork() writes the child's id there: it is the field. */
	pid_t c = fork();
	if (c == 0)
		_exit(*(pid_t *)((char *)pthread_self() + TID_OFFSET) == (pid_t)syscall(SYS_gettid) ? 0 : 1);
	int st;
	if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		tid_offset = TID_OFFSET;
	else
		log_debug("fork_pidfd: the C library's thread id is not where it was expected; children keep their parent's there");
}

/* clone(2) without a new stack: a fork that returns twice, here.  The
 * argument order of the raw call differs between architectures. */
static long raw_clone(unsigned long flags, int *pidfd, pid_t *ctid)
{
#if defined(__x86_64__)
	return syscall(SYS_clone, flags, NULL, pidfd, ctid, NULL);
#else
	return syscall(SYS_clone, flags, NULL, pidfd, NULL, ctid);
#endif
}

/* In the new child: what fork() would have set. */
static void child_fixup(void)
{
	if (robust_head)
		syscall(SYS_set_robust_list, robust_head, robust_len);
}

static pid_t clone_pidfd(unsigned long extra, int *pidfd)
{
	pid_t *ctid = tid_slot();
	unsigned long flags = CLONE_PIDFD | extra | (ctid ? CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID : 0);
	sigset_t all, old;
	/* As fork() does: no signal handler may run in the child before it
	 * is a consistent process. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	/* With CLONE_PARENT the child's exit signal is its parent's: none
	 * is given. */
	long r = raw_clone(flags | ((extra & CLONE_PARENT) ? 0 : SIGCHLD), pidfd, ctid);
	if (r == 0)
		child_fixup();
	int err = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return (pid_t)r; /* the pidfd is close-on-exec, in the parent only */
}

static int threads(void)
{
	struct pstat ps;
	return pstat_read(-1, "/proc/self/stat", &ps) < 0 ? -1 : (int)ps.num_threads;
}

static int send_fd(int sock, pid_t pid, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &pid, sizeof pid };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof pid ? 0 : -1;
}

static pid_t recv_fd(int sock, int *fd)
{
	pid_t pid = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &pid, sizeof pid };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (n != (ssize_t)sizeof pid || pid <= 0 || !cm || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(fd, CMSG_DATA(cm), sizeof *fd);
	return pid;
}

/* Several threads: fork() makes a consistent single-threaded copy, which
 * clones the real child (with `extra`: CLONE_PARENT makes it the caller's
 * child; 0 leaves it the copy's, reparented when the copy exits) and hands
 * its pidfd back. */
static pid_t fork_via_copy(unsigned long extra, int *pidfd)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid_t mid = fork();
	if (mid < 0) {
		int err = errno;
		close(sv[0]);
		close(sv[1]);
		errno = err;
		return -1;
	}
	if (mid == 0) {
		close(sv[0]);
		int fd = -1;
		pid_t c = clone_pidfd(extra, &fd);
		if (c == 0) {
			close(sv[1]);
			return 0; /* the child */
		}
		_exit(c > 0 && send_fd(sv[1], c, fd) == 0 ? 0 : 1);
	}
	close(sv[1]);
	pid_t c = recv_fd(sv[0], pidfd);
	int err = errno;
	close(sv[0]);
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	errno = c > 0 ? 0 : err ? err : EAGAIN;
	return c > 0 ? c : -1;
}

static bool subreaper(void)
{
	int on = 0;
	return prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0) == 0 && on;
}

/* Set in a session process once its seccomp gate is on; inherited by its
 * forks (checkpoints, copies). */
static bool gated;

void forkfd_gated(void)
{
	gated = true;
}

pid_t fork_pidfd(int *pidfd)
{
	*pidfd = -1;
	if (threads() == 1)
		return clone_pidfd(0, pidfd);
	/* Behind the gate, which refuses CLONE_PARENT (jail/seccomp.h), the
	 * caller is a subreaper (a session, a resumed checkpoint, a copy) and
	 * gets the copy's child as its own when the copy exits.  Elsewhere (the
	 * zygote) the child is made the caller's at once: a child that set
	 * PR_SET_PDEATHSIG while the copy was still its parent would die with
	 * it. */
	return fork_via_copy(gated && subreaper() ? 0 : CLONE_PARENT, pidfd);
}

pid_t fork_pidfd_sibling(int *pidfd)
{
	*pidfd = -1;
	if (threads() == 1)
		return clone_pidfd(CLONE_PARENT, pidfd);
	/* With several threads the child is the copy's, and is reparented
	 * above the caller once the copy exits: the caller stops being a
	 * subreaper for that moment (one request to the gate, as the
	 * CLONE_PARENT of one thread is), and is one again after. */
	bool was = subreaper();
	if (was && prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) < 0)
		return -1;
	pid_t c = fork_via_copy(0, pidfd);
	int err = errno;
	if (was)
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	errno = err;
	return c;
}
