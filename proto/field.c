/* The field checks every decoder of proto/ is made of (private.h). */
#include "private.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/text.h"
#include "../common/util.h"
#include "wire.h"

int pdec_begin(struct pdec *d, const char *what, const void *data, size_t len, struct err *e)
{
	*d = (struct pdec){ .what = what, .e = e };
	d->j = cJSON_ParseWithLength(data, len);
	d->at = d->j;
	if (!cJSON_IsObject(d->j)) {
		cJSON_Delete(d->j);
		d->j = NULL;
		d->at = NULL;
		d->rc = err_set(e, -EPROTO, "a %s whose body is not a JSON object", what);
	}
	return d->rc;
}

int pdec_end(struct pdec *d, void **keep)
{
	if (keep && d->rc == 0)
		*keep = d->j;
	else
		cJSON_Delete(d->j);
	d->j = NULL;
	d->at = NULL;
	return d->rc;
}

void pdec_fail(struct pdec *d, const char *key, const char *fmt, ...)
{
	if (d->rc < 0)
		return;
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	d->rc = err_set(d->e, -EPROTO, "a %s whose \"%s%s%s\" %s", d->what, d->in ? d->in : "", d->in ? "." : "", key, why);
}

const char *pdec_kind(const cJSON *v, char *buf, size_t n)
{
	if (!v)
		return "nothing";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNumber(v)) {
		snprintf(buf, n, "the number %.17g", v->valuedouble);
		return buf;
	}
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsArray(v))
		return "a list";
	return "an object";
}

/* The value under key, or NULL: absent and null are one for an optional
 * field; a required one must be there. */
static cJSON *field(struct pdec *d, const char *key, enum pflag f)
{
	if (d->rc < 0 || !d->at)
		return NULL;
	cJSON *v = cJSON_GetObjectItemCaseSensitive(d->at, key);
	if (f == PF_OPT && cJSON_IsNull(v))
		return NULL;
	if (!v && f == PF_REQ)
		pdec_fail(d, key, "is missing");
	return v;
}

bool pdec_int(struct pdec *d, const char *key, enum pflag f, long long lo, long long hi, long long *out)
{
	const cJSON *v = field(d, key, f);
	if (!v)
		return false;
	/* A fraction, NaN, or a number past 2^53 (where a double skips
	 * integers) is not one. */
	double x = cJSON_IsNumber(v) ? v->valuedouble : (double)NAN;
	if (!(x >= (double)lo && x <= (double)hi) || x != floor(x)) {
		char k[64];
		pdec_fail(d, key, "is not an integer from %lld to %lld (it is %s)", lo, hi, pdec_kind(v, k, sizeof k));
		return false;
	}
	*out = (long long)x;
	return true;
}

bool pdec_num(struct pdec *d, const char *key, enum pflag f, double lo, double hi, double *out)
{
	const cJSON *v = field(d, key, f);
	if (!v)
		return false;
	double x = cJSON_IsNumber(v) ? v->valuedouble : (double)NAN;
	if (!(x >= lo && x <= hi)) {
		char k[64];
		pdec_fail(d, key, "is not a number from %g to %g (it is %s)", lo, hi, pdec_kind(v, k, sizeof k));
		return false;
	}
	*out = x;
	return true;
}

bool pdec_bool(struct pdec *d, const char *key, enum pflag f, bool *out)
{
	const cJSON *v = field(d, key, f);
	if (!v)
		return false;
	if (!cJSON_IsBool(v)) {
		char k[64];
		pdec_fail(d, key, "is not a boolean (it is %s)", pdec_kind(v, k, sizeof k));
		return false;
	}
	*out = cJSON_IsTrue(v);
	return true;
}

bool pdec_str(struct pdec *d, const char *key, enum pflag f, size_t max, const char **out)
{
	const cJSON *v = field(d, key, f);
	if (!v)
		return false;
	if (!cJSON_IsString(v)) {
		char k[64];
		pdec_fail(d, key, "is not a string (it is %s)", pdec_kind(v, k, sizeof k));
		return false;
	}
	size_t n = strlen(v->valuestring);
	if (n > max) {
		pdec_fail(d, key, "is longer than %zu bytes (%zu)", max, n);
		return false;
	}
	*out = v->valuestring;
	return true;
}

bool pdec_text(struct pdec *d, const char *key, enum pflag f, size_t cut, bool lines, const char **out)
{
	const char *s;
	if (!pdec_str(d, key, f, SIZE_MAX, &s))
		return false;
	size_t n = strnlen(s, cut);
	char *t = utf8_sanitize((const unsigned char *)s, utf8_prefix(s, n, n), NULL);
	if (!t)
		die_oom();
	for (char *p = t; *p; p++)
		if (((unsigned char)*p < 0x20 && !(lines && *p == '\n')) || *p == 0x7f)
			*p = ' ';
	/* In place of the string it came as: the tree owns it from now on. */
	cJSON *item = cJSON_CreateString(t);
	free(t);
	if (!item)
		die_oom();
	cJSON_ReplaceItemInObjectCaseSensitive(d->at, key, item);
	*out = item->valuestring;
	return true;
}

