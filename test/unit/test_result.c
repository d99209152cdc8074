/* Unit tests of a cell's result (proto/result.c): the decoder holds every
 * field to its type and bound and names the one it refuses; the encoder's
 * output decodes to the same struct; and the real bootstrap, run in the
 * embedded interpreter, sends what the decoder takes, for the cells a user
 * may write (a lone surrogate in a message, a 10 kB class name, a message
 * of megabytes) as for the plain ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <Python.h>
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../interp/pyembed.h"
#include "../../proto/result.h"
#include "../../proto/smsg.h"

/* Decodes body: 0 and r, or the error's text in e. */
static int decode(const char *body, struct cell_result *r, struct err *e)
{
	*e = (struct err){ 0 };
	return result_decode(body, strlen(body), r, e);
}

/* body is refused, with an error that names W_RESULT and the field. */
static void refused(const char *body, const char *field)
{
	struct err e;
	struct cell_result r;
	if (decode(body, &r, &e) == 0)
		fail_msg("accepted: %.200s", body);
	char want[128];
	snprintf(want, sizeof want, "a W_RESULT whose \"%s\"", field);
	if (!strstr(e.msg, want))
		fail_msg("%.200s: the error does not name %s: %s", body, field, e.msg);
	/* Refused, it holds nothing. */
	assert_null(r.value);
	assert_false(r.has_error);
	assert_null(r.decoded);
}

static void accepted(const char *body, struct cell_result *r)
{
	struct err e;
	if (decode(body, r, &e) != 0)
		fail_msg("refused: %.200s: %s", body, e.msg);
}

/* A string of n bytes (x...), malloc'd. */
static char *xs(size_t n)
{
	char *s = xmalloc(n + 1);
	memset(s, 'x', n);
	s[n] = 0;
	return s;
}

static void test_round_trip(void **state)
{
	(void)state;
	struct cell_result in = { .status = RESULT_ERROR, .value = "'v'", .has_error = true, .n_imports = 2, .has_restore = true };
	in.error = (struct result_error){ "PermissionError", "no", "Traceback...\n", "fs_write", "write workspace/x", "max_file_mb: 10" };
	in.imports[0] = "scipy.stats";
	in.imports[1] = "sklearn";
	in.restore.verified = true;
	in.restore.restored[0] = "df";
	in.restore.n_restored = 1;
	in.restore.restored_more = 40;
	in.restore.failed[0][0] = "model";
	in.restore.failed[0][1] = "PicklingError: no";
	in.restore.n_failed = 1;
	in.restore.unsaved[0][0] = "gen";
	in.restore.unsaved[0][1] = "";
	in.restore.n_unsaved = 1;
	in.restore.unsaved_more = 3;
	in.effect = "subprocess.Popen";
	in.wchar = 12;
	char *txt = result_encode(&in);
	struct cell_result out;
	accepted(txt, &out);
	free(txt);
	assert_int_equal(out.status, RESULT_ERROR);
	assert_string_equal(out.value, "'v'");
	assert_true(out.has_error);
	assert_string_equal(out.error.type, "PermissionError");
	assert_string_equal(out.error.message, "no");
	assert_string_equal(out.error.traceback, "Traceback...\n");
	assert_string_equal(out.error.denied_by, "fs_write");
	assert_string_equal(out.error.hint, "write workspace/x");
	assert_string_equal(out.error.limit, "max_file_mb: 10");
	assert_int_equal(out.n_imports, 2);
	assert_string_equal(out.imports[1], "sklearn");
	assert_true(out.has_restore && out.restore.verified);
	assert_int_equal(out.restore.n_restored, 1);
	assert_string_equal(out.restore.restored[0], "df");
	assert_int_equal(out.restore.restored_more, 40);
	assert_int_equal(out.restore.n_failed, 1);
	assert_string_equal(out.restore.failed[0][1], "PicklingError: no");
	assert_int_equal(out.restore.n_unsaved, 1);
	assert_string_equal(out.restore.unsaved[0][0], "gen");
	assert_string_equal(out.restore.unsaved[0][1], "");
	assert_int_equal(out.restore.failed_more, 0);
	assert_int_equal(out.restore.unsaved_more, 3);
	assert_string_equal(out.effect, "subprocess.Popen");
	assert_int_equal(out.wchar, 12);
	result_free(&out);
	assert_null(out.decoded);

	/* The least: a status.  Each status by its name. */
	for (int s = RESULT_OK; s <= RESULT_MEMORY; s++) {
		struct cell_result m = { .status = (enum result_status)s, .wchar = -1 };
		txt = result_encode(&m);
		accepted(txt, &out);
		assert_int_equal(out.status, s);
		assert_null(out.effect);
		assert_int_equal(out.wchar, -1); /* absent: not known */
		assert_false(out.has_error || out.has_restore);
		assert_null(out.value);
		assert_int_equal(out.n_imports, 0);
		result_free(&out);
		free(txt);
	}
	assert_string_equal(result_status_name(RESULT_MEMORY), "memory");
}

