/* JSON-RPC over stdio and the MCP lifecycle.
 *
 * stdin is read without blocking into a bounded line buffer; each complete
 * line is one message.  Replies are written whole, one line each, by the
 * output queue's own thread (rpc/out.h): stdout carries nothing else, and a
 * client that stops reading holds up no timer. */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../rpc/out.h"
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "exec.h"
#include "history.h"
#include "reproduce.h"
#include "protocol.h"
#include "reply.h"
#include "tools.h"

/* How long a client may read nothing of the replies that wait.  The test
 * knob makes it short enough for a test. */
static double stall_ms(void)
{
	const char *t = getenv("PSM_TEST_STDOUT_STALL_MS");
	double v = t ? strtod(t, NULL) : 0;
	return v > 0 ? v : OUT_STALL_MS_DEFAULT;
}

/* How long the exit (or a restart) waits for the client to read the last
 * replies. */
static double out_exit_ms(void)
{
	return OUT_EXIT_MS < stall_ms() ? OUT_EXIT_MS : stall_ms();
}

/* ------------------------------------------------------------ methods */

/* What the server offers (the same in both eras, logging aside) and its
 * instructions. */
static void add_capabilities(const struct server *s, cJSON *res, bool logging)
{
	cJSON *caps = cJSON_AddObjectToObject(res, "capabilities");
	cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddBoolToObject(tools, "listChanged", 0);
	cJSON *rc = cJSON_AddObjectToObject(caps, "resources");
	cJSON_AddBoolToObject(rc, "listChanged", 0);
	cJSON_AddBoolToObject(rc, "subscribe", 0);
	if (logging)
		cJSON_AddObjectToObject(caps, "logging");
	char *instructions = tools_instructions(s);
	cJSON_AddStringToObject(res, "instructions", instructions);
	free(instructions);
}

/* The legacy handshake: the client's version when it is a legacy one this
 * server speaks, else the latest legacy one (a 2026-07-28 client never
 * sends initialize: that era has no handshake). */
static void on_initialize(struct server *s, const struct req *q, const cJSON *params)
{
	const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	int v = cJSON_IsString(pv) ? mcp_version_parse(pv->valuestring) : -1;
	if (v < 0 || mcp_modern((enum mcp_version)v))
		v = MCP_LEGACY_LATEST;
	const cJSON *ccaps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
	if (s->opts.root_from_cwd && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ccaps, "roots")))
		s->roots_wanted = true;
	s->legacy_version = (enum mcp_version)v;
	s->version_chosen = true;
	struct req r = *q;
	r.v = (enum mcp_version)v;
	cJSON *res = cJSON_CreateObject();
	cJSON_AddStringToObject(res, "protocolVersion", mcp_version_name(r.v));
	add_capabilities(s, res, true);
	cJSON_AddItemToObject(res, "serverInfo", reply_server_info(r.v));
	answer(s, &r, res);
}

/* The modern era's description of the server: every version it speaks,
 * what it serves, and the instructions.  (Logging is not offered: it is
 * deprecated there, and the server logs to stderr.)  Answered with or
 * without _meta: it is what a client probes with. */
static void on_discover(struct server *s, const struct req *q, const cJSON *params)
{
	(void)params;
	struct req r = *q;
	r.v = MCP_MODERN_FIRST > q->v ? MCP_MODERN_FIRST : q->v;
	cJSON *res = cJSON_CreateObject();
	cJSON_AddItemToObject(res, "supportedVersions", mcp_versions_json());
	add_capabilities(s, res, false);
	answer(s, &r, res);
}

static void on_ping(struct server *s, const struct req *q, const cJSON *params)
{
	(void)params;
	answer(s, q, NULL);
}

static void on_tools_list(struct server *s, const struct req *q, const cJSON *params)
{
	(void)params;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "tools", tools_list(s, q->v));
	answer(s, q, r);
}

static void on_templates_list(struct server *s, const struct req *q, const cJSON *params)
{
	(void)params;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddArrayToObject(r, "resourceTemplates");
	answer(s, q, r);
}

