/* The seccomp filters (jail/seccomp.c) on the real kernel: for each mode a
 * child process loads them, as the zygote does, then makes each call of a
 * table and reports what the kernel answered.  The table says, per mode,
 * what each call must get: 0 (the filter let it through and it succeeded),
 * EPERM or ENOSYS (the filter answered), or the errno the call itself gives
 * once let through (ENOENT for a path that does not exist, EBADF for fd -1,
 * EINVAL...), so that "let through" is told apart from "refused" without
 * any call doing harm.  Each row of the filter's tables is pinned by a call
 * here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/uio.h>

#include "../../common/util.h"
#include "../../jail/landlock.h"
#include "../../jail/seccomp.h"

/* The modes the jail runs in, as the report and the policy give them. */
enum mode {
	TREE,      /* the mount tree; the built-in policy: no network, no programs */
	TREE_OPEN, /* the mount tree; net_access and shell_exec true; SysV IPC */
	NSFREE,    /* no mount tree (Landlock + seccomp), the built-in policy */
	NSFREE_OPEN, /* no mount tree; net_access and shell_exec; no memfd */
	NSFREE_ABI2, /* no mount tree, Landlock older than ABI 3 */
	N_MODES
};

static const char *const mode_names[N_MODES] = {
	"tree", "tree, open policy", "no tree", "no tree, open policy", "no tree, Landlock ABI 2",
};

static const char *const NOPATH = "/psm-test-seccomp-none/x";

/* Each call returns 0 or the errno it failed with. */
static int res(long r)
{
	return r < 0 ? errno : 0;
}

