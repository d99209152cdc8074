/* The schema's permissions: section (fs_read, fs_write, fs_read_deny,
 * shell_exec, net_access): each path list checked as written, then
 * resolved against the project root (policy_resolve): what a path names
 * once symlinks are followed, and the directories fs_write may never
 * cover. */
#include "private.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const policy_perm_keys[] = { "fs_read", "fs_write", "shell_exec", "net_access",
					 "fs_read_deny", NULL };
#define PERM_KEYS "fs_read, fs_write, shell_exec, net_access, fs_read_deny"

/* "/" itself, however spelled ("//", "/.", "/.."): granting the whole file
 * system would expose ~/.ssh, other users' files and /proc. */
static bool is_fs_root(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *p = s; *p;) {
		size_t l;
		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l && !(l == 1 && p[0] == '.') && !(l == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += l;
	}
	return true;
}

static int want_path_list(const struct pctx *c, const struct ynode *n, const char *key,
			  bool write, char ***out, size_t *nout, unsigned **lines)
{
	char ekey[64], buf[SHOW_MAX * 4 + 40];
	char **v;
	unsigned *l;

	if (n->n > MAX_PATHS)
		return fm_err(c, n->line, key, "more than %d paths; list fewer, broader directories",
			    MAX_PATHS);
	if (n->n == 0) {
		*out = NULL;
		*nout = 0;
		*lines = NULL;
		return 0;
	}
	v = xcalloc(n->n, sizeof *v);
	l = xcalloc(n->n, sizeof *l);
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *it = n->kids[i];
		int rc = 0;
		snprintf(ekey, sizeof ekey, "%s[%zu]", key, i);
		if (it->tagged) {
			rc = fm_tag_error(c, it, ekey);
		} else if (it->kind != Y_SCALAR || fm_is_null(it) || fm_bool(it) >= 0) {
			rc = fm_err(c, it->line, ekey, "expected a path, got %s; write a %s as a string",
				  fm_show(it, buf, sizeof buf),
				  write ? "directory inside the project" : "path");
		} else if (it->len == 0 || strspn(it->s, " \t") == it->len) {
			/* An empty entry would resolve to the project root itself:
			 * a grant nobody wrote on purpose. */
			rc = fm_err(c, it->line, ekey, "the path is empty; write a path, or remove the entry");
		} else if (it->len >= PATH_MAX) {
			rc = fm_err(c, it->line, ekey, "the path is longer than %d bytes", PATH_MAX - 1);
		} else if (memchr(it->s, '\0', it->len)) {
			/* An embedded NUL ("workspace\0/../../etc") would make
			 * the checked string and the used string differ. */
			rc = fm_err(c, it->line, ekey, "the path contains a NUL byte");
		} else {
			for (size_t j = 0; j < it->len; j++) {
				unsigned char ch = (unsigned char)it->s[j];
				if (ch < 0x20 || ch == 0x7f) {
					rc = fm_err(c, it->line, ekey,
						  "the path \"%s\" contains a control character; write a plain path",
						  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
					break;
				}
			}
		}
		if (rc == 0 && it->s[0] == '~')
			rc = fm_err(c, it->line, ekey,
				  "\"%s\": ~ is not expanded; write the path relative to the project root or absolute",
				  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
		if (rc == 0 && is_fs_root(it->s))
			rc = fm_err(c, it->line, ekey,
				  "\"%s\" is the whole file system; list the directories that are needed",
				  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
		if (rc == 0)
			v[i] = xstrdup(it->s);
		if (rc < 0) {
			strv_free(v, n->n);
			free(l);
			return rc;
		}
		l[i] = it->line;
	}
	*out = v;
	*nout = n->n;
	*lines = l;
	return 0;
}

int perm_parse(const struct pctx *c, const struct ynode *m, struct policy *p,
			     struct lines *ln)
{
	char key[256], buf[SHOW_MAX * 4 + 40];
	int rc = fm_want_mapping(c, m, "permissions", PERM_KEYS);
	if (rc < 0)
		return rc;

	for (size_t i = 0; i < m->n; i += 2) {
		const struct ynode *k = m->kids[i], *v = m->kids[i + 1];
		rc = fm_mapping_key(c, m, i, "permissions", key, sizeof key);
		if (rc < 0)
			return rc;
		if (fm_eq(k, "fs_read")) {
			int b = fm_bool(v);
			if (b >= 0) {
				p->fs_read = b ? FS_READ_ROOT : FS_READ_WORKSPACE;
				continue;
			}
			if (v->kind != Y_SEQ || v->tagged) {
				if (v->tagged)
					return fm_tag_error(c, v, key);
				return fm_err(c, v->line, key,
					    "expected true (the project, read-only), false (the workspace only) or a list of paths, got %s",
					    fm_show(v, buf, sizeof buf));
			}
			rc = want_path_list(c, v, key, false, &p->fs_read_paths,
					    &p->n_fs_read_paths, &ln->read);
			if (rc < 0)
				return rc;
			/* [] grants nothing beyond the workspace: that is false. */
			p->fs_read = p->n_fs_read_paths ? FS_READ_LIST : FS_READ_WORKSPACE;
		} else if (fm_eq(k, "fs_write")) {
			if (v->tagged)
				return fm_tag_error(c, v, key);
			if (fm_eq(v, "workspace")) {
				p->fs_write = FS_WRITE_WORKSPACE;
				continue;
			}
			if (fm_bool(v) == 0) {
				p->fs_write = FS_WRITE_NONE;
				continue;
			}
			if (fm_bool(v) == 1)
				/* true would have to mean "the whole project",
				 * where code could rewrite this SKILL.md,
				 * .git/hooks and agent settings. */
				return fm_err(c, v->line, key,
					    "true is not accepted; write \"workspace\", false, or a list of directories inside the project");
			if (v->kind != Y_SEQ)
				return fm_err(c, v->line, key,
					    "expected \"workspace\", false or a list of directories inside the project, got %s",
					    fm_show(v, buf, sizeof buf));
			rc = want_path_list(c, v, key, true, &p->fs_write_paths,
					    &p->n_fs_write_paths, &ln->write);
			if (rc < 0)
				return rc;
			/* [] makes nothing writable: that is false. */
			p->fs_write = p->n_fs_write_paths ? FS_WRITE_LIST : FS_WRITE_NONE;
		} else if (fm_eq(k, "fs_read_deny")) {
			/* Globs relative to ROOT, added to the built-in list of
			 * secrets; checked like paths, then: relative, no "..". */
			unsigned *lines = NULL;
			if (v->tagged)
				return fm_tag_error(c, v, key);
			if (v->kind != Y_SEQ)
				return fm_err(c, v->line, key,
					    "expected a list of globs relative to the project root (e.g. [\"secrets/*\", \"*.sqlite\"]), got %s",
					    fm_show(v, buf, sizeof buf));
			strv_free(p->fs_read_deny, p->n_fs_read_deny);
			p->fs_read_deny = NULL;
			p->n_fs_read_deny = 0;
			rc = want_path_list(c, v, key, false, &p->fs_read_deny, &p->n_fs_read_deny, &lines);
			for (size_t j = 0; rc == 0 && j < p->n_fs_read_deny; j++) {
				const char *g = p->fs_read_deny[j];
				char ekey[300];
				snprintf(ekey, sizeof ekey, "%s[%zu]", key, j);
				if (g[0] == '/')
					rc = fm_err(c, lines[j], ekey,
						  "\"%s\" is absolute; write a glob relative to the project root, e.g. \"%s\"",
						  esc_bytes(buf, sizeof buf, g, strlen(g), SHOW_MAX), g + strspn(g, "/"));
				else if (!strcmp(g, "..") || !strncmp(g, "../", 3) || strstr(g, "/../") ||
					 (strlen(g) >= 3 && !strcmp(g + strlen(g) - 3, "/..")))
					rc = fm_err(c, lines[j], ekey,
						  "\"%s\" leaves the project root; outside it nothing is readable anyway",
						  esc_bytes(buf, sizeof buf, g, strlen(g), SHOW_MAX));
			}
			free(lines);
			if (rc < 0)
				return rc;
		} else if (fm_eq(k, "shell_exec")) {
			rc = fm_want_bool(c, v, key, &p->shell_exec);
			if (rc < 0)
				return rc;
		} else if (fm_eq(k, "net_access")) {
			rc = fm_want_bool(c, v, key, &p->net_access);
			if (rc < 0)
				return rc;
		} else {
			return fm_err(c, k->line, key, "unknown key; accepted keys: " PERM_KEYS);
		}
	}
	return 0;
}

/* ---- line records for policy_resolve ---------------------------------- */

static unsigned line_lookup(const struct policy *p, int which, size_t i)
{
	const unsigned *lines = which ? p->fs_write_lines : p->fs_read_lines;
	size_t n = which ? p->n_fs_write_paths : p->n_fs_read_paths;
	return lines && i < n ? lines[i] : 0;
}

/* Names directly under ROOT that fs_write may never cover: a file written
 * there runs outside the sandbox later (git hooks; agent settings with
 * hooks or MCP servers; editor tasks) or rewrites the agents' skills,
 * this policy included. */
static const char *const protected_names[] = {
	".git", ".agents", ".claude", ".codex", ".cursor", ".windsurf", ".vscode", NULL
};

__attribute__((format(printf, 6, 7)))
static int rerr(const struct policy *p, struct err *e, int which, size_t i, int code,
		const char *fmt, ...)
{
	char msg[600], emsg[700];
	unsigned line = line_lookup(p, which, i);
	const char *key = which ? "permissions.fs_write" : "permissions.fs_read";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* The paths in it come from the file system (names, link targets). */
	esc_bytes(emsg, sizeof emsg, msg, strlen(msg), sizeof msg);
	if (line)
		return err_set(e, code, "%s:%u: %s[%zu]: %s", p->source, line, key, i, emsg);
	return err_set(e, code, "%s: %s[%zu]: %s", p->source, key, i, emsg);
}

/* path joined to root and its "." and ".." taken away, without looking at
 * the file system (what it names when it does not exist yet). */
static void lexical(const char *root, const char *path, char *out, size_t n)
{
	char buf[PATH_MAX * 2];
	snprintf(buf, sizeof buf, "%s/%s", path[0] == '/' ? "" : root, path);
	size_t len = 0;
	out[0] = '\0';
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			char *sl = strrchr(out, '/');
			len = sl ? (size_t)(sl - out) : 0;
			out[len] = '\0';
			continue;
		}
		int w = snprintf(out + len, n - len, "/%s", c);
		if (w < 0 || (size_t)w >= n - len)
			break;
		len += (size_t)w;
	}
	if (!out[0])
		snprintf(out, n, "/");
}

