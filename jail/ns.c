/* Jail layer 3: namespaces and the mount tree.
 *
 * user (uid and gid mapped to themselves, setgroups denied), then mount, pid,
 * net (only when net_access is false), ipc and uts, each unshared on its own
 * so that the report says exactly which ones this kernel allowed.  Then a
 * fork, so that the zygote is pid 1 of the new pid namespace; the
 * intermediate parent only waits.  Then the mount tree: a fresh tmpfs as the
 * new root holding only what the policy lets the code see, pivot_root, the
 * old root detached.  The mount tree is what hides ~/.ssh when fs_read is
 * true (Landlock cannot carve a hole out of a readable tree).
 *
 * Every source is opened (open_tree, a detached clone) while "/" is still
 * the host's, before anything is mounted: a path under /tmp stays reachable
 * after the base tmpfs covers /tmp, and a symlink in a source path resolves
 * against the host root, not the half-built one. */
#include "ns.h"

#include "secrets.h"

#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static int write_file(const char *path, const char *text)
{
	cleanup_fd int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	return w == (ssize_t)n ? 0 : w < 0 ? -errno : -EIO;
}

bool jail_userns_probe(uid_t uid, gid_t gid, bool mount)
{
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
				       setresuid(uid, uid, uid) < 0))
			_exit(1);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		_exit(!mount || unshare(CLONE_NEWNS) == 0 ? 0 : 1);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- the owner namespace ---- */

/* A server not run by root counts its sessions' memory by proportional
 * shares (smaps_rollup) only if the kernel lets it read that file of a
 * process that is not dumpable, which takes CAP_SYS_PTRACE in the user
 * namespace that process's memory was made in (mm->user_ns: set at execve to
 * the caller's namespace, kept by fork).  (Their /proc/PID/fd stays closed:
 * a directory of mode 0500 owned by that namespace's root, unmapped here,
 * so the host's root; memfds stay refused for such a server.)
 * The zygote used to be exec'd in the host's namespace and to make its own
 * namespace afterwards (jail_ns_apply), so its sessions' memory belonged to
 * the host's namespace, where such a server has no capability.  So the
 * server's child calls this just before it execs the zygote: the exec then
 * makes the zygote's memory in a namespace the server's uid owns, where
 * the owner in the parent namespace holds every capability.  The jail
 * itself is unchanged: the zygote still makes its own user namespace (a
 * child of this one) and every other layer on top.
 * What it does not open, each checked by the kernel's rule for a process
 * that is not dumpable (capable in mm->user_ns):
 *   - a session reading another session's /proc/PID/mem, environ, maps,
 *     smaps_rollup or fd: its credentials are in the jail's namespace, a
 *     child of this one, and no capability reaches from a child namespace
 *     up to its parent (besides, its capabilities are dropped, nested user
 *     namespaces are refused by seccomp, and each session has a Landlock
 *     domain of its own);
 *   - anything in this namespace getting capabilities in it: the exec
 *     drops them (the uid is not 0 here), and uid 0 is not mapped.
 *     Attack this keeps out: a map of 0 to the server's uid would open
 *     /proc/PID/fd as well (its owner would be the server's uid), but the
 *     exec would then give the zygote, and whatever runs in it before the
 *     jail, every capability in the namespace the sessions' memory belongs
 *     to: a process left there could read and trace every session.
 * The owner's processes on the host (this user's own) may read the
 * sessions, as they could already read and trace the zygote (dumpable, a
 * fresh exec); the sandbox gains nothing.  Until
 * the exec the child holds a copy of the server's memory and is dumpable
 * (writing its own uid_map needs that): a window of microseconds in which
 * only this user's unsandboxed processes could read it (a sandbox of
 * another server of this user is refused by Landlock's ptrace rule, and a
 * namespaced one does not see host processes). */
int jail_ns_owner_enter(void)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (uid == 0 || uid != geteuid() || gid != getegid())
		return -EPERM;
	/* Not dumpable (the server is not), /proc/self/uid_map would be
	 * root's and refuse the write. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return -errno;
	if (unshare(CLONE_NEWUSER) < 0)
		return -errno;
	char map[64];
	int w;
	if ((w = write_file("/proc/self/setgroups", "deny")) < 0)
		return w;
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if ((w = write_file("/proc/self/uid_map", map)) < 0)
		return w;
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	return write_file("/proc/self/gid_map", map);
}

/* ---- the intermediate parent ---- */

