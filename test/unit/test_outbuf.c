/* Unit tests of supervisor/outbuf.c: what the reply keeps of binary output
 * (the whole lines of text around the bytes, the marker naming the log). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../supervisor/outbuf.h"
#include "ws_fixture.h"

static unsigned char noise[4096];

static void feed_str(struct outbuf *ob, const char *s)
{
	outbuf_feed(ob, (const unsigned char *)s, strlen(s));
}

static char *finish(struct outbuf *ob)
{
	bool cut;
	char *shown = NULL;
	char *t = outbuf_finish(ob, &cut, &shown);
	assert_true(cut);
	assert_non_null(shown);
	free(shown);
	return t;
}

/* Lines before and after the bytes stand around the marker, each fed in
 * the same chunk as the bytes or in its own. */
static void test_text_around_binary(void **state)
{
	(void)state;
	struct fx *f = fx_new("outbuf");
	struct outbuf ob;
	outbuf_init(&ob, &f->ws, 8000, 1 << 20);
	outbuf_reset(&ob, ".logs/t-1.stdout.log");
	feed_str(&ob, "first line\nsecond ");
	unsigned char chunk[64 + sizeof noise];
	memcpy(chunk, "line\n", 5);
	memcpy(chunk + 5, noise, sizeof noise);
	outbuf_feed(&ob, chunk, 5 + sizeof noise);
	feed_str(&ob, "\nafter\n");
	char *t = finish(&ob);
	assert_non_null(strstr(t, "first line\nsecond line\n[4126 bytes of binary output (not text); the bytes are in "));
	assert_non_null(strstr(t, "]\nthe text written after them:\nafter\n"));
	free(t);

	/* A partial line before the bytes (valid UTF-8 by chance) is not text. */
	outbuf_reset(&ob, ".logs/t-2.stdout.log");
	feed_str(&ob, "abc");
	outbuf_feed(&ob, noise, sizeof noise);
	t = finish(&ob);
	assert_true(strncmp(t, "[4099 bytes of binary output", 28) == 0);
	free(t);
	outbuf_free(&ob);
	fx_free(f);
}

/* Text longer than the head before the bytes: its first 1000 characters,
 * whole, at a character boundary. */
static void test_long_text_before(void **state)
{
	(void)state;
	struct fx *f = fx_new("outbuf");
	struct outbuf ob;
	outbuf_init(&ob, &f->ws, 200, 1 << 20);
	outbuf_reset(&ob, ".logs/t-3.stdout.log");
	for (int i = 0; i < 400; i++)
		feed_str(&ob, "\xc3\xa9t\xc3\xa9 line\n");
	outbuf_feed(&ob, noise, sizeof noise);
	outbuf_feed(&ob, noise, sizeof noise);
	char *t = finish(&ob);
	char *marker = strstr(t, "[");
	assert_non_null(marker);
	assert_true(strncmp(t, "\xc3\xa9t\xc3\xa9 line\n", 11) == 0);
	/* 1000 characters at most, then a line end before the marker. */
	assert_true(marker - t <= 1000 * 2 + 1);
	assert_int_equal(marker[-1], '\n');
	free(t);
	outbuf_free(&ob);
	fx_free(f);
}

int main(void)
{
	for (size_t i = 0; i < sizeof noise; i++)
		noise[i] = (unsigned char)(i % 2 ? 0xff : 0x01);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_around_binary),
		cmocka_unit_test(test_long_text_before),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
