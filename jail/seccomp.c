/* Jail layer 6 (last): the seccomp allow-list, built with libseccomp.
 *
 * Default: EPERM for every syscall not listed (new kernel interfaces start
 * closed).  A foreign architecture (int 0x80 i386 calls) or an x32 syscall
 * number (__X32_SYSCALL_BIT) kills the process: those are other syscall
 * tables, the classic way around a filter written for x86_64.
 *
 * The list is what CPython 3.11, numpy, pandas and matplotlib were traced
 * calling (strace -f of imports, BLAS, read_csv/groupby, savefig to PNG, SVG
 * and PDF, threads, fork, multiprocessing.Pool, ctypes callbacks, tempfile,
 * shutil, signals and timers) plus the zygote's own needs, grouped by
 * purpose; entries that need a reason have one. */
#include "seccomp.h"

#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"

#define NR_FCHMODAT2 452 /* x86_64, aarch64 and the generic table alike */

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *const allow[] = {
	/* I/O on descriptors */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3",
	"fcntl", "flock", "fsync", "fdatasync", "ftruncate", "fallocate", "fadvise64",
	"readahead", "sendfile", "copy_file_range", "splice", "tee",
	/* Paths: the mount tree and Landlock decide which ones */
	/* open, openat, creat, mkdir, mkdirat, mknod, mknodat, umask (and
	 * chmod, fchmod, fchmodat with the mount tree): filtered on their mode
	 * below; openat2 and fchmodat2 ENOSYS. */
	"stat", "fstat", "lstat", "newfstatat",
	"statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink",
	"readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
	"rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"link", "linkat", "symlink", "symlinkat", /* where: Landlock's MAKE_* rights */
	/* setxattr and removexattr are not listed, in either mode: the
	 * attribute's name is in memory, so seccomp cannot tell user.* from
	 * system.posix_acl_access (an ACL that opens a workspace file or the
	 * workspace itself to other users) or security.capability.
	 * shutil.copystat ignores EPERM there. */
	"getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
	"inotify_init", "inotify_init1", "inotify_rm_watch", /* inotify_add_watch: below */
	"syncfs",
	/* Memory.  mprotect/mmap with PROT_EXEC stay: libffi closures (ctypes
	 * callbacks) and numpy's dispatch need them. */
	"brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore",
	"mlock", "mlock2", "munlock", /* bounded by RLIMIT_MEMLOCK */
	"membarrier", "memfd_create", /* exec of a memfd is execveat: refused */
	/* Processes and threads (clone is filtered below) */
	"fork", "vfork", "exit", "exit_group", "wait4", "waitid", "getpid", "getppid",
	"gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
	"getgroups", "getpgid", "getpgrp", "getsid", "setsid", "setpgid",
	"set_tid_address", "set_robust_list", "rseq", "arch_prctl",
	"prctl", /* PR_SET_NAME, PDEATHSIG, NO_NEW_PRIVS; the dangerous ones need capabilities */
	"futex", "futex_waitv", "sched_yield", "sched_getaffinity",
	/* sched_setaffinity: its own thread only (below) */
	"sched_getparam", "sched_getscheduler", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getattr", "getpriority", "getcpu",
	"getrlimit", "setrlimit", /* itself only; hard limits can only go down */
	"getrusage", "times", "sysinfo", "uname", "getrandom",
	/* Signals: Landlock's signal scope, the pid namespace and the uid
	 * confine the targets. */
	"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "rt_sigsuspend", "sigaltstack", "pause", "signalfd",
	"signalfd4", "restart_syscall",
	/* pidfd_open is not listed: the zygote and the sessions get their
	 * children's pidfds from clone(CLONE_PIDFD) (interp/forkfd.c).
	 * Attack: without a pid namespace, os.pidfd_open(pid) opened any
	 * process of the host (as nobody), and a pidfd written up to the
	 * server is an identity it acts on. */
	"pidfd_send_signal", /* Landlock's signal scope confines the target */
	/* Time */
	"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday",
	"time", "alarm", "setitimer", "getitimer", "timer_create", "timer_settime",
	"timer_gettime", "timer_getoverrun", "timer_delete", "timerfd_create",
	"timerfd_settime", "timerfd_gettime",
	/* Waiting */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
	"pipe", "pipe2",
	/* Sockets: socket() and socketpair() are filtered below; the rest act
	 * on fds the code could get (unix sockets, socketpairs, SCM_RIGHTS). */
	"bind", "listen", "accept", "accept4", "connect", "getsockname",
	"getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
	"recvmmsg", "shutdown", "setsockopt", "getsockopt",
	/* Only ever tighten: a session's nested Landlock domain, user code's
	 * own filters. */
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp",
	"capget",
	NULL,
};