static void test_status(void **state)
{
	(void)state;
	refused("{}", "status");
	/* The session's view of its own effects: bounded, of its type. */
	refused("{\"status\": \"ok\", \"wchar\": -1}", "wchar");
	refused("{\"status\": \"ok\", \"wchar\": \"12\"}", "wchar");
	refused("{\"status\": \"ok\", \"effect\": 5}", "effect");
	char *x = xs(RESULT_EFFECT_MAX + 1), *body = xasprintf("{\"status\": \"ok\", \"effect\": \"%s\"}", x);
	refused(body, "effect");
	free(body);
	free(x);
	refused("{\"status\": null}", "status");
	refused("{\"status\": 0}", "status");
	refused("{\"status\": \"OK\"}", "status");
	refused("{\"status\": \"pending\"}", "status");
	refused("{\"status\": \"okokokokokokokokokokok\"}", "status");
	struct err e;
	struct cell_result r;
	assert_int_equal(decode("{\"status\": true}", &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"status\" is not a string (it is a boolean)");
	assert_int_equal(decode("{\"status\": \"done\"}", &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"status\" is not \"ok\", \"error\" or \"memory\"");
	/* Not an object at all. */
	static const char *const bodies[] = { "", "[]", "\"ok\"", "{\"status\": \"ok\"", "nul" };
	for (size_t i = 0; i < N_ELEMENTS(bodies); i++) {
		assert_int_equal(decode(bodies[i], &r, &e), -EPROTO);
		assert_string_equal(e.msg, "a W_RESULT whose body is not a JSON object");
	}
}

/* Each string of the error, at its bound and one byte past it. */
static void test_error_fields(void **state)
{
	(void)state;
	static const struct {
		const char *key;
		size_t max;
	} bounded[] = { { "type", RESULT_TYPE_MAX }, { "denied_by", RESULT_WORD_MAX }, { "hint", RESULT_HINT_MAX }, { "limit", RESULT_LIMIT_MAX } };
	char body[8192], field[64];
	for (size_t i = 0; i < N_ELEMENTS(bounded); i++) {
		snprintf(field, sizeof field, "error.%s", bounded[i].key);
		for (size_t n = bounded[i].max; n <= bounded[i].max + 1; n++) {
			char *s = xs(n);
			if (strcmp(bounded[i].key, "type") == 0)
				snprintf(body, sizeof body, "{\"status\": \"error\", \"error\": {\"type\": \"%s\"}}", s);
			else
				snprintf(body, sizeof body, "{\"status\": \"error\", \"error\": {\"type\": \"E\", \"%s\": \"%s\"}}",
					 bounded[i].key, s);
			free(s);
			if (n > bounded[i].max) {
				refused(body, field);
				continue;
			}
			struct cell_result r;
			accepted(body, &r);
			assert_true(r.has_error);
			result_free(&r);
		}
		/* Of another type. */
		snprintf(body, sizeof body, "{\"status\": \"error\", \"error\": {\"type\": \"E\", \"%s\": 5}}", bounded[i].key);
		if (strcmp(bounded[i].key, "type") == 0)
			snprintf(body, sizeof body, "{\"status\": \"error\", \"error\": {\"type\": 5}}");
		refused(body, field);
	}
	refused("{\"status\": \"error\", \"error\": {\"type\": \"E\", \"message\": []}}", "error.message");
	refused("{\"status\": \"error\", \"error\": {\"type\": \"E\", \"traceback\": {}}}", "error.traceback");
	refused("{\"status\": \"error\", \"error\": {\"message\": \"no type\"}}", "error.type");
	refused("{\"status\": \"error\", \"error\": {\"type\": \"\"}}", "error.type");
	refused("{\"status\": \"error\", \"error\": \"ValueError\"}", "error");
	refused("{\"status\": \"error\", \"error\": [\"ValueError\"]}", "error");
	refused("{\"status\": \"ok\", \"result\": 2}", "result");
	struct err e;
	struct cell_result r;
	assert_int_equal(decode("{\"status\": \"error\", \"error\": {\"type\": 5}}", &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"error.type\" is not a string (it is the number 5)");

	/* null is absent; the long texts are bounded by the frame only. */
	char *big = xs(1 << 20);
	char *txt = xmalloc((1 << 20) + 200);
	snprintf(txt, (1 << 20) + 200,
		 "{\"status\": \"error\", \"result\": null, \"error\": {\"type\": \"E\", \"message\": \"%s\", \"hint\": null, \"limit\": null}}", big);
	accepted(txt, &r);
	assert_null(r.value);
	assert_int_equal(strlen(r.error.message), 1 << 20);
	assert_null(r.error.hint);
	assert_null(r.error.traceback);
	result_free(&r);
	free(big);
	free(txt);
	accepted("{\"status\": \"ok\", \"error\": null}", &r);
	assert_false(r.has_error);
	result_free(&r);
}

/* A field the codec does not know is ignored, as in every decoder. */
static void test_extra_fields(void **state)
{
	(void)state;
	struct cell_result r;
	accepted("{\"status\": \"ok\", \"result\": \"1\", \"figures\": [1, {}], \"pid\": 5, \"error\": {\"type\": \"E\", \"x\": []}}", &r);
	assert_string_equal(r.value, "1");
	assert_string_equal(r.error.type, "E");
	result_free(&r);
}

static void test_imports(void **state)
{
	(void)state;
	char body[8192];
	size_t n = (size_t)snprintf(body, sizeof body, "{\"status\": \"ok\", \"imports\": [");
	for (int i = 0; i < RESULT_IMPORTS_MAX; i++)
		n += (size_t)snprintf(body + n, sizeof body - n, "%s\"m%d\"", i ? ", " : "", i);
	snprintf(body + n, sizeof body - n, "]}");
	struct cell_result r;
	accepted(body, &r);
	assert_int_equal(r.n_imports, RESULT_IMPORTS_MAX);
	assert_string_equal(r.imports[RESULT_IMPORTS_MAX - 1], "m15");
	result_free(&r);
	/* One more than a cell reports. */
	snprintf(body + n, sizeof body - n, ", \"m16\"]}");
	refused(body, "imports");
	struct err e;
	assert_int_equal(decode(body, &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"imports\" holds more than 16 entries (17)");
	accepted("{\"status\": \"ok\", \"import_read\": true}", &r);
	assert_true(r.import_read);
	result_free(&r);
	refused("{\"status\": \"ok\", \"import_read\": 1}", "import_read");
	refused("{\"status\": \"ok\", \"imports\": \"numpy\"}", "imports");
	refused("{\"status\": \"ok\", \"imports\": [\"numpy\", 7]}", "imports");
	refused("{\"status\": \"ok\", \"imports\": [\"\"]}", "imports");
	assert_int_equal(decode("{\"status\": \"ok\", \"imports\": [\"numpy\", null]}", &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"imports\" holds at 1 null, not a string of 1 to 128 bytes");
	char *s = xs(RESULT_MODULE_MAX);
	snprintf(body, sizeof body, "{\"status\": \"ok\", \"imports\": [\"%s\"]}", s);
	accepted(body, &r);
	result_free(&r);
	snprintf(body, sizeof body, "{\"status\": \"ok\", \"imports\": [\"%sx\"]}", s);
	refused(body, "imports");
	free(s);
}

/* A list of count entries, each entry as given, under key of restore. */
static char *restore_with(const char *key, size_t count, const char *entry)
{
	size_t cap = 256 + count * (strlen(entry) + 2);
	char *b = xmalloc(cap);
	size_t n = (size_t)snprintf(b, cap, "{\"status\": \"ok\", \"restore\": {\"verified\": true, \"%s\": [", key);
	for (size_t i = 0; i < count; i++)
		n += (size_t)snprintf(b + n, cap - n, "%s%s", i ? "," : "", entry);
	snprintf(b + n, cap - n, "]}}");
	return b;
}

static void test_restore(void **state)
{
	(void)state;
	struct cell_result r;
	accepted("{\"status\": \"ok\", \"restore\": {\"verified\": false}}", &r);
	assert_true(r.has_restore);
	assert_false(r.restore.verified);
	assert_int_equal(r.restore.n_restored + r.restore.n_failed + r.restore.n_unsaved, 0);
	result_free(&r);
	refused("{\"status\": \"ok\", \"restore\": {}}", "restore.verified");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": 1}}", "restore.verified");
	refused("{\"status\": \"ok\", \"restore\": true}", "restore");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"restored\": [1]}}", "restore.restored");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"failed\": [\"x\"]}}", "restore.failed");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"failed\": [[\"x\"]]}}", "restore.failed");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"failed\": [[\"x\", \"y\", \"z\"]]}}", "restore.failed");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"unsaved\": [[\"x\", 1]]}}", "restore.unsaved");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"unsaved\": [[\"\", \"y\"]]}}", "restore.unsaved");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"restored_more\": -1}}", "restore.restored_more");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"failed_more\": 1.5}}", "restore.failed_more");
	refused("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"unsaved_more\": 3e9}}", "restore.unsaved_more");
	struct err e;
	assert_int_equal(decode("{\"status\": \"ok\", \"restore\": {\"verified\": true, \"failed\": [[\"a\", \"b\"], [\"x\", 2]]}}", &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"restore.failed\" holds at 1[1] the number 2, not a string of 0 to 512 bytes");

	/* Each list at its bound, and one past it; each string at its bound,
	 * and one byte past it. */
	char *name = xs(RESULT_VAR_MAX), *why = xs(RESULT_WHY_MAX);
	char pair[1024], pair_long[1024], quoted[300];
	snprintf(pair, sizeof pair, "[\"%s\", \"%s\"]", name, why);
	snprintf(quoted, sizeof quoted, "\"%s\"", name);
	static const char *const lists[] = { "restored", "failed", "unsaved" };
	for (size_t i = 0; i < N_ELEMENTS(lists); i++) {
		const char *entry = i ? pair : quoted;
		char field[64];
		snprintf(field, sizeof field, "restore.%s", lists[i]);
		char *b = restore_with(lists[i], RESULT_LISTED_MAX, entry);
		accepted(b, &r);
		assert_int_equal(i == 0 ? r.restore.n_restored : i == 1 ? r.restore.n_failed : r.restore.n_unsaved, RESULT_LISTED_MAX);
		result_free(&r);
		free(b);
		b = restore_with(lists[i], RESULT_LISTED_MAX + 1, entry);
		refused(b, field);
		free(b);
		snprintf(pair_long, sizeof pair_long, i ? "[\"%sx\", \"y\"]" : "\"%sx\"", name);
		b = restore_with(lists[i], 1, pair_long);
		refused(b, field);
		free(b);
		if (i) {
			snprintf(pair_long, sizeof pair_long, "[\"n\", \"%sx\"]", why);
			b = restore_with(lists[i], 1, pair_long);
			refused(b, field);
			free(b);
		}
	}
	free(name);
	free(why);
}

