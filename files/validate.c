/* Checks of verify_outputs (see validate.h).
 *
 * Everything here reads bytes written by untrusted code: every read is
 * bounded by len before it happens (lengths are compared as "need > len -
 * pos", never "pos + need > len", so nothing can wrap), nothing recurses
 * on input (JSON nesting is a stack of JSON_MAX_DEPTH bytes), and every detail quotes input
 * only through esc_bytes(). */
#include "validate.h"
#include "vdetail.h"
#include "validate_json.h"

#include <expat.h>
#include <limits.h>
#include <malloc.h>
#include <stdatomic.h>

#include "../common/escape.h"
#include "../common/util.h"
#include "../common/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}


static bool starts_ci(const unsigned char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && strncasecmp((const char *)p, lit, n) == 0;
}


/* What the bytes look like, for hints when they are not what was asked. */
static const char *sniff(const unsigned char *b, size_t len)
{
	if (vr_starts(b, len, "\x89PNG\r\n\x1a\n"))
		return "a PNG image";
	if (len >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return "a JPEG image";
	if (vr_starts(b, len, "GIF87a") || vr_starts(b, len, "GIF89a"))
		return "a GIF image";
	if (len >= 12 && vr_starts(b, len, "RIFF") && memcmp(b + 8, "WEBP", 4) == 0)
		return "a WebP image";
	if (vr_starts(b, len, "%PDF-"))
		return "a PDF document";
	if (vr_starts(b, len, "PK\x03\x04"))
		return "a ZIP archive (or .xlsx/.docx)";
	if (vr_starts(b, len, "\x93NUMPY"))
		return "a NumPy .npy array";
	if (vr_starts(b, len, "PAR1"))
		return "a Parquet file";
	size_t i = vr_starts(b, len, "\xef\xbb\xbf") ? 3 : 0;
	while (i < len && vr_is_ws(b[i]))
		i++;
	if (starts_ci(b + i, len - i, "<!doctype html") || starts_ci(b + i, len - i, "<html"))
		return "an HTML page";
	if (vr_starts(b + i, len - i, "<svg") || vr_starts(b + i, len - i, "<?xml"))
		return "an SVG or XML document";
	if (i < len && (b[i] == '{' || b[i] == '['))
		return "JSON text";
	return NULL;
}

static void hint_sniff(struct vresult *r, const unsigned char *b, size_t len, const char *what)
{
	const char *s = sniff(b, len);
	char q[64];

	if (s)
		vr_append(r, " It looks like %s: write a real %s or verify it with the matching kind.", s, what);
	else if (len)
		vr_append(r, " It starts with \"%s\".", esc_bytes(q, sizeof q, b, len, 16));
}

/* ---- kinds, extensions, MIME types ------------------------------------ */

static const char *const kind_names[] = {
	[VK_ANY] = "any", [VK_PNG] = "png", [VK_JPEG] = "jpeg", [VK_SVG] = "svg",
	[VK_CSV] = "csv", [VK_JSON] = "json", [VK_TEXT] = "text",
};

int vkind_parse(const char *s)
{
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++)
		if (strcmp(s, kind_names[i]) == 0)
			return (int)i;
	if (strcmp(s, "jpg") == 0)
		return VK_JPEG;
	if (strcmp(s, "txt") == 0)
		return VK_TEXT;
	return -1;
}

const char *vkind_name(enum vkind k)
{
	if ((unsigned)k < sizeof kind_names / sizeof kind_names[0])
		return kind_names[k];
	return "any";
}

/* The extension of the last path component, without the dot; "" when the
 * name has none (".bashrc" has none). */
static const char *ext_of(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base)
		return "";
	return dot + 1;
}

/* One table of extensions: the kind verify_outputs checks a file as, and
 * the MIME type listings and resources give it. */
