/* Fuzz target: the saver's stream (supervisor/persist_save.c), written by
 * code nobody approved (a cell can replace its session's saver): the
 * whole-state form (PSMSAVE1) and the pieces (PSMSAVE2), against the
 * table of a save in pieces made just before, so that a piece the input
 * names can be one the server holds.
 *
 * Input: the stream as the saver sends it, then the end of the pipe.
 *
 * Checks, whatever the stream: the save ends (done is called once); one
 * that succeeds is a snapshot the server opens again (prestore_open says 1)
 * with the length the stream announced, whose table in pieces adds up to
 * it and stays within pieces_max; one that fails leaves the snapshot made
 * before it as it was (it still opens, its pieces file is its length). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/err.h"
#include "../../policy/policy.h"
#include "../../rpc/loop.h"
#include "../../supervisor/persist.h"
#include "../../supervisor/persist_format.h"
#include "fuzz.h"

static struct persist *p;
static struct policy *pol; /* kept for the process's life */
static struct loop *loop;
static struct workspace ws;
static char dir[600], scratch[64];

/* The base save: 4 pieces of 64 KiB, labels 1 to 4, byte i = i * 7. */
#define BASE_PIECES 4
#define BASE_BODY (BASE_PIECES * PIECE_KNOWN_MIN)

static struct psave_result res;
static struct ptable *got;
static int done_calls;

static void done(void *arg, const struct psave_result *r)
{
	res = *r;
	res.summary = NULL;
	got = r->table;
	done_calls++;
	loop_stop(loop);
}

/* Runs one save of the stream b through the real psave; its status. */
static int run_save(const unsigned char *b, size_t n, const struct ptable *base)
{
	/* A file, not a pipe: any length, then the end. */
	char path[700];
	snprintf(path, sizeof path, "%s/stream", scratch);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FUZZ_CHECK(fd >= 0, "the stream file: %s", strerror(errno));
	FUZZ_CHECK(n == 0 || write(fd, b, n) == (ssize_t)n, "writing the stream");
	lseek(fd, 0, SEEK_SET);
	unlink(path);
	struct err e = { 0 };
	done_calls = 0;
	got = NULL;
	struct psave *s = psave_start(p, loop, "default", 3, fd, base, done, NULL, &e);
	FUZZ_CHECK(s, "psave_start: %s", e.msg);
	loop_run(loop);
	FUZZ_CHECK(done_calls == 1, "done called %d times", done_calls);
	return res.status;
}

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* The base save, made afresh before each input: its table. */
static struct ptable *base_save(void)
{
	static unsigned char b[16 + BASE_PIECES * (21 + PIECE_KNOWN_MIN)];
	unsigned char *q = b;
	memcpy(q, PERSIST_PIECES_MAGIC, 8);
	put64(q + 8, BASE_BODY);
	q += 16;
	for (int k = 0; k < BASE_PIECES; k++) {
		q[0] = 'N';
		put32(q + 1, PIECE_KNOWN_MIN);
		memset(q + 5, 0, 16);
		q[5] = (unsigned char)(k + 1);
		q += 21;
		for (uint32_t i = 0; i < PIECE_KNOWN_MIN; i++)
			q[i] = (unsigned char)((k * PIECE_KNOWN_MIN + i) * 7);
		q += PIECE_KNOWN_MIN;
	}
	persist_discard(p, "default");
	FUZZ_CHECK(run_save(b, (size_t)(q - b), NULL) == 0, "the base save: %s", res.msg);
	FUZZ_CHECK(got, "the base save has no table");
	return got;
}

static void init(void)
{
	char tmp[] = "/tmp/psm-fuzz-save-XXXXXX";
	FUZZ_CHECK(mkdtemp(tmp), "mkdtemp");
	snprintf(scratch, sizeof scratch, "%s", tmp);
	char root[200], xdg[200];
	snprintf(root, sizeof root, "%s/root", tmp);
	snprintf(xdg, sizeof xdg, "%s/state", tmp);
	FUZZ_CHECK(mkdir(root, 0700) == 0 && mkdir(xdg, 0700) == 0, "mkdir");
	setenv("XDG_STATE_HOME", xdg, 1);
	struct err e = { 0 };
	FUZZ_CHECK(ws_open(&ws, root, "workspace", &e) == 0, "ws_open: %s", e.msg);
	FUZZ_CHECK(policy_builtin(&pol, &e) == 0, "policy");
	pol->limits.persist = true;
	pol->limits.persist_mb = 2;
	p = persist_new(&ws, pol);
	FUZZ_CHECK(persist_on(p), "persist is off: %s", persist_why_off(p));
	persist_stream_only(p);
	loop = loop_new();
	snprintf(dir, sizeof dir, "%s/.sessions/default", ws.abs);
}

static off_t size_of(const char *name)
{
	char path[700];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0 ? st.st_size : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!p)
		init();
	struct ptable *base = base_save();
	unsigned char *b = fuzz_dup(data, size);
	int status = run_save(b, size, base);
	free(b);
	struct prestore *r = NULL;
	struct err e = { 0 };
	int rc = prestore_open(p, "default", &r, &e);
	if (status == 0) {
		FUZZ_CHECK(rc == 1, "a save that succeeded does not open: %d %s", rc, e.msg);
		FUZZ_CHECK(prestore_bytes(r) == res.bytes, "it opens with %llu bytes, the stream said %llu",
			   (unsigned long long)prestore_bytes(r), (unsigned long long)res.bytes);
		if (got) {
			size_t mlen;
			unsigned char *m = ptable_encode(got, &mlen);
			struct ptable *t = ptable_decode(m, mlen, UINT64_MAX, &e);
			FUZZ_CHECK(t, "its own manifest does not decode: %s", e.msg);
			FUZZ_CHECK(t->body == res.bytes && t->n <= pieces_max(t->body), "%zu pieces for %llu bytes", t->n,
				   (unsigned long long)t->body);
			ptable_free(t);
			free(m);
		}
	} else {
		FUZZ_CHECK(!got, "a failed save returned a table");
		FUZZ_CHECK(rc == 1 && prestore_bytes(r) == BASE_BODY, "the base snapshot did not stay: %d %s", rc, e.msg);
		FUZZ_CHECK(size_of("pieces.1") == BASE_BODY, "the base pieces file is %lld bytes", (long long)size_of("pieces.1"));
	}
	prestore_free(r);
	ptable_free(got);
	ptable_free(base);
	return 0;
}
