/* Checks of verify_outputs (docs/TOOLS.md), done in the server, never
 * trusting the interpreter.  Pure functions over bytes, fuzzable. */
#ifndef FILES_VALIDATE_H
#define FILES_VALIDATE_H

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

/* "png" -> VK_PNG ...; -1 when unknown. */
int vkind_parse(const char *s);
const char *vkind_name(enum vkind k);
/* From the file name's extension: .png .jpg/.jpeg .svg .csv .json; .txt
 * .md .log ... -> text; anything else -> any. */
enum vkind vkind_from_path(const char *path);

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

/* What the checks running now hold of the server-wide bound (for tests). */
size_t validate_mem_in_use(void);
/* Lowers the two memory bounds (0: back to the defaults above), so that
 * the fuzzer and the tests reach the refusals with small inputs.  Set
 * before any check runs; never raises them past the defaults. */
void validate_set_mem_bounds(size_t per_check, size_t all_checks);

/* Validates a whole file's content.  The size check (min_bytes) is done
 * here too. */
void validate_buffer(const struct vspec *spec, const unsigned char *buf, size_t len, struct vresult *r);

/* Image helpers also used to return images inline. */
bool png_size(const unsigned char *buf, size_t len, unsigned *w, unsigned *h);
bool jpeg_size(const unsigned char *buf, size_t len, unsigned *w, unsigned *h);

/* A MIME type from the file name's extension ("application/octet-stream"
 * when unknown). */
const char *mime_from_path(const char *path);

#endif