/* Resolves one entry to an absolute, canonical path in *out.  An entry
 * that does not exist is -ENOENT; "workspace" (ROOT/workspace) is then the
 * default workspace, which serving creates (as it does for the scalar
 * fs_write: workspace), and resolves to it. */
static int resolve_one(const struct policy *p, struct err *e, int which, size_t i,
		       const char *root, const char *path, char **out)
{
	const char *ep = path; /* rerr escapes the message */
	char joined[PATH_MAX];
	int n;

	if (path[0] == '/')
		n = snprintf(joined, sizeof joined, "%s", path);
	else
		n = snprintf(joined, sizeof joined, "%s/%s", root, path);
	if (n < 0 || (size_t)n >= sizeof joined)
		return rerr(p, e, which, i, -ENAMETOOLONG, "\"%s\": the path is too long", ep);
	*out = realpath(joined, NULL);
	if (!*out) {
		int err = errno;
		char lex[PATH_MAX], ws[PATH_MAX + 16];
		lexical(root, path, lex, sizeof lex);
		snprintf(ws, sizeof ws, "%s/workspace", root);
		if (err == ENOENT && strcmp(lex, ws) == 0) {
			*out = xstrdup(ws);
			return 0;
		}
		if (err == ENOENT || err == ENOTDIR)
			return rerr(p, e, which, i, -ENOENT,
				    "\"%s\" does not exist (looked for %s); create it or remove it from the list",
				    ep, joined);
		return rerr(p, e, which, i, -err, "\"%s\": cannot resolve %s: %s", ep, joined,
			    strerror(err));
	}
	/* After symlinks and "..": "/" reached through a link or
	 * "../../../.." is still the whole file system. */
	if (strcmp(*out, "/") == 0) {
		free(*out);
		*out = NULL;
		return rerr(p, e, which, i, -EINVAL,
			    "\"%s\" resolves to /, the whole file system; list the directories that are needed",
			    ep);
	}
	return 0;
}