bool pdec_name(struct pdec *d, const char *key, enum pflag f, char *buf, size_t n)
{
	const char *s;
	if (!pdec_str(d, key, f, n - 1, &s))
		return false;
	memcpy(buf, s, strlen(s) + 1);
	return true;
}

bool pdec_enter(struct pdec *d, const char *key, enum pflag f)
{
	cJSON *v = field(d, key, f);
	if (!v)
		return false;
	if (!cJSON_IsObject(v)) {
		char k[64];
		pdec_fail(d, key, "is not an object (it is %s)", pdec_kind(v, k, sizeof k));
		return false;
	}
	d->at = v;
	d->in = key;
	return true;
}

void pdec_leave(struct pdec *d)
{
	d->at = d->j;
	d->in = NULL;
}

/* The list under key, of at most max entries, or NULL (d's error set when
 * it is something else). */
static const cJSON *list_of(struct pdec *d, const char *key, enum pflag f, size_t max)
{
	const cJSON *list = field(d, key, f);
	if (!list)
		return NULL;
	char kind[64];
	if (!cJSON_IsArray(list)) {
		pdec_fail(d, key, "is not a list (it is %s)", pdec_kind(list, kind, sizeof kind));
		return NULL;
	}
	/* Counted before any entry is read: a forged list of a million
	 * entries costs one walk of the tree the frame's size allowed. */
	size_t k = 0;
	for (const cJSON *it = list->child; it; it = it->next)
		k++;
	if (k > max) {
		pdec_fail(d, key, "holds more than %zu entries (%zu)", max, k);
		return NULL;
	}
	return list;
}

/* One string of a list: true when it is one of lo to hi bytes. */
static bool item_str(struct pdec *d, const char *key, size_t i, const char *part, const cJSON *v, size_t lo, size_t hi,
		     const char **out)
{
	char kind[64];
	size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
	if (!cJSON_IsString(v) || n < lo || n > hi) {
		if (cJSON_IsString(v))
			snprintf(kind, sizeof kind, "a string of %zu bytes", n);
		pdec_fail(d, key, "holds at %zu%s %s, not a string of %zu to %zu bytes", i, part,
			  cJSON_IsString(v) ? kind : pdec_kind(v, kind, sizeof kind), lo, hi);
		return false;
	}
	*out = v->valuestring;
	return true;
}

bool pdec_strv(struct pdec *d, const char *key, enum pflag f, size_t max, size_t len, const char **out, size_t *n)
{
	const cJSON *list = list_of(d, key, f, max);
	if (!list)
		return false;
	size_t k = 0;
	for (const cJSON *it = list->child; it; it = it->next, k++)
		if (!item_str(d, key, k, "", it, 1, len, &out[k]))
			return false;
	*n = k;
	return true;
}

bool pdec_pairv(struct pdec *d, const char *key, enum pflag f, size_t max, size_t len0, size_t len1,
		const char *(*out)[2], size_t *n)
{
	const cJSON *list = list_of(d, key, f, max);
	if (!list)
		return false;
	size_t k = 0;
	for (const cJSON *it = list->child; it; it = it->next, k++) {
		char kind[64];
		if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2) {
			pdec_fail(d, key, "holds at %zu %s, not a list of two strings", k,
				  cJSON_IsArray(it) ? "a list of another length" : pdec_kind(it, kind, sizeof kind));
			return false;
		}
		if (!item_str(d, key, k, "[0]", it->child, 1, len0, &out[k][0]) ||
		    !item_str(d, key, k, "[1]", it->child->next, 0, len1, &out[k][1]))
			return false;
	}
	*n = k;
	return true;
}

bool pdec_pids(struct pdec *d, const char *key, enum pflag f, pid_t *out, size_t max, size_t *n)
{
	const cJSON *list = list_of(d, key, f, max);
	if (!list)
		return false;
	char kind[64];
	size_t k = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		double x = cJSON_IsNumber(it) ? it->valuedouble : (double)NAN;
		if (!(x >= 1 && x <= PROTO_PID_MAX) || x != floor(x)) {
			pdec_fail(d, key, "holds %s, not a pid from 1 to %d", pdec_kind(it, kind, sizeof kind), PROTO_PID_MAX);
			return false;
		}
		out[k++] = (pid_t)x;
	}
	*n = k;
	return true;
}

char *penc_print(cJSON *j)
{
	char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!txt)
		die_oom();
	return txt;
}

void penc_strs(cJSON *j, const char *key, const char *const *s, size_t n)
{
	cJSON *list = cJSON_AddArrayToObject(j, key);
	if (!list)
		die_oom();
	for (size_t i = 0; i < n; i++)
		if (!cJSON_AddItemToArray(list, cJSON_CreateString(s[i])))
			die_oom();
}

void penc_pids(cJSON *j, const char *key, const pid_t *pids, size_t n)
{
	/* A pid dropped would be a live process swept: never silently. */
	cJSON *list = cJSON_AddArrayToObject(j, key);
	if (!list)
		die_oom();
	for (size_t i = 0; i < n; i++)
		if (!cJSON_AddItemToArray(list, cJSON_CreateNumber(pids[i])))
			die_oom();
}