/* Waits for the zygote and exits as it did.  It holds no fd the sandbox
 * could use, and dies with the server (PDEATHSIG); the zygote dies with it
 * (its own PDEATHSIG), and with the zygote, pid 1, every process of the
 * pid namespace. */
static __attribute__((noreturn)) void intermediate(pid_t child, int alive_wr)
{
	/* alive_wr stays open until this process dies: the zygote polls it. */
	if (alive_wr > 0)
		syscall(SYS_close_range, 0U, (unsigned)alive_wr - 1, 0);
	syscall(SYS_close_range, (unsigned)alive_wr + 1, ~0U, 0);
	int st;
	for (;;) {
		pid_t w = waitpid(child, &st, 0);
		if (w == child)
			break;
		if (w < 0 && errno != EINTR)
			_exit(70);
	}
	if (WIFEXITED(st))
		_exit(WEXITSTATUS(st));
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core of this process */
		signal(sig, SIG_DFL);
		sigset_t all;
		sigfillset(&all);
		sigdelset(&all, sig);
		sigprocmask(SIG_SETMASK, &all, NULL);
		raise(sig);
		_exit(128 + sig);
	}
	_exit(70);
}

/* ---- the mount tree ---- */

enum mkind { M_BIND, M_SYMLINK, M_TMPFS, M_PROC };

struct mnt {
	char path[PATH_MAX];   /* absolute path inside the jail */
	enum mkind kind;
	uint64_t attr;         /* MOUNT_ATTR_* to set (binds) */
	int tree;              /* open_tree clone (binds) */
	bool is_dir;
	bool user_data;        /* ROOT, the workspace, the policy's lists */
	char target[PATH_MAX]; /* symlink text */
	char opts[64];         /* tmpfs options */
};

#define MAX_MNT 96

struct tree {
	struct mnt m[MAX_MNT];
	size_t n;
	size_t n_ro, n_rw;
};

static int depth(const char *p)
{
	int d = 0;
	for (; *p; p++)
		d += *p == '/';
	return d;
}

static int cmp_mnt(const void *a, const void *b)
{
	const struct mnt *x = a, *y = b;
	int dx = depth(x->path), dy = depth(y->path);
	if (dx != dy)
		return dx - dy;
	/* Same depth: keep the order of insertion (later entries win). */
	return x < y ? -1 : x > y;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static struct mnt *add(struct tree *t, const char *path, enum mkind kind)
{
	if (t->n >= MAX_MNT || strlen(path) >= PATH_MAX || path[0] != '/')
		return NULL;
	struct mnt *m = &t->m[t->n++];
	memset(m, 0, sizeof *m);
	snprintf(m->path, sizeof m->path, "%s", path);
	m->kind = kind;
	m->tree = -1;
	return m;
}

static int add_bind1(struct tree *t, const char *path, uint64_t attr, bool required,
		     const char *const *runtime, struct err *e);

/* A bind of a host path, cloned now (host root still in place).  Missing
 * optional paths are skipped; missing required ones are an error. */
static int add_bind(struct tree *t, const char *path, uint64_t attr, bool required,
		    const char *const *runtime, struct err *e)
{
	size_t before = t->n;
	int r = add_bind1(t, path, attr, required, runtime, e);
	/* Entries without a runtime list are the user's data (the /dev
	 * nodes call add_bind1 directly). */
	if (r == 0 && !runtime && t->n > before)
		t->m[t->n - 1].user_data = true;
	return r;
}

static int add_bind1(struct tree *t, const char *path, uint64_t attr, bool required,
		     const char *const *runtime, struct err *e)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		if (!required)
			return 0;
		return err_sys(e, -errno, "jail: %s", path);
	}
	if (S_ISLNK(st.st_mode) && !required) {
		/* /lib -> usr/lib and the like: recreate the link when what it
		 * points to is itself shown, else bind what it resolves to. */
		char real[PATH_MAX], text[PATH_MAX];
		ssize_t k = readlink(path, text, sizeof text - 1);
		if (k > 0 && realpath(path, real)) {
			text[k] = '\0';
			for (const char *const *r = runtime; r && *r; r++) {
				if (strcmp(*r, path) != 0 && under(real, *r)) {
					struct mnt *m = add(t, path, M_SYMLINK);
					if (!m)
						return err_set(e, -E2BIG, "jail: too many mounts");
					snprintf(m->target, sizeof m->target, "%s", text);
					return 0;
				}
			}
		}
	}
	if (stat(path, &st) < 0) {
		if (!required)
			return 0;
		return err_sys(e, -errno, "jail: %s", path);
	}
	struct mnt *m = add(t, path, M_BIND);
	if (!m)
		return err_set(e, -E2BIG, "jail: too many mounts");
	m->attr = attr;
	m->is_dir = S_ISDIR(st.st_mode);
	/* AT_RECURSIVE: the submounts come along (a non-recursive clone of a
	 * mount with locked children is refused in a user namespace). */
	m->tree = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (m->tree < 0)
		return err_sys(e, -errno, "jail: open_tree %s", path);
	if (strncmp(path, "/dev/", 5) == 0)
		;
	else if (attr & MOUNT_ATTR_RDONLY)
		t->n_ro++;
	else
		t->n_rw++;
	return 0;
}

