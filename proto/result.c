/* A cell's result, W_RESULT (result.h). */
#include "result.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "private.h"
#include "wire.h"

static const char *const status_names[] = {
	[RESULT_OK] = "ok",
	[RESULT_ERROR] = "error",
	[RESULT_MEMORY] = "memory",
};

const char *result_status_name(enum result_status s)
{
	return (size_t)s < N_ELEMENTS(status_names) ? status_names[s] : "error";
}

/* ------------------------------------------------------------ encoding */

static void add_str(cJSON *j, const char *key, const char *s)
{
	if (s && !cJSON_AddStringToObject(j, key, s))
		die_oom();
}

static size_t upto(size_t n, size_t max)
{
	return n < max ? n : max;
}

static void add_pairs(cJSON *j, const char *key, const char *const (*pairs)[2], size_t n)
{
	cJSON *list = cJSON_AddArrayToObject(j, key);
	if (!list)
		die_oom();
	for (size_t i = 0; i < n; i++) {
		cJSON *p = cJSON_CreateStringArray(pairs[i], 2);
		if (!p || !cJSON_AddItemToArray(list, p))
			die_oom();
	}
}

static void add_restore(cJSON *j, const struct result_restore *rs)
{
	cJSON *o = cJSON_AddObjectToObject(j, "restore");
	if (!o || !cJSON_AddBoolToObject(o, "verified", rs->verified))
		die_oom();
	penc_strs(o, "restored", rs->restored, upto(rs->n_restored, RESULT_LISTED_MAX));
	add_pairs(o, "failed", (const char *const(*)[2])rs->failed, upto(rs->n_failed, RESULT_LISTED_MAX));
	add_pairs(o, "unsaved", (const char *const(*)[2])rs->unsaved, upto(rs->n_unsaved, RESULT_LISTED_MAX));
	const struct {
		const char *key;
		int n;
	} more[] = { { "restored_more", rs->restored_more }, { "failed_more", rs->failed_more }, { "unsaved_more", rs->unsaved_more } };
	for (size_t i = 0; i < N_ELEMENTS(more); i++)
		if (more[i].n > 0 && !cJSON_AddNumberToObject(o, more[i].key, more[i].n))
			die_oom();
}

char *result_encode(const struct cell_result *r)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		die_oom();
	add_str(j, "status", result_status_name(r->status));
	add_str(j, "result", r->value);
	if (r->has_error) {
		cJSON *e = cJSON_AddObjectToObject(j, "error");
		if (!e)
			die_oom();
		add_str(e, "type", r->error.type ? r->error.type : "Error");
		add_str(e, "message", r->error.message);
		add_str(e, "traceback", r->error.traceback);
		add_str(e, "denied_by", r->error.denied_by);
		add_str(e, "hint", r->error.hint);
		add_str(e, "limit", r->error.limit);
	}
	if (r->n_imports)
		penc_strs(j, "imports", r->imports, upto(r->n_imports, RESULT_IMPORTS_MAX));
	if (r->import_read && !cJSON_AddTrueToObject(j, "import_read"))
		die_oom();
	add_str(j, "effect", r->effect);
	if (r->wchar >= 0 && !cJSON_AddNumberToObject(j, "wchar", (double)r->wchar))
		die_oom();
	if (r->has_restore)
		add_restore(j, &r->restore);
	return penc_print(j);
}

/* ------------------------------------------------------------ decoding */

static void decode_status(struct pdec *d, struct cell_result *r)
{
	const char *st = NULL;
	if (!pdec_str(d, "status", PF_REQ, 16, &st))
		return;
	for (size_t i = 0; i < N_ELEMENTS(status_names); i++)
		if (strcmp(st, status_names[i]) == 0) {
			r->status = (enum result_status)i;
			return;
		}
	pdec_fail(d, "status", "is not \"ok\", \"error\" or \"memory\"");
}

static void decode_error(struct pdec *d, struct cell_result *r)
{
	struct result_error *e = &r->error;
	if (!pdec_enter(d, "error", PF_OPT))
		return;
	r->has_error = true;
	if (pdec_str(d, "type", PF_REQ, RESULT_TYPE_MAX, &e->type) && !e->type[0])
		pdec_fail(d, "type", "is empty");
	pdec_str(d, "message", PF_OPT, WIRE_MAX_PAYLOAD, &e->message);
	pdec_str(d, "traceback", PF_OPT, WIRE_MAX_PAYLOAD, &e->traceback);
	pdec_str(d, "denied_by", PF_OPT, RESULT_WORD_MAX, &e->denied_by);
	pdec_str(d, "hint", PF_OPT, RESULT_HINT_MAX, &e->hint);
	pdec_str(d, "limit", PF_OPT, RESULT_LIMIT_MAX, &e->limit);
	pdec_leave(d);
}