static const struct {
	const char *ext;
	enum vkind kind;
	const char *mime;
} ext_tab[] = {
	{ "png", VK_PNG, "image/png" }, { "jpg", VK_JPEG, "image/jpeg" }, { "jpeg", VK_JPEG, "image/jpeg" },
	{ "gif", VK_ANY, "image/gif" }, { "webp", VK_ANY, "image/webp" }, { "svg", VK_SVG, "image/svg+xml" },
	{ "bmp", VK_ANY, "image/bmp" }, { "tif", VK_ANY, "image/tiff" }, { "tiff", VK_ANY, "image/tiff" },
	{ "csv", VK_CSV, "text/csv" }, { "tsv", VK_TEXT, "text/tab-separated-values" },
	{ "json", VK_JSON, "application/json" }, { "jsonl", VK_TEXT, "application/x-ndjson" },
	{ "ndjson", VK_TEXT, "application/x-ndjson" }, { "txt", VK_TEXT, "text/plain" },
	{ "log", VK_TEXT, "text/plain" }, { "md", VK_TEXT, "text/markdown" }, { "html", VK_TEXT, "text/html" },
	{ "htm", VK_TEXT, "text/html" }, { "xml", VK_TEXT, "application/xml" }, { "css", VK_TEXT, "text/css" },
	{ "js", VK_TEXT, "text/javascript" }, { "py", VK_TEXT, "text/x-python" },
	{ "ipynb", VK_ANY, "application/x-ipynb+json" }, { "yaml", VK_TEXT, "application/yaml" },
	{ "yml", VK_TEXT, "application/yaml" }, { "toml", VK_TEXT, "application/toml" },
	{ "ini", VK_TEXT, "text/plain" }, { "rst", VK_TEXT, "text/x-rst" }, { "tex", VK_TEXT, "text/x-tex" },
	{ "pdf", VK_ANY, "application/pdf" }, { "parquet", VK_ANY, "application/vnd.apache.parquet" },
	{ "npy", VK_ANY, "application/octet-stream" }, { "npz", VK_ANY, "application/zip" },
	{ "pkl", VK_ANY, "application/octet-stream" }, { "zip", VK_ANY, "application/zip" },
	{ "gz", VK_ANY, "application/gzip" }, { "tar", VK_ANY, "application/x-tar" },
	{ "xlsx", VK_ANY, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
	{ "mp4", VK_ANY, "video/mp4" }, { "gifv", VK_ANY, "video/mp4" }, { "wav", VK_ANY, "audio/wav" },
	{ "mp3", VK_ANY, "audio/mpeg" },
};

static int ext_find(const char *path)
{
	const char *x = path ? ext_of(path) : "";
	for (size_t i = 0; i < N_ELEMENTS(ext_tab); i++)
		if (strcasecmp(x, ext_tab[i].ext) == 0)
			return (int)i;
	return -1;
}

enum vkind vkind_from_path(const char *path)
{
	int i = ext_find(path);
	return i < 0 ? VK_ANY : ext_tab[i].kind;
}

const char *mime_from_path(const char *path)
{
	int i = ext_find(path);
	return i < 0 ? "application/octet-stream" : ext_tab[i].mime;
}

/* ---- PNG -------------------------------------------------------------- */

static const unsigned char png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

bool png_size(const unsigned char *buf, size_t len, unsigned *w, unsigned *h)
{
	if (len < 8 + 8 + 13 + 4 || memcmp(buf, png_sig, 8) != 0 || be32(buf + 8) != 13 ||
	    memcmp(buf + 12, "IHDR", 4) != 0)
		return false;
	uint32_t ww = be32(buf + 16), hh = be32(buf + 20);
	if (ww == 0 || hh == 0 || ww > 0x7fffffffu || hh > 0x7fffffffu)
		return false;
	*w = ww;
	*h = hh;
	return true;
}

static bool png_depth_ok(unsigned ct, unsigned bd)
{
	switch (ct) {
	case 0: return bd == 1 || bd == 2 || bd == 4 || bd == 8 || bd == 16;
	case 3: return bd == 1 || bd == 2 || bd == 4 || bd == 8;
	case 2: case 4: case 6: return bd == 8 || bd == 16;
	default: return false;
	}
}

/* Every chunk's CRC is checked: files written by PIL, matplotlib or
 * libpng always carry correct ones, so a mismatch means corruption. */
static void check_png(const unsigned char *b, size_t len, struct vresult *r)
{
	uint32_t crctab[256];
	size_t pos = 8, nchunks = 0, idat = 0;
	bool iend = false;
	char t[8];

	if (len < 8 || memcmp(b, png_sig, 8) != 0) {
		vr_set(r, false, "Not a PNG: the file does not start with the 8-byte PNG signature.");
		hint_sniff(r, b, len, "PNG (e.g. plt.savefig('x.png'))");
		return;
	}
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crctab[i] = c;
	}
	while (pos < len) {
		if (len - pos < 12) {
			vr_set(r, false, "The PNG is truncated: it ends %zu bytes into a chunk header at offset %zu; "
				       "make sure the file is completely written and closed.", len - pos, pos);
			return;
		}
		uint32_t clen = be32(b + pos);
		const unsigned char *type = b + pos + 4;
		for (int k = 0; k < 4; k++)
			if (!((type[k] >= 'A' && type[k] <= 'Z') || (type[k] >= 'a' && type[k] <= 'z'))) {
				char q[4 * 4 + 8]; /* four \xNN, "..." and the NUL */
				vr_set(r, false, "The PNG is corrupt: the chunk at offset %zu has an invalid type \"%s\".", pos,
				     esc_bytes(q, sizeof q, type, 4, 4));
				return;
			}
		memcpy(t, type, 4);
		t[4] = '\0';
		if (clen > 0x7fffffffu || clen > len - pos - 12) {
			vr_set(r, false, "The PNG is truncated: the %s chunk at offset %zu needs %u bytes of data but only %zu "
				       "remain; make sure the file is completely written and closed.", t, pos, clen,
			     len - pos - 12);
			return;
		}
		uint32_t crc = 0xffffffffu;
		for (size_t k = 0; k < 4 + (size_t)clen; k++)
			crc = crctab[(crc ^ b[pos + 4 + k]) & 0xff] ^ (crc >> 8);
		crc ^= 0xffffffffu;
		if (crc != be32(b + pos + 8 + clen)) {
			vr_set(r, false, "The PNG is corrupt: the %s chunk at offset %zu fails its CRC check.", t, pos);
			return;
		}
		if (nchunks == 0) {
			if (strcmp(t, "IHDR") != 0) {
				vr_set(r, false, "The PNG is corrupt: its first chunk is %s, where IHDR (the image header) must come first.", t);
				return;
			}
			if (clen != 13) {
				vr_set(r, false, "The PNG is corrupt: its IHDR chunk has %u bytes instead of 13.", clen);
				return;
			}
			const unsigned char *d = b + pos + 8;
			uint32_t w = be32(d), h = be32(d + 4);
			if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu) {
				vr_set(r, false, "The PNG header gives an invalid size of %ux%u pixels; width and height must be at least 1.",
				     w, h);
				return;
			}
			if (!png_depth_ok(d[9], d[8]) || d[10] != 0 || d[11] != 0 || d[12] > 1) {
				vr_set(r, false, "The PNG header is invalid (colour type %u, bit depth %u, compression %u, filter %u, "
					       "interlace %u).", d[9], d[8], d[10], d[11], d[12]);
				return;
			}
			r->width = w;
			r->height = h;
		} else if (strcmp(t, "IHDR") == 0) {
			vr_set(r, false, "The PNG is corrupt: it has a second IHDR chunk at offset %zu.", pos);
			return;
		}
		if (strcmp(t, "IDAT") == 0)
			idat++;
		pos += 12 + (size_t)clen;
		nchunks++;
		if (strcmp(t, "IEND") == 0) {
			iend = true;
			break;
		}
	}
	if (nchunks == 0) {
		vr_set(r, false, "The PNG has a signature and nothing else: the file is truncated.");
		return;
	}
	if (!iend) {
		vr_set(r, false, "The PNG has no IEND chunk (%zu chunks, %zu bytes): it is truncated or was not closed; "
			       "write it completely (plt.savefig, then close the figure) and verify again.", nchunks, len);
		return;
	}
	if (idat == 0) {
		vr_set(r, false, "The PNG has no IDAT chunk: it holds no pixel data.");
		return;
	}
	if (pos != len) {
		vr_set(r, false, "The PNG has %zu bytes of data after its IEND chunk: two writes into one file? "
			       "Write the image once to a fresh file.", len - pos);
		return;
	}
	vr_set(r, true, "PNG image, %ux%u pixels, %zu bytes.", r->width, r->height, len);
}

