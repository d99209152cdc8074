/* Jail layer 6 (last): the seccomp filters, built with libseccomp.
 *
 * Two filters, stacked (the kernel runs both and the strictest answer
 * wins): an allow-list, and a short list of refusals inside what it allows.
 * The allow-list's default is EPERM for every syscall not listed (new
 * kernel interfaces start closed).  A foreign architecture (int 0x80 i386 calls) or an x32 syscall
 * number (__X32_SYSCALL_BIT) kills the process: those are other syscall
 * tables, the classic way around a filter written for x86_64.
 *
 * The list is what CPython 3.11, numpy, pandas and matplotlib were traced
 * calling (strace -f of imports, BLAS, read_csv/groupby, savefig to PNG, SVG
 * and PDF, threads, fork, multiprocessing.Pool, ctypes callbacks, tempfile,
 * shutil, signals and timers) plus the zygote's own needs, grouped by
 * purpose; entries that need a reason have one.  The calls allowed whatever
 * their arguments are lists of names (allow, metadata, ...); the calls
 * whose arguments decide are rows of a table (allow_rows, deny_rows), one
 * row a rule: the syscall, the comparisons, the action, when it applies,
 * and above it the attack it stops. */
#include "seccomp.h"

#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
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
#include <sys/syscall.h>
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
	"membarrier", /* memfd_create: below */
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

/* memfd_create: a memfd is memory no RSS shows until it is mapped, and a
 * descriptor sent over a socketpair and closed is held by no process, so
 * the server refuses it in every mode (jail_config.no_memfd; the jail's
 * own tests still run with it allowed).  Exec of a memfd is execveat:
 * refused without shell_exec. */
static const char *const memfd[] = { "memfd_create", NULL };

/* ---- when a rule applies ---- */

/* What a jail can be, as facts; a rule names the facts it needs (all of
 * them), 0 for always.  A fact and its opposite are both facts, so a rule
 * for "without the mount tree" is as plain as one for "with it". */
enum sc_fact {
	F_TREE = 1 << 0,     /* the mount tree: everything outside the workspace is a
			      * read-only bind (EROFS) or not there */
	F_NSFREE = 1 << 1,   /* no mount tree: Landlock and seccomp alone (jail.c: judge) */
	F_TRUNCATE = 1 << 2, /* truncate(2) by path is confined: the read-only binds,
			      * or Landlock's TRUNCATE right (ABI >= 3) */
	F_EXEC = 1 << 3,     /* shell_exec */
	F_NET = 1 << 4,      /* net_access */
	F_UNIX = 1 << 5,     /* unix sockets may be made: net_access with the tree */
	F_NO_UNIX = 1 << 6,  /* the opposite */
	F_IPCNS = 1 << 7,    /* the jail's own IPC namespace */
	F_SHM = 1 << 8,      /* SysV shared memory goes at its last detach (jail_report.sysv_shm) */
	F_MEMFD = 1 << 9,    /* the server can count memfds (!jail_config.no_memfd) */
};

static unsigned facts(const struct jail_config *c, const struct jail_report *r)
{
	const struct policy *p = c->policy;
	bool tree = r->layer[JL_MOUNTNS].state == JS_APPLIED;
	bool unix_ok = p->net_access && tree;
	unsigned f = tree ? F_TREE : F_NSFREE;
	if (tree || landlock_abi() >= 3)
		f |= F_TRUNCATE;
	f |= p->shell_exec ? F_EXEC : 0;
	f |= p->net_access ? F_NET : 0;
	f |= unix_ok ? F_UNIX : F_NO_UNIX;
	f |= r->layer[JL_IPCNS].state == JS_APPLIED ? F_IPCNS : 0;
	f |= r->sysv_shm ? F_SHM : 0;
	f |= jail_memfd_refused(c->no_memfd, c->stay_readable, r) ? 0 : F_MEMFD;
	return f;
}

/* The lists of names, each with the facts it needs. */
static const struct sc_list {
	const char *const *names;
	unsigned when;
} lists[] = {
	{ allow, 0 },
	{ memfd, F_MEMFD },
	{ metadata, F_TREE },
	{ watch, F_TREE },
	{ sysv_sem, F_IPCNS },
	{ sysv_shm, F_IPCNS | F_SHM },
};

