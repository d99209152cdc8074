/* Unit tests of common/oatab.c: after any mix of inserts and deletions,
 * every key still in a table is found by a look from its home slot, and
 * no deleted key is, in a table whose keys collide and whose probe runs
 * wrap around its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/oatab.h"

#define SLOTS 64

struct ent {
	unsigned key; /* 0: empty */
};

/* A poor hash on purpose: keys pile up on 8 homes, the last of them next
 * to the table's end, so runs are long and wrap around it. */
static size_t home_of(unsigned key)
{
	return (size_t)((key % 8) * 8 + 7) & (SLOTS - 1);
}

static bool used(const void *t, size_t i)
{
	return ((const struct ent *)t)[i].key != 0;
}

static size_t home(const void *t, size_t i)
{
	return home_of(((const struct ent *)t)[i].key);
}

static void move(void *t, size_t to, size_t from)
{
	((struct ent *)t)[to] = ((struct ent *)t)[from];
}

static void clear(void *t, size_t i)
{
	((struct ent *)t)[i].key = 0;
}

static const struct oatab_ops ops = { used, home, move, clear };

static size_t slot_of(const struct ent *t, unsigned key)
{
	size_t i = home_of(key);
	while (t[i].key && t[i].key != key)
		i = (i + 1) & (SLOTS - 1);
	return i;
}

/* Keys 1..200 in and out at random, at most half the slots used, against
 * a plain list of what is in. */
static void test_churn_against_list(void **state)
{
	(void)state;
	struct ent t[SLOTS];
	bool in[201];
	memset(t, 0, sizeof t);
	memset(in, 0, sizeof in);
	size_t n = 0;
	srand(7);
	for (int step = 0; step < 20000; step++) {
		unsigned k = 1 + (unsigned)(rand() % 200);
		size_t i = slot_of(t, k);
		if (in[k]) {
			assert_int_equal(t[i].key, k);
			oatab_erase(t, SLOTS, i, &ops);
			in[k] = false;
			n--;
		} else if (n < SLOTS / 2) {
			assert_int_equal(t[i].key, 0);
			t[i].key = k;
			in[k] = true;
			n++;
		}
		if (step % 97 == 0)
			for (unsigned q = 1; q <= 200; q++)
				assert_int_equal(t[slot_of(t, q)].key, in[q] ? q : 0);
	}
	size_t seen = 0;
	for (size_t i = 0; i < SLOTS; i++)
		seen += t[i].key != 0;
	assert_int_equal(seen, n);
}

/* A run that wraps: the entry past the end whose home is before it moves
 * back into the hole; the one at its own home stays. */
static void test_wrap(void **state)
{
	(void)state;
	struct ent t[SLOTS];
	memset(t, 0, sizeof t);
	/* Keys 7, 15, 23: all home 63 (7 % 8 = 7): they sit at 63, 0, 1. */
	unsigned keys[] = { 7, 15, 23 };
	for (size_t k = 0; k < 3; k++)
		t[slot_of(t, keys[k])].key = keys[k];
	assert_int_equal(t[63].key, 7);
	assert_int_equal(t[0].key, 15);
	assert_int_equal(t[1].key, 23);
	/* Key 1 (home 15) at 15, untouched by what happens at the end. */
	t[slot_of(t, 1)].key = 1;
	oatab_erase(t, SLOTS, 63, &ops);
	assert_int_equal(t[63].key, 15);
	assert_int_equal(t[0].key, 23);
	assert_int_equal(t[1].key, 0);
	assert_int_equal(t[15].key, 1);
	assert_int_equal(t[slot_of(t, 23)].key, 23);
	assert_int_equal(t[slot_of(t, 7)].key, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn_against_list),
		cmocka_unit_test(test_wrap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