static int p_socket_inet(void) { return res(socket(AF_INET, SOCK_STREAM, 0)); }
static int p_socket_inet6(void) { return res(socket(AF_INET6, SOCK_DGRAM, 0)); }
static int p_socket_netlink(void) { return res(socket(AF_NETLINK, SOCK_RAW, 0)); }
static int p_socket_unix(void) { return res(socket(AF_UNIX, SOCK_STREAM, 0)); }
static int p_socket_packet(void) { return res(socket(AF_PACKET, SOCK_RAW, 0)); }
static int p_pair_stream(void)
{
	int sv[2];
	return res(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
}
static int p_pair_seqpacket(void)
{
	int sv[2];
	return res(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
}
static int p_pair_dgram(void)
{
	int sv[2];
	return res(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
}
static int p_clone3(void) { return res(syscall(SYS_clone3, NULL, 0)); }
/* Were a clone let through, its child leaves at once. */
static int p_clone(unsigned long flags)
{
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	return res(r);
}
static int p_clone_fork(void) { return p_clone(0); }
static int p_clone_newuser(void) { return p_clone(CLONE_NEWUSER); }
static int p_clone_newnet(void) { return p_clone(CLONE_NEWNET); }
static int p_openat2(void) { return res(syscall(SYS_openat2, AT_FDCWD, NOPATH, NULL, 0)); }
static int p_fchmodat2(void) { return res(syscall(452, AT_FDCWD, NOPATH, 0644, 0)); }
static int p_chmod_plain(void) { return res(chmod(NOPATH, 0644)); }
static int p_chmod_setuid(void) { return res(chmod(NOPATH, 04755)); }
static int p_chmod_sticky(void) { return res(chmod(NOPATH, 01755)); }
static int p_chmod_gwrite(void) { return res(chmod(NOPATH, 0664)); }
static int p_fchmod_owrite(void) { return res(fchmod(-1, 0646)); }
static int p_fchmod_plain(void) { return res(fchmod(-1, 0644)); }
static int p_fchmodat_setgid(void) { return res(fchmodat(AT_FDCWD, NOPATH, 02755, 0)); }
static int p_open_plain(void) { return res(syscall(SYS_open, NOPATH, O_WRONLY | O_CREAT, 0644)); }
static int p_open_setuid(void) { return res(syscall(SYS_open, NOPATH, O_WRONLY | O_CREAT, 04644)); }
static int p_openat_setgid(void) { return res(syscall(SYS_openat, AT_FDCWD, NOPATH, O_WRONLY | O_CREAT, 02644)); }
static int p_openat_plain(void) { return res(syscall(SYS_openat, AT_FDCWD, NOPATH, O_RDONLY, 0)); }
static int p_creat_plain(void) { return res(syscall(SYS_creat, NOPATH, 0644)); }
static int p_creat_setuid(void) { return res(syscall(SYS_creat, NOPATH, 04644)); }
static int p_mkdir_setgid(void) { return res(mkdir(NOPATH, 02755)); }
static int p_mkdir_plain(void) { return res(mkdir(NOPATH, 0755)); }
static int p_mkdirat_plain(void) { return res(mkdirat(AT_FDCWD, NOPATH, 0700)); }
static int p_mkdirat_setuid(void) { return res(mkdirat(AT_FDCWD, NOPATH, 04755)); }
static int p_mknod_fifo(void) { return res(mknod(NOPATH, S_IFIFO | 0600, 0)); }
static int p_mknod_reg(void) { return res(mknod(NOPATH, 0600, 0)); }
static int p_mknod_sock(void) { return res(mknodat(AT_FDCWD, NOPATH, S_IFSOCK | 0600, 0)); }
static int p_mknod_chr(void) { return res(mknod(NOPATH, S_IFCHR | 0600, makedev(1, 3))); }
static int p_mknodat_blk(void) { return res(mknodat(AT_FDCWD, NOPATH, S_IFBLK | 0600, makedev(8, 0))); }
static int p_mknod_fifo_setuid(void) { return res(mknod(NOPATH, S_IFIFO | 04600, 0)); }
static int p_umask_open(void) { return res(syscall(SYS_umask, 0)); }
static int p_umask_022(void) { return res(syscall(SYS_umask, 022)); }
static int p_execve(void)
{
	char *const argv[] = { "x", NULL };
	return res(execve(NOPATH, argv, argv + 1));
}
static int p_execveat(void) { return res(syscall(SYS_execveat, AT_FDCWD, NOPATH, NULL, NULL, 0)); }
static int p_truncate(void) { return res(truncate(NOPATH, 0)); }
static int p_utimensat(void) { return res(utimensat(AT_FDCWD, NOPATH, NULL, 0)); }
static int p_chown(void) { return res(chown(NOPATH, (uid_t)-1, (gid_t)-1)); }
static int p_inotify_watch(void) { return res(inotify_add_watch(-1, "/", IN_ALL_EVENTS)); }
static int p_memfd(void) { return res(syscall(SYS_memfd_create, "t", 0)); }
static int p_semctl(void) { return res(syscall(SYS_semctl, -1, 0, IPC_STAT, NULL)); }
static int p_shmctl(void) { return res(syscall(SYS_shmctl, -1, IPC_STAT, NULL)); }
static int p_ioctl_tiocsti(void)
{
	char c = 'x';
	return res(ioctl(-1, TIOCSTI, &c));
}
/* The kernel reads cmd as 32 bits: the upper half set is TIOCSTI still. */
static int p_ioctl_tiocsti_high(void) { return res(syscall(SYS_ioctl, -1, 0x100000000ULL | TIOCSTI, 0)); }
static int p_ioctl_tioclinux(void) { return res(syscall(SYS_ioctl, -1, 0x541C, 0)); }
static int p_ioctl_fionread(void)
{
	int n;
	return res(ioctl(-1, FIONREAD, &n));
}
static int p_ioctl_tcgets(void) { return res(syscall(SYS_ioctl, -1, 0x5401, 0)); }
static int p_ioctl_setflags(void) { return res(syscall(SYS_ioctl, -1, FS_IOC_SETFLAGS, 0)); }
static int p_ioctl_fssetxattr(void) { return res(syscall(SYS_ioctl, -1, FS_IOC_FSSETXATTR, 0)); }
static int p_ioctl_setversion(void) { return res(syscall(SYS_ioctl, -1, FS_IOC_SETVERSION, 0)); }
static int p_ioctl_ficlone(void) { return res(syscall(SYS_ioctl, -1, FICLONE, 0)); }
static int p_ioctl_siocgifconf(void) { return res(syscall(SYS_ioctl, -1, 0x8912, 0)); }
static int p_fcntl_setlease(void) { return res(fcntl(-1, F_SETLEASE, F_RDLCK)); }
static int p_fcntl_getfd(void) { return res(fcntl(-1, F_GETFD)); }
static int p_personality_query(void) { return res(personality(0xffffffff)); }
static int p_personality_linux(void) { return res(personality(PER_LINUX)); }
static int p_personality_norandom(void) { return res(personality(PER_LINUX | ADDR_NO_RANDOMIZE)); }
static int p_affinity_self(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof s, &s) < 0)
		return -1;
	return res(sched_setaffinity(0, sizeof s, &s));
}
static int p_affinity_parent(void)
{
	cpu_set_t s;
	if (sched_getaffinity(0, sizeof s, &s) < 0)
		return -1;
	return res(sched_setaffinity(getppid(), sizeof s, &s));
}
static int p_prlimit_self(void)
{
	struct rlimit old;
	return res(syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &old));
}
static int p_prlimit_parent(void)
{
	struct rlimit old;
	return res(syscall(SYS_prlimit64, getppid(), RLIMIT_NOFILE, NULL, &old));
}
static int p_setpriority_self(void)
{
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, 0);
	if (errno)
		return -1;
	return res(setpriority(PRIO_PROCESS, 0, nice));
}
static int p_setpriority_parent(void) { return res(setpriority(PRIO_PROCESS, getppid(), 19)); }
static int p_setpriority_pgrp(void) { return res(setpriority(PRIO_PGRP, 0, 19)); }
static int p_prctl_sched_core(void) { return res(prctl(PR_SCHED_CORE, 0 /* PR_SCHED_CORE_GET */, 0, 0, 0)); }
static int p_prctl_get_name(void)
{
	char n[16];
	return res(prctl(PR_GET_NAME, n, 0, 0, 0));
}
static int p_ptrace(void) { return res(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0)); }
static int p_pidfd_open(void) { return res(syscall(SYS_pidfd_open, getpid(), 0)); }
static int p_io_uring(void) { return res(syscall(SYS_io_uring_setup, 1, NULL)); }
static int p_unshare(void) { return res(unshare(CLONE_NEWUSER)); }
static int p_setuid(void) { return res(syscall(SYS_setuid, 0)); }

