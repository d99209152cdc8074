/* Large NumPy arrays in mappings of their own (bigmem.h). */
#include "bigmem.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "npyapi.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/oatab.h"
#include "../common/util.h"

#define HUGE_SZ ((size_t)2 << 20)
/* The largest free block glibc keeps in its heap once NumPy has freed
 * one that large (its mmap threshold climbs to DEFAULT_MMAP_THRESHOLD_MAX,
 * 32 MiB on 64-bit): a column of 4M 8-byte values fits. */
#define HEAP_KEEPS ((size_t)32 << 20)

/* The live mappings, by address (realloc is not told the old size):
 * open addressing with linear probing, at most half the slots used, and
 * deletion by moving the entries after a freed slot back (common/oatab.h).
 * Past half, a block goes to malloc: 32,768 arrays of 2 MiB or more are
 * 64 GiB, past any memory_mb. */
#define SLOTS 65536
static struct mapping {
	uintptr_t at; /* 0: free */
	size_t len;
	unsigned gen; /* the fork count when it was mapped */
} maps[SLOTS];
static size_t n_maps;
/* Forks of this process so far (bigmem_after_fork): a block mapped in
 * the current generation is the process's alone; an older one is shared
 * with the copy that fork made, until written. */
static unsigned gen;
/* Between bigmem_before_fork and bigmem_after_fork: nothing is kept or
 * reused.  (Another thread of the cell's may free or allocate meanwhile:
 * a block it kept would be shared with the copy, and a kept block it took
 * would be a live array left out of it.) */
static bool forking;
/* Blocks of the current generation freed, kept for the next large array:
 * private and resident, reused at no cost (as glibc reuses a freed block);
 * left out of every copy a fork makes (MADV_DONTFORK, bigmem_before_fork),
 * so that they stay private across it and no copy holds them. */
#define CACHE_MAX 16
#define CACHE_BYTES ((size_t)512 << 20)
static struct {
	uintptr_t at;
	size_t len;
	unsigned long kept; /* when it was kept (kept_count): of two the same size, the later is reused */
} cache[CACHE_MAX];
static size_t n_cache, cache_bytes;
static unsigned long kept_count;
/* At most an eighth of memory_mb kept (bigmem_install), and each block
 * larger than HEAP_KEEPS given back before a block is mapped afresh: kept
 * blocks never add to a peak the session would not have had with glibc,
 * which unmaps such blocks when they are freed and keeps smaller ones in
 * its heap, where a larger block mapped afresh leaves them. */
static size_t cache_cap = CACHE_BYTES;
/* memory_mb in bytes (0: none given).  The server ends a session over it,
 * counting what the session holds resident, kept blocks too: a fresh
 * mapping that brings this process past three quarters of it gives every
 * kept block back first, as all fresh mappings once did, so that near the
 * limit they never end a call that would have fit without them. */
static size_t mem_limit;
/* Huge pages for a fresh mapping, where the host takes freed memory back
 * (bigmem_install).  There a huge page written for the first time costs
 * ten to twenty times more once the memory it comes from has been free
 * for a second or more (the host discarded it), and small pages cost the
 * same either way: 256 MB took 33 ms in huge pages within half a second
 * of a free, 330 to 660 ms after one to five seconds, and 145 ms in small
 * pages at any time (bench/freshmem.c on a 2-core Firecracker VM).  A
 * call after think time finds the machine's free memory discarded, back
 * to back it finds what the calls before it freed.  So, on such a host, a
 * fresh mapping is advised for huge pages only in a cell that follows
 * the last one within HOT_MS, or when this process has given back at
 * least as much within HOT_MS (what it gave back, less what such mappings
 * took since); otherwise it takes small pages.  On any
 * other host every fresh mapping is advised, as the kernel's free memory
 * is the same at any age.  The agent loop at 4M rows (bench/CHECKPOINTS.md,
 * "Fresh memory after think time"): small pages for every fresh mapping
 * made the sum of its latencies 18 % lower with 1 s of think time and 31 %
 * higher back to back; this rule, 10.6 % lower with think time and back
 * to back within the noise of always advising.  That was on a machine
 * where a small page faults in at 2.2 us; where it takes 11 us, a huge page
 * the host took back is the cheaper one even after a rest, and the zygote
 * passes host_takes false (common/balloon.h, small_pages_after_rest). */
