/* Unit tests of the session messages' codecs (proto/smsg.c): what one
 * side encodes the other decodes to the same struct, and a body from
 * below that does not hold to a field's type and range is refused with an
 * error that names the message and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../proto/smsg.h"

static void test_checkpoint_round_trip(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_checkpoint in = { .pid = 4321 }, out;
	char *txt = smsg_checkpoint_encode(&in);
	assert_int_equal(smsg_checkpoint_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.pid, 4321);
	free(txt);
	/* A failed fork says -1, which is a valid claim of none. */
	in.pid = -1;
	txt = smsg_checkpoint_encode(&in);
	assert_int_equal(smsg_checkpoint_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.pid, -1);
	free(txt);
}

static void test_checkpoint_refusals_name_the_field(void **state)
{
	(void)state;
	static const char *const bad[] = { "{\"pid\":\"12\"}", "{\"pid\":1.5}", "{\"pid\":4194305}", "{}", "[1]", "x" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct err e = { 0 };
		struct smsg_checkpoint out = { .pid = 99 };
		assert_int_not_equal(smsg_checkpoint_decode(bad[i], strlen(bad[i]), &out, &e), 0);
		assert_non_null(strstr(e.msg, "W_CHECKPOINT"));
		if (bad[i][0] == '{')
			assert_non_null(strstr(e.msg, "\"pid\""));
	}
}

static void test_fork_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_fork in, out;
	snprintf(in.name, sizeof in.name, "%s", "branch-1");
	char *txt = smsg_fork_encode(&in);
	assert_int_equal(smsg_fork_decode(txt, strlen(txt), &out, &e), 0);
	assert_string_equal(out.name, "branch-1");
	free(txt);
	char longname[200];
	snprintf(longname, sizeof longname, "{\"name\":\"%0*d\"}", PROTO_NAME_MAX + 1, 0);
	assert_int_not_equal(smsg_fork_decode(longname, strlen(longname), &out, &e), 0);
	assert_non_null(strstr(e.msg, "\"name\""));
	assert_int_not_equal(smsg_fork_decode("{\"name\":\"\"}", 11, &out, &e), 0);
}

static void test_forked_sanitizes_the_error(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_forked in = { .pid = 77 }, out;
	char *txt = smsg_forked_encode(&in);
	assert_int_equal(smsg_forked_decode(txt, strlen(txt), &out, &e), 0);
	assert_int_equal(out.pid, 77);
	assert_string_equal(out.error, "");
	free(txt);
	/* From below: a control character and an over-long reason. */
	char body[600];
	snprintf(body, sizeof body, "{\"error\":\"bad\\nline %0*d\"}", 400, 0);
	assert_int_equal(smsg_forked_decode(body, strlen(body), &out, &e), 0);
	assert_int_equal(out.pid, 0);
	assert_null(strchr(out.error, '\n'));
	assert_true(strlen(out.error) < sizeof out.error);
	assert_memory_equal(out.error, "bad line ", 9);
	assert_int_not_equal(smsg_forked_decode("{\"pid\":0}", 9, &out, &e), 0);
}

static void test_hello_encodes_resumed_only_when_set(void **state)
{
	(void)state;
	char *a = smsg_hello_encode(&(struct smsg_hello){ .pid = 5 });
	char *b = smsg_hello_encode(&(struct smsg_hello){ .pid = 5, .resumed = true });
	assert_string_equal(a, "{\"pid\":5}");
	assert_string_equal(b, "{\"pid\":5,\"resumed\":true}");
	free(a);
	free(b);
}

static void test_exec_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_exec out;
	char *txt = smsg_exec_encode(&(struct smsg_exec){ .code = "x = 1\nx", .cell = 3 });
	assert_null(strstr(txt, "restore"));
	assert_null(strstr(txt, "no_self_view")); /* the session reads its own view */
	assert_int_equal(smsg_exec_decode(txt, strlen(txt), &out, &e), 0);
	assert_string_equal(out.code, "x = 1\nx");
	assert_int_equal(out.cell, 3);
	assert_true(out.restore == 0);
	assert_false(out.no_self_view);
	smsg_exec_free(&out);
	free(txt);
	txt = smsg_exec_encode(&(struct smsg_exec){ .code = "1+1", .cell = 4, .no_self_view = true });
	assert_int_equal(smsg_exec_decode(txt, strlen(txt), &out, &e), 0);
	assert_true(out.no_self_view);
	smsg_exec_free(&out);
	free(txt);
	txt = smsg_exec_encode(&(struct smsg_exec){ .code = "", .cell = 1, .restore = 123456, .restore_format = 2 });
	assert_int_equal(smsg_exec_decode(txt, strlen(txt), &out, &e), 0);
	assert_true(out.restore == 123456);
	assert_int_equal(out.restore_format, 2);
	smsg_exec_free(&out);
	free(txt);
	static const char *const bad[][2] = {
		{ "{\"code\":\"\",\"cell\":1}", "op" },
		{ "{\"op\":\"thumb\",\"code\":\"\",\"cell\":1}", "op" },
		{ "{\"op\":\"exec\",\"cell\":1}", "code" },
		{ "{\"op\":\"exec\",\"code\":\"\",\"cell\":0}", "cell" },
		{ "{\"op\":\"exec\",\"code\":\"\",\"cell\":1,\"restore\":-1}", "restore" },
		{ "{\"op\":\"exec\",\"code\":\"\",\"cell\":1,\"no_self_view\":1}", "no_self_view" },
		{ "{\"op\":\"exec\",\"code\":\"\",\"cell\":1,\"restore\":9,\"restore_format\":0}", "restore_format" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_not_equal(smsg_exec_decode(bad[i][0], strlen(bad[i][0]), &out, &e), 0);
		char q[40];
		snprintf(q, sizeof q, "\"%s\"", bad[i][1]);
		if (!strstr(e.msg, "W_EXEC") || !strstr(e.msg, q))
			fail_msg("%s: %s", bad[i][0], e.msg);
		assert_string_equal(out.code, "");
	}
}