/* Shorthands for the table: the filter's answers and the calls' own. */
#define OK 0
#define PERM EPERM
#define NOSYS ENOSYS
#define NOENT ENOENT
#define BADF EBADF
#define INVAL EINVAL
/* truncate(2) by path without the tree: let through where Landlock's
 * TRUNCATE right (ABI 3) confines it, refused below. */
#define LL3 -3

struct probe {
	const char *what;
	int (*call)(void);
	int expect[N_MODES]; /* tree, tree open, no tree, no tree open, no tree ABI 2 */
};

static const struct probe probes[] = {
	/* net_access: no socket to any network; unix sockets only with the
	 * tree and net_access; socketpair's datagram pairs only then. */
	{ "socket(AF_INET)", p_socket_inet, { PERM, OK, PERM, OK, PERM } },
	{ "socket(AF_INET6)", p_socket_inet6, { PERM, OK, PERM, OK, PERM } },
	{ "socket(AF_NETLINK)", p_socket_netlink, { PERM, OK, PERM, OK, PERM } },
	{ "socket(AF_UNIX)", p_socket_unix, { PERM, OK, PERM, PERM, PERM } },
	{ "socket(AF_PACKET)", p_socket_packet, { PERM, PERM, PERM, PERM, PERM } },
	{ "socketpair(SOCK_STREAM)", p_pair_stream, { OK, OK, OK, OK, OK } },
	{ "socketpair(SOCK_SEQPACKET)", p_pair_seqpacket, { OK, OK, OK, OK, OK } },
	{ "socketpair(SOCK_DGRAM)", p_pair_dgram, { PERM, OK, PERM, PERM, PERM } },
	/* Namespaces: never. */
	{ "clone3", p_clone3, { NOSYS, NOSYS, NOSYS, NOSYS, NOSYS } },
	{ "clone (a fork)", p_clone_fork, { OK, OK, OK, OK, OK } },
	{ "clone(CLONE_NEWUSER)", p_clone_newuser, { PERM, PERM, PERM, PERM, PERM } },
	{ "clone(CLONE_NEWNET)", p_clone_newnet, { PERM, PERM, PERM, PERM, PERM } },
	{ "unshare", p_unshare, { PERM, PERM, PERM, PERM, PERM } },
	/* Modes: no setuid, setgid, sticky or group/other write. */
	{ "openat2", p_openat2, { NOSYS, NOSYS, NOSYS, NOSYS, NOSYS } },
	{ "fchmodat2", p_fchmodat2, { NOSYS, NOSYS, NOSYS, NOSYS, NOSYS } },
	{ "chmod 0644", p_chmod_plain, { NOENT, NOENT, PERM, PERM, PERM } },
	{ "chmod 04755", p_chmod_setuid, { PERM, PERM, PERM, PERM, PERM } },
	{ "chmod 01755", p_chmod_sticky, { PERM, PERM, PERM, PERM, PERM } },
	{ "chmod 0664", p_chmod_gwrite, { PERM, PERM, PERM, PERM, PERM } },
	{ "fchmod 0646", p_fchmod_owrite, { PERM, PERM, PERM, PERM, PERM } },
	{ "fchmod 0644", p_fchmod_plain, { BADF, BADF, PERM, PERM, PERM } },
	{ "fchmodat 02755", p_fchmodat_setgid, { PERM, PERM, PERM, PERM, PERM } },
	{ "open O_CREAT 0644", p_open_plain, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "open O_CREAT 04644", p_open_setuid, { PERM, PERM, PERM, PERM, PERM } },
	{ "openat O_CREAT 02644", p_openat_setgid, { PERM, PERM, PERM, PERM, PERM } },
	{ "openat O_RDONLY", p_openat_plain, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "creat 0644", p_creat_plain, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "creat 04644", p_creat_setuid, { PERM, PERM, PERM, PERM, PERM } },
	{ "mkdir 02755", p_mkdir_setgid, { PERM, PERM, PERM, PERM, PERM } },
	{ "mkdir 0755", p_mkdir_plain, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "mkdirat 0700", p_mkdirat_plain, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "mkdirat 04755", p_mkdirat_setuid, { PERM, PERM, PERM, PERM, PERM } },
	{ "mknod S_IFIFO", p_mknod_fifo, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "mknod (regular, type 0)", p_mknod_reg, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "mknodat S_IFSOCK", p_mknod_sock, { NOENT, NOENT, NOENT, NOENT, NOENT } },
	{ "mknod S_IFCHR", p_mknod_chr, { PERM, PERM, PERM, PERM, PERM } },
	{ "mknodat S_IFBLK", p_mknodat_blk, { PERM, PERM, PERM, PERM, PERM } },
	{ "mknod S_IFIFO 04600", p_mknod_fifo_setuid, { PERM, PERM, PERM, PERM, PERM } },
	{ "umask(0)", p_umask_open, { PERM, PERM, PERM, PERM, PERM } },
	{ "umask(022)", p_umask_022, { OK, OK, OK, OK, OK } },
	/* shell_exec. */
	{ "execve", p_execve, { PERM, NOENT, PERM, NOENT, PERM } },
	{ "execveat", p_execveat, { PERM, NOENT, PERM, NOENT, PERM } },
	/* Without the tree: metadata, inotify, truncate below Landlock ABI 3. */
	{ "truncate", p_truncate, { NOENT, NOENT, LL3, LL3, PERM } },
	{ "utimensat", p_utimensat, { NOENT, NOENT, PERM, PERM, PERM } },
	{ "chown", p_chown, { NOENT, NOENT, PERM, PERM, PERM } },
	{ "inotify_add_watch", p_inotify_watch, { BADF, BADF, PERM, PERM, PERM } },
	/* memfd_create unless the server cannot count memfds. */
	{ "memfd_create", p_memfd, { OK, OK, OK, PERM, OK } },
	/* SysV IPC in the jail's own IPC namespace only. */
	{ "semctl", p_semctl, { INVAL, INVAL, PERM, PERM, PERM } },
	{ "shmctl", p_shmctl, { PERM, INVAL, PERM, PERM, PERM } },
	/* ioctl: TIOCSTI and TIOCLINUX never; without the tree queries only
	 * (and a socket's with net_access). */
	{ "ioctl TIOCSTI", p_ioctl_tiocsti, { PERM, PERM, PERM, PERM, PERM } },
	{ "ioctl TIOCSTI | 1 << 32", p_ioctl_tiocsti_high, { PERM, PERM, PERM, PERM, PERM } },
	{ "ioctl TIOCLINUX", p_ioctl_tioclinux, { PERM, PERM, PERM, PERM, PERM } },
	{ "ioctl FIONREAD", p_ioctl_fionread, { BADF, BADF, BADF, BADF, BADF } },
	{ "ioctl TCGETS", p_ioctl_tcgets, { BADF, BADF, BADF, BADF, BADF } },
	{ "ioctl FICLONE", p_ioctl_ficlone, { BADF, BADF, BADF, BADF, BADF } },
	{ "ioctl FS_IOC_SETFLAGS", p_ioctl_setflags, { BADF, BADF, PERM, PERM, PERM } },
	{ "ioctl FS_IOC_FSSETXATTR", p_ioctl_fssetxattr, { BADF, BADF, PERM, PERM, PERM } },
	{ "ioctl FS_IOC_SETVERSION", p_ioctl_setversion, { BADF, BADF, PERM, PERM, PERM } },
	{ "ioctl SIOCGIFCONF", p_ioctl_siocgifconf, { BADF, BADF, PERM, BADF, PERM } },
	/* Leases never. */
	{ "fcntl F_SETLEASE", p_fcntl_setlease, { PERM, PERM, PERM, PERM, PERM } },
	{ "fcntl F_GETFD", p_fcntl_getfd, { BADF, BADF, BADF, BADF, BADF } },
	/* personality: the query and the default only. */
	{ "personality(query)", p_personality_query, { OK, OK, OK, OK, OK } },
	{ "personality(PER_LINUX)", p_personality_linux, { OK, OK, OK, OK, OK } },
	{ "personality(ADDR_NO_RANDOMIZE)", p_personality_norandom, { PERM, PERM, PERM, PERM, PERM } },
	/* The scheduling family: the caller itself only. */
	{ "sched_setaffinity(0)", p_affinity_self, { OK, OK, OK, OK, OK } },
	{ "sched_setaffinity(parent)", p_affinity_parent, { PERM, PERM, PERM, PERM, PERM } },
	{ "prlimit64(0)", p_prlimit_self, { OK, OK, OK, OK, OK } },
	{ "prlimit64(parent)", p_prlimit_parent, { PERM, PERM, PERM, PERM, PERM } },
	{ "setpriority(PRIO_PROCESS, 0)", p_setpriority_self, { OK, OK, OK, OK, OK } },
	{ "setpriority(PRIO_PROCESS, parent)", p_setpriority_parent, { PERM, PERM, PERM, PERM, PERM } },
	{ "setpriority(PRIO_PGRP, 0)", p_setpriority_pgrp, { PERM, PERM, PERM, PERM, PERM } },
	{ "prctl(PR_SCHED_CORE)", p_prctl_sched_core, { PERM, PERM, PERM, PERM, PERM } },
	{ "prctl(PR_GET_NAME)", p_prctl_get_name, { OK, OK, OK, OK, OK } },
	/* Not listed: refused in every mode. */
	{ "ptrace", p_ptrace, { PERM, PERM, PERM, PERM, PERM } },
	{ "pidfd_open", p_pidfd_open, { PERM, PERM, PERM, PERM, PERM } },
	{ "io_uring_setup", p_io_uring, { PERM, PERM, PERM, PERM, PERM } },
	{ "setuid", p_setuid, { PERM, PERM, PERM, PERM, PERM } },
};

