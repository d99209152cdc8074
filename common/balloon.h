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

#endif
