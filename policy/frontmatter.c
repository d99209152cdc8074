/* The frontmatter reader of a SKILL.md: the "---" lines that enclose it,
 * its YAML read with libyaml's event API into a small tree of nodes that
 * carry their line numbers (bounded in depth and count; anchors and
 * aliases refused), and the checks of a scalar's spelling that the schema
 * (permissions.c, limits.c, policy.c) is built on.  Every error names
 * FILE:LINE: KEY (fm_err). */
#include "private.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

__attribute__((format(printf, 4, 5)))
int fm_err(const struct pctx *c, unsigned line, const char *key,
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

void ynode_free(struct ynode *n)
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
		return fm_err(c, line_of_offset(c, p->problem_offset), NULL,
			    "YAML error: %s; the frontmatter must be UTF-8 text without control characters",
			    problem);
	line = (unsigned)p->problem_mark.line + FIRST_YAML_LINE;
	if (p->context)
		return fm_err(c, line, NULL,
			    "YAML syntax error: %s (%s on line %u); check the indentation, colons and quotes",
			    problem, p->context, (unsigned)p->context_mark.line + FIRST_YAML_LINE);
	return fm_err(c, line, NULL,
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
	return fm_err(c, line, NULL,
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
		return fm_err(c, ev_line(ev), NULL, "unexpected YAML structure");
	}
	if (anchor)
		return anchor_error(c, ev_line(ev));
	/* Deep nesting costs memory and stack in every later consumer; the
	 * input cap alone would still allow thousands of levels. */
	if (end != YAML_NO_EVENT && depth > MAX_DEPTH)
		return fm_err(c, ev_line(ev), NULL,
			    "the YAML is nested more than %d levels deep; flatten it", MAX_DEPTH);
	if (++c->nodes > MAX_NODES)
		return fm_err(c, ev_line(ev), NULL,
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
int fm_load_tree(struct pctx *c, struct ynode **root)
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
		rc = fm_err(c, FIRST_YAML_LINE, NULL,
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
		rc = fm_err(c, ev_line(&ev), NULL,
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

bool fm_eq(const struct ynode *n, const char *s)
{
	size_t l = strlen(s);
	return n->kind == Y_SCALAR && n->len == l && memcmp(n->s, s, l) == 0;
}

bool fm_in(const struct ynode *n, const char *const *list)
{
	for (; *list; list++)
		if (fm_eq(n, *list))
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

bool fm_is_null(const struct ynode *n)
{
	return n->kind == Y_SCALAR && n->plain && !n->tagged && fm_in(n, null_words);
}

/* 1 true, 0 false, -1 not a YAML 1.2 boolean. */
int fm_bool(const struct ynode *n)
{
	if (n->kind != Y_SCALAR || !n->plain || n->tagged)
		return -1;
	if (fm_in(n, true_words))
		return 1;
	if (fm_in(n, false_words))
		return 0;
	return -1;
}

/* What a value is, for "got ..." in messages. */
const char *fm_show(const struct ynode *n, char *buf, size_t size)
{
	char tmp[SHOW_MAX * 4 + 8];
	if (n->kind == Y_SEQ)
		return "a list";
	if (n->kind == Y_MAP)
		return "a mapping";
	if (fm_is_null(n))
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
bool fm_int_text(const char *s, size_t len)
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
bool fm_float_text(const char *s, size_t len)
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

int fm_tag_error(const struct pctx *c, const struct ynode *n, const char *key)
{
	return fm_err(c, n->line, key,
		    "explicit YAML tags (!!str, !name) are not accepted here; write the plain value");
}

int fm_want_bool(const struct pctx *c, const struct ynode *n, const char *key, bool *out)
{
	char buf[SHOW_MAX * 4 + 40];
	int b;

	if (n->tagged)
		return fm_tag_error(c, n, key);
	b = fm_bool(n);
	if (b >= 0) {
		*out = b == 1;
		return 0;
	}
	if (n->kind == Y_SCALAR && n->plain && fm_in(n, yaml11_bools))
		return fm_err(c, n->line, key,
			    "expected true or false, got %s, which YAML 1.1 reads as a boolean and YAML 1.2 as a string; write true or false",
			    fm_show(n, buf, sizeof buf));
	if (n->kind == Y_SCALAR && !n->plain &&
	    (fm_in(n, true_words) || fm_in(n, false_words) || fm_in(n, yaml11_bools)))
		return fm_err(c, n->line, key,
			    "expected true or false, got %s; write true or false without quotes",
			    fm_show(n, buf, sizeof buf));
	return fm_err(c, n->line, key, "expected true or false, got %s", fm_show(n, buf, sizeof buf));
}

int fm_mapping_key(const struct pctx *c, const struct ynode *map, size_t i,
		       const char *prefix, char *keypath, size_t size)
{
	const struct ynode *k = map->kids[i];
	char esc[SHOW_MAX * 4 + 8];

	if (k->kind != Y_SCALAR || k->tagged)
		return fm_err(c, k->line, prefix ? prefix : "frontmatter",
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
			return fm_err(c, k->line, keypath,
				    "duplicate key (first on line %u); write each key once", o->line);
	}
	return 0;
}

int fm_want_mapping(const struct pctx *c, const struct ynode *n, const char *key,
			const char *accepted)
{
	char buf[SHOW_MAX * 4 + 40];
	if (n->tagged)
		return fm_tag_error(c, n, key);
	if (n->kind != Y_MAP)
		return fm_err(c, n->line, key,
			    "expected a mapping of %s, got %s; remove the key to use the defaults",
			    accepted, fm_show(n, buf, sizeof buf));
	return 0;
}

int fm_want_text(const struct pctx *c, const struct ynode *v, const char *key, char **out)
{
	char buf[SHOW_MAX * 4 + 40];
	if (v->kind != Y_SCALAR || fm_is_null(v))
		return fm_err(c, v->line, key, "expected a string, got %s", fm_show(v, buf, sizeof buf));
	free(*out);
	*out = xstrdup(v->s);
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

int fm_find(struct pctx *c, const char *text, size_t len)
{
	const char *end = text + len, *nl, *line;
	unsigned lineno = 2;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		text += 3;
	nl = memchr(text, '\n', (size_t)(end - text));
	if (!is_fence(text, (size_t)((nl ? nl : end) - text)))
		return fm_err(c, 1, NULL,
			    "no YAML frontmatter: the file must begin with a line \"---\", then name:, description:, permissions: and limits:, then a line \"---\"");
	if (!nl)
		goto unterminated;
	line = nl + 1;
	while (line < end) {
		size_t used = (size_t)(line - (nl + 1));
		const char *e2;
		/* Caps the memory of the YAML parse, whatever the file. */
		if (used >= MAX_FRONTMATTER_BYTES)
			return fm_err(c, lineno, NULL,
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
	return fm_err(c, 1, NULL,
		    "the frontmatter that begins on line 1 is never closed; add a line \"---\" after its last key");
}
