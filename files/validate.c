/* Checks of verify_outputs (see validate.h).
 *
 * Everything here reads bytes written by untrusted code: every read is
 * bounded by len before it happens (lengths are compared as "need > len -
 * pos", never "pos + need > len", so nothing can wrap), nothing recurses
 * on input (JSON nesting is a stack of JSON_MAX_DEPTH bytes), and every detail quotes input
 * only through esc_bytes(). */
#include "validate.h"

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

/* ---- small helpers ---------------------------------------------------- */

static void setd(struct vresult *r, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setd(struct vresult *r, bool ok, const char *fmt, ...)
{
	va_list ap;

	r->ok = ok;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
}

/* Appends to r->detail, silently stopping at its end. */
static void appendd(struct vresult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendd(struct vresult *r, const char *fmt, ...)
{
	size_t n = strlen(r->detail);
	va_list ap;

	if (n + 1 >= sizeof r->detail)
		return;
	va_start(ap, fmt);
	vsnprintf(r->detail + n, sizeof r->detail - n, fmt, ap);
	va_end(ap);
}


static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static bool starts(const unsigned char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && memcmp(p, lit, n) == 0;
}

static bool starts_ci(const unsigned char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && strncasecmp((const char *)p, lit, n) == 0;
}

static bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* What the bytes look like, for hints when they are not what was asked. */
static const char *sniff(const unsigned char *b, size_t len)
{
	if (starts(b, len, "\x89PNG\r\n\x1a\n"))
		return "a PNG image";
	if (len >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return "a JPEG image";
	if (starts(b, len, "GIF87a") || starts(b, len, "GIF89a"))
		return "a GIF image";
	if (len >= 12 && starts(b, len, "RIFF") && memcmp(b + 8, "WEBP", 4) == 0)
		return "a WebP image";
	if (starts(b, len, "%PDF-"))
		return "a PDF document";
	if (starts(b, len, "PK\x03\x04"))
		return "a ZIP archive (or .xlsx/.docx)";
	if (starts(b, len, "\x93NUMPY"))
		return "a NumPy .npy array";
	if (starts(b, len, "PAR1"))
		return "a Parquet file";
	size_t i = starts(b, len, "\xef\xbb\xbf") ? 3 : 0;
	while (i < len && is_ws(b[i]))
		i++;
	if (starts_ci(b + i, len - i, "<!doctype html") || starts_ci(b + i, len - i, "<html"))
		return "an HTML page";
	if (starts(b + i, len - i, "<svg") || starts(b + i, len - i, "<?xml"))
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
		appendd(r, " It looks like %s: write a real %s or verify it with the matching kind.", s, what);
	else if (len)
		appendd(r, " It starts with \"%s\".", esc_bytes(q, sizeof q, b, len, 16));
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
		setd(r, false, "Not a PNG: the file does not start with the 8-byte PNG signature.");
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
			setd(r, false, "The PNG is truncated: it ends %zu bytes into a chunk header at offset %zu; "
				       "make sure the file is completely written and closed.", len - pos, pos);
			return;
		}
		uint32_t clen = be32(b + pos);
		const unsigned char *type = b + pos + 4;
		for (int k = 0; k < 4; k++)
			if (!((type[k] >= 'A' && type[k] <= 'Z') || (type[k] >= 'a' && type[k] <= 'z'))) {
				char q[4 * 4 + 8]; /* four \xNN, "..." and the NUL */
				setd(r, false, "The PNG is corrupt: the chunk at offset %zu has an invalid type \"%s\".", pos,
				     esc_bytes(q, sizeof q, type, 4, 4));
				return;
			}
		memcpy(t, type, 4);
		t[4] = '\0';
		if (clen > 0x7fffffffu || clen > len - pos - 12) {
			setd(r, false, "The PNG is truncated: the %s chunk at offset %zu needs %u bytes of data but only %zu "
				       "remain; make sure the file is completely written and closed.", t, pos, clen,
			     len - pos - 12);
			return;
		}
		uint32_t crc = 0xffffffffu;
		for (size_t k = 0; k < 4 + (size_t)clen; k++)
			crc = crctab[(crc ^ b[pos + 4 + k]) & 0xff] ^ (crc >> 8);
		crc ^= 0xffffffffu;
		if (crc != be32(b + pos + 8 + clen)) {
			setd(r, false, "The PNG is corrupt: the %s chunk at offset %zu fails its CRC check.", t, pos);
			return;
		}
		if (nchunks == 0) {
			if (strcmp(t, "IHDR") != 0) {
				setd(r, false, "The PNG is corrupt: its first chunk is %s, where IHDR (the image header) must come first.", t);
				return;
			}
			if (clen != 13) {
				setd(r, false, "The PNG is corrupt: its IHDR chunk has %u bytes instead of 13.", clen);
				return;
			}
			const unsigned char *d = b + pos + 8;
			uint32_t w = be32(d), h = be32(d + 4);
			if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu) {
				setd(r, false, "The PNG header gives an invalid size of %ux%u pixels; width and height must be at least 1.",
				     w, h);
				return;
			}
			if (!png_depth_ok(d[9], d[8]) || d[10] != 0 || d[11] != 0 || d[12] > 1) {
				setd(r, false, "The PNG header is invalid (colour type %u, bit depth %u, compression %u, filter %u, "
					       "interlace %u).", d[9], d[8], d[10], d[11], d[12]);
				return;
			}
			r->width = w;
			r->height = h;
		} else if (strcmp(t, "IHDR") == 0) {
			setd(r, false, "The PNG is corrupt: it has a second IHDR chunk at offset %zu.", pos);
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
		setd(r, false, "The PNG has a signature and nothing else: the file is truncated.");
		return;
	}
	if (!iend) {
		setd(r, false, "The PNG has no IEND chunk (%zu chunks, %zu bytes): it is truncated or was not closed; "
			       "write it completely (plt.savefig, then close the figure) and verify again.", nchunks, len);
		return;
	}
	if (idat == 0) {
		setd(r, false, "The PNG has no IDAT chunk: it holds no pixel data.");
		return;
	}
	if (pos != len) {
		setd(r, false, "The PNG has %zu bytes of data after its IEND chunk: two writes into one file? "
			       "Write the image once to a fresh file.", len - pos);
		return;
	}
	setd(r, true, "PNG image, %ux%u pixels, %zu bytes.", r->width, r->height, len);
}

/* ---- JPEG ------------------------------------------------------------- */

static bool is_sof(unsigned m)
{
	return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
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
			setd(r, false, "Not a JPEG: the file does not start with the SOI marker (FF D8).");
			hint_sniff(r, b, len, "JPEG (e.g. plt.savefig('x.jpg'))");
		}
		return false;
	}
	for (;;) {
		if (in_scan) {
			/* Entropy-coded data: FF 00 is a stuffed byte, FF D0..D7
			 * a restart marker, FF FF fill; anything else after FF
			 * is the next marker. */
			while (pos < len) {
				if (b[pos] != 0xff) {
					pos++;
					continue;
				}
				if (len - pos < 2) {
					pos = len;
					break;
				}
				unsigned n = b[pos + 1];
				if (n == 0x00 || (n >= 0xd0 && n <= 0xd7))
					pos += 2;
				else if (n == 0xff)
					pos++;
				else
					break;
			}
			in_scan = false;
		}
		if (pos >= len) {
			if (r)
				setd(r, false, "The JPEG is truncated: it ends without the EOI marker (FF D9) after %zu bytes; "
					       "make sure the file is completely written and closed.", len);
			return false;
		}
		if (b[pos] != 0xff) {
			if (r)
				setd(r, false, "The JPEG is corrupt: a marker was expected at offset %zu, found byte 0x%02x.", pos, b[pos]);
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
					setd(r, false, "The JPEG has no frame header (SOF marker): it gives no image size.");
				return false;
			}
			break;
		}
		if (m == 0xd8 || m == 0x00) {
			if (r)
				setd(r, false, "The JPEG is corrupt: unexpected marker FF %02X at offset %zu.", m, mpos);
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
					setd(r, false, "The JPEG is corrupt: the segment FF %02X at offset %zu has length %u.", m, mpos, seg);
				else
					setd(r, false, "The JPEG is truncated: the segment FF %02X at offset %zu needs %u bytes but only "
						       "%zu remain; make sure the file is completely written and closed.",
					     m, mpos, seg, len - pos);
			}
			return false;
		}
		if (is_sof(m)) {
			if (have_sof) {
				/* Two frame headers: viewers disagree on the size. */
				if (r)
					setd(r, false, "The JPEG has two frame headers (SOF markers): it is not one well-formed image; write it again.");
				return false;
			}
			if (seg < 8) {
				if (r)
					setd(r, false, "The JPEG is corrupt: its frame header (FF %02X) is only %u bytes long.", m, seg);
				return false;
			}
			h = be16(b + pos + 3);
			w = be16(b + pos + 5);
			if (w == 0 || h == 0) {
				if (r)
					setd(r, false, "The JPEG frame header gives an invalid size of %ux%u pixels.", w, h);
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
					setd(r, false, "The JPEG is corrupt: image data (SOS) comes before the frame header (SOF).");
				return false;
			}
			in_scan = true;
		}
		pos += seg;
	}
	/* Zero bytes after EOI are padding that some writers add to round a
	 * file up to a block; accepted.  Anything else means two writes into
	 * one file or a truncated rewrite, and is refused. */
	size_t tail = 0;
	for (size_t k = pos; k < len; k++)
		if (b[k] != 0)
			tail++;
	if (tail) {
		setd(r, false, "The JPEG has %zu bytes of data after its EOI marker: two writes into one file? "
			       "Write the image once to a fresh file.", len - pos);
		return false;
	}
	r->width = w;
	r->height = h;
	*pw = w;
	*ph = h;
	setd(r, true, "JPEG image, %ux%u pixels (%s), %zu bytes.", w, h, progressive ? "progressive" : "baseline", len);
	return true;
}