/* ---- the rows ---- */

/* One rule: the syscall, its action when every comparison matches (the
 * arguments are 64-bit registers: a masked comparison looks at the bits the
 * kernel reads), and the facts it needs. */
struct sc_row {
	int nr;
	const char *name; /* for the error message */
	uint32_t action;
	unsigned when;
	unsigned n_cmp;
	struct scmp_arg_cmp cmp[2];
};

#define ALLOW SCMP_ACT_ALLOW
#define REFUSE SCMP_ACT_ERRNO(EPERM)
/* For calls whose arguments are in memory, where seccomp cannot read them:
 * the C library falls back to the older call, which is filtered. */
#define NOSYS SCMP_ACT_ERRNO(ENOSYS)

#define MASKED(i, mask, v) { .arg = (i), .op = SCMP_CMP_MASKED_EQ, .datum_a = (mask), .datum_b = (v) }
#define EQ(i, v) { .arg = (i), .op = SCMP_CMP_EQ, .datum_a = (v), .datum_b = 0 }
/* The kernel reads an int or a mode_t or a pid_t: the low 32 bits. */
#define LOW32(i, v) MASKED(i, 0xffffffffULL, (uint64_t)(v))

#define SC(sys, act, when) { SCMP_SYS(sys), #sys, act, when, 0, { { 0 } } }
#define SC_ARG(sys, act, when, c0) { SCMP_SYS(sys), #sys, act, when, 1, { c0 } }
#define SC_ARG2(sys, act, when, c0, c1) { SCMP_SYS(sys), #sys, act, when, 2, { c0, c1 } }

/* nosuid on the jail's mounts protects nobody who runs a file from the
 * host: a setuid or setgid bit the code sets stays on the host's disk (a
 * copy of /usr/bin/id made setuid root when the workspace is root's).  So
 * no call may ask for those bits; chmod and friends also refuse sticky and
 * group or other write (a workspace, or a file in it, opened to other users
 * of the host).  open, creat, mkdir and mknod refuse setuid and setgid
 * (their group and other bits go through the umask, which must keep 022). */
#define CHMOD_BAD (S_ISUID | S_ISGID | S_ISVTX | S_IWGRP | S_IWOTH)
#define CREATE_BAD (S_ISUID | S_ISGID)
/* mknod's mode also names the node's type: one row per type allowed
 * (0 is a regular file too), never a device node. */
#define MKNOD(sys, i, type) SC_ARG(sys, ALLOW, 0, MASKED(i, S_IFMT | CREATE_BAD, type))

/* clone flags that build namespaces: a user namespace hands back every
 * capability, the others rebuild what the jail hid. */
#define CLONE_NEWANY (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
		      CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
/* A socket's type is in the low bits; SOCK_CLOEXEC and SOCK_NONBLOCK above. */
#define SOCK_TYPE_MASK 0xf

/* An ioctl allowed without the mount tree (the default there: EPERM). */
#define IOCTL_QUERY(cmd) SC_ARG(ioctl, ALLOW, F_NSFREE, LOW32(1, cmd))