/* The jail as seccomp_apply sees it in mode m. */
static void setup(enum mode m, struct policy *p, struct jail_config *c, struct jail_report *r)
{
	bool open = m == TREE_OPEN || m == NSFREE_OPEN;
	bool tree = m == TREE || m == TREE_OPEN;
	memset(p, 0, sizeof *p);
	p->net_access = open;
	p->shell_exec = open;
	*c = (struct jail_config){ .policy = p, .root = "/", .workspace = "/tmp",
				   .no_memfd = m == NSFREE_OPEN };
	memset(r, 0, sizeof *r);
	r->layer[JL_MOUNTNS].state = tree ? JS_APPLIED : JS_NOT_AVAILABLE;
	r->layer[JL_IPCNS].state = tree ? JS_APPLIED : JS_NOT_AVAILABLE;
	r->sysv_shm = m == TREE_OPEN;
}

/* seccomp_apply for mode m, its report in *r. */
static int apply_mode(enum mode m, struct jail_report *r)
{
	struct policy p;
	struct jail_config c;
	setup(m, &p, &c, r);
	struct err e = { 0 };
	return seccomp_apply(&c, r, &e);
}

/* In a child: the filters loaded, then every probe; the answers come back
 * through the pipe, one int each (after the load's result). */
static void run_child(enum mode m, int wfd)
{
	setenv("PSM_JAIL_DISABLE", m == NSFREE_ABI2 ? "landlock-abi-2" : "", 1);
	jail_knobs_read();
	struct jail_report r;
	int rc = apply_mode(m, &r);
	int out[1 + N_ELEMENTS(probes)];
	out[0] = rc < 0 ? -rc : r.layer[JL_SECCOMP].state == JS_APPLIED ? 0 : -1;
	for (size_t i = 0; rc == 0 && i < N_ELEMENTS(probes); i++)
		out[1 + i] = probes[i].call();
	(void)!write(wfd, out, sizeof out);
	_exit(0);
}

