/* Unit tests of mcp/history.c and mcp/export.c: what a session's history
 * says is in its state after rollbacks, restores, forks and resets; the
 * provenance of a file; lines that are not the server's.  Each test works
 * in a fresh directory under /tmp with XDG_STATE_HOME inside it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../mcp/export.h"
#include "../../mcp/history.h"
#include "tmptree.h"

struct t {
	char tmp[64];
	struct workspace ws;
	struct history *h;
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof *t);
	snprintf(t->tmp, sizeof t->tmp, "/tmp/psm-history-XXXXXX");
	if (!t || !mkdtemp(t->tmp))
		return -1;
	char p[128];
	snprintf(p, sizeof p, "%s/state", t->tmp);
	setenv("XDG_STATE_HOME", p, 1);
	snprintf(p, sizeof p, "%s/root", t->tmp);
	mkdir(p, 0755);
	struct err e = { 0 };
	if (ws_open(&t->ws, p, "workspace", &e) < 0)
		return -1;
	t->h = history_open(&t->ws, NULL, "SKILL.md", "", NULL);
	*state = t;
	return history_on(t->h) ? 0 : -1;
}

static int teardown(void **state)
{
	struct t *t = *state;
	history_free(t->h);
	ws_close(&t->ws);
	tmp_tree_remove(t->tmp);
	free(t);
	return 0;
}

static void rec(struct t *t, const char *session, int cell, const char *code, const char *status, const char *state,
		const char *fork, const char *file, const char *sha)
{
	cJSON *files = cJSON_CreateArray();
	if (file) {
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "path", file);
		cJSON_AddStringToObject(f, "sha256", sha);
		cJSON_AddStringToObject(f, "change", "created");
		cJSON_AddItemToArray(files, f);
	}
	struct hist_call c = { .session = session, .cell = cell, .code = code, .status = status, .state = state,
			       .fork_from = fork ? fork : "", .out = "", .files = files };
	history_record(t->h, &c);
	cJSON_Delete(files);
}

/* The lineage as a string: "c1 c2 r3 L4-5@4 c4" (cell, rolled back, lost). */
static void lineage(struct t *t, const char *session, char *out, size_t n)
{
	FILE *f = history_read(t->h, session);
	assert_non_null(f);
	struct hist_lineage l;
	assert_int_equal(history_lineage(f, &l), 0);
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; i < l.n && k < n; i++) {
		const struct hist_entry *e = &l.v[i];
		if (e->kind == HK_LOST)
			k += (size_t)snprintf(out + k, n - k, "%sL%d-%d@%d", k ? " " : "", e->cell, e->last, e->lost_at);
		else
			k += (size_t)snprintf(out + k, n - k, "%s%c%d", k ? " " : "", e->kind == HK_CELL ? 'c' : 'r', e->cell);
	}
	assert_non_null(l.start);
	history_lineage_free(&l);
	fclose(f);
}