/* A forged list of a million entries: refused by its count, before any
 * entry is looked at, and the error says how many it held. */
static void test_forged_oversize_list(void **state)
{
	(void)state;
	size_t count = 1000000;
	char *b = restore_with("restored", count, "0");
	struct err e;
	struct cell_result r;
	assert_int_equal(decode(b, &r, &e), -EPROTO);
	assert_string_equal(e.msg, "a W_RESULT whose \"restore.restored\" holds more than 32 entries (1000000)");
	free(b);
	char *imp = xmalloc(count * 2 + 64);
	size_t n = (size_t)sprintf(imp, "{\"status\": \"ok\", \"imports\": [");
	for (size_t i = 0; i < count; i++)
		n += (size_t)sprintf(imp + n, "%s1", i ? "," : "");
	strcpy(imp + n, "]}");
	refused(imp, "imports");
	free(imp);
}

/* ------------------------------------------------ the bootstrap's side */

static char *py_text(const char *expr)
{
	PyObject *main = PyImport_AddModule("__main__");
	PyObject *g = PyModule_GetDict(main);
	PyObject *v = PyRun_String(expr, Py_eval_input, g, g);
	if (!v) {
		PyErr_Print();
		fail_msg("python: %s", expr);
	}
	const char *s = PyUnicode_AsUTF8(v);
	assert_non_null(s);
	char *out = xstrdup(s);
	Py_DECREF(v);
	return out;
}