bool jpeg_size(const unsigned char *buf, size_t len, unsigned *w, unsigned *h)
{
	return jpeg_walk(buf, len, w, h, NULL);
}

/* ---- SVG -------------------------------------------------------------- */

static const unsigned char *find(const unsigned char *p, const unsigned char *end, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(end - p) < n)
		return NULL;
	return memmem(p, (size_t)(end - p), lit, n);
}

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

	if (starts(p, len, "\xfe\xff") || starts(p, len, "\xff\xfe")) {
		setd(r, false, "The SVG is encoded in UTF-16: write it as UTF-8.");
		return;
	}
	if (starts(p, len, "\xef\xbb\xbf"))
		p += 3;
	while (p < end && is_ws(*p))
		p++;
	if (p >= end) {
		setd(r, false, "Not an SVG: the file has no root element (it holds only white space).");
		return;
	}
	if (*p != '<') {
		setd(r, false, "Not an SVG: text comes before the root element at offset %zu; an SVG file starts "
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
		setd(r, false, "The SVG was not checked: the server could not set up its parser within its memory for "
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
	unsigned long line = XML_GetCurrentLineNumber(x.p), col = XML_GetCurrentColumnNumber(x.p) + 1;
	/* These errors mean the input ended too soon: the file is cut short. */
	bool at_end = code == XML_ERROR_UNCLOSED_TOKEN || code == XML_ERROR_PARTIAL_CHAR ||
		      code == XML_ERROR_NO_ELEMENTS || XML_GetCurrentByteIndex(x.p) >= (XML_Index)len;
	const char *what = XML_ErrorString(code);
	XML_ParserFree(x.p);
	vmem_cur = NULL;
	/* What the parser freed stays with this thread's malloc arena
	 * otherwise: given back, so the server's footprint drops again. */
	if (mem.peak > (8u << 20))
		malloc_trim(0);

	if (x.too_deep) {
		setd(r, false, "The SVG nests deeper than %d elements (at line %lu), more than the server checks; an image "
			       "written by plt.savefig nests a few levels: write it again, or verify it with kind \"any\".",
		     SVG_MAX_DEPTH, line);
		return;
	}
	if (mem.refused || code == XML_ERROR_NO_MEMORY) {
		if (mem.server_refused)
			setd(r, false, "The SVG is too large to check in memory now: the checks running at once may hold %s "
				       "in all and others hold most of it; verify it again.", bound_text(vmem_cap_server, bt, sizeof bt));
		else
			setd(r, false, "The SVG is too large to check in memory: parsing it needs more than the %s one "
				       "check may use (at line %lu); write a smaller image (fewer elements, shorter attributes) or "
				       "verify it with kind \"any\".", bound_text(vmem_cap_check, bt, sizeof bt), line);
		return;
	}
	if (x.bad_root) {
		setd(r, false, "Not an SVG: the root element is <%s>, not <svg>.", x.root);
		if (x.html)
			appendd(r, " This is an HTML page; write the SVG image itself, e.g. plt.savefig('x.svg').");
	} else if (x.html) {
		setd(r, false, "Not an SVG: this is an HTML page; write the SVG image itself, e.g. plt.savefig('x.svg').");
	} else if (ok) {
		setd(r, true, "SVG document (root <%s>), %zu bytes.", x.root, len);
	} else if (code == XML_ERROR_JUNK_AFTER_DOC_ELEMENT) {
		setd(r, false, "The SVG does not end with its root element: something follows </%s> at line %lu, column %lu; "
			       "write the file again (plt.savefig) rather than appending to it.", x.root, line, col);
	} else if (at_end && x.root_seen && !x.root_closed) {
		setd(r, false, "The SVG does not end with </%s>: it is truncated or was not closed; write it completely "
			       "(plt.savefig, then close the figure) and verify again.", x.root);
	} else if (at_end && !x.root_seen && code == XML_ERROR_NO_ELEMENTS) {
		setd(r, false, "Not an SVG: the file has no root element (it holds only a prolog).");
	} else if (at_end) {
		setd(r, false, "The SVG is truncated: it ends inside a tag, comment or declaration (%s at line %lu); make "
			       "sure the file is completely written and closed.", what, line);
	} else {
		setd(r, false, "The SVG is not well-formed XML: %s at line %lu, column %lu; write it again with plt.savefig.",
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
		setd(r, false, "Not a CSV: the file contains NUL bytes, so it is binary, not text.");
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
				setd(r, false, "Line 1 of the CSV is blank: the header line must come first.");
				return;
			}
			if (ncols != 1) {
				setd(r, false, "Line %ld of the CSV is blank, the header has %ld fields: remove blank lines.", rec_line, ncols);
				return;
			}
		}
		for (;;) {
			if (i < len && b[i] == '"') {
				long qline = line;
				i++;
				for (;;) {
					if (i >= len) {
						setd(r, false, "The CSV's quoted field that starts on line %ld is never closed: "
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
					setd(r, false, "Line %ld of the CSV has text after the closing quote of a field: inside a "
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
			setd(r, false, "Line %ld of the CSV has %ld field%s, the header has %ld: every row needs the same "
				       "number of fields (quote fields that contain commas).", rec_line, nf, nf == 1 ? "" : "s",
			     ncols);
			r->columns = ncols;
			return;
		} else {
			rows++;
		}
	}
	if (ncols < 0) {
		setd(r, false, "The CSV has no header line: the file is blank.");
		return;
	}
	r->rows = rows;
	r->columns = ncols;
	if (spec->min_rows > 0 && rows < spec->min_rows) {
		setd(r, false, "The CSV has %ld data row%s, fewer than the %ld required (min_rows); write all the rows.",
		     rows, rows == 1 ? "" : "s", spec->min_rows);
		return;
	}
	setd(r, true, "CSV with %ld data row%s and %ld column%s.", rows, rows == 1 ? "" : "s", ncols, ncols == 1 ? "" : "s");
	if (ncols == 1) {
		const unsigned char *nl = memchr(b, '\n', len);
		size_t hl = nl ? (size_t)(nl - b) : len;
		if (memchr(b, ';', hl) || memchr(b, '\t', hl))
			appendd(r, " The header \"%s\" holds ';' or tabs: if that is the separator, write the file with commas.",
				esc_bytes(q, sizeof q, b, hl, 40));
	}
}

/* ---- JSON ------------------------------------------------------------- */

/* The JSON is checked by a scanner (RFC 8259, strict) that builds no tree:
 * it keeps one byte per open array or object (at most JSON_MAX_DEPTH),
 * the top level's type and item count, and which required keys it met.
 * Attack: a 32 MiB [0,0,0,...] written by a cell was parsed into a whole
 * cJSON tree (about 64 bytes a node) and took the server from 10 MB to
 * 1.35 GB; a file of up to 256 MiB went further. */
struct jscan {
	const unsigned char *b;
	size_t len, pos;
	const char *why;            /* what was expected, on an error */
	int depth;
	unsigned char open[JSON_MAX_DEPTH]; /* '[' or '{' per level */
	bool too_deep;
	char top;                   /* the top level: o a s n b z */
	long items;                 /* of the top-level array or object */
	/* Required keys (top level only) and the first keys, for the detail. */
	const struct vspec *spec;
	bool *found;
	char *key;                  /* the key being decoded */
	size_t key_cap, key_len;
	bool key_long;
	char shown[12][96];
	int n_shown;
};

static void jkey_put(struct jscan *j, const char *u, size_t n)
{
	if (!j->key)
		return;
	for (size_t i = 0; i < n; i++) {
		if (j->key_len + 1 >= j->key_cap)
			j->key_long = true;
		else
			j->key[j->key_len++] = u[i];
	}
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* The code point of \uXXXX at p (the 4 hex digits), or -1. */
static long hex4(const unsigned char *p, size_t avail)
{
	if (avail < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

static size_t utf8_put(char *o, long cp)
{
	if (cp < 0x80) { o[0] = (char)cp; return 1; }
	if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
	o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
	return 4;
}

/* A string at j->pos (its opening quote); decoded into j->key when
 * as_key.  False with j->why and j->pos at the fault. */
static bool jstring(struct jscan *j, bool as_key)
{
	const unsigned char *b = j->b;
	size_t len = j->len, i = j->pos + 1;
	if (as_key)
		j->key_len = 0, j->key_long = false;
	for (;;) {
		if (i >= len) {
			j->pos = len;
			j->why = "a string is never closed";
			return false;
		}
		unsigned char c = b[i];
		if (c == '"') {
			j->pos = i + 1;
			return true;
		}
		if (c < 0x20) {
			j->pos = i;
			j->why = "a control character inside a string must be escaped (\\n, \\t, \\u0000)";
			return false;
		}
		if (c == '\\') {
			if (len - i < 2) {
				j->pos = len;
				j->why = "a string is never closed";
				return false;
			}
			unsigned char e = b[i + 1];
			const char *simple = strchr("\"\\/bfnrt", e);
			if (e && simple) {
				static const char dec[] = "\"\\/\b\f\n\r\t";
				if (as_key)
					jkey_put(j, &dec[simple - "\"\\/bfnrt"], 1);
				i += 2;
				continue;
			}
			if (e != 'u') {
				j->pos = i;
				j->why = "an invalid escape in a string (a backslash goes before \" \\ / b f n r t or u)";
				return false;
			}
			long cp = hex4(b + i + 2, len - i - 2);
			if (cp < 0) {
				j->pos = i;
				j->why = "\\u must be followed by 4 hex digits";
				return false;
			}
			i += 6;
			/* A pair of surrogates is one character; a lone one is
			 * valid JSON (Python writes it), kept as U+FFFD. */
			if (cp >= 0xd800 && cp < 0xdc00 && len - i >= 6 && b[i] == '\\' && b[i + 1] == 'u') {
				long lo = hex4(b + i + 2, len - i - 2);
				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd;
			if (as_key) {
				char u[4];
				jkey_put(j, u, utf8_put(u, cp));
			}
			continue;
		}
		size_t n = 1;
		if (c >= 0x80) {
			size_t rest = len - i > 4 ? 4 : len - i;
			n = utf8_invalid_at(b + i, rest);
			/* utf8_invalid_at gives how many bytes are valid: at
			 * least one whole character is. */
			if (n == 0 || (b[i] >= 0xc0 && n < (size_t)(b[i] >= 0xf0 ? 4 : b[i] >= 0xe0 ? 3 : 2))) {
				j->pos = i;
				j->why = "a string holds bytes that are not UTF-8: write the file with encoding='utf-8'";
				return false;
			}
			n = b[i] >= 0xf0 ? 4 : b[i] >= 0xe0 ? 3 : 2;
		}
		if (as_key)
			jkey_put(j, (const char *)b + i, n);
		i += n;
	}
}

static bool jdigits(const unsigned char *b, size_t len, size_t *i)
{
	size_t s = *i;
	while (*i < len && b[*i] >= '0' && b[*i] <= '9')
		(*i)++;
	return *i > s;
}

static bool jnumber(struct jscan *j)
{
	const unsigned char *b = j->b;
	size_t len = j->len, i = j->pos;
	if (b[i] == '-')
		i++;
	if (i < len && b[i] == '0') {
		i++;
	} else if (!jdigits(b, len, &i)) {
		j->pos = i;
		j->why = "a digit was expected";
		return false;
	}
	if (i < len && b[i] == '.') {
		i++;
		if (!jdigits(b, len, &i)) {
			j->pos = i;
			j->why = "a digit must follow the decimal point";
			return false;
		}
	}
	if (i < len && (b[i] == 'e' || b[i] == 'E')) {
		i++;
		if (i < len && (b[i] == '+' || b[i] == '-'))
			i++;
		if (!jdigits(b, len, &i)) {
			j->pos = i;
			j->why = "a digit must follow the exponent's e";
			return false;
		}
	}
	j->pos = i;
	return true;
}

static void jws(struct jscan *j)
{
	while (j->pos < j->len && is_ws(j->b[j->pos]))
		j->pos++;
}

/* A key at the top level: met a required one?  Shown in the detail? */
static void jtop_key(struct jscan *j)
{
	const struct vspec *sp = j->spec;
	for (size_t k = 0; j->found && k < sp->n_required_keys; k++) {
		const char *want = sp->required_keys[k];
		if (want && !j->key_long && strlen(want) == j->key_len && memcmp(want, j->key, j->key_len) == 0)
			j->found[k] = true;
	}
	if (j->key && j->n_shown < 12)
		esc_bytes(j->shown[j->n_shown++], sizeof j->shown[0], j->key, j->key_len, 40);
}

/* One value at j->pos, with everything nested in it, without recursion. */
static bool jvalue(struct jscan *j)
{
	const unsigned char *b = j->b;
	for (;;) {
		/* A value. */
		jws(j);
		if (j->pos >= j->len) {
			j->why = "a value was expected";
			return false;
		}
		unsigned char c = b[j->pos];
		if (j->depth == 1)
			j->items += j->open[0] == '[';
		if (c == '{' || c == '[') {
			if (j->depth == 0)
				j->top = c == '{' ? 'o' : 'a';
			if (j->depth == JSON_MAX_DEPTH) {
				j->too_deep = true;
				return false;
			}
			j->open[j->depth++] = c;
			j->pos++;
			jws(j);
			if (j->pos < j->len && b[j->pos] == (c == '{' ? '}' : ']')) {
				j->pos++;
				j->depth--;
			} else if (c == '[') {
				continue;
			} else {
				goto key;
			}
		} else if (c == '"') {
			if (j->depth == 0)
				j->top = 's';
			if (!jstring(j, false))
				return false;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			if (j->depth == 0)
				j->top = 'n';
			if (!jnumber(j))
				return false;
		} else {
			static const char *const lit[] = { "true", "false", "null" };
			size_t k = 0;
			while (k < 3 && !starts(b + j->pos, j->len - j->pos, lit[k]))
				k++;
			if (k == 3) {
				j->why = "a value was expected (an object, array, string, number, true, false or null)";
				return false;
			}
			if (j->depth == 0)
				j->top = k == 2 ? 'z' : 'b';
			j->pos += strlen(lit[k]);
		}
		/* After a value: a comma, or the end of what holds it. */
		for (;;) {
			if (j->depth == 0)
				return true;
			jws(j);
			char close = j->open[j->depth - 1] == '{' ? '}' : ']';
			if (j->pos < j->len && b[j->pos] == close) {
				j->pos++;
				j->depth--;
				continue;
			}
			if (j->pos >= j->len || b[j->pos] != ',') {
				j->why = close == '}' ? "',' or '}' was expected" : "',' or ']' was expected";
				return false;
			}
			j->pos++;
			if (close == ']')
				break;
			jws(j);
			goto key;
		}
		continue;
key:
		/* A key, then a colon: the value follows. */
		if (j->pos >= j->len || b[j->pos] != '"') {
			j->why = "a key (a string in double quotes) was expected";
			return false;
		}
		if (!jstring(j, j->depth == 1))
			return false;
		if (j->depth == 1) {
			j->items++;
			jtop_key(j);
		}
		jws(j);
		if (j->pos >= j->len || b[j->pos] != ':') {
			j->why = "':' was expected after the key";
			return false;
		}
		j->pos++;
	}
}

static const char *json_type(char t)
{
	switch (t) {
	case 'o': return "an object";
	case 'a': return "an array";
	case 's': return "a string";
	case 'n': return "a number";
	case 'b': return "a boolean";
	default: return "null";
	}
}

static void json_where(const unsigned char *b, size_t at, long *ln, long *col)
{
	*ln = 1;
	*col = 1;
	for (size_t i = 0; i < at; i++) {
		if (b[i] == '\n') {
			++*ln;
			*col = 1;
		} else {
			++*col;
		}
	}
}

/* The detail of a file the scanner stopped in. */
static void json_fault(const struct jscan *j, struct vresult *r)
{
	const unsigned char *b = j->b;
	size_t len = j->len, at = j->pos > len ? len : j->pos;
	long ln, col;
	char q[96];
	json_where(b, at, &ln, &col);
	if (j->too_deep) {
		setd(r, false, "The JSON nests arrays and objects deeper than %d levels (at line %ld, column %ld), more than "
			       "the server checks: write a flatter structure, or verify it with kind \"any\".",
		     JSON_MAX_DEPTH, ln, col);
		return;
	}
	setd(r, false, "Invalid JSON at line %ld, column %ld (near \"%s\"): %s.", ln, col,
	     esc_bytes(q, sizeof q, b + at, len - at, 24), j->why ? j->why : "unexpected data");
	size_t from = at > 16 ? at - 16 : 0;
	if (find(b + from, b + (len - at > 16 ? at + 16 : len), "NaN") ||
	    find(b + from, b + (len - at > 16 ? at + 16 : len), "Infinity"))
		appendd(r, " NaN and Infinity are not JSON: write null instead (json.dump(..., allow_nan=False) finds them).");
	else if (starts(b, len, "\xef\xbb\xbf"))
		appendd(r, " The file starts with a byte order mark: write it with encoding='utf-8', not 'utf-8-sig'.");
	else
		appendd(r, " Write it with json.dump and make sure the file is completely written and closed.");
}

static void check_json(const struct vspec *spec, const unsigned char *b, size_t len, struct vresult *r)
{
	char q[96];
	size_t k = 0;

	while (k < len && is_ws(b[k]))
		k++;
	if (k == len) {
		setd(r, false, "The JSON file holds only white space: it has no value.");
		return;
	}
	/* On the heap: the scanner's stack and shown keys are 2 KiB. */
	struct jscan *j = xcalloc(1, sizeof *j);
	j->b = b;
	j->len = len;
	j->spec = spec;
	bool want_keys = spec->n_required_keys && spec->required_keys;
	size_t longest = 0;
	for (size_t i = 0; want_keys && i < spec->n_required_keys; i++)
		if (spec->required_keys[i] && strlen(spec->required_keys[i]) > longest)
			longest = strlen(spec->required_keys[i]);
	if (want_keys) {
		j->found = xcalloc(spec->n_required_keys, sizeof *j->found);
		j->key_cap = (longest > 64 ? longest : 64) + 2;
		j->key = xmalloc(j->key_cap);
	}
	bool ok = jvalue(j);
	if (ok) {
		/* One value; the rest must be white space. */
		jws(j);
		if (j->pos < len) {
			long ln, col;
			json_where(b, j->pos, &ln, &col);
			setd(r, false, "The JSON file holds more than one value: after the first, data continues at line %ld, "
				       "column %ld (near \"%s\"); write a single value (put several in a list).", ln, col,
			     esc_bytes(q, sizeof q, b + j->pos, len - j->pos, 24));
			goto out;
		}
	} else {
		json_fault(j, r);
		goto out;
	}
	if (want_keys) {
		if (j->top != 'o') {
			setd(r, false, "The JSON's top level is %s, but required_keys need an object.", json_type(j->top));
			goto out;
		}
		size_t missing = 0;
		for (size_t i = 0; i < spec->n_required_keys; i++) {
			const char *key = spec->required_keys[i];
			if (!key || j->found[i])
				continue;
			if (missing++ == 0)
				setd(r, false, "The JSON object lacks required key%s: ", spec->n_required_keys > 1 ? "s" : "");
			appendd(r, "%s\"%s\"", missing > 1 ? ", " : "",
				esc_bytes(q, sizeof q, (const unsigned char *)key, strlen(key), 40));
		}
		if (missing) {
			appendd(r, ". Its top-level keys are: ");
			for (int i = 0; i < j->n_shown; i++)
				appendd(r, "%s\"%s\"", i ? ", " : "", j->shown[i]);
			if (j->items > j->n_shown)
				appendd(r, ", ...");
			if (j->items == 0)
				appendd(r, "none (the object is empty)");
			appendd(r, ".");
			goto out;
		}
	}
	if (j->top == 'o')
		setd(r, true, "JSON object with %ld key%s, %zu bytes.", j->items, j->items == 1 ? "" : "s", len);
	else if (j->top == 'a')
		setd(r, true, "JSON array with %ld item%s, %zu bytes.", j->items, j->items == 1 ? "" : "s", len);
	else
		setd(r, true, "JSON value (%s), %zu bytes.", json_type(j->top), len);
out:
	free(j->found);
	free(j->key);
	free(j);
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
		setd(r, false, "Not text: the file has a NUL byte at offset %zu (line %ld).", (size_t)(nul - b),
		     line_of(b, (size_t)(nul - b)));
		hint_sniff(r, b, len, "text file");
		return;
	}
	if (bad < len) {
		setd(r, false, "Not valid UTF-8: byte 0x%02x at offset %zu (line %ld) is not part of a UTF-8 character; "
			       "write the file with encoding='utf-8'.", b[bad], bad, line_of(b, bad));
		return;
	}
	long lines = len ? line_of(b, len) - (b[len - 1] == '\n') : 0;
	setd(r, true, "UTF-8 text, %ld line%s, %zu bytes.", lines, lines == 1 ? "" : "s", len);
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
			setd(r, false, "The file is empty (0 bytes); it needs at least %ld byte%s: check that the code "
				       "wrote to it and closed it.", min, min == 1 ? "" : "s");
		else
			setd(r, false, "The file has %zu bytes, fewer than min_bytes (%ld): it is incomplete or the "
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
		check_json(spec, buf, len, r);
		break;
	case VK_TEXT:
		check_text(buf, len, r);
		break;
	case VK_ANY:
	default:
		setd(r, true, "File of %zu bytes.", len);
		break;
	}
}