#define HOT_MS 400.0
static bool host_takes_freed;
static double hot_at_ms;  /* when this process last gave a block back */
static size_t hot_bytes;  /* given back since, less what fresh mappings took */
/* A cell that began within HOT_MS of the last one's end (calls back to
 * back): the memory the calls before it freed, through malloc or here, is
 * still the guest's, and its huge pages are cheap.  The last cell's end. */
static bool cell_follows;
static double cell_end_ms = -1e9;

/* Under the lock: len bytes of ours given back to the kernel. */
static void gave_back_locked(size_t len)
{
	double now = mono_ms();
	if (now - hot_at_ms > HOT_MS)
		hot_bytes = 0;
	hot_bytes = hot_bytes + len < hot_bytes ? SIZE_MAX : hot_bytes + len;
	hot_at_ms = now;
}

/* Under the lock: whether a fresh mapping of len bytes is advised for
 * huge pages (and takes its share of what was given back). */
static bool huge_for_locked(size_t len)
{
	if (!host_takes_freed || cell_follows)
		return true;
	if (mono_ms() - hot_at_ms > HOT_MS || hot_bytes < len)
		return false;
	hot_bytes -= len;
	return true;
}

/* NumPy may allocate without the GIL (its threads release it). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork while another thread holds the lock would leave it held in the
 * child for good (a checkpoint resumed after a rollback would hang at its
 * first large array): taken around fork(), as malloc's own are.  With one
 * thread the session forks by a raw clone, and nothing else can hold it. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&lock);
}

static size_t home(uintptr_t at)
{
	return (size_t)(((uint64_t)at >> 21) * 0x9E3779B97F4A7C15ULL >> 48) & (SLOTS - 1);
}

static size_t slot_of(uintptr_t at)
{
	size_t i = home(at);
	while (maps[i].at && maps[i].at != at)
		i = (i + 1) & (SLOTS - 1);
	return i;
}

static bool m_used(const void *t, size_t i)
{
	return ((const struct mapping *)t)[i].at != 0;
}

static size_t m_home(const void *t, size_t i)
{
	return home(((const struct mapping *)t)[i].at);
}

static void m_move(void *t, size_t to, size_t from)
{
	((struct mapping *)t)[to] = ((struct mapping *)t)[from];
}

static void m_clear(void *t, size_t i)
{
	((struct mapping *)t)[i].at = 0;
}

/* Deletion moves the entries after a freed slot back (common/oatab.h). */
static const struct oatab_ops maps_ops = { m_used, m_home, m_move, m_clear };

/* Under the lock. */
static bool remember_locked(uintptr_t at, size_t len)
{
	if (n_maps >= SLOTS / 2)
		return false;
	maps[slot_of(at)] = (struct mapping){ at, len, gen };
	n_maps++;
	return true;
}

static bool remember(uintptr_t at, size_t len)
{
	pthread_mutex_lock(&lock);
	bool ok = remember_locked(at, len);
	pthread_mutex_unlock(&lock);
	return ok;
}

/* A cached block for n bytes, taken out of the cache and registered;
 * NULL when none holds n.  The smallest that does (of those the same size,
 * the last kept: the warmest, and the one a program that frees and
 * allocates again expects back), cut to n rounded up to whole 2 MiB
 * pieces: the rest is given back at once.  (Taking only a
 * block within an eighth of n left most calls of a DataFrame's work
 * without one: its arrays come in a few sizes, a column of 8-byte values
 * and its masks of one byte, and each miss gave the whole cache back.) */