/* The allow-list's argument rules, in the order they are added. */
static const struct sc_row allow_rows[] = {
	/* truncate(2) by path: where nothing confines it (no tree, Landlock
	 * below ABI 3), a file the code may only read could be emptied. */
	SC(truncate, ALLOW, F_TRUNCATE),

	/* Modes (CHMOD_BAD above).  Without the tree chmod is refused
	 * outright: the sandbox's uid owns the project's files (metadata). */
	SC_ARG(chmod, ALLOW, F_TREE, MASKED(1, CHMOD_BAD, 0)),
	SC_ARG(fchmod, ALLOW, F_TREE, MASKED(1, CHMOD_BAD, 0)),
	SC_ARG(fchmodat, ALLOW, F_TREE, MASKED(2, CHMOD_BAD, 0)),
	/* fchmodat2 (newer than this libseccomp's table: by number) and
	 * openat2 (its mode is in a struct): their modes cannot be read, so
	 * the setuid bit would go through. */
	{ NR_FCHMODAT2, "fchmodat2", NOSYS, 0, 0, { { 0 } } },
	SC(openat2, NOSYS, 0),
	/* Creation modes (CREATE_BAD above): no setuid or setgid file. */
	SC_ARG(open, ALLOW, 0, MASKED(2, CREATE_BAD, 0)),
	SC_ARG(openat, ALLOW, 0, MASKED(3, CREATE_BAD, 0)),
	SC_ARG(creat, ALLOW, 0, MASKED(1, CREATE_BAD, 0)),
	SC_ARG(mkdir, ALLOW, 0, MASKED(1, CREATE_BAD, 0)),
	SC_ARG(mkdirat, ALLOW, 0, MASKED(2, CREATE_BAD, 0)),
	/* mknod: regular files, FIFOs and sockets (Landlock decides where);
	 * a device node would open the host's disks or memory. */
	MKNOD(mknod, 1, 0), MKNOD(mknod, 1, S_IFREG), MKNOD(mknod, 1, S_IFIFO), MKNOD(mknod, 1, S_IFSOCK),
	MKNOD(mknodat, 2, 0), MKNOD(mknodat, 2, S_IFREG), MKNOD(mknodat, 2, S_IFIFO), MKNOD(mknodat, 2, S_IFSOCK),
	/* umask: only masks that keep group and other write off (the jail
	 * starts with 022 added to the server's); a umask of 0 would leave
	 * world-writable files in the workspace. */
	SC_ARG(umask, ALLOW, 0, MASKED(0, S_IWGRP | S_IWOTH, S_IWGRP | S_IWOTH)),

	/* clone: threads and plain fork only, no namespace (CLONE_NEWANY). */
	SC_ARG(clone, ALLOW, 0, MASKED(0, CLONE_NEWANY, 0)),
	/* clone3 passes its flags in memory: the namespaces would go through. */
	SC(clone3, NOSYS, 0),

	/* Programs run only when shell_exec allows them. */
	SC(execve, ALLOW, F_EXEC),
	SC(execveat, ALLOW, F_EXEC),

	/* Unix sockets only with net_access and the mount tree.  Not even
	 * AF_UNIX otherwise: a host process listening on a pathname socket
	 * inside ROOT (a dev server, a language server, a daemon's control
	 * socket) would be reachable with connect(), and neither seccomp nor
	 * Landlock can tell a path inside the sandbox from one outside;
	 * without the tree and the network namespace a unix socket reaches
	 * the host's daemons (/run/docker.sock, an abstract socket of the
	 * session bus). */
	SC_ARG(socket, ALLOW, F_UNIX, EQ(0, AF_UNIX)),
	SC(socketpair, ALLOW, F_UNIX),
	/* Without socket(), the only unix sockets are socketpair()'s, already
	 * connected: connect() on them fails (EISCONN) and a stream or
	 * seqpacket socket ignores or refuses a destination address.  A
	 * datagram pair would not: sendto(path) on it reaches any host
	 * datagram socket.  multiprocessing.Pool, Queue and Pipe use pipes
	 * and stream pairs. */
	SC_ARG(socketpair, ALLOW, F_NO_UNIX, MASKED(1, SOCK_TYPE_MASK, SOCK_STREAM)),
	SC_ARG(socketpair, ALLOW, F_NO_UNIX, MASKED(1, SOCK_TYPE_MASK, SOCK_SEQPACKET)),
	/* The network only with net_access: no socket to any network at all
	 * otherwise (data sent out of the sandbox). */
	SC_ARG(socket, ALLOW, F_NET, EQ(0, AF_INET)),
	SC_ARG(socket, ALLOW, F_NET, EQ(0, AF_INET6)),
	/* getaddrinfo asks rtnetlink which address families are up. */
	SC_ARG(socket, ALLOW, F_NET, EQ(0, AF_NETLINK)),

	/* ioctl.  With the tree, any: a modifying ioctl on a file the code may
	 * only read fails on the read-only bind (mnt_want_write_file), and the
	 * stacked filter refuses the few that act beyond the file (deny_rows).
	 * Without the tree, only the queries below: nothing but the filter
	 * stops the ioctls that check ownership or write permission themselves
	 * on a descriptor opened for reading: FS_IOC_SETVERSION,
	 * FS_IOC_ENABLE_VERITY (the file becomes immutable), the encryption
	 * policies, btrfs's subvolume and snapshot calls (a directory made
	 * where Landlock allows none), each filesystem's own.  The queries are
	 * what the interpreter and the stack were traced using (isatty,
	 * terminal size, FIOCLEX), the terminal and socket queries around
	 * them, and the read-only file queries. */
	SC(ioctl, ALLOW, F_TREE),
	IOCTL_QUERY(0x5401), IOCTL_QUERY(0x5402), IOCTL_QUERY(0x5403), IOCTL_QUERY(0x5404),
						/* TCGETS, TCSETS, TCSETSW, TCSETSF */
	IOCTL_QUERY(0x802c542a), IOCTL_QUERY(0x402c542b), /* TCGETS2, TCSETS2 */
	IOCTL_QUERY(0x5409), IOCTL_QUERY(0x540a), IOCTL_QUERY(0x540b), /* TCSBRK, TCXONC, TCFLSH */
	IOCTL_QUERY(0x540f), IOCTL_QUERY(0x5411), IOCTL_QUERY(0x5413), IOCTL_QUERY(0x5414),
						/* TIOCGPGRP, TIOCOUTQ, TIOCGWINSZ, TIOCSWINSZ */
	IOCTL_QUERY(0x541b), IOCTL_QUERY(0x5421), IOCTL_QUERY(0x5429), /* FIONREAD, FIONBIO, TIOCGSID */
	IOCTL_QUERY(0x5450), IOCTL_QUERY(0x5451), IOCTL_QUERY(0x5452), /* FIONCLEX, FIOCLEX, FIOASYNC */
	IOCTL_QUERY(0x2), IOCTL_QUERY(0x80086601), IOCTL_QUERY(0x80087601),
						/* FIGETBSZ, FS_IOC_GETFLAGS, FS_IOC_GETVERSION */
	IOCTL_QUERY(0xc020660b), IOCTL_QUERY(0x801c581f), /* FS_IOC_FIEMAP, FS_IOC_FSGETXATTR */
	IOCTL_QUERY(0x40049409), IOCTL_QUERY(0x4020940d), /* FICLONE, FICLONERANGE (into a writable fd) */
	IOCTL_QUERY(0x80045200),		/* RNDGETENTCNT */
	/* A socket's (type 0x89: SIOC*) where sockets are allowed; those that
	 * change anything need CAP_NET_ADMIN, which the jail holds none of. */
	SC_ARG(ioctl, ALLOW, F_NSFREE | F_NET, MASKED(1, 0xff00ULL, 0x8900ULL)),

	/* personality: only the query and the default.  READ_IMPLIES_EXEC,
	 * ADDR_NO_RANDOMIZE and friends weaken the next exec (callers
	 * sign-extend the query's 0xffffffff). */
	SC_ARG(personality, ALLOW, 0, LOW32(0, 0xffffffffULL)),
	SC_ARG(personality, ALLOW, 0, LOW32(0, PER_LINUX)),

	/* Resource limits, priority and CPU affinity of itself only (pid or
	 * who 0): not the zygote's, not another session's, not the server's.
	 * Attack: os.sched_setaffinity(server_pid, {0}) pinned the server to
	 * one CPU (the scheduling family, above).  sched_setaffinity with pid
	 * 0 sets the calling thread's (OpenBLAS pins its own threads so). */
	SC_ARG(sched_setaffinity, ALLOW, 0, LOW32(0, 0)),
	SC_ARG(prlimit64, ALLOW, 0, EQ(0, 0)),
	SC_ARG2(setpriority, ALLOW, 0, EQ(0, PRIO_PROCESS), EQ(1, 0)),
};

