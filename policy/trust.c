/* Workspace trust: the ceiling on an unapproved project policy, and the
 * user's store of approved files (see trust.h). */
#include "trust.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sha2.h>

#include "../common/escape.h"
#include "../common/util.h"
#include "../common/userdir.h"
#include "../common/util.h"

#define STORE_NAME "trusted"
#define STORE_MAX (1u << 20) /* thousands of approvals */
#define STORE_HEADER \
	"# python-sandbox-mcp: what the user approved on this machine, one per line:\n" \
	"# a SHA-256, a space, the project's root, a tab, \"skill\" (its policy file) or\n" \
	"# \"venv\" (its virtual environment), a tab, the real path of that file or\n" \
	"# directory.  Change it with python-sandbox-mcp --trust / --untrust.\n"

void trust_report_free(struct trust_report *r)
{
	if (!r)
		return;
	free(r->text);
	r->text = NULL;
	r->keys = 0;
}

/* path is dir, or lies beneath it (both canonical). */
static bool under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return strncmp(path, dir, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

/* Writes s escaped (esc_bytes): paths come from the file system and the
 * policy file, and a newline in one must not forge a line of the note the
 * agent reads or of the terminal's output. */
static void put_clean(FILE *f, const char *s)
{
	size_t n = strlen(s), size = n * 4 + 8;
	char *buf = xmalloc(size);
	fputs(esc_bytes(buf, size, s, n, n), f);
	free(buf);
}

char *trust_clean(const char *s)
{
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	put_clean(f, s ? s : "");
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* ---- the ceiling ----------------------------------------------------- */

static bool ceiling_reads(const struct policy *c, const char *root, const char *ws, const char *path)
{
	if (under(path, ws))
		return true; /* the workspace is readable in every mode */
	switch (c->fs_read) {
	case FS_READ_ROOT:
		return under(path, root);
	case FS_READ_WORKSPACE:
		return false;
	case FS_READ_LIST:
		for (size_t i = 0; i < c->n_fs_read_paths; i++)
			if (under(path, c->fs_read_paths[i]))
				return true;
		return false;
	}
	return false;
}

static bool ceiling_writes(const struct policy *c, const char *ws, const char *dir)
{
	switch (c->fs_write) {
	case FS_WRITE_WORKSPACE:
		return under(dir, ws);
	case FS_WRITE_NONE:
		return false;
	case FS_WRITE_LIST:
		for (size_t i = 0; i < c->n_fs_write_paths; i++)
			if (under(dir, c->fs_write_paths[i]))
				return true;
		return false;
	}
	return false;
}

/* Keeps the entries of v for which keep() holds; the others are reported.
 * Returns the new count (the array is compacted in place when apply). */
static size_t filter_paths(char **v, size_t n, bool apply, FILE *f, const char *key,
			   const char *why, bool (*keep)(const void *, const char *), const void *arg)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (keep(arg, v[i])) {
			if (apply)
				v[o] = v[i];
			o++;
			continue;
		}
		fprintf(f, "- %s: ", key);
		put_clean(f, v[i]);
		fprintf(f, " (%s)\n", why);
		if (apply) {
			free(v[i]);
			v[i] = NULL;
		}
	}
	return o;
}

struct fs_ctx {
	const struct policy *c;
	const char *root, *ws;
};

static bool keep_read(const void *arg, const char *path)
{
	const struct fs_ctx *x = arg;
	return ceiling_reads(x->c, x->root, x->ws, path);
}

static bool keep_write(const void *arg, const char *dir)
{
	const struct fs_ctx *x = arg;
	return ceiling_writes(x->c, x->ws, dir);
}

static int copy_paths(char ***out, size_t *nout, char *const *v, size_t n, bool (*keep)(const void *, const char *),
		      const void *arg)
{
	char **w = n ? xcalloc(n, sizeof *w) : NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		if (keep(arg, v[i]))
			w[o++] = xstrdup(v[i]);
	if (o == 0) {
		free(w);
		w = NULL;
	}
	*out = w;
	*nout = o;
	return 0;
}

/* A project's "true" (all of ROOT) under a ceiling that is a list: what
 * both allow is the ceiling's entries inside ROOT. */