static void test_rollback_restore_new(void **state)
{
	struct t *t = *state;
	char s[200];
	/* The first call of a session timed out: its state says new, its
	 * status that it was undone. */
	rec(t, "default", 1, "while 1: pass", "timeout", "new", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "r1");
	history_reset(t->h, "default");
	rec(t, "default", 1, "a = 1", "ok", "new", NULL, NULL, NULL);
	rec(t, "default", 2, "1/0", "error", "kept", NULL, NULL, NULL);
	rec(t, "default", 3, "while 1: pass", "timeout", "rolled_back", NULL, NULL, NULL);
	rec(t, "default", 4, "b = 2", "ok", "kept", NULL, NULL, NULL);
	rec(t, "default", 5, "c = 3", "ok", "kept", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c1 c2 r3 c4 c5");
	/* A restart restores the state saved after cell 3: 4 and 5 are lost,
	 * and the restored call is numbered 4 again. */
	rec(t, "default", 4, "d = 4", "ok", "restored", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c1 c2 r3 L4-5@4 c4");
	/* The process and its saved state lost: a new session. */
	rec(t, "default", 1, "e = 5", "ok", "new", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "L1-4@1 c1");
	/* reset: a new history. */
	history_reset(t->h, "default");
	rec(t, "default", 1, "f = 6", "ok", "new", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c1");
}

/* A saved state from before the history was kept: the cells it holds are
 * named as unrecorded, never silently missing. */
static void test_unrecorded(void **state)
{
	struct t *t = *state;
	char s[200];
	rec(t, "default", 7, "g = 1", "ok", "restored", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "L1-6@7 c7");
}

static void test_fork_starts_with_parent(void **state)
{
	struct t *t = *state;
	char s[200];
	rec(t, "default", 1, "a = 1", "ok", "new", NULL, NULL, NULL);
	rec(t, "default", 2, "b = 2", "ok", "kept", NULL, NULL, NULL);
	rec(t, "branch", 3, "c = 3", "ok", "forked", "default", NULL, NULL);
	rec(t, "default", 3, "x = 0", "ok", "kept", NULL, NULL, NULL);
	lineage(t, "branch", s, sizeof s);
	assert_string_equal(s, "c1 c2 c3");
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c1 c2 c3");
	char **v = history_sessions(t->h);
	assert_string_equal(v[0], "branch");
	assert_string_equal(v[1], "default");
	assert_null(v[2]);
	free(v[0]);
	free(v[1]);
	free(v);
}

/* Two files' SHA-256, as the history records them. */
static const char A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char B[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static void test_provenance(void **state)
{
	struct t *t = *state;
	rec(t, "default", 1, "w(1)", "ok", "new", NULL, "workspace/outputs/x.csv", A);
	rec(t, "default", 2, "w(2)", "ok", "kept", NULL, "workspace/outputs/x.csv", B);
	rec(t, "default", 3, "pass", "ok", "kept", NULL, "workspace/outputs/y.csv", A);
	cJSON *p = history_provenance(t->h, "default", "workspace/outputs/x.csv", B);
	assert_non_null(p);
	assert_int_equal(cJSON_GetObjectItem(p, "cell")->valueint, 2);
	cJSON_Delete(p);
	/* The bytes of cell 1, written over since by cell 2: not the last
	 * writer's bytes, so not vouched for. */
	assert_null(history_provenance(t->h, "default", "workspace/outputs/x.csv", A));
	assert_null(history_provenance(t->h, "default", "workspace/outputs/z.csv", A));
	/* Asked of a session that never wrote it: the call of the session
	 * that did, named. */
	p = history_provenance(t->h, "nosuch", "workspace/outputs/x.csv", B);
	assert_non_null(p);
	assert_string_equal(cJSON_GetObjectItem(p, "session")->valuestring, "default");
	assert_int_equal(cJSON_GetObjectItem(p, "cell")->valueint, 2);
	cJSON_Delete(p);
}

/* The last writer of a file across every session's history: another
 * session that wrote it later decides (its bytes, or null), and the session
 * asked about wins a tie (a fork's copy of its parent's records). */
static void test_provenance_across_sessions(void **state)
{
	struct t *t = *state;
	rec(t, "default", 1, "w(1)", "ok", "new", NULL, "workspace/outputs/x.csv", A);
	usleep(5000);
	rec(t, "other", 1, "w(2)", "ok", "new", NULL, "workspace/outputs/x.csv", B);
	cJSON *p = history_provenance(t->h, "default", "workspace/outputs/x.csv", B);
	assert_non_null(p);
	assert_string_equal(cJSON_GetObjectItem(p, "session")->valuestring, "other");
	cJSON_Delete(p);
	/* default's bytes were written over by other's since. */
	assert_null(history_provenance(t->h, "default", "workspace/outputs/x.csv", A));
	usleep(5000);
	rec(t, "branch", 2, "pass", "ok", "forked", "other", NULL, NULL);
	p = history_provenance(t->h, "branch", "workspace/outputs/x.csv", B);
	assert_non_null(p);
	assert_string_equal(cJSON_GetObjectItem(p, "session")->valuestring, "branch");
	cJSON_Delete(p);
	p = history_provenance(t->h, "other", "workspace/outputs/x.csv", B);
	assert_non_null(p);
	assert_string_equal(cJSON_GetObjectItem(p, "session")->valuestring, "other");
	cJSON_Delete(p);
}

/* Lines that are not JSON objects (a torn write, bytes from elsewhere) are
 * skipped and counted; the export says so and stays a notebook. */
static void test_bad_lines_and_export(void **state)
{
	struct t *t = *state;
	rec(t, "default", 1, "print(1)", "ok", "new", NULL, NULL, NULL);
	char p[256];
	snprintf(p, sizeof p, "%s/default.jsonl", history_dir(t->h));
	FILE *f = fopen(p, "a");
	fputs("not json\n[1,2]\n", f);
	fclose(f);
	rec(t, "default", 2, "1/0", "error", "kept", NULL, NULL, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char why[300];
	assert_int_equal(export_write(t->h, "default", false, m, why, sizeof why), 0);
	fclose(m);
	cJSON *nb = cJSON_Parse(buf);
	assert_non_null(nb);
	assert_int_equal(cJSON_GetObjectItem(nb, "nbformat")->valueint, 4);
	cJSON *cells = cJSON_GetObjectItem(nb, "cells");
	assert_int_equal(cJSON_GetArraySize(cells), 4); /* header, setup, 2 cells */
	assert_non_null(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(cells, 0), "source")->valuestring, "could not be read"));
	cJSON *tags = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cells, 3), "metadata"), "tags");
	assert_string_equal(cJSON_GetArrayItem(tags, 0)->valuestring, "raises-exception");
	cJSON_Delete(nb);
	free(buf);
	m = open_memstream(&buf, &len);
	assert_int_equal(export_write(t->h, "other", false, m, why, sizeof why), -ENOENT);
	fclose(m);
	free(buf);
	assert_non_null(strstr(why, "sessions that have one: default"));
}

