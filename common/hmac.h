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
#define POLY1305_KEY_LEN 32
#define POLY1305_LEN 16

struct hmac;

/* A new context keyed with key[0..len); NULL when out of memory or when
 * libcrypto refuses (it never does for HMAC-SHA256). */
struct hmac *hmac_new(const unsigned char *key, size_t len);
/* Poly1305, through the same calls: a one-time authenticator, about four
 * times as fast as HMAC-SHA256 on the test machine (libcrypto's vector
 * code), so a gigabyte's tag costs a tenth of a second of CPU, not half a
 * second.  Secure only when each key tags one message: the caller derives
 * the key from a secret and a fresh random nonce (persist.c). */
struct hmac *poly1305_new(const unsigned char key[POLY1305_KEY_LEN]);
void hmac_update(struct hmac *h, const void *data, size_t len);
/* Writes the tag (hmac_len bytes of out); the context cannot be updated
 * afterwards.  0, or -EIO when libcrypto failed at any step (then no tag
 * may be trusted or written). */
int hmac_final(struct hmac *h, unsigned char out[HMAC_LEN]);
size_t hmac_len(const struct hmac *h);
void hmac_free(struct hmac *h);

/* Compares two tags of n bytes in constant time (a timing leak would let
 * an attacker build a valid tag byte by byte). */
bool mac_equal(const unsigned char *a, const unsigned char *b, size_t n);

#endif
