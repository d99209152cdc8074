/* The fingerprint of a virtual environment (trust.h): what runs when its
 * site-packages are added to the interpreter's path, so that an approval of
 * a project's venv is an approval of exactly that code, and any change to it
 * withdraws the approval.
 *
 * Covered: pyvenv.cfg; in each lib/python3.X/site-packages, every *.pth file
 * (site.addsitedir runs each line that starts with "import"), sitecustomize
 * and usercustomize, and the modules of that directory which an import line
 * of a .pth names (an editable install's finder, setuptools' _distutils_hack):
 * those run at start too, and a .pth whose hash is unchanged would otherwise
 * run new code.  Not covered: the venv's other packages, which run only when
 * a cell imports them (as any file the code chooses to run). */
#include "trust_venv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sha2.h>

#include "../common/escape.h"
#include "../common/util.h"

#define VENV_FILE_MAX (1u << 20) /* a .pth is a few lines */
#define VENV_FILES_MAX 1000

struct fp {
	const char *venv;
	SHA2_CTX ctx;
	FILE *list;                   /* "  - REL" lines */
	char *seen[VENV_FILES_MAX];   /* the relative paths hashed so far */
	size_t n;
	struct err *e;
};

static bool seen(const struct fp *f, const char *rel)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->seen[i], rel) == 0)
			return true;
	return false;
}

/* Hashes the file venv/rel into the fingerprint, its path and its
 * contents.  A missing file is 1 unless must; *text (may be NULL) gets the
 * contents, NUL-terminated, for the caller to free. */
