/* Jail layer: the namespaces and the mount tree (ns.c). */
#ifndef JAIL_NS_H
#define JAIL_NS_H

#include <stdbool.h>
#include <sys/types.h>

#include "layer.h"

struct secret_scan;

/* Whether a user namespace can be made as (uid, gid); with mount, also
 * whether that namespace can then make a mount namespace (an AppArmor
 * restriction leaves a new user namespace without capabilities). */
bool jail_userns_probe(uid_t uid, gid_t gid, bool mount);
/* Not as root: this process moves into a user namespace of its own (its
 * uid and gid mapped to themselves), so that the next execve makes its
 * memory there (the owner namespace; see ns.c for why and what it does not
 * open).  0, or a negative errno; after a failure past the unshare the
 * caller must exit. */
int jail_ns_owner_enter(void);
/* As root, before the uid switch: clones the mount sources, ID-mapped to
 * the sandbox uid when it is 65534 (see ns.c).  1 when ID-mapped. */
int jail_ns_prepare(const struct jail_config *c, uid_t uid, gid_t gid, struct err *e);
/* As root, before the uid switch: the IPC namespace, made here so that its
 * shared memory rule can be set (see ns.c). */
void jail_ns_ipc_early(struct jail_report *r);
/* Namespaces, then a fork (pid 1 of the new pid namespace; the intermediate
 * never returns), then the mount tree and pivot_root. */
int jail_ns_apply(const struct jail_config *c, bool with_userns,
		  struct jail_report *r, struct err *e);
/* In the mount tree, while the mount calls are still allowed: an empty
 * read-only mount over each secret the scan found (s->covered); the count
 * goes into the mount layer's detail. */
void jail_ns_hide(struct secret_scan *s, struct jail_layer *l);

#endif
