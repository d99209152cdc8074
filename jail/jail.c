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

#include "apparmor.h"
#include "caps.h"
#include "fds.h"
#include "landlock.h"
#include "ns.h"
#include "rlimits.h"
#include "seccomp.h"
#include "secrets.h"
#include "uid.h"

#include "../common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* ---- secrets and the project root ---- */

static char home_dir[4096];      /* $HOME, read before the environment is replaced */

/* ROOT = "/" or the user's home directory is not a project: fs_read true
 * would show every dotfile and key of the user (the secret list only names
 * the well-known ones).  Agents started from the home directory do that by
 * default, so it is refused with what to do instead (jail.h). */
bool jail_root_not_project(const char *root, const char *home, char *which, size_t n)
{
	char real[4096];
	const char *cands[2] = { home, NULL };
	struct passwd *pw = getpwuid(getuid());
	if (pw && pw->pw_dir)
		cands[1] = pw->pw_dir;
	if (strcmp(root, "/") == 0) {
		snprintf(which, n, "the whole file system");
		return true;
	}
	for (size_t i = 0; i < 2; i++)
		if (cands[i] && cands[i][0] && realpath(cands[i], real) && strcmp(real, root) == 0) {
			snprintf(which, n, "the home directory");
			return true;
		}
	return false;
}

static char root_refusal[512];

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

static void remedy(struct jail_report *r, const char *what)
{
	size_t n = strlen(r->remedy);
	if (strstr(r->remedy, what) || n + 3 >= sizeof r->remedy)
		return;
	snprintf(r->remedy + n, sizeof r->remedy - n, "%s%s", n ? "; " : "", what);
}

/* The ways to get the namespaces back, for the report: which one applies
 * depends on where the server runs, so all are named. */
#define REMEDY_NS "namespaces: in Docker or Podman, --security-opt seccomp=unconfined or a profile " 	"allowing unshare and clone with CLONE_NEW*; on Ubuntu 23.10 and later, the AppArmor profile " 	"that make install puts in /etc/apparmor.d, or sysctl kernel.apparmor_restrict_unprivileged_userns=0; " 	"elsewhere, sysctl user.max_user_namespaces > 0 (or kernel.unprivileged_userns_clone=1)"
#define REMEDY_LANDLOCK "Landlock: a kernel of 5.13 or later with CONFIG_SECURITY_LANDLOCK and \"landlock\" " 	"in the lsm= boot parameter (cat /sys/kernel/security/lsm); in a container, a seccomp profile " 	"that allows the landlock_* system calls (Docker 23 and later do)"
#define REMEDY_SCOPES "a kernel of 6.12 or later (Landlock ABI 6: signal and abstract-socket scopes)"

/* What the policy needs, and whether the applied layers provide it.
 *
 * Two modes.  With a mount namespace, the mount tree shows only what the
 * policy allows (read-only where it must be), /tmp is a private tmpfs, and
 * Landlock and seccomp are a second wall.  Without one (the "Landlock +
 * seccomp" mode: containers whose seccomp profile refuses unshare, Ubuntu's
 * AppArmor restriction), Landlock alone decides what can be read and
 * written, and seccomp closes what Landlock does not see:
 *  - metadata (chmod, chown, utime, xattrs, file flags) of files the
 *    sandbox's uid owns outside the workspace: refused outright, since a
 *    filter cannot tell which file an fd or a path names (seccomp.c);
 *  - truncate(2) by path where Landlock has no TRUNCATE right (ABI < 3);
 *  - SysV IPC and POSIX message queues shared with the host: refused;
 *  - socket(AF_UNIX): host daemons' sockets (pathname or abstract) are not
 *    hidden by any mount tree, so none can be created (socketpair stays);
 *  - /tmp: a private scratch directory (TMPDIR) instead of the host's.
 * Other processes: the pid namespace hides them; without it Landlock's
 * signal scope (ABI 6) stops signals, its ptrace rule (every ABI) stops
 * ptrace and reading /proc/PID/{mem,environ,fd}, seccomp refuses ptrace
 * and process_vm_*, and each session's own Landlock domain grants only its
 * own /proc entry (command lines and status of the others are refused;
 * the zygote, which ends what sessions leave behind, still reads /proc). */
