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