static void on_set_level(struct server *s, const struct req *q, const cJSON *params)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
	int l = cJSON_IsString(lv) ? log_level_parse(lv->valuestring) : -1;
	if (l < 0) {
		answer_error(s, q, RPC_INVALID_PARAMS,
			     "level must be one of debug, info, notice, warning, error, critical, alert, emergency", NULL);
		return;
	}
	log_threshold = (enum log_level)l;
	answer(s, q, NULL);
}

enum { ERA_LEGACY = 1, ERA_MODERN = 2, ERA_BOTH = 3 };

/* How long a client may keep a result: the tool list is fixed for the
 * server's life (5 minutes bounds what a client keeps across a restart
 * with other flags); the workspace's files change with every call. */
#define TTL_FIXED_MS 300000L
#define TTL_NONE -1L

/* The method table: each method once, with its handler, the eras that
 * have it (and what to say to the other), whether it is answered while
 * the client's roots are awaited, and its result's cache hint. */
static const struct method {
	const char *name;
	void (*handle)(struct server *s, const struct req *q, const cJSON *params);
	int eras;
	const char *elsewhere; /* why the other era does not have it */
	bool while_roots;
	long ttl_ms;
} methods[] = {
	{ "initialize", on_initialize, ERA_LEGACY,
	  "2026-07-28 has no handshake: send each request with params._meta naming " META_PROTOCOL_VERSION " and " META_CLIENT_CAPABILITIES,
	  false, TTL_NONE },
	{ "ping", on_ping, ERA_LEGACY, "2026-07-28 removed ping", true, TTL_NONE },
	{ "logging/setLevel", on_set_level, ERA_LEGACY,
	  "2026-07-28 removed logging/setLevel (the server logs to its stderr)", false, TTL_NONE },
	{ "server/discover", on_discover, ERA_BOTH, NULL, false, TTL_FIXED_MS },
	{ "tools/list", on_tools_list, ERA_BOTH, NULL, false, TTL_FIXED_MS },
	{ "tools/call", tools_call, ERA_BOTH, NULL, false, TTL_NONE },
	{ "resources/list", resources_list, ERA_BOTH, NULL, false, 0 },
	{ "resources/templates/list", on_templates_list, ERA_BOTH, NULL, false, TTL_FIXED_MS },
	{ "resources/read", resources_read, ERA_BOTH, NULL, false, 0 },
};

static const struct method *method_find(const char *name)
{
	for (size_t i = 0; i < N_ELEMENTS(methods); i++)
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

/* The protocol version a request follows: the one its _meta names (the
 * modern era: checked here, with the client's capabilities beside it; a
 * legacy version named there is followed too, since the server speaks it),
 * else the one initialize chose.  False when the request was answered with
 * an error: -32022 for a version this server does not know, -32602 for a
 * malformed _meta. */
static bool request_version(struct server *s, const cJSON *id, const cJSON *params, struct req *q)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *pv = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, META_PROTOCOL_VERSION) : NULL;
	q->id = id;
	q->v = reply_legacy_version(s);
	if (!pv)
		return true;
	char msg[600];
	if (!cJSON_IsString(pv)) {
		snprintf(msg, sizeof msg, "params._meta[\"%s\"] must be a string naming the protocol version, such as \"%s\"",
			 META_PROTOCOL_VERSION, mcp_version_name(MCP_MODERN_FIRST));
		rpc_error(id, RPC_INVALID_PARAMS, msg, NULL);
		return false;
	}
	int v = mcp_version_parse(pv->valuestring);
	if (v < 0) {
		snprintf(msg, sizeof msg, "unsupported protocol version \"%.40s\": this server speaks %s", pv->valuestring, mcp_versions_text());
		cJSON *data = cJSON_CreateObject();
		cJSON_AddItemToObject(data, "supported", mcp_versions_json());
		cJSON_AddStringToObject(data, "requested", pv->valuestring);
		rpc_error(id, MCP_UNSUPPORTED_VERSION, msg, data);
		return false;
	}
	if (mcp_modern((enum mcp_version)v) && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(meta, META_CLIENT_CAPABILITIES))) {
		snprintf(msg, sizeof msg, "params._meta[\"%s\"] must be an object (the client's capabilities for this request; {} for none)",
			 META_CLIENT_CAPABILITIES);
		rpc_error(id, RPC_INVALID_PARAMS, msg, NULL);
		return false;
	}
	q->v = (enum mcp_version)v;
	return true;
}