static void *from_cache(size_t n)
{
	pthread_mutex_lock(&lock);
	size_t best = CACHE_MAX;
	for (size_t i = 0; i < n_cache; i++)
		if (cache[i].len >= n && (best == CACHE_MAX || cache[i].len < cache[best].len ||
					  (cache[i].len == cache[best].len && cache[i].kept > cache[best].kept)))
			best = i;
	void *p = NULL;
	if (best < CACHE_MAX && !forking) {
		uintptr_t at = cache[best].at;
		size_t len = cache[best].len, keep = (n + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
		/* A tail the kernel would not unmap (no mapping left to
		 * split it off) stays part of the block. */
		if (keep < len && munmap((void *)(at + keep), len - keep) == 0) {
			gave_back_locked(len - keep);
			cache_bytes -= len - keep;
			cache[best].len = len = keep;
		}
		if (remember_locked(at, len)) {
			p = (void *)at;
			cache_bytes -= len;
			cache[best] = cache[--n_cache];
		}
	}
	pthread_mutex_unlock(&lock);
	return p;
}

/* The length of the mapping at `at` (0: not one of ours), forgotten when
 * `forget`: then kept in the cache when it is of the current generation
 * and the cache has room (*cached says so).  *own: it is of the current
 * generation (mapped since the last fork: no copy shares its pages). */
static size_t mapped_len(uintptr_t at, bool forget, bool *cached, bool *own)
{
	pthread_mutex_lock(&lock);
	size_t i = slot_of(at), len = maps[i].len;
	if (cached)
		*cached = false;
	if (own)
		*own = maps[i].at && maps[i].gen == gen;
	if (!maps[i].at)
		len = 0;
	else if (forget) {
		if (cached && !forking && maps[i].gen == gen && n_cache < CACHE_MAX && cache_bytes + len <= cache_cap) {
			cache[n_cache].at = at;
			cache[n_cache].kept = ++kept_count;
			cache[n_cache++].len = len;
			cache_bytes += len;
			*cached = true;
		}
		oatab_erase(maps, SLOTS, i, &maps_ops);
		n_maps--;
	}
	pthread_mutex_unlock(&lock);
	return len;
}

/* The kept blocks larger than `keep` given back (map_big); whether any
 * was. */
static bool drop_cache(size_t keep)
{
	bool dropped = false;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_cache;) {
		if (cache[i].len <= keep) {
			i++;
			continue;
		}
		munmap((void *)cache[i].at, cache[i].len);
		gave_back_locked(cache[i].len);
		cache_bytes -= cache[i].len;
		cache[i] = cache[--n_cache];
		dropped = true;
	}
	pthread_mutex_unlock(&lock);
	return dropped;
}

/* Whether a fresh block of n bytes (n >= BIGMEM_MIN) takes huge pages
 * (and takes its share of what was given back). */
static bool huge_for(size_t n)
{
	size_t len = (n + 4095) & ~(size_t)4095;
	pthread_mutex_lock(&lock);
	bool huge = len >= HUGE_SZ && huge_for_locked(len & ~(HUGE_SZ - 1));
	pthread_mutex_unlock(&lock);
	return huge;
}

/* Without checkpoints (bigmem_install): a block that would take huge
 * pages is glibc's, which reuses a freed one at no cost and advises its
 * memory for huge pages (the zygote's glibc.malloc.hugetlb), and only one
 * that takes small pages is mapped here.  So calls back to back run as
 * with NumPy's own allocator, and a cell after a rest takes its fresh
 * memory in small pages (and kept blocks) as with checkpoints. */
static bool glibc_when_hot;

/* A fresh mapping of n bytes (n >= BIGMEM_MIN) starting on a 2 MiB
 * boundary, its whole 2 MiB pieces advised for huge pages where
 * huge_for says so (the tail is left to small pages: a huge page there
 * would be mostly unused); NULL when the kernel refuses, or when the block
 * is glibc's (glibc_when_hot: *glibc set): the caller falls back to
 * malloc. */
