/* Shared by the fuzz targets: a check that fails loudly in both builds.
 *
 * Every target is an LLVMFuzzerTestOneInput; under libFuzzer a failed
 * check aborts and the input is kept as a crash, and under the replay
 * driver (test/fuzz/replay.c) it aborts with the file's name printed
 * first.  assert() is not used: NDEBUG must not turn the checks off. */
#ifndef TEST_FUZZ_FUZZ_H
#define TEST_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                      \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                              \
			fputc('\n', stderr);                                       \
			abort();                                                   \
		}                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An exact-size heap copy of the input, so that any read past its end is
 * caught by AddressSanitizer (libFuzzer's own buffer is exact too, but the
 * replay driver's is not necessarily).  Caller frees. */
static inline unsigned char *fuzz_dup(const uint8_t *data, size_t size)
{
	unsigned char *p = calloc(size ? size : 1, 1);
	if (!p)
		abort();
	if (size)
		memcpy(p, data, size);
	return p;
}

#endif
