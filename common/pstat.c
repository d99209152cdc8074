/* /proc/PID/stat: see pstat.h. */
#include "pstat.h"
#include "pcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int pstat_parse(const char *text, struct pstat *out)
{
	*out = (struct pstat){ .exit_code = -1, .processor = -1 };
	/* The last ')' ends the name: every field after it is a number or
	 * the state's one letter, which hold none. */
	const char *p = strrchr(text, ')');
	if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
		return -EINVAL;
	out->state = p[2];
	const char *q = p + 3;
	int field = 3;
	while (*q == ' ' && field < 52) {
		q++;
		field++;
		char *end;
		errno = 0;
		/* Signed fields come back through the cast (strtoull negates). */
		unsigned long long v = strtoull(q, &end, 10);
		if (end == q || errno)
			return -EINVAL;
		switch (field) {
		case 4: out->ppid = (pid_t)(long long)v; break;
		case 9: out->flags = (unsigned long)v; break;
		case 10: out->minflt = v; break;
		case 11: out->cminflt = v; break;
		case 12: out->majflt = v; break;
		case 13: out->cmajflt = v; break;
		case 14: out->utime = v; break;
		case 15: out->stime = v; break;
		case 16: out->cutime = (long long)v; break;
		case 17: out->cstime = (long long)v; break;
		case 20: out->num_threads = (long)v; break;
		case 22: out->start = v; break;
		case 24: out->rss = (long long)v; break;
		case 39: out->processor = (int)v; break;
		case 52: out->exit_code = (int)(long long)v; break;
		default: break;
		}
		q = end;
	}
	return field >= 22 ? 0 : -EINVAL;
}

int pstat_read(int dirfd, const char *path, struct pstat *out)
{
	/* The whole line comes in one read: the name is at most 64 bytes
	 * and the 50 numbers fit in the rest. */
	char buf[1024];
	int fd = openat(dirfd >= 0 ? dirfd : AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	int err = n < 0 ? errno : 0;
	close(fd);
	if (n <= 0)
		return n < 0 ? -err : -ESRCH;
	buf[n] = '\0';
	return pstat_parse(buf, out);
}

int pstat_read_kept(int dirfd, const char *dir, const char *rel, struct pstat *out)
{
	char buf[1024];
	ssize_t n = pcache_read(dirfd, dir, rel, buf, sizeof buf);
	if (n <= 0)
		return n < 0 ? (int)n : -ESRCH;
	return pstat_parse(buf, out);
}