static void check_mode(enum mode m)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		run_child(m, pfd[1]);
	}
	close(pfd[1]);
	int got[1 + N_ELEMENTS(probes)];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof got && (k = read(pfd[0], (char *)got + n, sizeof got - n)) > 0)
		n += (size_t)k;
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(n, sizeof got);
	assert_int_equal(got[0], 0); /* both filters loaded */
	int wrong = 0;
	for (size_t i = 0; i < N_ELEMENTS(probes); i++) {
		int want = probes[i].expect[m];
		if (want == LL3)
			want = landlock_abi() >= 3 ? NOENT : PERM;
		if (got[1 + i] != want) {
			fprintf(stderr, "  %s: %s: expected %s, got %s\n", mode_names[m], probes[i].what,
				want ? strerror(want) : "success",
				got[1 + i] > 0 ? strerror(got[1 + i]) : got[1 + i] ? "?" : "success");
			wrong++;
		}
	}
	assert_int_equal(wrong, 0);
}

/* One test per mode; the mode is the test's state. */
static void test_mode(void **state)
{
	check_mode(*(const enum mode *)*state);
}

/* Another syscall table is the classic way around a filter written for
 * x86_64: an x32 syscall number kills the process (not EPERM, which code
 * could go on from). */
static void test_x32_kills(void **state)
{
	(void)state;
#ifdef __x86_64__
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct jail_report r;
		if (apply_mode(TREE, &r) < 0)
			_exit(3);
		syscall(0x40000000 | SYS_getpid);
		_exit(4);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
#endif
}

