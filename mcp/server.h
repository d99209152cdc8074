/* The MCP server: JSON-RPC over stdio, lifecycle, dispatch
 * (docs/TOOLS.md).  One thread, one event loop; stdout carries MCP messages
 * only. */
#ifndef MCP_SERVER_H
#define MCP_SERVER_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../policy/policy.h"
#include "../policy/trust.h"
#include "../workspace/fsafe.h"
#include "../rpc/loop.h"
#include "../supervisor/warmup.h"

#define MCP_MAX_LINE (8u << 20)   /* one JSON-RPC message */
#define MCP_MAX_CODE (2u << 20)   /* execute_python's code argument */

/* JSON-RPC and MCP error codes. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
	MCP_RESOURCE_NOT_FOUND = -32002,
};

struct sup;
struct work;

struct server_opts {
	const char *root;
	const char *workspace;
	const char *skill;
	const char *venv;
	double timeout_s;      /* < 0: not given */
	long memory_mb;        /* < 0: not given */
	bool structured_content;
	bool images_link;      /* --images link: images as resource_links only */
	enum warmup_mode warmup; /* --warmup (supervisor/warmup.h) */
	/* --check's own server (the hidden --check-session): the zygote
	 * changes nothing on the host, and the jail's report goes to stderr
	 * for the --check process to print. */
	bool check_session;
	/* ROOT was "/": not a project.  The server still starts, so that the
	 * agent can tell its user, but runs on an empty stand-in directory and
	 * every execute_python answers this message. */
	const char *not_project;
	/* ROOT from the client's roots: set when neither --root nor
	 * CLAUDE_PROJECT_DIR named the project (ROOT is then the current
	 * directory until the client says otherwise). */
	bool root_from_cwd;
	char **argv;           /* the command line, to start again on a new ROOT */
	const char *resume_version; /* internal: started again after initialize */
	int resume_fd;         /* internal: requests held for the new ROOT, or -1 */
	char self_exe[4096];   /* this binary, exec'd as the zygote */
};

struct server {
	struct server_opts opts;
	struct policy *policy;
	struct trust_state trust; /* workspace trust: what was withheld, the note */
	/* The project came from the client's roots (the server started again
	 * there): said once, in the first execute_python reply, so that the
	 * agent knows where workspace/ is. */
	char *root_note;
	struct workspace ws;
	struct loop *loop;
	struct sup *sup;
	struct work *work;     /* worker threads for reads of the workspace */
	int jobs;              /* tool replies a worker is still preparing */
	bool initialized;
	char protocol_version[32];
	int exit_status;
	/* stdin line assembly */
	char *line;
	size_t line_len, line_cap;
	bool discarding;       /* inside an over-long line */
	bool eof;              /* stdin ended: finish what was asked, then exit */
	/* roots/list: asked after initialized when the client has roots and
	 * ROOT came from the current directory; requests wait meanwhile. */
	bool roots_wanted;
	bool roots_pending;
	cJSON *held;           /* requests received while roots_pending */
	char *restart_root;    /* the client's root, once the bytes read are handled */
};

/* Sends a result, an error or a notification (one line on stdout).
 * id is borrowed. */
void rpc_result(struct server *s, const cJSON *id, cJSON *result /* consumed */);
void rpc_error(struct server *s, const cJSON *id, int code, const char *msg, cJSON *data /* consumed */);
void rpc_notify(struct server *s, const char *method, cJSON *params /* consumed */);

/* Protocol versions that changed what a reply may hold: tool annotations
 * came with 2025-03-26; structuredContent, outputSchema, resource_link and
 * the title fields with 2025-06-18. */
#define MCP_V_ANNOTATIONS "2025-03-26"
#define MCP_V_STRUCTURED "2025-06-18"

/* Whether the negotiated protocol version is `version` or later. */
bool server_proto_at_least(const struct server *s, const char *version);

/* Sends a tool result shaped for the negotiated version: before 2025-06-18
 * no structuredContent, and each resource_link becomes a line of the text
 * block.  result is consumed. */
void tool_reply(struct server *s, const cJSON *id, cJSON *result);

/* Tool results. */
cJSON *tool_text_result(const char *text, bool is_error);
/* A result whose structuredContent is `obj` and whose text is the same JSON. */
cJSON *tool_json_result(cJSON *obj /* consumed */, bool is_error);

/* Tools (mcp/tools.c, mcp/exec.c). */
cJSON *tools_list(const struct server *s);
/* Runs a tools/call.  Either replies at once (returns true) or takes over
 * the request and replies later (execute_python). */
void tools_call(struct server *s, const cJSON *id, const cJSON *params);
void exec_call(struct server *s, const cJSON *id, const cJSON *args, const cJSON *progress_token);
/* These two read the workspace and run on a worker thread (work.h); the
 * _submit functions queue them and reply when they are done. */
cJSON *list_artifacts_call(const struct server *s, const cJSON *args);
cJSON *verify_outputs_call(const struct server *s, const cJSON *args, bool has_exit, int exit_code);
void list_artifacts_submit(struct server *s, const cJSON *id, const cJSON *args);
void verify_outputs_submit(struct server *s, const cJSON *id, const cJSON *args);
/* Both read the workspace on a worker thread and reply when done. */
void resources_list(struct server *s, const cJSON *id, const cJSON *params);
void resources_read(struct server *s, const cJSON *id, const cJSON *params);

int server_run(struct server *s);

/* Called when a call has been answered (the server may be draining). */
void server_call_done(struct server *s);

/* One input line as a message: trailing CR and blanks and leading blanks
 * trimmed; the line is len bytes, not NUL-terminated.  NULL when it is blank
 * (*blank set) or not exactly one JSON value. */
cJSON *server_parse_line(const char *line, size_t len, bool *blank);

/* Handles one complete line (one JSON-RPC message); replies go to stdout.
 * Exposed for the unit tests of the protocol layer. */
void server_handle_line(struct server *s, char *line, size_t len);

#endif