static void judge(const struct jail_config *c, struct jail_report *r, int landlock_abi_v)
{
	const struct policy *p = c->policy;
	r->enforceable = true;
	r->why[0] = '\0';
	r->remedy[0] = '\0';
	r->nsfree = !ok(r, JL_MOUNTNS);
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
	if (root_refusal[0])
		need(r, root_refusal);
	/* Secrets under what fs_read shows: with the mount tree, an empty
	 * mount covers each (jail_ns_hide) and Landlock grants around them
	 * too; without it, Landlock alone hides them. */
	const struct secret_scan *sc = secrets_slot();
	bool covered = ok(r, JL_MOUNTNS) && secrets_covered(sc, "/");
	if (sc->overflow)
		need(r, "the project has too many files to look through for secrets (more than "
			"200000 entries, or 4096 matches); list the directories the code needs "
			"under fs_read instead of true");
	else if (sc->n > 0 && !ok(r, JL_LANDLOCK) && !covered) {
		r->layer[JL_LANDLOCK].required = true;
		need(r, "secrets under the project (.env, keys...) can only be hidden with Landlock");
	} else if (ok(r, JL_MOUNTNS) && (!secrets_covered(sc, "/tmp") || !secrets_covered(sc, "/dev/shm"))) {
		/* The jail's private /tmp is readable and writable as a whole,
		 * and a Landlock rule covers what is mounted below it too: a
		 * project there shows a secret no mount covers. */
		need(r, "the project lies under /tmp (or /dev/shm) and holds secrets (.env, keys...) that "
			"could not be covered, which the jail's private /tmp would show; move the project "
			"elsewhere, or set fs_read to a list of the directories the code needs");
	}
	bool ll = ok(r, JL_LANDLOCK);
	/* The filesystem: the mount tree, or Landlock with seccomp's metadata
	 * rules and a private scratch directory. */
	if (!ok(r, JL_MOUNTNS) && !ll) {
		r->layer[JL_MOUNTNS].required = r->layer[JL_LANDLOCK].required = true;
		need(r, "fs_read and fs_write cannot be enforced: no mount namespace and no Landlock");
		remedy(r, REMEDY_NS);
		remedy(r, REMEDY_LANDLOCK);
	} else if (r->nsfree) {
		r->layer[JL_LANDLOCK].required = true;
		if (!r->scratch[0])
			need(r, "no private scratch directory could be made (/tmp and /var/tmp not writable)");
	}
	/* net_access false: seccomp refuses every non-unix socket; abstract
	 * unix sockets of host daemons are reached unless the network
	 * namespace or Landlock's scope separates them (in the namespace-free
	 * mode no unix socket can be created at all). */
	if (!p->net_access && !ok(r, JL_NETNS) && !r->nsfree && !(ll && landlock_abi_v >= 6)) {
		r->layer[JL_NETNS].required = true;
		need(r, "net_access false cannot be enforced: host abstract unix sockets reachable "
			      "(no network namespace, no Landlock ABI >= 6)");
		remedy(r, REMEDY_SCOPES);
	}
	/* Other processes: the pid namespace hides them, Landlock's signal
	 * scope makes them unreachable; without either the code could signal
	 * the server (same uid when it is not root). */
	if (!ok(r, JL_PIDNS) && !(ll && landlock_abi_v >= 6)) {
		r->layer[JL_PIDNS].required = true;
		need(r, "host processes visible and signalable (no pid namespace, no Landlock ABI >= 6)");
		remedy(r, REMEDY_NS);
		remedy(r, REMEDY_SCOPES);
	}
}