#ifndef FS_IOC_SETFLAGS
#define FS_IOC_SETFLAGS 0x40086602
#endif
#ifndef FS_IOC_FSSETXATTR
#define FS_IOC_FSSETXATTR 0x401c5820
#endif

/* The stacked filter: its default is to allow, and these rows refuse what
 * the allow-list lets through (libseccomp cannot express "allow unless the
 * argument is X" in a default-deny filter). */
static const struct sc_row deny_rows[] = {
	/* TIOCSTI pushes characters into a terminal's input (a command typed
	 * into the shell that started the server); TIOCLINUX can do the same
	 * on a console.  0x100005412 is TIOCSTI too: the low 32 bits. */
	SC_ARG(ioctl, REFUSE, 0, LOW32(1, TIOCSTI)),
	SC_ARG(ioctl, REFUSE, 0, LOW32(1, TIOCLINUX)),
	/* chattr without the tree: the append-only, no-dump, no-atime...
	 * flags of a file the uid owns, metadata a read-only bind would have
	 * refused (EROFS). */
	SC_ARG(ioctl, REFUSE, F_NSFREE, LOW32(1, FS_IOC_SETFLAGS)),
	SC_ARG(ioctl, REFUSE, F_NSFREE, LOW32(1, FS_IOC_FSSETXATTR)),
	/* Leases, in both modes: a lease needs only to own the file (the
	 * sandbox's uid owns the project's files, or root's own them), and a
	 * read lease on one makes every writer on the host (the agent's
	 * editor, the user's shell, a package upgrade) wait for it, 45 s by
	 * default. */
	SC_ARG(fcntl, REFUSE, 0, LOW32(1, F_SETLEASE)),
	/* prctl(PR_SCHED_CORE) shares a core-scheduling cookie with another
	 * process by pid (a sibling of sched_setaffinity). */
	SC_ARG(prctl, REFUSE, 0, LOW32(0, PR_SCHED_CORE)),
};

