/* The MCP protocol versions this server speaks, in two eras (docs/TOOLS.md
 * section 3):
 *  - legacy (2024-11-05 to 2025-11-25): `initialize` chooses one version
 *    for the whole stdio connection;
 *  - modern (2026-07-28): no handshake; every request names its version and
 *    the client's capabilities in params._meta, and every result says its
 *    resultType.
 * A request follows the version its _meta names (a legacy one named there
 * too), else the one initialize chose. */
#ifndef MCP_PROTOCOL_H
#define MCP_PROTOCOL_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* Oldest first: a later version never takes away what an earlier one
 * allowed in a reply. */
enum mcp_version {
	MCP_2024_11_05,
	MCP_2025_03_26, /* tool annotations */
	MCP_2025_06_18, /* structuredContent, outputSchema, resource_link, titles */
	MCP_2025_11_25,
	MCP_2026_07_28, /* stateless: server/discover, _meta, resultType, ttlMs */
	MCP_VERSION_COUNT
};

#define MCP_LEGACY_LATEST MCP_2025_11_25
#define MCP_MODERN_FIRST MCP_2026_07_28
#define MCP_V_ANNOTATIONS MCP_2025_03_26
#define MCP_V_STRUCTURED MCP_2025_06_18

/* The reserved _meta keys of the modern era. */
#define META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

/* UnsupportedProtocolVersion (2026-07-28): the request's _meta names a
 * version this server does not know. */
enum { MCP_UNSUPPORTED_VERSION = -32022 };

const char *mcp_version_name(enum mcp_version v);
/* The version named s, or -1 when this server does not know it. */
int mcp_version_parse(const char *s);

static inline bool mcp_modern(enum mcp_version v)
{
	return v >= MCP_MODERN_FIRST;
}

/* Every version this server speaks, newest first (server/discover's
 * supportedVersions, -32022's data.supported). */
cJSON *mcp_versions_json(void);

/* "2026-07-28 per request; 2025-11-25, 2025-06-18, 2025-03-26 and
 * 2024-11-05 through initialize", for messages. */
const char *mcp_versions_text(void);

#endif