/* ---- JPEG ------------------------------------------------------------- */

static bool is_sof(unsigned m)
{
	return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}

/* Skips a scan's entropy-coded data from pos: FF 00 is a stuffed byte,
 * FF D0..D7 a restart marker, FF FF fill; anything else after FF is the
 * next marker, whose offset is returned (len when the data runs out). */
static size_t jpeg_skip_scan(const unsigned char *b, size_t len, size_t pos)
{
	while (pos < len) {
		if (b[pos] != 0xff) {
			pos++;
			continue;
		}
		if (len - pos < 2)
			return len;
		unsigned n = b[pos + 1];
		if (n == 0x00 || (n >= 0xd0 && n <= 0xd7))
			pos += 2;
		else if (n == 0xff)
			pos++;
		else
			break;
	}
	return pos;
}

/* The EOI marker ends at pos: what follows it, and the verdict on a JPEG
 * of w x h pixels.  Zero bytes after EOI are padding that some writers add
 * to round a file up to a block; accepted.  Anything else means two writes
 * into one file or a truncated rewrite, and is refused. */
static bool jpeg_end(const unsigned char *b, size_t len, size_t pos, unsigned w, unsigned h,
		     bool progressive, struct vresult *r)
{
	size_t tail = 0;
	for (size_t k = pos; k < len; k++)
		if (b[k] != 0)
			tail++;
	if (tail) {
		vr_set(r, false, "The JPEG has %zu bytes of data after its EOI marker: two writes into one file? "
			       "Write the image once to a fresh file.", len - pos);
		return false;
	}
	r->width = w;
	r->height = h;
	vr_set(r, true, "JPEG image, %ux%u pixels (%s), %zu bytes.", w, h, progressive ? "progressive" : "baseline", len);
	return true;
}

