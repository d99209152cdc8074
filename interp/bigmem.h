/* Large NumPy arrays in mappings of their own, for sessions that take
 * checkpoints.
 *
 * A checkpoint is a fork: every page of the session is then shared
 * copy-on-write with the frozen copy.  glibc keeps blocks of up to 32 MiB
 * (its mmap threshold rises to the size of the large blocks a program
 * frees) in its heap, and a 4M-row column of floats is 30.5 MiB; a cell
 * that frees such a block after a checkpoint (a replaced column, a
 * consolidation of pandas' blocks) and allocates again reuses memory the
 * checkpoint still shares, so each 4 kB of it is copied at its first
 * write (a huge page shared with a checkpoint is split at its first
 * write).  Measured at 4M rows: `sklearn fit` after a checkpoint took 55
 * to 60 thousand such faults, 1.1 to 1.3 s, in about half the runs.
 *
 * NumPy (1.22 and later) lets a program choose the allocator of array data
 * (PyDataMem_SetHandler).  This one gives each block of BIGMEM_MIN bytes
 * or more a fresh anonymous mapping aligned to 2 MiB, advised for huge
 * pages over its whole 2 MiB pieces: a large array never reuses memory a
 * checkpoint shares, and its first touch costs a fault per 2 MiB instead
 * of a copy per 4 kB.  A freed block the session alone holds is kept for
 * the next large array that fits, across forks too (left out of the
 * copy); any other is unmapped.  Smaller blocks go to malloc as before.
 *
 * Installed in the zygote once NumPy is imported, when the policy takes
 * checkpoints; every session forked from it starts with it.  Without
 * checkpoints a freed block is reused at no cost, and a fresh mapping
 * would only add faults: there it is installed only where the host takes
 * freed memory back, for the page size of a cell after a rest
 * (bigmem_install), and blocks in huge pages stay glibc's.  Arrays made
 * by threads a cell starts use NumPy's default allocator (a new thread's
 * context has the default), which is as before.  Everything here is an optimisation: whatever fails leaves
 * the default allocator, or malloc for one block. */
#ifndef PSM_INTERP_BIGMEM_H
#define PSM_INTERP_BIGMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Blocks this large or larger get a mapping of their own. */
#define BIGMEM_MIN ((size_t)2 << 20)

/* With the GIL held; memory_mb bounds the freed blocks kept for reuse
 * (an eighth of it, at most 512 MiB).  host_takes_freed: the machine's
 * host takes back memory freed a moment ago and a small page is cheap to
 * fault in (common/balloon.h: small_pages_after_rest), so that a
 * fresh mapping is advised for huge pages only in a cell back to back with
 * the last one or when this process has just given back as much
 * (bigmem_cell, map_big).  checkpoints false (installed then only where
 * host_takes_freed holds): a block that would take huge pages
 * is glibc's, as with NumPy's own allocator, and one that takes small
 * pages gets a mapping of its own.  0 when installed; -ENOENT when NumPy
 * is not imported; -ENOTSUP when its C API is not the one this was built
 * against or is older than 1.22.  A Python error is never left set. */
int bigmem_install(long memory_mb, bool host_takes_freed, bool checkpoints);

/* At the beginning (begins true) and the end of each cell the session
 * runs: where the host takes freed memory back, a cell that begins soon
 * after the last one ended takes huge pages for its fresh mappings (the
 * memory those freed is still the machine's), one after think time only
 * for as much as it gave back itself a moment before (bigmem.c). */
void bigmem_cell(bool begins);

/* Around each fork of the session (a checkpoint, a copy): before it, the
 * blocks kept for reuse are marked to be left out of the copy; after it,
 * in the parent (child false) they are kept on, private, and in the child
 * (and in a session just forked from the zygote) forgotten.  Either way a
 * new generation begins: a block mapped before it is shared with the
 * other process, and is unmapped, not kept, when freed. */
void bigmem_before_fork(void);
void bigmem_after_fork(bool child);

/* The blocks this process alone holds because they are new, not because
 * it wrote over memory a copy shares: those mapped since the last fork
 * and still live, and those kept for reuse (left out of every copy).  Up
 * to max of them, as start and length; returns how many.  For the
 * pre-copy, which leaves them out (precopy.h: precopy_skip). */
size_t bigmem_fresh(uintptr_t *at, size_t *len, size_t max);

/* The names NumPy reports for it (numpy.core.multiarray.get_handler_name):
 * with checkpoints, and without them (glibc's blocks in calls back to
 * back). */
#define BIGMEM_NAME "python-sandbox-mcp: large arrays mapped alone"
#define BIGMEM_HOT_NAME "python-sandbox-mcp: large arrays mapped alone after a rest"

#endif
