/* The jail: the ordered chain of layers, the report, --check.
 *
 * jail_enter() runs each layer in turn (fds -> uid -> namespaces and mount
 * tree -> capabilities -> rlimits -> Landlock -> seccomp); each fills its
 * entry of the report.  A layer the kernel lacks is marked not available and
 * the chain goes on (the remaining layers still apply); a layer that fails
 * while setting up aborts the chain (the caller exits: fail closed).  At the
 * end the report says whether what the policy asks for is enforced, and if
 * not, why. */
#include "jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the test hook ---- */

static char disabled_list[256];

static void read_disabled(void)
{
	/* Read once, before the environment is replaced. */
	const char *s = getenv("PSM_JAIL_DISABLE");
	snprintf(disabled_list, sizeof disabled_list, "%s", s ? s : "");
}

bool jail_disabled(const char *layer)
{
	size_t n = strlen(layer);
	for (const char *p = disabled_list; *p;) {
		const char *end = strchr(p, ',');
		size_t k = end ? (size_t)(end - p) : strlen(p);
		if (k == n && strncmp(p, layer, n) == 0)
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

/* ---- names ---- */

const char *jail_layer_name(enum jail_layer_id id)
{
	static const char *const names[JL_COUNT] = {
		[JL_FDS] = "fds", [JL_UID] = "uid", [JL_USERNS] = "userns",
		[JL_MOUNTNS] = "mountns", [JL_PIDNS] = "pidns", [JL_NETNS] = "netns",
		[JL_IPCNS] = "ipcns", [JL_UTSNS] = "utsns", [JL_CAPS] = "caps",
		[JL_RLIMITS] = "rlimits", [JL_LANDLOCK] = "landlock", [JL_SECCOMP] = "seccomp",
	};
	return (unsigned)id < JL_COUNT ? names[id] : "?";
}

const char *jail_state_name(enum jail_state s)
{
	switch (s) {
	case JS_NOT_NEEDED: return "not needed";
	case JS_APPLIED: return "applied";
	case JS_NOT_AVAILABLE: return "not available";
	case JS_FAILED: return "failed";
	}
	return "?";
}

const char *const *jail_default_runtime_paths(void)
{
	/* Debian's python3.11 with numpy, pandas, matplotlib from packages:
	 * the interpreter, stdlib, dist-packages, shared libraries and fonts
	 * are under /usr; /lib, /bin... are merged-usr links (recreated as
	 * links); the /etc files are the ones they read (BLAS/LAPACK through
	 * /etc/alternatives, matplotlibrc, Debian's sitecustomize, OpenSSL's
	 * config for hashlib).  Missing entries are skipped. */
	static const char *const paths[] = {
		"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
		"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/localtime", "/etc/timezone", "/etc/fonts", "/etc/matplotlibrc",
		"/etc/python3", "/etc/python3.11", "/etc/mime.types", "/etc/ssl/openssl.cnf",
		NULL,
	};
	return paths;
}

/* ---- the report ---- */

static void need(struct jail_report *r, const char *what)
{
	size_t n = strlen(r->why);
	r->enforceable = false;
	if (n + 3 >= sizeof r->why)
		return;
	snprintf(r->why + n, sizeof r->why - n, "%s%s", n ? "; " : "", what);
}

static bool ok(const struct jail_report *r, enum jail_layer_id id)
{
	return r->layer[id].state == JS_APPLIED;
}

/* What the policy needs, and whether the applied layers provide it. */
static void judge(const struct jail_config *c, struct jail_report *r, int landlock_abi_v)
{
	const struct policy *p = c->policy;
	r->enforceable = true;
	r->why[0] = '\0';
	static const enum jail_layer_id always[] = { JL_FDS, JL_CAPS, JL_RLIMITS, JL_SECCOMP };
	for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) {
		r->layer[always[i]].required = true;
		if (!ok(r, always[i])) {
			char m[96];
			snprintf(m, sizeof m, "%s is required and was not applied",
				 jail_layer_name(always[i]));
			need(r, m);
		}
	}
	if (r->layer[JL_UID].state != JS_NOT_NEEDED) {
		r->layer[JL_UID].required = true;
		if (!ok(r, JL_UID))
			need(r, "the sandbox would run as root");
	}
	/* The filesystem.  Reads: either wall confines them.  Writes need
	 * the mount tree: Landlock does not cover metadata (chmod, utime,
	 * xattrs, chown to its own ids), so alone it would let the code change
	 * the modes and times of files its uid owns in ROOT. */
	if (!ok(r, JL_MOUNTNS) && !ok(r, JL_LANDLOCK)) {
		r->layer[JL_MOUNTNS].required = r->layer[JL_LANDLOCK].required = true;
		need(r, "fs_read and fs_write cannot be enforced: no mount namespace and no Landlock");
	} else if (!ok(r, JL_MOUNTNS)) {
		r->layer[JL_MOUNTNS].required = true;
		need(r, "fs_write cannot be fully enforced without a mount namespace "
			"(Landlock does not stop chmod/utime on files the sandbox's uid owns)");
	}
	/* net_access false: seccomp refuses every non-unix socket; abstract
	 * unix sockets of host daemons are reached unless the network
	 * namespace or Landlock's scope separates them. */
	if (!p->net_access && !ok(r, JL_NETNS) && !(ok(r, JL_LANDLOCK) && landlock_abi_v >= 6)) {
		r->layer[JL_NETNS].required = true;
		need(r, "net_access false cannot be enforced: host abstract unix sockets reachable "
			      "(no network namespace, no Landlock ABI >= 6)");
	}
	/* Other processes: the pid namespace hides them, Landlock's signal
	 * scope makes them unreachable; without either the code could signal
	 * the server (same uid when it is not root). */
	if (!ok(r, JL_PIDNS) && !(ok(r, JL_LANDLOCK) && landlock_abi_v >= 6)) {
		r->layer[JL_PIDNS].required = true;
		need(r, "host processes visible and signalable (no pid namespace, no Landlock ABI >= 6)");
	}
}

char *jail_report_describe(const struct jail_report *r)
{
	size_t cap = 4096 + sizeof r->why;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	size_t n = 0;
	n += (size_t)snprintf(s + n, cap - n, "jail: %s%s%s\n",
			      r->enforceable ? "enforceable" : "NOT enforceable",
			      r->enforceable ? "" : ": ", r->enforceable ? "" : r->why);
	for (int i = 0; i < JL_COUNT && n < cap; i++) {
		const struct jail_layer *l = &r->layer[i];
		bool missing = l->required && l->state != JS_APPLIED;
		n += (size_t)snprintf(s + n, cap - n, "  %-9s %-14s%s%s\n", jail_layer_name(i),
				      jail_state_name(l->state), missing ? "(required) " : "",
				      l->detail);
	}
	return s;
}

/* ---- the chain ---- */

static int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int jail_enter(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	memset(r, 0, sizeof *r);
	for (int i = 0; i < JL_COUNT; i++)
		r->layer[i].state = JS_NOT_NEEDED;
	if (!c || !c->policy || !c->root || !c->workspace || c->root[0] != '/' || c->workspace[0] != '/')
		return err_set(e, -EINVAL, "jail: root and workspace must be absolute paths");
	/* setresuid, unshare and seccomp act on the calling thread (or need
	 * one thread): a second thread would stay outside the jail. */
	int nt = thread_count();
	if (nt != 1 && nt != -1)
		return err_set(e, -EINVAL, "jail: %d threads; the jail must be entered single-threaded", nt);
	read_disabled();
	bool root = geteuid() == 0;
	int rc;

	if ((rc = jail_fds_apply(c, r, e)) < 0)
		goto fail;

	/* Root without user namespaces can still build the other namespaces
	 * and the mount tree itself, before giving root up. */
	uid_t uid;
	gid_t gid;
	jail_uid_choose(c, &uid, &gid);
	bool userns = !jail_disabled("userns") &&
		      jail_userns_probe(root ? uid : getuid(), root ? gid : getgid());
	if (!userns) {
		r->layer[JL_USERNS].state = JS_NOT_AVAILABLE;
		snprintf(r->layer[JL_USERNS].detail, sizeof r->layer[0].detail, "%s",
			 jail_disabled("userns") ? "disabled by PSM_JAIL_DISABLE"
						 : "unshare(CLONE_NEWUSER) refused");
	}
	if (root && !userns) {
		if ((rc = jail_ns_apply(c, false, r, e)) < 0)
			goto fail;
		if ((rc = jail_uid_apply(c, true, r, e)) < 0)
			goto fail;
	} else {
		int idm = 0;
		if (root && (idm = rc = jail_ns_prepare(c, uid, gid, e)) < 0)
			goto fail;
		if ((rc = jail_uid_apply(c, idm == 0, r, e)) < 0)
			goto fail;
		if ((rc = jail_ns_apply(c, userns, r, e)) < 0)
			goto fail;
	}
	if ((rc = jail_caps_apply(c, r, e)) < 0)
		goto fail;
	if ((rc = jail_rlimits_apply(c, r, e)) < 0)
		goto fail;
	if ((rc = landlock_apply(c, ok(r, JL_MOUNTNS), r, e)) < 0)
		goto fail;
	/* PDEATHSIG again: credential changes above may have cleared it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (chdir(c->root) < 0) {
		rc = err_sys(e, -errno, "jail: chdir %s", c->root);
		goto fail;
	}
	if ((rc = seccomp_apply(c, r, e)) < 0)
		goto fail;
	judge(c, r, landlock_abi());
	return 0;
fail:
	judge(c, r, landlock_abi());
	return rc;
}

int jail_session_enter(struct err *e)
{
	int rc = landlock_scope_session(e);
	if (rc < 0)
		return rc;
	/* Not dumpable: another session (same uid) cannot read this one's
	 * /proc/<pid>/mem, environ or fds; no core file. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return err_sys(e, -errno, "session: PR_SET_DUMPABLE");
	return 0;
}

/* ---- --check ---- */

struct probe_result {
	struct jail_report report;
	int rc;           /* jail_enter's result */
	char err[256];
	int write_errno;  /* 0: the write succeeded (an escape) */
	int socket_errno; /* 0: socket(AF_INET) succeeded; -1: not probed */
	int exec_errno;   /* 0: execve succeeded; -1: not probed */
	char write_path[512];
};

static bool writable_by_policy(const struct policy *p, const char *dir)
{
	if (p->fs_write == FS_WRITE_LIST)
		for (size_t i = 0; i < p->n_fs_write_paths; i++)
			if (strcmp(p->fs_write_paths[i], dir) == 0)
				return true;
	return false;
}

static void probe_path(const struct jail_config *c, char *out, size_t n)
{
	/* Outside what the policy lets the code write: ROOT, or its parent
	 * when ROOT itself is listed as writable. */
	char dir[512];
	snprintf(dir, sizeof dir, "%s", c->root);
	if (writable_by_policy(c->policy, dir) || strcmp(dir, c->workspace) == 0) {
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir)
			*slash = '\0';
	}
	snprintf(out, n, "%.400s/.psm-check-probe-%d", strcmp(dir, "/") ? dir : "", (int)getpid());
}

static void run_probes(const struct jail_config *c, struct probe_result *pr)
{
	int fd = open(pr->write_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	pr->write_errno = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	pr->socket_errno = -1;
	if (!c->policy->net_access) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		pr->socket_errno = s < 0 ? errno : 0;
		if (s >= 0)
			close(s);
	}
	pr->exec_errno = -1;
	if (!c->policy->shell_exec) {
		int pfd[2];
		if (pipe2(pfd, O_CLOEXEC) < 0) {
			pr->exec_errno = 0;
			return;
		}
		pid_t pid = fork();
		if (pid == 0) {
			char *const argv[] = { "true", NULL };
			execve("/usr/bin/true", argv, (char *const[]){ NULL });
			int er = errno;
			(void)!write(pfd[1], &er, sizeof er);
			_exit(0);
		}
		close(pfd[1]);
		int er = 0;
		if (pid < 0 || read(pfd[0], &er, sizeof er) != (ssize_t)sizeof er)
			er = 0; /* nothing written: the exec went through */
		close(pfd[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		pr->exec_errno = er;
	}
}

static const char *probe_word(int err_no, bool expect_refused)
{
	if (err_no < 0)
		return "not probed (allowed by the policy)";
	return err_no ? "refused" : expect_refused ? "ALLOWED (escape)" : "allowed";
}

int jail_check(const struct jail_config *c, FILE *out)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		fprintf(out, "jail check: pipe: %s\n", strerror(errno));
		return 1;
	}
	static struct probe_result pr;
	memset(&pr, 0, sizeof pr);
	probe_path(c, pr.write_path, sizeof pr.write_path);
	fflush(out);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(out, "jail check: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		close(pfd[0]);
		int keep[66];
		size_t n = 0;
		keep[n++] = pfd[1];
		keep[n++] = STDERR_FILENO;
		struct jail_config cc = *c;
		cc.keep_fds = keep;
		cc.n_keep_fds = n;
		struct err e = { 0 };
		pr.rc = jail_enter(&cc, &pr.report, &e);
		snprintf(pr.err, sizeof pr.err, "%.255s", e.msg);
		if (pr.rc == 0)
			run_probes(c, &pr);
		(void)!write(pfd[1], &pr, sizeof pr);
		_exit(0);
	}
	close(pfd[1]);
	size_t got = 0;
	while (got < sizeof pr) {
		ssize_t k = read(pfd[0], (char *)&pr + got, sizeof pr - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got != sizeof pr) {
		fprintf(out, "jail check: the jailed child died before reporting\n");
		return 1;
	}
	char *desc = jail_report_describe(&pr.report);
	fprintf(out, "%s", desc ? desc : "");
	free(desc);
	if (pr.rc < 0) {
		fprintf(out, "jail check: setting up the jail failed: %s\n", pr.err);
		return 1;
	}
	/* The write probe is judged from outside too: the file must not exist. */
	struct stat sb;
	bool exists = lstat(pr.write_path, &sb) == 0;
	if (exists)
		unlink(pr.write_path);
	bool good = pr.report.enforceable && pr.write_errno != 0 && !exists &&
		    pr.socket_errno != 0 && pr.exec_errno != 0;
	fprintf(out, "probes:\n");
	fprintf(out, "  write %-34s %s%s%s\n", pr.write_path, probe_word(pr.write_errno, true),
		pr.write_errno > 0 ? ": " : "", pr.write_errno > 0 ? strerror(pr.write_errno) : "");
	fprintf(out, "  socket(AF_INET)                          %s%s%s\n",
		probe_word(pr.socket_errno, true), pr.socket_errno > 0 ? ": " : "",
		pr.socket_errno > 0 ? strerror(pr.socket_errno) : "");
	fprintf(out, "  execve /usr/bin/true                     %s%s%s\n",
		probe_word(pr.exec_errno, true), pr.exec_errno > 0 ? ": " : "",
		pr.exec_errno > 0 ? strerror(pr.exec_errno) : "");
	fprintf(out, "check: %s\n", good ? "the policy is enforced" : "the policy is NOT enforced");
	return good ? 0 : 1;
}
