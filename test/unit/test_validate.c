/* Unit tests of files/validate.c: each kind on good and broken fixtures
 * (fixtures/files/, made by fixtures/files/make_fixtures.py), plus inline
 * edge cases.  FIXTURES_DIR overrides where the fixtures are looked for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../files/validate.h"

static char fixdir[PATH_MAX];

static void find_fixtures(void)
{
	const char *env = getenv("FIXTURES_DIR");
	char exe[PATH_MAX - 32];

	if (env) {
		snprintf(fixdir, sizeof fixdir, "%s", env);
		return;
	}
	if (access("fixtures/files/good.png", R_OK) == 0) {
		snprintf(fixdir, sizeof fixdir, "fixtures/files");
		return;
	}
	/* build/test/test_x or build/san/test/test_x: walk up from the binary. */
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		for (int up = 0; up < 5; up++) {
			char *s = strrchr(exe, '/');
			if (!s)
				break;
			*s = '\0';
			snprintf(fixdir, sizeof fixdir, "%s/fixtures/files", exe);
			char probe[PATH_MAX + 16];
			snprintf(probe, sizeof probe, "%s/good.png", fixdir);
			if (access(probe, R_OK) == 0)
				return;
		}
	}
	snprintf(fixdir, sizeof fixdir, "fixtures/files");
}

static unsigned char *load(const char *name, size_t *len)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", fixdir, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("fixture %s missing (run from the repo root or set FIXTURES_DIR)", path);
	unsigned char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		if (r == 0)
			break;
		n += r;
	}
	fclose(f);
	buf = realloc(buf, n + 1); /* NUL-terminated, not counted */
	assert_non_null(buf);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static const char *const req_ok[] = { "accuracy", "n" };
static const char *const req_missing[] = { "accuracy", "f1", "recall" };

struct vcase {
	const char *file;
	enum vkind kind;
	bool ok;
	const char *needle; /* must appear in detail */
	const char *const *keys;
	size_t nkeys;
	long min_rows;
};

