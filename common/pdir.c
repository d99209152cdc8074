/* Directory entries through getdents64 (pdir.h). */
#include "pdir.h"
#include "pcache.h"
#include "pstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int pdir_open(struct pdir *d, int dirfd, const char *path)
{
	d->len = d->off = 0;
	d->err = 0;
	d->one[0] = '\0';
	d->has_ps = false;
	size_t n = strlen(path);
	bool abs = path[0] == '/' && n < sizeof d->path;
	memcpy(d->path, abs ? path : "", abs ? n + 1 : 1);
	d->fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return d->fd < 0 ? -errno : 0;
}

int pdir_open_in(struct pdir *d, int dirfd, const char *dir, const char *path)
{
	int rc = pdir_open(d, dirfd, path);
	int n = snprintf(d->path, sizeof d->path, "%s/%s", dir, path);
	if (dir[0] != '/' || n < 0 || (size_t)n >= sizeof d->path)
		d->path[0] = '\0';
	return rc;
}

int pdir_open_tasks(struct pdir *d, int procfd, const char *procdir)
{
	return pdir_open_tasks_seen(d, procfd, procdir, NULL);
}

int pdir_open_tasks_seen(struct pdir *d, int procfd, const char *procdir, const struct pstat *seen)
{
	char stat[sizeof d->path];
	const char *name = strrchr(procdir, '/');
	int n = snprintf(stat, sizeof stat, "%s/stat", procdir);
	struct pstat ps;
	if (procdir[0] == '/' && name && name[1] && strlen(name + 1) < sizeof d->one && n > 0 && (size_t)n < sizeof stat &&
	    snprintf(d->path, sizeof d->path, "%s/task", procdir) < (int)sizeof d->path &&
	    (seen ? (ps = *seen, 0) : pstat_read_kept(AT_FDCWD, NULL, stat, &ps)) == 0 && ps.num_threads == 1 &&
	    ps.state != 'Z' && ps.state != 'X') {
		d->len = d->off = 0;
		d->err = 0;
		d->fd = -1;
		snprintf(d->one, sizeof d->one, "%s", name + 1);
		memcpy(d->ps_name, d->one, sizeof d->ps_name);
		d->ps = ps;
		d->has_ps = true;
		return 0;
	}
	if (procfd >= 0)
		return pdir_open_in(d, procfd, procdir, "task");
	snprintf(stat, sizeof stat, "%s/task", procdir);
	return pdir_open(d, AT_FDCWD, stat);
}

bool pdir_one_stat(const struct pdir *d, const char *tid, struct pstat *out)
{
	if (!d->has_ps || d->fd >= 0 || strcmp(tid, d->ps_name) != 0)
		return false;
	*out = d->ps;
	return true;
}

void pdir_adopt(struct pdir *d, int fd)
{
	d->len = d->off = 0;
	d->err = 0;
	d->one[0] = '\0';
	d->has_ps = false;
	d->fd = fd;
	d->path[0] = '\0';
}

ssize_t pdir_read(const struct pdir *d, const char *rel, char *buf, size_t cap)
{
	return pcache_read(d->fd, d->path, rel, buf, cap);
}

const char *pdir_next(struct pdir *d)
{
	if (d->fd < 0 && d->one[0]) {
		/* Returned once: the name stays in place for the caller. */
		memcpy(d->buf, d->one, sizeof d->one);
		d->one[0] = '\0';
		return d->buf;
	}
	for (;;) {
		if (d->off >= d->len) {
			if (d->fd < 0 || d->err)
				return NULL;
			ssize_t n = getdents64(d->fd, d->buf, sizeof d->buf);
			if (n <= 0) {
				d->err = n < 0 ? errno : 0;
				return NULL;
			}
			d->len = n;
			d->off = 0;
		}
		struct dirent64 *de = (struct dirent64 *)(void *)(d->buf + d->off);
		/* A record that does not fit what the kernel said it wrote
		 * would be read past the buffer: the listing stops there. */
		if (de->d_reclen == 0 || d->off + de->d_reclen > d->len) {
			d->err = EIO;
			d->off = d->len = 0;
			return NULL;
		}
		d->off += de->d_reclen;
		const char *name = de->d_name;
		if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
			continue;
		return name;
	}
}

void pdir_close(struct pdir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}
