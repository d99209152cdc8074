/* Whether the machine's host takes freed memory back (balloon.h). */
#include "balloon.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* VIRTIO_BALLOON_F_REPORTING (include/uapi/linux/virtio_balloon.h). */
#define F_REPORTING 5

bool balloon_reports_free_pages(const char *drivers_dir)
{
	char path[512];
	if (snprintf(path, sizeof path, "%s/virtio_balloon", drivers_dir) >= (int)sizeof path)
		return false;
	DIR *d = opendir(path);
	if (!d)
		return false;
	bool yes = false;
	for (struct dirent *e; !yes && (e = readdir(d));) {
		/* The devices bound to the driver: virtio0, virtio1, ... */
		if (strncmp(e->d_name, "virtio", 6) != 0)
			continue;
		char file[sizeof path + 300], bits[160];
		if (snprintf(file, sizeof file, "%s/%s/features", path, e->d_name) >= (int)sizeof file)
			continue;
		ssize_t n = read_small(file, bits, sizeof bits);
		yes = n > F_REPORTING && bits[F_REPORTING] == '1';
	}
	closedir(d);
	return yes;
}