/* Walks the markers of a JPEG.  With r NULL, stops at the first SOF (for
 * jpeg_size); otherwise checks the whole file and fills r. */
static bool jpeg_walk(const unsigned char *b, size_t len, unsigned *pw, unsigned *ph, struct vresult *r)
{
	size_t pos = 2;
	bool have_sof = false, in_scan = false, progressive = false;
	unsigned w = 0, h = 0;

	if (len < 4 || b[0] != 0xff || b[1] != 0xd8) {
		if (r) {
			vr_set(r, false, "Not a JPEG: the file does not start with the SOI marker (FF D8).");
			hint_sniff(r, b, len, "JPEG (e.g. plt.savefig('x.jpg'))");
		}
		return false;
	}
	for (;;) {
		if (in_scan) {
			pos = jpeg_skip_scan(b, len, pos);
			in_scan = false;
		}
		if (pos >= len) {
			if (r)
				vr_set(r, false, "The JPEG is truncated: it ends without the EOI marker (FF D9) after %zu bytes; "
					       "make sure the file is completely written and closed.", len);
			return false;
		}
		if (b[pos] != 0xff) {
			if (r)
				vr_set(r, false, "The JPEG is corrupt: a marker was expected at offset %zu, found byte 0x%02x.", pos, b[pos]);
			return false;
		}
		size_t mpos = pos;
		while (pos < len && b[pos] == 0xff)
			pos++;
		if (pos >= len)
			continue; /* reported as truncated above */
		unsigned m = b[pos++];
		if (m == 0xd9) { /* EOI */
			if (!have_sof) {
				if (r)
					vr_set(r, false, "The JPEG has no frame header (SOF marker): it gives no image size.");
				return false;
			}
			break;
		}
		if (m == 0xd8 || m == 0x00) {
			if (r)
				vr_set(r, false, "The JPEG is corrupt: unexpected marker FF %02X at offset %zu.", m, mpos);
			return false;
		}
		if ((m >= 0xd0 && m <= 0xd7) || m == 0x01)
			continue; /* standalone markers, no length */
		if (len - pos < 2) {
			pos = len;
			continue;
		}
		unsigned seg = be16(b + pos);
		if (seg < 2 || seg > len - pos) {
			if (r) {
				if (seg < 2)
					vr_set(r, false, "The JPEG is corrupt: the segment FF %02X at offset %zu has length %u.", m, mpos, seg);
				else
					vr_set(r, false, "The JPEG is truncated: the segment FF %02X at offset %zu needs %u bytes but only "
						       "%zu remain; make sure the file is completely written and closed.",
					     m, mpos, seg, len - pos);
			}
			return false;
		}
		if (is_sof(m)) {
			if (have_sof) {
				/* Two frame headers: viewers disagree on the size. */
				if (r)
					vr_set(r, false, "The JPEG has two frame headers (SOF markers): it is not one well-formed image; write it again.");
				return false;
			}
			if (seg < 8) {
				if (r)
					vr_set(r, false, "The JPEG is corrupt: its frame header (FF %02X) is only %u bytes long.", m, seg);
				return false;
			}
			h = be16(b + pos + 3);
			w = be16(b + pos + 5);
			if (w == 0 || h == 0) {
				if (r)
					vr_set(r, false, "The JPEG frame header gives an invalid size of %ux%u pixels.", w, h);
				return false;
			}
			have_sof = true;
			progressive = m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce;
			if (!r) {
				*pw = w;
				*ph = h;
				return true;
			}
		}
		if (m == 0xda) { /* SOS */
			if (!have_sof) {
				if (r)
					vr_set(r, false, "The JPEG is corrupt: image data (SOS) comes before the frame header (SOF).");
				return false;
			}
			in_scan = true;
		}
		pos += seg;
	}
	if (!jpeg_end(b, len, pos, w, h, progressive, r))
		return false;
	*pw = w;
	*ph = h;
	return true;
}

bool jpeg_size(const unsigned char *buf, size_t len, unsigned *w, unsigned *h)
{
	return jpeg_walk(buf, len, w, h, NULL);
}

/* ---- SVG -------------------------------------------------------------- */