/* A session's file stops at its cap: one marker, then nothing, even for a
 * record small enough to fit after it.  (A sparse file stands for the
 * 512 MiB of calls.) */
static void test_cap(void **state)
{
	struct t *t = *state;
	rec(t, "default", 1, "a = 1", "ok", "new", NULL, NULL, NULL);
	char p[256];
	snprintf(p, sizeof p, "%s/default.jsonl", history_dir(t->h));
	assert_int_equal(truncate(p, (off_t)(HISTORY_FILE_MAX - 200)), 0);
	rec(t, "default", 2, "b = 2 # a record that does not fit in what is left before the cap, with its outputs and all", "ok",
	    "kept", NULL, NULL, NULL);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	static const char full[] = "{\"v\":1,\"kind\":\"full\"}\n";
	assert_int_equal(st.st_size, (off_t)(HISTORY_FILE_MAX - 200 + sizeof full - 1));
	FILE *f = fopen(p, "r");
	char tail[sizeof full] = "";
	fseek(f, -(long)(sizeof full - 1), SEEK_END);
	assert_int_equal(fread(tail, 1, sizeof full - 1, f), sizeof full - 1);
	fclose(f);
	assert_string_equal(tail, full);
	rec(t, "default", 3, "c", "ok", "kept", NULL, NULL, NULL); /* would fit: still not written */
	struct stat st2;
	assert_int_equal(stat(p, &st2), 0);
	assert_int_equal(st2.st_size, st.st_size);
}

/* The server keeps each session's file open for its next records; a file
 * deleted, replaced or turned into a symlink since is never written
 * through the old descriptor: the record goes where the name points now,
 * as an open by name would put it, and a symlink is refused. */
static void test_kept_file_follows_name(void **state)
{
	struct t *t = *state;
	char s[200], p[256], q[256];
	snprintf(p, sizeof p, "%s/default.jsonl", history_dir(t->h));
	rec(t, "default", 1, "a = 1", "ok", "new", NULL, NULL, NULL);
	rec(t, "default", 2, "b = 2", "ok", "kept", NULL, NULL, NULL);
	/* Deleted: the next record starts a new file. */
	assert_int_equal(unlink(p), 0);
	rec(t, "default", 3, "c = 3", "ok", "kept", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c3"); /* a new file, its start record first */
	/* Replaced by a rename (another file's inode under the name): the
	 * record lands in the new file, not in the one renamed over. */
	snprintf(q, sizeof q, "%s/other.jsonl", history_dir(t->h));
	rec(t, "other", 1, "x = 1", "ok", "new", NULL, NULL, NULL);
	assert_int_equal(rename(q, p), 0);
	rec(t, "default", 2, "d = 4", "ok", "kept", NULL, NULL, NULL);
	lineage(t, "default", s, sizeof s);
	assert_string_equal(s, "c1 c2");
	/* A symlink where the file was: refused, nothing written through it. */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink(q, p), 0);
	rec(t, "default", 3, "e = 5", "ok", "kept", NULL, NULL, NULL);
	struct stat st;
	assert_int_equal(lstat(q, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(unlink(p), 0);
	/* More sessions than files kept: every one recorded. */
	for (int i = 0; i < 12; i++) {
		char name[16];
		snprintf(name, sizeof name, "s%d", i);
		rec(t, name, 1, "y = 1", "ok", "new", NULL, NULL, NULL);
		rec(t, name, 2, "y = 2", "ok", "kept", NULL, NULL, NULL);
	}
	for (int i = 0; i < 12; i++) {
		char name[16];
		snprintf(name, sizeof name, "s%d", i);
		lineage(t, name, s, sizeof s);
		assert_string_equal(s, "c1 c2");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rollback_restore_new, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unrecorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_starts_with_parent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_provenance, setup, teardown),
		cmocka_unit_test_setup_teardown(test_provenance_across_sessions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_lines_and_export, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_file_follows_name, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
