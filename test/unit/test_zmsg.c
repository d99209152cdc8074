/* Unit tests of the zygote messages' codecs (proto/zmsg.c): what one side
 * encodes the other decodes to the same struct, and a body from below
 * that does not hold to a field's type and range is refused with an error
 * that names the message and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/zmsg.h"

typedef int (*decode_fn)(const void *, size_t, void *, struct err *);

/* Each body is refused, and the error names the message and, for an
 * object, the field given with it ("" for a body that is no object). */
struct refusal {
	const char *body, *field;
};

static void refused(decode_fn dec, void *out, const char *what, const struct refusal *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct err e = { 0 };
		if (dec(r[i].body, strlen(r[i].body), out, &e) == 0)
			fail_msg("accepted: %s", r[i].body);
		if (!strstr(e.msg, what))
			fail_msg("%s: %s", r[i].body, e.msg);
		char quoted[64];
		snprintf(quoted, sizeof quoted, "\"%s\"", r[i].field);
		if (r[i].field[0] && !strstr(e.msg, quoted))
			fail_msg("%s: %s", r[i].body, e.msg);
	}
}
#define REFUSED(dec, out, what, rows) refused((decode_fn)(dec), (out), (what), (rows), sizeof(rows) / sizeof(rows)[0])

static void test_spawn_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_spawn in = { .id = 7, .seed = -42, .checkpoint = true, .persist_cap = 1073741824ull }, out;
	snprintf(in.name, sizeof in.name, "%s", "default");
	char *txt = zmsg_spawn_encode(&in);
	assert_int_equal(zmsg_spawn_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.id, 7);
	assert_string_equal(out.name, "default");
	assert_true(out.seed == -42);
	assert_true(out.checkpoint);
	assert_true(out.persist_cap == 1073741824ull);
	free(txt);
	static const struct refusal bad[] = {
		{ "{\"name\":\"a\"}", "id" },
		{ "{\"id\":0,\"name\":\"a\"}", "id" },
		{ "{\"id\":1.5,\"name\":\"a\"}", "id" },
		{ "{\"id\":1}", "name" },
		{ "{\"id\":1,\"name\":\"\"}", "name" },
		{ "{\"id\":1,\"name\":7}", "name" },
		{ "{\"id\":1,\"name\":\"a\",\"checkpoint\":1}", "checkpoint" },
		{ "{\"id\":1,\"name\":\"a\",\"persist_cap\":-1}", "persist_cap" },
		{ "{\"id\":1,\"name\":\"a\",\"seed\":\"3\"}", "seed" },
		{ "not json", "" },
	};
	REFUSED(zmsg_spawn_decode, &out, "W_SPAWN", bad);
}

static void test_spawned_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_spawned in = { .id = 3, .pid = 1234 }, out;
	char *txt = zmsg_spawned_encode(&in);
	assert_int_equal(zmsg_spawned_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.id, 3);
	assert_int_equal(out.pid, 1234);
	assert_string_equal(out.error, "");
	free(txt);
	/* A failed fork: -1 and why, the why made one clean line. */
	const char *failed = "{\"id\":3,\"pid\":-1,\"error\":\"Resource\\ntemporarily unavailable\"}";
	assert_int_equal(zmsg_spawned_decode(failed, strlen(failed), &out, &e), 0);
	assert_int_equal(out.pid, -1);
	assert_string_equal(out.error, "Resource temporarily unavailable");
	static const struct refusal bad[] = {
		{ "{\"pid\":5}", "id" },
		{ "{\"id\":2147483648,\"pid\":5}", "id" },
		{ "{\"id\":1}", "pid" },
		{ "{\"id\":1,\"pid\":-2}", "pid" },
		{ "{\"id\":1,\"pid\":4194305}", "pid" },
		{ "{\"id\":1,\"pid\":\"5\"}", "pid" },
		{ "{\"id\":1,\"pid\":-1,\"error\":5}", "error" },
		{ "[]", "" },
	};
	REFUSED(zmsg_spawned_decode, &out, "W_SPAWNED", bad);
}

static void test_exited_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_exited in = { .pid = 99, .status = 0x0900, .status_known = true, .epoch = 1ull << 40 }, out;
	char *txt = zmsg_exited_encode(&in);
	assert_int_equal(zmsg_exited_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.pid, 99);
	assert_int_equal(out.status, 0x0900);
	assert_true(out.status_known);
	assert_true(out.epoch == 1ull << 40);
	free(txt);
	/* Without a status, the exit is known and its status is not. */
	const char *bare = "{\"pid\":5,\"epoch\":0}";
	assert_int_equal(zmsg_exited_decode(bare, strlen(bare), &out, &e), 0);
	assert_false(out.status_known);
	static const struct refusal bad[] = {
		{ "{\"epoch\":1}", "pid" },
		{ "{\"pid\":0,\"epoch\":1}", "pid" },
		{ "{\"pid\":5}", "epoch" },
		{ "{\"pid\":5,\"epoch\":-1}", "epoch" },
		{ "{\"pid\":5,\"epoch\":1e300}", "epoch" },
		{ "{\"pid\":5,\"epoch\":1,\"status\":65536}", "status" },
		{ "not json", "" },
	};
	REFUSED(zmsg_exited_decode, &out, "W_EXITED", bad);
}

