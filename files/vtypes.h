/* The types and bounds of verify_outputs's checks (validate.h), apart so
 * that the modules the checks are split into share them. */
#ifndef FILES_VTYPES_H
#define FILES_VTYPES_H

#include <stdbool.h>
#include <stddef.h>

enum vkind { VK_ANY, VK_PNG, VK_JPEG, VK_SVG, VK_CSV, VK_JSON, VK_TEXT };

struct vspec {
	enum vkind kind;
	long min_bytes;             /* 0 = the default, 1; negative = no minimum */
	const char *const *required_keys; /* JSON: top-level object keys; may be NULL */
	size_t n_required_keys;
	long min_rows;              /* CSV: data rows after the header; 0 = no minimum */
};

struct vresult {
	bool ok;
	char detail[512]; /* what was found, or what is wrong and what to change */
	/* Filled when known: */
	unsigned width, height; /* images */
	long rows, columns;     /* CSV */
};

/* Bounds on the checks' own work, which hostile bytes cannot push (the
 * file itself is read into memory by the caller, within its own budget):
 * - SVG: expat's every allocation is counted; one check may hold
 *   VALIDATE_MEM_CHECK bytes, all the checks of the server's threads at
 *   once VALIDATE_MEM_SERVER; elements nest at most SVG_MAX_DEPTH deep;
 *   the file is fed to the parser SVG_PIECE bytes at a time.
 * - JSON: checked by a scanner that builds no tree and allocates nothing
 *   that grows with the file; arrays and objects nest at most
 *   JSON_MAX_DEPTH deep.
 * - PNG, JPEG, CSV, text: walked in place, nothing allocated.
 * A file past a bound fails its check, with a detail naming the bound. */
#define VALIDATE_MEM_CHECK (64u << 20)
#define VALIDATE_MEM_SERVER (128u << 20)
#define SVG_MAX_DEPTH 256
#define SVG_PIECE (1u << 20)
#define JSON_MAX_DEPTH 1000

#endif