/* The bootstrap's handle, on a W_EXEC of code: its answer, decoded (the
 * raw text in *raw when asked). */
static struct cell_result *cell(const char *code, char **raw)
{
	static int n;
	struct smsg_exec m = { .code = code, .cell = ++n };
	char *msg = smsg_exec_encode(&m), *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	assert_int_equal(py_call("handle", msg, &out, &len, &is_bytes, &e), 0);
	free(msg);
	struct cell_result *r = result_parse(out, len, &e);
	if (!r)
		fail_msg("the bootstrap's result for %.80s is refused: %s", code, e.msg);
	if (raw)
		*raw = out;
	else
		free(out);
	return r;
}

static int setup_python(void **state)
{
	(void)state;
	struct err e = { 0 };
	if (py_start(&e) < 0)
		return -1;
	char *out;
	size_t len;
	int is_bytes;
	if (py_call("session_init", "{\"name\": \"t\", \"seed\": 1}", &out, &len, &is_bytes, &e) < 0)
		return -1;
	free(out);
	/* As the zygote's configuration sets it: the output limit. */
	return PyRun_SimpleString("import _psm\n_psm._cfg['max_result_chars'] = 2000\n");
}

/* The keys and bounds the bootstrap writes are the header's. */
static void test_bootstrap_shape(void **state)
{
	(void)state;
	char *txt = py_text("__import__('_psm').result_shape('')");
	cJSON *j = cJSON_Parse(txt);
	free(txt);
	assert_non_null(j);
	const cJSON *st = cJSON_GetObjectItem(j, "status");
	assert_int_equal(cJSON_GetArraySize(st), RESULT_MEMORY + 1);
	for (int s = RESULT_OK; s <= RESULT_MEMORY; s++)
		assert_string_equal(cJSON_GetArrayItem(st, s)->valuestring, result_status_name((enum result_status)s));
	static const struct {
		const char *key;
		int max; /* -1: the frame's */
	} err_keys[] = { { "type", RESULT_TYPE_MAX }, { "message", -1 }, { "traceback", -1 },
			 { "denied_by", RESULT_WORD_MAX }, { "hint", RESULT_HINT_MAX }, { "limit", RESULT_LIMIT_MAX } };
	const cJSON *ek = cJSON_GetObjectItem(j, "error");
	assert_int_equal(cJSON_GetArraySize(ek), N_ELEMENTS(err_keys));
	for (size_t i = 0; i < N_ELEMENTS(err_keys); i++) {
		const cJSON *p = cJSON_GetArrayItem(ek, (int)i);
		assert_string_equal(cJSON_GetArrayItem(p, 0)->valuestring, err_keys[i].key);
		const cJSON *mx = cJSON_GetArrayItem(p, 1);
		assert_int_equal(cJSON_IsNull(mx) ? -1 : mx->valueint, err_keys[i].max);
	}
	const cJSON *im = cJSON_GetObjectItem(j, "imports"), *ls = cJSON_GetObjectItem(j, "listed");
	assert_int_equal(cJSON_GetArrayItem(im, 0)->valueint, RESULT_IMPORTS_MAX);
	assert_int_equal(cJSON_GetArrayItem(im, 1)->valueint, RESULT_MODULE_MAX);
	assert_int_equal(cJSON_GetArrayItem(ls, 0)->valueint, RESULT_LISTED_MAX);
	assert_int_equal(cJSON_GetArrayItem(ls, 1)->valueint, RESULT_VAR_MAX);
	assert_int_equal(cJSON_GetArrayItem(ls, 2)->valueint, RESULT_WHY_MAX);
	const cJSON *rl = cJSON_GetObjectItem(j, "restore");
	assert_int_equal(cJSON_GetArraySize(rl), 3);
	assert_string_equal(cJSON_GetArrayItem(rl, 0)->valuestring, "restored");
	assert_string_equal(cJSON_GetArrayItem(rl, 1)->valuestring, "failed");
	assert_string_equal(cJSON_GetArrayItem(rl, 2)->valuestring, "unsaved");
	assert_int_equal(cJSON_GetObjectItem(j, "frame_max")->valueint, result_frame_max(2000));
	cJSON_Delete(j);
}