/* ---- building and loading ---- */

/* Adds the rows whose facts hold; *what names the one that failed. */
static int add_rows(scmp_filter_ctx ctx, const struct sc_row *rows, size_t n, unsigned have,
		    const char **what)
{
	for (size_t i = 0; i < n; i++) {
		const struct sc_row *w = &rows[i];
		if ((w->when & have) != w->when)
			continue;
		int rc = seccomp_rule_add_array(ctx, w->action, w->nr, w->n_cmp, w->cmp);
		if (rc < 0) {
			*what = w->name;
			return rc;
		}
	}
	return 0;
}

/* A filter: its default action, whether it is a tree (the allow-list: a
 * binary tree of syscall numbers instead of a linear chain, since every
 * syscall of the session runs through it and it is long, about 230
 * entries), its lists of names and its rows. */
struct sc_filter {
	uint32_t fallback;
	bool tree;
	const struct sc_list *lists;
	size_t n_lists;
	const struct sc_row *rows;
	size_t n_rows;
};

static const struct sc_filter allow_filter = {
	SCMP_ACT_ERRNO(EPERM), true, lists, N_ELEMENTS(lists), allow_rows, N_ELEMENTS(allow_rows),
};
static const struct sc_filter deny_filter = {
	SCMP_ACT_ALLOW, false, NULL, 0, deny_rows, N_ELEMENTS(deny_rows),
};

/* Builds f for the facts in have: the names, then the rows.  *n counts the
 * names allowed (for the report); *what names what failed. */
