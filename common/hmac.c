#include "hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

struct hmac {
	EVP_MAC_CTX *ctx;
	size_t len;
	bool failed;
};

static struct hmac *mac_new(const char *name, const unsigned char *key, size_t key_len, const OSSL_PARAM *params, size_t len)
{
	struct hmac *h = xcalloc(1, sizeof *h);
	EVP_MAC *mac = EVP_MAC_fetch(NULL, name, NULL);
	if (!h || !mac)
		goto fail;
	h->len = len;
	h->ctx = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac);
	mac = NULL;
	if (!h->ctx || EVP_MAC_init(h->ctx, key, key_len, params) != 1)
		goto fail;
	return h;
fail:
	EVP_MAC_free(mac);
	hmac_free(h);
	return NULL;
}

struct hmac *hmac_new(const unsigned char *key, size_t len)
{
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	return mac_new("HMAC", key, len, params, HMAC_LEN);
}

struct hmac *poly1305_new(const unsigned char key[POLY1305_KEY_LEN])
{
	return mac_new("POLY1305", key, POLY1305_KEY_LEN, NULL, POLY1305_LEN);
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
