/* The MCP protocol versions (protocol.h). */
#include "protocol.h"

#include <stdio.h>
#include <string.h>

static const char *const names[MCP_VERSION_COUNT] = {
	[MCP_2024_11_05] = "2024-11-05",
	[MCP_2025_03_26] = "2025-03-26",
	[MCP_2025_06_18] = "2025-06-18",
	[MCP_2025_11_25] = "2025-11-25",
	[MCP_2026_07_28] = "2026-07-28",
};

const char *mcp_version_name(enum mcp_version v)
{
	return (unsigned)v < MCP_VERSION_COUNT ? names[v] : "?";
}

int mcp_version_parse(const char *s)
{
	for (int v = 0; s && v < MCP_VERSION_COUNT; v++)
		if (strcmp(s, names[v]) == 0)
			return v;
	return -1;
}

cJSON *mcp_versions_json(void)
{
	cJSON *a = cJSON_CreateArray();
	for (int v = MCP_VERSION_COUNT - 1; v >= 0; v--)
		cJSON_AddItemToArray(a, cJSON_CreateString(names[v]));
	return a;
}

/* Appends the names of [from, to), newest first, joined with ", " and a
 * last " and ". */
static size_t join(char *out, size_t size, size_t n, int from, int to)
{
	for (int v = to - 1; v >= from && n < size; v--)
		n += (size_t)snprintf(out + n, size - n, "%s%s", v == to - 1 ? "" : v == from ? " and " : ", ", names[v]);
	return n < size ? n : size - 1;
}

const char *mcp_versions_text(void)
{
	static char text[200]; /* built once, on the loop */
	if (!text[0]) {
		size_t n = join(text, sizeof text, 0, MCP_MODERN_FIRST, MCP_VERSION_COUNT);
		n += (size_t)snprintf(text + n, sizeof text - n, " per request; ");
		n = join(text, sizeof text, n, 0, MCP_MODERN_FIRST);
		snprintf(text + n, sizeof text - n, " through initialize");
	}
	return text;
}
