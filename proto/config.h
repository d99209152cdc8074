/* The zygote's configuration (W_CONFIG, the first message the server sends
 * it after the exec): encoded by the supervisor, decoded by the zygote, one
 * definition for both sides. */
#ifndef PROTO_CONFIG_H
#define PROTO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct zconfig {
	const char *skill_text;  /* the policy file's text, parsed again by the zygote */
	const char *skill_source; /* where it came from, for messages */
	bool approved;           /* an approved project policy: not capped at the built-in one */
	const char *root, *workspace, *workspace_display;
	const char *venv;        /* or NULL: added by each session, never the zygote */
	bool venv_pth_off;       /* its .pth files are not run (the code can write there) */
	bool venv_withheld;      /* ROOT/.interpreter-venv exists and is not approved */
	double timeout_s;        /* --timeout, or <= 0 */
	long memory_mb;          /* --memory, or <= 0 */
	int log_level;           /* or -1: unchanged */
	bool check;              /* --check's own server: change nothing on the host */
	bool no_memfd;           /* the sandbox refuses memfd_create (see the supervisor) */
	bool stay_readable;      /* without namespaces, sessions stay dumpable (jail_config) */
	const char *scratch;     /* the namespace-free mode's scratch directory, made by the server, or NULL */
	void *decoded;           /* zconfig_decode: what the strings point into */
};

/* The message's payload (NUL-terminated JSON), or NULL (out of memory). */
char *zconfig_encode(const struct zconfig *c);
/* Fills c (its strings live until zconfig_free); -1 when the payload is not a
 * configuration or lacks the policy or a path. */
int zconfig_decode(const void *data, size_t len, struct zconfig *c);
void zconfig_free(struct zconfig *c);

#endif