static void test_bootstrap_cells(void **state)
{
	(void)state;
	struct cell_result *r = cell("1 + 1", NULL);
	assert_int_equal(r->status, RESULT_OK);
	assert_string_equal(r->value, "2");
	assert_false(r->has_error || r->has_restore);
	result_destroy(r);

	r = cell("import json, colorsys\nraise KeyError('k')", NULL);
	assert_int_equal(r->status, RESULT_ERROR);
	assert_string_equal(r->error.type, "KeyError");
	assert_string_equal(r->error.message, "'k'");
	assert_non_null(strstr(r->error.traceback, "KeyError"));
	assert_true(r->n_imports >= 1);
	result_destroy(r);

	r = cell("raise MemoryError()", NULL);
	assert_int_equal(r->status, RESULT_MEMORY);
	assert_string_equal(r->error.type, "MemoryError");
	result_destroy(r);

	/* A lone surrogate (str(e) may hold one; JSON cannot carry it): its
	 * escape, not a frame the server cannot read. */
	r = cell("raise ValueError('bad \\udcff byte')", NULL);
	assert_string_equal(r->error.message, "bad \\udcff byte");
	result_destroy(r);

	/* A NUL in a message: its escape, not a cut string. */
	r = cell("raise ValueError('a\\0b')", NULL);
	assert_string_equal(r->error.message, "a\\x00b");
	result_destroy(r);

	/* A class with a 10 kB name: cut to its bound, at a character. */
	r = cell("raise type('\\u00e9' * 5000, (Exception,), {})()", NULL);
	assert_int_equal(strlen(r->error.type), RESULT_TYPE_MAX);
	result_destroy(r);
}

