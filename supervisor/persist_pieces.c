/* Saved sessions in pieces (persist.h): the table of a save's pieces, its
 * manifest on disk, and the pieces files. */
#include "persist.h"
#include "persist_format.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/smsg.h"

void ptable_free(struct ptable *t)
{
	if (!t)
		return;
	free(t->v);
	free(t->sorted);
	free(t);
}

struct ptable *ptable_dup(const struct ptable *t)
{
	if (!t)
		return NULL;
	struct ptable *d = xcalloc(1, sizeof *d);
	*d = *t;
	d->sorted = NULL;
	d->v = xcalloc(t->n ? t->n : 1, sizeof *d->v);
	memcpy(d->v, t->v, t->n * sizeof *d->v);
	return d;
}

char *ptable_known_hex(const struct ptable *t)
{
	/* Mostly dead bytes: the next save writes a new file, whole. */
	if (!t || t->end - t->live > t->live + (64u << 20))
		return NULL;
	char *hex = xmalloc(t->n * 32 + 1), *p = hex;
	/* At most what the session's decoder takes: past it, pieces are
	 * sent again (a state of over 64 GiB in pieces of 1 MiB). */
	size_t offered = 0;
	for (size_t i = 0; i < t->n && offered < SMSG_KNOWN_LABELS_MAX; i++) {
		if (t->v[i].len < PIECE_KNOWN_MIN)
			continue;
		offered++;
		for (int k = 0; k < 16; k++)
			p += sprintf(p, "%02x", t->v[i].label[k]);
	}
	*p = '\0';
	return hex;
}

static int by_label(const void *a, const void *b)
{
	const struct pentry *x = *(const struct pentry *const *)a, *y = *(const struct pentry *const *)b;
	int c = memcmp(x->label, y->label, 16);
	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

const struct pentry *ptable_find(struct ptable *t, const unsigned char label[16], uint32_t len)
{
	if (!t || !t->n)
		return NULL;
	if (!t->sorted) {
		t->sorted = xcalloc(t->n, sizeof *t->sorted);
		for (size_t i = 0; i < t->n; i++)
			t->sorted[i] = &t->v[i];
		qsort(t->sorted, t->n, sizeof *t->sorted, by_label);
	}
	struct pentry key = { .len = len }, *kp = &key;
	memcpy(key.label, label, 16);
	struct pentry **hit = bsearch(&kp, t->sorted, t->n, sizeof *t->sorted, by_label);
	return hit ? *hit : NULL;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

unsigned char *ptable_encode(const struct ptable *t, size_t *len)
{
	*len = MANIFEST_HEAD + t->n * MANIFEST_ENTRY;
	unsigned char *b = xmalloc(*len), *p = b + MANIFEST_HEAD;
	put64(b, t->body);
	put64(b + 8, t->gen);
	put64(b + 16, t->n);
	for (size_t i = 0; i < t->n; i++, p += MANIFEST_ENTRY) {
		const struct pentry *e = &t->v[i];
		put64(p, e->off);
		put32(p + 8, e->len);
		memcpy(p + 12, e->label, 16);
		memcpy(p + 28, e->nonce, NONCE_LEN);
		memcpy(p + 44, e->tag, POLY1305_LEN);
	}
	return b;
}

struct ptable *ptable_decode(const unsigned char *b, size_t len, uint64_t cap, struct err *e)
{
	if (len < MANIFEST_HEAD) {
		err_set(e, -EBADMSG, "its manifest is cut short");
		return NULL;
	}
	uint64_t body = get64(b), gen = get64(b + 8), n = get64(b + 16);
	if (body > cap || n > pieces_max(body) || n * MANIFEST_ENTRY != len - MANIFEST_HEAD || gen == 0) {
		err_set(e, -EBADMSG, "its manifest does not hold together (%" PRIu64 " pieces for %" PRIu64 " bytes)", n, body);
		return NULL;
	}
	struct ptable *t = xcalloc(1, sizeof *t);
	t->body = body;
	t->gen = gen;
	t->n = (size_t)n;
	t->v = xcalloc(t->n ? t->n : 1, sizeof *t->v);
	uint64_t sum = 0;
	const unsigned char *p = b + MANIFEST_HEAD;
	for (size_t i = 0; i < t->n; i++, p += MANIFEST_ENTRY) {
		struct pentry *x = &t->v[i];
		x->off = get64(p);
		x->len = get32(p + 8);
		memcpy(x->label, p + 12, 16);
		memcpy(x->nonce, p + 28, NONCE_LEN);
		memcpy(x->tag, p + 44, POLY1305_LEN);
		if (x->len == 0 || x->len > PIECE_MAX || x->off > UINT64_MAX - x->len) {
			ptable_free(t);
			err_set(e, -EBADMSG, "its manifest names a piece of %u bytes", x->len);
			return NULL;
		}
		sum += x->len;
		if (x->off + x->len > t->end)
			t->end = x->off + x->len;
	}
	if (sum != body) {
		ptable_free(t);
		err_set(e, -EBADMSG, "its pieces add up to %" PRIu64 " bytes, not %" PRIu64, sum, body);
		return NULL;
	}
	t->live = sum;
	return t;
}

void pieces_name(uint64_t gen, char *buf, size_t n)
{
	snprintf(buf, n, "pieces.%" PRIu64, gen);
}

/* The generation a pieces file's name gives ("pieces.GEN"), or 0 for any
 * other name. */
static uint64_t gen_of(const char *nm)
{
	if (strncmp(nm, "pieces.", 7) != 0 || !nm[7] || strspn(nm + 7, "0123456789") != strlen(nm + 7) || strlen(nm + 7) > 18)
		return 0;
	return strtoull(nm + 7, NULL, 10);
}

/* The pieces files of dir: the highest generation among them; with drop,
 * each but pieces.keep is removed. */
static uint64_t pieces_walk(int dir, uint64_t keep, bool drop)
{
	uint64_t top = 0;
	int d = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dh = d >= 0 ? fdopendir(d) : NULL;
	if (!dh) {
		if (d >= 0)
			close(d);
		return 0;
	}
	struct dirent *de;
	/* The directory holds the server's few files, and whatever a cell
	 * planted: at most this many names looked at. */
	for (int seen = 0; seen < 4096 && (de = readdir(dh)); seen++) {
		uint64_t g = gen_of(de->d_name);
		if (!g)
			continue;
		if (g > top)
			top = g;
		if (drop && g != keep)
			unlinkat(dir, de->d_name, 0);
	}
	closedir(dh);
	return top;
}

void pieces_drop(int dir, uint64_t keep)
{
	pieces_walk(dir, keep, true);
}

uint64_t pieces_next_gen(int dir, uint64_t above)
{
	uint64_t top = pieces_walk(dir, 0, false);
	return (top > above ? top : above) + 1;
}
