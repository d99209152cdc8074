/* A reply's budget (mcp/budget.c): shares, and text cut to its head and
 * tail within bytes and lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/text.h"
#include "../../mcp/budget.h"

static void test_lines(void **state)
{
	assert_int_equal(text_lines(""), 0);
	assert_int_equal(text_lines("a"), 1);
	assert_int_equal(text_lines("a\n"), 1);
	assert_int_equal(text_lines("a\nb"), 2);
	assert_int_equal(text_lines("\n\n\n"), 3);
}

static void test_share(void **state)
{
	/* Everyone fits: each gets what it wants. */
	size_t want[4] = { 10, 20, 0, 5 }, got[4];
	budget_share(want, 4, 100, got);
	assert_int_equal(got[0], 10);
	assert_int_equal(got[1], 20);
	assert_int_equal(got[2], 0);
	assert_int_equal(got[3], 5);
	/* A small part takes its want; the large ones split what is left. */
	size_t want2[3] = { 1000, 10, 1000 }, got2[3];
	budget_share(want2, 3, 310, got2);
	assert_int_equal(got2[1], 10);
	assert_int_equal(got2[0] + got2[2], 300);
	assert_true(got2[0] >= 149 && got2[2] >= 149);
	/* Never more than the total. */
	size_t want3[2] = { 7, 9 }, got3[2];
	budget_share(want3, 2, 3, got3);
	assert_true(got3[0] + got3[1] <= 3);
}

static char *numbered(size_t n)
{
	size_t cap = n * 16 + 1, len = 0;
	char *s = malloc(cap);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "line %zu\n", i);
	return s;
}

static void test_clip_fits(void **state)
{
	bool clipped = true;
	struct clip_spec cs = { .max_bytes = 100, .max_lines = 10, .where = "x" };
	char *r = budget_clip("a\nb\n", &cs, &clipped);
	assert_false(clipped);
	assert_string_equal(r, "a\nb\n");
	free(r);
}

static void test_clip_lines(void **state)
{
	char *text = numbered(3000);
	bool clipped = false;
	struct clip_spec cs = { .max_bytes = 100000, .max_lines = 101, .where = "the whole output is in workspace/.logs/x.log" };
	char *r = budget_clip(text, &cs, &clipped);
	assert_true(clipped);
	assert_true(text_lines(r) <= 101);
	/* The head and the tail are kept, and the line between says how
	 * much is missing and where it is. */
	assert_memory_equal(r, "line 0\nline 1\n", 14);
	assert_non_null(strstr(r, "line 2999\n"));
	size_t shown = strlen(r) - strlen(strstr(r, "[...")) + strlen(strchr(strstr(r, "[..."), '\n') + 1);
	char want[200];
	snprintf(want, sizeof want, "[... %zu characters omitted (%zu in all); the whole output is in workspace/.logs/x.log ...]\n",
		 strlen(text) - shown, strlen(text));
	assert_non_null(strstr(r, want));
	free(r);
	free(text);
}

static void test_clip_bytes(void **state)
{
	char *text = numbered(3000);
	bool clipped = false;
	struct clip_spec cs = { .max_bytes = 2000, .max_lines = 100000 };
	char *r = budget_clip(text, &cs, &clipped);
	assert_true(clipped);
	assert_true(strlen(r) <= 2000);
	assert_non_null(strstr(r, " characters omitted ("));
	assert_null(strstr(r, "; ")); /* no "where" given */
	assert_non_null(strstr(r, "line 2999\n"));
	free(r);
	free(text);
}

static void test_clip_utf8(void **state)
{
	/* One long line of 3-byte characters: the cuts fall inside the line
	 * but never inside a character. */
	size_t n = 5000;
	char *text = malloc(n * 3 + 1);
	for (size_t i = 0; i < n; i++)
		memcpy(text + i * 3, "\xe2\x82\xac", 3); /* € */
	text[n * 3] = 0;
	bool clipped = false;
	struct clip_spec cs = { .max_bytes = 1001, .max_lines = 10, .where = "w" };
	char *r = budget_clip(text, &cs, &clipped);
	assert_true(clipped);
	assert_true(strlen(r) <= 1001);
	assert_true(utf8_valid((const unsigned char *)r, strlen(r)));
	assert_memory_equal(r, "\xe2\x82\xac", 3);
	free(r);
	free(text);
}

/* A text cut before (its marker in the middle): the new cut leaves the old
 * marker out and counts against the whole text's length. */
static void test_clip_earlier(void **state)
{
	char *head = numbered(400), *text = malloc(strlen(head) * 2 + 200);
	sprintf(text, "%s[... 90000 characters omitted (100000 in all); full output in F ...]\n%s", head, head);
	size_t from, to;
	assert_true(budget_find_cut(text, " characters omitted (", &from, &to));
	assert_int_equal(from, strlen(head) - 1);
	assert_int_equal(text[to - 1], '\n');
	struct clip_spec cs = { .max_bytes = 1000, .max_lines = 40, .where = "W", .total_chars = 100000, .gap_from = from, .gap_to = to };
	bool clipped;
	char *r = budget_clip(text, &cs, &clipped);
	assert_true(clipped);
	assert_null(strstr(r, "90000 characters"));
	assert_non_null(strstr(r, " characters omitted (100000 in all); W ...]\n"));
	assert_true(text_lines(r) <= 40 && strlen(r) <= 1000);
	free(r);
	free(text);
	free(head);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_clip_fits),
		cmocka_unit_test(test_clip_lines),
		cmocka_unit_test(test_clip_bytes),
		cmocka_unit_test(test_clip_utf8),
		cmocka_unit_test(test_clip_earlier),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
