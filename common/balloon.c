/* Whether the machine's host takes freed memory back (balloon.h). */
#include "balloon.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

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

#define FAULT_PAGES 128
#define FAULT_ROUNDS 3

double small_page_fault_us(void)
{
	const size_t page = 4096, n = FAULT_PAGES * page;
	double best = -1;
	for (int r = 0; r < FAULT_ROUNDS; r++) {
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			continue;
		madvise(p, n, MADV_NOHUGEPAGE);
		volatile char *w = p; /* each write made, one fault a page */
		double t = mono_ms();
		for (size_t i = 0; i < n; i += page)
			w[i] = 1;
		double us = (mono_ms() - t) * 1000.0 / FAULT_PAGES;
		munmap(p, n);
		if (best < 0 || us < best)
			best = us;
	}
	return best;
}

bool small_pages_after_rest(bool host_takes_freed, double fault_us)
{
	return host_takes_freed && fault_us < BALLOON_HUGE_AFTER_REST_US;
}