/* Metadata changes.  With the mount tree, everything outside the workspace
 * is a read-only bind (EROFS) or not there at all.  Without it (the
 * namespace-free mode) they are refused outright: Landlock has no right for
 * them, and the sandbox's uid owns the project's files (the user's own), so
 * chmod, utime, chown to its own groups or an xattr would change files the
 * policy only lets it read.  A filter cannot tell which file a path or an fd
 * names, so nothing here can be allowed for the workspace alone: the
 * bootstrap lets shutil's copies go on without the metadata and says so. */
static const char *const metadata[] = {
	/* chmod, fchmod, fchmodat: also filtered on the mode (below) */
	"utime", "utimes", "utimensat", "futimesat",
	"chown", "fchown", "lchown", "fchownat", /* no capability: own ids only */
	NULL,
};

/* inotify_add_watch: with the mount tree only.  A watch needs no more than
 * read permission on the directory, and Landlock does not mediate it:
 * without the tree it would report the names of what is created, opened
 * and deleted in any directory the uid may read (~/.ssh for the user's own
 * uid, /root for an effective uid 0). */
static const char *const watch[] = { "inotify_add_watch", NULL };

/* The ioctls allowed without the mount tree (everything else: EPERM).  With
 * it, a modifying ioctl on a file the code may only read fails on the
 * read-only bind (mnt_want_write_file); without it nothing but the filter
 * stops the ones that check ownership or write permission themselves on a
 * descriptor opened for reading: FS_IOC_SETVERSION, FS_IOC_ENABLE_VERITY
 * (the file becomes immutable), the encryption policies, btrfs's subvolume
 * and snapshot calls (a directory made where Landlock allows none), each
 * filesystem's own.  The list is what the interpreter and the stack were
 * traced using (isatty, terminal size, FIOCLEX), the terminal and socket
 * queries around them, and the read-only file queries. */
static const uint64_t nsfree_ioctls[] = {
	0x5401, 0x5402, 0x5403, 0x5404, /* TCGETS, TCSETS, TCSETSW, TCSETSF */
	0x802c542a, 0x402c542b,         /* TCGETS2, TCSETS2 */
	0x5409, 0x540a, 0x540b,         /* TCSBRK, TCXONC, TCFLSH */
	0x540f, 0x5411, 0x5413, 0x5414, /* TIOCGPGRP, TIOCOUTQ, TIOCGWINSZ, TIOCSWINSZ */
	0x541b, 0x5421, 0x5429,         /* FIONREAD, FIONBIO, TIOCGSID */
	0x5450, 0x5451, 0x5452,         /* FIONCLEX, FIOCLEX, FIOASYNC */
	0x2, 0x80086601, 0x80087601,    /* FIGETBSZ, FS_IOC_GETFLAGS, FS_IOC_GETVERSION */
	0xc020660b, 0x801c581f,         /* FS_IOC_FIEMAP, FS_IOC_FSGETXATTR */
	0x40049409, 0x4020940d,         /* FICLONE, FICLONERANGE (into a writable fd) */
	0x80045200,                     /* RNDGETENTCNT */
};

/* System V IPC: in the jail's own ipc namespace only; without one, the
 * host's segments and semaphores (another program's shared memory, same
 * uid) would be there to attach: refused.  Shared memory also needs its
 * segments removed at their last detach (jail_report.sysv_shm), or it would be
 * memory the watchdog cannot see. */