char *jail_report_describe(const struct jail_report *r)
{
	size_t cap = 6144 + sizeof r->why + sizeof r->remedy;
	char *s = xmalloc(cap);
	size_t n = 0;
	n += (size_t)snprintf(s + n, cap - n, "jail: %s%s%s\n",
			      r->enforceable ? "enforceable" : "NOT enforceable",
			      r->enforceable ? "" : ": ", r->enforceable ? "" : r->why);
	n += (size_t)snprintf(s + n, cap - n, "mode: %s\n",
			      r->nsfree ? "Landlock + seccomp (no mount namespace)" : "namespaces");
	for (int i = 0; i < JL_COUNT && n < cap; i++) {
		const struct jail_layer *l = &r->layer[i];
		bool missing = l->required && l->state != JS_APPLIED;
		n += (size_t)snprintf(s + n, cap - n, "  %-9s %-14s%s%s\n", jail_layer_name(i),
				      jail_state_name(l->state), missing ? "(required) " : "",
				      l->detail);
	}
	if (r->nsfree && n < cap && r->layer[JL_LANDLOCK].state == JS_APPLIED)
		n += (size_t)snprintf(s + n, cap - n,
				      "  what this mode does not give: /proc shows a cell only its session's own "
				      "process (not the processes it forks, nor the session after a rollback; "
				      "other processes' command lines and status are refused, their pids can "
				      "still be probed); stat tells what exists outside the policy; "
				      "chmod, chown, utime and xattr changes are refused everywhere, the "
				      "workspace included (shutil.copy and copy2 copy the data, not the "
				      "metadata), so are leases, inotify and the ioctls the stack does not "
				      "use; no unix sockets (socketpair works); no SysV IPC or POSIX "
				      "message queues; /tmp is the host's and hidden: TMPDIR points at a "
				      "private directory\n");
	if (n < cap && r->remedy[0])
		n += (size_t)snprintf(s + n, cap - n, "  remedy: %s\n", r->remedy);
	else if (n < cap && r->nsfree)
		n += (size_t)snprintf(s + n, cap - n, "  to get the namespace mode instead: %s\n", REMEDY_NS);
	return s;
}

/* ---- the namespace-free mode's scratch directory ---- */

#define NOBODY_GID 65534

/* Without a mount namespace there is no private tmpfs for /tmp: the host's
 * /tmp is shared with every other user and stays closed (Landlock grants
 * nothing there).  Python, tempfile and matplotlib get a fresh directory
 * instead (mode 0700, owned by the sandbox's uid: no other user can enter
 * it), the only place outside what the policy makes writable that Landlock
 * lets the code write; TMPDIR, HOME and a /tmp MPLCONFIGDIR point at it.
 *
 * The server makes it (jail_scratch_make) and names it in the zygote's
 * configuration: it removes it when the zygote ends, so the path it
 * deletes must be its own, never one the zygote reported.  Here it is only
 * checked: a directory, no symlink, the sandbox's own, private.  Without
 * one (a caller that made none, or a server that could not give it to the
 * sandbox's uid) the jail makes its own, which nobody removes. */