static bool in_root(const void *arg, const char *path)
{
	const struct fs_ctx *x = arg;
	return under(path, x->root);
}

/* The project's "workspace" under a ceiling that is a list: the ceiling's
 * directories inside the workspace. */
static bool in_ws(const void *arg, const char *dir)
{
	const struct fs_ctx *x = arg;
	return under(dir, x->ws);
}

static int cut_fs_read(struct policy *p, const struct fs_ctx *x, bool apply, FILE *f, unsigned *keys)
{
	const struct policy *c = x->c;
	switch (p->fs_read) {
	case FS_READ_WORKSPACE:
		return 0;
	case FS_READ_ROOT:
		if (c->fs_read == FS_READ_ROOT)
			return 0;
		*keys |= TRUST_FS_READ;
		fputs("- fs_read: true (all of the project)\n", f);
		if (!apply)
			return 0;
		if (c->fs_read == FS_READ_LIST) {
			char **v;
			size_t n;
			if (copy_paths(&v, &n, c->fs_read_paths, c->n_fs_read_paths, in_root, x) < 0)
				return -ENOMEM;
			p->fs_read_paths = v;
			p->n_fs_read_paths = n;
			free(p->fs_read_lines); /* no longer the file's entries */
			p->fs_read_lines = NULL;
		}
		p->fs_read = p->n_fs_read_paths ? FS_READ_LIST : FS_READ_WORKSPACE;
		return 0;
	case FS_READ_LIST: {
		size_t n = filter_paths(p->fs_read_paths, p->n_fs_read_paths, apply, f, "fs_read",
					c->fs_read == FS_READ_ROOT ? "outside the project" : "beyond the built-in policy's fs_read",
					keep_read, x);
		if (n == p->n_fs_read_paths)
			return 0;
		*keys |= TRUST_FS_READ;
		if (apply) {
			p->n_fs_read_paths = n;
			free(p->fs_read_lines); /* filtered: the lines no longer match */
			p->fs_read_lines = NULL;
			if (n == 0) {
				free(p->fs_read_paths);
				p->fs_read_paths = NULL;
				p->fs_read = FS_READ_WORKSPACE;
			}
		}
		return 0;
	}
	}
	return 0;
}

/* fs_read_deny: the tighter of two deny lists is their union.  The
 * built-in secrets (secret_names.c) apply whatever the policy says; a
 * ceiling that denies more adds its entries here. */
static int add_deny(struct policy *p, const struct policy *c, bool apply, FILE *f, unsigned *keys)
{
	for (size_t i = 0; i < c->n_fs_read_deny; i++) {
		bool have = false;
		for (size_t j = 0; j < p->n_fs_read_deny && !have; j++)
			have = strcmp(p->fs_read_deny[j], c->fs_read_deny[i]) == 0;
		if (have)
			continue;
		fputs("- fs_read_deny without ", f);
		put_clean(f, c->fs_read_deny[i]);
		fputs(" (the built-in policy denies it)\n", f);
		*keys |= TRUST_FS_READ;
		if (!apply)
			continue;
		char **v = xreallocarray(p->fs_read_deny, p->n_fs_read_deny + 1, sizeof *v);
		p->fs_read_deny = v;
		v[p->n_fs_read_deny++] = xstrdup(c->fs_read_deny[i]);
	}
	return 0;
}

