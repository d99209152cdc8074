/* Saved sessions, the trusted side (supervisor/persist.c): a save streamed
 * in becomes a v2 snapshot that restores with a good verdict; a snapshot of
 * the previous format (v1, HMAC-SHA256) still restores; one made with
 * another key is refused as such and left in place; a changed byte gets a
 * bad verdict and the file goes; one over persist_mb is refused by its size
 * and left in place; the saver's summary record reaches the caller. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/hmac.h"
#include "../../policy/policy.h"
#include "../../rpc/loop.h"
#include "../../supervisor/persist.h"
#include "ws_fixture.h"

static struct fx *f;
static struct policy *pol;
static struct persist *p;
static struct loop *loop;
static char snap[512];

static const char SUMMARY[] = "{\"unsaved\": [[\"fh\", \"TypeError: cannot pickle\"]], \"unsaved_count\": 1}";
static const char STATE[] = "the pickled state, in any bytes the saver likes";

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* The body a saver sends after its header: the summary record, then the
 * state. */
static size_t body(unsigned char *out)
{
	size_t n = 0;
	put64(out, sizeof SUMMARY - 1);
	n += 8;
	memcpy(out + n, SUMMARY, sizeof SUMMARY - 1);
	n += sizeof SUMMARY - 1;
	memcpy(out + n, STATE, sizeof STATE - 1);
	return n + sizeof STATE - 1;
}

static struct psave_result saved;
static char saved_summary[512];

static void save_done(void *arg, const struct psave_result *r)
{
	saved = *r;
	snprintf(saved_summary, sizeof saved_summary, "%s", r->summary ? r->summary : "");
	saved.summary = NULL;
	loop_stop(loop);
}

/* Streams a save of session "default" through the real psave. */
static void save_one(void)
{
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	unsigned char b[512], h[16];
	size_t n = body(b);
	memcpy(h, PERSIST_SAVE_MAGIC, 8);
	put64(h + 8, n);
	assert_int_equal(write(pp[1], h, sizeof h), (ssize_t)sizeof h);
	assert_int_equal(write(pp[1], b, n), (ssize_t)n);
	struct err e = { 0 };
	struct psave *s = psave_start(p, loop, "default", 3, pp[0], save_done, NULL, &e);
	assert_non_null(s);
	loop_run(loop);
	close(pp[1]);
	assert_int_equal(saved.status, 0);
}

static int verdict_of;

static void restore_done(void *arg, int verdict)
{
	verdict_of = verdict;
	loop_stop(loop);
}

/* Opens and streams the snapshot; the bytes the session would read and the
 * verdict byte after them. */
static int restore(unsigned char *got, size_t cap, size_t *len, char *verdict, int *format)
{
	struct prestore *r = NULL;
	struct err e = { 0 };
	int rc = prestore_open(p, "default", &r, &e);
	if (rc <= 0)
		return rc;
	*format = prestore_format(r);
	size_t total = prestore_bytes(r);
	assert_true(total + 1 <= cap);
	int fd = prestore_start(r, loop, restore_done, NULL);
	assert_true(fd >= 0);
	loop_run(loop);
	size_t n = 0;
	while (n < total + 1) {
		ssize_t k = read(fd, got + n, total + 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	prestore_free(r);
	*len = n ? n - 1 : 0;
	*verdict = n ? (char)got[n - 1] : 0;
	return 1;
}

static int setup(void **state)
{
	struct err e = { 0 };
	f = fx_new("persist");
	char xdg[128];
	snprintf(xdg, sizeof xdg, "%s/state", f->tmp);
	assert_int_equal(mkdir(xdg, 0700), 0);
	setenv("XDG_STATE_HOME", xdg, 1);
	assert_int_equal(policy_builtin(&pol, &e), 0);
	pol->limits.persist = true;
	pol->limits.persist_mb = 1;
	p = persist_new(&f->ws, pol);
	assert_true(persist_on(p));
	loop = loop_new();
	wpath(f, snap, sizeof snap, ".sessions/default/state.snap");
	return 0;
}

static int teardown(void **state)
{
	loop_free(loop);
	persist_free(p);
	policy_free(pol);
	fx_free(f);
	return 0;
}

static void test_a_save_restores_with_a_good_verdict(void **state)
{
	save_one();
	assert_string_equal(saved_summary, SUMMARY);
	unsigned char got[1024], want[512];
	size_t n, wn = body(want);
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &n, &v, &format), 1);
	assert_int_equal(format, 2);
	assert_int_equal(n, wn);
	assert_memory_equal(got, want, wn);
	assert_int_equal(v, 'Y');
	assert_int_equal(verdict_of, 1);
}

