/* dockerrun: runs a program under the rules a container runtime's defaults
 * impose, so the tests exercise the jail's namespace-free mode for real.
 *
 *   dockerrun [--no-landlock] PROGRAM [ARGS...]
 *
 * What it applies before exec'ing PROGRAM, as Docker's and Kubernetes'
 * RuntimeDefault do:
 *   - capabilities: as root, only Docker's default set stays (CHOWN,
 *     DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW, SETGID, SETUID, SETFCAP,
 *     SETPCAP, NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE): no
 *     CAP_SYS_ADMIN, so open_tree, mount and friends fail with EPERM;
 *   - seccomp (stacked on whatever the caller has): unshare, setns, mount,
 *     umount2, pivot_root and the new mount API refused with EPERM; clone
 *     with any CLONE_NEW* flag refused with EPERM; clone3 answered ENOSYS
 *     (its flags are out of seccomp's reach), as the default profile does;
 *   - --no-landlock: the landlock_* calls answered ENOSYS, as Docker 20.10's
 *     profile (which predates Landlock) does, for the fail-closed test.
 * no_new_privs is set (an unprivileged caller needs it to load a filter).
 * Exit status: PROGRAM's, or 125 when the rules could not be applied. */
#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const int docker_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD, CAP_NET_RAW,
	CAP_SETGID, CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP, CAP_NET_BIND_SERVICE,
	CAP_SYS_CHROOT, CAP_KILL, CAP_AUDIT_WRITE,
};

static int drop_caps(void)
{
	unsigned long long keep = 0;
	for (size_t i = 0; i < sizeof docker_caps / sizeof docker_caps[0]; i++)
		keep |= 1ULL << docker_caps[i];
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break;
		if (!(keep & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
			return -errno;
	}
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		unsigned k = (unsigned)(keep >> (32 * i));
		d[i].effective &= k;
		d[i].permitted &= k;
		d[i].inheritable &= k;
	}
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	return 0;
}

static int load_filter(int no_landlock)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	static const char *const refused[] = {
		"unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", NULL,
	};
	int rc = 0;
	for (const char *const *s = refused; *s && rc == 0; s++) {
		int nr = seccomp_syscall_resolve_name(*s);
		if (nr != __NR_SCMP_ERROR)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	/* clone with any namespace flag: one rule per flag (the kernel
	 * matches any of them). */
	static const unsigned long long flags[] = {
		CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
		CLONE_NEWPID, CLONE_NEWNET,
	};
	for (size_t i = 0; i < sizeof flags / sizeof flags[0] && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i]));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (no_landlock) {
		static const char *const ll[] = { "landlock_create_ruleset", "landlock_add_rule",
						  "landlock_restrict_self", NULL };
		for (const char *const *s = ll; *s && rc == 0; s++) {
			int nr = seccomp_syscall_resolve_name(*s);
			if (nr != __NR_SCMP_ERROR)
				rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
		}
	}
	if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		rc = -errno;
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	int no_landlock = 0;
	int i = 1;
	if (i < argc && strcmp(argv[i], "--no-landlock") == 0) {
		no_landlock = 1;
		i++;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: dockerrun [--no-landlock] PROGRAM [ARGS...]\n");
		return 125;
	}
	int r = drop_caps();
	if (r < 0) {
		fprintf(stderr, "dockerrun: dropping capabilities: %s\n", strerror(-r));
		return 125;
	}
	r = load_filter(no_landlock);
	if (r < 0) {
		fprintf(stderr, "dockerrun: seccomp: %s\n", strerror(-r));
		return 125;
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "dockerrun: %s: %s\n", argv[i], strerror(errno));
	return 127;
}
