/* Jail layer 5: Landlock.
 *
 * A second, independent wall around the filesystem (the mount tree is the
 * first): read rights on what the policy shows, write rights (never
 * execute) on what it makes writable; TCP bind/connect denied when
 * net_access is false (ABI >= 4); signals and abstract unix sockets scoped to
 * the domain (ABI >= 6), so the code cannot signal the server or reach a
 * host daemon's abstract socket.  Every access right the running kernel
 * knows is handled, so whatever is not granted is denied.  Each session
 * adds a domain of its own (landlock_scope_session): the scopes again, so
 * sessions cannot reach one another, and, on the host's /proc, reads of
 * the session's own entry only (session_reads).
 *
 * Debian 12's <linux/landlock.h> stops at ABI 1 or 2: the newer constants
 * and the grown ruleset attribute are defined here. */
#include "landlock.h"

#include "secrets.h"

#include "../common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ruleset attribute as of ABI 6 (the header's may be shorter); the
 * kernel takes the size, so older kernels accept a prefix. */
struct psm_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct psm_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define FS_ABI1 ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */

#define R_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define R_WRITE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | \
		 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | \
		 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_REFER | \
		 LANDLOCK_ACCESS_FS_TRUNCATE)
/* The private scratch space also gets sockets, fifos and symlinks
 * (multiprocessing.Manager's listener, tempfile users); nothing on the
 * host's disk does: a symlink left in the workspace points the agent's own
 * file tools (run outside the jail, as the user) at ~/.ssh/id_rsa, a FIFO
 * hangs them, a socket is a channel to whatever connects to it.  Device
 * nodes never (MAKE_CHAR, MAKE_BLOCK are handled and never granted). */
#define R_SPECIAL (LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | \
		   LANDLOCK_ACCESS_FS_MAKE_SYM)

int landlock_abi(void)
{
	if (jail_disabled("landlock"))
		return 0;
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (v < 0)
		return 0;
	/* PSM_JAIL_DISABLE=landlock-abi-N: as if the kernel's ABI were N (a
	 * test of the judge on older kernels; it only ever lowers). */
	for (int n = 1; n < v; n++) {
		char name[24];
		snprintf(name, sizeof name, "landlock-abi-%d", n);
		if (jail_disabled(name))
			return n;
	}
	return (int)v;
}

/* What the running kernel's ABI can handle: rights it does not know are
 * dropped (asking for them would make the ruleset creation fail). */
static void handled_for_abi(int abi, struct psm_ruleset_attr *a, size_t *size)
{
	a->handled_access_fs = FS_ABI1 | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE |
			       LANDLOCK_ACCESS_FS_IOCTL_DEV;
	a->handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
	a->scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	*size = sizeof *a;
	switch (abi) {
	case 1:
		a->handled_access_fs &= ~LANDLOCK_ACCESS_FS_REFER;
		__attribute__((fallthrough));
	case 2:
		a->handled_access_fs &= ~LANDLOCK_ACCESS_FS_TRUNCATE;
		__attribute__((fallthrough));
	case 3:
		a->handled_access_net = 0;
		*size = offsetof(struct psm_ruleset_attr, handled_access_net);
		__attribute__((fallthrough));
	case 4:
		a->handled_access_fs &= ~LANDLOCK_ACCESS_FS_IOCTL_DEV;
		__attribute__((fallthrough));
	case 5:
		a->scoped = 0;
		if (*size > offsetof(struct psm_ruleset_attr, scoped))
			*size = offsetof(struct psm_ruleset_attr, scoped);
		break;
	default: /* 6, 7 and later: everything above */
		break;
	}
}

