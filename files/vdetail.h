/* What the modules of verify_outputs's checks share: the writers of a
 * check's detail and a few byte helpers.  Not for other modules. */
#ifndef FILES_VDETAIL_H
#define FILES_VDETAIL_H

#include "vtypes.h"

/* Sets r->ok and r->detail (cut at its end). */
void vr_set(struct vresult *r, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends to r->detail, silently stopping at its end. */
void vr_append(struct vresult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool vr_starts(const unsigned char *p, size_t len, const char *lit);
bool vr_is_ws(unsigned char c);
/* The first lit in [p, end), or NULL. */
const unsigned char *vr_find(const unsigned char *p, const unsigned char *end, const char *lit);

#endif
