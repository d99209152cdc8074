/* The user's own config directory, read only when nobody else could have
 * written it (see userdir.h). */
#include "userdir.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define APP_DIR "python-sandbox-mcp"

/* $XDG_<var> when it is an absolute path (a relative one is ignored, as
 * the XDG spec says), else $HOME/<dflt>, else the passwd entry's home. */
static int base_path(const char *var, const char *dflt, char *out, size_t size, struct err *e)
{
	const char *xdg = getenv(var);
	const char *home = getenv("HOME");
	int n;

	if (xdg && xdg[0] == '/') {
		n = snprintf(out, size, "%s/" APP_DIR, xdg);
	} else {
		if (!home || home[0] != '/') {
			struct passwd *pw = getpwuid(geteuid());
			home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
		}
		if (!home)
			return err_set(e, -ENOENT,
				       "cannot find the user's home directory: set %s or HOME to an absolute path", var);
		n = snprintf(out, size, "%s/%s/" APP_DIR, home, dflt);
	}
	if (n < 0 || (size_t)n >= size)
		return err_set(e, -ENAMETOOLONG, "the path of the user's directory is too long; set a shorter %s", var);
	return 0;
}

int userdir_config_path(char *out, size_t size, struct err *e)
{
	return base_path("XDG_CONFIG_HOME", ".config", out, size, e);
}

int userdir_state_path(char *out, size_t size, struct err *e)
{
	return base_path("XDG_STATE_HOME", ".local/state", out, size, e);
}

/* Who may have written it: only the user.  A directory or file that
 * another user owns, or that group or others may write, could hold
 * approvals (or keys) planted by someone else. */
static int check_owner(const struct stat *st, const char *what, const char *path, struct err *e)
{
	if (st->st_uid != geteuid())
		return err_set(e, -EPERM,
			       "%s %s belongs to uid %u, not to this user (uid %u); remove it, or chown it to this user",
			       what, path, (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return err_set(e, -EPERM,
			       "%s %s is writable by other users (mode %03o); run chmod go-w %s",
			       what, path, (unsigned)(st->st_mode & 07777), path);
	return 0;
}


int userdir_open(struct userdir *ud, const char *path, bool create, struct err *e)
{
	struct stat st;
	int rc;

	ud->fd = -1;
	if (!path || path[0] != '/')
		return err_set(e, -EINVAL, "the config directory must be an absolute path");
	if (strlen(path) >= sizeof ud->path)
		return err_set(e, -ENAMETOOLONG, "%s: the path is too long", path);
	strcpy(ud->path, path);
	if (create) {
		rc = mkdir_all(path, 0700, e);
		if (rc < 0)
			return rc;
	}
	/* O_NOFOLLOW: a symlink in place of the directory would let whoever
	 * made it (a project's setup script, another user) choose what the
	 * server believes. */
	ud->fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ud->fd < 0) {
		int err = errno;
		struct stat lst;
		if (err == ENOENT && !create)
			return 1;
		/* O_DIRECTORY | O_NOFOLLOW on a symlink fails with ENOTDIR. */
		if (err == ELOOP || (err == ENOTDIR && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)))
			return err_set(e, -ELOOP,
				       "the config directory %s is a symlink, which is refused; replace it with a real directory (mkdir -m 700)",
				       path);
		if (err == ENOTDIR)
			return err_set(e, -ENOTDIR, "%s is not a directory; remove it", path);
		return err_sys(e, -err, "cannot open the config directory %s", path);
	}
	if (fstat(ud->fd, &st) < 0) {
		rc = err_sys(e, -errno, "cannot stat %s", path);
		goto fail;
	}
	rc = check_owner(&st, "the config directory", path, e);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	close(ud->fd);
	ud->fd = -1;
	return rc;
}

int userdir_read(const struct userdir *ud, const char *name, size_t max,
		 char **buf, size_t *len, struct err *e)
{
	char full[PATH_MAX + 256];
	struct stat st;
	size_t got = 0;
	char *b = NULL;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	snprintf(full, sizeof full, "%s/%s", ud->path, name);
	/* O_NOFOLLOW: a symlink would point the server at a file it did not
	 * write; O_NONBLOCK: a FIFO must not hang it (refused below). */
	fd = openat(ud->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		if (err == ENOENT)
			return 1;
		if (err == ELOOP)
			return err_set(e, -ELOOP,
				       "%s is a symlink, which is refused; remove it (the server writes a regular file there)",
				       full);
		return err_sys(e, -err, "cannot open %s", full);
	}
	if (fstat(fd, &st) < 0) {
		rc = err_sys(e, -errno, "cannot stat %s", full);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = err_set(e, -EINVAL, "%s is not a regular file; remove it", full);
		goto out;
	}
	rc = check_owner(&st, "the file", full, e);
	if (rc < 0)
		goto out;
	if ((unsigned long long)st.st_size > max) {
		rc = err_set(e, -EFBIG, "%s is larger than %zu bytes; it was not written by this program, remove it", full, max);
		goto out;
	}
	b = xmalloc(max + 2);
	for (;;) {
		ssize_t r = read(fd, b + got, max + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = err_sys(e, -errno, "cannot read %s", full);
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got > max) {
			rc = err_set(e, -EFBIG, "%s is larger than %zu bytes; it was not written by this program, remove it", full, max);
			goto out;
		}
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
	b = NULL;
	rc = 0;
out:
	free(b);
	close(fd);
	return rc;
}

int userdir_write(const struct userdir *ud, const char *name, const void *data,
		  size_t len, struct err *e)
{
	char tmp[256];
	unsigned long long rnd = 0;
	int fd, rc;

	if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		rnd = (unsigned long long)getpid() ^ (unsigned long long)(uintptr_t)&rnd;
	if ((size_t)snprintf(tmp, sizeof tmp, ".%s.%016llx.tmp", name, rnd) >= sizeof tmp)
		return err_set(e, -ENAMETOOLONG, "%s: the name is too long", name);
	/* O_EXCL | O_NOFOLLOW: never write through something already there. */
	fd = openat(ud->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(e, -errno, "cannot create a temporary file in %s", ud->path);
	/* The umask may have taken bits away, never added: still, be exact. */
	if (fchmod(fd, 0600) < 0 || (rc = write_full(fd, data, len)) < 0 || fsync(fd) < 0) {
		rc = err_sys(e, -errno, "cannot write %s/%s", ud->path, tmp);
		close(fd);
		goto fail;
	}
	if (close(fd) < 0) {
		rc = err_sys(e, -errno, "cannot write %s/%s", ud->path, tmp);
		goto fail;
	}
	if (renameat(ud->fd, tmp, ud->fd, name) < 0) {
		rc = err_sys(e, -errno, "cannot replace %s/%s", ud->path, name);
		goto fail;
	}
	fsync(ud->fd); /* the rename itself reaches the disk */
	return 0;
fail:
	unlinkat(ud->fd, tmp, 0);
	return rc;
}

int userdir_unlink(const struct userdir *ud, const char *name, struct err *e)
{
	if (unlinkat(ud->fd, name, 0) < 0 && errno != ENOENT)
		return err_sys(e, -errno, "cannot remove %s/%s", ud->path, name);
	fsync(ud->fd);
	return 0;
}

void userdir_close(struct userdir *ud)
{
	if (ud && ud->fd >= 0) {
		close(ud->fd);
		ud->fd = -1;
	}
}