static int cut_fs_write(struct policy *p, const struct fs_ctx *x, bool apply, FILE *f, unsigned *keys)
{
	const struct policy *c = x->c;
	switch (p->fs_write) {
	case FS_WRITE_NONE:
		return 0;
	case FS_WRITE_WORKSPACE:
		if (c->fs_write == FS_WRITE_WORKSPACE || ceiling_writes(c, x->ws, x->ws))
			return 0;
		*keys |= TRUST_FS_WRITE;
		fputs("- fs_write: workspace\n", f);
		if (!apply)
			return 0;
		if (c->fs_write == FS_WRITE_LIST) {
			char **v;
			size_t n;
			if (copy_paths(&v, &n, c->fs_write_paths, c->n_fs_write_paths, in_ws, x) < 0)
				return -ENOMEM;
			p->fs_write_paths = v;
			p->n_fs_write_paths = n;
			free(p->fs_write_lines); /* no longer the file's entries */
			p->fs_write_lines = NULL;
		}
		p->fs_write = p->n_fs_write_paths ? FS_WRITE_LIST : FS_WRITE_NONE;
		return 0;
	case FS_WRITE_LIST: {
		size_t n = filter_paths(p->fs_write_paths, p->n_fs_write_paths, apply, f, "fs_write",
					c->fs_write == FS_WRITE_WORKSPACE ? "outside the workspace" : "beyond the built-in policy's fs_write",
					keep_write, x);
		if (n == p->n_fs_write_paths)
			return 0;
		*keys |= TRUST_FS_WRITE;
		if (apply) {
			p->n_fs_write_paths = n;
			free(p->fs_write_lines); /* filtered: the lines no longer match */
			p->fs_write_lines = NULL;
			if (n == 0) {
				free(p->fs_write_paths);
				p->fs_write_paths = NULL;
				p->fs_write = FS_WRITE_NONE;
			}
		}
		return 0;
	}
	}
	return 0;
}

static void cut_num(double *v, double ceil, const char *key, bool apply, FILE *f, unsigned *keys)
{
	if (!(*v > ceil))
		return;
	fprintf(f, "- limits.%s: %g (at most %g without approval)\n", key, *v, ceil);
	*keys |= TRUST_LIMITS;
	if (apply)
		*v = ceil;
}

static void cut_long(long *v, long ceil, const char *key, bool apply, FILE *f, unsigned *keys)
{
	if (*v <= ceil)
		return;
	fprintf(f, "- limits.%s: %ld (at most %ld without approval)\n", key, *v, ceil);
	*keys |= TRUST_LIMITS;
	if (apply)
		*v = ceil;
}

int trust_ceiling(struct policy *p, const struct policy *ceiling, const char *root,
		  const char *workspace, bool apply, struct trust_report *r, struct err *e)
{
	struct fs_ctx x = { ceiling, root, workspace };
	struct policy_limits *L = &p->limits;
	const struct policy_limits *C = &ceiling->limits;
	char *text = NULL;
	size_t size = 0;
	unsigned keys = 0;
	FILE *f;
	int rc;

	r->keys = 0;
	r->text = NULL;
	f = open_memstream(&text, &size);
	if (!f)
		return err_set(e, -ENOMEM, "out of memory");
	if (p->net_access && !ceiling->net_access) {
		fputs("- net_access: true\n", f);
		keys |= TRUST_NET_ACCESS;
		if (apply)
			p->net_access = false;
	}
	if (p->shell_exec && !ceiling->shell_exec) {
		fputs("- shell_exec: true\n", f);
		keys |= TRUST_SHELL_EXEC;
		if (apply)
			p->shell_exec = false;
	}
	rc = cut_fs_read(p, &x, apply, f, &keys);
	if (rc == 0)
		rc = add_deny(p, ceiling, apply, f, &keys);
	if (rc == 0)
		rc = cut_fs_write(p, &x, apply, f, &keys);
	/* Both timeouts take the smaller value: min(a, b) <= min(a', b')
	 * when a <= a' and b <= b', so timeout_s stays within
	 * max_timeout_s. */
	cut_num(&L->timeout_s, C->timeout_s, "timeout_s", apply, f, &keys);
	cut_num(&L->max_timeout_s, C->max_timeout_s, "max_timeout_s", apply, f, &keys);
	cut_long(&L->memory_mb, C->memory_mb, "memory_mb", apply, f, &keys);
	cut_long(&L->max_output_chars, C->max_output_chars, "max_output_chars", apply, f, &keys);
	cut_long(&L->max_processes, C->max_processes, "max_processes", apply, f, &keys);
	cut_long(&L->max_file_mb, C->max_file_mb, "max_file_mb", apply, f, &keys);
	cut_long(&L->max_sessions, C->max_sessions, "max_sessions", apply, f, &keys);
	cut_long(&L->max_workspace_mb, C->max_workspace_mb, "max_workspace_mb", apply, f, &keys);
	cut_long(&L->persist_mb, C->persist_mb, "persist_mb", apply, f, &keys);
	if (fclose(f) != 0 || rc < 0) {
		free(text);
		return err_set(e, -ENOMEM, "out of memory");
	}
	if (keys == 0) {
		free(text);
		text = NULL;
	}
	r->keys = keys;
	r->text = text;
	return 0;
}

