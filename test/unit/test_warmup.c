/* Unit tests of supervisor/warmup.c: the learned warm-up's list.  Names come
 * from hostile sessions: only dotted identifiers pass, a report is bounded,
 * and only names the zygote loaded are saved (in a state directory made for
 * each test under /tmp, checked from here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../proto/result.h"
#include "../../supervisor/warmup.h"

struct t {
	char tmp[64];
	char root[128];
	struct workspace ws;
	struct policy pol;
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof *t);
	if (!t)
		return -1;
	snprintf(t->tmp, sizeof t->tmp, "/tmp/psm-warmup-XXXXXX");
	if (!mkdtemp(t->tmp))
		return -1;
	snprintf(t->root, sizeof t->root, "%s/project", t->tmp);
	mkdir(t->root, 0755);
	t->ws.root = t->root;
	t->ws.abs = t->root; /* the workspace: only compared with the state directory */
	t->pol.fs_write = FS_WRITE_WORKSPACE;
	char xdg[128];
	snprintf(xdg, sizeof xdg, "%s/state", t->tmp);
	setenv("XDG_STATE_HOME", xdg, 1);
	*state = t;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	nftw(t->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	unsetenv("XDG_STATE_HOME");
	free(t);
	return 0;
}

static void test_names(void **state)
{
	(void)state;
	static const char *const good[] = { "scipy", "scipy.stats", "sklearn.linear_model", "_x", "a1.b_2",
					    "a.b.c.d.e.f.g.h", NULL };
	for (const char *const *g = good; *g; g++)
		assert_true(warmup_name_valid(*g));
	char long_part[80], long_name[200];
	memset(long_part, 'a', 65);
	long_part[65] = '\0';
	memset(long_name, 'a', 129);
	long_name[129] = '\0';
	/* A path, code, a relative import, a leading digit, non-ASCII letters,
	 * too many parts, an over-long part or name. */
	static const char *const bad[] = { "", ".", "a.", ".a", "a..b", "../etc/passwd", "os;import x", "os import",
					   "1abc", "a.1b", "\xc3\xa9vil", "a-b", "a/b", "a.b.c.d.e.f.g.h.i", "a\n", NULL };
	for (const char *const *b = bad; *b; b++)
		assert_false(warmup_name_valid(*b));
	assert_false(warmup_name_valid(long_part));
	assert_false(warmup_name_valid(long_name));
	assert_false(warmup_name_valid(NULL));
}

/* A session's report, as it reaches warmup_note: the "imports" of a
 * result, through its decoder (proto/result.h). */
static void note(struct warmup *w, const char *json)
{
	char body[8192];
	snprintf(body, sizeof body, "{\"status\": \"ok\", \"imports\": %s}", json);
	struct err e = { 0 };
	struct cell_result *r = result_parse(body, strlen(body), &e);
	assert_non_null(r);
	warmup_note(w, r->imports, r->n_imports);
	result_destroy(r);
}

/* What the server has not sent yet goes to the zygote, which answers name:
 * whether that answer was one the server waited for. */
static bool outcome(struct warmup *w, const char *name, bool ok)
{
	int n;
	free(warmup_after_reply(w, &n));
	struct zmsg_warmed m = { .ok = ok, .ms = -1, .steps = -1, .longest_ms = -1 };
	snprintf(m.name, sizeof m.name, "%s", name);
	return warmup_outcome(w, &m);
}