static int add_path(int rs, const char *path, uint64_t access, uint64_t handled, int *n)
{
	cleanup_fd int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		/* Missing, or not even reachable by this uid: nothing to grant. */
		return errno == ENOENT || errno == EACCES ? 0 : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	access &= handled;
	if (!S_ISDIR(st.st_mode))
		/* Directory-only rights are refused on a file. */
		access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
			  LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
			  LANDLOCK_ACCESS_FS_IOCTL_DEV;
	struct psm_path_beneath pb = { .allowed_access = access, .parent_fd = fd };
	if (access && syscall(__NR_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -errno;
	(*n)++;
	return 0;
}

static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return path && strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* Whether any host directory the policy shows lies at or below dir. */
static bool user_data_below(const struct jail_config *c, const char *dir)
{
	const struct policy *p = c->policy;
	if (below(c->root, dir) || below(c->workspace, dir) || below(c->venv, dir))
		return true;
	for (size_t i = 0; p->fs_read == FS_READ_LIST && i < p->n_fs_read_paths; i++)
		if (below(p->fs_read_paths[i], dir))
			return true;
	for (size_t i = 0; p->fs_write == FS_WRITE_LIST && i < p->n_fs_write_paths; i++)
		if (below(p->fs_write_paths[i], dir))
			return true;
	return false;
}

/* Read rights on top, except on the secrets the scan found below it: a
 * Landlock rule covers a whole tree, so a directory with a secret somewhere
 * below gets only READ_DIR (its names stay listable) and each of its entries
 * its own rule, recursively, the secrets none.  A file created later in such
 * a directory has no rule, so it is not readable until the jail is built
 * again; elsewhere new files are readable as before. */
static int read_around_at(int rs, char *path, size_t cap, uint64_t access, uint64_t handled,
			  int *n, const struct secret_scan *sc, int depth)
{
	if (sc && secrets_is_hidden(sc, path))
		return 0;
	if (!sc || !secrets_hidden_below(sc, path) || depth > SECRETS_MAX_DEPTH)
		return depth > SECRETS_MAX_DEPTH ? 0 : add_path(rs, path, access, handled, n);
	int r = add_path(rs, path, LANDLOCK_ACCESS_FS_READ_DIR, handled, n);
	DIR *d = r < 0 ? NULL : opendir(path);
	if (!d)
		return r;
	size_t len = strlen(path);
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    len + 1 + strlen(de->d_name) >= cap)
			continue;
		snprintf(path + len, cap - len, "/%s", de->d_name);
		/* A symlink is judged where it leads, by the rules there. */
		if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode))
			r = read_around_at(rs, path, cap, access, handled, n, sc, depth + 1);
		path[len] = '\0';
	}
	closedir(d);
	return r;
}

static int read_around(int rs, const char *top, uint64_t access, uint64_t handled, int *n,
		       const struct secret_scan *sc)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s", top);
	return read_around_at(rs, path, sizeof path, access, handled, n, sc, 0);
}

/* The entries of "/" but /proc, listed by landlock_apply before its domain
 * refuses listing "/" (the sessions are forks of that process). */
static char top[256][NAME_MAX + 1];
static size_t n_top;

static void list_top(void)
{
	n_top = 0;
	DIR *d = opendir("/");
	if (!d)
		return;
	struct dirent *de;
	while (n_top < sizeof top / sizeof top[0] && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "proc"))
			snprintf(top[n_top++], sizeof top[0], "%s", de->d_name);
	closedir(d);
}

static const char *const dev_rw[] = { "/dev/null", "/dev/zero", "/dev/full", NULL };
static const char *const dev_ro[] = { "/dev/random", "/dev/urandom", NULL };

/* The rules being added to a ruleset: the first failure stops the rest
 * and names its path. */
struct rules {
	int rs;
	uint64_t handled;
	const struct secret_scan *sc;
	int n;
	int er;
	const char *failed;
};

/* A rule on path; around: read rights minus the secrets found below it
 * (read_around). */
static void add(struct rules *w, const char *path, uint64_t access, bool around)
{
	if (w->er)
		return;
	w->er = around ? read_around(w->rs, path, access, w->handled, &w->n, w->sc)
		       : add_path(w->rs, path, access, w->handled, &w->n);
	if (w->er < 0)
		w->failed = path;
}

static void rule(struct rules *w, const char *path, uint64_t access)
{
	add(w, path, access, false);
}

static void rule_around(struct rules *w, const char *path, uint64_t access)
{
	add(w, path, access, true);
}

/* What the policy shows and makes writable, and the runtime's paths. */
static void policy_rules(const struct jail_config *c, struct rules *w)
{
	const struct policy *p = c->policy;
	uint64_t X = p->shell_exec ? LANDLOCK_ACCESS_FS_EXECUTE : 0;
	const char *const *rt = c->runtime_ro ? c->runtime_ro : jail_default_runtime_paths();
	for (const char *const *q = rt; *q; q++)
		rule(w, *q, R_READ | X);
	if (c->venv)
		rule(w, c->venv, R_READ | X);
	/* What fs_read shows, minus the secrets found below it. */
	if (p->fs_read == FS_READ_ROOT)
		rule_around(w, c->root, R_READ | X);
	else if (p->fs_read == FS_READ_LIST)
		for (size_t i = 0; i < p->n_fs_read_paths; i++)
			rule_around(w, p->fs_read_paths[i], R_READ | X);
	/* Never EXECUTE where the code can write: nothing it wrote runs. */
	rule(w, c->workspace, p->fs_write == FS_WRITE_WORKSPACE ? R_READ | R_WRITE : R_READ);
	if (p->fs_write == FS_WRITE_LIST)
		for (size_t i = 0; i < p->n_fs_write_paths; i++)
			rule(w, p->fs_write_paths[i], R_READ | R_WRITE);
	if (p->net_access) {
		/* /etc/ssl's certificates, not its private/ (root's server
		 * keys: closed by their mode to any uid but 0, and the sandbox
		 * may keep the effective uid 0, see uid.c). */
		static const char *const net_ro[] = {
			"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf",
			"/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/ssl/certs",
			"/etc/ssl/openssl.cnf", "/etc/ca-certificates", NULL,
		};
		for (const char *const *q = net_ro; *q; q++)
			rule(w, *q, R_READ);
	}
}

