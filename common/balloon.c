/* Whether the machine's host takes freed memory back (balloon.h). */
#include "balloon.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "pdir.h"
#include "util.h"

/* VIRTIO_BALLOON_F_REPORTING (include/uapi/linux/virtio_balloon.h). */
#define F_REPORTING 5

bool balloon_reports_free_pages(const char *drivers_dir)
{
	char path[512];
	if (snprintf(path, sizeof path, "%s/virtio_balloon", drivers_dir) >= (int)sizeof path)
		return false;
	struct pdir d;
	if (pdir_open(&d, AT_FDCWD, path) < 0)
		return false;
	bool yes = false;
	for (const char *name; !yes && (name = pdir_next(&d));) {
		/* The devices bound to the driver: virtio0, virtio1, ... */
		if (strncmp(name, "virtio", 6) != 0)
			continue;
		char rel[300], bits[160];
		if (snprintf(rel, sizeof rel, "%s/features", name) >= (int)sizeof rel)
			continue;
		ssize_t n = read_small_at(d.fd, rel, bits, sizeof bits);
		yes = n > F_REPORTING && bits[F_REPORTING] == '1';
	}
	pdir_close(&d);
	return yes;
}