static void test_sweep_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_sweep *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
	in->epoch = 12;
	in->born_by = 123456789012ull;
	in->keep[0] = 2;
	in->keep[1] = 4194304;
	in->n_keep = 2;
	char *txt = zmsg_sweep_encode(in);
	assert_int_equal(zmsg_sweep_decode(txt, strlen(txt), out, &e), 0);
	assert_true(out->epoch == 12);
	assert_true(out->born_by == 123456789012ull);
	assert_int_equal(out->n_keep, 2);
	assert_int_equal(out->keep[0], 2);
	assert_int_equal(out->keep[1], 4194304);
	free(txt);
	/* One pid more than a sweep can name is refused, never cut short. */
	in->n_keep = ZMSG_PIDS_MAX;
	for (size_t i = 0; i < ZMSG_PIDS_MAX; i++)
		in->keep[i] = (pid_t)(i + 1);
	txt = zmsg_sweep_encode(in);
	assert_int_equal(zmsg_sweep_decode(txt, strlen(txt), out, &e), 0);
	assert_int_equal(out->n_keep, ZMSG_PIDS_MAX);
	size_t n = strlen(txt);
	char *more = malloc(n + 16);
	memcpy(more, txt, n);
	snprintf(more + n - 2, 16, ",7]}");
	assert_int_not_equal(zmsg_sweep_decode(more, strlen(more), out, &e), 0);
	assert_non_null(strstr(e.msg, "\"keep\" holds more than"));
	free(more);
	free(txt);
	static const struct refusal bad[] = {
		{ "{\"keep\":[],\"born_by\":1}", "epoch" },
		{ "{\"epoch\":1,\"keep\":[]}", "born_by" },
		{ "{\"epoch\":1,\"born_by\":-1,\"keep\":[]}", "born_by" },
		{ "{\"epoch\":1,\"born_by\":1}", "keep" },
		{ "{\"epoch\":1,\"born_by\":1,\"keep\":{}}", "keep" },
		{ "{\"epoch\":1,\"born_by\":1,\"keep\":[0]}", "keep" },
		{ "{\"epoch\":1,\"born_by\":1,\"keep\":[1.5]}", "keep" },
		{ "{\"epoch\":1,\"born_by\":1,\"keep\":[\"3\"]}", "keep" },
		{ "", "" },
	};
	REFUSED(zmsg_sweep_decode, out, "W_SWEEP", bad);
	free(in);
	free(out);
}

static void test_settle_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_settle *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
	*in = (struct zmsg_settle){ .pid = 40, .keep = 41, .epoch = 3, .born_by = 77, .has_all = true, .n_all = 2 };
	in->all[0] = 40;
	in->all[1] = 41;
	char *txt = zmsg_settle_encode(in);
	assert_int_equal(zmsg_settle_decode(txt, strlen(txt), out, &e), 0);
	assert_int_equal(out->pid, 40);
	assert_int_equal(out->keep, 41);
	assert_true(out->epoch == 3);
	assert_true(out->born_by == 77);
	assert_true(out->has_all);
	assert_int_equal(out->n_all, 2);
	assert_int_equal(out->all[1], 41);
	free(txt);
	/* Without the list (a copy being forked): no sweep with it. */
	in->has_all = false;
	in->keep = 0;
	txt = zmsg_settle_encode(in);
	assert_null(strstr(txt, "all"));
	assert_int_equal(zmsg_settle_decode(txt, strlen(txt), out, &e), 0);
	assert_false(out->has_all);
	assert_int_equal(out->keep, 0);
	free(txt);
	static const struct refusal bad[] = {
		{ "{\"keep\":0,\"epoch\":0,\"born_by\":0}", "pid" },
		{ "{\"pid\":0,\"keep\":0,\"epoch\":0,\"born_by\":0}", "pid" },
		{ "{\"pid\":2,\"epoch\":0,\"born_by\":0}", "keep" },
		{ "{\"pid\":2,\"keep\":-1,\"epoch\":0,\"born_by\":0}", "keep" },
		{ "{\"pid\":2,\"keep\":0,\"born_by\":0}", "epoch" },
		{ "{\"pid\":2,\"keep\":0,\"epoch\":0}", "born_by" },
		{ "{\"pid\":2,\"keep\":0,\"epoch\":0,\"born_by\":0,\"all\":[true]}", "all" },
		{ "{\"pid\":2,\"keep\":0,\"epoch\":0,\"born_by\":0,\"all\":7}", "all" },
	};
	REFUSED(zmsg_settle_decode, out, "W_SETTLE", bad);
	free(in);
	free(out);
}

