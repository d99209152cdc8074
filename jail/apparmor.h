/* The AppArmor profile's child, entered once the namespaces are built.
 *
 * Where AppArmor restricts unprivileged user namespaces, the profile that
 * `make install` loads (scripts/apparmor/python-sandbox-mcp.in) lets this
 * binary make one, with the capabilities that building the jail takes.  The
 * zygote, its namespaces built and before any sandboxed code runs, stacks
 * itself with the profile's child `unpriv`, which denies every capability:
 * whatever the sandbox does, the profile gives it none.  Elsewhere (no
 * AppArmor, unconfined, another profile) nothing happens. */
#ifndef JAIL_APPARMOR_H
#define JAIL_APPARMOR_H

#include <stddef.h>

#include "../common/err.h"

#define JAIL_AA_PROFILE "python-sandbox-mcp"
#define JAIL_AA_CHILD JAIL_AA_PROFILE "//unpriv"

enum jail_aa_need {
	JAIL_AA_NOTHING,  /* not confined by the profile */
	JAIL_AA_ENTER,    /* confined by it: the child is to be entered */
	JAIL_AA_INSIDE,   /* the child is already part of the label */
};

/* What a label read from /proc/.../attr/current asks for ("unconfined",
 * "python-sandbox-mcp (enforce)", "a//&b (enforce)"...).  NULL: none. */
enum jail_aa_need jail_aa_need(const char *label);

/* Reads the calling thread's label, while the host's /proc is still there
 * (the mount tree may have none). */
void jail_aa_note(void);

/* Enters the child when the label noted was the profile's: 0 (detail says
 * what was done, or is empty), or negative errno with the message set:
 * confined by the profile and unable to give its capabilities up, the jail
 * fails closed. */
int jail_aa_enter(char *detail, size_t n, struct err *e);

#endif