static int build(const struct sc_filter *f, unsigned have, scmp_filter_ctx *out, int *n,
		 const char **what)
{
	scmp_filter_ctx ctx = seccomp_init(f->fallback);
	if (!ctx) {
		*what = "seccomp_init";
		return -ENOMEM;
	}
	/* libseccomp's filter for x86_64 also sends syscall numbers with the
	 * x32 bit to this action. */
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	*what = "badarch";
	if (rc == 0 && f->tree && (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		*what = "optimize";
	*n = 0;
	for (size_t li = 0; rc == 0 && li < f->n_lists; li++) {
		if ((f->lists[li].when & have) != f->lists[li].when)
			continue;
		for (const char *const *s = f->lists[li].names; rc == 0 && *s; s++) {
			int nr = seccomp_syscall_resolve_name(*s);
			if (nr == __NR_SCMP_ERROR)
				continue; /* not on this architecture */
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
				*what = *s;
			(*n)++;
		}
	}
	if (rc == 0)
		rc = add_rows(ctx, f->rows, f->n_rows, have, what);
	if (rc < 0) {
		seccomp_release(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

static void describe(const struct jail_config *c, const struct jail_report *r, unsigned have, int n,
		     struct jail_layer *l)
{
	bool nsfree = have & F_NSFREE;
	snprintf(l->detail, sizeof l->detail,
		 "%d syscalls; filtered: clone, socket (%s), socketpair, modes (no setuid/setgid, "
		 "g/o write), mknod, umask, ioctl (%s), fcntl (no leases), personality, prlimit, "
		 "sched_setaffinity, setpriority (itself only); no pidfd_open; execve %s; clone3, openat2 ENOSYS%s%s%s",
		 n, have & F_NET ? (nsfree ? "inet, inet6, netlink" : "unix, inet, inet6, netlink") : "none",
		 nsfree ? "queries only" : "no TIOCSTI",
		 have & F_EXEC ? "allowed" : "refused",
		 nsfree ? "; no chmod/chown/utime, no inotify" : "",
		 !(have & F_IPCNS) ? "; no SysV IPC" : r->sysv_shm ? "" : "; no SysV shared memory",
		 jail_memfd_refused(c->no_memfd, c->stay_readable, r) ? "; no memfd_create" : "");
}

int seccomp_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	struct jail_layer *l = &r->layer[JL_SECCOMP];
	if (jail_disabled("seccomp")) {
		l->state = JS_NOT_AVAILABLE;
		snprintf(l->detail, sizeof l->detail, "disabled by PSM_JAIL_DISABLE");
		return 0;
	}
	unsigned have = facts(c, r);
	scmp_filter_ctx allow_ctx, deny_ctx;
	const char *what = "";
	int n = 0;
	int rc = build(&allow_filter, have, &allow_ctx, &n, &what);
	if (rc < 0) {
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp rule for %s", what);
	}
	int n_deny;
	if ((rc = build(&deny_filter, have, &deny_ctx, &n_deny, &what)) < 0) {
		seccomp_release(allow_ctx);
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp ioctl filter");
	}
	if (jail_knob_pfc()) { /* a debugging aid: the filters as text */
		seccomp_export_pfc(allow_ctx, STDERR_FILENO);
		seccomp_export_pfc(deny_ctx, STDERR_FILENO);
	}
	/* The refusals, then the allow-list (seccomp(2) is on it: the order
	 * does not matter for what is enforced). */
	rc = seccomp_load(deny_ctx);
	seccomp_release(deny_ctx);
	if (rc < 0) {
		seccomp_release(allow_ctx);
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp ioctl filter");
	}
	rc = seccomp_load(allow_ctx);
	seccomp_release(allow_ctx);
	if (rc < 0) {
		l->state = JS_FAILED;
		return err_sys(e, rc, "jail: seccomp_load");
	}
	l->state = JS_APPLIED;
	describe(c, r, have, n, l);
	return 0;
}

/* ---- the session's gate (see seccomp.h) ---- */

/* The rows of the gate filter: act on each call that would make a process
 * outside the session's tree.
 * Attack: a cell calls clone(CLONE_PARENT | SIGCHLD) through ctypes from
 * the session process, whose parent is the zygote: its children are the
 * zygote's, never counted in the session's memory or processes (four of
 * 200 MB each ended "ok" under memory_mb 300; 203 of them under
 * max_processes 64 left another session unable to fork).  Or it calls
 * prctl(PR_SET_CHILD_SUBREAPER, 0) and double-forks: the orphan goes to the
 * zygote.  CLONE_PARENT from a process below the session makes a child of
 * a process of the session, harmless, but nothing in the session needs it
 * (a multi-threaded process's checkpoint is now made by reparenting to the
 * session, forkfd.c), so every one goes to the gate.  clone3 is ENOSYS in
 * the jail's filter (its flags are in memory), so glibc falls back to
 * clone, which this filter sees. */
static int gate_rules(scmp_filter_ctx ctx, uint32_t act)
{
	int rc = seccomp_rule_add(ctx, act, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_PARENT, CLONE_PARENT));
	/* prctl's option is an int (the low 32 bits); the kernel reads any
	 * other bit of arg2 as "set", so only a whole 0 clears the flag. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, act, SCMP_SYS(prctl), 2,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, PR_SET_CHILD_SUBREAPER), SCMP_A1(SCMP_CMP_EQ, 0));
	return rc;
}

/* The gate's filter with act on its rows, or NULL (*rc the error). */
static scmp_filter_ctx gate_ctx(uint32_t act, int *rc)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (*rc == 0)
		*rc = gate_rules(ctx, act);
	if (*rc < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static int gate_load(uint32_t act, int *listener)
{
	int rc;
	scmp_filter_ctx ctx = gate_ctx(act, &rc);
	if (!ctx)
		return rc;
	rc = seccomp_load(ctx);
	if (rc == 0 && listener) {
		*listener = seccomp_notify_fd(ctx);
		if (*listener < 0)
			rc = *listener;
	}
	seccomp_release(ctx);
	return rc;
}

/* Both gates compiled once, in the zygote (seccomp_session_gate_prepare):
 * a new session's process then loads the program with one system call.
 * Compiled in the session, libseccomp's work (its rule database, the
 * program's generation, their allocations in a heap shared copy-on-write
 * with the zygote) took 2.4 to 3 ms of the 33 a new session takes. */
#define GATE_PROG_MAX 128
static struct gate_prog {
	struct sock_filter f[GATE_PROG_MAX];
	unsigned short len;
} gate_progs[2]; /* [0]: the listener's; [1]: the one that refuses */
static bool gate_ready;

/* The program libseccomp generates for the gate with act, as it would load
 * it (seccomp_export_bpf writes the same program seccomp_load loads). */
static int gate_export(uint32_t act, struct gate_prog *p)
{
	int rc;
	scmp_filter_ctx ctx = gate_ctx(act, &rc);
	if (!ctx)
		return rc;
	int pp[2];
	if (pipe2(pp, O_CLOEXEC | O_NONBLOCK) < 0) {
		rc = -errno;
		seccomp_release(ctx);
		return rc;
	}
	rc = seccomp_export_bpf(ctx, pp[1]);
	seccomp_release(ctx);
	ssize_t n = -1;
	if (rc == 0)
		n = read(pp[0], p->f, sizeof p->f);
	/* A program that filled the buffer may have been cut: refused. */
	if (rc == 0 && (n <= 0 || (size_t)n >= sizeof p->f || n % sizeof p->f[0] != 0))
		rc = -E2BIG;
	close(pp[0]);
	close(pp[1]);
	if (rc == 0)
		p->len = (unsigned short)((size_t)n / sizeof p->f[0]);
	return rc;
}

bool seccomp_session_gate_prepare(void)
{
	gate_ready = false;
	if (jail_disabled("seccomp"))
		return false;
	gate_ready = gate_export(SCMP_ACT_NOTIFY, &gate_progs[0]) == 0 && gate_export(SCMP_ACT_ERRNO(EPERM), &gate_progs[1]) == 0;
	return gate_ready;
}

/* Loads a prepared program as seccomp_load would: no_new_privs first (it is
 * set already by then; libseccomp sets it too), the listener's flag for the
 * one that has a listener.  The listener, or 0, or -errno. */
static int gate_load_prepared(struct gate_prog *p, bool listener)
{
	struct sock_fprog prog = { .len = p->len, .filter = p->f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
	if (r < 0)
		return -errno;
	if (listener && r == 0)
		return -EINVAL; /* no listener where one was asked */
	return (int)r;
}

/* The gate in its listener's form (notify) or its refusing one: the
 * zygote's program where it prepared one, else compiled here.  With a
 * listener, *listener is set.  0 or -errno. */
static int gate_apply(bool notify, int *listener)
{
	if (!gate_ready)
		return gate_load(notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM), notify ? listener : NULL);
	int r = gate_load_prepared(&gate_progs[notify ? 0 : 1], notify);
	if (r < 0)
		return r;
	if (notify)
		*listener = r;
	return 0;
}

int seccomp_session_gate(int *listener, struct err *e)
{
	*listener = -1;
	if (jail_disabled("seccomp"))
		return 0;
	/* A task may have one listener in its chain of filters (the kernel
	 * refuses a second with EBUSY): the cell cannot stack a listener of
	 * its own over this one to answer its own requests. */
	int rc = gate_apply(true, listener);
	if (rc == 0)
		return 0;
	*listener = -1;
	/* No user notification here: refused outright (fork_from then fails
	 * with EPERM, and says so). */
	rc = gate_apply(false, NULL);
	if (rc < 0)
		return err_sys(e, rc, "jail: the session's seccomp filter");
	return 0;
}