/* Scratch space, /proc and the few system files of the mode. */
static void mode_rules(const struct jail_config *c, bool private_tmp, const struct jail_report *r,
		       struct rules *w)
{
	/* /tmp and /dev/shm only when they are the jail's private tmpfs:
	 * without a mount namespace they are the host's, shared with every
	 * other user, and stay closed. */
	if (private_tmp) {
		/* A rule covers everything below its directory, mounts
		 * included: with ROOT (or the workspace, or a listed path)
		 * mounted below /tmp, the scratch rights would reach the
		 * host's directories there.  Then /tmp gets plain writes only
		 * (no symlink, FIFO or socket anywhere). */
		uint64_t special = user_data_below(c, "/tmp") || user_data_below(c, "/dev/shm")
					   ? 0 : R_SPECIAL;
		/* Listing directories anywhere in the jail's own tree shows
		 * nothing the mount tree did not choose to show. */
		rule(w, "/", LANDLOCK_ACCESS_FS_READ_DIR);
		rule(w, "/tmp", R_READ | R_WRITE | special);
		rule(w, "/dev/shm", R_READ | R_WRITE | special);
		rule(w, "/proc", R_READ);
		rule(w, "/etc/passwd", R_READ);
		rule(w, "/etc/group", R_READ);
	} else {
		/* The namespace-free mode.  Scratch space: the jail's own
		 * directory, not the host's /tmp (jail.c: make_scratch). */
		if (r->scratch[0])
			/* Symlinks, FIFOs and sockets too: it is private to
			 * the jail (mode 0700) and removed with it. */
			rule(w, r->scratch, R_READ | R_WRITE | R_SPECIAL);
		/* The host's /proc, read-only: the zygote and each session
		 * find what the code left running by reading it (procs.c).
		 * Other processes' command lines and status are readable
		 * there; their environment, memory, fds, cwd and root are not
		 * (Landlock's ptrace rule refuses processes outside the
		 * domain), nor can they be signalled (the signal scope). */
		rule(w, "/proc", R_READ);
	}
	for (const char *const *q = dev_rw; *q; q++)
		rule(w, *q, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
			    LANDLOCK_ACCESS_FS_IOCTL_DEV);
	for (const char *const *q = dev_ro; *q; q++)
		rule(w, *q, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV);
}

int landlock_apply(const struct jail_config *c, bool private_tmp, struct jail_report *r,
		   struct err *e)
{
	struct jail_layer *l = &r->layer[JL_LANDLOCK];
	int abi = landlock_abi();
	if (abi <= 0) {
		l->state = JS_NOT_AVAILABLE;
		snprintf(l->detail, sizeof l->detail, "%s",
			 jail_disabled("landlock") ? "disabled by PSM_JAIL_DISABLE"
						   : "the kernel has no Landlock (or it is off)");
		return 0;
	}
	if (!private_tmp)
		list_top();
	struct psm_ruleset_attr a;
	size_t size;
	handled_for_abi(abi, &a, &size);
	/* net_access true: TCP is what the policy grants; leave it alone. */
	if (c->policy->net_access)
		a.handled_access_net = 0;

	cleanup_fd int rs = (int)syscall(__NR_landlock_create_ruleset, &a, size, 0);
	if (rs < 0)
		return err_sys(e, -errno, "jail: landlock_create_ruleset (ABI %d)", abi);
	struct rules w = { .rs = rs, .handled = a.handled_access_fs, .sc = secrets_current(), .failed = "" };
	policy_rules(c, &w);
	mode_rules(c, private_tmp, r, &w);
	if (w.er < 0) {
		l->state = JS_FAILED;
		return err_sys(e, w.er, "jail: landlock rule for %s", w.failed);
	}
	if (syscall(__NR_landlock_restrict_self, rs, 0) < 0) {
		l->state = JS_FAILED;
		return err_sys(e, -errno, "jail: landlock_restrict_self");
	}
	l->state = JS_APPLIED;
	snprintf(l->detail, sizeof l->detail, "ABI %d, %d fs rights handled, %d rules, %zu secret%s hidden%s%s",
		 abi, __builtin_popcountll(w.handled), w.n, w.sc ? w.sc->n : 0, w.sc && w.sc->n == 1 ? "" : "s",
		 a.handled_access_net ? ", tcp bind/connect denied" : "",
		 a.scoped ? ", signal and abstract-socket scopes" : "");
	return 0;
}

