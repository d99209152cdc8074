/* The workspace's changes through inotify (wsnote.h). */
#include "wsnote.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/oatab.h"
#include "../common/util.h"

/* Every change that a walk's listing would show: a file written,
 * truncated or allocated (MODIFY), its mode or times set (ATTRIB),
 * entries created, deleted or renamed, and the directory's own removal
 * or rename.  Never ACCESS or OPEN: the walks themselves read. */
#define WSNOTE_MASK                                                                                           \
	(IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | \
	 IN_MOVE_SELF | IN_ONLYDIR)

#ifndef ZFS_SUPER_MAGIC
#define ZFS_SUPER_MAGIC 0x2fc12fc1
#endif
#ifndef F2FS_SUPER_MAGIC
#define F2FS_SUPER_MAGIC 0xF2F52010
#endif

struct watched {
	bool used;
	int wd;
	dev_t dev;
	ino_t ino;
};

/* The watched directories, in two tables of the same entries: one found
 * by (dev, ino), for the walks' "watched already?" once per directory
 * listed, one by the watch's number, for the kernel's IN_IGNORED.  Open
 * addressing with linear probing, at most half the slots used: a look is
 * a probe or two.  (A scan of the watched list made a walk of a tree near
 * the cap about 16 million comparisons, after every call, in a tree the
 * sandbox shapes.) */
#define SLOTS (2 * WSNOTE_MAX)
_Static_assert((SLOTS & (SLOTS - 1)) == 0, "SLOTS is a power of two");

struct wsnote {
	int fd;
	pthread_mutex_t lock;
	unsigned long long events;
	struct watched *by_ino; /* SLOTS */
	struct watched *by_wd;  /* SLOTS */
	size_t n;
	bool off; /* a directory on a file system it cannot follow: never again */
};

static size_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (size_t)(x & (SLOTS - 1));
}

static size_t home(const struct watched *e, bool by_wd)
{
	return by_wd ? mix((uint64_t)(unsigned)e->wd) : mix((uint64_t)e->ino * 31 + (uint64_t)e->dev);
}

static bool same(const struct watched *a, const struct watched *b, bool by_wd)
{
	return by_wd ? a->wd == b->wd : a->dev == b->dev && a->ino == b->ino;
}

/* The slot holding k's key, or the empty slot where it would go: one is
 * always found, the table being at most half full. */
static size_t slot_of(const struct watched *t, const struct watched *k, bool by_wd)
{
	size_t i = home(k, by_wd);
	while (t[i].used && !same(&t[i], k, by_wd))
		i = (i + 1) & (SLOTS - 1);
	return i;
}

static bool w_used(const void *t, size_t i)
{
	return ((const struct watched *)t)[i].used;
}

static size_t ino_home(const void *t, size_t i)
{
	return home(&((const struct watched *)t)[i], false);
}

static size_t wd_home(const void *t, size_t i)
{
	return home(&((const struct watched *)t)[i], true);
}

static void w_move(void *t, size_t to, size_t from)
{
	((struct watched *)t)[to] = ((struct watched *)t)[from];
}

static void w_clear(void *t, size_t i)
{
	((struct watched *)t)[i].used = false;
}

static const struct oatab_ops ino_ops = { w_used, ino_home, w_move, w_clear };
static const struct oatab_ops wd_ops = { w_used, wd_home, w_move, w_clear };

/* Slot i emptied, the entries after it moved back where a look finds
 * them (common/oatab.h). */
static void erase(struct watched *t, size_t i, bool by_wd)
{
	oatab_erase(t, SLOTS, i, by_wd ? &wd_ops : &ino_ops);
}

struct wsnote *wsnote_new(void)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct wsnote *n = xcalloc(1, sizeof *n);
	n->fd = fd;
	pthread_mutex_init(&n->lock, NULL);
	n->by_ino = xcalloc(SLOTS, sizeof *n->by_ino);
	n->by_wd = xcalloc(SLOTS, sizeof *n->by_wd);
	return n;
}

void wsnote_free(struct wsnote *n)
{
	if (!n)
		return;
	close(n->fd);
	pthread_mutex_destroy(&n->lock);
	free(n->by_ino);
	free(n->by_wd);
	free(n);
}

static void forget_wd(struct wsnote *n, int wd)
{
	struct watched k = { .wd = wd };
	size_t i = slot_of(n->by_wd, &k, true);
	if (!n->by_wd[i].used)
		return;
	size_t j = slot_of(n->by_ino, &n->by_wd[i], false);
	if (n->by_ino[j].used && n->by_ino[j].wd == wd)
		erase(n->by_ino, j, false);
	erase(n->by_wd, i, true);
	n->n--;
}

