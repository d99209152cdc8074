/* Unit tests of common/text.c: UTF-8 made safe for JSON, bounded text, base64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/escape.h"

/* utf8_clip with a bound of a few characters: the marker is longer than
 * what is cut, so the result must be sized for the marker, not fit in
 * whatever the sanitised copy had left over. */
static void test_clip_small(void **state)
{
	(void)state;
	char *t = utf8_clip("abc", 2, false);
	assert_string_equal(t, "ab\n[... cut ...]");
	free(t);
	t = utf8_clip("abcdefghij", 3, true);
	assert_string_equal(t, "a\n[... cut ...]\nij");
	free(t);
	t = utf8_clip("abc", 3, false);
	assert_string_equal(t, "abc");
	free(t);
	assert_null(utf8_clip(NULL, 3, false));
}

/* Cuts fall between characters, never inside one, and invalid bytes
 * become U+FFFD before anything is counted. */
static void test_clip_utf8(void **state)
{
	(void)state;
	char *t = utf8_clip("\xc3\xa9\xc3\xa9\xc3\xa9", 1, false);
	assert_string_equal(t, "\xc3\xa9\n[... cut ...]");
	free(t);
	t = utf8_clip("a\xff", 5, false);
	assert_string_equal(t, "a\xef\xbf\xbd");
	free(t);
}

static void test_sanitize(void **state)
{
	(void)state;
	size_t n;
	char *t = utf8_sanitize((const unsigned char *)"a\0b\xc0\xaf", 5, &n);
	assert_int_equal(n, 1 + 3 + 1 + 3 + 3);
	assert_memory_equal(t, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd", n);
	free(t);
	assert_true(utf8_valid((const unsigned char *)"\xf0\x9f\x98\x80", 4));
	assert_false(utf8_valid((const unsigned char *)"\xed\xa0\x80", 3));
}


static void expect_model(const char *in, size_t n, bool collapse, const char *want)
{
	char *out = text_for_model((const unsigned char *)in, n ? n : strlen(in), collapse, NULL);
	assert_non_null(out);
	assert_string_equal(out, want);
	free(out);
}

/* What a stream, a repr or a traceback shows the model: controls and the
 * invisible characters that fake text escaped, readable; invalid bytes as
 * \xNN; \r progress bars collapsed to their last state. */
static void test_for_model(void **state)
{
	(void)state;
	expect_model("plain\tline\nnext\n", 0, false, "plain\tline\nnext\n");
	expect_model("\x1b[31mred\x1b[0m\a", 0, false, "\\x1b[31mred\\x1b[0m\\x07");
	expect_model("a\0b\b", 4, false, "a\\x00b\\x08");
	expect_model("del\x7f", 0, false, "del\\x7f");
	expect_model("csi \xc2\x9b" "2J", 0, false, "csi \\u009b2J");
	expect_model("left \xe2\x80\xae" "thgir", 0, false, "left \\u202ethgir");
	expect_model("iso \xe2\x81\xa6x\xe2\x81\xa9", 0, false, "iso \\u2066x\\u2069");
	expect_model("zw\xe2\x80\x8bsp \xef\xbb\xbf", 0, false, "zw\\u200bsp \\ufeff");
	expect_model("tag \xf3\xa0\x81\x81", 0, false, "tag \\U000e0041");
	expect_model("line\xe2\x80\xa8sep", 0, false, "line\\u2028sep");
	/* kept: ZWJ in emoji, accents, CJK */
	expect_model("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x92\xbb caf\xc3\xa9 \xe4\xb8\xad", 0, false,
		     "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x92\xbb caf\xc3\xa9 \xe4\xb8\xad");
	expect_model("bad \xff\xfe end", 0, false, "bad \\xff\\xfe end");
	expect_model("cut \xe2\x82", 0, false, "cut \\xe2\\x82");
	/* carriage returns */
	expect_model("  0%\r 50%\r100%\ndone\n", 0, true, "100%\ndone\n");
	expect_model("dos\r\nlines\r\n", 0, true, "dos\nlines\n");
	expect_model("bar 10%\rbar 90%\r", 0, true, "bar 90%");
	expect_model("a\rb", 0, false, "a\\x0db");
}

static void expect_name(const char *name, int kind, const char *want)
{
	char out[512], back[512];
	assert_int_equal(esc_name(out, sizeof out, name), kind);
	assert_string_equal(out, want);
	assert_int_equal(unesc_name(back, sizeof back, out), 0);
	assert_string_equal(back, name);
}

/* Names: as they are when printable; else the body of a Python string
 * literal that opens the file (surrogateescape for bytes that are not
 * UTF-8), which the tools take back. */
static void test_names(void **state)
{
	(void)state;
	expect_name("workspace/outputs/r\xc3\xa9sum\xc3\xa9 \xf0\x9f\x93\x8a.csv", 0, "workspace/outputs/r\xc3\xa9sum\xc3\xa9 \xf0\x9f\x93\x8a.csv");
	expect_name("workspace/a\nb.csv", 1, "workspace/a\\x0ab.csv");
	expect_name("workspace/\x1b]0;t\a.txt", 1, "workspace/\\x1b]0;t\\x07.txt");
	expect_name("workspace/x\xc2\x9b.txt", 1, "workspace/x\\x9b.txt");
	expect_name("workspace/gnp.\xe2\x80\xae" "exe", 1, "workspace/gnp.\\u202eexe");
	expect_name("workspace/raw\xff.txt", 1, "workspace/raw\\udcff.txt");
	expect_name("workspace/back\\slash", 1, "workspace/back\\\\slash");
	char out[64];
	/* A path the model wrote without escapes, or with a backslash that is
	 * no escape, is taken as it is. */
	assert_int_equal(unesc_name(out, sizeof out, "workspace/a\\b.txt"), 0);
	assert_string_equal(out, "workspace/a\\b.txt");
	assert_int_equal(unesc_name(out, sizeof out, "workspace/\\ud800.txt"), -EINVAL);
	assert_int_equal(esc_name(out, 8, "workspace/long"), -ENAMETOOLONG);
}

static void test_base64(void **state)
{
	(void)state;
	static const struct { const char *in, *out; } v[] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		char *e = base64_encode((const unsigned char *)v[i].in, strlen(v[i].in));
		assert_string_equal(e, v[i].out);
		free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clip_small),
		cmocka_unit_test(test_clip_utf8),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_for_model),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