/* Checks one canonical fs_write directory.  Realpath has already followed
 * symlinks, so a link inside ROOT that points at ~/.ssh or /etc is judged
 * by where it leads; the jail must use the resolved path (not the name)
 * so that swapping the link afterwards changes nothing. */
static int check_write_dir(const struct policy *p, struct err *e, size_t i, const char *rroot,
			   const char *src_real, const char *path, const char *real)
{
	const char *ep = path; /* rerr escapes the message */
	size_t rl = strlen(rroot);
	const char *rel;
	struct stat st;

	/* Missing only when it is the workspace, which serving creates. */
	if (stat(real, &st) < 0 ? errno != ENOENT : !S_ISDIR(st.st_mode))
		return rerr(p, e, 1, i, -ENOTDIR,
			    "\"%s\" (%s) is not a directory; list directories", ep, real);
	if (strncmp(real, rroot, rl) != 0 || real[rl] != '/')
		return rerr(p, e, 1, i, -EPERM,
			    strcmp(real, rroot) == 0
				    ? "\"%s\" is the project root itself (%s); list directories inside it, such as workspace"
				    : "\"%s\" resolves to %s, outside the project root %s; list directories inside the project",
			    ep, real, rroot);
	rel = real + rl + 1;
	for (const char *const *pn = protected_names; *pn; pn++) {
		size_t l = strlen(*pn);
		if (strncmp(rel, *pn, l) == 0 && (rel[l] == '\0' || rel[l] == '/'))
			return rerr(p, e, 1, i, -EPERM,
				    "\"%s\" is inside %s/%s, where written files would act outside the sandbox; list another directory",
				    ep, rroot, *pn);
	}
	if (src_real) {
		size_t l = strlen(real);
		if (strncmp(src_real, real, l) == 0 && src_real[l] == '/')
			return rerr(p, e, 1, i, -EPERM,
				    "\"%s\" contains the policy file %s, which sandboxed code could then rewrite; list another directory",
				    ep, src_real);
	}
	return 0;
}

