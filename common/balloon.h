/* Whether the machine's host takes freed memory back.
 *
 * A virtual machine whose virtio balloon device offers free page reporting
 * (VIRTIO_BALLOON_F_REPORTING) tells its host, about two seconds after the
 * fact, which blocks of its memory are free, and the host discards them.
 * Writing to such a block again faults in the host too: measured on a
 * 2-core Firecracker VM (bench/freshmem.c), 256 MB of fresh memory in
 * transparent huge pages took 33 ms within half a second of a free and 330
 * to 660 ms after one to five seconds of idleness, while small pages took
 * 145 ms either way.  A process that allocates after think time pays the
 * slow case; interp/bigmem.c uses this to choose the page size of a fresh
 * mapping. */
#ifndef COMMON_BALLOON_H
#define COMMON_BALLOON_H

#include <stdbool.h>

/* Where the kernel lists the virtio devices by driver. */
#define BALLOON_DRIVERS_DIR "/sys/bus/virtio/drivers"

/* True when a device bound to the virtio_balloon driver under drivers_dir
 * has negotiated free page reporting (bit 5 of its `features` file, one
 * '0' or '1' per feature bit).  False when there is none, or nothing can
 * be read: the caller then keeps its default. */
bool balloon_reports_free_pages(const char *drivers_dir);

/* What a huge page the host took back costs to write again, per 4 kB of
 * it, on the hosts measured (bench/freshmem.c: 256 MB in 330 to 660 ms
 * after a rest, 2.6 to 5 us per 4 kB), rounded to where small pages stop
 * paying: a small page that costs more than this to fault in makes small
 * pages the dearer choice even after a rest. */
#define BALLOON_HUGE_AFTER_REST_US 4.0

/* What the first write to a fresh small page (4 kB, zeroed by the kernel)
 * costs on this machine, in microseconds: the least of three writes of
 * 128 pages, about a millisecond at 2 us a page.  Negative when no memory
 * could be mapped.  It moves by five times between virtual machines (2.2
 * us on one, 11 us on the next, the same kernel build), which is why it is
 * measured rather than assumed. */
double small_page_fault_us(void);

/* Whether fresh memory written after a rest should take small pages: only
 * where the host takes freed memory back (huge pages then cost it again)
 * and a small page's fault is cheaper than that (fault_us from
 * small_page_fault_us; unknown, negative, counts as cheap: the choice
 * measured on the first such host). */
bool small_pages_after_rest(bool host_takes_freed, double fault_us);

#endif