/* The system-wide files of the host's /proc a session may read: what
 * Python, numpy, pandas and matplotlib (and psutil-like code) look at for the
 * machine's CPUs, memory and load.  Not the lists of other processes' locks,
 * timers, IPC objects or keys, nor kernel addresses. */
static const char *const proc_files[] = {
	"cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version", "filesystems",
	"swaps", "vmstat", "zoneinfo", "buddyinfo", "pressure", "sys", NULL,
};

/* The host's /proc (no pid namespace) shows every process's command line
 * and status to anyone: not a ptrace-checked file, so neither the ptrace
 * rule nor the uid stops it, and command lines carry tokens (an agent's
 * --api-key, a database URL).  Mounting a /proc with hidepid is not possible
 * without a mount namespace.  So the session's own domain handles reading
 * too, and grants it on everything but /proc (the zygote's domain below
 * decides what of the rest is readable) and, in /proc, on the session's own
 * entry and a few system-wide files only.  A Landlock rule names an inode,
 * and the kernel makes a new inode for /proc/PID whenever its dentry is
 * looked up again: the rule's directory stays open here, which keeps the
 * dentry (code that closes it only loses its own /proc).  The processes the
 * session forks (and a checkpoint resumed as the session) are other pids:
 * they read none of /proc/PID, their own included.  The zygote, outside
 * this domain, still reads /proc: it ends what sessions leave behind.
 * Attack: a cell reads /proc/PID/cmdline of the agent that started the
 * server, and of every other process of the host or container. */
static int session_reads(int rs, enum session_proc proc, int *n)
{
	const uint64_t R = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	int r = 0;
	char path[PATH_MAX];
	for (size_t i = 0; r == 0 && i < n_top; i++) {
		snprintf(path, sizeof path, "/%s", top[i]);
		r = add_path(rs, path, R, R, n);
		if (r == -ELOOP || r == -ENOTDIR)
			r = 0; /* a dangling or odd link: nothing to read there */
	}
	for (const char *const *f = proc_files; r == 0 && *f; f++) {
		if (proc == SESSION_PROC_OWN_NO_SYS && !strcmp(*f, "sys"))
			continue;
		snprintf(path, sizeof path, "/proc/%s", *f);
		r = add_path(rs, path, R, R, n);
	}
	if (r < 0)
		return r;
	/* Its own entry: /proc/self resolves to /proc/PID (and thread-self
	 * below it), the dentry kept by this descriptor, which stays open for
	 * the life of the process.  No /proc at all: nothing to grant. */
	cleanup_fd int fd = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == EACCES ? 0 : -errno;
	int self = fcntl(fd, F_DUPFD_CLOEXEC, 64);
	if (self < 0)
		return -errno;
	struct psm_path_beneath pb = { .allowed_access = R, .parent_fd = self };
	if (syscall(__NR_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return -errno;
	(*n)++;
	return r;
}

int landlock_scope_session(enum session_proc proc, struct err *e)
{
	int abi = landlock_abi();
	bool reads = proc != SESSION_PROC_ALL && abi > 0;
	if (abi < 6 && !reads)
		return 0;
	/* A domain that handles no access right but the scopes: a session
	 * cannot signal (or ptrace: the Landlock ptrace rule is by domain)
	 * the zygote or another session, nor connect to their abstract
	 * sockets; the zygote, outside this nested domain, still can.  With
	 * the host's /proc, reads too (session_reads). */
	struct psm_ruleset_attr a = { 0 };
	size_t size = sizeof a;
	if (abi >= 6)
		a.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	else
		size = offsetof(struct psm_ruleset_attr, handled_access_net);
	if (reads)
		a.handled_access_fs = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	cleanup_fd int rs = (int)syscall(__NR_landlock_create_ruleset, &a, size, 0);
	if (rs < 0)
		return err_sys(e, -errno, "session: landlock_create_ruleset");
	int n = 0, r = reads ? session_reads(rs, proc, &n) : 0;
	if (r < 0)
		return err_sys(e, r, "session: landlock rules for reading");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(__NR_landlock_restrict_self, rs, 0) < 0)
		return err_sys(e, -errno, "session: landlock_restrict_self");
	return 1;
}
