/* HMAC-SHA256, streamed: what the server uses to recognise files it wrote
 * itself (saved sessions) among files that sandboxed code could have
 * planted next to them.  OpenSSL's libcrypto does the work: it uses the
 * CPU's SHA instructions, several times faster than a portable SHA-256 on
 * the gigabyte-sized snapshots this is for. */
#ifndef COMMON_HMAC_H
#define COMMON_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HMAC_LEN 32

struct hmac;

/* A new context keyed with key[0..len); NULL when out of memory or when
 * libcrypto refuses (it never does for HMAC-SHA256). */
struct hmac *hmac_new(const unsigned char *key, size_t len);
void hmac_update(struct hmac *h, const void *data, size_t len);
/* Writes the tag; the context cannot be updated afterwards.  0, or -EIO
 * when libcrypto failed at any step (then no tag may be trusted or
 * written). */
int hmac_final(struct hmac *h, unsigned char out[HMAC_LEN]);
void hmac_free(struct hmac *h);

/* Compares two tags in constant time (a timing leak would let an attacker
 * build a valid tag byte by byte). */
bool hmac_equal(const unsigned char a[HMAC_LEN], const unsigned char b[HMAC_LEN]);

#endif