/* The key's id in a v2 trailer (72 bytes: magic, length, time, cells,
 * key id, nonce, tag) stands for another key. */
static void test_another_key_is_refused_as_such_and_kept(void **state)
{
	save_one();
	int fd = open(snap, O_RDWR);
	off_t size = lseek(fd, 0, SEEK_END);
	unsigned char x;
	assert_int_equal(pread(fd, &x, 1, size - 72 + 32), 1);
	x ^= 0xff;
	assert_int_equal(pwrite(fd, &x, 1, size - 72 + 32), 1);
	close(fd);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), -EKEYREJECTED);
	assert_non_null(strstr(e.msg, "saved with another key: not restored"));
	assert_int_equal(access(snap, F_OK), 0);
}

static void test_a_changed_byte_gets_a_bad_verdict_and_goes(void **state)
{
	save_one();
	int fd = open(snap, O_RDWR);
	unsigned char x;
	assert_int_equal(pread(fd, &x, 1, 20), 1);
	x ^= 1;
	assert_int_equal(pwrite(fd, &x, 1, 20), 1);
	close(fd);
	unsigned char got[1024];
	size_t n;
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &n, &v, &format), 1);
	assert_int_equal(v, 'N');
	assert_int_equal(verdict_of, 0);
	assert_int_equal(access(snap, F_OK), -1);
}

/* A snapshot written by the previous version: HMAC-SHA256 under the key,
 * trailer PSMSNAP1 (magic, length, time, cells, 32-byte tag). */
static void test_a_v1_snapshot_still_restores(void **state)
{
	unsigned char b[512];
	size_t n = body(b) - 8 - (sizeof SUMMARY - 1); /* v1 had no summary */
	memmove(b, b + 8 + sizeof SUMMARY - 1, n);
	char keyp[256];
	snprintf(keyp, sizeof keyp, "%s/state/python-sandbox-mcp/key", f->tmp);
	unsigned char key[32];
	int kfd = open(keyp, O_RDONLY);
	assert_int_equal(read(kfd, key, sizeof key), 32);
	close(kfd);
	unsigned char nums[24];
	put64(nums, n);
	put64(nums + 8, 1700000000000ull);
	put64(nums + 16, 2);
	struct hmac *h = hmac_new(key, sizeof key);
	static const char domain[] = "python-sandbox-mcp snapshot v1";
	hmac_update(h, domain, sizeof domain);
	hmac_update(h, f->ws.abs, strlen(f->ws.abs) + 1);
	hmac_update(h, "default", 8);
	hmac_update(h, nums, sizeof nums);
	hmac_update(h, b, n);
	unsigned char t[64];
	memcpy(t, "PSMSNAP1", 8);
	memcpy(t + 8, nums, 24);
	assert_int_equal(hmac_final(h, t + 32), 0);
	hmac_free(h);
	char dir[512];
	wpath(f, dir, sizeof dir, ".sessions");
	mkdir(dir, 0700);
	wpath(f, dir, sizeof dir, ".sessions/default");
	mkdir(dir, 0700);
	int fd = open(snap, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	assert_int_equal(write(fd, t, sizeof t), (ssize_t)sizeof t);
	close(fd);
	unsigned char got[1024];
	size_t gn;
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &gn, &v, &format), 1);
	assert_int_equal(format, 1);
	assert_int_equal(gn, n);
	assert_memory_equal(got, b, n);
	assert_int_equal(v, 'Y');
}

/* Over persist_mb (1 MB here) by its size: refused before anything is
 * read, and left for the next save. */
static void test_over_the_cap_is_refused_by_its_size(void **state)
{
	save_one();
	assert_int_equal(truncate(snap, 3 << 20), 0);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), -EFBIG);
	assert_non_null(strstr(e.msg, "over limits.persist_mb (1 MB)"));
	assert_int_equal(access(snap, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_save_restores_with_a_good_verdict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_another_key_is_refused_as_such_and_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_changed_byte_gets_a_bad_verdict_and_goes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_v1_snapshot_still_restores, setup, teardown),
		cmocka_unit_test_setup_teardown(test_over_the_cap_is_refused_by_its_size, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