static void test_settled_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_settled out;
	char *txt = zmsg_settled_encode(&(struct zmsg_settled){ .pid = 40, .ended = 3 });
	assert_int_equal(zmsg_settled_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.pid, 40);
	assert_int_equal(out.ended, 3);
	free(txt);
	static const struct refusal bad[] = {
		{ "{\"ended\":1}", "pid" },
		{ "{\"pid\":-1}", "pid" },
		{ "{\"pid\":4,\"ended\":-1}", "ended" },
		{ "{\"pid\":4,\"ended\":\"1\"}", "ended" },
	};
	REFUSED(zmsg_settled_decode, &out, "W_SETTLED", bad);
}

static void test_jail_round_trip_sanitizes_and_refuses(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_jail out;
	char *txt = zmsg_jail_encode(&(struct zmsg_jail){ .enforceable = true, .nsfree = true, .report = "landlock: on\nseccomp: on\n" });
	assert_int_equal(zmsg_jail_decode(txt, strlen(txt), &out, &e), 0);
	assert_true(out.enforceable);
	assert_true(out.nsfree);
	assert_string_equal(out.why, "");
	assert_string_equal(out.report, "landlock: on\nseccomp: on\n");
	zmsg_jail_free(&out);
	free(txt);
	/* From below: the reason is one line, the report keeps its lines
	 * and loses its other control characters. */
	const char *lie = "{\"enforceable\":false,\"why\":\"a\\nb\\u001b[2J\",\"jail\":\"x\\ny\\u0007\"}";
	assert_int_equal(zmsg_jail_decode(lie, strlen(lie), &out, &e), 0);
	assert_false(out.enforceable);
	assert_false(out.nsfree);
	assert_string_equal(out.why, "a b [2J");
	assert_string_equal(out.report, "x\ny ");
	zmsg_jail_free(&out);
	static const struct refusal bad[] = {
		{ "{}", "enforceable" },
		{ "{\"enforceable\":1}", "enforceable" },
		{ "{\"enforceable\":true,\"nsfree\":\"yes\"}", "nsfree" },
		{ "{\"enforceable\":true,\"why\":[]}", "why" },
		{ "{\"enforceable\":true,\"jail\":{}}", "jail" },
	};
	REFUSED(zmsg_jail_decode, &out, "W_JAIL", bad);
	assert_string_equal(out.report, "");
}

static void test_ready_and_fatal(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_ready r;
	char *txt = zmsg_ready_encode(&(struct zmsg_ready){ .start_ms = 812.5 });
	assert_int_equal(zmsg_ready_decode(txt, strlen(txt), &r, &e), 0);
	assert_true(r.start_ms == 812.5);
	free(txt);
	assert_int_equal(zmsg_ready_decode("{}", 2, &r, &e), 0);
	assert_true(r.start_ms < 0);
	static const struct refusal bad_ready[] = {
		{ "{\"start_ms\":-1}", "start_ms" },
		{ "{\"start_ms\":1e10}", "start_ms" },
		{ "{\"start_ms\":\"5\"}", "start_ms" },
		{ "7", "" },
	};
	REFUSED(zmsg_ready_decode, &r, "W_READY", bad_ready);

	struct zmsg_fatal f;
	txt = zmsg_fatal_encode(&(struct zmsg_fatal){ .message = "no python" });
	assert_int_equal(zmsg_fatal_decode(txt, strlen(txt), &f, &e), 0);
	assert_string_equal(f.message, "no python");
	zmsg_fatal_free(&f);
	free(txt);
	/* None, or an empty one: the server still says something. */
	const char *empty = "{\"message\":\"\"}";
	assert_int_equal(zmsg_fatal_decode(empty, strlen(empty), &f, &e), 0);
	assert_string_equal(f.message, "unknown error");
	zmsg_fatal_free(&f);
	const char *two = "{\"message\":\"a\\r\\nb\"}";
	assert_int_equal(zmsg_fatal_decode(two, strlen(two), &f, &e), 0);
	assert_string_equal(f.message, "a  b");
	zmsg_fatal_free(&f);
	static const struct refusal bad_fatal[] = {
		{ "{\"message\":3}", "message" },
		{ "null", "" },
	};
	REFUSED(zmsg_fatal_decode, &f, "W_FATAL", bad_fatal);
}

