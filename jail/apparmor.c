/* The AppArmor profile's child (apparmor.h).
 *
 * Attack it stops: the profile lets this binary make a user namespace with
 * capabilities in it.  Were the zygote to stay in the profile, anything the
 * sandbox ran would be confined only by the jail's own layers (caps.c drops
 * every capability; seccomp refuses new namespaces); with the child stacked
 * on, AppArmor itself refuses every capability to the sandbox, so a flaw in
 * those layers still leaves the profile giving the sandbox nothing.  The
 * transition is a stack ("stack", not "changeprofile"): it is allowed under
 * no_new_privs, which the client may have set already (systemd's
 * NoNewPrivileges, a container), and it can only take permissions away. */
#include "apparmor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char noted[256];

enum jail_aa_need jail_aa_need(const char *label)
{
	if (!label || !*label || strncmp(label, "unconfined", 10) == 0)
		return JAIL_AA_NOTHING;
	/* The label's profiles, stacked ones joined by "//&", then " (mode)". */
	const char *end = strstr(label, " (");
	size_t len = end ? (size_t)(end - label) : strlen(label);
	const size_t cl = strlen(JAIL_AA_CHILD), pl = strlen(JAIL_AA_PROFILE);
	bool ours = false;
	for (const char *p = label, *stop = label + len; p < stop;) {
		const char *amp = memmem(p, (size_t)(stop - p), "//&", 3);
		size_t n = amp ? (size_t)(amp - p) : (size_t)(stop - p);
		if (n == cl && memcmp(p, JAIL_AA_CHILD, cl) == 0)
			return JAIL_AA_INSIDE;
		if (n == pl && memcmp(p, JAIL_AA_PROFILE, pl) == 0)
			ours = true;
		if (!amp)
			break;
		p = amp + 3;
	}
	/* Another profile's confinement is its author's business. */
	return ours ? JAIL_AA_ENTER : JAIL_AA_NOTHING;
}

/* The calling thread's attr file: AppArmor's own (kernels 5.8 and later,
 * next to other LSMs), else the shared one. */
static int open_attr(int flags)
{
	int fd = open("/proc/thread-self/attr/apparmor/current", flags | O_CLOEXEC);
	if (fd < 0)
		fd = open("/proc/thread-self/attr/current", flags | O_CLOEXEC);
	return fd;
}

static void read_label(char *buf, size_t n)
{
	buf[0] = 0;
	int fd = open_attr(O_RDONLY);
	if (fd < 0)
		return;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	/* EINVAL: no LSM answers for this file (no AppArmor). */
	buf[r > 0 ? r : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

void jail_aa_note(void)
{
	read_label(noted, sizeof noted);
}

int jail_aa_enter(char *detail, size_t n, struct err *e)
{
	detail[0] = 0;
	enum jail_aa_need need = jail_aa_need(noted);
	if (need == JAIL_AA_INSIDE)
		snprintf(detail, n, "AppArmor %s (no capability)", JAIL_AA_CHILD);
	if (need != JAIL_AA_ENTER)
		return 0;
	int fd = open_attr(O_WRONLY);
	if (fd < 0)
		return err_sys(e, -errno, "jail: confined by the AppArmor profile %s, the zygote cannot reach its "
			       "/proc/thread-self/attr to enter %s (the profile grants capabilities only to build the jail)",
			       JAIL_AA_PROFILE, JAIL_AA_CHILD);
	static const char cmd[] = "stack " JAIL_AA_CHILD;
	ssize_t w = write(fd, cmd, sizeof cmd - 1);
	int err = errno;
	close(fd);
	if (w != (ssize_t)sizeof cmd - 1)
		return err_sys(e, w < 0 ? -err : -EIO,
			       "jail: cannot enter the AppArmor profile %s: the profile loaded is not this version's "
			       "(reload it: sudo dpkg-reconfigure python-sandbox-mcp, or make install)", JAIL_AA_CHILD);
	char now[256];
	read_label(now, sizeof now);
	if (jail_aa_need(now) != JAIL_AA_INSIDE)
		return err_set(e, -EPERM, "jail: the AppArmor label is \"%s\" after entering %s", now, JAIL_AA_CHILD);
	snprintf(detail, n, "AppArmor %s (no capability)", JAIL_AA_CHILD);
	return 0;
}