static void *map_big(size_t n, bool *glibc)
{
	size_t len = (n + 4095) & ~(size_t)4095;
	if (len < n)
		return NULL;
	/* Every fresh mapping gives the kept blocks glibc would not have kept
	 * back first, so that they never raise the session's peak past
	 * glibc's (a calloc once kept them: 300 MB of np.zeros with 200 MB
	 * kept made the session 477 MB larger).  Those of a column's size
	 * stay for the next temporary, as glibc's heap keeps them: giving
	 * them back too made pivot and merge at 4M rows take 2,960 and 5,150
	 * faults a call instead of 1,130 and 2,980. */
	size_t keep = HEAP_KEEPS;
	pthread_mutex_lock(&lock);
	bool any = n_cache > 0;
	pthread_mutex_unlock(&lock);
	if (mem_limit && any) {
		size_t r = self_resident_bytes();
		if (r == SIZE_MAX || r + len > mem_limit - mem_limit / 4)
			keep = 0;
	}
	drop_cache(keep);
	/* After the drop: what it gave back counts. */
	bool huge = huge_for(n);
	*glibc = huge && glibc_when_hot;
	if (*glibc)
		return NULL;
	char *p = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* The kept blocks count against RLIMIT_DATA (memory_mb): an array
	 * refused while they are held is asked for again without them, so
	 * that freed memory never fails an allocation. */
	if (p == MAP_FAILED && drop_cache(0))
		p = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *a = (char *)(((uintptr_t)p + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (p + len + HUGE_SZ > a + len)
		munmap(a + len, (size_t)(p + len + HUGE_SZ - (a + len)));
	/* Small pages advised too, not left to the kernel: where transparent
	 * huge pages are `always` (not only `madvise`, as on the bench's VM)
	 * it would give a fresh mapping huge ones unasked. */
	if (huge)
		madvise(a, len & ~(HUGE_SZ - 1), MADV_HUGEPAGE);
	else
		madvise(a, len, MADV_NOHUGEPAGE);
	if (!remember((uintptr_t)a, len)) {
		munmap(a, len);
		return NULL;
	}
	return a;
}

/* A block of glibc's in huge pages (map_big's *glibc) advised as NumPy's
 * own allocator advises one of 4 MiB or more: from its first whole 4 kB
 * page on.  (glibc's heap is advised already where glibc.malloc.hugetlb
 * is honoured, a sanitizer's allocator's is not.) */
static void *glibc_block(void *p, size_t n, bool glibc)
{
	if (p && glibc && n >= ((size_t)4 << 20)) {
		uintptr_t at = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
		madvise((void *)at, n - (size_t)(at - (uintptr_t)p), MADV_HUGEPAGE);
	}
	return p;
}

static void *big_malloc(void *ctx, size_t n)
{
	(void)ctx;
	bool glibc = false;
	void *p = n >= BIGMEM_MIN ? from_cache(n) : NULL;
	if (!p && n >= BIGMEM_MIN)
		p = map_big(n, &glibc);
	return p ? p : glibc_block(malloc(n), n, glibc);
}

static void *big_calloc(void *ctx, size_t count, size_t size)
{
	(void)ctx;
	size_t n;
	if (__builtin_mul_overflow(count, size, &n))
		return NULL;
	/* A kept block is resident and the session's own: zeroing it costs a
	 * pass over memory already mapped, where a fresh mapping costs a fault
	 * for every 4 kB past its last whole 2 MiB (300 for a 400k-row column
	 * of 8-byte values) on top of the kernel zeroing its pages: a
	 * pivot_table at 400k rows asked for three zeroed blocks a call, took
	 * 600 faults and 20 to 30 ms more than without checkpoints.  As glibc,
	 * which zeroes a block of its heap it reuses and maps afresh only past
	 * its mmap threshold (HEAP_KEEPS at most): a larger np.zeros stays a
	 * fresh mapping, so its pages cost nothing until touched. */
	bool glibc = false;
	void *p = n >= BIGMEM_MIN && n <= HEAP_KEEPS ? from_cache(n) : NULL;
	if (p)
		memset(p, 0, n);
	else if (n >= BIGMEM_MIN)
		p = map_big(n, &glibc); /* a fresh mapping reads as zeros */
	return p ? p : glibc_block(calloc(count, size), n, glibc);
}

static void big_free(void *ctx, void *p, size_t size)
{
	(void)ctx;
	/* For a block of ours the table's length is the one mapped. */
	if (!p)
		return;
	bool cached, own;
	size_t len = mapped_len((uintptr_t)p, true, &cached, &own);
	/* A block an older copy still shares frees no memory when unmapped:
	 * not counted as given back. */
	if (len && !cached && munmap(p, len) == 0 && own) {
		pthread_mutex_lock(&lock);
		gave_back_locked(len);
		pthread_mutex_unlock(&lock);
	}
	else if (!len) {
		free(p);
		/* glibc's block: unmapped, or kept in its heap, where the next
		 * block reuses it hot. */
		if (glibc_when_hot && size >= BIGMEM_MIN) {
			pthread_mutex_lock(&lock);
			gave_back_locked(size);
			pthread_mutex_unlock(&lock);
		}
	}
}

static void *big_realloc(void *ctx, void *p, size_t n)
{
	if (!p)
		return big_malloc(ctx, n);
	size_t old = mapped_len((uintptr_t)p, false, NULL, NULL);
	if (!old && n < BIGMEM_MIN)
		return realloc(p, n);
	void *q = big_malloc(ctx, n ? n : 1);
	if (!q)
		return NULL; /* p is left as it was, as realloc does */
	size_t have = old ? old : malloc_usable_size(p);
	memcpy(q, p, have < n ? have : n);
	big_free(ctx, p, 0);
	return q;
}

static PyDataMem_Handler handler = {
	BIGMEM_NAME,
	1,
	{ NULL, big_malloc, big_calloc, big_realloc, big_free },
};

static PyDataMem_Handler hot_handler = {
	BIGMEM_HOT_NAME,
	1,
	{ NULL, big_malloc, big_calloc, big_realloc, big_free },
};

/* Under the lock: each kept block advised (MADV_DONTFORK or
 * MADV_DOFORK), or given back when the kernel refuses. */
static void advise_kept_locked(int advice)
{
	for (size_t i = 0; i < n_cache;) {
		if (madvise((void *)cache[i].at, cache[i].len, advice) == 0) {
			i++;
			continue;
		}
		munmap((void *)cache[i].at, cache[i].len);
		cache_bytes -= cache[i].len;
		cache[i] = cache[--n_cache];
	}
}

size_t bigmem_fresh(uintptr_t *at, size_t *len, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_cache && n < max; i++, n++) {
		at[n] = cache[i].at;
		len[n] = cache[i].len;
	}
	for (size_t i = 0, seen = 0; i < SLOTS && seen < n_maps && n < max; i++) {
		if (!maps[i].at)
			continue;
		seen++;
		if (maps[i].gen != gen)
			continue;
		at[n] = maps[i].at;
		len[n++] = maps[i].len;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

void bigmem_cell(bool begins)
{
	pthread_mutex_lock(&lock);
	double now = mono_ms();
	cell_follows = begins && now - cell_end_ms <= HOT_MS;
	if (!begins)
		cell_end_ms = now;
	pthread_mutex_unlock(&lock);
}

void bigmem_before_fork(void)
{
	pthread_mutex_lock(&lock);
	forking = true;
	/* The kept blocks stay the session's: left out of the copy
	 * (MADV_DONTFORK), they are neither shared with it, so that their
	 * reuse after the fork would copy them 4 kB at a time, nor held by a
	 * checkpoint that has no use for freed memory.  One the kernel will
	 * not mark is given back instead. */
	advise_kept_locked(MADV_DONTFORK);
	pthread_mutex_unlock(&lock);
}

void bigmem_after_fork(bool child)
{
	pthread_mutex_lock(&lock);
	if (child) {
		/* Not in this process's memory (MADV_DONTFORK): each range is
		 * free, and unmapping it again is a no-op.  A session's start
		 * finds the zygote's kept blocks mapped and shared with it:
		 * given back the same way. */
		for (size_t i = 0; i < n_cache; i++)
			munmap((void *)cache[i].at, cache[i].len);
		n_cache = 0;
		cache_bytes = 0;
	}
	/* Marked still, a block reused would be an array the next fork
	 * leaves out of its copy: a rollback to that copy would find it
	 * unmapped.  One the kernel will not unmark is given back. */
	advise_kept_locked(MADV_DOFORK);
	/* Every block mapped before now is shared with the copy (or, in the
	 * child, with its parent). */
	gen++;
	forking = false;
	pthread_mutex_unlock(&lock);
}

int bigmem_install(long memory_mb, bool host_takes, bool checkpoints)
{
	host_takes_freed = host_takes;
	if (memory_mb > 0 && ((size_t)memory_mb << 20) / 8 < CACHE_BYTES)
		cache_cap = ((size_t)memory_mb << 20) / 8;
	if (memory_mb > 0)
		mem_limit = (size_t)memory_mb << 20;
	PyObject *mods = PyImport_GetModuleDict();
	if (!mods || !PyDict_GetItemString(mods, "numpy"))
		return -ENOENT;
	/* A NumPy of another ABI than the headers' is refused here (and
	 * says so in the error cleared below). */
	if (_import_array() < 0) {
		PyErr_Clear();
		return -ENOTSUP;
	}
	if (PyArray_GetNDArrayCFeatureVersion() < NPY_1_22_API_VERSION)
		return -ENOTSUP;
	glibc_when_hot = !checkpoints;
	/* What glibc's heap would keep had NumPy's large blocks gone through
	 * it.  glibc raises its mmap threshold to the size of each mapped
	 * block freed (up to 32 MiB) and its trim threshold to twice that, so
	 * that, once a program freed a large block, the next ones of that
	 * size come from the heap and stay there for reuse.  With checkpoints
	 * NumPy's blocks are this file's, glibc sees only the other large
	 * mallocs (pandas' hash tables: two blocks of 4 MiB for a `groupby`
	 * over 400k keys) and its thresholds stay below them: each call mapped
	 * them afresh, 3 to 5 new huge pages a `groupby` at up to 2 ms each
	 * after think time on the bench's VM, where with checkpoints off none
	 * (bench/CHECKPOINTS.md, "Built: glibc's thresholds as NumPy's frees
	 * would have set them").  Set as those frees would have set them; the
	 * trim threshold within the eighth of memory_mb the kept blocks may
	 * take, and the heap is trimmed before every checkpoint's fork anyway
	 * (session.c). */
	if (checkpoints) {
		size_t trim = 2 * HEAP_KEEPS < cache_cap ? 2 * HEAP_KEEPS : cache_cap;
		mallopt(M_MMAP_THRESHOLD, (int)HEAP_KEEPS);
		mallopt(M_TRIM_THRESHOLD, (int)trim);
	}
	PyObject *cap = PyCapsule_New(checkpoints ? &handler : &hot_handler, "mem_handler", NULL);
	if (!cap) {
		PyErr_Clear();
		return -ENOMEM;
	}
	PyObject *old = PyDataMem_SetHandler(cap);
	Py_DECREF(cap);
	if (!old) {
		PyErr_Clear();
		return -ENOTSUP;
	}
	Py_DECREF(old);
	static bool hooked;
	if (!hooked && pthread_atfork(fork_prepare, fork_release, fork_release) == 0)
		hooked = true;
	return 0;
}