static void dispatch_request(struct server *s, const cJSON *msg, const cJSON *id, const char *name, const cJSON *params)
{
	struct req q;
	if (!request_version(s, id, params, &q))
		return;
	const struct method *m = method_find(name);
	/* Waiting for the client's roots: requests wait too (bounded by the
	 * line limit and ROOTS_WAIT_MS), ping excepted. */
	if (s->roots_pending && !(m && m->while_roots)) {
		cJSON_AddItemToArray(s->held, cJSON_Duplicate(msg, 1));
		return;
	}
	char text[400];
	int era = mcp_modern(q.v) ? ERA_MODERN : ERA_LEGACY;
	if (!m) {
		snprintf(text, sizeof text, "method not found: %.200s", name);
		answer_error(s, &q, RPC_METHOD_NOT_FOUND, text, NULL);
		return;
	}
	if (!(m->eras & era)) {
		snprintf(text, sizeof text, "method not found in protocol %s: %s (%s)", mcp_version_name(q.v), name, m->elsewhere);
		answer_error(s, &q, RPC_METHOD_NOT_FOUND, text, NULL);
		return;
	}
	q.ttl_ms = m->ttl_ms;
	m->handle(s, &q, params);
}

/* ---- ROOT from the client's roots ----
 * Neither --root nor CLAUDE_PROJECT_DIR named the project, and the client
 * has roots: its first file:// root is the project.  Everything that
 * depends on ROOT (the policy found under it, workspace trust, the
 * workspace, the zygote's jail) was set up for the current directory, so a
 * different root starts this same process again (execv, same pid, same
 * stdio) with --root, told that initialize is done and handed the requests
 * that arrived meanwhile; no code has run yet.  A client that does not
 * answer within ROOTS_WAIT_MS keeps the current directory. */
#define ROOTS_ID "psm-roots-list"
#define ROOTS_WAIT_MS 10000.0

static void dispatch(struct server *s, const cJSON *msg);

static void release_held(struct server *s)
{
	s->roots_pending = false;
	cJSON *held = s->held;
	s->held = NULL;
	cJSON *m;
	cJSON_ArrayForEach(m, held)
		dispatch(s, m);
	cJSON_Delete(held);
}

static void roots_timeout(void *arg)
{
	struct server *s = arg;
	if (!s->roots_pending)
		return;
	log_warn("the client did not answer roots/list within %.0f s: the project is the current directory %s",
		 ROOTS_WAIT_MS / 1000.0, s->opts.root);
	release_held(s);
}

