/* One server at a time per saved session (sesslock.h). */
#include "sesslock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/userdir.h"

/* A POSIX record lock (fcntl F_SETLK), not flock or an OFD lock: it belongs
 * to the server process alone, so nothing the server forks inherits it and
 * keeps it past the server's death, and F_GETLK names the holder's pid for
 * the message. */
static int lock_fd(int fd, pid_t *holder)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	if (fcntl(fd, F_SETLK, &fl) == 0)
		return 0;
	if (errno != EAGAIN && errno != EACCES)
		return -errno;
	struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	*holder = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK && q.l_pid > 0 ? q.l_pid : 0;
	return -EWOULDBLOCK;
}

int sesslock_take(const struct workspace *ws, const char *name, pid_t *holder, struct err *e)
{
	*holder = 0;
	struct stat st;
	if (fstat(ws->dirfd, &st) < 0)
		return err_set(e, -errno, "cannot stat the workspace: %s", strerror(errno));
	char dir[PATH_MAX], sub[PATH_MAX + 8];
	if (userdir_state_path(dir, sizeof dir, e) < 0)
		return e->code ? e->code : -EINVAL;
	snprintf(sub, sizeof sub, "%s/locks", dir);
	struct userdir ud = { .fd = -1 };
	int r = userdir_open(&ud, sub, true, e);
	if (r != 0) {
		userdir_close(&ud);
		return r < 0 ? r : err_set(e, -ENOENT, "%s: missing", sub);
	}
	char file[160];
	snprintf(file, sizeof file, "%llx-%llx-%s.lock", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, name);
	int fd = openat(ud.fd, file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	int err = errno;
	userdir_close(&ud);
	if (fd < 0)
		return err_set(e, -err, "cannot open %s/%s: %s", sub, file, strerror(err));
	r = lock_fd(fd, holder);
	if (r < 0) {
		close(fd);
		if (r != -EWOULDBLOCK)
			return err_set(e, r, "cannot lock %s/%s: %s", sub, file, strerror(-r));
		return r;
	}
	/* The holder's pid, for whoever reads it by hand. */
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) < 0) {
		/* only informative */
	}
	return fd;
}
