#include "hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

struct hmac {
	EVP_MAC_CTX *ctx;
	size_t len;
	bool failed;
};

/* The algorithms, fetched once.  A fetch looks the name up in libcrypto's
 * provider store under its locks, and HMAC's init fetches SHA-256 the same
 * way: measured here, about 1 us a context warm, and tens of microseconds
 * on a call after the server slept (caches cold), where every call makes
 * three (its two output streams' digests and the replay log's).  Kept for
 * the life of the process, like libcrypto's own store. */
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;
static EVP_MAC *mac_hmac, *mac_poly1305;

static void fetch_all(void)
{
	mac_hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	mac_poly1305 = EVP_MAC_fetch(NULL, "POLY1305", NULL);
}

static struct hmac *mac_new(EVP_MAC *mac, const unsigned char *key, size_t key_len, const OSSL_PARAM *params, size_t len)
{
	struct hmac *h = xcalloc(1, sizeof *h);
	h->len = len;
	h->ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
	if (!h->ctx || EVP_MAC_init(h->ctx, key, key_len, params) != 1) {
		hmac_free(h);
		return NULL;
	}
	return h;
}

/* HMAC contexts already keyed, by key: the server keys every context with
 * one of a few fixed keys (the output streams', the replay digest's, its
 * snapshots' secret), so a new one is a copy of a keyed one (the key's
 * two padded blocks already hashed) instead of a fetch and an init.  A
 * few entries: a key past them is keyed the long way each time.  Shared
 * by the loop and the save threads, hence the lock. */
#define KEYED_MAX 4
#define KEYED_KEY_MAX 64
static struct keyed {
	size_t len;
	unsigned char key[KEYED_KEY_MAX];
	EVP_MAC_CTX *ctx;
} keyed[KEYED_MAX];
static size_t n_keyed;
static pthread_mutex_t keyed_lock = PTHREAD_MUTEX_INITIALIZER;

/* The kept entry for key, or NULL (keyed_lock held). */
static struct keyed *keyed_find(const unsigned char *key, size_t len)
{
	for (size_t i = 0; i < n_keyed; i++)
		if (keyed[i].len == len && CRYPTO_memcmp(keyed[i].key, key, len) == 0)
			return &keyed[i];
	return NULL;
}

static EVP_MAC_CTX *keyed_copy(const unsigned char *key, size_t len)
{
	pthread_mutex_lock(&keyed_lock);
	struct keyed *k = keyed_find(key, len);
	EVP_MAC_CTX *c = k ? EVP_MAC_CTX_dup(k->ctx) : NULL;
	pthread_mutex_unlock(&keyed_lock);
	return c;
}

static void keyed_keep(const unsigned char *key, size_t len, const EVP_MAC_CTX *ctx)
{
	EVP_MAC_CTX *c = EVP_MAC_CTX_dup(ctx);
	pthread_mutex_lock(&keyed_lock);
	/* Not when another thread kept it meanwhile. */
	if (c && n_keyed < KEYED_MAX && !keyed_find(key, len)) {
		keyed[n_keyed].len = len;
		memcpy(keyed[n_keyed].key, key, len);
		keyed[n_keyed++].ctx = c;
		c = NULL;
	}
	pthread_mutex_unlock(&keyed_lock);
	EVP_MAC_CTX_free(c);
}

struct hmac *hmac_new(const unsigned char *key, size_t len)
{
	/* Keys longer than an entry holds are keyed the long way each time. */
	bool keep = len <= KEYED_KEY_MAX;
	EVP_MAC_CTX *c = keep ? keyed_copy(key, len) : NULL;
	if (c) {
		struct hmac *h = xcalloc(1, sizeof *h);
		h->len = HMAC_LEN;
		h->ctx = c;
		return h;
	}
	pthread_once(&fetch_once, fetch_all);
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	struct hmac *h = mac_new(mac_hmac, key, len, params, HMAC_LEN);
	if (h && keep)
		keyed_keep(key, len, h->ctx);
	return h;
}

struct hmac *poly1305_new(const unsigned char key[POLY1305_KEY_LEN])
{
	/* One key per message (hmac.h): nothing to keep but the fetch. */
	pthread_once(&fetch_once, fetch_all);
	return mac_new(mac_poly1305, key, POLY1305_KEY_LEN, NULL, POLY1305_LEN);
}

void hmac_update(struct hmac *h, const void *data, size_t len)
{
	if (len && EVP_MAC_update(h->ctx, data, len) != 1)
		h->failed = true;
}

int hmac_final(struct hmac *h, unsigned char out[HMAC_LEN])
{
	size_t n = 0;
	if (h->failed || EVP_MAC_final(h->ctx, out, &n, HMAC_LEN) != 1 || n != h->len) {
		memset(out, 0, HMAC_LEN);
		return -EIO;
	}
	return 0;
}

size_t hmac_len(const struct hmac *h)
{
	return h->len;
}

void hmac_free(struct hmac *h)
{
	if (!h)
		return;
	EVP_MAC_CTX_free(h->ctx);
	free(h);
}

bool mac_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}
