/* The JSON check of verify_outputs (see validate.h, validate_priv.h).
 *
 * Everything here reads bytes written by untrusted code: every read is
 * bounded by len before it happens, nothing recurses on input and nothing
 * allocated grows with it, and every detail quotes input only through
 * esc_bytes(). */
#include "validate_json.h"
#include "vdetail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/escape.h"
#include "../common/text.h"
#include "../common/util.h"

/* ---- JSON ------------------------------------------------------------- */

/* The JSON is checked by a scanner (RFC 8259, strict) that builds no tree:
 * it keeps one byte per open array or object (at most JSON_MAX_DEPTH),
 * the top level's type and item count, and which required keys it met.
 * Attack: a 32 MiB [0,0,0,...] written by a cell was parsed into a whole
 * cJSON tree (about 64 bytes a node) and took the server from 10 MB to
 * 1.35 GB; a file of up to 256 MiB went further. */
struct jscan {
	const unsigned char *b;
	size_t len, pos;
	const char *why;            /* what was expected, on an error */
	int depth;
	unsigned char open[JSON_MAX_DEPTH]; /* '[' or '{' per level */
	bool too_deep;
	char top;                   /* the top level: o a s n b z */
	long items;                 /* of the top-level array or object */
	/* Required keys (top level only) and the first keys, for the detail. */
	const struct vspec *spec;
	bool *found;
	char *key;                  /* the key being decoded */
	size_t key_cap, key_len;
	bool key_long;
	char shown[12][96];
	int n_shown;
};

