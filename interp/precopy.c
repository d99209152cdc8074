/* Pre-copying the pages a call is likely to write (precopy.h). */
#include "precopy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/pstat.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* /proc/PID/pagemap: one 64-bit entry per page (Documentation/admin-guide/
 * mm/pagemap.rst). */
#define PM_PRESENT (1ULL << 63)
#define PM_FILE (1ULL << 61)      /* page cache or shared anonymous */
#define PM_EXCLUSIVE (1ULL << 56) /* mapped by this process alone */
#define PM_PFN ((1ULL << 55) - 1)  /* page frame number: 0 unless privileged */

/* At most this many ranges: page runs are coalesced, and a budget of tens
 * of megabytes in scattered single pages would be thousands of runs; the
 * rest is left to the faults, as without a pre-copy. */
#define MAX_RANGES 8192

/* The pre-copied pages are exclusively mapped at the next scan whether
 * the call wrote them or not, so the set would only ever grow.  Each round
 * leaves out one page in SAMPLE (by address): after the next fork those
 * are shared again unless the call writes them, and the following scan
 * tells which; a page no call writes any more leaves the set within SAMPLE
 * rounds, at the price of 1/SAMPLE of the faults. */
#define SAMPLE 64
static unsigned rounds;

struct range {
	uintptr_t start;
	size_t len;
	/* Noted because the last run copied it and a call wrote its window
	 * again since: a page calls keep writing (precopy_again). */
	bool sure;
};
static struct range ranges[MAX_RANGES];
static size_t n_ranges;
static struct precopy_stats last;

/* What the last run copied (sorted, as the scan notes in address order),
 * and the round whose scan left out its sample pages; n_copied 0 when the
 * last fork had no run (precopy_unknown).
 *
 * Left to the one-in-SAMPLE rule alone, a page copied ahead stays in the
 * set for about SAMPLE rounds after the last call that wrote it; with a
 * checkpoint after most calls (or one for each save at rest), each scan
 * noted again nearly all the last one copied: in a session of 400k rows,
 * 1,808, then 2,574, then 3,196 pages for three forks around cells that
 * wrote about 1,100 each.  So a copied page counts only when the page of
 * its 64-page window that the last round left out (never copied, so its
 * bit says whether a call wrote it) was written too: an array or a run of
 * objects that a call rewrites stays, memory it no longer writes goes at
 * the next round.  A page alone in its window that a call writes each
 * time is copied every other round at worst. */
static struct range copied[MAX_RANGES];
static size_t n_copied;
static unsigned copied_round;
/* The next run copies again part of what the last one copied
 * (precopy_again): copied[] stays as it is, the record of that run. */
static bool run_again;

static int pagemap_fd = -1;

/* The ranges the next scan leaves out (precopy_skip), sorted by start. */
static struct range skip[PRECOPY_SKIP_MAX];
static size_t n_skip;

static int range_cmp(const void *a, const void *b)
{
	uintptr_t x = ((const struct range *)a)->start, y = ((const struct range *)b)->start;
	return x < y ? -1 : x > y;
}

void precopy_skip(const uintptr_t *at, const size_t *len, size_t n)
{
	n_skip = 0;
	for (size_t i = 0; i < n && n_skip < PRECOPY_SKIP_MAX; i++)
		if (len[i])
			skip[n_skip++] = (struct range){ at[i], len[i], false };
	qsort(skip, n_skip, sizeof skip[0], range_cmp);
}

/* Whether the page at a is in a range left out; *si is a cursor into
 * skip[], moved forward only (pages are asked for in address order). */
static bool skipped(uintptr_t a, size_t *si)
{
	while (*si < n_skip && skip[*si].start + skip[*si].len <= a)
		(*si)++;
	return *si < n_skip && skip[*si].start <= a;
}

int precopy_open(void)
{
	precopy_close();
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return -errno;
	/* A page that is surely present: this stack's. */
	volatile char probe = 1;
	uintptr_t a = (uintptr_t)&probe;
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t ent = 0;
	if (ps <= 0 || pread(pm, &ent, sizeof ent, (off_t)(a / (uintptr_t)ps * sizeof ent)) != (ssize_t)sizeof ent ||
	    !(ent & PM_PRESENT) || (ent & PM_PFN) != 0) {
		close(pm);
		return -EPERM;
	}
	/* Out of the way of the low numbers the code opens. */
	int high = fcntl(pm, F_DUPFD_CLOEXEC, 64);
	close(pm);
	if (high < 0)
		return -errno;
	pagemap_fd = high;
	return high;
}

void precopy_close(void)
{
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	pagemap_fd = -1;
	n_ranges = 0;
	n_copied = 0;
	n_skip = 0;
}

/* CPU time, as the server's budget for taking a checkpoint is. */
static double cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

/* Appends [start, start + len) to the notes, merged with the last range
 * when adjacent; false when the table is full. */