static void test_learn_save_load(void **state)
{
	struct t *t = *state;
	struct warmup *w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	note(w, "[\"scipy.stats\", \"../x\", \"sklearn.linear_model\"]");
	/* Reported, not learned: nothing is saved until the zygote loaded it. */
	assert_int_equal(warmup_count(w), 0);
	assert_true(outcome(w, "scipy.stats", true));
	assert_true(outcome(w, "sklearn.linear_model", false));
	/* An answer for a name the zygote was never sent, or twice: a lie. */
	assert_false(outcome(w, "never.reported", true));
	assert_false(outcome(w, "scipy.stats", true));
	assert_int_equal(warmup_count(w), 1);
	assert_string_equal(warmup_name(w, 0), "scipy.stats");
	/* Refused once: reported again, it is not tried again in this run. */
	note(w, "[\"sklearn.linear_model\"]");
	assert_false(outcome(w, "sklearn.linear_model", true));
	assert_int_equal(warmup_count(w), 1);
	warmup_free(w);

	/* Saved privately, and read back by the next server of this ROOT. */
	char hex_glob[PATH_MAX];
	snprintf(hex_glob, sizeof hex_glob, "%s/state/python-sandbox-mcp", t->tmp);
	struct stat st;
	assert_int_equal(stat(hex_glob, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	assert_int_equal(warmup_count(w), 1);
	assert_string_equal(warmup_name(w, 0), "scipy.stats");
	warmup_free(w);
	/* Another project does not see it. */
	char other[160];
	snprintf(other, sizeof other, "%s/other", t->tmp);
	mkdir(other, 0755);
	struct workspace ws2 = { .root = other, .abs = other };
	w = warmup_new(&ws2, &t->pol, WARMUP_ON);
	assert_int_equal(warmup_count(w), 0);
	warmup_free(w);
	/* clear forgets, off neither loads nor learns. */
	w = warmup_new(&t->ws, &t->pol, WARMUP_OFF);
	assert_int_equal(warmup_count(w), 0);
	note(w, "[\"wave\"]");
	assert_false(outcome(w, "wave", true)); /* never sent */
	assert_int_equal(warmup_count(w), 0);
	warmup_free(w);
	w = warmup_new(&t->ws, &t->pol, WARMUP_CLEAR);
	assert_int_equal(warmup_count(w), 0);
	warmup_free(w);
	w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	assert_int_equal(warmup_count(w), 0);
	warmup_free(w);
}

static void test_bounds(void **state)
{
	struct t *t = *state;
	struct warmup *w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	/* More names than one cell reports: the decoder refuses such a
	 * result (test_result.c); handed over anyway, the whole report is
	 * dropped. */
	char n17[WARMUP_REPORT_MAX + 1][16];
	const char *many[WARMUP_REPORT_MAX + 1];
	for (int i = 0; i <= WARMUP_REPORT_MAX; i++) {
		snprintf(n17[i], sizeof n17[i], "m%d", i);
		many[i] = n17[i];
	}
	warmup_note(w, many, WARMUP_REPORT_MAX + 1);
	assert_false(outcome(w, "m0", true));
	assert_int_equal(warmup_count(w), 0);
	/* Nothing learned, nothing made in the user's state directory. */
	char dir[160];
	struct stat st;
	snprintf(dir, sizeof dir, "%s/state", t->tmp);
	assert_int_equal(stat(dir, &st), -1);
	/* At most WARMUP_MAX learned: the least recently used goes. */
	for (int i = 0; i < WARMUP_MAX + 5; i++) {
		char n[16], js[40];
		snprintf(n, sizeof n, "n%d", i);
		snprintf(js, sizeof js, "[\"%s\"]", n);
		note(w, js);
		assert_true(outcome(w, n, true));
		if (i == 10)
			note(w, "[\"n0\"]"); /* n0 used again: it stays. */
	}
	assert_int_equal(warmup_count(w), WARMUP_MAX);
	bool has0 = false, has1 = false;
	for (size_t i = 0; i < warmup_count(w); i++) {
		has0 |= strcmp(warmup_name(w, i), "n0") == 0;
		has1 |= strcmp(warmup_name(w, i), "n1") == 0;
	}
	assert_true(has0);
	assert_false(has1);
	warmup_free(w);
}

/* One list per project, and at most 256 lists: the oldest go, never the
 * key that lives beside them, never this project's own. */
static void test_files_bounded(void **state)
{
	struct t *t = *state;
	char dir[160];
	snprintf(dir, sizeof dir, "%s/state/python-sandbox-mcp", t->tmp);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "mkdir -p %s && chmod 700 %s %s/state && cd %s && touch key && "
		 "for i in $(seq 1 300); do echo '{}' > warm-old$i.json; touch -d '2020-01-01' warm-old$i.json; done",
		 dir, dir, t->tmp, dir);
	assert_int_equal(system(cmd), 0);
	struct warmup *w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	note(w, "[\"wave\"]");
	outcome(w, "wave", true);
	warmup_free(w);
	snprintf(cmd, sizeof cmd, "test $(ls %s | grep -c '^warm-.*\\.json$') -eq 256 && test -f %s/key", dir, dir);
	assert_int_equal(system(cmd), 0);
	w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	assert_int_equal(warmup_count(w), 1);
	warmup_free(w);
}

static void test_state_dir_inside_project(void **state)
{
	struct t *t = *state;
	char xdg[160];
	snprintf(xdg, sizeof xdg, "%s/.state", t->root);
	setenv("XDG_STATE_HOME", xdg, 1);
	struct warmup *w = warmup_new(&t->ws, &t->pol, WARMUP_ON);
	note(w, "[\"wave\"]");
	outcome(w, "wave", true);
	/* Learned for this run, never written inside the project. */
	assert_int_equal(warmup_count(w), 1);
	warmup_free(w);
	struct stat st;
	assert_int_equal(stat(xdg, &st), -1); /* nothing made inside the project */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test_setup_teardown(test_learn_save_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_inside_project, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
