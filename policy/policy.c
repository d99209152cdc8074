/* The policy parser: SKILL.md frontmatter -> struct policy.
 *
 * The frontmatter is read with libyaml's event API into a small tree of
 * nodes that carry their line numbers, then the tree is checked against a
 * strict schema: every error names FILE:LINE: KEY, says what is wrong and
 * what to write instead.  Everything is bounded: the file (1 MiB), the
 * frontmatter (64 KiB), the nesting depth, the node count and the path
 * lists; anchors and aliases are refused outright.
 *
 * Decisions (see also the comments at each check):
 * - Booleans are the YAML 1.2 core spellings only: true/True/TRUE and
 *   false/False/FALSE, unquoted and untagged.  yes/no/on/off/y/n are an
 *   error that says to write true or false: YAML 1.1 and 1.2 parsers
 *   disagree on them, and a permission must mean one thing.  A quoted
 *   "true" is a string, hence a type error.
 * - Integers are plain decimal (no leading zeros, no 0x/0o, no
 *   underscores): "0755"-style values are octal in YAML 1.1 and decimal in
 *   YAML 1.2.  1.5 (or 2048.0) for an integer key is a type error.  Numbers
 *   are decimal ints or floats; .inf and .nan are refused.
 * - fs_read: [] means the same as fs_read: false (the workspace only) and
 *   fs_write: [] the same as fs_write: false (nothing writable); both are
 *   stored as that mode, so no consumer sees an empty list.
 * - Minimums: memory_mb 64, max_output_chars 200, max_processes 4 (the
 *   interpreter and numpy's libraries start threads, and threads count),
 *   max_file_mb 1, max_sessions 1..256, timeout_s/max_timeout_s
 *   0.001..86400 seconds.
 * - Duplicate keys in the frontmatter, permissions or limits are errors.
 * - An empty frontmatter, or an empty `permissions:`/`limits:`, is an error
 *   (delete the key to get the defaults). */
#include "policy.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_FILE_BYTES (1u << 20)         /* a SKILL.md is a few KiB */
#define MAX_FRONTMATTER_BYTES (64u << 10)
#define MAX_DEPTH 16                      /* collections nested in each other */
#define MAX_NODES 16384
#define MAX_PATHS 64                      /* per list: bind mounts, Landlock rules */
#define FIRST_YAML_LINE 2                 /* line 1 is the opening "---" */
#define SHOW_MAX 40                       /* characters of a value shown in errors */

extern const char builtin_skill_md[];
extern const unsigned long builtin_skill_md_len;

/* ---- errors ---------------------------------------------------------- */

struct pctx {
	const char *src;
	struct err *e;
	const char *fm;  /* the frontmatter text, for reader-error offsets */
	size_t fm_len;
	size_t nodes;
};

/* "SRC:LINE: KEY: message" (KEY omitted when NULL). */
__attribute__((format(printf, 4, 5)))
static int perr(const struct pctx *c, unsigned line, const char *key,
		const char *fmt, ...)
{
	char msg[640];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (key)
		return err_set(c->e, -EINVAL, "%s:%u: %s: %s", c->src, line, key, msg);
	return err_set(c->e, -EINVAL, "%s:%u: %s", c->src, line, msg);
}


/* ---- the node tree --------------------------------------------------- */

enum ykind { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ykind kind;
	unsigned line;
	bool tagged; /* an explicit tag (!!str, !foo) */
	bool plain;  /* an unquoted scalar */
	char *s;     /* scalar text, NUL-terminated (may also contain NULs) */
	size_t len;
	struct ynode **kids; /* seq: items; map: key, value, key, value... */
	size_t n, cap;
};

static void ynode_free(struct ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		ynode_free(n->kids[i]);
	free(n->kids);
	free(n->s);
	free(n);
}

static unsigned line_of_offset(const struct pctx *c, size_t off)
{
	unsigned line = FIRST_YAML_LINE;
	for (size_t i = 0; i < off && i < c->fm_len; i++)
		if (c->fm[i] == '\n')
			line++;
	return line;
}

static int yaml_error(const struct pctx *c, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "unknown error";
	unsigned line;

	if (p->error == YAML_MEMORY_ERROR)
		return err_set(c->e, -ENOMEM, "%s: out of memory while parsing the frontmatter", c->src);
	if (p->error == YAML_READER_ERROR)
		return perr(c, line_of_offset(c, p->problem_offset), NULL,
			    "YAML error: %s; the frontmatter must be UTF-8 text without control characters",
			    problem);
	line = (unsigned)p->problem_mark.line + FIRST_YAML_LINE;
	if (p->context)
		return perr(c, line, NULL,
			    "YAML syntax error: %s (%s on line %u); check the indentation, colons and quotes",
			    problem, p->context, (unsigned)p->context_mark.line + FIRST_YAML_LINE);
	return perr(c, line, NULL,
		    "YAML syntax error: %s; check the indentation, colons and quotes", problem);
}

static int next_event(struct pctx *c, yaml_parser_t *p, yaml_event_t *ev)
{
	if (!yaml_parser_parse(p, ev))
		return yaml_error(c, p);
	return 0;
}

static unsigned ev_line(const yaml_event_t *ev)
{
	return (unsigned)ev->start_mark.line + FIRST_YAML_LINE;
}

/* Alias bombs ("billion laughs"): a few lines of anchors and aliases expand
 * to gigabytes in any consumer that follows them.  Nothing in a SKILL.md
 * needs them, so the first anchor or alias is an error. */
static int anchor_error(const struct pctx *c, unsigned line)
{
	return perr(c, line, NULL,
		    "YAML anchors (&name) and aliases (*name) are not accepted in a SKILL.md; write the value out in full");
}