static int add_file(struct fp *f, const char *rel, bool must, char **text)
{
	char path[PATH_MAX], hex[65];
	struct stat st;
	if (text)
		*text = NULL;
	if (seen(f, rel))
		return 0;
	if (f->n == VENV_FILES_MAX)
		return err_set(f->e, -E2BIG, "more than %d start-up files", VENV_FILES_MAX);
	if ((size_t)snprintf(path, sizeof path, "%s/%s", f->venv, rel) >= sizeof path)
		return err_set(f->e, -ENAMETOOLONG, "%s: the path is too long", rel);
	/* O_NONBLOCK: a FIFO planted as a .pth must not hang the server. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT && !must)
			return 1;
		return err_sys(f->e, -errno, "%s", rel);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > VENV_FILE_MAX) {
		int rc = err_set(f->e, S_ISREG(st.st_mode) ? -EFBIG : -EINVAL, "%s is %s", rel,
				 S_ISREG(st.st_mode) ? "larger than 1 MiB" : "not a regular file");
		close(fd);
		return rc;
	}
	char *buf = xmalloc((size_t)st.st_size + 1);
	size_t len = 0;
	ssize_t r;
	while (len < (size_t)st.st_size && (r = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	SHA256Data((const uint8_t *)buf, len, hex);
	SHA256Update(&f->ctx, (const uint8_t *)rel, strlen(rel) + 1);
	SHA256Update(&f->ctx, (const uint8_t *)hex, 64);
	f->seen[f->n++] = xstrdup(rel);
	size_t cn = strlen(rel), size = cn * 4 + 8;
	char *clean = xmalloc(size);
	fprintf(f->list, "  - %s\n", esc_bytes(clean, size, rel, cn, cn));
	free(clean);
	if (text)
		*text = buf;
	else
		free(buf);
	return 0;
}

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The module named at s (a dotted name): hashes site/NAME.py or
 * site/NAME/__init__.py for its first part.  Returns past the name. */
static const char *add_module(struct fp *f, const char *site, const char *s, int *rc)
{
	size_t n = 0;
	while (ident_char(s[n]))
		n++;
	if (n > 0 && n < 128 && !(s[0] >= '0' && s[0] <= '9')) {
		char rel[PATH_MAX];
		snprintf(rel, sizeof rel, "%s/%.*s.py", site, (int)n, s);
		int r = add_file(f, rel, false, NULL);
		if (r == 1) {
			snprintf(rel, sizeof rel, "%s/%.*s/__init__.py", site, (int)n, s);
			r = add_file(f, rel, false, NULL);
		}
		if (r < 0 && *rc == 0)
			*rc = r;
	}
	while (ident_char(s[n]) || s[n] == '.')
		n++;
	return s + n;
}

static bool word_at(const char *line, const char *p, const char *w)
{
	size_t l = strlen(w);
	return (p == line || !ident_char(p[-1])) && strncmp(p, w, l) == 0 && (p[l] == ' ' || p[l] == '\t');
}

static const char *skip_blank(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* The modules that the import lines of a .pth (site.addpackage runs a
 * line that starts with "import") name: "import a, b.c as d", "from a
 * import x", "__import__('a')". */
static int pth_imports(struct fp *f, const char *site, const char *text)
{
	int rc = 0;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char *l = xmalloc(ll + 1);
		memcpy(l, line, ll);
		l[ll] = '\0';
		if (strncmp(l, "import ", 7) == 0 || strncmp(l, "import\t", 7) == 0) {
			for (const char *p = l; *p;) {
				if (word_at(l, p, "from")) {
					p = add_module(f, site, skip_blank(p + 4), &rc);
					p = skip_blank(p);
					if (word_at(l, p, "import"))
						while (*p && *p != ';')
							p++; /* the names after it are attributes */
				} else if (word_at(l, p, "import")) {
					p = skip_blank(p + 6);
					for (;;) {
						p = skip_blank(add_module(f, site, p, &rc));
						if (word_at(l, p, "as")) {
							p = skip_blank(p + 2);
							while (ident_char(*p))
								p++; /* the alias: no module */
							p = skip_blank(p);
						}
						if (*p != ',')
							break;
						p = skip_blank(p + 1);
					}
				} else if (strncmp(p, "__import__(", 11) == 0) {
					p = skip_blank(p + 11);
					if (*p == '\'' || *p == '"')
						p = add_module(f, site, p + 1, &rc);
				} else {
					p++;
				}
			}
		}
		free(l);
		line = nl ? nl + 1 : NULL;
	}
	return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static bool starts_with_module(const char *name, const char *mod)
{
	size_t l = strlen(mod);
	return strncmp(name, mod, l) == 0 && (name[l] == '.' || name[l] == '\0');
}

/* One site-packages directory (rel to the venv), its entries in order. */
static int add_site(struct fp *f, const char *site)
{
	char dir[PATH_MAX], rel[PATH_MAX];
	struct dirent **names = NULL;
	snprintf(dir, sizeof dir, "%s/%s", f->venv, site);
	int n = scandir(dir, &names, NULL, by_name), rc = 0;
	if (n < 0)
		return err_sys(f->e, -errno, "%s", site);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n && rc >= 0; i++) {
			const char *name = names[i]->d_name;
			size_t l = strlen(name);
			bool pth = l > 4 && strcmp(name + l - 4, ".pth") == 0;
			bool custom = starts_with_module(name, "sitecustomize") || starts_with_module(name, "usercustomize");
			if (pass == 0 && custom) {
				/* A package (sitecustomize/) runs its __init__.py. */
				snprintf(rel, sizeof rel, "%s/%s", site, name);
				if (!strchr(name, '.'))
					snprintf(rel, sizeof rel, "%s/%s/__init__.py", site, name);
				rc = add_file(f, rel, false, NULL);
			} else if (pass == 1 && pth) {
				char *text;
				snprintf(rel, sizeof rel, "%s/%s", site, name);
				rc = add_file(f, rel, true, &text);
				if (rc == 0 && text)
					rc = pth_imports(f, site, text);
				free(text);
			}
		}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc < 0 ? rc : 0;
}

int trust_venv_fingerprint(const char *venv, char hex[65], char **files, struct err *e)
{
	struct fp f = { .venv = venv, .e = e };
	char *list = NULL, pattern[PATH_MAX];
	size_t size = 0;
	glob_t g = { 0 };
	int rc;

	hex[0] = '\0';
	if (files)
		*files = NULL;
	f.list = open_memstream(&list, &size);
	if (!f.list)
		return err_set(e, -ENOMEM, "out of memory");
	SHA256Init(&f.ctx);
	rc = add_file(&f, "pyvenv.cfg", true, NULL);
	/* The directories the sessions add (interp/zygote.c: the same glob). */
	snprintf(pattern, sizeof pattern, "%s/lib/python3*/site-packages", venv);
	if (rc == 0 && glob(pattern, 0, NULL, &g) == 0) {
		size_t vl = strlen(venv) + 1;
		for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
			rc = add_site(&f, g.gl_pathv[i] + vl);
		globfree(&g);
	}
	if (fclose(f.list) != 0 && rc == 0)
		rc = err_set(e, -ENOMEM, "out of memory");
	if (rc == 0)
		SHA256End(&f.ctx, hex);
	for (size_t i = 0; i < f.n; i++)
		free(f.seen[i]);
	if (rc == 0 && files)
		*files = list;
	else
		free(list);
	return rc;
}
