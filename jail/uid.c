/* Jail layer 2: an unprivileged uid when the server runs as root.
 *
 * The kernel exempts the real uid 0 from RLIMIT_NPROC (a fork bomb would not
 * be bounded) and root keeps DAC_OVERRIDE-like powers over anything a later
 * layer misses; so the sandbox never runs with the real uid 0, not even
 * inside its user namespace (which maps the uid to itself).
 *
 * Which uid: the workspace owner's when that is not root (the files the code
 * writes then belong to the user who owns the workspace), else 65534
 * (nobody/nogroup).  A root-owned workspace could not be written by 65534:
 * the mount tree then shows the project through ID-mapped mounts (root's
 * files appear as 65534's; see jail_ns_prepare).  Only where that is not
 * possible with a mount tree (a filesystem without ID-mapped mounts) are
 * the root-owned directories of what the policy makes writable chowned to
 * 65534, while still root: the server created them for the sandbox.  Only
 * directories are changed (files the server wrote stay root's: the sandbox
 * can read them, and replace them since it owns the directory), the walk
 * never follows a symlink (openat O_NOFOLLOW relative to the parent fd,
 * fchownat AT_SYMLINK_NOFOLLOW: a symlink planted by an earlier run cannot
 * redirect the chown to /etc) and never leaves the filesystem.
 *
 * Without any mount tree (the Landlock + seccomp mode: a container's root
 * under the runtime's default seccomp rules) nothing can show the sandbox
 * a project that lies below a directory only root may enter (/root, a
 * mkdtemp directory), and uid 65534 cannot traverse it.  There the sandbox
 * of a root-owned project keeps the effective (and filesystem) uid 0 and
 * takes 65534 as its real and saved uid, which is what the ID-mapped mount
 * tree gives in effect: the project's files are the code's own, what it
 * writes lands as root's.  Why that keeps every permission (the attacks,
 * each with its wall; docs/SECURITY.md has the same list):
 *  - RLIMIT_NPROC: the kernel counts and exempts by the real uid, 65534.
 *  - Capabilities: none in any set, securebits locked with SECBIT_NOROOT
 *    (an execve as euid 0 gains none), no_new_privs (caps.c).
 *  - The ids: seccomp refuses every set*id call, so the real uid can never
 *    become 0 (an unprivileged setreuid may copy the effective uid).
 *  - root's files (DAC as their owner): Landlock decides every open,
 *    creation, removal, rename, link, truncation and execution; seccomp
 *    refuses metadata changes (chmod, chown, utime, xattrs), leases, the
 *    ioctls that check ownership or write permission on a read-only
 *    descriptor, and inotify (seccomp.c); /proc is read-only to Landlock,
 *    so root's sysctls and other processes' settings cannot be written.
 *  - root's processes: Landlock's signal scope (required in this mode) and
 *    its ptrace rule; each session sees only its own /proc entry
 *    (landlock.c).
 * What it does not hide: whether a path below a root-only directory
 * exists and its metadata (stat, getxattr, readlink need only search
 * permission, and Landlock does not mediate them), and root-only files
 * inside the system trees the policy shows (/usr, /lib...). */
#include "uid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534

void jail_uid_choose(const struct jail_config *c, uid_t *uid, gid_t *gid)
{
	struct stat st;
	*uid = NOBODY;
	*gid = NOBODY;
	if (c->workspace && stat(c->workspace, &st) == 0 && st.st_uid != 0) {
		*uid = st.st_uid;
		*gid = st.st_gid != 0 ? st.st_gid : NOBODY;
	}
}

/* Chowns dirfd (when root-owned) and every root-owned directory below it on
 * the same filesystem.  Consumes dirfd. */
static void chown_dirs(int dirfd, uid_t uid, gid_t gid, int depth)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0) {
		close(dirfd);
		return;
	}
	if (st.st_uid == 0)
		(void)!fchown(dirfd, uid, gid);
	if (depth > 32) {
		close(dirfd);
		return;
	}
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat cs;
		if (fstatat(dirfd, de->d_name, &cs, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(cs.st_mode) || cs.st_dev != st.st_dev)
			continue;
		int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			chown_dirs(sub, uid, gid, depth + 1);
	}
	closedir(d);
}

