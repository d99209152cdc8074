#include "util.h"
#include "err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void die_oom(void)
{
	static const char msg[] = "python-sandbox-mcp: out of memory\n";
	/* write(2), not stdio: stdio may need the memory we lack.  _exit: a
	 * forked child must not run its parent's atexit handlers. */
	ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
	(void)r;
	_exit(1);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die_oom();
	return p;
}

void *xcalloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		die_oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		die_oom();
	return q;
}

void *xreallocarray(void *p, size_t count, size_t size)
{
	void *q = reallocarray(p, count ? count : 1, size ? size : 1);
	if (!q)
		die_oom();
	return q;
}

char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		die_oom();
	return d;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		die_oom();
	return s;
}

static void *cjson_malloc(size_t n)
{
	return xmalloc(n);
}

void util_cjson_hooks(void)
{
	cJSON_Hooks h = { .malloc_fn = cjson_malloc, .free_fn = free };
	cJSON_InitHooks(&h);
}

int mkdir_all(const char *path, unsigned mode, struct err *e)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof buf)
		return err_set(e, -ENAMETOOLONG, "%s: the path is too long (%zu bytes)", path, n);
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
			return err_sys(e, -errno, "cannot create the directory %s", buf);
		buf[i] = c;
	}
	return 0;
}

bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The path first: a wrapper that runs this binary under a tool (valgrind)
 * sees its own /proc/self/exe, the tool's, while the path is this binary's.
 * Then /proc/self/exe, which the kernel resolves without searching the
 * directories on the way: a server whose user cannot reach its binary by
 * path (started from a mode-700 checkout by a launcher that kept its
 * capabilities up to the exec, as setpriv does) or whose binary was deleted
 * since (a rebuild) still starts its own copy of itself. */
int exec_self(const char *path, char *const argv[], char *const envp[])
{
	execve(path, argv, envp);
	int first = errno;
	execve("/proc/self/exe", argv, envp);
	errno = first;
	return -1;
}

double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int write_full(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

size_t self_resident_bytes(void)
{
	char buf[128];
	unsigned long size, rss;
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0 || read_small("/proc/self/statm", buf, sizeof buf) <= 0 || sscanf(buf, "%lu %lu", &size, &rss) != 2)
		return SIZE_MAX;
	return (size_t)rss * (size_t)page;
}

ssize_t read_small(const char *path, char *buf, size_t cap)
{
	return read_small_at(AT_FDCWD, path, buf, cap);
}

ssize_t read_small_at(int dirfd, const char *path, char *buf, size_t cap)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = 0;
	return n;
}
