/* Jail layer 4: capabilities, securebits, no_new_privs.
 *
 * Inside its user namespace the zygote holds every capability (over that
 * namespace only); it gives them all up here, in every set, so that user
 * code cannot mount, change ids, or undo the layers below.  no_new_privs
 * makes execve unable to grant anything (setuid bits, file capabilities) and
 * is required by Landlock and seccomp. */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int capset_empty(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	return (int)syscall(SYS_capset, &h, d);
}

static bool caps_empty(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return false;
	return true;
}

int jail_caps_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	struct jail_layer *l = &r->layer[JL_CAPS];
	int dropped = 0;
	/* The bounding set limits what any later execve could gain. */
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			dropped++;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	/* Locked securebits: uid 0 (should it ever be reached) confers no
	 * capabilities, a uid change cannot keep them, no ambient raise.
	 * Needs CAP_SETPCAP: held inside the user namespace; without one an
	 * unprivileged process holds no capability to protect. */
	bool secbits = prctl(PR_SET_SECUREBITS,
			     SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
			     SECBIT_KEEP_CAPS_LOCKED |
			     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
			     0, 0, 0) == 0;
	if (capset_empty() < 0)
		return err_sys(e, -errno, "jail: capset (drop all)");
	if (!caps_empty())
		return err_set(e, -EPERM, "jail: capabilities remain after capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		l->state = JS_FAILED;
		return err_sys(e, -errno, "jail: PR_SET_NO_NEW_PRIVS");
	}
	l->state = JS_APPLIED;
	snprintf(l->detail, sizeof l->detail,
		 "all capability sets empty (%d dropped from the bounding set), %s, no_new_privs",
		 dropped, secbits ? "securebits locked" : "securebits not settable (no capability held)");
	(void)c;
	return 0;
}