/* The effect a cell's result names (its own view of its descriptors,
 * which stands in where the server cannot read them): want, or none. */
static void effect_is(const char *code, const char *want)
{
	struct cell_result *r = cell(code, NULL);
	assert_int_equal(r->status, RESULT_OK);
	if (!want && r->effect)
		fail_msg("%s: an effect where none was: %s", code, r->effect);
	if (want && (!r->effect || !strstr(r->effect, want)))
		fail_msg("%s: effect %s, not %s", code, r->effect ? r->effect : "(none)", want);
	result_destroy(r);
}

/* The session's own view (_psm_native.self_view, read once a cell: the
 * view after a cell stands for the one before the next): a descriptor a
 * cell opens, moves or closes is named, one that nothing moved is not, and
 * what moved it between two cells is the next cell's, never no one's.
 * Its own listing (on /proc) is never among the descriptors. */
static void test_bootstrap_self_view(void **state)
{
	(void)state;
	char path[] = "/tmp/psm-selfview-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abcdefgh", 8), 8);
	close(fd);
	/* What moved before this test (this program's stdout, when it is a
	 * file, moves with every line the tests before printed) is the next
	 * cell's: this one's, whatever it says. */
	result_destroy(cell("0", NULL));
	char code[128];
	snprintf(code, sizeof code, "_sv = open('%s')", path);
	effect_is(code, "opened");
	effect_is("1", NULL);
	effect_is("_sv.read(3)", "moved");
	effect_is("2", NULL);
	/* Between two cells (a thread, the bootstrap): the next one's. */
	assert_int_equal(PyRun_SimpleString("import _psm, os\nos.lseek(_psm._session['ns']['_sv'].fileno(), 1, 0)\n"), 0);
	effect_is("3", "moved");
	effect_is("4", NULL);
	effect_is("_sv.close()", "closed");
	effect_is("5", NULL);
	/* A process that becomes the session (a resumed checkpoint, a copy)
	 * reads its own view before its first cell, even under the pid that
	 * took the kept one: what its parent did before it is no cell's. */
	char rolled[256];
	snprintf(rolled, sizeof rolled, "import _psm\n_psm._session['ns']['_sv2'] = open('%s')\n_psm.after_rollback('')\n", path);
	assert_int_equal(PyRun_SimpleString(rolled), 0);
	effect_is("6", NULL);
	effect_is("_sv2.close()", "closed");
	char *same = py_text("str(__import__('_psm_native').self_view() == __import__('_psm_native').self_view())");
	assert_string_equal(same, "True");
	free(same);
	unlink(path);
}