/* file:///a%20b -> /a b; NULL when it is not a local file URI. */
static char *file_uri_path(const char *uri)
{
	if (strncmp(uri, "file://", 7) != 0)
		return NULL;
	const char *p = uri + 7;
	if (strncmp(p, "localhost/", 10) == 0)
		p += 9;
	if (*p != '/')
		return NULL;
	char *out = xmalloc(strlen(p) + 1), *o = out;
	for (; *p; p++) {
		if (*p == '%' && p[1] && p[2]) {
			char hex[3] = { p[1], p[2], 0 }, *end;
			long v = strtol(hex, &end, 16);
			if (*end || v <= 0) {
				free(out);
				return NULL; /* no NUL bytes, no malformed escapes */
			}
			*o++ = (char)v;
			p += 2;
		} else if (*p == '?' || *p == '#') {
			break;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

/* Starts this binary again with --root DIR; returns only on failure. */
static void restart_on_root(struct server *s, const char *dir)
{
	/* Every line queued reaches the client before the exec, which would
	 * end the thread that writes them: a line cut in the middle would be
	 * followed by the new process's. */
	if (!out_drain(out_exit_ms())) {
		log_error("the client did not read the replies before the restart on %s: the project stays %s", dir, s->opts.root);
		return;
	}
	int fd = memfd_create("psm-held-requests", 0); /* inherited on purpose */
	if (fd < 0) {
		log_error("cannot hand the held requests over (memfd_create: %s): the project stays %s", strerror(errno), s->opts.root);
		return;
	}
	cJSON *m;
	bool ok = true;
	cJSON_ArrayForEach(m, s->held) {
		char *line = cJSON_PrintUnformatted(m);
		ok = ok && write(fd, line, strlen(line)) == (ssize_t)strlen(line) && write(fd, "\n", 1) == 1;
		free(line);
	}
	size_t plen;
	const char *partial = lines_partial(&s->in, &plen);
	if (partial) /* a message still arriving */
		ok = ok && write(fd, partial, plen) == (ssize_t)plen;
	if (!ok || lseek(fd, 0, SEEK_SET) != 0) {
		log_error("cannot hand the held requests over: the project stays %s", s->opts.root);
		close(fd);
		return;
	}
	char fdbuf[16];
	snprintf(fdbuf, sizeof fdbuf, "%d", fd);
	size_t n = 0;
	while (s->opts.argv[n])
		n++;
	char **av = xreallocarray(NULL, n + 8, sizeof *av);
	size_t k = 0;
	av[k++] = xstrdup(s->opts.argv[0]);
	av[k++] = xstrdup("--root");
	av[k++] = xstrdup(dir);
	for (size_t i = 1; i < n; i++)
		av[k++] = xstrdup(s->opts.argv[i]);
	av[k++] = xstrdup("--resume-mcp");
	av[k++] = xstrdup(mcp_version_name(reply_legacy_version(s)));
	av[k++] = xstrdup("--resume-input");
	av[k++] = xstrdup(fdbuf);
	av[k] = NULL;
	log_info("the client's first root is %s (not the current directory %s): starting again with --root there", dir, s->opts.root);
	/* The zygote and its sessions end first (nothing has run in them). */
	sup_free(s->sup);
	s->sup = NULL;
	int fl = fcntl(STDIN_FILENO, F_GETFL);
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl & ~O_NONBLOCK);
	exec_self(s->opts.self_exe, av, environ);
	log_error("cannot start again on %s (%s): exiting", dir, strerror(errno));
	exit(1);
}

static void on_roots_response(struct server *s, const cJSON *msg)
{
	if (!s->roots_pending)
		return;
	const cJSON *roots = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(msg, "result"), "roots");
	const cJSON *r;
	char *path = NULL;
	cJSON_ArrayForEach(r, roots) {
		const cJSON *uri = cJSON_GetObjectItemCaseSensitive(r, "uri");
		if (cJSON_IsString(uri) && (path = file_uri_path(uri->valuestring)))
			break;
	}
	char real[4096];
	struct stat st;
	if (!path) {
		log_info("the client lists no file:// root: the project is the current directory %s", s->opts.root);
	} else if (!realpath(path, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_warn("the client's first root %s is not an existing directory: the project is the current directory %s",
			 path, s->opts.root);
	} else if (strcmp(real, s->opts.root) == 0) {
		log_info("the client's first root is the current directory %s", real);
	} else {
		/* Not here: the rest of the bytes already read (more requests
		 * after this answer) are held first, then the restart. */
		free(path);
		s->restart_root = xstrdup(real);
		return;
	}
	free(path);
	release_held(s);
}

/* After a chunk of input is handled: the restart on the client's root, if
 * one is due; when it cannot happen, the project stays where it is. */
static void maybe_restart(struct server *s)
{
	if (!s->restart_root)
		return;
	restart_on_root(s, s->restart_root);
	free(s->restart_root);
	s->restart_root = NULL;
	release_held(s);
}

/* The legacy handshake is over: when the client has roots and nothing
 * else named the project, ask for them. */
static void on_initialized(struct server *s, const cJSON *params)
{
	(void)params;
	s->initialized = true;
	if (s->roots_wanted && !s->roots_pending) {
		s->roots_wanted = false;
		s->roots_pending = true;
		s->held = cJSON_CreateArray();
		rpc_request(ROOTS_ID, "roots/list", NULL);
		loop_timer(s->loop, ROOTS_WAIT_MS, roots_timeout, s);
	}
}

static void on_cancelled(struct server *s, const cJSON *params)
{
	const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
	if (rid)
		exec_cancel(s, rid);
}

/* The notifications the server acts on, in both eras.  Any other is
 * ignored: a notification never gets a reply, not even an error. */
static const struct notification {
	const char *name;
	void (*handle)(struct server *s, const cJSON *params);
} notifications[] = {
	{ "notifications/initialized", on_initialized },
	{ "notifications/cancelled", on_cancelled },
};

static void on_notification(struct server *s, const char *method, const cJSON *params)
{
	for (size_t i = 0; i < N_ELEMENTS(notifications); i++)
		if (strcmp(notifications[i].name, method) == 0)
			notifications[i].handle(s, params);
}

static void dispatch(struct server *s, const cJSON *msg)
{
	if (!cJSON_IsObject(msg)) {
		rpc_error(NULL, RPC_INVALID_REQUEST,
			  cJSON_IsArray(msg) ? "batches are not supported: send one JSON-RPC message per line"
					     : "a JSON-RPC message must be a JSON object",
			  NULL);
		return;
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");

	if (!method) {
		/* A response from the client (our one request is roots/list) or junk. */
		if (id && (cJSON_GetObjectItemCaseSensitive(msg, "result") || cJSON_GetObjectItemCaseSensitive(msg, "error"))) {
			if (cJSON_IsString(id) && strcmp(id->valuestring, ROOTS_ID) == 0)
				on_roots_response(s, msg);
			return;
		}
		rpc_error(id && (cJSON_IsString(id) || cJSON_IsNumber(id)) ? id : NULL, RPC_INVALID_REQUEST,
			  "missing \"method\"", NULL);
		return;
	}
	if (!cJSON_IsString(method) || !cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0 ||
	    (id && !cJSON_IsString(id) && !cJSON_IsNumber(id)) || (params && !cJSON_IsObject(params) && !cJSON_IsArray(params))) {
		if (id || !cJSON_IsString(method))
			rpc_error((id && (cJSON_IsString(id) || cJSON_IsNumber(id))) ? id : NULL, RPC_INVALID_REQUEST,
				  "invalid request: needs \"jsonrpc\": \"2.0\", a string \"method\", an id that is a string or number, and object params",
				  NULL);
		return;
	}
	if (!id) {
		on_notification(s, method->valuestring, params);
		return;
	}
	dispatch_request(s, msg, id, method->valuestring, params);
}

void server_handle_line(struct server *s, char *line, size_t len)
{
	bool blank;
	cJSON *msg = rpc_parse_line(line, len, &blank);
	if (blank)
		return; /* blank lines are ignored */
	if (!msg) {
		rpc_error(NULL, RPC_PARSE_ERROR,
			  "parse error: each line must be one complete JSON-RPC message", NULL);
		return;
	}
	dispatch(s, msg);
	cJSON_Delete(msg);
}

/* How long requests already read may still run after stdin ends.  Short:
 * clients close stdin to shut a server down and wait for it to exit. */
#define EOF_GRACE_S 3
/* How long the server waits, in all, for the states of the calls that
 * ended to reach the disk (saves in progress, and the ones it starts). */
#define SAVE_GRACE_S 10

static void calls_over(void *arg)
{
	struct server *s = arg;
	if (s->wait_calls && (sup_busy(s->sup) || s->jobs > 0))
		log_info("end of input: %d s are over, the calls still running are not waited for", EOF_GRACE_S);
	s->wait_calls = false;
	reply_call_done(s);
}

static void saves_over(void *arg)
{
	struct server *s = arg;
	if (sup_saving(s->sup))
		sup_report_unsaved(s->sup);
	log_info("%d s are over, shutting down", SAVE_GRACE_S);
	loop_stop(s->loop);
}

/* End of input or a signal: the state of every call that ended goes to
 * disk before the exit (the supervisor starts the saves that were cut
 * short or never started), within SAVE_GRACE_S; after end of input the
 * calls already read are answered too, within EOF_GRACE_S.  A later signal
 * only stops the wait for calls: the saves still get their time (a client
 * that closes stdin and then sends SIGTERM is the usual case).
 * Measured before: ended right after the last reply, by end of input or
 * SIGTERM, the next server restored nothing at all. */
static void begin_stop(struct server *s, bool wait_calls)
{
	if (s->stopping) {
		s->wait_calls = s->wait_calls && wait_calls;
		reply_call_done(s);
		return;
	}
	s->stopping = true;
	s->wait_calls = wait_calls;
	sup_shutdown(s->sup);
	if (wait_calls && (sup_busy(s->sup) || s->jobs > 0))
		log_info("end of input: finishing the calls in progress before exit (at most %d s)", EOF_GRACE_S);
	if (sup_saving(s->sup))
		log_info("saving the sessions' states before exit (at most %d s)", SAVE_GRACE_S);
	loop_timer(s->loop, EOF_GRACE_S * 1000.0, calls_over, s);
	loop_timer(s->loop, SAVE_GRACE_S * 1000.0, saves_over, s);
	reply_call_done(s);
}

static void on_line(void *arg, char *line, size_t len)
{
	server_handle_line(arg, line, len);
}

static void on_too_long(void *arg, const char *head, size_t len)
{
	char msg[300];
	snprintf(msg, sizeof msg, "message too long: a JSON-RPC line may be at most %u bytes (%u MiB); "
		 "put large data in a file under the workspace and name it in the request instead",
		 MCP_MAX_LINE, MCP_MAX_LINE >> 20);
	/* The request's own id when it can be read from the line's start: a
	 * client otherwise waits for its timeout on a request never answered. */
	cJSON *id = rpc_id_from_prefix(head, len);
	rpc_error(id, RPC_INVALID_REQUEST, msg, NULL);
	cJSON_Delete(id);
}

static void stdin_event(void *arg, int fd, short revents)
{
	struct server *s = arg;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		lines_end(&s->in);
		loop_unwatch(s->loop, fd);
		s->eof = true;
		/* Requests already read are answered (a client that pipes its
		 * requests and closes stdin gets every reply). */
		log_info("end of input");
		begin_stop(s, true);
		return;
	}
	lines_feed(&s->in, buf, (size_t)n);
	maybe_restart(s);
}

static void signal_event(void *arg, int fd, short revents)
{
	struct server *s = arg;
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) {
			log_info("signal %u: shutting down", si.ssi_signo);
			/* No new requests: what runs may still end, its state
			 * is saved. */
			if (!s->eof) {
				loop_unwatch(s->loop, STDIN_FILENO);
				s->eof = true;
			}
			begin_stop(s, false);
		}
	}
}