static bool note(uintptr_t start, size_t len, bool sure)
{
	if (n_ranges && ranges[n_ranges - 1].start + ranges[n_ranges - 1].len == start &&
	    ranges[n_ranges - 1].sure == sure) {
		ranges[n_ranges - 1].len += len;
		return true;
	}
	if (n_ranges == MAX_RANGES)
		return false;
	ranges[n_ranges++] = (struct range){ start, len, sure };
	return true;
}

/* One line of /proc/self/maps: "start-end perms offset dev inode [path]".
 * Private writable mappings only: a shared one has no copy-on-write, a
 * read-only one is never written. */
static bool parse_map(const char *line, uintptr_t *start, uintptr_t *end)
{
	char *p;
	unsigned long long s = strtoull(line, &p, 16), e;
	if (*p != '-')
		return false;
	e = strtoull(p + 1, &p, 16);
	if (*p != ' ' || e <= s)
		return false;
	if (strncmp(p + 1, "rw-p", 4) != 0)
		return false;
	*start = (uintptr_t)s;
	*end = (uintptr_t)e;
	return true;
}

static bool written(uint64_t e)
{
	return (e & (PM_PRESENT | PM_FILE | PM_EXCLUSIVE)) == (PM_PRESENT | PM_EXCLUSIVE);
}

/* Whether the page at a was copied by the last run; *ci is a cursor into
 * copied[], moved forward only (pages are asked for in address order). */
static bool was_copied(uintptr_t a, size_t *ci)
{
	while (*ci < n_copied && copied[*ci].start + copied[*ci].len <= a)
		(*ci)++;
	return *ci < n_copied && copied[*ci].start <= a;
}

/* Walks the pagemap entries of [start, end); false once a bound is hit. */
static bool scan_range(int pm, uintptr_t start, uintptr_t end, size_t ps, size_t budget, double deadline, size_t *ci,
		       size_t *si)
{
	/* A multiple of SAMPLE entries, read in pieces that end on a multiple
	 * of it: a window's sample is in the piece that holds the window. */
	static uint64_t ent[4096];
	const size_t cap = sizeof ent / sizeof ent[0];
	uintptr_t run = 0;
	size_t run_len = 0;
	bool more = true, run_sure = false;
	for (uintptr_t a = start; a < end && more;) {
		size_t n = (end - a) / ps;
		if (n > cap - (a / ps) % cap)
			n = cap - (a / ps) % cap;
		ssize_t got = pread(pm, ent, n * sizeof ent[0], (off_t)(a / ps * sizeof ent[0]));
		if (got <= 0)
			break; /* gone meanwhile, or no pagemap: do less */
		n = (size_t)got / sizeof ent[0];
		size_t first = (a / ps) % cap; /* ent[i] is the page cap-index first + i */
		for (size_t i = 0; i < n; i++, a += ps) {
			bool want = written(ent[i]) && (a / ps) % SAMPLE != rounds % SAMPLE && !skipped(a, si);
			bool sure = false;
			if (want && was_copied(a, ci)) {
				/* The window's page the last round left out; outside
				 * what was read (the mapping's edge), unknown: kept. */
				size_t w = (first + i) / SAMPLE * SAMPLE + copied_round % SAMPLE;
				if (w >= first && w - first < n)
					want = sure = written(ent[w - first]);
			}
			if (want && run_len && sure != run_sure) {
				if (!note(run, run_len, run_sure)) {
					run_len = 0;
					return false;
				}
				last.bytes += run_len;
				run_len = 0;
			}
			if (want) {
				if (!run_len) {
					run = a;
					run_sure = sure;
				}
				run_len += ps;
				if (last.bytes + run_len >= budget) {
					more = false;
					break;
				}
				continue;
			}
			if (run_len) {
				if (!note(run, run_len, run_sure)) {
					run_len = 0;
					return false;
				}
				last.bytes += run_len;
				run_len = 0;
			}
		}
		if (more && cpu_ms() > deadline)
			more = false;
	}
	if (run_len && note(run, run_len, run_sure))
		last.bytes += run_len;
	return more && last.bytes < budget;
}