bool trust_key_withheld(unsigned keys, const char *name)
{
	static const struct {
		const char *name;
		unsigned bit;
	} map[] = {
		{ "fs_read", TRUST_FS_READ },       { "fs_write", TRUST_FS_WRITE },
		{ "shell_exec", TRUST_SHELL_EXEC }, { "net_access", TRUST_NET_ACCESS },
		{ "limits", TRUST_LIMITS },
	};
	for (size_t i = 0; name && i < sizeof map / sizeof map[0]; i++)
		if (strcmp(name, map[i].name) == 0)
			return (keys & map[i].bit) != 0;
	return false;
}

/* ---- hashes and the command ------------------------------------------ */

void trust_hash(const char *text, size_t len, char hex[65])
{
	SHA2_CTX ctx;
	SHA256Init(&ctx);
	SHA256Update(&ctx, (const uint8_t *)text, len);
	SHA256End(&ctx, hex);
}

static void sh_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

char *trust_command(const char *root, const char *skill, bool skill_given)
{
	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	fputs("python-sandbox-mcp --trust --root ", f);
	sh_quote(f, root);
	if (skill_given && skill) {
		fputs(" --skill ", f);
		sh_quote(f, skill);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* ---- the store ------------------------------------------------------- */

int trust_store_path(char *out, size_t size, struct err *e)
{
	char dir[PATH_MAX];
	int rc = userdir_config_path(dir, sizeof dir, e);
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(out, size, "%s/" STORE_NAME, dir) >= size)
		return err_set(e, -ENAMETOOLONG, "the config directory path is too long; set a shorter XDG_CONFIG_HOME");
	return 0;
}

/* The canonical form of a path whose last components may not exist yet:
 * realpath of the longest existing prefix, then the rest. */
static int canon_prefix(const char *path, char *out, size_t size)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (;;) {
		char *slash;
		char *real = realpath(buf, NULL);
		if (real) {
			int w = snprintf(out, size, "%s%s", strcmp(real, "/") == 0 ? "" : real, path + strlen(buf));
			free(real);
			return w < 0 || (size_t)w >= size ? -ENAMETOOLONG : 0;
		}
		slash = strrchr(buf, '/');
		if (!slash || slash == buf) {
			if ((size_t)snprintf(out, size, "%s", path) >= size)
				return -ENAMETOOLONG;
			return 0;
		}
		*slash = '\0';
	}
}

/* Opens the store's directory (creating it when asked), refusing one the
 * sandboxed code could write: inside ROOT or the workspace, a file written
 * there by the code (fs_write lists name directories inside ROOT) would
 * approve whatever policy it likes.  1: it does not exist (and !create). */
static int store_open(struct userdir *ud, const char *root, const char *ws, bool create, struct err *e)
{
	char dir[PATH_MAX], canon[PATH_MAX];
	int rc = userdir_config_path(dir, sizeof dir, e);
	if (rc < 0)
		return rc;
	if (canon_prefix(dir, canon, sizeof canon) < 0)
		return err_set(e, -ENAMETOOLONG, "%s: the path is too long", dir);
	if ((root && under(canon, root)) || (ws && under(canon, ws)))
		return err_set(e, -EPERM,
			       "the approval store %s/" STORE_NAME " lies inside the project (%s), where the project or the sandboxed code could write it; "
			       "set XDG_CONFIG_HOME (or HOME) to a directory outside the project",
			       canon, ws && under(canon, ws) ? ws : root);
	rc = userdir_open(ud, canon, create, e);
	if (rc < 0)
		err_prefix(e, "the approval store is refused");
	return rc;
}

/* One line of the store.  A line written by an earlier version, "HEX
 * PATH", names a policy file only, for no root in particular: it is still
 * believed where it is still right, for a ROOT that holds the file (see
 * matches).  Every line written now is "HEX ROOT\tKIND\tPATH". */