/* Builds the node that starts with *ev (owned by the caller). */
static int build(struct pctx *c, yaml_parser_t *p, const yaml_event_t *ev,
		 unsigned depth, struct ynode **out)
{
	struct ynode *n;
	yaml_event_t child;
	enum yaml_event_type_e end;
	const yaml_char_t *anchor, *tag;
	int rc;

	*out = NULL;
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return anchor_error(c, ev_line(ev));
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		end = YAML_NO_EVENT;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.implicit ? NULL : ev->data.sequence_start.tag;
		end = YAML_SEQUENCE_END_EVENT;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.implicit ? NULL : ev->data.mapping_start.tag;
		end = YAML_MAPPING_END_EVENT;
		break;
	default:
		return perr(c, ev_line(ev), NULL, "unexpected YAML structure");
	}
	if (anchor)
		return anchor_error(c, ev_line(ev));
	/* Deep nesting costs memory and stack in every later consumer; the
	 * input cap alone would still allow thousands of levels. */
	if (end != YAML_NO_EVENT && depth > MAX_DEPTH)
		return perr(c, ev_line(ev), NULL,
			    "the YAML is nested more than %d levels deep; flatten it", MAX_DEPTH);
	if (++c->nodes > MAX_NODES)
		return perr(c, ev_line(ev), NULL,
			    "the frontmatter has more than %d YAML values; keep it short", MAX_NODES);

	n = xcalloc(1, sizeof *n);
	n->line = ev_line(ev);
	n->tagged = tag != NULL;

	if (ev->type == YAML_SCALAR_EVENT) {
		n->kind = Y_SCALAR;
		n->tagged = n->tagged && !ev->data.scalar.plain_implicit &&
			    !ev->data.scalar.quoted_implicit;
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		n->len = ev->data.scalar.length;
		n->s = xmalloc(n->len + 1);
		memcpy(n->s, ev->data.scalar.value, n->len);
		n->s[n->len] = '\0';
		*out = n;
		return 0;
	}

	n->kind = ev->type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP;
	for (;;) {
		struct ynode *kid;
		rc = next_event(c, p, &child);
		if (rc < 0)
			goto fail;
		if (child.type == end) {
			yaml_event_delete(&child);
			break;
		}
		rc = build(c, p, &child, depth + 1, &kid);
		yaml_event_delete(&child);
		if (rc < 0)
			goto fail;
		if (n->n == n->cap) {
			size_t cap = n->cap ? n->cap * 2 : 8;
			struct ynode **k = xreallocarray(n->kids, cap, sizeof *k);
			n->kids = k;
			n->cap = cap;
		}
		n->kids[n->n++] = kid;
	}
	*out = n;
	return 0;
fail:
	ynode_free(n);
	return rc;
}

/* Parses the frontmatter text into one root node (NULL when empty). */
static int load_tree(struct pctx *c, struct ynode **root)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int rc;

	*root = NULL;
	if (!yaml_parser_initialize(&p))
		return err_set(c->e, -ENOMEM, "%s: out of memory", c->src);
	yaml_parser_set_input_string(&p, (const unsigned char *)c->fm, c->fm_len);
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);

	rc = next_event(c, &p, &ev); /* STREAM-START */
	if (rc < 0)
		goto out_parser;
	yaml_event_delete(&ev);
	rc = next_event(c, &p, &ev);
	if (rc < 0)
		goto out_parser;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&ev);
		rc = perr(c, FIRST_YAML_LINE, NULL,
			  "the frontmatter is empty; write at least name: and description: (permissions and limits have defaults)");
		goto out_parser;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	rc = next_event(c, &p, &ev);
	if (rc < 0)
		goto out_parser;
	rc = build(c, &p, &ev, 1, root);
	yaml_event_delete(&ev);
	if (rc < 0)
		goto out_parser;
	rc = next_event(c, &p, &ev); /* DOCUMENT-END */
	if (rc < 0)
		goto out_tree;
	yaml_event_delete(&ev);
	rc = next_event(c, &p, &ev);
	if (rc < 0)
		goto out_tree;
	if (ev.type != YAML_STREAM_END_EVENT) {
		/* A second document ("...", then more YAML) would be a place to
		 * hide keys that a reader of the first one does not see. */
		rc = perr(c, ev_line(&ev), NULL,
			  "a second YAML document starts here; the frontmatter must be one mapping, so remove this document marker and what follows it");
		yaml_event_delete(&ev);
		goto out_tree;
	}
	yaml_event_delete(&ev);
	yaml_parser_delete(&p);
	return 0;
out_tree:
	ynode_free(*root);
	*root = NULL;
out_parser:
	yaml_parser_delete(&p);
	return rc;
}

/* ---- scalar helpers -------------------------------------------------- */

static bool s_eq(const struct ynode *n, const char *s)
{
	size_t l = strlen(s);
	return n->kind == Y_SCALAR && n->len == l && memcmp(n->s, s, l) == 0;
}

static bool s_in(const struct ynode *n, const char *const *list)
{
	for (; *list; list++)
		if (s_eq(n, *list))
			return true;
	return false;
}

static const char *const true_words[] = { "true", "True", "TRUE", NULL };
static const char *const false_words[] = { "false", "False", "FALSE", NULL };
static const char *const yaml11_bools[] = {
	"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON",
	"off", "Off", "OFF", "y", "Y", "n", "N", NULL
};
static const char *const null_words[] = { "", "~", "null", "Null", "NULL", NULL };

static bool is_null(const struct ynode *n)
{
	return n->kind == Y_SCALAR && n->plain && !n->tagged && s_in(n, null_words);
}

