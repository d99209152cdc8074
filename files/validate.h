/* Checks of verify_outputs (docs/TOOLS.md), done in the server, never
 * trusting the interpreter.  Pure functions over bytes, fuzzable. */
#ifndef FILES_VALIDATE_H
#define FILES_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "vtypes.h"

/* "png" -> VK_PNG ...; -1 when unknown. */
int vkind_parse(const char *s);
const char *vkind_name(enum vkind k);
/* From the file name's extension: .png .jpg/.jpeg .svg .csv .json; .txt
 * .md .log ... -> text; anything else -> any. */
enum vkind vkind_from_path(const char *path);

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