static void decode_restore(struct pdec *d, struct cell_result *r)
{
	struct result_restore *rs = &r->restore;
	if (!pdec_enter(d, "restore", PF_OPT))
		return;
	r->has_restore = true;
	pdec_bool(d, "verified", PF_REQ, &rs->verified);
	pdec_strv(d, "restored", PF_OPT, RESULT_LISTED_MAX, RESULT_VAR_MAX, rs->restored, &rs->n_restored);
	pdec_pairv(d, "failed", PF_OPT, RESULT_LISTED_MAX, RESULT_VAR_MAX, RESULT_WHY_MAX, rs->failed, &rs->n_failed);
	pdec_pairv(d, "unsaved", PF_OPT, RESULT_LISTED_MAX, RESULT_VAR_MAX, RESULT_WHY_MAX, rs->unsaved, &rs->n_unsaved);
	long long more[3] = { 0, 0, 0 };
	pdec_int(d, "restored_more", PF_OPT, 0, INT_MAX, &more[0]);
	pdec_int(d, "failed_more", PF_OPT, 0, INT_MAX, &more[1]);
	pdec_int(d, "unsaved_more", PF_OPT, 0, INT_MAX, &more[2]);
	rs->restored_more = (int)more[0];
	rs->failed_more = (int)more[1];
	rs->unsaved_more = (int)more[2];
	pdec_leave(d);
}

int result_decode(const void *data, size_t len, struct cell_result *r, struct err *e)
{
	struct pdec d;
	*r = (struct cell_result){ .status = RESULT_OK };
	if (pdec_begin(&d, "W_RESULT", data, len, e) < 0)
		return d.rc;
	decode_status(&d, r);
	pdec_str(&d, "result", PF_OPT, WIRE_MAX_PAYLOAD, &r->value);
	decode_error(&d, r);
	pdec_strv(&d, "imports", PF_OPT, RESULT_IMPORTS_MAX, RESULT_MODULE_MAX, r->imports, &r->n_imports);
	pdec_bool(&d, "import_read", PF_OPT, &r->import_read);
	pdec_str(&d, "effect", PF_OPT, RESULT_EFFECT_MAX, &r->effect);
	r->wchar = -1;
	pdec_int(&d, "wchar", PF_OPT, 0, 1LL << 53, &r->wchar);
	decode_restore(&d, r);
	if (pdec_end(&d, &r->decoded) < 0) {
		*r = (struct cell_result){ .status = RESULT_OK };
		return d.rc;
	}
	return 0;
}

void result_free(struct cell_result *r)
{
	cJSON_Delete(r->decoded);
	*r = (struct cell_result){ .status = RESULT_OK };
}

struct cell_result *result_parse(const void *data, size_t len, struct err *e)
{
	struct cell_result *r = xcalloc(1, sizeof *r);
	if (result_decode(data, len, r, e) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

void result_destroy(struct cell_result *r)
{
	if (!r)
		return;
	result_free(r);
	free(r);
}

int save_summary_decode(const void *data, size_t len, struct save_summary *s, struct err *e)
{
	struct pdec d;
	*s = (struct save_summary){ 0 };
	if (pdec_begin(&d, "saver's summary", data, len, e) < 0)
		return d.rc;
	long long more = 0;
	pdec_pairv(&d, "unsaved", PF_OPT, RESULT_LISTED_MAX, RESULT_VAR_MAX, RESULT_WHY_MAX, s->unsaved, &s->n_unsaved);
	pdec_int(&d, "unsaved_more", PF_OPT, 0, INT_MAX, &more);
	s->unsaved_more = (int)more;
	if (pdec_end(&d, &s->decoded) < 0) {
		*s = (struct save_summary){ 0 };
		return d.rc;
	}
	return 0;
}

void save_summary_free(struct save_summary *s)
{
	cJSON_Delete(s->decoded);
	*s = (struct save_summary){ 0 };
}
