/* Jail layer: resource limits (rlimits.c). */
#ifndef JAIL_RLIMITS_H
#define JAIL_RLIMITS_H

#include "layer.h"

/* The policy's limits as rlimits, soft = hard, only ever lowered. */
int jail_rlimits_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

#endif
