/* Unit tests of common/text.c: UTF-8 made safe for JSON, bounded text, base64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"

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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