/* 1 true, 0 false, -1 not a YAML 1.2 boolean. */
static int as_bool(const struct ynode *n)
{
	if (n->kind != Y_SCALAR || !n->plain || n->tagged)
		return -1;
	if (s_in(n, true_words))
		return 1;
	if (s_in(n, false_words))
		return 0;
	return -1;
}

/* What a value is, for "got ..." in messages. */
static const char *show(const struct ynode *n, char *buf, size_t size)
{
	char tmp[SHOW_MAX * 4 + 8];
	if (n->kind == Y_SEQ)
		return "a list";
	if (n->kind == Y_MAP)
		return "a mapping";
	if (is_null(n))
		return "an empty value";
	esc_bytes(tmp, sizeof tmp, n->s, n->len, SHOW_MAX);
	if (n->plain)
		snprintf(buf, size, "%s", tmp);
	else
		snprintf(buf, size, "\"%s\" (a quoted string)", tmp);
	return buf;
}

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* [-+]?(0|[1-9][0-9]*) */
static bool is_int_text(const char *s, size_t len)
{
	if (len && (s[0] == '-' || s[0] == '+')) {
		s++;
		len--;
	}
	if (!all_digits(s, len))
		return false;
	return len == 1 || s[0] != '0';
}

/* [-+]?(digits)?(.digits?)?([eE][-+]?digits)? with at least one mantissa
 * digit: strtod alone would also take "inf", "nan", hex floats and
 * trailing junk. */
static bool is_float_text(const char *s, size_t len)
{
	size_t i = 0, digits = 0;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		i++;
		digits++;
	}
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			i++;
			digits++;
		}
	}
	if (!digits)
		return false;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t start;
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		start = i;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == start)
			return false;
	}
	return i == len;
}

static int tag_error(const struct pctx *c, const struct ynode *n, const char *key)
{
	return perr(c, n->line, key,
		    "explicit YAML tags (!!str, !name) are not accepted here; write the plain value");
}

static int want_bool(const struct pctx *c, const struct ynode *n, const char *key, bool *out)
{
	char buf[SHOW_MAX * 4 + 40];
	int b;

	if (n->tagged)
		return tag_error(c, n, key);
	b = as_bool(n);
	if (b >= 0) {
		*out = b == 1;
		return 0;
	}
	if (n->kind == Y_SCALAR && n->plain && s_in(n, yaml11_bools))
		return perr(c, n->line, key,
			    "expected true or false, got %s, which YAML 1.1 reads as a boolean and YAML 1.2 as a string; write true or false",
			    show(n, buf, sizeof buf));
	if (n->kind == Y_SCALAR && !n->plain &&
	    (s_in(n, true_words) || s_in(n, false_words) || s_in(n, yaml11_bools)))
		return perr(c, n->line, key,
			    "expected true or false, got %s; write true or false without quotes",
			    show(n, buf, sizeof buf));
	return perr(c, n->line, key, "expected true or false, got %s", show(n, buf, sizeof buf));
}

/* ---- the schema ------------------------------------------------------ */

enum lim_type { LIM_NUM, LIM_INT, LIM_BOOL };

struct lim_spec {
	const char *key;
	enum lim_type type;
	double min, max;
	const char *unit;
	size_t off; /* where in struct policy_limits: a double (LIM_NUM), long
		     * (LIM_INT) or bool (LIM_BOOL) */
};

/* Each limit by name: lim_specs[LIM_MEMORY_MB], never a position. */
enum lim_id {
	LIM_TIMEOUT_S,
	LIM_MAX_TIMEOUT_S,
	LIM_MEMORY_MB,
	LIM_MAX_OUTPUT_CHARS,
	LIM_MAX_PROCESSES,
	LIM_MAX_FILE_MB,
	LIM_MAX_SESSIONS,
	LIM_MAX_WORKSPACE_MB,
	LIM_CHECKPOINT,
	LIM_SEED,
	LIM_PERSIST,
	LIM_PERSIST_MB,
	LIM_COUNT
};