static void jkey_put(struct jscan *j, const char *u, size_t n)
{
	if (!j->key)
		return;
	for (size_t i = 0; i < n; i++) {
		if (j->key_len + 1 >= j->key_cap)
			j->key_long = true;
		else
			j->key[j->key_len++] = u[i];
	}
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* The code point of \uXXXX at p (the 4 hex digits), or -1. */
static long hex4(const unsigned char *p, size_t avail)
{
	if (avail < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

static size_t utf8_put(char *o, long cp)
{
	if (cp < 0x80) { o[0] = (char)cp; return 1; }
	if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
	o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
	return 4;
}

/* A string at j->pos (its opening quote); decoded into j->key when
 * as_key.  False with j->why and j->pos at the fault. */
static bool jstring(struct jscan *j, bool as_key)
{
	const unsigned char *b = j->b;
	size_t len = j->len, i = j->pos + 1;
	if (as_key)
		j->key_len = 0, j->key_long = false;
	for (;;) {
		if (i >= len) {
			j->pos = len;
			j->why = "a string is never closed";
			return false;
		}
		unsigned char c = b[i];
		if (c == '"') {
			j->pos = i + 1;
			return true;
		}
		if (c < 0x20) {
			j->pos = i;
			j->why = "a control character inside a string must be escaped (\\n, \\t, \\u0000)";
			return false;
		}
		if (c == '\\') {
			if (len - i < 2) {
				j->pos = len;
				j->why = "a string is never closed";
				return false;
			}
			unsigned char e = b[i + 1];
			const char *simple = strchr("\"\\/bfnrt", e);
			if (e && simple) {
				static const char dec[] = "\"\\/\b\f\n\r\t";
				if (as_key)
					jkey_put(j, &dec[simple - "\"\\/bfnrt"], 1);
				i += 2;
				continue;
			}
			if (e != 'u') {
				j->pos = i;
				j->why = "an invalid escape in a string (a backslash goes before \" \\ / b f n r t or u)";
				return false;
			}
			long cp = hex4(b + i + 2, len - i - 2);
			if (cp < 0) {
				j->pos = i;
				j->why = "\\u must be followed by 4 hex digits";
				return false;
			}
			i += 6;
			/* A pair of surrogates is one character; a lone one is
			 * valid JSON (Python writes it), kept as U+FFFD. */
			if (cp >= 0xd800 && cp < 0xdc00 && len - i >= 6 && b[i] == '\\' && b[i + 1] == 'u') {
				long lo = hex4(b + i + 2, len - i - 2);
				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd;
			if (as_key) {
				char u[4];
				jkey_put(j, u, utf8_put(u, cp));
			}
			continue;
		}
		size_t n = 1;
		if (c >= 0x80) {
			size_t rest = len - i > 4 ? 4 : len - i;
			n = utf8_invalid_at(b + i, rest);
			/* utf8_invalid_at gives how many bytes are valid: at
			 * least one whole character is. */
			if (n == 0 || (b[i] >= 0xc0 && n < (size_t)(b[i] >= 0xf0 ? 4 : b[i] >= 0xe0 ? 3 : 2))) {
				j->pos = i;
				j->why = "a string holds bytes that are not UTF-8: write the file with encoding='utf-8'";
				return false;
			}
			n = b[i] >= 0xf0 ? 4 : b[i] >= 0xe0 ? 3 : 2;
		}
		if (as_key)
			jkey_put(j, (const char *)b + i, n);
		i += n;
	}
}

static bool jdigits(const unsigned char *b, size_t len, size_t *i)
{
	size_t s = *i;
	while (*i < len && b[*i] >= '0' && b[*i] <= '9')
		(*i)++;
	return *i > s;
}

static bool jnumber(struct jscan *j)
{
	const unsigned char *b = j->b;
	size_t len = j->len, i = j->pos;
	if (b[i] == '-')
		i++;
	if (i < len && b[i] == '0') {
		i++;
	} else if (!jdigits(b, len, &i)) {
		j->pos = i;
		j->why = "a digit was expected";
		return false;
	}
	if (i < len && b[i] == '.') {
		i++;
		if (!jdigits(b, len, &i)) {
			j->pos = i;
			j->why = "a digit must follow the decimal point";
			return false;
		}
	}
	if (i < len && (b[i] == 'e' || b[i] == 'E')) {
		i++;
		if (i < len && (b[i] == '+' || b[i] == '-'))
			i++;
		if (!jdigits(b, len, &i)) {
			j->pos = i;
			j->why = "a digit must follow the exponent's e";
			return false;
		}
	}
	j->pos = i;
	return true;
}

static void jws(struct jscan *j)
{
	while (j->pos < j->len && vr_is_ws(j->b[j->pos]))
		j->pos++;
}

/* A key at the top level: met a required one?  Shown in the detail? */
static void jtop_key(struct jscan *j)
{
	const struct vspec *sp = j->spec;
	for (size_t k = 0; j->found && k < sp->n_required_keys; k++) {
		const char *want = sp->required_keys[k];
		if (want && !j->key_long && strlen(want) == j->key_len && memcmp(want, j->key, j->key_len) == 0)
			j->found[k] = true;
	}
	if (j->key && j->n_shown < 12)
		esc_bytes(j->shown[j->n_shown++], sizeof j->shown[0], j->key, j->key_len, 40);
}

/* One value at j->pos, with everything nested in it, without recursion. */
static bool jvalue(struct jscan *j)
{
	const unsigned char *b = j->b;
	for (;;) {
		/* A value. */
		jws(j);
		if (j->pos >= j->len) {
			j->why = "a value was expected";
			return false;
		}
		unsigned char c = b[j->pos];
		if (j->depth == 1)
			j->items += j->open[0] == '[';
		if (c == '{' || c == '[') {
			if (j->depth == 0)
				j->top = c == '{' ? 'o' : 'a';
			if (j->depth == JSON_MAX_DEPTH) {
				j->too_deep = true;
				return false;
			}
			j->open[j->depth++] = c;
			j->pos++;
			jws(j);
			if (j->pos < j->len && b[j->pos] == (c == '{' ? '}' : ']')) {
				j->pos++;
				j->depth--;
			} else if (c == '[') {
				continue;
			} else {
				goto key;
			}
		} else if (c == '"') {
			if (j->depth == 0)
				j->top = 's';
			if (!jstring(j, false))
				return false;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			if (j->depth == 0)
				j->top = 'n';
			if (!jnumber(j))
				return false;
		} else {
			static const char *const lit[] = { "true", "false", "null" };
			size_t k = 0;
			while (k < 3 && !vr_starts(b + j->pos, j->len - j->pos, lit[k]))
				k++;
			if (k == 3) {
				j->why = "a value was expected (an object, array, string, number, true, false or null)";
				return false;
			}
			if (j->depth == 0)
				j->top = k == 2 ? 'z' : 'b';
			j->pos += strlen(lit[k]);
		}
		/* After a value: a comma, or the end of what holds it. */
		for (;;) {
			if (j->depth == 0)
				return true;
			jws(j);
			char close = j->open[j->depth - 1] == '{' ? '}' : ']';
			if (j->pos < j->len && b[j->pos] == close) {
				j->pos++;
				j->depth--;
				continue;
			}
			if (j->pos >= j->len || b[j->pos] != ',') {
				j->why = close == '}' ? "',' or '}' was expected" : "',' or ']' was expected";
				return false;
			}
			j->pos++;
			if (close == ']')
				break;
			jws(j);
			goto key;
		}
		continue;
key:
		/* A key, then a colon: the value follows. */
		if (j->pos >= j->len || b[j->pos] != '"') {
			j->why = "a key (a string in double quotes) was expected";
			return false;
		}
		if (!jstring(j, j->depth == 1))
			return false;
		if (j->depth == 1) {
			j->items++;
			jtop_key(j);
		}
		jws(j);
		if (j->pos >= j->len || b[j->pos] != ':') {
			j->why = "':' was expected after the key";
			return false;
		}
		j->pos++;
	}
}

static const char *json_type(char t)
{
	switch (t) {
	case 'o': return "an object";
	case 'a': return "an array";
	case 's': return "a string";
	case 'n': return "a number";
	case 'b': return "a boolean";
	default: return "null";
	}
}

static void json_where(const unsigned char *b, size_t at, long *ln, long *col)
{
	*ln = 1;
	*col = 1;
	for (size_t i = 0; i < at; i++) {
		if (b[i] == '\n') {
			++*ln;
			*col = 1;
		} else {
			++*col;
		}
	}
}

/* The detail of a file the scanner stopped in. */
static void json_fault(const struct jscan *j, struct vresult *r)
{
	const unsigned char *b = j->b;
	size_t len = j->len, at = j->pos > len ? len : j->pos;
	long ln, col;
	char q[96];
	json_where(b, at, &ln, &col);
	if (j->too_deep) {
		vr_set(r, false, "The JSON nests arrays and objects deeper than %d levels (at line %ld, column %ld), more than "
			       "the server checks: write a flatter structure, or verify it with kind \"any\".",
		     JSON_MAX_DEPTH, ln, col);
		return;
	}
	vr_set(r, false, "Invalid JSON at line %ld, column %ld (near \"%s\"): %s.", ln, col,
	     esc_bytes(q, sizeof q, b + at, len - at, 24), j->why ? j->why : "unexpected data");
	size_t from = at > 16 ? at - 16 : 0;
	if (vr_find(b + from, b + (len - at > 16 ? at + 16 : len), "NaN") ||
	    vr_find(b + from, b + (len - at > 16 ? at + 16 : len), "Infinity"))
		vr_append(r, " NaN and Infinity are not JSON: write null instead (json.dump(..., allow_nan=False) finds them).");
	else if (vr_starts(b, len, "\xef\xbb\xbf"))
		vr_append(r, " The file starts with a byte order mark: write it with encoding='utf-8', not 'utf-8-sig'.");
	else
		vr_append(r, " Write it with json.dump and make sure the file is completely written and closed.");
}

void validate_json(const struct vspec *spec, const unsigned char *b, size_t len, struct vresult *r)
{
	char q[96];
	size_t k = 0;

	while (k < len && vr_is_ws(b[k]))
		k++;
	if (k == len) {
		vr_set(r, false, "The JSON file holds only white space: it has no value.");
		return;
	}
	/* On the heap: the scanner's stack and shown keys are 2 KiB. */
	struct jscan *j = xcalloc(1, sizeof *j);
	j->b = b;
	j->len = len;
	j->spec = spec;
	bool want_keys = spec->n_required_keys && spec->required_keys;
	size_t longest = 0;
	for (size_t i = 0; want_keys && i < spec->n_required_keys; i++)
		if (spec->required_keys[i] && strlen(spec->required_keys[i]) > longest)
			longest = strlen(spec->required_keys[i]);
	if (want_keys) {
		j->found = xcalloc(spec->n_required_keys, sizeof *j->found);
		j->key_cap = (longest > 64 ? longest : 64) + 2;
		j->key = xmalloc(j->key_cap);
	}
	bool ok = jvalue(j);
	if (ok) {
		/* One value; the rest must be white space. */
		jws(j);
		if (j->pos < len) {
			long ln, col;
			json_where(b, j->pos, &ln, &col);
			vr_set(r, false, "The JSON file holds more than one value: after the first, data continues at line %ld, "
				       "column %ld (near \"%s\"); write a single value (put several in a list).", ln, col,
			     esc_bytes(q, sizeof q, b + j->pos, len - j->pos, 24));
			goto out;
		}
	} else {
		json_fault(j, r);
		goto out;
	}
	if (want_keys) {
		if (j->top != 'o') {
			vr_set(r, false, "The JSON's top level is %s, but required_keys need an object.", json_type(j->top));
			goto out;
		}
		size_t missing = 0;
		for (size_t i = 0; i < spec->n_required_keys; i++) {
			const char *key = spec->required_keys[i];
			if (!key || j->found[i])
				continue;
			if (missing++ == 0)
				vr_set(r, false, "The JSON object lacks required key%s: ", spec->n_required_keys > 1 ? "s" : "");
			vr_append(r, "%s\"%s\"", missing > 1 ? ", " : "",
				esc_bytes(q, sizeof q, (const unsigned char *)key, strlen(key), 40));
		}
		if (missing) {
			vr_append(r, ". Its top-level keys are: ");
			for (int i = 0; i < j->n_shown; i++)
				vr_append(r, "%s\"%s\"", i ? ", " : "", j->shown[i]);
			if (j->items > j->n_shown)
				vr_append(r, ", ...");
			if (j->items == 0)
				vr_append(r, "none (the object is empty)");
			vr_append(r, ".");
			goto out;
		}
	}
	if (j->top == 'o')
		vr_set(r, true, "JSON object with %ld key%s, %zu bytes.", j->items, j->items == 1 ? "" : "s", len);
	else if (j->top == 'a')
		vr_set(r, true, "JSON array with %ld item%s, %zu bytes.", j->items, j->items == 1 ? "" : "s", len);
	else
		vr_set(r, true, "JSON value (%s), %zu bytes.", json_type(j->top), len);
out:
	free(j->found);
	free(j->key);
	free(j);
}
