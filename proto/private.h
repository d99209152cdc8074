/* What the codecs of proto/ share, and no file outside this folder may use
 * (make layers: a folder's private.h is included from that folder only).
 *
 * A decoder is the check of a message that came from below, where every
 * process can run code nobody approved: the body must be a JSON object,
 * and each field the codec knows must have its type and lie in its range
 * (a string within its length, an integer within its bounds, a list within
 * its count), or the whole message is refused with an error that names the
 * message and the field ("a W_SPAWNED whose \"pid\" is not an integer from
 * -1 to 4194304 (it is a string)").  An optional field may be absent (or
 * null); a field the codec does not know is ignored.  The same checks run
 * on the messages the server sends down: they cost nothing and keep one
 * rule.
 *
 * The helpers below stop at the first error: a decoder reads as the list
 * of its fields, and pdec_end says whether they all held. */
#ifndef PROTO_PRIVATE_H
#define PROTO_PRIVATE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../common/err.h"

enum pflag {
	PF_REQ, /* must be present */
	PF_OPT, /* may be absent or null: *out is then left as it is */
};

struct pdec {
	const char *what; /* the message, as its type is named: "W_SPAWNED" */
	cJSON *j;         /* the body, a JSON object */
	cJSON *at;        /* the object the fields are read from */
	const char *in;   /* its key when it is a field of the body ("error"), or NULL */
	struct err *e;
	int rc;           /* 0, or -EPROTO from the first field that failed */
};

/* Parses the body (len bytes; NUL-terminated or not); -EPROTO when it is
 * not a JSON object, with e saying so. */
int pdec_begin(struct pdec *d, const char *what, const void *data, size_t len, struct err *e);
/* d->rc.  The tree is freed, or on success handed to *keep (when keep is
 * not NULL: the decoded strings point into it; cJSON_Delete frees it). */
int pdec_end(struct pdec *d, void **keep);

/* Sets d's error on the named field (the first one wins). */
void pdec_fail(struct pdec *d, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Each returns true when the field is present and valid (and sets *out). */
bool pdec_int(struct pdec *d, const char *key, enum pflag f, long long lo, long long hi, long long *out);
bool pdec_num(struct pdec *d, const char *key, enum pflag f, double lo, double hi, double *out);
bool pdec_bool(struct pdec *d, const char *key, enum pflag f, bool *out);
/* A string of at most max bytes, as it came (NUL-free: cJSON stops at one). */
bool pdec_str(struct pdec *d, const char *key, enum pflag f, size_t max, const char **out);
/* Text from below, for a log line or a reply: valid UTF-8, every control
 * character (a newline too, unless lines) a space, cut to at most cut
 * bytes (never refused for its length).  Points into the tree. */
bool pdec_text(struct pdec *d, const char *key, enum pflag f, size_t cut, bool lines, const char **out);
/* A string copied into buf (n bytes, the string at most n - 1). */
bool pdec_name(struct pdec *d, const char *key, enum pflag f, char *buf, size_t n);

/* The object under key (a field of the body) becomes the one the fields
 * are read from, until pdec_leave; an error names its fields as
 * "key.field".  False when it is absent (or null, PF_OPT) or no object. */
bool pdec_enter(struct pdec *d, const char *key, enum pflag f);
void pdec_leave(struct pdec *d);

/* A list of at most max strings, each of 1 to len bytes, into out (their
 * number in *n). */
bool pdec_strv(struct pdec *d, const char *key, enum pflag f, size_t max, size_t len, const char **out, size_t *n);
/* A list of at most max [first, second] lists of two strings (the first of
 * 1 to len0 bytes, the second of at most len1), into out[i][0], out[i][1]. */
bool pdec_pairv(struct pdec *d, const char *key, enum pflag f, size_t max, size_t len0, size_t len1,
		const char *(*out)[2], size_t *n);

/* A list of at most max pids (each from 1 to PROTO_PID_MAX); *n their
 * number. */
bool pdec_pids(struct pdec *d, const char *key, enum pflag f, pid_t *out, size_t max, size_t *n);

/* What a value is, for an error: "a string", "the number 1.5", "nothing". */
const char *pdec_kind(const cJSON *v, char *buf, size_t n);

/* The encoders' end: the text of j (which is freed), never NULL. */
char *penc_print(cJSON *j);
/* A list of n strings in j under key. */
void penc_strs(cJSON *j, const char *key, const char *const *s, size_t n);
/* A list of pids (an array of numbers) in j under key. */
void penc_pids(cJSON *j, const char *key, const pid_t *pids, size_t n);

#endif