/* The SVG is parsed as XML by expat.  Expat never loads external entities
 * (no handler is set for them) and, since 2.4, stops entity expansion that
 * amplifies the input (the "billion laughs" file a hostile cell could
 * write to stall the server).  What is checked on top: UTF-8 (not UTF-16),
 * a root element svg (with or without a prefix), not an HTML page.
 *
 * Bounds that the bytes cannot push (validate.h): every byte expat
 * allocates goes through vmem_* below, which refuses past
 * VALIDATE_MEM_CHECK for this check and past VALIDATE_MEM_SERVER for all
 * the checks the server's threads run at once; elements nest at most
 * SVG_MAX_DEPTH deep; the file is fed in pieces, so expat's own buffer
 * holds one piece and the token that spans it, never a copy of the file.
 * Attack: '<svg>' + '<a>' * N (no element closed) written by a cell made
 * expat allocate per open element: a 32 MiB file took the server from
 * 10 MB to 1.65 GB, a 255 MiB one to 13 GB, and a 64 MiB one got it
 * OOM-killed in a 2304 MiB pod, every session with it. */
struct vmem {
	size_t used, peak;
	bool refused, server_refused;
};

/* The check running on this thread (expat's allocator has no argument). */
static _Thread_local struct vmem *vmem_cur;
/* What the checks of every thread hold together. */
static _Atomic size_t vmem_total;
static size_t vmem_cap_check = VALIDATE_MEM_CHECK, vmem_cap_server = VALIDATE_MEM_SERVER;

void validate_set_mem_bounds(size_t per_check, size_t all_checks)
{
	vmem_cap_check = per_check && per_check < VALIDATE_MEM_CHECK ? per_check : VALIDATE_MEM_CHECK;
	vmem_cap_server = all_checks && all_checks < VALIDATE_MEM_SERVER ? all_checks : VALIDATE_MEM_SERVER;
}

/* A block is its size, then the bytes: 16 bytes keep malloc's alignment. */
#define VMEM_HDR 16

static bool vmem_take(size_t n)
{
	struct vmem *m = vmem_cur;
	if (!m || n > vmem_cap_check - m->used) {
		if (m)
			m->refused = true;
		return false;
	}
	size_t t = atomic_fetch_add(&vmem_total, n);
	if (t + n > vmem_cap_server || t + n < t) {
		atomic_fetch_sub(&vmem_total, n);
		m->refused = m->server_refused = true;
		return false;
	}
	m->used += n;
	if (m->used > m->peak)
		m->peak = m->used;
	return true;
}

static void vmem_give(size_t n)
{
	atomic_fetch_sub(&vmem_total, n);
	if (vmem_cur)
		vmem_cur->used -= n;
}

static void *vmem_malloc(size_t n)
{
	if (n > SIZE_MAX - VMEM_HDR || !vmem_take(n + VMEM_HDR))
		return NULL;
	unsigned char *p = malloc(n + VMEM_HDR);
	if (!p) {
		vmem_give(n + VMEM_HDR);
		return NULL;
	}
	memcpy(p, &n, sizeof n);
	return p + VMEM_HDR;
}

static void vmem_free(void *q)
{
	if (!q)
		return;
	unsigned char *p = (unsigned char *)q - VMEM_HDR;
	size_t n;
	memcpy(&n, p, sizeof n);
	free(p);
	vmem_give(n + VMEM_HDR);
}

static void *vmem_realloc(void *q, size_t n)
{
	if (!q)
		return vmem_malloc(n);
	unsigned char *p = (unsigned char *)q - VMEM_HDR;
	size_t old;
	memcpy(&old, p, sizeof old);
	if (n > SIZE_MAX - VMEM_HDR)
		return NULL;
	if (n > old && !vmem_take(n - old))
		return NULL;
	unsigned char *np = realloc(p, n + VMEM_HDR);
	if (!np) {
		if (n > old)
			vmem_give(n - old);
		return NULL;
	}
	if (n < old)
		vmem_give(old - n);
	memcpy(np, &n, sizeof n);
	return np + VMEM_HDR;
}

static const XML_Memory_Handling_Suite vmem_suite = { vmem_malloc, vmem_realloc, vmem_free };

/* A bound for a detail: "64 MiB" (or "48 KiB" when lowered for tests). */
static const char *bound_text(size_t n, char *buf, size_t sz)
{
	if (n >= (1u << 20))
		snprintf(buf, sz, "%zu MiB", n >> 20);
	else
		snprintf(buf, sz, "%zu KiB", n >> 10);
	return buf;
}

size_t validate_mem_in_use(void)
{
	return atomic_load(&vmem_total);
}

struct svg_ctx {
	XML_Parser p;
	bool root_seen, root_closed, bad_root, html, too_deep;
	int depth;
	char root[96];
};