/* PSM_JAIL_DISABLE=seccomp: the layer is reported missing, nothing loaded
 * (the judge then refuses to run: jail.c). */
static void test_disabled(void **state)
{
	(void)state;
	setenv("PSM_JAIL_DISABLE", "seccomp", 1);
	jail_knobs_read();
	struct jail_report r;
	assert_int_equal(apply_mode(TREE, &r), 0);
	assert_int_equal(r.layer[JL_SECCOMP].state, JS_NOT_AVAILABLE);
	assert_int_equal(prctl(PR_GET_SECCOMP, 0, 0, 0, 0), 0);
	setenv("PSM_JAIL_DISABLE", "", 1);
	jail_knobs_read();
}

/* The session's gate (seccomp_session_gate), in a child loaded as the
 * jail loads a session, with this process as the server holding the
 * listener: clone(CLONE_PARENT) refused when the server says so;
 * prctl(PR_SET_CHILD_SUBREAPER, 0) let through when it says so; a second
 * listener stacked by the code refused (EBUSY) while the server holds the
 * gate's, so the code can never answer its own requests; with the
 * listener closed, refused (ENOSYS). */
static int gate_second_listener(void)
{
	/* By the raw call, as code with ctypes would make it. */
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = N_ELEMENTS(f), .filter = f };
	return res(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog));
}