static void test_take_checkpoint(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_take_checkpoint out = { .save = true };
	char *a = smsg_take_checkpoint_encode(&(struct smsg_take_checkpoint){ .save = false });
	char *b = smsg_take_checkpoint_encode(&(struct smsg_take_checkpoint){ .save = true });
	assert_string_equal(a, "{}");
	assert_int_equal(smsg_take_checkpoint_decode(a, strlen(a), &out, &e), 0);
	assert_false(out.save);
	smsg_take_checkpoint_free(&out);
	assert_int_equal(smsg_take_checkpoint_decode(b, strlen(b), &out, &e), 0);
	assert_true(out.save);
	assert_string_equal(out.known, "");
	smsg_take_checkpoint_free(&out);
	free(a);
	free(b);
	assert_int_not_equal(smsg_take_checkpoint_decode("{\"save\":1}", 10, &out, &e), 0);
	assert_non_null(strstr(e.msg, "W_TAKE_CHECKPOINT whose \"save\""));
	assert_false(out.save);

	/* The labels of the last save's pieces: 32 hex digits each. */
	static const char known[] = "000102030405060708090a0b0c0d0e0f" "ffeeddccbbaa99887766554433221100";
	char *c = smsg_take_checkpoint_encode(&(struct smsg_take_checkpoint){ .save = true, .known = known });
	assert_int_equal(smsg_take_checkpoint_decode(c, strlen(c), &out, &e), 0);
	assert_true(out.save);
	assert_string_equal(out.known, known);
	smsg_take_checkpoint_free(&out);
	free(c);
	const char *bad[] = { "{\"save\":true,\"known\":\"0g0102030405060708090a0b0c0d0e0f\"}",
			      "{\"save\":true,\"known\":\"0001\"}", "{\"save\":true,\"known\":7}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		e = (struct err){ 0 };
		assert_int_not_equal(smsg_take_checkpoint_decode(bad[i], strlen(bad[i]), &out, &e), 0);
		assert_non_null(strstr(e.msg, "known"));
		assert_false(out.save);
		assert_string_equal(out.known, "");
	}
}

static void test_thumb_round_trip_and_refusals(void **state)
{
	(void)state;
	struct err e = { 0 };
	struct smsg_thumb out;
	char *txt = smsg_thumb_encode(&(struct smsg_thumb){ .path = "/w/plot.png", .max_bytes = 261120 });
	assert_int_equal(smsg_thumb_decode(txt, strlen(txt), &out, &e), 0);
	assert_string_equal(out.path, "/w/plot.png");
	assert_int_equal(out.max_bytes, 261120);
	smsg_thumb_free(&out);
	free(txt);
	static const char *const bad[][2] = {
		{ "{\"path\":\"/a\",\"max_bytes\":5}", "op" },
		{ "{\"op\":\"thumb\",\"max_bytes\":5}", "path" },
		{ "{\"op\":\"thumb\",\"path\":\"a.png\",\"max_bytes\":5}", "path" },
		{ "{\"op\":\"thumb\",\"path\":\"/a\",\"max_bytes\":0}", "max_bytes" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_not_equal(smsg_thumb_decode(bad[i][0], strlen(bad[i][0]), &out, &e), 0);
		char q[40];
		snprintf(q, sizeof q, "\"%s\"", bad[i][1]);
		if (!strstr(e.msg, "W_THUMB") || !strstr(e.msg, q))
			fail_msg("%s: %s", bad[i][0], e.msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checkpoint_round_trip),
		cmocka_unit_test(test_checkpoint_refusals_name_the_field),
		cmocka_unit_test(test_fork_round_trip_and_refusals),
		cmocka_unit_test(test_forked_sanitizes_the_error),
		cmocka_unit_test(test_hello_encodes_resumed_only_when_set),
		cmocka_unit_test(test_exec_round_trip_and_refusals),
		cmocka_unit_test(test_take_checkpoint),
		cmocka_unit_test(test_thumb_round_trip_and_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