/* The client left its replies unread (out.h): it is cut off, and the
 * server ends as at end of input (the calls already read may end, every
 * state is saved), since nothing it answers can reach the client. */
static void client_cut(void *arg, const char *why)
{
	struct server *s = arg;
	log_error("%s: the client is cut off, and the server ends as at end of input (its replies are dropped; "
		  "every session's state is saved first)", why);
	if (!s->eof) {
		loop_unwatch(s->loop, STDIN_FILENO);
		s->eof = true;
	}
	begin_stop(s, true);
}

static void sup_ended(void *arg)
{
	reply_call_done(arg);
}

struct sup *server_sup_new(struct server *s)
{
	struct sup_config cfg = {
		.loop = s->loop,
		.policy = s->policy,
		.ws = &s->ws,
		.approved = s->trust.approved,
		.venv = s->opts.venv,
		.venv_pth_off = s->opts.venv_pth_off,
		.venv_withheld = s->opts.venv_withheld,
		.timeout_s = s->opts.timeout_s,
		.memory_mb = s->opts.memory_mb,
		.check_session = s->opts.check_session,
		.warmup = s->opts.warmup,
		.self_exe = s->opts.self_exe,
		.ended = sup_ended,
		.arg = s,
	};
	return sup_new(&cfg);
}