/* Under the lock.  The queue holds at most the kernel's
 * max_queued_events (then one overflow event): bounded whatever the
 * sandbox writes. */
static void drain(struct wsnote *n)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t len = read(n->fd, buf, sizeof buf);
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0 && errno != EAGAIN)
			n->events++; /* a queue it cannot read: a change, for all it knows */
		if (len <= 0)
			return; /* EAGAIN: all read */
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= len;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)(buf + off);
			/* A watch the kernel dropped (its directory deleted,
			 * which its parent's watch reported as a change). */
			if (ev->mask & IN_IGNORED)
				forget_wd(n, ev->wd);
			else
				n->events++;
			off += (ssize_t)sizeof *ev + ev->len;
		}
	}
}

unsigned long long wsnote_events(struct wsnote *n)
{
	pthread_mutex_lock(&n->lock);
	drain(n);
	unsigned long long e = n->events;
	pthread_mutex_unlock(&n->lock);
	return e;
}

size_t wsnote_watched(struct wsnote *n)
{
	pthread_mutex_lock(&n->lock);
	drain(n);
	size_t k = n->n;
	pthread_mutex_unlock(&n->lock);
	return k;
}

/* The calling thread's walk (wsnote_walk_begin). */
static __thread struct wsnote *cur;
static __thread bool cur_ok;

void wsnote_walk_begin(struct wsnote *n)
{
	cur = n;
	cur_ok = n != NULL;
}

bool wsnote_walk_end(void)
{
	bool ok = cur && cur_ok;
	cur = NULL;
	return ok;
}

/* Local file systems, whose every change is made through this kernel's
 * VFS and so reported: not NFS, SMB, FUSE or 9p, where another machine or
 * a user-space server changes files that no event names. */
static bool local_fs(int fd)
{
	struct statfs fs;
	if (fstatfs(fd, &fs) < 0)
		return false;
	switch ((unsigned long)fs.f_type) {
	case EXT4_SUPER_MAGIC: /* ext2 and ext3 too */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
	case OVERLAYFS_SUPER_MAGIC:
	case F2FS_SUPER_MAGIC:
	case ZFS_SUPER_MAGIC:
		return true;
	default:
		return false;
	}
}

void wsnote_dir(int fd, const struct stat *st)
{
	struct wsnote *n = cur;
	if (!n || !cur_ok)
		return;
	pthread_mutex_lock(&n->lock);
	if (n->off)
		goto fail;
	if (st && n->by_ino[slot_of(n->by_ino, &(struct watched){ .dev = st->st_dev, .ino = st->st_ino }, false)].used)
		goto done;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	/* The same inode watched twice gives its first watch's number. */
	int wd = inotify_add_watch(n->fd, path, WSNOTE_MASK);
	if (wd < 0)
		goto fail;
	if (n->by_wd[slot_of(n->by_wd, &(struct watched){ .wd = wd }, true)].used)
		goto done;
	struct stat own;
	if (n->n >= WSNOTE_MAX) {
		inotify_rm_watch(n->fd, wd);
		goto fail;
	}
	if (!local_fs(fd)) {
		n->off = true;
		inotify_rm_watch(n->fd, wd);
		goto fail;
	}
	if (!st) {
		if (fstat(fd, &own) < 0) {
			inotify_rm_watch(n->fd, wd);
			goto fail;
		}
		st = &own;
	}
	struct watched e = { true, wd, st->st_dev, st->st_ino };
	size_t i = slot_of(n->by_ino, &e, false);
	if (n->by_ino[i].used) {
		/* An inode watched under another number: the kernel dropped
		 * the old watch (its IN_IGNORED not read yet) and the inode's
		 * number came back; the old entry goes. */
		struct watched old = n->by_ino[i];
		erase(n->by_ino, i, false);
		erase(n->by_wd, slot_of(n->by_wd, &old, true), true);
		n->n--;
		i = slot_of(n->by_ino, &e, false);
	}
	n->by_ino[i] = e;
	n->by_wd[slot_of(n->by_wd, &e, true)] = e;
	n->n++;
done:
	pthread_mutex_unlock(&n->lock);
	return;
fail:
	cur_ok = false;
	pthread_mutex_unlock(&n->lock);
}
