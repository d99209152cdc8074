/* Jail layer: file descriptors and environment (fds.c). */
#ifndef JAIL_FDS_H
#define JAIL_FDS_H

#include "layer.h"

/* Closes every fd but 0-2 and c->keep_fds (those made close-on-exec),
 * points stdin at /dev/null, replaces the environment by c->env. */
int jail_fds_apply(const struct jail_config *c, struct jail_report *r, struct err *e);

#endif