struct entry {
	char hex[65];
	const char *root;    /* NULL: a line of the earlier form */
	enum trust_kind kind;
	const char *path;    /* into the buffer */
};

static const char *const kind_names[] = { [TRUST_KIND_SKILL] = "skill", [TRUST_KIND_VENV] = "venv" };

/* Splits "ROOT\tKIND\tPATH" (or the earlier "PATH") into e; false for a
 * line that approves nothing. */
static bool parse_fields(char *s, struct entry *en)
{
	char *t1 = strchr(s, '\t');
	en->root = NULL;
	en->kind = TRUST_KIND_SKILL;
	en->path = s;
	if (!t1)
		return true;
	char *t2 = strchr(t1 + 1, '\t');
	if (!t2)
		return false;
	*t1 = *t2 = '\0';
	if (t2[1] != '/')
		return false;
	for (size_t k = 0; k < N_ELEMENTS(kind_names); k++)
		if (strcmp(t1 + 1, kind_names[k]) == 0) {
			en->root = s;
			en->kind = (enum trust_kind)k;
			en->path = t2 + 1;
			return true;
		}
	return false;
}

/* Parses the store: "HEX FIELDS" lines; comments and malformed lines are
 * skipped (they were not written by this program, and approve nothing). */
static size_t parse_store(char *buf, struct entry **out)
{
	size_t n = 0, cap = 0;
	struct entry *v = NULL;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		size_t l = strlen(line);
		bool hex = l > 66 && line[64] == ' ' && line[65] == '/';
		for (size_t i = 0; hex && i < 64; i++)
			hex = (line[i] >= '0' && line[i] <= '9') || (line[i] >= 'a' && line[i] <= 'f');
		if (hex) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				v = xreallocarray(v, nc, sizeof *v);
				cap = nc;
			}
			memcpy(v[n].hex, line, 64);
			v[n].hex[64] = '\0';
			if (parse_fields(line + 65, &v[n]))
				n++;
		}
		line = nl ? nl + 1 : NULL;
	}
	*out = v;
	return n;
}

static int store_load(struct userdir *ud, char **buf, struct entry **v, size_t *n, struct err *e)
{
	size_t len;
	int rc = userdir_read(ud, STORE_NAME, STORE_MAX, buf, &len, e);
	*v = NULL;
	*n = 0;
	if (rc < 0) {
		err_prefix(e, "the approval store is refused");
		return rc;
	}
	if (rc == 1)
		return 0;
	*n = parse_store(*buf, v);
	return 0;
}

/* Whether the entry names (kind, root, path).  A line of the earlier form
 * approved a policy file by its real path alone; it stays right for a ROOT
 * that holds that file, and only there.  Attack: project B, never
 * approved, makes its SKILL.md a symlink to project A's approved one (which
 * grants network and programs); its real path is A's, and the earlier
 * store approved it for B too. */
static bool matches(const struct entry *en, enum trust_kind kind, const char *root, const char *path)
{
	if (en->kind != kind || strcmp(en->path, path) != 0)
		return false;
	if (en->root)
		return strcmp(en->root, root) == 0;
	return kind == TRUST_KIND_SKILL && under(path, root);
}

int trust_lookup(enum trust_kind kind, const char *root, const char *path, const char *hex,
		 const char *workspace, struct err *e)
{
	struct userdir ud;
	struct entry *v;
	char *buf = NULL;
	size_t n;
	int rc = store_open(&ud, root, workspace, false, e);
	if (rc == 1)
		return 0; /* no store: nothing approved */
	if (rc < 0)
		return rc;
	rc = store_load(&ud, &buf, &v, &n, e);
	userdir_close(&ud);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++)
		if (matches(&v[i], kind, root, path) && strcmp(v[i].hex, hex) == 0)
			rc = 1;
	free(v);
	free(buf);
	return rc;
}

