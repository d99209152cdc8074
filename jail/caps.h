/* Jail layer: capabilities, securebits, no_new_privs (caps.c). */
#ifndef JAIL_CAPS_H
#define JAIL_CAPS_H

#include "layer.h"

/* Every capability set emptied and checked with capget, the securebits
 * locked where a capability allows it, no_new_privs set and read back. */
int jail_caps_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

#endif