static const char *const net_files[] = {
	"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf",
	"/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/ssl",
	"/etc/ca-certificates", NULL,
};

static const char *const dev_files[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL,
};

static long mib(long v, long lo, long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static int plan(const struct jail_config *c, struct tree *t, struct err *e)
{
	const struct policy *p = c->policy;
	const uint64_t RO = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	const uint64_t RW = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	int r;
	const char *const *rt = c->runtime_ro ? c->runtime_ro : jail_default_runtime_paths();

	for (const char *const *q = rt; *q; q++)
		if ((r = add_bind(t, *q, RO, false, rt, e)) < 0)
			return r;
	if (p->net_access)
		for (const char *const *q = net_files; *q; q++)
			if ((r = add_bind(t, *q, RO, false, rt, e)) < 0)
				return r;
	if (c->venv && (r = add_bind(t, c->venv, RO, false, rt, e)) < 0)
		return r;

	if (p->fs_read == FS_READ_ROOT) {
		if ((r = add_bind(t, c->root, RO, true, NULL, e)) < 0)
			return r;
	} else if (p->fs_read == FS_READ_LIST) {
		for (size_t i = 0; i < p->n_fs_read_paths; i++)
			if ((r = add_bind(t, p->fs_read_paths[i], RO, false, NULL, e)) < 0)
				return r;
	}
	/* fs_read false: ROOT is an empty directory (Python's cwd). */

	/* The workspace: nosuid, nodev, noexec in every mode (no planted
	 * setuid file, device node or shared object runs from it); writable
	 * only when fs_write is "workspace" (a list names its own dirs). */
	if ((r = add_bind(t, c->workspace, p->fs_write == FS_WRITE_WORKSPACE ? RW : RW | RO,
			  true, NULL, e)) < 0)
		return r;
	if (p->fs_write == FS_WRITE_LIST)
		for (size_t i = 0; i < p->n_fs_write_paths; i++)
			if ((r = add_bind(t, p->fs_write_paths[i], RW, true, NULL, e)) < 0)
				return r;

	/* Private, size-capped scratch space; gone with the jail.  Writable
	 * even when fs_write is false: it is not the host's filesystem, and
	 * Python, matplotlib and multiprocessing need somewhere to write. */
	struct mnt *m = add(t, "/tmp", M_TMPFS);
	if (!m)
		return err_set(e, -E2BIG, "jail: too many mounts");
	/* Files in a tmpfs are host memory that outlives the call: /tmp and
	 * /dev/shm together hold at most half of memory_mb, and the memory
	 * watchdog counts what they hold as the session's (supervisor/limits.c), so
	 * a session with full scratch space still has half its memory. */
	long tmp_mb = p->limits.memory_mb * 3 / 8;
	if (p->limits.max_file_mb < tmp_mb)
		tmp_mb = p->limits.max_file_mb;
	snprintf(m->opts, sizeof m->opts, "mode=1777,size=%ldm,nr_inodes=65536",
		 mib(tmp_mb, 16, 1L << 20));
	for (const char *const *q = dev_files; *q; q++)
		if ((r = add_bind1(t, *q, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, true, NULL, e)) < 0)
			return r;
	m = add(t, "/dev/shm", M_TMPFS);
	if (!m)
		return err_set(e, -E2BIG, "jail: too many mounts");
	snprintf(m->opts, sizeof m->opts, "mode=1777,size=%ldm,nr_inodes=16384",
		 mib(p->limits.memory_mb / 8, 16, 1L << 20));
	if (!add(t, "/proc", M_PROC))
		return err_set(e, -E2BIG, "jail: too many mounts");
	qsort(t->m, t->n, sizeof t->m[0], cmp_mnt);
	return 0;
}

enum leaf { LEAF_NONE, LEAF_DIR, LEAF_FILE };

/* mkdir -p of an absolute jail path, relative to the new root (cwd); the
 * last component is made a directory, an empty file, or left alone. */
static int mkdirs(const char *abs, enum leaf leaf)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, ".%s", abs);
	for (char *s = p + 2; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (leaf == LEAF_DIR) {
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
	} else if (leaf == LEAF_FILE) {
		struct stat st;
		if (lstat(p, &st) == 0)
			return 0; /* already there (inside an earlier bind) */
		cleanup_fd int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static int place(const struct mnt *m, struct err *e)
{
	char rel[PATH_MAX + 2];
	snprintf(rel, sizeof rel, ".%s", m->path);
	int r;
	switch (m->kind) {
	case M_SYMLINK:
		if ((r = mkdirs(m->path, LEAF_NONE)) < 0)
			return err_sys(e, r, "jail: %s", m->path);
		if (symlink(m->target, rel) < 0 && errno != EEXIST)
			return err_sys(e, -errno, "jail: symlink %s", m->path);
		return 0;
	case M_BIND: {
		if ((r = mkdirs(m->path, m->is_dir ? LEAF_DIR : LEAF_FILE)) < 0)
			return err_sys(e, r, "jail: mount point %s", m->path);
		struct mount_attr a = { .attr_set = m->attr };
		/* Flags the source mount already has stay (they may be
		 * locked); these are only added. */
		if (mount_setattr(m->tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
			return err_sys(e, -errno, "jail: mount_setattr %s", m->path);
		if (move_mount(m->tree, "", AT_FDCWD, rel, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return err_sys(e, -errno, "jail: move_mount %s", m->path);
		return 0;
	}
	case M_TMPFS:
		if ((r = mkdirs(m->path, LEAF_DIR)) < 0)
			return err_sys(e, r, "jail: mount point %s", m->path);
		if (mount("tmpfs", rel, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, m->opts) < 0)
			return err_sys(e, -errno, "jail: tmpfs %s", m->path);
		return 0;
	case M_PROC:
		if ((r = mkdirs(m->path, LEAF_DIR)) < 0)
			return err_sys(e, r, "jail: mount point %s", m->path);
		/* The pid namespace's own /proc: the host's processes (and
		 * their environments and command lines) are not in it. */
		if (mount("proc", rel, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return -errno; /* reported by the caller */
		return 0;
	}
	return 0;
}

static int write_at(const char *rel, const char *text)
{
	cleanup_fd int fd = open(rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	return write(fd, text, strlen(text)) < 0 ? -errno : 0;
}

static struct tree t; /* large; the zygote is single-threaded */
static bool planned;

static void close_trees(void)
{
	for (size_t i = 0; i < t.n; i++)
		if (t.m[i].tree >= 0)
			close(t.m[i].tree);
	t.n = 0;
	planned = false;
}

/* When the server is root, the sources are cloned here, before the uid
 * switch: ROOT or the workspace often sit below a directory only root may
 * enter (/root, a mkdtemp directory), which the sandbox uid could not
 * traverse later.  The clones are detached trees (their own anonymous mount
 * namespace) and are attached inside the new mount namespace. */
static bool idmapped;

/* A user namespace whose only mapping is on-disk 0 -> uid (and gid), for
 * an ID-mapped mount; -1 when it cannot be made. */
static int idmap_userns(uid_t uid, gid_t gid)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t parent = getpid();
	pid_t c = fork();
	if (c < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (c == 0) {
		/* Only a holder of the namespace for the parent to open: it must
		 * not outlive the parent if that is killed meanwhile. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		char x = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
		(void)!write(p[1], &x, 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char x = 'n', path[64], map[64];
	(void)!read(p[0], &x, 1);
	close(p[0]);
	int ns = -1;
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)c);
	snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
	if (x == 'y' && write_file(path, map) == 0) {
		snprintf(path, sizeof path, "/proc/%d/setgroups", (int)c);
		write_file(path, "deny");
		snprintf(path, sizeof path, "/proc/%d/gid_map", (int)c);
		snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
		if (write_file(path, map) == 0) {
			snprintf(path, sizeof path, "/proc/%d/ns/user", (int)c);
			ns = open(path, O_RDONLY | O_CLOEXEC);
		}
	}
	kill(c, SIGKILL);
	while (waitpid(c, NULL, 0) < 0 && errno == EINTR)
		;
	return ns;
}

/* Root only, before the uid switch.  Clones every source now (the sandbox
 * uid may not be able to reach them later).  When the sandbox runs as
 * 65534 because the data is root's, ROOT, the workspace and the lists are
 * ID-mapped mounts showing root's files as the sandbox's own: a project
 * directory of mode 0700 (mkdtemp, /root) stays readable, the workspace
 * writable, and what the code creates lands on disk as root, the owner of
 * the rest; nothing on the host is chowned.  Read-only stays read-only (the
 * mount flag; chmod and utime on it fail with EROFS).  Returns 1 when the
 * ID mapping is in place, 0 when not (the caller then chowns). */
int jail_ns_prepare(const struct jail_config *c, uid_t uid, gid_t gid, struct err *e)
{
	idmapped = false;
	if (jail_disabled("mountns"))
		return 0;
	memset(&t, 0, sizeof t);
	int r = plan(c, &t, e);
	if (r == -EPERM) {
		/* Root without CAP_SYS_ADMIN (a container's root): open_tree
		 * is refused.  Not an error: the user namespace route plans
		 * the tree itself later, as the sandbox uid, and without
		 * namespaces the jail runs as Landlock + seccomp. */
		close_trees();
		return 0;
	}
	if (r < 0) {
		close_trees();
		return r;
	}
	planned = true;
	struct stat st;
	if (uid != 65534 || stat(c->workspace, &st) < 0 || st.st_uid != 0)
		return 0; /* the data's owner is the sandbox's uid already */
	cleanup_fd int ns = idmap_userns(uid, gid);
	if (ns < 0)
		return 0;
	size_t n = 0, done = 0;
	for (size_t i = 0; i < t.n; i++) {
		if (!t.m[i].user_data || t.m[i].tree < 0)
			continue;
		n++;
		struct mount_attr a = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)ns };
		if (mount_setattr(t.m[i].tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) == 0)
			done++;
	}
	/* All or nothing: a mix would leave some data unreachable. */
	if (done != n) {
		close_trees();
		memset(&t, 0, sizeof t);
		if ((r = plan(c, &t, e)) < 0) {
			close_trees();
			return r;
		}
		planned = true;
		return 0;
	}
	idmapped = n > 0;
	return idmapped ? 1 : 0;
}

static int build_tree(const struct jail_config *c, bool have_pidns, struct jail_layer *l,
		      struct err *e)
{
	int r = 0;
	bool proc_ok = true;

	/* No mount event may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		r = err_sys(e, -errno, "jail: make / private");
		goto close_trees;
	}
	if (!planned) {
		memset(&t, 0, sizeof t);
		if ((r = plan(c, &t, e)) < 0)
			goto close_trees;
	}

	/* The new root: a small tmpfs on /tmp (any directory would do; the
	 * sources are already open). */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755,size=1m,nr_inodes=4096") < 0) {
		r = err_sys(e, -errno, "jail: tmpfs for the new root");
		goto close_trees;
	}
	if (chdir("/tmp") < 0) {
		r = err_sys(e, -errno, "jail: chdir new root");
		goto close_trees;
	}
	for (size_t i = 0; i < t.n; i++) {
		struct mnt *m = &t.m[i];
		if (m->kind == M_PROC && !have_pidns) {
			/* A fresh proc without a pid namespace would show the
			 * host's processes: leave /proc empty instead. */
			mkdirs(m->path, LEAF_DIR);
			proc_ok = false;
			continue;
		}
		r = place(m, e);
		if (r < 0 && m->kind == M_PROC) {
			proc_ok = false;
			r = 0;
		}
		if (r < 0)
			goto close_trees;
	}
	/* /dev: links the C library and Python expect. */
	(void)!symlink("/proc/self/fd", "dev/fd");
	(void)!symlink("/proc/self/fd/0", "dev/stdin");
	(void)!symlink("/proc/self/fd/1", "dev/stdout");
	(void)!symlink("/proc/self/fd/2", "dev/stderr");
	/* A passwd and group naming only the sandbox's ids (getpass,
	 * pwd.getpwuid, pandas and matplotlib ask); the host's list of users
	 * is not shown. */
	char buf[256];
	mkdirs("/etc", LEAF_DIR);
	snprintf(buf, sizeof buf, "sandbox:x:%u:%u:sandbox:/tmp:/usr/sbin/nologin\n",
		 (unsigned)getuid(), (unsigned)getgid());
	write_at("etc/passwd", buf);
	snprintf(buf, sizeof buf, "sandbox:x:%u:\n", (unsigned)getgid());
	write_at("etc/group", buf);
	mkdirs(c->root, LEAF_DIR);

	/* pivot_root(".", "."): the old root ends up stacked on the new one
	 * and is detached at once; nothing of it stays reachable. */
	if (syscall(SYS_pivot_root, ".", ".") < 0) {
		r = err_sys(e, -errno, "jail: pivot_root");
		goto close_trees;
	}
	if (umount2(".", MNT_DETACH) < 0) {
		r = err_sys(e, -errno, "jail: detach the old root");
		goto close_trees;
	}
	if (chdir("/") < 0) {
		r = err_sys(e, -errno, "jail: chdir /");
		goto close_trees;
	}
	/* The root tmpfs belongs to the sandbox's uid: read-only, or the
	 * code could create files next to /usr. */
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
		r = err_sys(e, -errno, "jail: remount / read-only");
		goto close_trees;
	}
	snprintf(l->detail, sizeof l->detail,
		 "tmpfs root (read-only), %zu read-only binds, %zu read-write%s, "
		 "private /tmp and /dev/shm, %s, minimal /dev, pivot_root",
		 t.n_ro, t.n_rw, idmapped ? " (project ID-mapped root -> sandbox)" : "",
		 proc_ok ? "fresh /proc" : "no /proc");
close_trees:
	close_trees();
	return r;
}

/* ---- secrets under the mount tree ---- */

/* The mount tree shows ROOT (or the fs_read list) whole; Landlock grants
 * reads around the secrets found below it (landlock.c).  That is one wall,
 * and under /tmp none: the jail's private /tmp is granted as a whole, and a
 * Landlock rule covers what is mounted below it, so a project there (a CI
 * checkout, mktemp -d) would show its .env.  So the tree hides each secret
 * itself, as bubblewrap's --ro-bind /dev/null does: a directory gets an
 * empty read-only tmpfs of mode 0 over it, anything else a read-only nodev
 * bind of /dev/null (its open is refused: EACCES, as Landlock's refusal
 * reads).  A secret's own name stays listable, not what a secret directory
 * holds.  A symlink is left to the rules where it leads, as everywhere
 * else.  Nothing can take a mount away: the mount calls are refused from
 * here on (no capability, seccomp).  The walk ran in this tree, so every
 * path that shows a secret here was found (a bind on top of another hides
 * the one below; the workspace and the venv are not searched, as in the
 * other mode). */
void jail_ns_hide(struct secret_scan *s, struct jail_layer *l)
{
	size_t done = 0, skipped = 0;
	for (size_t i = 0; i < s->n; i++) {
		struct stat st;
		if (lstat(s->paths[i], &st) < 0 || S_ISLNK(st.st_mode)) {
			/* Gone, or a link: nothing of the secret lies here. */
			s->covered[i] = true;
			skipped++;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			s->covered[i] = mount("tmpfs", s->paths[i], "tmpfs",
					      MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
					      "mode=0,size=4k,nr_inodes=2") == 0;
		} else {
			int tree = open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
			struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
							    MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC };
			s->covered[i] = tree >= 0 &&
					mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) == 0 &&
					move_mount(tree, "", AT_FDCWD, s->paths[i], MOVE_MOUNT_F_EMPTY_PATH) == 0;
			if (tree >= 0)
				close(tree);
		}
		done += s->covered[i];
	}
	size_t n = strlen(l->detail);
	if (s->n > skipped && n < sizeof l->detail)
		snprintf(l->detail + n, sizeof l->detail - n, "; %zu of %zu secrets covered by an empty mount",
			 done, s->n - skipped);
}

/* ---- the namespaces ---- */

struct nsdef {
	enum jail_layer_id id;
	int flag;
	const char *name;
};

static const struct nsdef nsdefs[] = {
	{ JL_MOUNTNS, CLONE_NEWNS, "mountns" },
	{ JL_PIDNS, CLONE_NEWPID, "pidns" },
	{ JL_NETNS, CLONE_NEWNET, "netns" },
	{ JL_IPCNS, CLONE_NEWIPC, "ipcns" },
	{ JL_UTSNS, CLONE_NEWUTS, "utsns" },
};

static void unavailable(struct jail_layer *l, const char *why)
{
	l->state = JS_NOT_AVAILABLE;
	snprintf(l->detail, sizeof l->detail, "%s", why);
}

/* The jail's IPC namespace is new: its System V shared memory rule.
 * A segment that no process has attached any more keeps its pages, and no
 * RSS shows them.  shm_rmid_forced, a setting of the IPC namespace, removes
 * a segment at its last detach, so what exists is mapped and counted.  Only
 * the root of the namespace's owning user namespace may set it: a root
 * server makes the namespace before it gives root up (jail_ns_ipc_early);
 * elsewhere the filter refuses shared memory (seccomp.c).
 * Attack: six segments of 200 MB, each filled and detached, held 1.2 GB
 * outside memory_mb until the server exited. */
static void ipc_shm_rule(struct jail_report *r)
{
	r->sysv_shm = write_file("/proc/sys/kernel/shm_rmid_forced", "1") == 0;
	snprintf(r->layer[JL_IPCNS].detail, sizeof r->layer[0].detail,
		 "private System V IPC and POSIX message queues; shared memory %s",
		 r->sysv_shm ? "removed at its last detach" : "refused (shm_rmid_forced is root's)");
}

void jail_ns_ipc_early(struct jail_report *r)
{
	if (geteuid() != 0 || jail_disabled("ipcns") || unshare(CLONE_NEWIPC) < 0)
		return; /* jail_ns_apply tries again, and says why */
	r->layer[JL_IPCNS].state = JS_APPLIED;
	ipc_shm_rule(r);
}

/* The user namespace, mapping the uid and gid to themselves: 1 made, 0
 * not (its layer says why), or a negative errno when it was made but could
 * not be set up. */
static int enter_userns(bool wanted, struct jail_report *r, struct err *e)
{
	struct jail_layer *lu = &r->layer[JL_USERNS];
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (!wanted) {
		if (lu->state != JS_NOT_AVAILABLE)
			unavailable(lu, "not used");
		return 0;
	}
	if (jail_disabled("userns")) {
		unavailable(lu, "disabled by PSM_JAIL_DISABLE");
		return 0;
	}
	if (unshare(CLONE_NEWUSER) < 0) {
		char why[128];
		snprintf(why, sizeof why, "unshare(CLONE_NEWUSER): %s", strerror(errno));
		unavailable(lu, why);
		return 0;
	}
	/* setgroups deny: otherwise a process could drop a group that a
	 * file's permissions deny it through. */
	char map[64];
	int w;
	if ((w = write_file("/proc/self/setgroups", "deny")) < 0)
		return err_sys(e, w, "jail: /proc/self/setgroups");
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if ((w = write_file("/proc/self/uid_map", map)) < 0)
		return err_sys(e, w, "jail: /proc/self/uid_map");
	snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if ((w = write_file("/proc/self/gid_map", map)) < 0)
		return err_sys(e, w, "jail: /proc/self/gid_map");
	lu->state = JS_APPLIED;
	snprintf(lu->detail, sizeof lu->detail, "uid %u and gid %u mapped to themselves",
		 (unsigned)uid, (unsigned)gid);
	return 1;
}

/* The other namespaces, each on its own: one the kernel refuses is
 * reported, the rest are still made.  can: a user namespace, or root. */
static void unshare_others(const struct jail_config *c, bool can, struct jail_report *r)
{
	for (size_t i = 0; i < sizeof nsdefs / sizeof nsdefs[0]; i++) {
		const struct nsdef *d = &nsdefs[i];
		struct jail_layer *l = &r->layer[d->id];
		if (d->id == JL_NETNS && c->policy->net_access) {
			/* The host's network is what net_access true grants. */
			l->state = JS_NOT_NEEDED;
			snprintf(l->detail, sizeof l->detail, "net_access is true: host network");
			continue;
		}
		if (l->state == JS_APPLIED)
			continue; /* made earlier, as root (jail_ns_ipc_early) */
		if (jail_disabled(d->name)) {
			unavailable(l, "disabled by PSM_JAIL_DISABLE");
			continue;
		}
		if (!can) {
			unavailable(l, "needs a user namespace (or root)");
			continue;
		}
		if (unshare(d->flag) < 0) {
			char why[128];
			snprintf(why, sizeof why, "unshare: %s", strerror(errno));
			unavailable(l, why);
			continue;
		}
		l->state = JS_APPLIED;
		if (d->id == JL_IPCNS)
			ipc_shm_rule(r);
	}
	if (r->layer[JL_NETNS].state == JS_APPLIED)
		snprintf(r->layer[JL_NETNS].detail, sizeof r->layer[0].detail,
			 "empty network namespace (loopback down)");
	if (r->layer[JL_UTSNS].state == JS_APPLIED) {
		/* The host's name is not the sandbox's business. */
		(void)!sethostname("sandbox", 7);
		snprintf(r->layer[JL_UTSNS].detail, sizeof r->layer[0].detail, "hostname \"sandbox\"");
	}
}

/* After unshare(CLONE_NEWPID) the next child is pid 1 of the new
 * namespace: fork, the parent stays as the intermediate (it never
 * returns), the child goes on as the zygote. */
static int become_pid1(struct jail_report *r, struct err *e)
{
	int alive[2];
	if (pipe2(alive, O_CLOEXEC) < 0)
		return err_sys(e, -errno, "jail: pipe");
	pid_t server = getppid();
	pid_t pid = fork();
	if (pid < 0)
		return err_sys(e, -errno, "jail: fork into the pid namespace");
	if (pid > 0) {
		close(alive[0]);
		/* Set after the credential changes (they clear it). */
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != server)
			_exit(70); /* the server is already gone */
		intermediate(pid, alive[1]);
	}
	close(alive[1]);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* If the intermediate died before the line above, the pipe's write
	 * end is closed already: hang up. */
	struct pollfd pf = { .fd = alive[0], .events = POLLIN };
	if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLIN)))
		_exit(70);
	close(alive[0]);
	snprintf(r->layer[JL_PIDNS].detail, sizeof r->layer[0].detail,
		 "zygote is pid 1; host processes invisible");
	return 0;
}

int jail_ns_apply(const struct jail_config *c, bool with_userns, struct jail_report *r,
		  struct err *e)
{
	bool privileged = geteuid() == 0;
	int rc = enter_userns(with_userns, r, e);
	if (rc < 0)
		return rc;
	unshare_others(c, rc == 1 || privileged, r);
	bool have_pidns = r->layer[JL_PIDNS].state == JS_APPLIED;
	if (have_pidns && (rc = become_pid1(r, e)) < 0)
		return rc;
	struct jail_layer *lm = &r->layer[JL_MOUNTNS];
	if (lm->state != JS_APPLIED) {
		close_trees();
		return 0;
	}
	if ((rc = build_tree(c, have_pidns, lm, e)) < 0) {
		lm->state = JS_FAILED;
		return rc;
	}
	return 0;
}