static bool local_is(const char *name, const char *want)
{
	const char *colon = strrchr(name, ':');
	return strcmp(colon ? colon + 1 : name, want) == 0;
}

static void XMLCALL svg_start(void *data, const XML_Char *name, const XML_Char **attrs)
{
	struct svg_ctx *x = data;
	(void)attrs;
	if (!x->root_seen) {
		x->root_seen = true;
		esc_bytes(x->root, sizeof x->root, (const unsigned char *)name, strlen(name), 40);
		if (!local_is(name, "svg")) {
			x->bad_root = true;
			x->html = strcasecmp(strrchr(name, ':') ? strrchr(name, ':') + 1 : name, "html") == 0;
			XML_StopParser(x->p, XML_FALSE);
		}
	}
	if (++x->depth > SVG_MAX_DEPTH) {
		x->too_deep = true;
		XML_StopParser(x->p, XML_FALSE);
	}
}

static void XMLCALL svg_end(void *data, const XML_Char *name)
{
	struct svg_ctx *x = data;
	(void)name;
	if (--x->depth == 0)
		x->root_closed = true;
}

static void XMLCALL svg_doctype(void *data, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
				int has_internal_subset)
{
	struct svg_ctx *x = data;
	(void)sysid, (void)pubid, (void)has_internal_subset;
	if (strcasecmp(name, "html") == 0) {
		x->html = true;
		XML_StopParser(x->p, XML_FALSE);
	}
}

static void check_svg(const unsigned char *b, size_t len, struct vresult *r)
{
	const unsigned char *p = b, *end = b + len;

	if (vr_starts(p, len, "\xfe\xff") || vr_starts(p, len, "\xff\xfe")) {
		vr_set(r, false, "The SVG is encoded in UTF-16: write it as UTF-8.");
		return;
	}
	if (vr_starts(p, len, "\xef\xbb\xbf"))
		p += 3;
	while (p < end && vr_is_ws(*p))
		p++;
	if (p >= end) {
		vr_set(r, false, "Not an SVG: the file has no root element (it holds only white space).");
		return;
	}
	if (*p != '<') {
		vr_set(r, false, "Not an SVG: text comes before the root element at offset %zu; an SVG file starts "
			       "with '<svg' (after an optional XML declaration).", (size_t)(p - b));
		hint_sniff(r, b, len, "SVG (e.g. plt.savefig('x.svg'))");
		return;
	}
	struct vmem mem = { 0 };
	struct svg_ctx x = { 0 };
	char bt[32];
	vmem_cur = &mem;
	x.p = XML_ParserCreate_MM("UTF-8", &vmem_suite, NULL);
	if (!x.p) {
		vmem_cur = NULL;
		vr_set(r, false, "The SVG was not checked: the server could not set up its parser within its memory for "
			       "checks (%s for all checks at once); verify it again.", bound_text(vmem_cap_server, bt, sizeof bt));
		return;
	}
	XML_SetUserData(x.p, &x);
	XML_SetElementHandler(x.p, svg_start, svg_end);
	XML_SetStartDoctypeDeclHandler(x.p, svg_doctype);
	/* In pieces: XML_Parse copies what it is given into a buffer of its
	 * own, which for the whole file would be a second copy of it. */
	bool ok = true;
	for (size_t off = 0; ok;) {
		size_t n = len - off > SVG_PIECE ? SVG_PIECE : len - off;
		bool last = off + n == len;
		ok = XML_Parse(x.p, (const char *)b + off, (int)n, last) == XML_STATUS_OK;
		off += n;
		if (last)
			break;
	}
	enum XML_Error code = XML_GetErrorCode(x.p);
	/* Expat 2.7 (Debian 13) marks these deprecated for 64-bit forms that
	 * 2.5 (Debian 12) lacks; the values fit (len is under 256 MiB). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	unsigned long line = XML_GetCurrentLineNumber(x.p), col = XML_GetCurrentColumnNumber(x.p) + 1;
	/* These errors mean the input ended too soon: the file is cut short. */
	bool at_end = code == XML_ERROR_UNCLOSED_TOKEN || code == XML_ERROR_PARTIAL_CHAR ||
		      code == XML_ERROR_NO_ELEMENTS || XML_GetCurrentByteIndex(x.p) >= (XML_Index)len;
#pragma GCC diagnostic pop
	const char *what = XML_ErrorString(code);
	XML_ParserFree(x.p);
	vmem_cur = NULL;
	/* What the parser freed stays with this thread's malloc arena
	 * otherwise: given back, so the server's footprint drops again. */
	if (mem.peak > (8u << 20))
		malloc_trim(0);

	if (x.too_deep) {
		vr_set(r, false, "The SVG nests deeper than %d elements (at line %lu), more than the server checks; an image "
			       "written by plt.savefig nests a few levels: write it again, or verify it with kind \"any\".",
		     SVG_MAX_DEPTH, line);
		return;
	}
	if (mem.refused || code == XML_ERROR_NO_MEMORY) {
		if (mem.server_refused)
			vr_set(r, false, "The SVG is too large to check in memory now: the checks running at once may hold %s "
				       "in all and others hold most of it; verify it again.", bound_text(vmem_cap_server, bt, sizeof bt));
		else
			vr_set(r, false, "The SVG is too large to check in memory: parsing it needs more than the %s one "
				       "check may use (at line %lu); write a smaller image (fewer elements, shorter attributes) or "
				       "verify it with kind \"any\".", bound_text(vmem_cap_check, bt, sizeof bt), line);
		return;
	}
	if (x.bad_root) {
		vr_set(r, false, "Not an SVG: the root element is <%s>, not <svg>.", x.root);
		if (x.html)
			vr_append(r, " This is an HTML page; write the SVG image itself, e.g. plt.savefig('x.svg').");
	} else if (x.html) {
		vr_set(r, false, "Not an SVG: this is an HTML page; write the SVG image itself, e.g. plt.savefig('x.svg').");
	} else if (ok) {
		vr_set(r, true, "SVG document (root <%s>), %zu bytes.", x.root, len);
	} else if (code == XML_ERROR_JUNK_AFTER_DOC_ELEMENT) {
		vr_set(r, false, "The SVG does not end with its root element: something follows </%s> at line %lu, column %lu; "
			       "write the file again (plt.savefig) rather than appending to it.", x.root, line, col);
	} else if (at_end && x.root_seen && !x.root_closed) {
		vr_set(r, false, "The SVG does not end with </%s>: it is truncated or was not closed; write it completely "
			       "(plt.savefig, then close the figure) and verify again.", x.root);
	} else if (at_end && !x.root_seen && code == XML_ERROR_NO_ELEMENTS) {
		vr_set(r, false, "Not an SVG: the file has no root element (it holds only a prolog).");
	} else if (at_end) {
		vr_set(r, false, "The SVG is truncated: it ends inside a tag, comment or declaration (%s at line %lu); make "
			       "sure the file is completely written and closed.", what, line);
	} else {
		vr_set(r, false, "The SVG is not well-formed XML: %s at line %lu, column %lu; write it again with plt.savefig.",
		     what, line, col);
	}
}

