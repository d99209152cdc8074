/* The state of the MCP server that every part of mcp/ shares: the options,
 * the policy, the workspace, the loop and the supervisor.  Only a
 * definition: the functions are in server.c (lifecycle, dispatch),
 * tools.c, exec.c and reply.c. */
#ifndef MCP_STATE_H
#define MCP_STATE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../policy/policy.h"
#include "../policy/trust.h"
#include "../rpc/lines.h"
#include "../rpc/loop.h"
#include "../rpc/rpc.h"
#include "../supervisor/warmup.h"
#include "../files/artifacts.h"
#include "../files/fsafe.h"
#include "../files/wsnote.h"
#include "protocol.h"

#define MCP_MAX_LINE (8u << 20)   /* one JSON-RPC message */
#define MCP_MAX_CODE (2u << 20)   /* execute_python's code argument */

/* MCP's own error code (JSON-RPC's are in rpc/rpc.h). */
enum { MCP_RESOURCE_NOT_FOUND = -32002 };

struct sup;
struct work;
struct history;

struct server_opts {
	const char *root;
	const char *workspace;
	const char *skill;
	const char *venv;      /* the venv the interpreter uses, or NULL */
	bool venv_pth_off;     /* it lies where the code can write: no .pth runs */
	bool venv_withheld;    /* ROOT/.interpreter-venv exists, not approved */
	double timeout_s;      /* < 0: not given */
	long memory_mb;        /* < 0: not given */
	bool structured_content;
	bool images_link;      /* --images link: images as resource_links only */
	bool links_text;       /* --resource-links text: files named in the text only */
	long max_reply_kb;     /* --max-reply-kb (budget.h); <= 0: the default */
	enum warmup_mode warmup; /* --warmup (supervisor/warmup.h) */
	/* --check's own server (the hidden --check-session): the zygote
	 * changes nothing on the host, and the jail's report goes to stderr
	 * for the --check process to print. */
	bool check_session;
	/* The server cannot serve this project: ROOT is "/" or the home
	 * directory (not a project), its policy cannot be used (FILE:LINE:
	 * KEY: what to write), or its workspace cannot be made.  The server
	 * still starts, so that the agent can tell its user, on an empty
	 * stand-in for ROOT; no interpreter is started and every tool call
	 * answers this. */
	char *refuse_all;
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
	bool scan_on_loop;     /* the last snapshot was small: the next on the loop (exec.c) */
	/* The workspace's changes as inotify reports them (wsnote.h), and
	 * the walk after the last call while nothing changed since: the
	 * next call's snapshot (exec.c: scan_submit). */
	struct wsnote *note;
	struct {
		bool valid;
		struct art_list list;
		unsigned long long extra, effect; /* scan_job's, then */
		unsigned long long events;        /* wsnote_events after the walk */
	} snap;
	bool initialized;
	/* The legacy era's version, once initialize chose it (reply.h:
	 * reply_legacy_version); a modern request names its own. */
	bool version_chosen;
	enum mcp_version legacy_version;
	int exit_status;
	struct lines in;       /* stdin line assembly */
	bool eof;              /* stdin ended: finish what was asked, then exit */
	/* Exiting (end of input, or SIGTERM, SIGINT, SIGHUP): the sessions'
	 * states go to disk first (sup_saving), and with wait_calls the calls
	 * already read are answered too; both within their grace periods. */
	bool stopping;
	bool wait_calls;
	/* roots/list: asked after initialized when the client has roots and
	 * ROOT came from the current directory; requests wait meanwhile. */
	bool roots_wanted;
	bool roots_pending;
	cJSON *held;           /* requests received while roots_pending */
	char *restart_root;    /* the client's root, once the bytes read are handled */
	/* Each session's history (history.h); never NULL while serving. */
	struct history *history;
};

#endif
