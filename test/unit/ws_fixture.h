/* A temporary project for the workspace tests (test_fsafe, test_artifacts):
 * TMP/root (ROOT, with its workspace opened), TMP/outside/secret (a file the
 * server must never read through a planted link).  Include after cmocka.h. */
#ifndef TEST_UNIT_WS_FIXTURE_H
#define TEST_UNIT_WS_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../../files/fsafe.h"
#include "tmptree.h"

struct fx {
	char tmp[64];          /* the temp dir: holds root/ and outside/ */
	char root[128];
	char outside[128];
	struct workspace ws;
};

static inline void put(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

/* A path under the workspace. */
static inline void wpath(const struct fx *f, char *out, size_t sz, const char *rel)
{
	snprintf(out, sz, "%s/%s", f->ws.abs, rel);
}

static inline struct fx *fx_new(const char *tag)
{
	struct fx *f = calloc(1, sizeof *f);
	struct err e = { 0 };
	char p[256];

	assert_non_null(f);
	snprintf(f->tmp, sizeof f->tmp, "/tmp/psm-%s-XXXXXX", tag);
	assert_non_null(mkdtemp(f->tmp));
	snprintf(f->root, sizeof f->root, "%s/root", f->tmp);
	snprintf(f->outside, sizeof f->outside, "%s/outside", f->tmp);
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(mkdir(f->outside, 0755), 0);
	snprintf(p, sizeof p, "%s/secret", f->outside);
	put(p, "SECRET");
	if (ws_open(&f->ws, f->root, "workspace", &e) < 0)
		fail_msg("ws_open: %s", e.msg);
	return f;
}

static inline void fx_free(struct fx *f)
{
	ws_close(&f->ws);
	tmp_tree_remove(f->tmp);
	free(f);
}

#endif
