/* Fuzz target: the decoders of what a session sends about its cell and its
 * save (proto/result.h): W_RESULT, written by code nobody approved, and the
 * saver's summary.
 *
 * Input: byte 0 picks the decoder (even: result_decode, odd:
 * save_summary_decode), the rest is the body.
 *
 * Checks, whatever the body: a refusal is -EPROTO with a message that names
 * W_RESULT (or the summary) and leaves the struct empty; an accepted result
 * holds every string and list to its bound in the header, a status of the
 * list, an error with a type; encoding it and decoding that again gives the
 * same fields (what the server renders is what it decoded). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "../../common/err.h"
#include "../../proto/result.h"
#include "fuzz.h"

static void check_str(const char *s, size_t max, bool empty_ok, const char *what)
{
	if (!s)
		return;
	size_t n = strlen(s);
	FUZZ_CHECK(n <= max && (empty_ok || n > 0), "%s: %zu bytes (1 to %zu)", what, n, max);
}

static void check_pairs(const char *const (*p)[2], size_t n, const char *what)
{
	FUZZ_CHECK(n <= RESULT_LISTED_MAX, "%s: %zu pairs", what, n);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(p[i][0] && p[i][1], "%s %zu: a NULL", what, i);
		check_str(p[i][0], RESULT_VAR_MAX, false, what);
		check_str(p[i][1], RESULT_WHY_MAX, true, what);
	}
}

static void check_result(const struct cell_result *r)
{
	FUZZ_CHECK(r->status == RESULT_OK || r->status == RESULT_ERROR || r->status == RESULT_MEMORY, "status %d",
		   (int)r->status);
	if (r->has_error) {
		FUZZ_CHECK(r->error.type, "an error without a type");
		check_str(r->error.type, RESULT_TYPE_MAX, false, "error.type");
		check_str(r->error.denied_by, RESULT_WORD_MAX, true, "error.denied_by");
		check_str(r->error.hint, RESULT_HINT_MAX, true, "error.hint");
		check_str(r->error.limit, RESULT_LIMIT_MAX, true, "error.limit");
	}
	FUZZ_CHECK(r->n_imports <= RESULT_IMPORTS_MAX, "%zu imports", r->n_imports);
	for (size_t i = 0; i < r->n_imports; i++) {
		FUZZ_CHECK(r->imports[i], "import %zu NULL", i);
		check_str(r->imports[i], RESULT_MODULE_MAX, false, "imports");
	}
	if (r->has_restore) {
		const struct result_restore *rs = &r->restore;
		FUZZ_CHECK(rs->n_restored <= RESULT_LISTED_MAX, "%zu restored", rs->n_restored);
		for (size_t i = 0; i < rs->n_restored; i++)
			check_str(rs->restored[i], RESULT_VAR_MAX, false, "restored");
		check_pairs(rs->failed, rs->n_failed, "failed");
		check_pairs(rs->unsaved, rs->n_unsaved, "unsaved");
		FUZZ_CHECK(rs->restored_more >= 0 && rs->failed_more >= 0 && rs->unsaved_more >= 0, "a negative count");
	}
}

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_round_trip(const struct cell_result *r)
{
	char *txt = result_encode(r);
	struct cell_result b;
	struct err e = { 0 };
	FUZZ_CHECK(result_decode(txt, strlen(txt), &b, &e) == 0, "its own encoding is refused: %s", e.msg);
	FUZZ_CHECK(b.status == r->status && same(b.value, r->value) && b.has_error == r->has_error &&
			   b.n_imports == r->n_imports && b.import_read == r->import_read && b.has_restore == r->has_restore,
		   "the round trip changed a field");
	if (r->has_error)
		FUZZ_CHECK(same(b.error.type, r->error.type) && same(b.error.message, r->error.message) &&
				   same(b.error.traceback, r->error.traceback) && same(b.error.hint, r->error.hint),
			   "the round trip changed the error");
	for (size_t i = 0; i < r->n_imports; i++)
		FUZZ_CHECK(same(b.imports[i], r->imports[i]), "import %zu changed", i);
	if (r->has_restore)
		FUZZ_CHECK(b.restore.verified == r->restore.verified && b.restore.n_restored == r->restore.n_restored &&
				   b.restore.n_failed == r->restore.n_failed && b.restore.n_unsaved == r->restore.n_unsaved,
			   "the round trip changed the restore");
	result_free(&b);
	free(txt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned char *body = fuzz_dup(data + 1, size - 1);
	struct err e = { 0 };
	if (data[0] % 2 == 0) {
		struct cell_result r;
		int rc = result_decode(body, size - 1, &r, &e);
		if (rc < 0) {
			FUZZ_CHECK(rc == -EPROTO, "rc %d", rc);
			FUZZ_CHECK(strstr(e.msg, "W_RESULT"), "a refusal that does not name W_RESULT: %s", e.msg);
			FUZZ_CHECK(r.status == RESULT_OK && !r.value && !r.has_error && !r.n_imports && !r.has_restore,
				   "a refused result left fields");
		} else {
			check_result(&r);
			check_round_trip(&r);
		}
		result_free(&r);
	} else {
		struct save_summary s;
		int rc = save_summary_decode(body, size - 1, &s, &e);
		if (rc < 0) {
			FUZZ_CHECK(rc == -EPROTO, "rc %d", rc);
			FUZZ_CHECK(s.n_unsaved == 0, "a refused summary left names");
		} else {
			check_pairs(s.unsaved, s.n_unsaved, "unsaved");
			FUZZ_CHECK(s.unsaved_more >= 0, "unsaved_more %d", s.unsaved_more);
		}
		save_summary_free(&s);
	}
	free(body);
	return 0;
}