static void test_warmed_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_warmed in = { .ok = true, .ms = 120.5, .steps = 14, .longest_ms = 80 }, out;
	snprintf(in.name, sizeof in.name, "%s", "scipy.stats");
	char *txt = zmsg_warmed_encode(&in);
	assert_int_equal(zmsg_warmed_decode(txt, strlen(txt), &out, &e), 0);
	assert_string_equal(out.name, "scipy.stats");
	assert_true(out.ok);
	assert_null(out.why);
	assert_true(out.ms == 120.5);
	assert_int_equal(out.steps, 14);
	assert_true(out.longest_ms == 80);
	zmsg_warmed_free(&out);
	free(txt);
	/* A refusal's reason from below: one clean line, cut. */
	char big[1200];
	int n = snprintf(big, sizeof big, "{\"name\":\"x\",\"ok\":false,\"why\":\"a\\n%0700d\"}", 0);
	assert_int_equal(zmsg_warmed_decode(big, (size_t)n, &out, &e), 0);
	assert_false(out.ok);
	assert_int_equal(strlen(out.why), 300);
	assert_memory_equal(out.why, "a 0", 3);
	assert_true(out.ms < 0 && out.steps < 0 && out.longest_ms < 0);
	zmsg_warmed_free(&out);
	static const struct refusal bad[] = {
		{ "{\"ok\":true}", "name" },
		{ "{\"name\":\"\",\"ok\":true}", "name" },
		{ "{\"name\":\"x\"}", "ok" },
		{ "{\"name\":\"x\",\"ok\":\"true\"}", "ok" },
		{ "{\"name\":\"x\",\"ok\":true,\"ms\":-3}", "ms" },
		{ "{\"name\":\"x\",\"ok\":true,\"steps\":0.5}", "steps" },
		{ "{\"name\":\"x\",\"ok\":false,\"why\":false}", "why" },
	};
	REFUSED(zmsg_warmed_decode, &out, "W_WARMED", bad);
	char longname[200];
	snprintf(longname, sizeof longname, "{\"name\":\"%0*d\",\"ok\":true}", ZMSG_MODULE_MAX + 1, 0);
	assert_int_not_equal(zmsg_warmed_decode(longname, strlen(longname), &out, &e), 0);
	assert_non_null(strstr(e.msg, "\"name\""));
}

static void test_warm_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct zmsg_warm *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
	snprintf(in->names[0], sizeof in->names[0], "%s", "pandas");
	snprintf(in->names[1], sizeof in->names[1], "%s", "scipy.stats");
	in->n_names = 2;
	char *txt = zmsg_warm_encode(in);
	assert_int_equal(zmsg_warm_decode(txt, strlen(txt), out, &e), 0);
	assert_int_equal(out->n_names, 2);
	assert_string_equal(out->names[1], "scipy.stats");
	assert_false(out->has_pause);
	free(txt);
	*in = (struct zmsg_warm){ .has_pause = true, .pause = true };
	txt = zmsg_warm_encode(in);
	assert_string_equal(txt, "{\"pause\":true}");
	assert_int_equal(zmsg_warm_decode(txt, strlen(txt), out, &e), 0);
	assert_true(out->has_pause && out->pause);
	assert_int_equal(out->n_names, 0);
	free(txt);
	static const struct refusal bad[] = {
		{ "{\"names\":\"pandas\"}", "names" },
		{ "{\"names\":[\"\"]}", "names" },
		{ "{\"names\":[7]}", "names" },
		{ "{\"pause\":1}", "pause" },
	};
	REFUSED(zmsg_warm_decode, out, "W_WARM", bad);
	/* One name more than a W_WARM holds. */
	char *many = malloc(8 * (ZMSG_WARM_NAMES + 1) + 16), *p = many;
	p += sprintf(p, "{\"names\":[");
	for (int i = 0; i <= ZMSG_WARM_NAMES; i++)
		p += sprintf(p, "%s\"m%d\"", i ? "," : "", i);
	sprintf(p, "]}");
	assert_int_not_equal(zmsg_warm_decode(many, strlen(many), out, &e), 0);
	assert_int_equal(out->n_names, 0);
	free(many);
	free(in);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_round_trip_and_refusals),
		cmocka_unit_test(test_spawned_round_trip_and_refusals),
		cmocka_unit_test(test_exited_round_trip_and_refusals),
		cmocka_unit_test(test_sweep_round_trip_and_refusals),
		cmocka_unit_test(test_settle_round_trip_and_refusals),
		cmocka_unit_test(test_settled_round_trip_and_refusals),
		cmocka_unit_test(test_jail_round_trip_sanitizes_and_refuses),
		cmocka_unit_test(test_ready_and_fatal),
		cmocka_unit_test(test_warmed_round_trip_and_refusals),
		cmocka_unit_test(test_warm_round_trip_and_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