static int check_path(const char *what, const char *path, struct err *e)
{
	/* One line per entry, tabs between fields: a path with a newline
	 * or a tab would forge a line or a field. */
	for (const char *s = path; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return err_set(e, -EINVAL, "the path of the %s contains a control character; rename it first", what);
	if (path[0] != '/')
		return err_set(e, -EINVAL, "the path of the %s must be absolute", what);
	return 0;
}

/* Rewrites the store without the entries for (kind, root, path), any path
 * when path is NULL, plus (kind, root, path, hex) when hex is given.
 * Returns the number of entries removed. */
static int store_update(enum trust_kind kind, const char *root, const char *path, const char *hex,
			const char *workspace, struct err *e)
{
	struct userdir ud;
	struct entry *v = NULL;
	char *buf = NULL, *out = NULL;
	size_t n = 0, size = 0;
	int removed = 0, rc;
	FILE *f;

	if ((rc = check_path("project root", root, e)) < 0 ||
	    (path && (rc = check_path(kind == TRUST_KIND_VENV ? "virtual environment" : "policy file", path, e)) < 0))
		return rc;
	rc = store_open(&ud, root, workspace, hex != NULL, e);
	if (rc == 1)
		return 0; /* nothing to remove */
	if (rc < 0)
		return rc;
	rc = store_load(&ud, &buf, &v, &n, e);
	if (rc < 0)
		goto out;
	f = open_memstream(&out, &size);
	if (!f) {
		rc = err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	fputs(STORE_HEADER, f);
	for (size_t i = 0; i < n; i++) {
		const struct entry *en = &v[i];
		if (matches(en, kind, root, path ? path : en->path)) {
			/* An earlier line for this path goes too, even when
			 * a new approval replaces it: it could still approve
			 * another version of the file. */
			removed++;
			continue;
		}
		if (en->root)
			fprintf(f, "%s %s\t%s\t%s\n", en->hex, en->root, kind_names[en->kind], en->path);
		else
			fprintf(f, "%s %s\n", en->hex, en->path);
	}
	if (hex)
		fprintf(f, "%s %s\t%s\t%s\n", hex, root, kind_names[kind], path);
	if (fclose(f) != 0) {
		rc = err_set(e, -ENOMEM, "out of memory");
		goto out;
	}
	rc = userdir_write(&ud, STORE_NAME, out, size, e);
	if (rc == 0)
		rc = removed;
out:
	free(out);
	free(v);
	free(buf);
	userdir_close(&ud);
	return rc;
}

int trust_approve(enum trust_kind kind, const char *root, const char *path, const char *hex,
		  const char *workspace, struct err *e)
{
	int rc = store_update(kind, root, path, hex, workspace, e);
	return rc < 0 ? rc : 0;
}

int trust_revoke(enum trust_kind kind, const char *root, const char *path, const char *workspace, struct err *e)
{
	return store_update(kind, root, path, NULL, workspace, e);
}

/* ---- the decision at start-up ------------------------------------------ */

/* The policy's part of the note: what was withheld and how to approve. */
static void note_policy(const struct trust_state *t, FILE *f)
{
	const char *source = t->source ? t->source : t->path;
	fputs("this project's policy (", f);
	put_clean(f, source);
	if (strcmp(source, t->path) != 0) {
		/* A symlink: the approval is for this project and the file it
		 * leads to, never for another project's approval of it. */
		fputs(", a symlink to ", f);
		put_clean(f, t->path);
	}
	fputs(") asks for more than the built-in policy allows and is not approved on this machine "
	      "for this project, so the sandbox withholds these and keeps the built-in policy's values for them:\n", f);
	fputs(t->asked.text, f);
	fputs("The rest of the project's policy applies.\n", f);
}

/* The venv's part: the interpreter runs without it. */
static void note_venv(const struct trust_state *t, FILE *f)
{
	fputs("this project's virtual environment (", f);
	put_clean(f, t->venv.path);
	fputs(") is not approved on this machine, so the interpreter runs without it: its packages cannot be "
	      "imported and none of its start-up files (*.pth, sitecustomize) run. A project's venv is the "
	      "project's code.", f);
	if (t->venv.why[0]) {
		fputc(' ', f);
		put_clean(f, t->venv.why);
	}
	fputc('\n', f);
}

static char *make_note(const struct trust_state *t)
{
	char *out = NULL;
	size_t size = 0;
	bool venv = t->venv.path && !t->venv.approved;
	FILE *f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	if (t->withheld)
		note_policy(t, f);
	if (venv)
		note_venv(t, f);
	fprintf(f, "To %s, the user reviews and approves %s by running, in a terminal:\n  ",
		t->withheld && venv ? "grant them and use the venv" : t->withheld ? "grant them" : "use it",
		t->withheld && venv ? "the policy file and the venv" : t->withheld ? "this exact file" : "the venv");
	put_clean(f, t->command);
	fputs("\nthen restarts this server. Any change to ", f);
	fputs(t->withheld && venv ? "either" : t->withheld ? "the file" : "the venv's pyvenv.cfg or start-up files", f);
	fputs(" withdraws the approval.\n", f);
	if (t->store_err[0]) {
		fputs("The approval store was refused: ", f);
		put_clean(f, t->store_err);
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Rebuilds t->note from what is withheld now (NULL when nothing is). */
static int renote(struct trust_state *t, struct err *e)
{
	free(t->note);
	t->note = NULL;
	if (!t->withheld && !(t->venv.path && !t->venv.approved))
		return 0;
	t->note = make_note(t);
	return t->note ? 0 : err_set(e, -ENOMEM, "out of memory");
}

int trust_decide(struct trust_state *t, struct policy *p, bool project, const char *root,
		 const char *workspace, bool skill_given, struct err *e)
{
	struct trust_report cut = { 0 };
	struct err se = { 0 };
	int rc;

	memset(t, 0, sizeof *t);
	if (trust_store_path(t->store, sizeof t->store, &se) < 0)
		snprintf(t->store, sizeof t->store, "(none: %s)", se.msg);
	if (!project)
		return 0;
	t->project = true;
	rc = policy_builtin(&t->ceiling, e);
	if (rc == 0)
		rc = policy_resolve(t->ceiling, root, e);
	if (rc < 0)
		return rc;
	/* The real path, after every symlink: what is approved is the file
	 * that is read, for this project. */
	t->path = realpath(p->source, NULL);
	t->source = xstrdup(p->source);
	if (!t->path)
		return err_sys(e, -errno, "%s: cannot resolve the policy file's path", p->source);
	/* The hash of the bytes that were parsed, not a second read of the
	 * file: what is approved is exactly what runs. */
	trust_hash(p->text, p->text_len, t->hex);
	t->command = trust_command(root, t->path, skill_given);
	if (!t->command)
		return err_set(e, -ENOMEM, "out of memory");
	rc = trust_ceiling(p, t->ceiling, root, workspace, false, &t->asked, e);
	if (rc < 0 || t->asked.keys == 0)
		return rc;
	rc = trust_lookup(TRUST_KIND_SKILL, root, t->path, t->hex, workspace, &se);
	if (rc == 1) {
		t->approved = true;
		return 0;
	}
	/* A refused store approves nothing: whatever it says could have been
	 * written by someone other than the user. */
	if (rc < 0)
		snprintf(t->store_err, sizeof t->store_err, "%s", se.msg);
	rc = trust_ceiling(p, t->ceiling, root, workspace, true, &cut, e);
	if (rc < 0)
		return rc;
	t->withheld = cut.keys;
	trust_report_free(&cut);
	return renote(t, e);
}

bool trust_venv_used(const struct trust_state *t)
{
	return t->venv.path && t->venv.approved;
}

int trust_decide_venv(struct trust_state *t, const char *venv, bool given, const char *root,
		      const char *workspace, const char *const *writable, bool skill_given, struct err *e)
{
	struct trust_venv *v = &t->venv;
	struct err se = { 0 };
	int rc;

	if (!venv)
		return 0;
	v->path = realpath(venv, NULL);
	if (!v->path)
		return err_sys(e, -errno, "%s: cannot resolve the venv's path", venv);
	v->given = given;
	for (const char *const *w = writable; w && *w; w++)
		if (under(v->path, *w))
			v->pth_off = true;
	if (!t->command && !(t->command = trust_command(root, NULL, skill_given)))
		return err_set(e, -ENOMEM, "out of memory");
	rc = trust_venv_fingerprint(v->path, v->hex, &v->files, &se);
	if (given) {
		/* --venv DIR is the user's own word: nothing to approve.  Its
		 * fingerprint is only shown. */
		v->approved = true;
		return 0;
	}
	if (rc < 0) {
		snprintf(v->why, sizeof v->why, "It cannot be approved as it is: %s.", se.msg);
	} else {
		rc = trust_lookup(TRUST_KIND_VENV, root, v->path, v->hex, workspace, &se);
		if (rc == 1)
			v->approved = true;
		else if (rc < 0 && !t->store_err[0])
			snprintf(t->store_err, sizeof t->store_err, "%s", se.msg);
	}
	return renote(t, e);
}

static void indent(FILE *out, const char *text, const char *pre)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		fprintf(out, "%s%.*s\n", pre, (int)n, l);
		l = nl ? nl + 1 : NULL;
	}
}

static void print_policy(const struct trust_state *t, const char *requested, FILE *out)
{
	if (!t->project) {
		fputs("  the built-in policy is in use: nothing to approve\n", out);
		return;
	}
	fputs("  project policy: ", out);
	put_clean(out, t->source ? t->source : t->path);
	if (t->source && strcmp(t->source, t->path) != 0) {
		fputs(" (a symlink to ", out);
		put_clean(out, t->path);
		fputc(')', out);
	}
	fprintf(out, "\n  sha256: %s\n", t->hex);
	if (!t->asked.keys) {
		fputs("  state: nothing beyond the built-in policy, no approval needed\n", out);
		return;
	}
	fputs("  asks for, beyond the built-in policy:\n", out);
	indent(out, t->asked.text, "  ");
	if (t->approved) {
		fputs("  state: approved on this machine (this exact file, for this project): all of it applies\n", out);
	} else {
		fputs("  state: NOT approved on this machine (for this project): the grants above are withheld\n", out);
		fputs("  approve with: ", out);
		put_clean(out, t->command);
		fputc('\n', out);
	}
	fputs("  the ceiling (the built-in policy, the most a project gets without approval):\n", out);
	char *c = policy_describe(t->ceiling);
	indent(out, c, "    ");
	free(c);
	fputs("  the project's request (the file as written):\n", out);
	indent(out, requested, "    ");
}

static void print_venv(const struct trust_state *t, FILE *out)
{
	const struct trust_venv *v = &t->venv;
	if (!v->path)
		return;
	fputs("  venv: ", out);
	put_clean(out, v->path);
	fputs(v->given ? " (--venv)\n" : " (ROOT/.interpreter-venv)\n", out);
	if (v->files) {
		fprintf(out, "  fingerprint: %s, of:\n", v->hex);
		fputs(v->files, out);
	}
	if (v->given)
		fputs("  state: named with --venv, the user's own word: used, no approval needed\n", out);
	else if (v->approved)
		fputs("  state: approved on this machine (this exact fingerprint, for this project): used\n", out);
	else
		fputs("  state: NOT approved on this machine (for this project): the interpreter runs without it\n", out);
	if (v->why[0]) {
		fputs("  ", out);
		put_clean(out, v->why);
		fputc('\n', out);
	}
	if (trust_venv_used(t))
		fputs(v->pth_off ? "  its .pth files are not run: it lies where the sandboxed code can write\n"
				 : "  its site-packages are added, and its .pth files run, in each session (never in the zygote)\n", out);
	else if (!v->given) {
		fputs("  approve with: ", out);
		put_clean(out, t->command);
		fputc('\n', out);
	}
}

void trust_print(const struct trust_state *t, const char *requested, FILE *out)
{
	fputs("workspace trust:\n", out);
	print_policy(t, requested, out);
	print_venv(t, out);
	fputs("  approval store: ", out);
	put_clean(out, t->store);
	fputc('\n', out);
	if (t->store_err[0]) {
		fputs("  the approval store was refused: ", out);
		put_clean(out, t->store_err);
		fputc('\n', out);
	}
}

void trust_state_free(struct trust_state *t)
{
	if (!t)
		return;
	trust_report_free(&t->asked);
	free(t->path);
	free(t->source);
	free(t->venv.path);
	free(t->venv.files);
	free(t->command);
	free(t->note);
	policy_free(t->ceiling);
	memset(t, 0, sizeof *t);
}