/* state: whether the gate is compiled first, as the zygote does
 * (seccomp_session_gate_prepare), or by the session itself. */
static void test_gate(void **state)
{
	bool prepared = *(bool *)*state;
	int sv[2], res_pipe[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(res_pipe, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		struct jail_report r;
		struct err e = { 0 };
		int fd = -1;
		if (apply_mode(TREE, &r) < 0)
			_exit(3);
		/* Compiled under the jail's own filter, as in the zygote. */
		if (prepared && !seccomp_session_gate_prepare())
			_exit(7);
		if (seccomp_session_gate(&fd, &e) < 0 || fd < 0)
			_exit(3);
		char c = 'g', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
		struct iovec iov = { &c, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		if (!cm)
			_exit(6);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
		if (sendmsg(sv[1], &mh, 0) != 1)
			_exit(4);
		close(fd);
		int out[5];
		out[2] = gate_second_listener();
		long cr = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (cr == 0)
			_exit(0); /* let through: a child outside the tree */
		out[0] = cr < 0 ? errno : 0;
		out[1] = res(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0));
		/* Told (by a byte) that the server closed the listener. */
		if (read(sv[1], &c, 1) != 1)
			_exit(5);
		cr = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (cr == 0)
			_exit(0);
		out[3] = cr < 0 ? errno : 0;
		/* Once no one holds the listener the kernel lets go of it, and
		 * a listener of the code's own could be stacked: the server
		 * holds each until no process with the filter is left
		 * (supervisor/gate.c). */
		out[4] = gate_second_listener();
		(void)!write(res_pipe[1], out, sizeof out);
		_exit(0);
	}
	close(sv[1]);
	close(res_pipe[1]);
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
	assert_int_equal(recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC), 1);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int fd = -1;
	if (cm)
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	assert_true(fd >= 0);
	/* Two requests: the clone (refused), the prctl (let through). */
	for (int i = 0; i < 2; i++) {
		struct seccomp_notif req;
		memset(&req, 0, sizeof req);
		assert_int_equal(ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req), 0);
		assert_int_equal((pid_t)req.pid, pid);
		struct seccomp_notif_resp resp = { .id = req.id };
		if (req.data.nr == SYS_clone)
			resp.error = -EPERM;
		else
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		assert_int_equal(req.data.nr, i == 0 ? SYS_clone : SYS_prctl);
		assert_int_equal(ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp), 0);
	}
	close(fd);
	assert_int_equal(write(sv[0], "x", 1), 1);
	int out[5] = { -1, -1, -1, -1, -1 };
	assert_int_equal(read(res_pipe[0], out, sizeof out), (ssize_t)sizeof out);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(out[0], EPERM);
	assert_int_equal(out[1], 0);
	assert_int_equal(out[2], EBUSY);
	assert_int_equal(out[3], ENOSYS);
	assert_int_equal(out[4], 0);
	close(sv[0]);
	close(res_pipe[0]);
}

int main(void)
{
	static enum mode modes[N_MODES] = { TREE, TREE_OPEN, NSFREE, NSFREE_OPEN, NSFREE_ABI2 };
	static bool gate_modes[2] = { false, true };
	const struct CMUnitTest tests[] = {
		{ "the mount tree", test_mode, NULL, NULL, (void *)&modes[TREE] },
		{ "the mount tree, an open policy", test_mode, NULL, NULL, (void *)&modes[TREE_OPEN] },
		{ "no mount tree", test_mode, NULL, NULL, (void *)&modes[NSFREE] },
		{ "no mount tree, an open policy, no memfd", test_mode, NULL, NULL, (void *)&modes[NSFREE_OPEN] },
		{ "no mount tree, Landlock ABI 2", test_mode, NULL, NULL, (void *)&modes[NSFREE_ABI2] },
		cmocka_unit_test(test_x32_kills),
		cmocka_unit_test(test_disabled),
		{ "the gate, compiled by the session", test_gate, NULL, NULL, (void *)&gate_modes[0] },
		{ "the gate, compiled first (as the zygote does)", test_gate, NULL, NULL, (void *)&gate_modes[1] },
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