static void make_scratch(const struct jail_config *c, struct jail_report *r)
{
	static const char *const bases[] = { "/tmp", "/var/tmp", NULL };
	r->scratch[0] = '\0';
	struct stat st;
	if (c->scratch && c->scratch[0] == '/' && strlen(c->scratch) < sizeof r->scratch &&
	    lstat(c->scratch, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0)
		snprintf(r->scratch, sizeof r->scratch, "%s", c->scratch);
	for (const char *const *b = bases; *b && !r->scratch[0]; b++) {
		char t[sizeof r->scratch];
		snprintf(t, sizeof t, "%s/psm-scratch-XXXXXX", *b);
		if (mkdtemp(t))
			snprintf(r->scratch, sizeof r->scratch, "%s", t);
	}
	if (!r->scratch[0])
		return;
	setenv("TMPDIR", r->scratch, 1);
	setenv("HOME", r->scratch, 1);
	const char *mpl = getenv("MPLCONFIGDIR");
	if (r->euid0) {
		/* The effective uid 0 (uid.c) writes here as its owner;
		 * access(2) answers for the real ids, 65534's, and sqlite picks
		 * its directory for temporary files by access(W_OK|X_OK) (its
		 * temporary tables failed with "unable to open database file"),
		 * matplotlib its cache the same way: the group is the real
		 * gid's.  What else may enter is what could enter the scratch
		 * directory 65534 owned before: uid 65534's processes, here
		 * group 65534's. */
		if (chown(r->scratch, 0, NOBODY_GID) < 0 || chmod(r->scratch, 0770) < 0) {
			rmdir(r->scratch);
			r->scratch[0] = '\0';
			return;
		}
		setenv("MPLCONFIGDIR", r->scratch, 1);
	} else if (!mpl || strncmp(mpl, "/tmp/", 5) == 0) {
		char m[sizeof r->scratch + 16];
		snprintf(m, sizeof m, "%s/matplotlib", r->scratch);
		setenv("MPLCONFIGDIR", m, 1);
	}
}

int jail_scratch_make(uid_t uid, gid_t gid, char *out, size_t n, dev_t *dev, ino_t *ino)
{
	static const char *const bases[] = { "/tmp", "/var/tmp", NULL };
	int rc = -ENOENT;
	for (const char *const *b = bases; *b; b++) {
		char t[256];
		snprintf(t, sizeof t, "%s/psm-scratch-XXXXXX", *b);
		if (!mkdtemp(t)) {
			rc = -errno;
			continue;
		}
		/* By descriptor, so the checks and the owner are the new
		 * directory's whatever replaced the name meanwhile. */
		int fd = open(t, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		errno = 0;
		if (fd < 0 || fstat(fd, &st) < 0 || (st.st_uid != uid && fchown(fd, uid, gid) < 0) || fchmod(fd, 0700) < 0 ||
		    fstat(fd, &st) < 0 || strlen(t) >= n) {
			rc = errno ? -errno : -ENAMETOOLONG;
			if (fd >= 0)
				close(fd);
			rmdir(t);
			continue;
		}
		close(fd);
		snprintf(out, n, "%s", t);
		*dev = st.st_dev;
		*ino = st.st_ino;
		return 0;
	}
	return rc;
}

static int remove_below(int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM)
			continue;
		/* A directory.  O_NOFOLLOW: a symlink swapped in meanwhile is
		 * not followed; made searchable first (the code may have left
		 * it 0). */
		int ch = fchmodat(dfd, de->d_name, 0700, AT_SYMLINK_NOFOLLOW);
		(void)ch; /* not ours to change, or gone: the open says */
		int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0 && depth < 256)
			rc = remove_below(sub, depth + 1);
		else if (sub >= 0)
			close(sub);
		if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0 && rc == 0)
			rc = -errno;
	}
	closedir(d);
	return rc;
}

int jail_scratch_remove(const char *path)
{
	return jail_scratch_remove_same(path, 0, 0);
}