static const struct vcase cases[] = {
	{ "good.png", VK_PNG, true, "16x8", NULL, 0, 0 },
	{ "truncated.png", VK_PNG, false, "truncated", NULL, 0, 0 },
	{ "no_iend.png", VK_PNG, false, "no IEND", NULL, 0, 0 },
	{ "ihdr_zero_width.png", VK_PNG, false, "0x8", NULL, 0, 0 },
	{ "ihdr_bad_length.png", VK_PNG, false, "14 bytes instead of 13", NULL, 0, 0 },
	{ "bad_crc.png", VK_PNG, false, "CRC", NULL, 0, 0 },
	{ "trailing.png", VK_PNG, false, "after its IEND", NULL, 0, 0 },
	{ "jpeg_named.png", VK_PNG, false, "looks like a JPEG", NULL, 0, 0 },
	{ "empty.png", VK_PNG, false, "empty (0 bytes)", NULL, 0, 0 },
	{ "good.json", VK_PNG, false, "signature", NULL, 0, 0 },

	{ "good.jpg", VK_JPEG, true, "16x8 pixels (baseline)", NULL, 0, 0 },
	{ "progressive.jpg", VK_JPEG, true, "progressive", NULL, 0, 0 },
	{ "padded.jpg", VK_JPEG, true, "16x8", NULL, 0, 0 },
	{ "no_eoi.jpg", VK_JPEG, false, "without the EOI", NULL, 0, 0 },
	{ "truncated.jpg", VK_JPEG, false, "truncated", NULL, 0, 0 },
	{ "trailing.jpg", VK_JPEG, false, "after its EOI", NULL, 0, 0 },
	{ "good.png", VK_JPEG, false, "looks like a PNG", NULL, 0, 0 },

	{ "good.svg", VK_SVG, true, "root <svg>", NULL, 0, 0 },
	{ "prefixed.svg", VK_SVG, true, "svg:svg", NULL, 0, 0 },
	{ "selfclosed.svg", VK_SVG, true, "SVG document", NULL, 0, 0 },
	{ "html.svg", VK_SVG, false, "HTML page", NULL, 0, 0 },
	{ "html_root.svg", VK_SVG, false, "root element is <html>", NULL, 0, 0 },
	{ "truncated.svg", VK_SVG, false, "truncated", NULL, 0, 0 },
	{ "good.png", VK_SVG, false, "Not an SVG", NULL, 0, 0 },

	{ "good.csv", VK_CSV, true, "2 data rows and 3 columns", NULL, 0, 0 },
	{ "good.csv", VK_CSV, true, "2 data rows", NULL, 0, 2 },
	{ "good.csv", VK_CSV, false, "fewer than the 3 required", NULL, 0, 3 },
	{ "crlf.csv", VK_CSV, true, "2 data rows and 2 columns", NULL, 0, 0 },
	{ "quoted.csv", VK_CSV, true, "2 data rows and 3 columns", NULL, 0, 0 },
	{ "ragged.csv", VK_CSV, false, "Line 17 of the CSV has 4 fields, the header has 5", NULL, 0, 0 },
	{ "unclosed.csv", VK_CSV, false, "starts on line 2 is never closed", NULL, 0, 0 },
	{ "semicolon.csv", VK_CSV, true, "write the file with commas", NULL, 0, 0 },
	{ "header_only.csv", VK_CSV, true, "0 data rows", NULL, 0, 0 },
	{ "empty.csv", VK_CSV, false, "empty", NULL, 0, 0 },
	{ "good.png", VK_CSV, false, "NUL", NULL, 0, 0 },

	{ "good.json", VK_JSON, true, "object with 3 keys", NULL, 0, 0 },
	{ "good.json", VK_JSON, true, "object", req_ok, 2, 0 },
	{ "good.json", VK_JSON, false, "lacks required keys: \"f1\", \"recall\". Its top-level keys are: \"accuracy\", \"n\", \"labels\"",
	  req_missing, 3, 0 },
	{ "array.json", VK_JSON, true, "array with 3 items", NULL, 0, 0 },
	{ "array.json", VK_JSON, false, "top level is an array", req_ok, 2, 0 },
	{ "invalid.json", VK_JSON, false, "Invalid JSON at line 2", NULL, 0, 0 },
	{ "nan.json", VK_JSON, false, "NaN and Infinity", NULL, 0, 0 },
	{ "trailing.json", VK_JSON, false, "more than one value: after the first, data continues at line 1, column 10", NULL, 0, 0 },
	{ "empty.json", VK_JSON, false, "empty", NULL, 0, 0 },

	{ "good.txt", VK_TEXT, true, "2 lines", NULL, 0, 0 },
	{ "bad_utf8.txt", VK_TEXT, false, "offset 4 (line 2)", NULL, 0, 0 },
	{ "nul.txt", VK_TEXT, false, "NUL byte at offset 3", NULL, 0, 0 },
	{ "empty.txt", VK_TEXT, false, "empty", NULL, 0, 0 },

	{ "good.png", VK_ANY, true, "83 bytes", NULL, 0, 0 },
	{ "empty.txt", VK_ANY, false, "empty", NULL, 0, 0 },
};

static void test_fixtures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct vcase *c = &cases[i];
		size_t len;
		unsigned char *buf = load(c->file, &len);
		struct vspec spec = { .kind = c->kind, .required_keys = c->keys, .n_required_keys = c->nkeys,
				      .min_rows = c->min_rows };
		struct vresult r;
		validate_buffer(&spec, buf, len, &r);
		if (r.ok != c->ok || !strstr(r.detail, c->needle))
			fail_msg("%s as %s: ok=%d, detail \"%s\"; wanted ok=%d and \"%s\"", c->file, vkind_name(c->kind),
				 r.ok, r.detail, c->ok, c->needle);
		free(buf);
	}
}

static void check(enum vkind k, const char *s, bool ok, const char *needle)
{
	struct vspec spec = { .kind = k };
	struct vresult r;
	validate_buffer(&spec, (const unsigned char *)s, strlen(s), &r);
	if (r.ok != ok || (needle && !strstr(r.detail, needle)))
		fail_msg("%s \"%s\": ok=%d detail \"%s\"; wanted ok=%d and \"%s\"", vkind_name(k), s, r.ok, r.detail, ok,
			 needle ? needle : "");
}

