/* Jail layer, the last: the seccomp filters (seccomp.c). */
#ifndef JAIL_SECCOMP_H
#define JAIL_SECCOMP_H

#include "layer.h"

/* Loads the allow-list for c's policy and the mode r records (with the
 * mount tree or without, an IPC namespace or not), then the stacked filter
 * of refusals. */
int seccomp_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

#endif