static const char *const sysv_sem[] = {
	"semget", "semop", "semctl", "semtimedop", NULL,
};
static const char *const sysv_shm[] = {
	"shmget", "shmat", "shmdt", "shmctl", NULL,
};

/* Not in the list, so EPERM, and named here because each is an escape or
 * a kernel attack surface: ptrace, process_vm_readv/writev, pidfd_getfd
 * (other processes' memory and fds); io_uring_* (a second syscall path
 * seccomp does not see, and a CVE source); bpf, perf_event_open,
 * userfaultfd (kernel exploitation primitives); keyctl, add_key,
 * request_key (the kernel keyring is not namespaced); mount, umount2,
 * pivot_root, move_mount, open_tree, fsopen, fsconfig, fsmount, fspick,
 * mount_setattr, chroot, unshare, setns (rebuilding the jail);
 * open_by_handle_at (reads any file of a filesystem: "shocker"); kcmp,
 * setuid/setgid and friends, capset, reboot, swapon, init_module, kexec_*,
 * acct, quotactl, syslog, vhangup.
 *
 * The scheduling family acts on other processes by pid, and the kernel lets
 * any process of the same uid use it: without a pid namespace that is every
 * host process of the sandbox's uid and the server itself (the server run
 * by nobody, or by the user), with one it is the zygote and the other
 * sessions.  Attack: os.sched_setaffinity(server_pid, {0}) pinned the
 * server to one CPU (taskset -p: mask 3 -> 1); a nice or I/O priority, a
 * NUMA page migration, would slow it the same way.  Not listed, so never:
 * sched_setscheduler, sched_setparam, sched_setattr (a policy of their own
 * is nothing a cell needs, and SCHED_FIFO under a raised RLIMIT_RTPRIO
 * would starve the host), ioprio_set, migrate_pages, move_pages,
 * process_madvise, pidfd_open (above), kcmp, get_robust_list.  Filtered to
 * the caller itself (pid 0): sched_setaffinity, setpriority, prlimit64
 * (below).  A process cannot be named by a pid the filter could compare
 * with its own (seccomp sees the argument, not who the caller is), so
 * another process of the same session is refused too: each one sets its
 * own with pid 0 (the bootstrap maps os.getpid() to 0).  Their siblings:
 * prctl(PR_SCHED_CORE), refused by the second filter; the writable
 * /proc/PID files (oom_score_adj, autogroup, timerslack_ns), which
 * Landlock does not let the sandbox write; ptrace-checked files and
 * calls, Landlock's ptrace rule. */

/* A second filter, stacked on the allow-list (the kernel runs both and the
 * strictest answer wins): TIOCSTI pushes characters into a terminal's input
 * (a command typed into the shell that started the server), TIOCLINUX can do
 * the same on a console.  The kernel reads cmd as 32 bits, so the comparison
 * masks the upper half: 0x100005412 is TIOCSTI too. */
#ifndef FS_IOC_SETFLAGS
#define FS_IOC_SETFLAGS 0x40086602
#endif
#ifndef FS_IOC_FSSETXATTR
#define FS_IOC_FSSETXATTR 0x401c5820
#endif

/* nsfree: also FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR (chattr: the
 * append-only, no-dump, no-atime... flags of a file the uid owns) - more
 * metadata that a read-only bind would have refused (EROFS).
 * Both modes: prctl(PR_SCHED_CORE), which shares a core-scheduling cookie
 * with another process by pid (a sibling of sched_setaffinity). */