static void test_csv_inline(void **state)
{
	(void)state;
	check(VK_CSV, "a,b\n1,2", true, "1 data row and 2 columns");      /* no final newline */
	check(VK_CSV, "a,b\n1,2\n\n\n", true, "1 data row");               /* blank tail */
	check(VK_CSV, "a,b\n\n1,2\n", false, "Line 2 of the CSV is blank"); /* blank middle */
	check(VK_CSV, "a\n\n1\n", true, "2 data rows");                     /* 1 column: empty value */
	check(VK_CSV, "\na,b\n", false, "Line 1");
	check(VK_CSV, "a,b\n\"x\"y,2\n", false, "after the closing quote");
	check(VK_CSV, "a,b\n5\"6,2\n", true, NULL);                         /* stray quote in unquoted */
	check(VK_CSV, "a,b\n\"1\r\n2\",3\r\n", true, "1 data row");
	check(VK_CSV, "a,b\n1,2,3\n", false, "Line 2 of the CSV has 3 fields, the header has 2");
	check(VK_CSV, "a,b\r", true, "0 data rows");
	check(VK_CSV, "\"", false, "never closed");
	check(VK_CSV, "a,\"", false, "never closed");
}

static void test_svg_inline(void **state)
{
	(void)state;
	check(VK_SVG, "<svg></svg>", true, NULL);
	check(VK_SVG, "<svg>", false, "does not end with </svg>");
	check(VK_SVG, "<svgx></svgx>", false, "root element is <svgx>");
	check(VK_SVG, "<svg", false, "truncated");
	check(VK_SVG, "<!-- x", false, "truncated");
	check(VK_SVG, "<?xml ", false, "truncated");
	check(VK_SVG, "<!DOCTYPE svg [ <!ENTITY a \">\"> ]><svg></svg >", true, NULL);
	check(VK_SVG, "   ", false, "white space");
	check(VK_SVG, "<?xml version='1.0'?>", false, "prolog");
	check(VK_SVG, "hello <svg></svg>", false, "text comes before");
	check(VK_SVG, "<svg/>junk", false, "does not end");
	check(VK_SVG, "<", false, "truncated");
	check(VK_SVG, "\xff\xfe<\0s\0", false, "UTF-16");
	/* Parsed as XML, not scanned at both ends: what lies between must be
	 * well-formed too. */
	check(VK_SVG, "<svg><g></svg>", false, "not well-formed XML");
	check(VK_SVG, "<svg width=10></svg>", false, "not well-formed XML");
	check(VK_SVG, "<svg>&nope;</svg>", false, "undefined entity");
	check(VK_SVG, "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"1\"/><!-- c --></svg>\n<!-- end -->\n", true,
	      "root <svg>");
	/* An entity that expands a thousand-fold at each level (billion
	 * laughs): refused, never expanded. */
	check(VK_SVG,
	      "<!DOCTYPE svg [<!ENTITY a \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">"
	      "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">"
	      "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
	      "<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">"
	      "<!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">"
	      "]><svg>&e;</svg>",
	      false, "amplification");
	/* An external entity is never loaded. */
	check(VK_SVG, "<!DOCTYPE svg [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><svg>&x;</svg>", true, "root <svg>");
}

/* A chunk type that is not four letters is quoted in the detail, byte by
 * byte, so the user sees which bytes broke the file. */
static void test_png_bad_chunk_type(void **state)
{
	static const unsigned char png[] = {
		0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
		0, 0, 0, 0, 0x01, 'B', '\\', 'D', 0, 0, 0, 0,
	};
	struct vspec spec = { .kind = VK_PNG };
	struct vresult r;

	(void)state;
	validate_buffer(&spec, png, sizeof png, &r);
	assert_false(r.ok);
	if (!strstr(r.detail, "invalid type \"\\x01B\\x5cD\""))
		fail_msg("detail: %s", r.detail);
}

static void test_json_text_inline(void **state)
{
	(void)state;
	check(VK_JSON, "  \n ", false, "only white space");
	check(VK_JSON, "42", true, "a number");
	check(VK_JSON, "{\"a\":1}   \n", true, "1 key");
	check(VK_JSON, "{\"a\":", false, "Invalid JSON at line 1");
	check(VK_JSON, "[[[[[[[[[[[[[[[[[[[[", false, "Invalid JSON");
	check(VK_TEXT, "\xed\xa0\x80", false, "not part of a UTF-8"); /* surrogate */
	check(VK_TEXT, "\xc0\xaf", false, "not part of a UTF-8");      /* overlong */
	check(VK_TEXT, "\xf4\x90\x80\x80", false, "not part of a UTF-8"); /* > U+10FFFF */
	check(VK_TEXT, "\xe2\x82", false, "offset 0");                  /* cut short */
	check(VK_TEXT, "\xf0\x9f\x98\x80 ok", true, "1 line");

	/* min_bytes: 0 means the default (1), negative allows empty files. */
	struct vresult r;
	struct vspec any = { .kind = VK_ANY, .min_bytes = -1 };
	validate_buffer(&any, NULL, 0, &r);
	assert_true(r.ok);
	any.min_bytes = 10;
	validate_buffer(&any, (const unsigned char *)"12345", 5, &r);
	assert_false(r.ok);
	assert_non_null(strstr(r.detail, "fewer than min_bytes (10)"));
}

