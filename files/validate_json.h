/* The JSON check of verify_outputs (validate.h): a scanner that builds no
 * tree (validate_json.c). */
#ifndef FILES_VALIDATE_JSON_H
#define FILES_VALIDATE_JSON_H

#include "vtypes.h"

void validate_json(const struct vspec *spec, const unsigned char *b, size_t len, struct vresult *r);

#endif