static int ioctl_filter(bool nsfree)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)TIOCSTI));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)TIOCLINUX));
	static const uint64_t flags_ioctls[] = { FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR };
	for (size_t i = 0; nsfree && rc == 0 && i < 2; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, flags_ioctls[i]));
	/* Leases, in both modes: a lease needs only to own the file (the
	 * sandbox's uid owns the project's files, or root's own them), and
	 * a read lease on one makes every writer on the host (the agent's
	 * editor, the user's shell, a package upgrade) wait for it, 45 s by
	 * default. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fcntl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)F_SETLEASE));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)PR_SCHED_CORE));
	if (rc == 0 && jail_knob_pfc())
		seccomp_export_pfc(ctx, STDERR_FILENO);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

int seccomp_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	const struct policy *p = c->policy;
	struct jail_layer *l = &r->layer[JL_SECCOMP];
	if (jail_disabled("seccomp")) {
		l->state = JS_NOT_AVAILABLE;
		snprintf(l->detail, sizeof l->detail, "disabled by PSM_JAIL_DISABLE");
		return 0;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return err_set(e, -ENOMEM, "jail: seccomp_init");
	int rc = 0, n = 0;
	const char *what = "";
#define CHECK(expr, name)                            \
	do {                                         \
		if (rc == 0 && (rc = (expr)) < 0)    \
			what = (name);               \
	} while (0)

	/* libseccomp's filter for x86_64 also sends syscall numbers with the
	 * x32 bit to this action. */
	CHECK(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "badarch");
	/* A binary tree of syscall numbers instead of a linear chain: every
	 * syscall of the session runs through this filter, and the list is
	 * long (with the filtered calls, about 230 entries). */
	CHECK(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2), "optimize");
	/* The mode: with the mount tree or without (jail.c: judge). */
	bool nsfree = r->layer[JL_MOUNTNS].state != JS_APPLIED;
	bool ipcns = r->layer[JL_IPCNS].state == JS_APPLIED;
	const char *const *lists[] = { allow, nsfree ? NULL : metadata, nsfree ? NULL : watch,
				       ipcns ? sysv_sem : NULL, ipcns && r->sysv_shm ? sysv_shm : NULL };
	for (size_t li = 0; li < sizeof lists / sizeof lists[0]; li++)
		for (const char *const *s = lists[li]; s && *s; s++) {
			/* A memfd is memory no RSS shows until it is mapped:
			 * refused where the server could not count it. */
			if (c->no_memfd && strcmp(*s, "memfd_create") == 0)
				continue;
			int nr = seccomp_syscall_resolve_name(*s);
			if (nr == __NR_SCMP_ERROR)
				continue; /* not on this architecture */
			CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0), *s);
			n++;
		}
	/* truncate(2) by path: Landlock's TRUNCATE right (ABI 3) covers it;
	 * below that, only the mount tree's read-only binds did. */
	if (!nsfree || landlock_abi() >= 3)
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(truncate), 0), "truncate");

	/* Modes.  nosuid on the jail's mounts protects nobody who runs the
	 * file from the host: a setuid or setgid bit the code sets stays on
	 * the host's disk (a copy of /usr/bin/id made setuid root when the
	 * workspace is root's).  So no call may ask for those bits: chmod and
	 * friends (with the mount tree; without it they are refused outright,
	 * see metadata) also refuse sticky and group or other write (a
	 * workspace, or a file in it, opened to other users of the host);
	 * open, creat, mkdir and mknod refuse setuid and setgid (their group
	 * and other bits go through the umask, which must keep 022).  mknod
	 * makes regular files, FIFOs and sockets only (Landlock decides
	 * where), never device nodes.  The kernel reads a mode_t: the masks
	 * cover the low bits. */
	const uint64_t CHMOD_BAD = S_ISUID | S_ISGID | S_ISVTX | S_IWGRP | S_IWOTH;
	const uint64_t CREATE_BAD = S_ISUID | S_ISGID;
	/* Each call whose mode is checked: the argument that holds it, the
	 * bits of it that are compared (mask) and the value they must have. */
	struct mode_rule {
		int nr;
		const char *name;
		unsigned arg;
		uint64_t mask, value;
	};
	const struct mode_rule chmods[] = {
		{ SCMP_SYS(chmod), "chmod", 1, CHMOD_BAD, 0 },
		{ SCMP_SYS(fchmod), "fchmod", 1, CHMOD_BAD, 0 },
		{ SCMP_SYS(fchmodat), "fchmodat", 2, CHMOD_BAD, 0 },
	};
	struct mode_rule creates[] = {
		{ SCMP_SYS(open), "open", 2, CREATE_BAD, 0 },
		{ SCMP_SYS(openat), "openat", 3, CREATE_BAD, 0 },
		{ SCMP_SYS(creat), "creat", 1, CREATE_BAD, 0 },
		{ SCMP_SYS(mkdir), "mkdir", 1, CREATE_BAD, 0 },
		{ SCMP_SYS(mkdirat), "mkdirat", 2, CREATE_BAD, 0 },
		/* mknod's mode also names the node's type: one rule per type
		 * allowed (value filled below). */
		{ SCMP_SYS(mknod), "mknod", 1, S_IFMT | CREATE_BAD, 0 },
		{ SCMP_SYS(mknodat), "mknodat", 2, S_IFMT | CREATE_BAD, 0 },
	};
	if (!nsfree)
		for (size_t i = 0; i < N_ELEMENTS(chmods); i++)
			CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, chmods[i].nr, 1,
					       SCMP_CMP(chmods[i].arg, SCMP_CMP_MASKED_EQ, chmods[i].mask, chmods[i].value)),
			      chmods[i].name);
	/* fchmodat2 (newer than this libseccomp's table: by number) and
	 * openat2 (its mode is in a struct seccomp cannot read): ENOSYS, and
	 * the C library falls back to the calls filtered here. */
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), NR_FCHMODAT2, 0), "fchmodat2");
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0), "openat2");
	static const uint64_t node_types[] = { 0, S_IFREG, S_IFIFO, S_IFSOCK };
	for (size_t i = 0; i < N_ELEMENTS(creates); i++) {
		bool node = creates[i].mask & S_IFMT;
		for (size_t t = 0; t < (node ? N_ELEMENTS(node_types) : 1); t++) {
			creates[i].value = node ? node_types[t] : 0;
			CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, creates[i].nr, 1,
					       SCMP_CMP(creates[i].arg, SCMP_CMP_MASKED_EQ, creates[i].mask, creates[i].value)),
			      creates[i].name);
		}
	}
	/* umask: only masks that keep group and other write off (the jail
	 * starts with 022 added to the server's). */
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(umask), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, S_IWGRP | S_IWOTH, S_IWGRP | S_IWOTH)), "umask");

	/* clone: threads and plain fork only.  A CLONE_NEW* flag would build
	 * new namespaces (a user namespace hands back every capability). */
	const uint64_t NEWNS = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
			       CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, NEWNS, 0)), "clone");
	/* clone3 passes its flags in memory, which seccomp cannot read:
	 * answer ENOSYS and glibc falls back to clone, filtered above. */
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "clone3");

	if (p->shell_exec) {
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(execve), 0), "execve");
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(execveat), 0), "execveat");
	}

	/* socket: none at all when net_access is false.  Not even AF_UNIX: a
	 * host process listening on a pathname socket inside ROOT (a dev
	 * server, a language server, a daemon's control socket) would be
	 * reachable with connect(), and neither seccomp nor Landlock can tell
	 * a path inside the sandbox from one outside.  Without the mount tree
	 * and the network namespace, a unix socket reaches the host's daemons
	 * (/run/docker.sock, an abstract socket of the session bus): none
	 * then, whatever net_access says.  Without socket(), the only unix
	 * sockets are socketpair()'s, already connected to each other:
	 * connect() on them fails (EISCONN) and a stream or seqpacket socket
	 * ignores or refuses a destination address.  A datagram pair would
	 * not: sendto(path) on it reaches any host datagram socket, so
	 * socketpair() is limited to SOCK_STREAM and SOCK_SEQPACKET (the type
	 * in the low bits; SOCK_CLOEXEC and SOCK_NONBLOCK above them) unless
	 * unix sockets are allowed anyway.  multiprocessing.Pool, Queue and
	 * Pipe use pipes and stream pairs. */
	const uint64_t TYPE_MASK = 0xf;
	bool unix_ok = p->net_access && !nsfree;
	if (unix_ok) {
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				       SCMP_A0(SCMP_CMP_EQ, AF_UNIX)), "socket");
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 0), "socketpair");
	} else {
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, TYPE_MASK, SOCK_STREAM)), "socketpair");
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, TYPE_MASK, SOCK_SEQPACKET)), "socketpair");
	}
	if (p->net_access) {
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				       SCMP_A0(SCMP_CMP_EQ, AF_INET)), "socket");
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				       SCMP_A0(SCMP_CMP_EQ, AF_INET6)), "socket");
		/* getaddrinfo asks rtnetlink which address families are up. */
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				       SCMP_A0(SCMP_CMP_EQ, AF_NETLINK)), "socket");
	}

	/* ioctl is allowed here; TIOCSTI and TIOCLINUX are refused by the
	 * second filter (ioctl_filter): libseccomp cannot express "allow
	 * unless the argument is X" in a default-deny filter.  Without the
	 * mount tree, only the listed ones (nsfree_ioctls), and a socket's
	 * (type 0x89: SIOC*; those that change anything need CAP_NET_ADMIN)
	 * where sockets are allowed.  The kernel reads cmd as 32 bits. */
	if (!nsfree)
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 0), "ioctl");
	for (size_t i = 0; nsfree && i < N_ELEMENTS(nsfree_ioctls); i++)
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, nsfree_ioctls[i])), "ioctl");
	if (nsfree && p->net_access)
		CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00ULL, 0x8900ULL)), "ioctl");

	/* personality: only the query and the default.  READ_IMPLIES_EXEC,
	 * ADDR_NO_RANDOMIZE and friends weaken the next exec.  The kernel
	 * reads 32 bits (and callers sign-extend 0xffffffff): mask. */
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, 0xffffffffULL)), "personality");
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (uint64_t)PER_LINUX)), "personality");

	/* Resource limits, priority and CPU affinity of itself only (pid/who
	 * 0): not the zygote's, not another session's, not the server's (see
	 * the scheduling family above).  sched_setaffinity with pid 0 sets the
	 * calling thread's (OpenBLAS pins its own threads so); the kernel reads
	 * a pid_t: the mask covers the low 32 bits. */
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sched_setaffinity), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, 0)), "sched_setaffinity");
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
			       SCMP_A0(SCMP_CMP_EQ, 0)), "prlimit64");
	CHECK(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setpriority), 2,
			       SCMP_A0(SCMP_CMP_EQ, PRIO_PROCESS), SCMP_A1(SCMP_CMP_EQ, 0)),
	      "setpriority");
