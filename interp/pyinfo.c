#include "pyinfo.h"

#include <Python.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

const char *py_embedded_version(void)
{
	/* The library's own version (the headers' PY_VERSION may be an older
	 * patch level): callable before the interpreter is initialised. */
	static char v[32];
	if (!v[0]) {
		const char *s = Py_GetVersion();
		snprintf(v, sizeof v, "%.*s", (int)strcspn(s, " "), s);
	}
	return v;
}

/* A directory entry "DIST-VERSION.dist-info" or ".egg-info": the version. */
static int version_of(const char *entry, const char *dist, char *out, size_t n)
{
	size_t dl = strlen(dist);
	if (strncasecmp(entry, dist, dl) != 0 || entry[dl] != '-')
		return -1;
	const char *v = entry + dl + 1;
	const char *end = strstr(v, ".dist-info");
	if (!end)
		end = strstr(v, ".egg-info");
	if (!end || end[strcspn(end, "o") + 1] != '\0' || end == v || (size_t)(end - v) >= n)
		return -1;
	/* A version is digits, dots and a few letters: nothing else is kept. */
	for (const char *p = v; p < end; p++)
		if (!strchr("0123456789.abcdefghijklmnopqrstuvwxyz+", *p))
			return -1;
	snprintf(out, n, "%.*s", (int)(end - v), v);
	return 0;
}

static int find_in(const char *dir, const char *dist, char *out, size_t n)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int r = -1;
	struct dirent *de;
	while (r < 0 && (de = readdir(d)))
		r = version_of(de->d_name, dist, out, n);
	closedir(d);
	return r;
}

void py_dist_version(const char *dist, const char *venv, char *out, size_t n)
{
	char dirs[3][4200];
	size_t k = 0;
	if (venv)
		snprintf(dirs[k++], sizeof dirs[0], "%s/lib/python%d.%d/site-packages", venv, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	snprintf(dirs[k++], sizeof dirs[0], "/usr/local/lib/python%d.%d/dist-packages", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	snprintf(dirs[k++], sizeof dirs[0], "%s/lib/python3/dist-packages", PSM_PY_PREFIX);
	out[0] = '\0';
	for (size_t i = 0; i < k; i++)
		if (find_in(dirs[i], dist, out, n) == 0)
			return;
	out[0] = '\0';
}
