#include "escape.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *esc_bytes(char *out, size_t outsz, const void *p, size_t n, size_t max)
{
	const unsigned char *b = p;
	size_t o = 0;
	bool cut = n > max;

	if (outsz == 0)
		return out;
	if (cut)
		n = max;
	for (size_t i = 0; i < n; i++) {
		bool plain = b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\';
		/* Room for this byte, then for "..." and the NUL. */
		if (o + (plain ? 1 : 4) + 4 > outsz) {
			cut = true;
			break;
		}
		if (plain)
			out[o++] = (char)b[i];
		else
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", b[i]);
	}
	if (cut && o + 4 <= outsz) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}