/* The built-in policy's text (policy/builtin_skill.S). */
extern const char builtin_skill_md[];
extern const unsigned long builtin_skill_md_len;

/* The history of the sessions (history.h): off, with a line on stderr,
 * where it cannot be kept out of the sandbox's reach. */
static void server_history_open(struct server *s)
{
	const char *src = s->trust.project && s->trust.path ? s->trust.path : s->policy->source;
	char hex[65] = "";
	if (s->trust.project && s->trust.hex[0])
		snprintf(hex, sizeof hex, "%s", s->trust.hex);
	else
		trust_hash(builtin_skill_md, (size_t)builtin_skill_md_len, hex);
	s->history = history_open(&s->ws, s->policy, src, hex, s->opts.venv);
	if (!history_on(s->history))
		log_warn("the sessions' history is not kept (no export, no provenance): %s", history_why_off(s->history));
}

int server_run(struct server *s)
{
	struct err e = { 0 };
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);

	s->loop = loop_new();
	s->in = (struct lines){ .max = MCP_MAX_LINE, .line = on_line, .too_long = on_too_long, .arg = s };
	s->sup = server_sup_new(s);
	if (!s->opts.refuse_all && !s->opts.check_session)
		server_history_open(s);
	if (!s->loop || !s->sup || sfd < 0) {
		log_error("cannot start: out of resources");
		return 1;
	}
	/* Whatever the sandboxed code leaves running comes up to the server
	 * when the zygote is gone, where there is no pid namespace to end it
	 * (the namespace-free mode): the supervisor ends it then. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* The zygote is forked before anything else: the server is still
	 * single-threaded and small. */
	if (s->opts.refuse_all)
		sup_disable(s->sup, s->opts.refuse_all); /* nothing runs under no policy */
	else if (sup_start(s->sup, &e) < 0) {
		log_error("cannot start the interpreter: %s", e.msg);
		sup_disable(s->sup, e.msg); /* every call is told why */
	}
	int fl = fcntl(STDIN_FILENO, F_GETFL);
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
	/* Started after the fork of the zygote and after the signals are
	 * blocked: the workers inherit the mask.  Two workers, so one long
	 * (budgeted) walk does not queue every other session's behind it. */
	s->work = work_new(s->loop, 2);
	sup_set_work(s->sup, s->work);
	/* After the zygote's fork too: no process below holds it. */
	s->note = wsnote_new();
	out_start(&(struct out_config){ .loop = s->loop, .fd = STDOUT_FILENO, .stall_ms = stall_ms(), .cut = client_cut, .arg = s });
	if (s->opts.resume_version) {
		/* Started again on the client's root: initialize was answered
		 * by the process this one replaced. */
		int v = mcp_version_parse(s->opts.resume_version);
		s->legacy_version = v >= 0 && !mcp_modern((enum mcp_version)v) ? (enum mcp_version)v : MCP_LEGACY_LATEST;
		s->version_chosen = true;
		s->initialized = true;
	}
	if (s->opts.resume_fd >= 0) {
		char rb[65536];
		ssize_t rn;
		while ((rn = read(s->opts.resume_fd, rb, sizeof rb)) > 0)
			lines_feed(&s->in, rb, (size_t)rn);
		close(s->opts.resume_fd);
	}
	loop_watch(s->loop, STDIN_FILENO, POLLIN, stdin_event, s);
	loop_watch(s->loop, sfd, POLLIN, signal_event, s);
	loop_run(s->loop);

	/* The sessions go first: their calls abandon their jobs, so no job
	 * is delivered to what is freed; then the workers are joined. */
	sup_free(s->sup);
	s->sup = NULL;
	reproduce_stop(); /* a run again on a worker would hold its join */
	work_free(s->work);
	art_list_free(&s->snap.list);
	wsnote_free(s->note);
	s->work = NULL;
	/* The last replies reach a client that reads them; one that does not
	 * holds the exit up for a few seconds at most. */
	out_drain(out_exit_ms());
	out_stop();
	loop_free(s->loop);
	s->loop = NULL;
	close(sfd);
	cJSON_Delete(s->held);
	s->held = NULL;
	free(s->restart_root);
	s->restart_root = NULL;
	lines_free(&s->in);
	history_free(s->history);
	s->history = NULL;
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl);
	return 0;
}