#undef CHECK
	if (rc < 0) {
		seccomp_release(ctx);
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp rule for %s", what);
	}
	if (jail_knob_pfc()) /* debugging aid: the filter as text */
		seccomp_export_pfc(ctx, STDERR_FILENO);
	if ((rc = ioctl_filter(nsfree)) < 0) {
		seccomp_release(ctx);
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp ioctl filter");
	}
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp_load");
	}
	l->state = JS_APPLIED;
	snprintf(l->detail, sizeof l->detail,
		 "%d syscalls; filtered: clone, socket (%s), socketpair, modes (no setuid/setgid, "
		 "g/o write), mknod, umask, ioctl (%s), fcntl (no leases), personality, prlimit, "
		 "sched_setaffinity, setpriority (itself only); no pidfd_open; execve %s; clone3, openat2 ENOSYS%s%s%s",
		 n, p->net_access ? (nsfree ? "inet, inet6, netlink" : "unix, inet, inet6, netlink")
				  : "none",
		 nsfree ? "queries only" : "no TIOCSTI",
		 p->shell_exec ? "allowed" : "refused",
		 nsfree ? "; no chmod/chown/utime, no inotify" : "",
		 !ipcns ? "; no SysV IPC" : r->sysv_shm ? "" : "; no SysV shared memory",
		 c->no_memfd ? "; no memfd_create" : "");
	return 0;
}