/* ---- CSV -------------------------------------------------------------- */

static bool at_eol(const unsigned char *b, size_t len, size_t i)
{
	return b[i] == '\n' || (b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'));
}

/* RFC 4180, comma-separated: records end at LF or CRLF; a field that
 * starts with a quote runs to the matching quote and may hold commas,
 * line breaks and doubled quotes; a quote inside an unquoted field is
 * taken as text (as Python's csv and pandas read it).  Line numbers are
 * physical lines, where each record starts. */
static void check_csv(const struct vspec *spec, const unsigned char *b, size_t len, struct vresult *r)
{
	size_t i = 0;
	long line = 1, ncols = -1, rows = 0;
	char q[96];

	if (memchr(b, 0, len)) {
		vr_set(r, false, "Not a CSV: the file contains NUL bytes, so it is binary, not text.");
		hint_sniff(r, b, len, "CSV (e.g. df.to_csv('x.csv', index=False))");
		return;
	}
	while (i < len) {
		size_t rs = i;
		long rec_line = line, nf = 1;

		if (at_eol(b, len, rs)) {
			/* A blank line: fine at the end of the file. */
			size_t k = rs;
			while (k < len && (b[k] == '\n' || b[k] == '\r'))
				k++;
			if (k == len)
				break;
			if (ncols < 0) {
				vr_set(r, false, "Line 1 of the CSV is blank: the header line must come first.");
				return;
			}
			if (ncols != 1) {
				vr_set(r, false, "Line %ld of the CSV is blank, the header has %ld fields: remove blank lines.", rec_line, ncols);
				return;
			}
		}
		for (;;) {
			if (i < len && b[i] == '"') {
				long qline = line;
				i++;
				for (;;) {
					if (i >= len) {
						vr_set(r, false, "The CSV's quoted field that starts on line %ld is never closed: "
							       "quotes inside a quoted field must be doubled (\"\").", qline);
						return;
					}
					unsigned char c = b[i++];
					if (c == '"') {
						if (i < len && b[i] == '"') {
							i++;
							continue;
						}
						break;
					}
					if (c == '\n')
						line++;
				}
				if (i < len && b[i] != ',' && !at_eol(b, len, i)) {
					vr_set(r, false, "Line %ld of the CSV has text after the closing quote of a field: inside a "
						       "quoted field write a quote as two quotes (\"\").", line);
					return;
				}
			} else {
				while (i < len && b[i] != ',' && !at_eol(b, len, i))
					i++;
			}
			if (i < len && b[i] == ',') {
				i++;
				nf++;
				continue;
			}
			break;
		}
		if (i < len) {
			if (b[i] == '\r')
				i++;
			if (i < len && b[i] == '\n')
				i++;
			line++;
		}
		if (ncols < 0) {
			ncols = nf;
			/* Header width is known from here on. */
		} else if (nf != ncols) {
			vr_set(r, false, "Line %ld of the CSV has %ld field%s, the header has %ld: every row needs the same "
				       "number of fields (quote fields that contain commas).", rec_line, nf, nf == 1 ? "" : "s",
			     ncols);
			r->columns = ncols;
			return;
		} else {
			rows++;
		}
	}
	if (ncols < 0) {
		vr_set(r, false, "The CSV has no header line: the file is blank.");
		return;
	}
	r->rows = rows;
	r->columns = ncols;
	if (spec->min_rows > 0 && rows < spec->min_rows) {
		vr_set(r, false, "The CSV has %ld data row%s, fewer than the %ld required (min_rows); write all the rows.",
		     rows, rows == 1 ? "" : "s", spec->min_rows);
		return;
	}
	vr_set(r, true, "CSV with %ld data row%s and %ld column%s.", rows, rows == 1 ? "" : "s", ncols, ncols == 1 ? "" : "s");
	if (ncols == 1) {
		const unsigned char *nl = memchr(b, '\n', len);
		size_t hl = nl ? (size_t)(nl - b) : len;
		if (memchr(b, ';', hl) || memchr(b, '\t', hl))
			vr_append(r, " The header \"%s\" holds ';' or tabs: if that is the separator, write the file with commas.",
				esc_bytes(q, sizeof q, b, hl, 40));
	}
}

/* ---- text ------------------------------------------------------------- */

static long line_of(const unsigned char *b, size_t off)
{
	long ln = 1;
	for (size_t i = 0; i < off; i++)
		if (b[i] == '\n')
			ln++;
	return ln;
}

static void check_text(const unsigned char *b, size_t len, struct vresult *r)
{
	const unsigned char *nul = memchr(b, 0, len);
	size_t bad = utf8_invalid_at(b, len);

	if (nul && (size_t)(nul - b) <= bad) { /* utf8_invalid_at stops at a NUL too */
		vr_set(r, false, "Not text: the file has a NUL byte at offset %zu (line %ld).", (size_t)(nul - b),
		     line_of(b, (size_t)(nul - b)));
		hint_sniff(r, b, len, "text file");
		return;
	}
	if (bad < len) {
		vr_set(r, false, "Not valid UTF-8: byte 0x%02x at offset %zu (line %ld) is not part of a UTF-8 character; "
			       "write the file with encoding='utf-8'.", b[bad], bad, line_of(b, bad));
		return;
	}
	long lines = len ? line_of(b, len) - (b[len - 1] == '\n') : 0;
	vr_set(r, true, "UTF-8 text, %ld line%s, %zu bytes.", lines, lines == 1 ? "" : "s", len);
}

/* ---- entry point ------------------------------------------------------ */

void validate_buffer(const struct vspec *spec, const unsigned char *buf, size_t len, struct vresult *r)
{
	static const unsigned char none[1];
	long min = spec->min_bytes == 0 ? 1 : spec->min_bytes;

	memset(r, 0, sizeof *r);
	if (!buf) {
		buf = none;
		len = 0;
	}
	if (min > 0 && len < (unsigned long)min) {
		if (len == 0)
			vr_set(r, false, "The file is empty (0 bytes); it needs at least %ld byte%s: check that the code "
				       "wrote to it and closed it.", min, min == 1 ? "" : "s");
		else
			vr_set(r, false, "The file has %zu bytes, fewer than min_bytes (%ld): it is incomplete or the "
				       "wrong file.", len, min);
		return;
	}
	switch (spec->kind) {
	case VK_PNG:
		check_png(buf, len, r);
		break;
	case VK_JPEG: {
		unsigned w, h;
		jpeg_walk(buf, len, &w, &h, r);
		break;
	}
	case VK_SVG:
		check_svg(buf, len, r);
		break;
	case VK_CSV:
		check_csv(spec, buf, len, r);
		break;
	case VK_JSON:
		validate_json(spec, buf, len, r);
		break;
	case VK_TEXT:
		check_text(buf, len, r);
		break;
	case VK_ANY:
	default:
		vr_set(r, true, "File of %zu bytes.", len);
		break;
	}
}
