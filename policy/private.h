/* What the files of the policy parser share (policy.c, frontmatter.c,
 * permissions.c, limits.c, describe.c).  Private to this folder (make
 * layers refuses an include of it from outside): the rest of the program
 * sees only policy.h. */
#ifndef POLICY_PRIVATE_H
#define POLICY_PRIVATE_H

#include "policy.h"

#include <stdbool.h>
#include <stddef.h>

#define MAX_FILE_BYTES (1u << 20)         /* a SKILL.md is a few KiB */
#define MAX_FRONTMATTER_BYTES (64u << 10)
#define MAX_DEPTH 16                      /* collections nested in each other */
#define MAX_NODES 16384
#define MAX_PATHS 64                      /* per list: bind mounts, Landlock rules */
#define FIRST_YAML_LINE 2                 /* line 1 is the opening "---" */
#define SHOW_MAX 40                       /* characters of a value shown in errors */

/* One parse: the file's name for messages, where errors go, the
 * frontmatter's text and the nodes made so far. */
struct pctx {
	const char *src;
	struct err *e;
	const char *fm;  /* the frontmatter text, for reader-error offsets */
	size_t fm_len;
	size_t nodes;
};

/* ---- the node tree (frontmatter.c) ------------------------------------ */

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

/* "SRC:LINE: KEY: message" (KEY omitted when NULL). */
__attribute__((format(printf, 4, 5)))
int fm_err(const struct pctx *c, unsigned line, const char *key, const char *fmt, ...);
/* The frontmatter between the "---" lines of text, into c->fm. */
int fm_find(struct pctx *c, const char *text, size_t len);
/* c's frontmatter as a tree of nodes, bounded in depth and count. */
int fm_load_tree(struct pctx *c, struct ynode **root);
void ynode_free(struct ynode *n);

/* Scalars: the node is a plain scalar equal to s, or to one of list. */
bool fm_eq(const struct ynode *n, const char *s);
bool fm_in(const struct ynode *n, const char *const *list);
bool fm_is_null(const struct ynode *n);
/* 1 true, 0 false, -1 not one of the YAML 1.2 core spellings. */
int fm_bool(const struct ynode *n);
/* The node as a message shows it (escaped, cut to SHOW_MAX). */
const char *fm_show(const struct ynode *n, char *buf, size_t size);
bool fm_int_text(const char *s, size_t len);
bool fm_float_text(const char *s, size_t len);
int fm_tag_error(const struct pctx *c, const struct ynode *n, const char *key);
int fm_want_bool(const struct pctx *c, const struct ynode *n, const char *key, bool *out);
/* Key i of map (a plain word, not seen before in it), as PREFIX.KEY. */
int fm_mapping_key(const struct pctx *c, const struct ynode *map, size_t i,
		   const char *prefix, char *keypath, size_t size);
int fm_want_mapping(const struct pctx *c, const struct ynode *n, const char *key,
		    const char *accepted);
int fm_want_text(const struct pctx *c, const struct ynode *v, const char *key, char **out);

/* ---- the schema --------------------------------------------------------- */

/* Lines of the path-list entries, for messages from policy_resolve. */
struct lines {
	unsigned *read, *write;
};

/* permissions.c: the keys of permissions:, and their parse. */
extern const char *const policy_perm_keys[];
int perm_parse(const struct pctx *c, const struct ynode *m, struct policy *p, struct lines *ln);
/* limits.c: a key of limits: (for a limit misplaced at the top), and their parse. */
bool limits_known(const struct ynode *k);
int limits_parse(const struct pctx *c, const struct ynode *m, struct policy *p);
/* policy.c */
void strv_free(char **v, size_t n);

#endif