int policy_resolve(struct policy *p, const char *root, struct err *e)
{
	char *rroot, *src_real = NULL;
	char **nr = NULL, **nw = NULL;
	int rc = 0;

	if (!p || !root)
		return err_set(e, -EINVAL, "policy_resolve: no policy or root");
	rroot = realpath(root, NULL);
	if (!rroot)
		return err_sys(e, -errno, "project root %s", root);
	/* With ROOT = "/", fs_read: true would be the whole file system. */
	if (strcmp(rroot, "/") == 0) {
		rc = err_set(e, -EINVAL, "the project root cannot be /; pass --root with the project directory");
		goto out;
	}
	if (p->source)
		src_real = realpath(p->source, NULL); /* NULL for "<built-in SKILL.md>" */

	/* Resolve into new arrays, then swap: on error the policy is left as
	 * it was, never half-resolved. */
	if (p->fs_read == FS_READ_LIST && p->n_fs_read_paths) {
		nr = xcalloc(p->n_fs_read_paths, sizeof *nr);
		for (size_t i = 0; i < p->n_fs_read_paths; i++) {
			rc = resolve_one(p, e, 0, i, rroot, p->fs_read_paths[i], &nr[i]);
			if (rc < 0)
				goto out;
		}
	}
	/* An entry that is only missing is reported after every entry that
	 * could never be written (outside ROOT, a protected name): otherwise
	 * the user creates the directory only to hear of the real error. */
	struct err missing = { 0 };
	if (p->fs_write == FS_WRITE_LIST && p->n_fs_write_paths) {
		nw = xcalloc(p->n_fs_write_paths, sizeof *nw);
		for (size_t i = 0; i < p->n_fs_write_paths; i++) {
			const char *w = p->fs_write_paths[i];
			struct err one = { 0 };
			rc = resolve_one(p, &one, 1, i, rroot, w, &nw[i]);
			if (rc == -ENOENT) {
				char lex[PATH_MAX];
				lexical(rroot, w, lex, sizeof lex);
				if (!path_under(lex, rroot) || strcmp(lex, rroot) == 0) {
					rc = rerr(p, e, 1, i, -EPERM,
						  "\"%s\" is outside the project root %s (it would be %s); list directories inside the project",
						  w, rroot, lex);
					goto out;
				}
				if (!missing.code)
					missing = one;
				continue;
			}
			if (rc == 0)
				rc = check_write_dir(p, &one, i, rroot, src_real, w, nw[i]);
			if (rc < 0) {
				*e = one;
				goto out;
			}
		}
		if (missing.code) {
			*e = missing;
			rc = missing.code;
			goto out;
		}
	}
	/* Swap the strings in place: the arrays (and their line records)
	 * stay the same. */
	if (nr)
		for (size_t i = 0; i < p->n_fs_read_paths; i++) {
			free(p->fs_read_paths[i]);
			p->fs_read_paths[i] = nr[i];
			nr[i] = NULL;
		}
	if (nw)
		for (size_t i = 0; i < p->n_fs_write_paths; i++) {
			free(p->fs_write_paths[i]);
			p->fs_write_paths[i] = nw[i];
			nw[i] = NULL;
		}
out:
	if (nr)
		strv_free(nr, p->n_fs_read_paths);
	if (nw)
		strv_free(nw, p->n_fs_write_paths);
	free(src_real);
	free(rroot);
	return rc;
}
