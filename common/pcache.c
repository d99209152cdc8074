/* /proc files read through kept descriptors (pcache.h). */
#include "pcache.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Longer keys (a zygote's /proc seen through its root, a thread's file)
 * fit; a longer one is read uncached. */
#define PCACHE_KEY 112

struct pentry {
	int fd; /* -1: free */
	uint64_t used;
	char key[PCACHE_KEY];
};

static struct pentry table[PCACHE_MAX];
static bool ready;
static uint64_t clock_;
/* The server's worker threads may read /proc too. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void init(void)
{
	if (ready)
		return;
	for (int i = 0; i < PCACHE_MAX; i++)
		table[i].fd = -1;
	ready = true;
}

static struct pentry *find(const char *key)
{
	for (int i = 0; i < PCACHE_MAX; i++)
		if (table[i].fd >= 0 && strcmp(table[i].key, key) == 0)
			return &table[i];
	return NULL;
}

/* A free slot, or the least recently read one, closed. */
static struct pentry *slot(void)
{
	struct pentry *old = &table[0];
	for (int i = 0; i < PCACHE_MAX; i++) {
		if (table[i].fd < 0)
			return &table[i];
		if (table[i].used < old->used)
			old = &table[i];
	}
	close(old->fd);
	old->fd = -1;
	return old;
}

static ssize_t read_once(int fd, char *buf, size_t cap, bool at_start)
{
	ssize_t n;
	do
		n = at_start ? pread(fd, buf, cap - 1, 0) : read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Keeps fd, just opened and read (or written), under key (of length k). */
static void keep(int fd, const char *key, size_t k)
{
	pthread_mutex_lock(&lock);
	init();
	if (find(key)) {
		/* Kept meanwhile by another thread. */
		close(fd);
	} else {
		struct pentry *e = slot();
		e->fd = fd;
		e->used = ++clock_;
		memcpy(e->key, key, k + 1);
	}
	pthread_mutex_unlock(&lock);
}

ssize_t pcache_read(int dirfd, const char *dir, const char *rel, char *buf, size_t cap)
{
	if (cap < 2)
		return -EINVAL;
	char key[PCACHE_KEY];
	int k = snprintf(key, sizeof key, "%s%s%s", dir ? dir : "", dir && dir[0] ? "/" : "", rel);
	/* Only /proc: what a kept descriptor reads is argued for procfs files
	 * (pcache.h); a regular file replaced by a rename would be read stale
	 * through the old inode. */
	bool keyed = k > 0 && (size_t)k < sizeof key && strncmp(key, "/proc/", 6) == 0;
	/* No directory open (-1), only its absolute path: read by the whole
	 * path (pdir_open_tasks' one thread). */
	char whole[512];
	if (dirfd == -1 && dir && dir[0] == '/') {
		int w = snprintf(whole, sizeof whole, "%s/%s", dir, rel);
		if (w < 0 || (size_t)w >= sizeof whole)
			return -ENAMETOOLONG;
		dirfd = AT_FDCWD;
		rel = whole;
	}
	if (!keyed)
		return read_small_at(dirfd, rel, buf, cap);
	pthread_mutex_lock(&lock);
	init();
	struct pentry *e = find(key);
	if (e) {
		ssize_t n = read_once(e->fd, buf, cap, true);
		if (n > 0) {
			e->used = ++clock_;
			pthread_mutex_unlock(&lock);
			buf[n] = '\0';
			return n;
		}
		/* Its task is gone (or the file reads empty now): the
		 * path again, as if never kept. */
		close(e->fd);
		e->fd = -1;
	}
	pthread_mutex_unlock(&lock);
	int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read_once(fd, buf, cap, false);
	if (n <= 0) {
		close(fd);
		if (n >= 0)
			buf[n] = '\0';
		return n;
	}
	buf[n] = '\0';
	keep(fd, key, (size_t)k);
	return n;
}

ssize_t pcache_write(const char *path, const char *data, size_t len)
{
	char key[PCACHE_KEY];
	int k = snprintf(key, sizeof key, "%s (w)", path);
	if (k <= 0 || (size_t)k >= sizeof key || strncmp(key, "/proc/", 6) != 0)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	init();
	struct pentry *e = find(key);
	if (e) {
		ssize_t n = pwrite(e->fd, data, len, 0);
		if (n >= 0) {
			e->used = ++clock_;
			pthread_mutex_unlock(&lock);
			return n;
		}
		/* Its task is gone: the path again, as if never kept. */
		close(e->fd);
		e->fd = -1;
	}
	pthread_mutex_unlock(&lock);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pwrite(fd, data, len, 0);
	if (n < 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	keep(fd, key, (size_t)k);
	return n;
}

void pcache_clear(void)
{
	pthread_mutex_lock(&lock);
	init();
	for (int i = 0; i < PCACHE_MAX; i++)
		if (table[i].fd >= 0) {
			close(table[i].fd);
			table[i].fd = -1;
		}
	pthread_mutex_unlock(&lock);
}

int pcache_count(void)
{
	pthread_mutex_lock(&lock);
	init();
	int n = 0;
	for (int i = 0; i < PCACHE_MAX; i++)
		n += table[i].fd >= 0;
	pthread_mutex_unlock(&lock);
	return n;
}