int jail_scratch_remove_same(const char *path, dev_t dev, ino_t ino)
{
	if (!path || strncmp(path, "/", 1) != 0 || !strstr(path, "/psm-scratch-"))
		return -EINVAL; /* only ever what make_scratch made */
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	if (ino && (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino)) {
		close(fd);
		return -ESTALE; /* another directory under that name now: not ours */
	}
	int rc = remove_below(fd, 0);
	if (rmdir(path) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* ---- the chain ---- */

/* What a session may read of /proc, decided when the jail is entered (the
 * sessions are forks of the process that entered it). */
static enum session_proc session_proc = SESSION_PROC_ALL;
static bool session_dumpable; /* jail_report.dumpable */

/* The secrets under what fs_read shows, found once; with a mount tree each
 * is also covered by an empty mount (ns.c), so that the tree itself
 * hides it, even where a Landlock rule covers it (a project under /tmp,
 * below the jail's private /tmp). */
static int scan_and_hide(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	struct secret_scan *s = secrets_slot();
	secrets_free(s);
	/* A refused ROOT runs nothing: a walk of a whole home directory would
	 * only add a second cause (too many entries) to the one that counts. */
	if (root_refusal[0])
		return 0;
	int rc = secrets_scan(c, s);
	if (rc < 0)
		return err_sys(e, rc, "jail: looking for secrets under %s", c->root);
	if (ok(r, JL_MOUNTNS))
		jail_ns_hide(s, &r->layer[JL_MOUNTNS]);
	return 0;
}

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

/* What the steps of jail_enter share. */
struct entry {
	const struct jail_config *c;
	struct jail_report *r;
	struct err *e;
	bool root;       /* the server runs as root */
	uid_t uid;       /* the ids the sandbox runs as when root (jail_uid_choose) */
	gid_t gid;
	bool userns;     /* a user namespace can be made */
	bool root_route; /* root builds the namespaces itself, then gives root up */
	int idmapped;    /* jail_ns_prepare cloned the mount sources ID-mapped */
};

static int step_fds(struct entry *en)
{
	int rc = jail_fds_apply(en->c, en->r, en->e);
	if (rc < 0)
		return rc;
	/* Group and other write off for everything the code creates: with a
	 * umask of 0 inherited from the server, open(..., 0666) would leave
	 * world-writable files in the workspace.  seccomp then refuses any
	 * umask that turns them back on. */
	umask(umask(0) | S_IWGRP | S_IWOTH);
	return 0;
}

/* Root without user namespaces can still build the other namespaces and
 * the mount tree itself, before giving root up.  So does root whose user
 * namespace could not build a mount tree (AppArmor's restriction leaves it
 * without capabilities): giving root up first would leave a project below
 * a directory only root may enter out of reach, where the root route can
 * keep the effective uid 0.  Decides only; changes nothing. */
static int step_route(struct entry *en)
{
	jail_aa_note(); /* while the host's /proc is there */
	struct jail_report *r = en->r;
	jail_uid_choose(en->c, &en->uid, &en->gid);
	en->userns = !jail_disabled("userns") &&
		     jail_userns_probe(en->root ? en->uid : getuid(), en->root ? en->gid : getgid(), false);
	if (!en->userns) {
		r->layer[JL_USERNS].state = JS_NOT_AVAILABLE;
		snprintf(r->layer[JL_USERNS].detail, sizeof r->layer[0].detail, "%s",
			 jail_disabled("userns") ? "disabled by PSM_JAIL_DISABLE"
						 : "unshare(CLONE_NEWUSER) refused");
	}
	en->root_route = en->root && (!en->userns || jail_disabled("mountns") ||
				      !jail_userns_probe(en->uid, en->gid, true));
	return 0;
}

/* As root, on either route: the mount sources cloned while root can
 * still reach them. */
static int step_prepare(struct entry *en)
{
	if (!en->root)
		return 0;
	int rc = jail_ns_prepare(en->c, en->uid, en->gid, en->e);
	if (rc < 0)
		return rc;
	en->idmapped = rc;
	return 0;
}

/* Root on the user-namespace route: the IPC namespace before root goes. */
static int step_ipc_early(struct entry *en)
{
	if (en->root && en->userns && !en->root_route)
		jail_ns_ipc_early(en->r);
	return 0;
}

/* The user-namespace route gives root up before the namespaces are built,
 * so that they are built as the sandbox's uid. */
static int step_uid_first(struct entry *en)
{
	if (en->root_route)
		return 0;
	return jail_uid_apply(en->c, en->idmapped == 0, false, en->r, en->e);
}

static int step_ns(struct entry *en)
{
	return jail_ns_apply(en->c, en->userns && !en->root_route, en->r, en->e);
}

/* The secrets, in the sandbox's view of the files: as its uid with the
 * capabilities of its own user namespace (for the mounts), or still as
 * root on the root route (a superset of what the sandbox could list). */
static int step_secrets(struct entry *en)
{
	return scan_and_hide(en->c, en->r, en->e);
}

/* The root route gives root up once the namespaces and mounts are made. */
static int step_uid_last(struct entry *en)
{
	if (!en->root_route)
		return 0;
	return jail_uid_apply(en->c, en->idmapped == 0, !ok(en->r, JL_MOUNTNS), en->r, en->e);
}

static int step_scratch(struct entry *en)
{
	if (en->r->layer[JL_MOUNTNS].state != JS_APPLIED)
		make_scratch(en->c, en->r);
	return 0;
}

/* The namespaces are built: every capability given up, then, under the
 * AppArmor profile that allowed them, its capability-less child entered
 * (apparmor.h).  In that order: emptying the bounding set takes
 * CAP_SETPCAP, which the child refuses.  Attack it stops: with the child
 * entered first, the bounding-set drop failed in silence ("0 dropped";
 * the zygote and every session kept CapBnd 1ffffffffff, seen on Debian
 * 13's kernel with the profile loaded), so the jail's own layer held
 * nothing back once AppArmor's was gone (a profile unloaded or replaced
 * leaves its processes unconfined).  The stack needs no capability, and
 * is allowed under the no_new_privs the caps step sets. */
static int step_caps(struct entry *en)
{
	char aa[96] = "";
	int rc = jail_caps_apply(en->c, en->r, en->e);
	if (rc == 0)
		rc = jail_aa_enter(aa, sizeof aa, en->e);
	if (rc == 0 && aa[0]) {
		struct jail_layer *l = &en->r->layer[JL_CAPS];
		size_t k = strlen(l->detail);
		snprintf(l->detail + k, sizeof l->detail - k, ", %s", aa);
	}
	return rc;
}

static int step_rlimits(struct entry *en)
{
	return jail_rlimits_apply(en->c, en->r, en->e);
}

static int step_landlock(struct entry *en)
{
	return landlock_apply(en->c, ok(en->r, JL_MOUNTNS), en->r, en->e);
}

static int step_cwd(struct entry *en)
{
	const struct jail_config *c = en->c;
	/* PDEATHSIG again: credential changes above may have cleared it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (chdir(c->root) == 0)
		return 0;
	if (errno == EACCES && en->r->layer[JL_MOUNTNS].state != JS_APPLIED)
		/* The mount tree would have shown it (cloned as root); here
		 * the host's permissions are the sandbox's. */
		return err_set(en->e, -EACCES,
			       "jail: the sandbox's uid %u cannot reach the project directory %s "
			       "(a directory above it is private), and without namespaces nothing "
			       "can show it: make the directories above it searchable "
			       "(chmod o+x DIR) or run the server as the project's owner",
			       (unsigned)getuid(), c->root);
	return err_sys(en->e, -errno, "jail: chdir %s", c->root);
}

/* The process's own pidfd for its parent (jail_config.self_pidfd): opened
 * after the fork into the pid namespace, so it names the process that
 * runs on, and before seccomp, which refuses pidfd_open. */
static int step_self_pidfd(struct entry *en)
{
	if (!en->c->self_pidfd)
		return 0;
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fd < 0)
		return err_sys(en->e, -errno,
			       "jail: pidfd_open of its own process (the server pins the zygote by it; a seccomp "
			       "profile of the container that refuses pidfd_open, Linux 5.3, must allow it)");
	*en->c->self_pidfd = fd; /* a pidfd is close-on-exec */
	return 0;
}

static int step_seccomp(struct entry *en)
{
	/* Decided here, where the mount tree's state is known (seccomp's
	 * memfd rule follows it): without a mount tree, a server not run by
	 * root shares its uid with the sessions, and reads their /proc
	 * while they are dumpable. */
	en->r->dumpable = en->c->stay_readable && !en->root && en->r->layer[JL_MOUNTNS].state != JS_APPLIED;
	return seccomp_apply(en->c, en->r, en->e);
}

/* The chain, in order, as nsjail's containProc: each step returns 0 or a
 * negative errno with the message set, and the first failure ends it
 * (fail closed).  A layer the kernel lacks is no failure: its state says
 * so, and judge() decides at the end whether the policy still holds.
 * Each step skips itself where it does not apply, so that both routes
 * (root building the namespaces itself, or a user namespace) read as one
 * list:
 *   root route: prepare, ns, secrets, uid_last
 *   userns route: [prepare, ipc_early when root,] uid_first, ns, secrets */
static int (*const chain[])(struct entry *) = {
	step_fds,       /* fds closed, stdin /dev/null, the environment, the umask */
	step_route,     /* the ids and which route */
	step_prepare,   /* root: the mount sources, ID-mapped when they can be */
	step_ipc_early, /* root on the userns route: the IPC namespace */
	step_uid_first, /* userns route: root given up */
	step_ns,        /* the namespaces, the fork into the pid namespace, the mount tree */
	step_secrets,   /* the secrets found, covered in the mount tree */
	step_uid_last,  /* root route: root given up */
	step_scratch,   /* no mount tree: the private scratch directory */
	step_caps,      /* capabilities, securebits, no_new_privs */
	step_rlimits,
	step_landlock,
	step_cwd,       /* PDEATHSIG again, the project root as the cwd */
	step_self_pidfd, /* where asked: the pidfd its parent pins it by */
	step_seccomp,   /* last: it refuses what the steps above needed */
};

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
	jail_knobs_read();
	/* The zygote is exec'd with a bare environment: the server passes
	 * its HOME as PSM_HOME. */
	const char *h = getenv("PSM_HOME");
	if (!h || !*h)
		h = getenv("HOME");
	snprintf(home_dir, sizeof home_dir, "%s", h ? h : "");
	char which[64];
	root_refusal[0] = '\0';
	if (jail_root_not_project(c->root, home_dir, which, sizeof which))
		snprintf(root_refusal, sizeof root_refusal,
			 "the project root %.300s is %s, not a project: start the server with "
			 "--root set to the project directory", c->root, which);
	struct entry en = { .c = c, .r = r, .e = e, .root = geteuid() == 0 };
	int rc = 0;
	for (size_t i = 0; rc >= 0 && i < N_ELEMENTS(chain); i++)
		rc = chain[i](&en);
	judge(c, r, landlock_abi());
	if (rc < 0)
		return rc;
	/* Without a pid namespace /proc is the host's: each session reads only
	 * its own entry there (landlock.c). */
	session_proc = r->nsfree ? (r->euid0 ? SESSION_PROC_OWN_NO_SYS : SESSION_PROC_OWN)
				 : SESSION_PROC_ALL;
	session_dumpable = r->dumpable;
	return 0;
}