size_t precopy_scan(size_t budget, size_t max_map, double max_ms)
{
	double t0 = cpu_ms(), deadline = t0 + max_ms;
	n_ranges = 0;
	run_again = false;
	memset(&last, 0, sizeof last);
	long psl = sysconf(_SC_PAGESIZE);
	if (budget == 0 || psl <= 0) {
		n_skip = 0;
		return 0;
	}
	size_t ps = (size_t)psl;
	rounds++;
	int pm = pagemap_fd;
	int maps = pm >= 0 ? open("/proc/self/maps", O_RDONLY | O_CLOEXEC) : -1;
	if (maps < 0)
		goto out;
	/* Lines are read whole into buf; one longer than buf (a long file
	 * name) is skipped to its end. */
	static char buf[16384];
	size_t have = 0;
	bool skipping = false, more = true;
	size_t ci = 0, si = 0;
	while (more) {
		ssize_t r = read(maps, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = '\0';
		char *line = buf, *nl;
		while (more && (nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			uintptr_t s, e;
			/* A mapping larger than max_map (a sanitizer's shadow,
			 * an allocator's reserved space: tens of gigabytes, mostly
			 * never touched) cannot be resident under the memory
			 * limit, and walking its entries would take the whole
			 * time bound. */
			if (!skipping && parse_map(line, &s, &e) && e - s <= max_map)
				more = scan_range(pm, s, e, ps, budget, deadline, &ci, &si);
			skipping = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof buf - 1) {
			have = 0;
			skipping = true;
		}
	}
out:
	if (maps >= 0)
		close(maps);
	n_skip = 0; /* for this scan only */
	/* Used: the run after this scan records what it copies, and a fork
	 * without one says so (precopy_unknown). */
	n_copied = 0;
	last.ranges = n_ranges;
	last.scan_ms = cpu_ms() - t0;
	return last.bytes;
}

size_t precopy_again(size_t budget)
{
	n_ranges = 0;
	n_skip = 0;
	memset(&last, 0, sizeof last);
	long psl = sysconf(_SC_PAGESIZE);
	size_t ps = psl > 0 ? (size_t)psl : 4096;
	for (size_t i = 0; i < n_copied && n_ranges < MAX_RANGES && last.bytes < budget; i++) {
		if (!copied[i].sure)
			continue;
		size_t len = copied[i].len;
		if (len > budget - last.bytes)
			len = (budget - last.bytes) / ps * ps;
		if (!len)
			break;
		ranges[n_ranges++] = (struct range){ copied[i].start, len, true };
		last.bytes += len;
	}
	/* copied[] stays the last run's record, the part not copied again
	 * too: the next scan tells by it which of those pages the next call
	 * wrote (its windows' left-out pages are the same ones: rounds not
	 * advanced), and so which are sure at the next rest. */
	run_again = true;
	last.ranges = n_ranges;
	return last.bytes;
}

/* True when this process has one thread: then nothing but the caller can
 * change its mappings while it runs. */
static bool single_threaded(void)
{
	struct pstat ps;
	return pstat_read(-1, "/proc/self/stat", &ps) == 0 && ps.num_threads == 1;
}

/* A write to each page of [a, a + len) that leaves its bytes as they are
 * (a locked OR of 0: atomic, so a value is never written back stale). */
static void touch(uintptr_t a, size_t len, size_t ps)
{
#if defined(__x86_64__) || defined(__i386__)
	for (uintptr_t p = a; p < a + len; p += ps)
		__asm__ volatile("lock orb $0, %0" : "+m"(*(unsigned char *)p));
#else
	(void)a, (void)len, (void)ps;
#endif
}

void precopy_run(double max_ms, int stop_fd)
{
	double t0 = cpu_ms(), deadline = t0 + max_ms;
	bool record = !run_again;
	run_again = false;
	if (record) {
		n_copied = 0;
		copied_round = rounds;
	}
	long psl = sysconf(_SC_PAGESIZE);
	size_t ps = psl > 0 ? (size_t)psl : 4096;
	/* Under a hypervisor that shadows the guest's page tables, the first
	 * write to a page the kernel has just populated still traps to the
	 * hypervisor (about 7 us here, no fault the guest counts): a write
	 * from here moves that cost off the next call too.  Only with one
	 * thread: the madvise that succeeded just before it proves the piece
	 * mapped and writable, and no other thread can unmap or protect it
	 * in between (a write to such a page would be a SIGSEGV). */
	bool write_too = single_threaded();
	/* In pieces of 256 kB (a few ms at most), so the clock and stop_fd
	 * are looked at often. */
	const size_t piece = 256 << 10;
	for (size_t i = 0; i < n_ranges; i++) {
		for (size_t off = 0; off < ranges[i].len; off += piece) {
			struct pollfd pf = { .fd = stop_fd, .events = POLLIN };
			if (cpu_ms() > deadline || (stop_fd >= 0 && poll(&pf, 1, 0) != 0))
				goto out;
			size_t len = ranges[i].len - off < piece ? ranges[i].len - off : piece;
			/* EINTR, ENOMEM (unmapped meanwhile by another thread),
			 * EFAULT, EINVAL (a kernel without it): that piece stays
			 * shared and the next call faults it in, as before. */
			if (madvise((void *)(ranges[i].start + off), len, MADV_POPULATE_WRITE) < 0) {
				if (errno == EINVAL)
					goto out;
				break;
			}
			if (write_too)
				touch(ranges[i].start + off, len, ps);
			last.copied += len;
			uintptr_t at = ranges[i].start + off;
			if (!record)
				continue;
			if (n_copied && copied[n_copied - 1].start + copied[n_copied - 1].len == at &&
			    copied[n_copied - 1].sure == ranges[i].sure)
				copied[n_copied - 1].len += len;
			else if (n_copied < MAX_RANGES)
				copied[n_copied++] = (struct range){ at, len, ranges[i].sure };
		}
	}
out:
	last.run_ms = cpu_ms() - t0;
	n_ranges = 0;
}

void precopy_forget(void)
{
	n_ranges = 0;
	n_copied = 0;
	run_again = false;
}

void precopy_unknown(void)
{
	n_copied = 0;
	run_again = false;
}

void precopy_last(struct precopy_stats *out)
{
	*out = last;
}