static void chown_writable(const struct jail_config *c, uid_t uid, gid_t gid)
{
	const struct policy *p = c->policy;
	const char *dirs[66];
	size_t n = 0;
	if (p->fs_write == FS_WRITE_WORKSPACE)
		dirs[n++] = c->workspace;
	else if (p->fs_write == FS_WRITE_LIST)
		for (size_t i = 0; i < p->n_fs_write_paths && n < 64; i++)
			dirs[n++] = p->fs_write_paths[i];
	for (size_t i = 0; i < n; i++) {
		int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			chown_dirs(fd, uid, gid, 0);
	}
}

/* Drops every capability from the bounding set while CAP_SETPCAP is still
 * held: a later execve of a file with capabilities gains nothing. */
static void drop_bounding(void)
{
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
}

int jail_uid_apply(const struct jail_config *c, bool chown, bool no_tree, struct jail_report *r,
		   struct err *e)
{
	struct jail_layer *l = &r->layer[JL_UID];
	if (geteuid() != 0) {
		l->state = JS_NOT_NEEDED;
		snprintf(l->detail, sizeof l->detail, "already unprivileged: uid %u gid %u",
			 (unsigned)getuid(), (unsigned)getgid());
		return 0;
	}
	uid_t uid;
	gid_t gid;
	jail_uid_choose(c, &uid, &gid);
	/* No mount tree, and the project is root's: the effective uid stays 0
	 * (see the top of this file). */
	bool keep_euid0 = no_tree && uid == NOBODY;
	bool chowned = false, would_chown = false;
	if (chown && !keep_euid0 && uid == NOBODY && c->policy->fs_write != FS_WRITE_NONE) {
		/* --check changes nothing on the host: it only says so. */
		if (c->no_host_changes) {
			would_chown = true;
		} else {
			chown_writable(c, uid, gid);
			chowned = true;
		}
	}
	drop_bounding();
	/* Supplementary groups first (root's group 0 would otherwise stay),
	 * then gid, then uid: once the uid is gone setgid is refused. */
	if (setgroups(0, NULL) < 0)
		return err_sys(e, -errno, "jail: setgroups");
	/* keep_euid0: the effective and filesystem ids stay root's (the
	 * project's owner), the real and saved ones are 65534's.  The
	 * capabilities are emptied by jail_caps_apply. */
	gid_t egid = keep_euid0 ? 0 : gid;
	uid_t euid = keep_euid0 ? 0 : uid;
	if (setresgid(gid, egid, gid) < 0)
		return err_sys(e, -errno, "jail: setresgid %u", (unsigned)gid);
	if (setresuid(uid, euid, uid) < 0)
		return err_sys(e, -errno, "jail: setresuid %u", (unsigned)uid);
	/* A failed drop would leave root: verify rather than trust. */
	uid_t ru, eu, su;
	if (getresuid(&ru, &eu, &su) < 0 || ru == 0 || su == 0 || eu != euid)
		return err_set(e, -EPERM, "jail: still uid 0 after setresuid");
	/* The uid change made the process non-dumpable, which makes
	 * /proc/self/{uid_map,gid_map,setgroups} root's: the user namespace
	 * step must write them.  Sessions set it back to 0. */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	l->state = JS_APPLIED;
	r->euid0 = keep_euid0;
	if (keep_euid0)
		snprintf(l->detail, sizeof l->detail,
			 "real uid %u gid %u (RLIMIT_NPROC counts it), effective uid 0 without any "
			 "capability: the project is root's and no mount tree can show it; no groups "
			 "(server was root)", (unsigned)uid, (unsigned)gid);
	else
		snprintf(l->detail, sizeof l->detail, "uid %u gid %u, no groups (server was root)%s",
			 (unsigned)uid, (unsigned)gid,
			 chowned ? "; root-owned writable directories chowned to it"
			 : would_chown ? "; serving would chown the root-owned writable directories to it "
					 "(--check did not)" : "");
	return 0;
}