int jail_session_enter(struct err *e)
{
	int rc = landlock_scope_session(session_proc, e);
	if (rc < 0)
		return rc;
	if (session_dumpable) {
		/* A server not run by root, without namespaces, has no
		 * capability over its sessions: it reads their smaps_rollup
		 * (memory counted by proportional shares: a forked worker's
		 * shared pages once, the checkpoint's own pages too) and
		 * their descriptors (memfds counted) only while they are
		 * dumpable.  What keeps the others out instead:
		 *   - another session: the Landlock domain just made, of its
		 *     own, whose ptrace rule refuses every access of
		 *     /proc/PID/{mem,environ,maps,smaps_rollup,fd} from outside
		 *     it (and its file rules grant only the session's own
		 *     /proc entry); checked: without it, refuse the session;
		 *   - a core file: RLIMIT_CORE is 0, soft and hard (rlimits.c);
		 *   - the code itself could set the flag anyway (prctl is
		 *     allowed): it is no secret from the session.
		 * Left open: this user's own unsandboxed processes may read the
		 * sessions, as they may read the zygote and the project. */
		if (rc != 1)
			return err_set(e, -EPERM, "session: no Landlock domain of its own, so it cannot stay readable "
				       "by its server (without namespaces a server not run by root needs that)");
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
			return err_sys(e, -errno, "session: PR_SET_DUMPABLE");
		return 0;
	}
	/* Not dumpable: another session (same uid) cannot read this one's
	 * /proc/<pid>/mem, environ or fds; no core file. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return err_sys(e, -errno, "session: PR_SET_DUMPABLE");
	return 0;
}

int jail_session_gate(int *listener, struct err *e)
{
	return seccomp_session_gate(listener, e);
}

bool jail_session_gate_prepare(void)
{
	return seccomp_session_gate_prepare();
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
		cc.no_host_changes = true; /* a check changes nothing */
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