static void test_sizes(void **state)
{
	(void)state;
	size_t len;
	unsigned w = 0, h = 0;
	unsigned char *png = load("good.png", &len);
	assert_true(png_size(png, len, &w, &h));
	assert_int_equal(w, 16);
	assert_int_equal(h, 8);
	assert_false(png_size(png, 20, &w, &h));
	assert_false(jpeg_size(png, len, &w, &h));
	free(png);
	unsigned char *jpg = load("good.jpg", &len);
	w = h = 0;
	assert_true(jpeg_size(jpg, len, &w, &h));
	assert_int_equal(w, 16);
	assert_int_equal(h, 8);
	free(jpg);
	jpg = load("truncated.jpg", &len); /* the header is intact */
	assert_true(jpeg_size(jpg, len, &w, &h));
	free(jpg);
}

/* Every prefix of every good fixture, under every kind: nothing may read
 * past the buffer (run under ASan), and no prefix of a PNG, JPEG or SVG
 * is accepted as a complete image (but an SVG without its final newline
 * is complete). */
static void test_prefixes(void **state)
{
	(void)state;
	static const char *const files[] = { "good.png", "good.jpg", "progressive.jpg", "good.svg", "quoted.csv",
					     "good.json", "good.txt" };
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		size_t len;
		unsigned char *buf = load(files[f], &len);
		for (size_t n = 0; n < len; n++) {
			/* An exact-size copy so ASan sees any overread. */
			unsigned char *cp = malloc(n ? n : 1);
			assert_non_null(cp);
			memcpy(cp, buf, n);
			for (int k = VK_ANY; k <= VK_TEXT; k++) {
				struct vspec spec = { .kind = (enum vkind)k };
				struct vresult r;
				validate_buffer(&spec, cp, n, &r);
				assert_true(strlen(r.detail) < sizeof r.detail);
				if (r.ok && (k == VK_PNG || k == VK_JPEG || k == VK_SVG) && f < 4 &&
				    strspn((const char *)buf + n, " \n") < len - n)
					fail_msg("%s cut to %zu bytes accepted as %s: %s", files[f], n, vkind_name((enum vkind)k),
						 r.detail);
			}
			unsigned w, h;
			png_size(cp, n, &w, &h);
			jpeg_size(cp, n, &w, &h);
			free(cp);
		}
		free(buf);
	}
}

/* Random bytes and single-byte mutations of the fixtures: a smoke fuzz. */
static void test_mutations(void **state)
{
	(void)state;
	static const char *const files[] = { "good.png", "good.jpg", "good.svg", "quoted.csv", "good.json" };
	uint32_t seed = 12345;
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		size_t len;
		unsigned char *buf = load(files[f], &len);
		for (int it = 0; it < 3000; it++) {
			unsigned char *cp = malloc(len);
			assert_non_null(cp);
			memcpy(cp, buf, len);
			for (int m = 0; m < 1 + it % 4; m++) {
				seed = seed * 1103515245u + 12345u;
				size_t at = (seed >> 8) % len;
				seed = seed * 1103515245u + 12345u;
				cp[at] = (unsigned char)(seed >> 16);
			}
			seed = seed * 1103515245u + 12345u;
			size_t n = it % 3 ? len : (seed >> 8) % len;
			for (int k = VK_ANY; k <= VK_TEXT; k++) {
				struct vspec spec = { .kind = (enum vkind)k, .required_keys = req_missing, .n_required_keys = 3 };
				struct vresult r;
				validate_buffer(&spec, cp, n, &r);
			}
			free(cp);
		}
		free(buf);
	}
}