#define LIM(id, key, type, min, max, unit) \
	[id] = { #key, type, min, max, unit, offsetof(struct policy_limits, key) }

/* The ranges are the decisions listed at the top of the file.  The upper
 * bounds keep every later conversion (to bytes, to milliseconds, to an
 * rlimit) far from overflow; a timeout under 1 ms would round to 0, which
 * timer APIs (alarm, setitimer) read as "no timeout at all". */
static const struct lim_spec lim_specs[LIM_COUNT] = {
	LIM(LIM_TIMEOUT_S, timeout_s, LIM_NUM, 0.001, 86400, "seconds"),
	LIM(LIM_MAX_TIMEOUT_S, max_timeout_s, LIM_NUM, 0.001, 86400, "seconds"),
	LIM(LIM_MEMORY_MB, memory_mb, LIM_INT, 64, 1048576, "megabytes; the interpreter needs at least 64"),
	LIM(LIM_MAX_OUTPUT_CHARS, max_output_chars, LIM_INT, 200, 10000000, "characters per stream"),
	LIM(LIM_MAX_PROCESSES, max_processes, LIM_INT, 4, 65536,
	    "processes and threads; the interpreter and numpy start several threads"),
	LIM(LIM_MAX_FILE_MB, max_file_mb, LIM_INT, 1, 1048576, "megabytes per file"),
	LIM(LIM_MAX_SESSIONS, max_sessions, LIM_INT, 1, 256, "sessions"),
	LIM(LIM_MAX_WORKSPACE_MB, max_workspace_mb, LIM_INT, 1, 1073741824, "megabytes of disk the workspace may take"),
	LIM(LIM_CHECKPOINT, checkpoint, LIM_BOOL, 0, 0, NULL),
	LIM(LIM_SEED, seed, LIM_INT, 0, 4294967295.0, "a 32-bit seed"),
	LIM(LIM_PERSIST, persist, LIM_BOOL, 0, 0, NULL),
	LIM(LIM_PERSIST_MB, persist_mb, LIM_INT, 1, 1048576, "megabytes per saved session"),
};
#define N_LIMS LIM_COUNT
#define LIM_KEYS "timeout_s, max_timeout_s, memory_mb, max_output_chars, max_processes, " \
		 "max_file_mb, max_sessions, max_workspace_mb, checkpoint, seed, persist, persist_mb"

static const char *const perm_keys[] = { "fs_read", "fs_write", "shell_exec", "net_access",
					 "fs_read_deny", NULL };
#define PERM_KEYS "fs_read, fs_write, shell_exec, net_access, fs_read_deny"

static const char *const top_keys[] = {
	"name", "description", "metadata", "license", "version", "allowed-tools",
	"compatibility", "triggers", "permissions", "limits", NULL
};
#define TOP_KEYS "name, description, metadata, license, version, allowed-tools, " \
		 "compatibility, triggers, permissions, limits"

/* Lines of the path-list entries, for messages from policy_resolve. */
struct lines {
	unsigned *read, *write;
};

static int want_limit(const struct pctx *c, const struct ynode *n, const struct lim_spec *s,
		      double *num, long long *ll, bool *b)
{
	char key[64], buf[SHOW_MAX * 4 + 40];
	snprintf(key, sizeof key, "limits.%s", s->key);

	if (s->type == LIM_BOOL)
		return want_bool(c, n, key, b);
	if (n->tagged)
		return tag_error(c, n, key);
	if (n->kind == Y_SCALAR && n->plain) {
		if (s->type == LIM_INT && is_int_text(n->s, n->len)) {
			const char *bad = NULL;
			*ll = strtonum(n->s, (long long)s->min, (long long)s->max, &bad);
			if (!bad)
				return 0;
		} else if (s->type == LIM_NUM && is_float_text(n->s, n->len)) {
			*num = strtod(n->s, NULL);
			if (isfinite(*num) && *num >= s->min && *num <= s->max)
				return 0;
		}
	}
	if (n->kind == Y_SCALAR && !n->plain && (is_int_text(n->s, n->len) || is_float_text(n->s, n->len)))
		return perr(c, n->line, key,
			    "expected %s from %.15g to %.15g (%s), got %s; write the number without quotes",
			    s->type == LIM_INT ? "an integer" : "a number", s->min, s->max, s->unit,
			    show(n, buf, sizeof buf));
	return perr(c, n->line, key, "expected %s from %.15g to %.15g (%s), got %s",
		    s->type == LIM_INT ? "an integer" : "a number", s->min, s->max, s->unit,
		    show(n, buf, sizeof buf));
}

static int mapping_key(const struct pctx *c, const struct ynode *map, size_t i,
		       const char *prefix, char *keypath, size_t size)
{
	const struct ynode *k = map->kids[i];
	char esc[SHOW_MAX * 4 + 8];

	if (k->kind != Y_SCALAR || k->tagged)
		return perr(c, k->line, prefix ? prefix : "frontmatter",
			    "a key must be a plain word, got %s",
			    k->kind == Y_SEQ ? "a list" : k->kind == Y_MAP ? "a mapping" : "a tagged value");
	esc_bytes(esc, sizeof esc, k->s, k->len, SHOW_MAX);
	if (prefix)
		snprintf(keypath, size, "%s.%s", prefix, esc);
	else
		snprintf(keypath, size, "%s", esc);
	/* A duplicate key is silently "last one wins" in most YAML readers:
	 * a reviewer reads net_access: false at the top while a second
	 * net_access: true further down is what takes effect. */
	for (size_t j = 0; j < i; j += 2) {
		const struct ynode *o = map->kids[j];
		if (o->kind == Y_SCALAR && o->len == k->len && memcmp(o->s, k->s, k->len) == 0)
			return perr(c, k->line, keypath,
				    "duplicate key (first on line %u); write each key once", o->line);
	}
	return 0;
}

static int want_mapping(const struct pctx *c, const struct ynode *n, const char *key,
			const char *accepted)
{
	char buf[SHOW_MAX * 4 + 40];
	if (n->tagged)
		return tag_error(c, n, key);
	if (n->kind != Y_MAP)
		return perr(c, n->line, key,
			    "expected a mapping of %s, got %s; remove the key to use the defaults",
			    accepted, show(n, buf, sizeof buf));
	return 0;
}

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

static void free_strv(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int want_path_list(const struct pctx *c, const struct ynode *n, const char *key,
			  bool write, char ***out, size_t *nout, unsigned **lines)
{
	char ekey[64], buf[SHOW_MAX * 4 + 40];
	char **v;
	unsigned *l;

	if (n->n > MAX_PATHS)
		return perr(c, n->line, key, "more than %d paths; list fewer, broader directories",
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
			rc = tag_error(c, it, ekey);
		} else if (it->kind != Y_SCALAR || is_null(it) || as_bool(it) >= 0) {
			rc = perr(c, it->line, ekey, "expected a path, got %s; write a %s as a string",
				  show(it, buf, sizeof buf),
				  write ? "directory inside the project" : "path");
		} else if (it->len == 0 || strspn(it->s, " \t") == it->len) {
			/* An empty entry would resolve to the project root itself:
			 * a grant nobody wrote on purpose. */
			rc = perr(c, it->line, ekey, "the path is empty; write a path, or remove the entry");
		} else if (it->len >= PATH_MAX) {
			rc = perr(c, it->line, ekey, "the path is longer than %d bytes", PATH_MAX - 1);
		} else if (memchr(it->s, '\0', it->len)) {
			/* An embedded NUL ("workspace\0/../../etc") would make
			 * the checked string and the used string differ. */
			rc = perr(c, it->line, ekey, "the path contains a NUL byte");
		} else {
			for (size_t j = 0; j < it->len; j++) {
				unsigned char ch = (unsigned char)it->s[j];
				if (ch < 0x20 || ch == 0x7f) {
					rc = perr(c, it->line, ekey,
						  "the path \"%s\" contains a control character; write a plain path",
						  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
					break;
				}
			}
		}
		if (rc == 0 && it->s[0] == '~')
			rc = perr(c, it->line, ekey,
				  "\"%s\": ~ is not expanded; write the path relative to the project root or absolute",
				  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
		if (rc == 0 && is_fs_root(it->s))
			rc = perr(c, it->line, ekey,
				  "\"%s\" is the whole file system; list the directories that are needed",
				  esc_bytes(buf, sizeof buf, it->s, it->len, SHOW_MAX));
		if (rc == 0)
			v[i] = xstrdup(it->s);
		if (rc < 0) {
			free_strv(v, n->n);
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

static int parse_permissions(const struct pctx *c, const struct ynode *m, struct policy *p,
			     struct lines *ln)
{
	char key[256], buf[SHOW_MAX * 4 + 40];
	int rc = want_mapping(c, m, "permissions", PERM_KEYS);
	if (rc < 0)
		return rc;

	for (size_t i = 0; i < m->n; i += 2) {
		const struct ynode *k = m->kids[i], *v = m->kids[i + 1];
		rc = mapping_key(c, m, i, "permissions", key, sizeof key);
		if (rc < 0)
			return rc;
		if (s_eq(k, "fs_read")) {
			int b = as_bool(v);
			if (b >= 0) {
				p->fs_read = b ? FS_READ_ROOT : FS_READ_WORKSPACE;
				continue;
			}
			if (v->kind != Y_SEQ || v->tagged) {
				if (v->tagged)
					return tag_error(c, v, key);
				return perr(c, v->line, key,
					    "expected true (the project, read-only), false (the workspace only) or a list of paths, got %s",
					    show(v, buf, sizeof buf));
			}
			rc = want_path_list(c, v, key, false, &p->fs_read_paths,
					    &p->n_fs_read_paths, &ln->read);
			if (rc < 0)
				return rc;
			/* [] grants nothing beyond the workspace: that is false. */
			p->fs_read = p->n_fs_read_paths ? FS_READ_LIST : FS_READ_WORKSPACE;
		} else if (s_eq(k, "fs_write")) {
			if (v->tagged)
				return tag_error(c, v, key);
			if (s_eq(v, "workspace")) {
				p->fs_write = FS_WRITE_WORKSPACE;
				continue;
			}
			if (as_bool(v) == 0) {
				p->fs_write = FS_WRITE_NONE;
				continue;
			}
			if (as_bool(v) == 1)
				/* true would have to mean "the whole project",
				 * where code could rewrite this SKILL.md,
				 * .git/hooks and agent settings. */
				return perr(c, v->line, key,
					    "true is not accepted; write \"workspace\", false, or a list of directories inside the project");
			if (v->kind != Y_SEQ)
				return perr(c, v->line, key,
					    "expected \"workspace\", false or a list of directories inside the project, got %s",
					    show(v, buf, sizeof buf));
			rc = want_path_list(c, v, key, true, &p->fs_write_paths,
					    &p->n_fs_write_paths, &ln->write);
			if (rc < 0)
				return rc;
			/* [] makes nothing writable: that is false. */
			p->fs_write = p->n_fs_write_paths ? FS_WRITE_LIST : FS_WRITE_NONE;
		} else if (s_eq(k, "fs_read_deny")) {
			/* Globs relative to ROOT, added to the built-in list of
			 * secrets; checked like paths, then: relative, no "..". */
			unsigned *lines = NULL;
			if (v->tagged)
				return tag_error(c, v, key);
			if (v->kind != Y_SEQ)
				return perr(c, v->line, key,
					    "expected a list of globs relative to the project root (e.g. [\"secrets/*\", \"*.sqlite\"]), got %s",
					    show(v, buf, sizeof buf));
			free_strv(p->fs_read_deny, p->n_fs_read_deny);
			p->fs_read_deny = NULL;
			p->n_fs_read_deny = 0;
			rc = want_path_list(c, v, key, false, &p->fs_read_deny, &p->n_fs_read_deny, &lines);
			for (size_t j = 0; rc == 0 && j < p->n_fs_read_deny; j++) {
				const char *g = p->fs_read_deny[j];
				char ekey[300];
				snprintf(ekey, sizeof ekey, "%s[%zu]", key, j);
				if (g[0] == '/')
					rc = perr(c, lines[j], ekey,
						  "\"%s\" is absolute; write a glob relative to the project root, e.g. \"%s\"",
						  esc_bytes(buf, sizeof buf, g, strlen(g), SHOW_MAX), g + strspn(g, "/"));
				else if (!strcmp(g, "..") || !strncmp(g, "../", 3) || strstr(g, "/../") ||
					 (strlen(g) >= 3 && !strcmp(g + strlen(g) - 3, "/..")))
					rc = perr(c, lines[j], ekey,
						  "\"%s\" leaves the project root; outside it nothing is readable anyway",
						  esc_bytes(buf, sizeof buf, g, strlen(g), SHOW_MAX));
			}
			free(lines);
			if (rc < 0)
				return rc;
		} else if (s_eq(k, "shell_exec")) {
			rc = want_bool(c, v, key, &p->shell_exec);
			if (rc < 0)
				return rc;
		} else if (s_eq(k, "net_access")) {
			rc = want_bool(c, v, key, &p->net_access);
			if (rc < 0)
				return rc;
		} else {
			return perr(c, k->line, key, "unknown key; accepted keys: " PERM_KEYS);
		}
	}
	return 0;
}

static int parse_limits(const struct pctx *c, const struct ynode *m, struct policy *p)
{
	char key[256];
	unsigned line[N_LIMS] = { 0 };
	struct policy_limits *L = &p->limits;
	int rc = want_mapping(c, m, "limits", LIM_KEYS);
	if (rc < 0)
		return rc;

	for (size_t i = 0; i < m->n; i += 2) {
		const struct ynode *k = m->kids[i], *v = m->kids[i + 1];
		double num = 0;
		long long ll = 0;
		bool b = false;
		size_t s;

		rc = mapping_key(c, m, i, "limits", key, sizeof key);
		if (rc < 0)
			return rc;
		for (s = 0; s < N_LIMS; s++)
			if (s_eq(k, lim_specs[s].key))
				break;
		if (s == N_LIMS)
			return perr(c, k->line, key, "unknown key; accepted keys: " LIM_KEYS);
		rc = want_limit(c, v, &lim_specs[s], &num, &ll, &b);
		if (rc < 0)
			return rc;
		line[s] = v->line;
		char *field = (char *)L + lim_specs[s].off;
		switch (lim_specs[s].type) {
		case LIM_NUM: *(double *)(void *)field = num; break;
		case LIM_INT: *(long *)(void *)field = (long)ll; break;
		case LIM_BOOL: *(bool *)field = b; break;
		}
	}
	if (L->timeout_s > L->max_timeout_s) {
		if (line[LIM_TIMEOUT_S])
			return perr(c, line[LIM_TIMEOUT_S], "limits.timeout_s",
				    "%g exceeds limits.max_timeout_s (%g%s); lower timeout_s or raise max_timeout_s",
				    L->timeout_s, L->max_timeout_s, line[LIM_MAX_TIMEOUT_S] ? "" : ", the default");
		return perr(c, line[LIM_MAX_TIMEOUT_S], "limits.max_timeout_s",
			    "%g is below limits.timeout_s (%g, the default); set timeout_s too or raise max_timeout_s",
			    L->max_timeout_s, L->timeout_s);
	}
	return 0;
}

static int want_text(const struct pctx *c, const struct ynode *v, const char *key, char **out)
{
	char buf[SHOW_MAX * 4 + 40];
	if (v->kind != Y_SCALAR || is_null(v))
		return perr(c, v->line, key, "expected a string, got %s", show(v, buf, sizeof buf));
	free(*out);
	*out = xstrdup(v->s);
	return 0;
}

static int parse_top(const struct pctx *c, const struct ynode *root, struct policy *p,
		     struct lines *ln)
{
	char key[256], buf[SHOW_MAX * 4 + 40];
	int rc;

	if (root->kind != Y_MAP)
		return perr(c, root->line, NULL,
			    "the frontmatter must be a mapping of keys (%s), got %s", TOP_KEYS,
			    show(root, buf, sizeof buf));
	for (size_t i = 0; i < root->n; i += 2) {
		const struct ynode *k = root->kids[i], *v = root->kids[i + 1];
		rc = mapping_key(c, root, i, NULL, key, sizeof key);
		if (rc < 0)
			return rc;
		if (s_eq(k, "permissions")) {
			rc = parse_permissions(c, v, p, ln);
		} else if (s_eq(k, "limits")) {
			rc = parse_limits(c, v, p);
		} else if (s_eq(k, "name")) {
			rc = want_text(c, v, key, &p->name);
		} else if (s_eq(k, "description")) {
			rc = want_text(c, v, key, &p->description);
		} else if (s_eq(k, "metadata")) {
			if (v->kind != Y_MAP && !is_null(v))
				rc = perr(c, v->line, key, "expected a mapping, got %s",
					  show(v, buf, sizeof buf));
		} else if (s_in(k, top_keys)) {
			/* free-form: license, version, allowed-tools, ... */
		} else if (s_in(k, perm_keys)) {
			rc = perr(c, k->line, key,
				  "unknown top-level key; it is a permission: indent it under permissions:");
		} else {
			size_t s;
			for (s = 0; s < N_LIMS; s++)
				if (s_eq(k, lim_specs[s].key))
					break;
			if (s < N_LIMS)
				rc = perr(c, k->line, key,
					  "unknown top-level key; it is a limit: indent it under limits:");
			else
				rc = perr(c, k->line, key,
					  "unknown top-level key; accepted keys: " TOP_KEYS);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- frontmatter ----------------------------------------------------- */

/* "---" alone on a line, tolerating trailing blanks and a CR. */
static bool is_fence(const char *s, size_t n)
{
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	return n == 3 && memcmp(s, "---", 3) == 0;
}

static int find_frontmatter(struct pctx *c, const char *text, size_t len)
{
	const char *end = text + len, *nl, *line;
	unsigned lineno = 2;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		text += 3;
	nl = memchr(text, '\n', (size_t)(end - text));
	if (!is_fence(text, (size_t)((nl ? nl : end) - text)))
		return perr(c, 1, NULL,
			    "no YAML frontmatter: the file must begin with a line \"---\", then name:, description:, permissions: and limits:, then a line \"---\"");
	if (!nl)
		goto unterminated;
	line = nl + 1;
	while (line < end) {
		size_t used = (size_t)(line - (nl + 1));
		const char *e2;
		/* Caps the memory of the YAML parse, whatever the file. */
		if (used >= MAX_FRONTMATTER_BYTES)
			return perr(c, lineno, NULL,
				    "the frontmatter is larger than 64 KiB; keep it to the keys and move long text into the body");
		e2 = memchr(line, '\n', (size_t)(end - line));
		if (is_fence(line, (size_t)((e2 ? e2 : end) - line))) {
			c->fm = nl + 1;
			c->fm_len = used;
			return 0;
		}
		if (!e2)
			break;
		line = e2 + 1;
		lineno++;
	}
unterminated:
	return perr(c, 1, NULL,
		    "the frontmatter that begins on line 1 is never closed; add a line \"---\" after its last key");
}

/* ---- line records for policy_resolve ---------------------------------- */

static unsigned line_lookup(const struct policy *p, int which, size_t i)
{
	const unsigned *lines = which ? p->fs_write_lines : p->fs_read_lines;
	size_t n = which ? p->n_fs_write_paths : p->n_fs_read_paths;
	return lines && i < n ? lines[i] : 0;
}

/* ---- public API ------------------------------------------------------ */

static void set_defaults(struct policy *p)
{
	p->fs_read = FS_READ_ROOT;
	p->fs_write = FS_WRITE_WORKSPACE;
	p->shell_exec = false;
	p->net_access = false;
	p->limits = (struct policy_limits){
		.timeout_s = 30,
		.max_timeout_s = 600,
		.memory_mb = 2048,
		.max_output_chars = 8000,
		.max_processes = 64,
		.max_file_mb = 512,
		.max_sessions = 8,
		.max_workspace_mb = 4096,
		.checkpoint = true,
		.seed = 0,
		.persist = true,
		.persist_mb = 1024,
	};
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	free(p->fs_read_lines);
	free(p->fs_write_lines);
	free_strv(p->fs_read_paths, p->n_fs_read_paths);
	free_strv(p->fs_write_paths, p->n_fs_write_paths);
	free_strv(p->fs_read_deny, p->n_fs_read_deny);
	free(p->source);
	free(p->text);
	free(p->name);
	free(p->description);
	free(p);
}

int policy_parse(const char *text, size_t len, const char *source,
		 struct policy **out, struct err *e)
{
	struct pctx c = { .src = source ? source : "<policy>", .e = e };
	struct lines ln = { NULL, NULL };
	struct ynode *root = NULL;
	struct policy *p;
	int rc;

	if (!out)
		return err_set(e, -EINVAL, "policy_parse: no output");
	*out = NULL;
	if (!text)
		return err_set(e, -EINVAL, "%s: no text", c.src);
	if (len > MAX_FILE_BYTES)
		return err_set(e, -EFBIG,
			       "%s: the file is larger than 1 MiB (%zu bytes); a SKILL.md should be a few KiB",
			       c.src, len);
	rc = find_frontmatter(&c, text, len);
	if (rc < 0)
		return rc;
	rc = load_tree(&c, &root);
	if (rc < 0)
		return rc;

	p = xcalloc(1, sizeof *p);
	set_defaults(p);
	p->source = xstrdup(c.src);
	p->text = xmalloc(len + 1);
	memcpy(p->text, text, len);
	p->text[len] = '\0';
	p->text_len = len;
	rc = parse_top(&c, root, p, &ln);
	if (rc < 0)
		goto out_policy;
	p->fs_read_lines = ln.read;
	p->fs_write_lines = ln.write;
	ynode_free(root);
	*out = p;
	return 0;
out_policy:
	free(ln.read);
	free(ln.write);
	policy_free(p);
	ynode_free(root);
	return rc;
}

int policy_load_file(const char *path, struct policy **out, struct err *e)
{
	struct stat st;
	char *buf;
	size_t len = 0;
	int fd, rc;

	if (!out)
		return err_set(e, -EINVAL, "policy_load_file: no output");
	*out = NULL;
	/* O_NONBLOCK: a FIFO given as --skill must not hang the start-up;
	 * it is refused below as not a regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return err_set(e, -ENOENT, "%s: the file does not exist", path);
		return err_sys(e, -errno, "%s: cannot open", path);
	}
	if (fstat(fd, &st) < 0) {
		rc = err_sys(e, -errno, "%s: cannot stat", path);
		goto out_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = err_set(e, -EINVAL, "%s: not a regular file; pass a SKILL.md file", path);
		goto out_fd;
	}
	if (st.st_size > (off_t)MAX_FILE_BYTES) {
		rc = err_set(e, -EFBIG,
			     "%s: the file is larger than 1 MiB (%lld bytes); a SKILL.md should be a few KiB",
			     path, (long long)st.st_size);
		goto out_fd;
	}
	/* Read up to one byte over the cap: the file may grow after fstat. */
	buf = xmalloc(MAX_FILE_BYTES + 1);
	for (;;) {
		ssize_t r = read(fd, buf + len, MAX_FILE_BYTES + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = err_sys(e, -errno, "%s: cannot read", path);
			goto out_buf;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > MAX_FILE_BYTES) {
			rc = err_set(e, -EFBIG,
				     "%s: the file is larger than 1 MiB; a SKILL.md should be a few KiB",
				     path);
			goto out_buf;
		}
	}
	rc = policy_parse(buf, len, path, out, e);
out_buf:
	free(buf);
out_fd:
	close(fd);
	return rc;
}

int policy_builtin(struct policy **out, struct err *e)
{
	return policy_parse(builtin_skill_md, (size_t)builtin_skill_md_len,
			    "<built-in SKILL.md>", out, e);
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
		free_strv(nr, p->n_fs_read_paths);
	if (nw)
		free_strv(nw, p->n_fs_write_paths);
	free(src_real);
	free(rroot);
	return rc;
}

int policy_tighten(struct policy *p, double timeout_s, long memory_mb, struct err *e)
{
	/* Validate both before changing either. "!(x < 0)" treats NaN as
	 * given, so it is refused rather than ignored. */
	bool t_given = !(timeout_s < 0), m_given = memory_mb >= 0;

	if (!p)
		return err_set(e, -EINVAL, "policy_tighten: no policy");
	if (t_given) {
		if (!isfinite(timeout_s) || timeout_s < lim_specs[LIM_TIMEOUT_S].min)
			return err_set(e, -EINVAL,
				       "--timeout %g: expected a number of seconds from 0.001 to %g",
				       timeout_s, p->limits.timeout_s);
		if (timeout_s > p->limits.timeout_s)
			return err_set(e, -EINVAL,
				       "--timeout %g exceeds the policy's timeout_s (%g); flags can only tighten",
				       timeout_s, p->limits.timeout_s);
	}
	if (m_given) {
		if (memory_mb < (long)lim_specs[LIM_MEMORY_MB].min)
			return err_set(e, -EINVAL,
				       "--memory %ld: expected megabytes from 64 to %ld; the interpreter needs at least 64",
				       memory_mb, p->limits.memory_mb);
		if (memory_mb > p->limits.memory_mb)
			return err_set(e, -EINVAL,
				       "--memory %ld exceeds the policy's memory_mb (%ld); flags can only tighten",
				       memory_mb, p->limits.memory_mb);
	}
	if (t_given) {
		p->limits.timeout_s = timeout_s;
		/* A flag tightens every execution, so a call's own timeout_s
		 * argument may not ask for more than the flag either. */
		if (p->limits.max_timeout_s > timeout_s)
			p->limits.max_timeout_s = timeout_s;
	}
	if (m_given)
		p->limits.memory_mb = memory_mb;
	return 0;
}

static void put_paths(FILE *f, char *const *v, size_t n)
{
	char buf[PATH_MAX * 4 + 8];
	for (size_t i = 0; i < n; i++)
		fprintf(f, "    - %s\n", esc_bytes(buf, sizeof buf, v[i], strlen(v[i]), PATH_MAX));
}

char *policy_describe(const struct policy *p)
{
	char *out = NULL, buf[SHOW_MAX * 4 + 8];
	size_t size = 0;
	const struct policy_limits *L;
	FILE *f;

	if (!p)
		return NULL;
	L = &p->limits;
	f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	fprintf(f, "policy from %s\n", p->source ? p->source : "<unknown>");
	if (p->name)
		fprintf(f, "  name: %s\n", esc_bytes(buf, sizeof buf, p->name, strlen(p->name), 80));
	fputs("permissions:\n", f);
	switch (p->fs_read) {
	case FS_READ_ROOT:
		fputs("  fs_read: true (the project root read-only, and the workspace)\n", f);
		break;
	case FS_READ_WORKSPACE:
		fputs("  fs_read: false (the workspace only)\n", f);
		break;
	case FS_READ_LIST:
		fputs("  fs_read: these paths read-only, and the workspace\n", f);
		put_paths(f, p->fs_read_paths, p->n_fs_read_paths);
		break;
	}
	switch (p->fs_write) {
	case FS_WRITE_WORKSPACE:
		fputs("  fs_write: workspace (the workspace only)\n", f);
		break;
	case FS_WRITE_NONE:
		fputs("  fs_write: false (nothing writable)\n", f);
		break;
	case FS_WRITE_LIST:
		fputs("  fs_write: these directories only\n", f);
		put_paths(f, p->fs_write_paths, p->n_fs_write_paths);
		break;
	}
	fputs("  fs_read_deny: never readable, at any depth under what fs_read shows: the built-in secrets\n    ", f);
	for (const char *const *q = secrets_builtin(); *q; q++)
		fprintf(f, "%s%s", *q, q[1] ? " " : "\n");
	if (p->n_fs_read_deny) {
		fputs("    and the policy's own (relative to the project root)\n", f);
		put_paths(f, p->fs_read_deny, p->n_fs_read_deny);
	}
	fprintf(f, "  shell_exec: %s\n",
		p->shell_exec ? "true (programs may be executed)" : "false (no program can be executed)");
	fprintf(f, "  net_access: %s\n",
		p->net_access ? "true (network allowed)" : "false (no network, no DNS)");
	fputs("limits:\n", f);
	fprintf(f, "  timeout_s: %g\n", L->timeout_s);
	fprintf(f, "  max_timeout_s: %g\n", L->max_timeout_s);
	fprintf(f, "  memory_mb: %ld\n", L->memory_mb);
	fprintf(f, "  max_output_chars: %ld\n", L->max_output_chars);
	fprintf(f, "  max_processes: %ld\n", L->max_processes);
	fprintf(f, "  max_file_mb: %ld\n", L->max_file_mb);
	fprintf(f, "  max_sessions: %ld\n", L->max_sessions);
	fprintf(f, "  max_workspace_mb: %ld (a call that grows the workspace past it is stopped and rolled back)\n",
		L->max_workspace_mb);
	fprintf(f, "  checkpoint: %s\n", L->checkpoint ? "true" : "false");
	fprintf(f, "  seed: %ld\n", L->seed);
	fprintf(f, "  persist: %s\n", L->persist ? "true (saved in the background, restored after a restart)" : "false");
	fprintf(f, "  persist_mb: %ld\n", L->persist_mb);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
