/* Pre-copying the pages a call is likely to write, right after a fork.
 *
 * A checkpoint is a fork: from then on every page of the session is shared
 * copy-on-write with the frozen copy, and the next call takes a page fault
 * on each page it writes (Python writes the reference counts of every
 * object it touches, so even `1+1` writes a few hundred pages).  On a
 * virtual machine a write fault costs about 20 us; the same copy made in
 * one madvise(MADV_POPULATE_WRITE) costs a third of that, and can be made
 * while the agent reads the reply instead of on the next call's path.
 *
 * Which pages: those the last call wrote.  While the previous checkpoint
 * is alive, every anonymous page the session has not written since that
 * fork is still shared with it; a page the session wrote (or allocated)
 * since is mapped by the session alone, which /proc/self/pagemap tells
 * (bit 56, "exclusively mapped", readable without privilege).  So:
 * precopy_scan() before the new fork notes those pages, precopy_run()
 * after it, in the session only, makes them the session's own again.
 *
 * Everything here is an optimisation: on any error it does less or
 * nothing, never fails the caller.  Both steps are bounded in bytes and
 * in time, and the copies are real memory, counted by the server's
 * watchdog like any other. */
#ifndef PSM_PRECOPY_H
#define PSM_PRECOPY_H

#include <stddef.h>
#include <stdint.h>

struct precopy_stats {
	size_t ranges;    /* coalesced address ranges noted */
	size_t bytes;     /* bytes noted by the scan */
	size_t copied;    /* bytes the run made private again */
	double scan_ms, run_ms;
};

/* Opens this process's /proc/self/pagemap and keeps it (close-on-exec,
 * at a descriptor number of 64 or more).  Call before the process makes itself
 * non-dumpable: the file is then root's, mode 0400, and cannot be opened
 * by the process itself any more.  The descriptor must never show page
 * frame numbers (physical addresses, the ground work of a Rowhammer
 * attack on the host); the kernel hides them from an opener without
 * CAP_SYS_ADMIN, and this checks it rather than trusts it: a descriptor
 * that shows one is closed.  Returns the descriptor or -errno; without
 * one, nothing is pre-copied. */
int precopy_open(void);

/* Closes the descriptor: a forked child (a checkpoint) must not hold a
 * handle on its parent's memory map. */
void precopy_close(void);

/* Notes the present, anonymous, exclusively mapped pages of this process's
 * private writable mappings no larger than `max_map` bytes each, up to
 * `budget` bytes and `max_ms` of scanning
 * (CPU time of the calling thread, as for every bound here: a loaded
 * machine makes no step do less).
 * The notes live in static storage of this module (one scan at a time, no
 * allocation: the caller is about to fork).  Returns the bytes noted, 0
 * when /proc cannot be read or nothing qualifies. */
size_t precopy_scan(size_t budget, size_t max_map, double max_ms);

/* Leaves out of the next scan (only) the n ranges [at[i], at[i] + len[i]):
 * memory the last call allocated afresh, not memory it wrote over.  A
 * page of a block mapped since the last fork is mapped by this process
 * alone because it is new, which says nothing of whether the next call
 * writes it: its large arrays come in mappings of their own, and NumPy
 * writes an array once, when it fills it.  Noted, such blocks (the
 * temporaries a cell kept for reuse, the columns it made) took the whole
 * budget before the scan, in address order, came to the objects whose
 * reference counts every call writes: after `str.len()` over 5 million
 * strings, 256 MB of new arrays noted, and 71,800 of the next call's
 * 71,840 faults outside them.  At most PRECOPY_SKIP_MAX ranges (the rest
 * are scanned as before); unsorted is fine. */
#define PRECOPY_SKIP_MAX 1024
void precopy_skip(const uintptr_t *at, const size_t *len, size_t n);

/* In place of a scan, for a fork of the same state (a save at rest takes
 * a new checkpoint of the state the last one holds, with no call in
 * between), which shares again every page the last run copied: notes
 * again, up to `budget` bytes, those of them that calls keep writing (the
 * last run copied them because the call before wrote their windows again
 * after an earlier copy); the others stay shared, and the next scan still
 * knows them as copied.  A scan here would drop them all: each is
 * exclusively mapped, and the page of its window the last round left out
 * was not written, since nothing ran.  Copying all again cost more CPU
 * than the faults it spared in the agent loop, whose calls differ (a
 * chart's pages copied twice for a merge).  Returns the bytes noted. */
size_t precopy_again(size_t budget);

/* Write-faults in, in one call per range, the pages the last scan noted,
 * stopping after `max_ms`, or as soon as `stop_fd` (when not -1) has
 * something to read; forgets the notes.  Call in the process that keeps
 * running (the copy-on-write break of a page the fork left shared). */
void precopy_run(double max_ms, int stop_fd);

/* Forgets the notes without copying (the forked child). */
void precopy_forget(void);

/* Says that this process forked without a scan and run around it (a
 * checkpoint taken while a call waits, a copy for fork_from): what the
 * last run copied is shared again, so the next scan reads those pages'
 * bits as it reads any other's. */
void precopy_unknown(void);

/* What the last scan and run did. */
void precopy_last(struct precopy_stats *out);

#endif