static void test_kinds_and_mime(void **state)
{
	(void)state;
	assert_int_equal(vkind_parse("png"), VK_PNG);
	assert_int_equal(vkind_parse("jpg"), VK_JPEG);
	assert_int_equal(vkind_parse("jpeg"), VK_JPEG);
	assert_int_equal(vkind_parse("text"), VK_TEXT);
	assert_int_equal(vkind_parse("any"), VK_ANY);
	assert_int_equal(vkind_parse("gif"), -1);
	assert_int_equal(vkind_parse(NULL), -1);
	assert_string_equal(vkind_name(VK_CSV), "csv");
	assert_int_equal(vkind_from_path("workspace/outputs/a.PNG"), VK_PNG);
	assert_int_equal(vkind_from_path("x.jpeg"), VK_JPEG);
	assert_int_equal(vkind_from_path("x.svg"), VK_SVG);
	assert_int_equal(vkind_from_path("d.v2/x.csv"), VK_CSV);
	assert_int_equal(vkind_from_path("m.json"), VK_JSON);
	assert_int_equal(vkind_from_path("notes.md"), VK_TEXT);
	assert_int_equal(vkind_from_path("run.log"), VK_TEXT);
	assert_int_equal(vkind_from_path("model.pkl"), VK_ANY);
	assert_int_equal(vkind_from_path("d.json/noext"), VK_ANY);
	assert_int_equal(vkind_from_path(".json"), VK_ANY);
	assert_string_equal(mime_from_path("a.png"), "image/png");
	assert_string_equal(mime_from_path("a.JPG"), "image/jpeg");
	assert_string_equal(mime_from_path("a.svg"), "image/svg+xml");
	assert_string_equal(mime_from_path("a.csv"), "text/csv");
	assert_string_equal(mime_from_path("a.json"), "application/json");
	assert_string_equal(mime_from_path("a.txt"), "text/plain");
	assert_string_equal(mime_from_path("a.md"), "text/markdown");
	assert_string_equal(mime_from_path("a.py"), "text/x-python");
	assert_string_equal(mime_from_path("a.npy"), "application/octet-stream");
	assert_string_equal(mime_from_path("a.pdf"), "application/pdf");
	assert_string_equal(mime_from_path("Makefile"), "application/octet-stream");
	assert_string_equal(mime_from_path(".bashrc"), "application/octet-stream");
}

/* The process's peak RSS in MiB (a high-water mark: only ever grows). */
static long peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024;
}

/* n bytes: head, then unit repeated, then tail (cut to fit). */
static unsigned char *build(const char *head, const char *unit, const char *tail, size_t n)
{
	unsigned char *b = malloc(n);
	size_t h = strlen(head), u = strlen(unit), t = strlen(tail), i = h;
	assert_non_null(b);
	memcpy(b, head, h);
	while (i + u + t <= n) {
		memcpy(b + i, unit, u);
		i += u;
	}
	memcpy(b + i, tail, t);
	i += t;
	memset(b + i, ' ', n - i);
	return b;
}

/* Hostile files of 32 MiB: what the check holds beyond the file stays
 * within its bound (the peak grows by the file and at most
 * VALIDATE_MEM_CHECK), and the detail names the bound.
 * Attack: '<svg>' + '<a>' * N took the server from 10 MB to 1.65 GB, a
 * JSON [0,0,0,...] to 1.35 GB. */
