/* What changed in the workspace since a walk, as the kernel says it: an
 * inotify instance watching every directory the snapshot walks list (the
 * workspace's own, the server's .logs, .cache and .sessions, the scratch
 * and fs_write directories outside), so that the snapshot taken before a
 * call need not walk the tree again when nothing in it changed since the
 * walk after the last call.  That walk cost a warm `1+1` about 24 system
 * calls in a workspace of a few files, and with 2,000 files 5 ms of the
 * call's 10.
 *
 * The argument.  A walk that may stand for later snapshots reads the
 * event count first (every queued event read and counted), watches each
 * directory before it lists it, and reads the count again after.  Any
 * change after a directory was watched queues an event (the mask below:
 * writes, truncations, attributes and times, creations, deletions,
 * renames, and the directory's own removal); a change before it was
 * watched is one the listing sees.  So when no event was counted between
 * the walk's start and a later moment, what the walk listed is what a
 * walk would list then, but for what inotify does not report:
 *   - stores through a shared mapping of a file (mmap), which change its
 *     bytes and times but no size (a mapping cannot grow a file);
 *   - writes through a hard link in a directory that is not watched;
 *   - changes made by another machine on a network file system (refused:
 *     only the local file systems below are watched, else nothing is).
 * Such a change, made between two calls, is found by the next call's walk
 * after it and counted as that call's: it is never missed, and the walk
 * after a call is always taken whole.  Anything the note cannot follow
 * (a directory it could not watch, more than WSNOTE_MAX of them, a queue
 * that overflowed, a walk that did not see everything) means the next
 * snapshot walks. */
#ifndef FILES_WSNOTE_H
#define FILES_WSNOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* Directories watched at most: past them, no walk stands for a later one
 * (a kernel watch costs about a kilobyte of the host's memory, and the
 * sandbox chooses how many directories there are). */
#define WSNOTE_MAX 4096

struct wsnote;

/* NULL when inotify cannot be had here (the walks are taken every time). */
struct wsnote *wsnote_new(void);
void wsnote_free(struct wsnote *n);

/* Every event queued so far is read; the number of events counted since
 * the note was made (an overflow of the queue counts, a watch's own
 * removal does not). */
unsigned long long wsnote_events(struct wsnote *n);

/* How many directories are watched now (the tests). */
size_t wsnote_watched(struct wsnote *n);

/* The calling thread's walks (artifacts.c) watch each directory before
 * they list it, from wsnote_walk_begin until wsnote_walk_end, which says
 * whether every one of them is watched. */
void wsnote_walk_begin(struct wsnote *n);
bool wsnote_walk_end(void);

/* artifacts.c: the directory open at fd is about to be listed; st its
 * stat when the walk has it (then a directory watched already costs no
 * system call), else NULL. */
void wsnote_dir(int fd, const struct stat *st);

#endif
