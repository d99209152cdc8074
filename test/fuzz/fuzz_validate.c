/* Fuzz target: the checks of verify_outputs (files/validate.h) over bytes
 * that untrusted code wrote.
 *
 * Input: byte 0 chooses the kind (low 3 bits, modulo 7) and the options
 * (bit 3: required_keys for JSON; bits 4-7: min_rows for CSV), byte 1 is
 * min_bytes as a signed char (0 = the default; negative = no minimum); the
 * rest is the file.  Every input is also given to png_size and jpeg_size,
 * which return images inline.
 *
 * Checks: the detail is a non-empty, NUL-terminated line of printable
 * ASCII (untrusted bytes only reach it through esc()); an empty file never
 * passes; a PNG or JPEG that passes has the size that png_size/jpeg_size
 * report; whatever the parser allocated is given back (the server-wide
 * count is 0 between checks).  Each input is also checked as an SVG under
 * memory bounds small enough for it to reach (1 to 256 KiB, chosen by
 * byte 1; the server-wide one half of it when byte 1 is odd): a refusal
 * is a failed check with a detail, never a crash.  Run it under a memory
 * limit (fuzz.mk: -rss_limit_mb, -malloc_limit_mb). */
#include <string.h>

#include "../../files/validate.h"
#include "fuzz.h"

static const char *const keys[] = { "name", "rows", "", "a\"b" };

static void check_detail(const struct vresult *r, enum vkind k)
{
	size_t n = strnlen(r->detail, sizeof r->detail);
	FUZZ_CHECK(n < sizeof r->detail, "detail not terminated (kind %s)", vkind_name(k));
	FUZZ_CHECK(n > 0, "empty detail (kind %s)", vkind_name(k));
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK((unsigned char)r->detail[i] >= 0x20 && (unsigned char)r->detail[i] < 0x7f,
			   "byte 0x%02x at %zu of the detail (kind %s): %s", (unsigned char)r->detail[i], i,
			   vkind_name(k), r->detail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	enum vkind kind = (enum vkind)((data[0] & 7) % 7);
	struct vspec spec = {
		.kind = kind,
		.min_bytes = (signed char)data[1],
		.required_keys = (data[0] & 8) ? keys : NULL,
		.n_required_keys = (data[0] & 8) ? sizeof keys / sizeof keys[0] : 0,
		.min_rows = data[0] >> 4,
	};
	size_t len = size - 2;
	unsigned char *buf = fuzz_dup(data + 2, len);
	struct vresult r;

	validate_buffer(&spec, buf, len, &r);
	check_detail(&r, kind);
	if (len == 0 && spec.min_bytes >= 0)
		FUZZ_CHECK(!r.ok, "an empty file passed as %s", vkind_name(kind));

	unsigned w = 0, h = 0;
	bool png = png_size(buf, len, &w, &h);
	if (png)
		FUZZ_CHECK(w > 0 && h > 0 && w <= 0x7fffffffu && h <= 0x7fffffffu, "png_size %ux%u", w, h);
	if (kind == VK_PNG && r.ok)
		FUZZ_CHECK(png && r.width == w && r.height == h, "valid PNG %ux%u but png_size %d %ux%u",
			   r.width, r.height, png, w, h);

	unsigned jw = 0, jh = 0;
	bool jpeg = jpeg_size(buf, len, &jw, &jh);
	if (jpeg)
		FUZZ_CHECK(jw > 0 && jh > 0, "jpeg_size %ux%u", jw, jh);
	if (kind == VK_JPEG && r.ok)
		FUZZ_CHECK(jpeg && r.width == jw && r.height == jh, "valid JPEG %ux%u but jpeg_size %d %ux%u",
			   r.width, r.height, jpeg, jw, jh);

	/* The same bytes under every other kind: each check must cope with
	 * any file (verify_outputs takes the kind from the caller). */
	for (int k = VK_ANY; k <= VK_TEXT; k++) {
		if (k == (int)kind)
			continue;
		spec.kind = (enum vkind)k;
		validate_buffer(&spec, buf, len, &r);
		check_detail(&r, (enum vkind)k);
		FUZZ_CHECK(validate_mem_in_use() == 0, "%zu bytes still counted after a %s check", validate_mem_in_use(),
			   vkind_name((enum vkind)k));
	}

	size_t cap = ((size_t)data[1] + 1) << 10;
	validate_set_mem_bounds(cap, data[1] & 1 ? cap / 2 : cap);
	spec.kind = VK_SVG;
	validate_buffer(&spec, buf, len, &r);
	validate_set_mem_bounds(0, 0);
	check_detail(&r, VK_SVG);
	FUZZ_CHECK(validate_mem_in_use() == 0, "%zu bytes still counted after a bounded SVG check", validate_mem_in_use());
	free(buf);
	return 0;
}
