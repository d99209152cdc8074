/* Fuzz target: the JSON and text helpers a JSON-RPC line and its replies go
 * through.  (The dispatcher itself is fuzz_dispatch.c; the whole binary,
 * test/fuzz/rpc_fuzz.py.)  This target covers, in-process and under the
 * sanitizers, what is done with the bytes before dispatching and what the
 * replies are made of:
 *   - rpc_parse_line over a buffer that is NOT NUL-terminated (the
 *     line buffer is exactly len bytes): trim, parse, one complete message;
 *   - the reply envelope: the request's id duplicated and printed must be
 *     one line (no raw newline) that parses again;
 *   - the text helpers that carry sandbox output into replies
 *     (common/text.h): utf8_sanitize, utf8_prefix/suffix (the head and tail
 *     kept of a long output), utf8_chars, base64 encode/decode.
 * Checks are the helpers' documented promises: sanitized text is valid
 * UTF-8 without NULs and leaves valid text unchanged; a prefix or suffix
 * of valid text is valid; base64 round-trips. */
#include <cjson/cJSON.h>
#include <string.h>
#include <netinet/in.h>
#include <resolv.h>

#include "../../mcp/server.h"
#include "../../common/text.h"
#include "fuzz.h"

static void check_line(const unsigned char *line, size_t len)
{
	/* What the server reads a line with (exactly len bytes, trimmed). */
	bool blank;
	cJSON *msg = rpc_parse_line((const char *)line, len, &blank);
	if (!msg)
		return;
	/* The reply envelope of dispatch(): {"jsonrpc":"2.0","id":<id>,...}. */
	const cJSON *id = cJSON_IsObject(msg) ? cJSON_GetObjectItemCaseSensitive(msg, "id") : NULL;
	cJSON *reply = cJSON_CreateObject();
	cJSON_AddStringToObject(reply, "jsonrpc", "2.0");
	cJSON_AddItemToObject(reply, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
	const cJSON *method = cJSON_IsObject(msg) ? cJSON_GetObjectItemCaseSensitive(msg, "method") : NULL;
	if (cJSON_IsString(method)) {
		char m2[300];
		snprintf(m2, sizeof m2, "method not found: %.200s", method->valuestring);
		cJSON *e = cJSON_AddObjectToObject(reply, "error");
		cJSON_AddNumberToObject(e, "code", -32601);
		cJSON_AddStringToObject(e, "message", m2);
	}
	char *out = cJSON_PrintUnformatted(reply);
	FUZZ_CHECK(out != NULL, "cannot print a reply");
	FUZZ_CHECK(strchr(out, '\n') == NULL, "a reply with a raw newline: %s", out);
	cJSON *again = cJSON_Parse(out);
	FUZZ_CHECK(again != NULL, "a reply that does not parse: %s", out);
	cJSON_Delete(again);
	free(out);
	cJSON_Delete(reply);

	/* The whole message printed and parsed again must be stable. */
	char *p1 = cJSON_PrintUnformatted(msg);
	FUZZ_CHECK(p1 != NULL, "cannot print the message");
	cJSON *m2 = cJSON_Parse(p1);
	FUZZ_CHECK(m2 != NULL, "printed message does not parse: %s", p1);
	char *p2 = cJSON_PrintUnformatted(m2);
	FUZZ_CHECK(p2 && strcmp(p1, p2) == 0, "print/parse not stable:\n%s\n%s", p1, p2 ? p2 : "(null)");
	free(p1);
	free(p2);
	cJSON_Delete(m2);
	cJSON_Delete(msg);
}

static void check_text(const unsigned char *b, size_t len)
{
	size_t olen = 0;
	char *s = utf8_sanitize(b, len, &olen);
	FUZZ_CHECK(s != NULL, "utf8_sanitize");
	FUZZ_CHECK(strlen(s) == olen, "NUL inside sanitized text");
	FUZZ_CHECK(utf8_valid((const unsigned char *)s, olen), "sanitized text is not valid UTF-8");
	if (utf8_valid(b, len) && memchr(b, 0, len) == NULL)
		FUZZ_CHECK(olen == len && memcmp(s, b, len) == 0, "valid text changed");

	size_t chars = utf8_chars(s, olen);
	FUZZ_CHECK(utf8_prefix(s, olen, chars) == olen, "prefix of all chars is not the whole");
	FUZZ_CHECK(utf8_suffix(s, olen, chars) == 0 || chars == 0, "suffix of all chars is not the whole");
	size_t n = len ? b[0] : 0;
	size_t pre = utf8_prefix(s, olen, n), suf = utf8_suffix(s, olen, n);
	FUZZ_CHECK(pre <= olen && suf <= olen, "prefix %zu / suffix %zu over %zu", pre, suf, olen);
	FUZZ_CHECK(utf8_valid((const unsigned char *)s, pre), "the head cut a character");
	FUZZ_CHECK(utf8_valid((const unsigned char *)s + suf, olen - suf), "the tail cut a character");
	if (n <= chars) {
		FUZZ_CHECK(utf8_chars(s, pre) == n, "head of %zu chars has %zu", n, utf8_chars(s, pre));
		FUZZ_CHECK(utf8_chars(s + suf, olen - suf) == n, "tail of %zu chars has %zu", n,
			   utf8_chars(s + suf, olen - suf));
	}
	/* The raw bytes too: prefix and suffix must stay inside them. */
	FUZZ_CHECK(utf8_prefix((const char *)b, len, n) <= len, "raw prefix");
	FUZZ_CHECK(utf8_suffix((const char *)b, len, n) <= len, "raw suffix");
	free(s);

	/* The encoder against glibc's decoder: the round trip gives the bytes
	 * back. */
	char *enc = base64_encode(b, len);
	FUZZ_CHECK(enc && strlen(enc) == (len + 2) / 3 * 4, "base64 length");
	unsigned char *dec = malloc(len + 1);
	int dl = dec ? b64_pton(enc, dec, len + 1) : -1;
	FUZZ_CHECK(dl == (int)len && (len == 0 || memcmp(dec, b, len) == 0), "base64 round trip");
	free(dec);
	free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *line = fuzz_dup(data, size);
	check_line(line, size);
	check_text(line, size);
	free(line);
	return 0;
}