/* import_read: whether an import of the cell read beyond the installed
 * Python (a name not found, a module from another directory); a module
 * already loaded, or one of the installation, is not. */
static void test_bootstrap_import_read(void **state)
{
	(void)state;
	char dir[] = "/tmp/psm-test-import-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char file[sizeof dir + 32];
	snprintf(file, sizeof file, "%s/psm_own_module.py", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("v = 1\n", f);
	fclose(f);
	/* As in the zygote: the installation's directories, the audit hook. */
	assert_int_equal(PyRun_SimpleString("import _psm\n_psm._warm_setup()\n"), 0);
	static const struct {
		const char *code;
		bool read;
	} cases[] = {
		{ "x = 1", false },
		{ "import sys, os", false },          /* loaded: no search */
		{ "import plistlib\nplistlib.__name__", false }, /* the installation's */
		{ "import psm_no_such_module", true },
		{ "try:\n    import psm_no_such_either\nexcept ImportError:\n    pass", true },
		{ "import plistlib", false },
	};
	for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
		struct cell_result *r = cell(cases[i].code, NULL);
		if (r->import_read != cases[i].read)
			fail_msg("import_read %d for: %s", r->import_read, cases[i].code);
		result_destroy(r);
	}
	char code[sizeof dir + 96];
	snprintf(code, sizeof code, "import sys\nsys.path.insert(0, '%s')\nimport psm_own_module", dir);
	struct cell_result *r = cell(code, NULL);
	assert_int_equal(r->status, RESULT_OK);
	assert_true(r->import_read);
	result_destroy(r);
	r = cell("import psm_own_module", NULL); /* loaded now */
	assert_false(r->import_read);
	result_destroy(r);
	unlink(file);
	rmdir(dir);
}

/* Long texts together fit the frame the server reads: cut to their head
 * and tail, never a frame over its size (which ends the session). */
static void test_bootstrap_fits_the_frame(void **state)
{
	(void)state;
	char *raw;
	struct cell_result *r = cell("raise ValueError('\\U0001f600' * 3_000_000)", &raw);
	assert_true(strlen(raw) <= result_frame_max(2000));
	assert_string_equal(r->error.type, "ValueError");
	assert_non_null(strstr(r->error.message, "characters omitted"));
	result_destroy(r);
	free(raw);
	r = cell("class R:\n    def __repr__(self): return '\\U0001f600' * 100000\nR()", &raw);
	assert_true(strlen(raw) <= result_frame_max(2000));
	assert_non_null(strstr(r->value, "characters omitted"));
	result_destroy(r);
	free(raw);
}

/* What a restore reports, however many names: RESULT_LISTED_MAX of each
 * list and a count of the rest; each name and reason within its bound. */
static void test_bootstrap_restore_lists(void **state)
{
	(void)state;
	char *txt = py_text("__import__('_psm')._wire_result({'status': 'ok', 'result': None, 'error': None, 'restore': {"
			    "'verified': True, 'restored': ['v%d' % i for i in range(100)],"
			    "'failed': [['f', 'E: ' + 'x' * 1000], 'odd'], 'unsaved': [['\\udcff' * 300, 'y']] * 40}})");
	struct err e = { 0 };
	struct cell_result *r = result_parse(txt, strlen(txt), &e);
	if (!r)
		fail_msg("refused: %s", e.msg);
	free(txt);
	assert_true(r->restore.verified);
	assert_int_equal(r->restore.n_restored, RESULT_LISTED_MAX);
	assert_int_equal(r->restore.restored_more, 100 - RESULT_LISTED_MAX);
	assert_int_equal(r->restore.n_failed, 2);
	assert_int_equal(strlen(r->restore.failed[0][1]), RESULT_WHY_MAX);
	assert_string_equal(r->restore.failed[1][0], "odd");
	assert_int_equal(r->restore.n_unsaved, RESULT_LISTED_MAX);
	assert_int_equal(r->restore.unsaved_more, 40 - RESULT_LISTED_MAX);
	assert_true(strlen(r->restore.unsaved[0][0]) <= RESULT_VAR_MAX);
	result_destroy(r);
}

