/* What every layer of the jail shares (layer.h): the test hook and the
 * runtime paths. */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the knobs ---- */

static char disabled_list[256];
static bool pfc;

void jail_knobs_read(void)
{
	/* Read once, before the environment is replaced. */
	const char *s = getenv("PSM_JAIL_DISABLE");
	snprintf(disabled_list, sizeof disabled_list, "%s", s ? s : "");
	pfc = getenv("PSM_SECCOMP_PFC") != NULL;
}

bool jail_knob_pfc(void)
{
	return pfc;
}

bool jail_disabled(const char *layer)
{
	size_t n = strlen(layer);
	for (const char *p = disabled_list; *p;) {
		const char *end = strchr(p, ',');
		size_t k = end ? (size_t)(end - p) : strlen(p);
		if (k == n && strncmp(p, layer, n) == 0)
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

const char *const *jail_default_runtime_paths(void)
{
	/* Debian's python3.11 with numpy, pandas, matplotlib from packages:
	 * the interpreter, stdlib, dist-packages, shared libraries and fonts
	 * are under /usr; /lib, /bin... are merged-usr links (recreated as
	 * links); the /etc files are the ones they read (BLAS/LAPACK through
	 * /etc/alternatives, matplotlibrc, Debian's sitecustomize, OpenSSL's
	 * config for hashlib).  Missing entries are skipped. */
	static const char *const paths[] = {
		"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
		"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/localtime", "/etc/timezone", "/etc/fonts", "/etc/matplotlibrc",
		"/etc/python3", "/etc/python3.11", "/etc/mime.types", "/etc/ssl/openssl.cnf",
		NULL,
	};
	return paths;
}