static void test_hostile_bounded(void **state)
{
	(void)state;
	const size_t n = 32u << 20;
	struct vresult r;
	struct vspec svg = { .kind = VK_SVG }, json = { .kind = VK_JSON };

	long base = peak_mib();
	unsigned char *b = build("<svg>", "<a>", "", n);
	validate_buffer(&svg, b, n, &r);
	assert_false(r.ok);
	if (!strstr(r.detail, "nests deeper than 256 elements"))
		fail_msg("detail: %s", r.detail);
	free(b);

	/* Distinct attribute names: expat keeps one entry per name. */
	b = malloc(n);
	assert_non_null(b);
	size_t i = (size_t)sprintf((char *)b, "<svg");
	for (unsigned k = 0; i + 32 < n; k++)
		i += (size_t)sprintf((char *)b + i, " a%u=\"\"", k);
	memcpy(b + i, "/>", 2);
	memset(b + i + 2, ' ', n - i - 2);
	validate_buffer(&svg, b, n, &r);
	assert_false(r.ok);
	if (!strstr(r.detail, "too large to check in memory") || !strstr(r.detail, "64 MiB"))
		fail_msg("detail: %s", r.detail);
	assert_int_equal(validate_mem_in_use(), 0);
	free(b);

	/* The server-wide bound, lowered below one check's: what all checks
	 * hold at once is what refuses. */
	validate_set_mem_bounds(4u << 20, 256u << 10);
	b = build("<svg", " a=\"\"><svg", "/>", 1u << 20);
	validate_buffer(&svg, b, 1u << 20, &r);
	validate_set_mem_bounds(0, 0);
	assert_false(r.ok);
	if (!strstr(r.detail, "too large to check in memory now: the checks running at once may hold 256 KiB"))
		fail_msg("detail: %s", r.detail);
	assert_int_equal(validate_mem_in_use(), 0);
	free(b);

	b = build("[0", ",0", "]", n);
	validate_buffer(&json, b, n, &r);
	if (!r.ok || !strstr(r.detail, "JSON array with"))
		fail_msg("detail: %s", r.detail);
	free(b);
	long grew = peak_mib() - base;
#ifdef __SANITIZE_ADDRESS__
	grew -= 256; /* AddressSanitizer keeps up to 256 MiB freed in quarantine */
#endif
	if (grew > 32 + 64 + 48)
		fail_msg("the peak RSS grew by %ld MiB checking 32 MiB files", grew);

	b = build("", "[", "", 1001);
	validate_buffer(&json, b, 1001, &r);
	assert_false(r.ok);
	if (!strstr(r.detail, "deeper than 1000 levels"))
		fail_msg("detail: %s", r.detail);
	free(b);
}

/* The JSON scanner is strict (RFC 8259) and decodes keys as Python does. */
static void test_json_strict(void **state)
{
	(void)state;
	check(VK_JSON, "01", false, "more than one value");
	check(VK_JSON, "-", false, "a digit was expected");
	check(VK_JSON, "[1,]", false, "a value was expected");
	check(VK_JSON, "{\"a\":1,}", false, "a key");
	check(VK_JSON, "{\"a\" 1}", false, "':' was expected");
	check(VK_JSON, "[1 2]", false, "',' or ']' was expected");
	check(VK_JSON, "\"a\x01\"", false, "control character");
	check(VK_JSON, "\"\xff\"", false, "not UTF-8");
	check(VK_JSON, "\"\\x\"", false, "invalid escape");
	check(VK_JSON, "\"\\u12\"", false, "4 hex digits");
	check(VK_JSON, "1.", false, "decimal point");
	check(VK_JSON, "1e", false, "exponent");
	check(VK_JSON, "tru", false, "a value was expected");
	check(VK_JSON, "\xef\xbb\xbf{}", false, "byte order mark");
	check(VK_JSON, "[NaN]", false, "NaN and Infinity");
	check(VK_JSON, "\"\\ud800 \\ud83d\\ude00 \xc3\xa9\xf0\x9f\x98\x80\"", true, "a string");
	check(VK_JSON, "-0.5e+3", true, "a number");
	check(VK_JSON, " [true, false, null, {}, []] ", true, "array with 5 items");
	check(VK_JSON, "{\"a\": {\"b\": [1, {\"c\": 2}]}, \"d\": 3}", true, "object with 2 keys");

	static const char *const want[] = { "a\"b", "\xc3\xa9", "z" };
	struct vspec spec = { .kind = VK_JSON, .required_keys = want, .n_required_keys = 2 };
	struct vresult r;
	const char *doc = "{\"a\\\"b\": 1, \"\\u00e9\": {\"z\": 1}}";
	validate_buffer(&spec, (const unsigned char *)doc, strlen(doc), &r);
	if (!r.ok)
		fail_msg("detail: %s", r.detail);
	spec.n_required_keys = 3; /* "z" is not at the top level */
	validate_buffer(&spec, (const unsigned char *)doc, strlen(doc), &r);
	assert_false(r.ok);
	if (!strstr(r.detail, "lacks required keys: \"z\". Its top-level keys are: \"a\"b\", \"\\xc3\\xa9\"."))
		fail_msg("detail: %s", r.detail);
}

int main(void)
{
	find_fixtures();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_csv_inline),
		cmocka_unit_test(test_svg_inline),
		cmocka_unit_test(test_json_text_inline),
		cmocka_unit_test(test_png_bad_chunk_type),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_kinds_and_mime),
		cmocka_unit_test(test_hostile_bounded),
		cmocka_unit_test(test_json_strict),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