/* The saver's summary: the names a save left out, held to a result's
 * bounds (the saver runs the user's __reduce__ code). */
static void test_save_summary(void **state)
{
	(void)state;
	struct save_summary sm;
	struct err e = { 0 };
	const char *good = "{\"unsaved\": [[\"gen\", \"TypeError: cannot pickle 'generator' object\"]], \"unsaved_more\": 12}";
	assert_int_equal(save_summary_decode(good, strlen(good), &sm, &e), 0);
	assert_int_equal(sm.n_unsaved, 1);
	assert_string_equal(sm.unsaved[0][0], "gen");
	assert_int_equal(sm.unsaved_more, 12);
	save_summary_free(&sm);
	assert_int_equal(save_summary_decode("{}", 2, &sm, &e), 0);
	assert_int_equal(sm.n_unsaved, 0);
	save_summary_free(&sm);
	static const char *const bad[][2] = {
		{ "[]", "not a JSON object" },
		{ "{\"unsaved\": 5}", "\"unsaved\"" },
		{ "{\"unsaved\": [[\"x\", 1]]}", "\"unsaved\"" },
		{ "{\"unsaved\": [[\"\", \"y\"]]}", "\"unsaved\"" },
		{ "{\"unsaved_more\": -1}", "\"unsaved_more\"" },
		{ "{\"unsaved_more\": 1.5}", "\"unsaved_more\"" },
	};
	for (size_t i = 0; i < N_ELEMENTS(bad); i++) {
		e = (struct err){ 0 };
		if (save_summary_decode(bad[i][0], strlen(bad[i][0]), &sm, &e) != -EPROTO || !strstr(e.msg, bad[i][1]))
			fail_msg("%s: accepted or wrong error: %s", bad[i][0], e.msg);
		assert_int_equal(sm.n_unsaved, 0);
	}
	/* One pair past the list's bound, one byte past a name's. */
	char *name = xs(RESULT_VAR_MAX);
	size_t cap = (RESULT_LISTED_MAX + 1) * (RESULT_VAR_MAX + 16) + 64;
	char *b = xcalloc(1, cap);
	size_t n = (size_t)snprintf(b, cap, "{\"unsaved\": [");
	for (int i = 0; i < RESULT_LISTED_MAX + 1; i++)
		n += (size_t)snprintf(b + n, cap - n, "%s[\"%s\", \"y\"]", i ? ", " : "", name);
	snprintf(b + n, cap - n, "]}");
	assert_int_equal(save_summary_decode(b, strlen(b), &sm, &e), -EPROTO);
	snprintf(b, cap, "{\"unsaved\": [[\"%sx\", \"y\"]]}", name);
	assert_int_equal(save_summary_decode(b, strlen(b), &sm, &e), -EPROTO);
	snprintf(b, cap, "{\"unsaved\": [[\"%s\", \"y\"]]}", name);
	assert_int_equal(save_summary_decode(b, strlen(b), &sm, &e), 0);
	save_summary_free(&sm);
	free(b);
	free(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_error_fields),
		cmocka_unit_test(test_extra_fields),
		cmocka_unit_test(test_imports),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_forged_oversize_list),
		cmocka_unit_test(test_save_summary),
	};
	const struct CMUnitTest py_tests[] = {
		cmocka_unit_test(test_bootstrap_shape),
		cmocka_unit_test(test_bootstrap_cells),
		cmocka_unit_test(test_bootstrap_fits_the_frame),
		cmocka_unit_test(test_bootstrap_restore_lists),
		cmocka_unit_test(test_bootstrap_import_read),
		cmocka_unit_test(test_bootstrap_self_view),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	/* The interpreter is never finalized (nor is it in the zygote): its
	 * group runs in a child that ends with _exit, so that the leak check
	 * of the sanitizer build judges the codec's own allocations (above)
	 * and not what CPython keeps until the process ends. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int rc = cmocka_run_group_tests(py_tests, setup_python, NULL);
		fflush(stdout);
		fflush(stderr);
		_exit(rc ? 1 : 0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		failed++;
	return failed;
}
