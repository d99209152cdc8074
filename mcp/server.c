/* JSON-RPC over stdio and the MCP lifecycle.
 *
 * stdin is read without blocking into a bounded line buffer; each complete
 * line is one message.  Replies are written whole, one line each, with a
 * blocking write: stdout carries nothing else. */
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
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "exec.h"
#include "reply.h"
#include "tools.h"

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };
#define LATEST_VERSION "2025-11-25"

static const char *negotiate(const cJSON *params)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	if (cJSON_IsString(v))
		for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
			if (strcmp(v->valuestring, versions[i]) == 0)
				return versions[i];
	return LATEST_VERSION;
}

static void on_initialize(struct server *s, const cJSON *id, const cJSON *params)
{
	const char *v = negotiate(params);
	const cJSON *ccaps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
	if (s->opts.root_from_cwd && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ccaps, "roots")))
		s->roots_wanted = true;
	snprintf(s->protocol_version, sizeof s->protocol_version, "%s", v);
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "protocolVersion", v);
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddBoolToObject(tools, "listChanged", 0);
	cJSON *res = cJSON_AddObjectToObject(caps, "resources");
	cJSON_AddBoolToObject(res, "listChanged", 0);
	cJSON_AddBoolToObject(res, "subscribe", 0);
	cJSON_AddObjectToObject(caps, "logging");
	cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", "python-sandbox-mcp");
	if (reply_version_at_least(s, MCP_V_STRUCTURED))
		cJSON_AddStringToObject(info, "title", "Python sandbox");
	cJSON_AddStringToObject(info, "version", PSM_VERSION);
	cJSON_AddStringToObject(r, "instructions",
		"A stateful Python interpreter (numpy, pandas, matplotlib) in a sandbox. "
		"Compute numbers, statistics and charts with execute_python instead of in your head; "
		"state persists per session. Read inputs from the project or workspace/, write files "
		"under workspace/outputs/ (no network, no programs). Call verify_outputs on the files "
		"a task must produce before reporting it done.");
	rpc_result(id, r);
}

static void on_set_level(struct server *s, const cJSON *id, const cJSON *params)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
	int l = cJSON_IsString(lv) ? log_level_parse(lv->valuestring) : -1;
	if (l < 0) {
		rpc_error(id, RPC_INVALID_PARAMS,
			  "level must be one of debug, info, notice, warning, error, critical, alert, emergency",
			  NULL);
		return;
	}
	log_threshold = (enum log_level)l;
	rpc_result(id, NULL);
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
	av[k++] = xstrdup(s->protocol_version);
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
	execv(s->opts.self_exe, av);
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

static void on_notification(struct server *s, const char *method, const cJSON *params)
{
	if (strcmp(method, "notifications/initialized") == 0) {
		s->initialized = true;
		if (s->roots_wanted && !s->roots_pending) {
			s->roots_wanted = false;
			s->roots_pending = true;
			s->held = cJSON_CreateArray();
			rpc_request(ROOTS_ID, "roots/list", NULL);
			loop_timer(s->loop, ROOTS_WAIT_MS, roots_timeout, s);
		}
	} else if (strcmp(method, "notifications/cancelled") == 0) {
		const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
		if (rid)
			exec_cancel(s, rid);
	}
	/* Any other notification is ignored: a notification never gets a
	 * reply, not even an error. */
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
	const char *m = method->valuestring;
	if (!id) {
		on_notification(s, m, params);
		return;
	}
	/* Waiting for the client's roots: requests wait too (bounded by the
	 * line limit and ROOTS_WAIT_MS), ping excepted. */
	if (s->roots_pending && strcmp(m, "ping") != 0) {
		cJSON_AddItemToArray(s->held, cJSON_Duplicate(msg, 1));
		return;
	}
	if (strcmp(m, "initialize") == 0)
		on_initialize(s, id, params);
	else if (strcmp(m, "ping") == 0)
		rpc_result(id, NULL);
	else if (strcmp(m, "tools/list") == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddItemToObject(r, "tools", tools_list(s));
		rpc_result(id, r);
	} else if (strcmp(m, "tools/call") == 0)
		tools_call(s, id, params);
	else if (strcmp(m, "resources/list") == 0)
		resources_list(s, id, params);
	else if (strcmp(m, "resources/templates/list") == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddArrayToObject(r, "resourceTemplates");
		rpc_result(id, r);
	} else if (strcmp(m, "resources/read") == 0)
		resources_read(s, id, params);
	else if (strcmp(m, "logging/setLevel") == 0)
		on_set_level(s, id, params);
	else {
		char msg2[300];
		snprintf(msg2, sizeof msg2, "method not found: %.200s", m);
		rpc_error(id, RPC_METHOD_NOT_FOUND, msg2, NULL);
	}
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

static void grace_over(void *arg)
{
	struct server *s = arg;
	log_info("end of input: grace period over, shutting down");
	loop_stop(s->loop);
}

static void on_line(void *arg, char *line, size_t len)
{
	server_handle_line(arg, line, len);
}

static void on_too_long(void *arg)
{
	char msg[200];
	snprintf(msg, sizeof msg, "message too long: a JSON-RPC line may be at most %u bytes (%u MiB)",
		 MCP_MAX_LINE, MCP_MAX_LINE >> 20);
	rpc_error(NULL, RPC_INVALID_REQUEST, msg, NULL);
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
		 * requests and closes stdin gets every reply), within a grace
		 * period; SIGTERM and SIGINT stop at once. */
		if (sup_busy(s->sup) || s->jobs > 0) {
			log_info("end of input: finishing %s before exit (at most %d s)", "the calls in progress", EOF_GRACE_S);
			loop_timer(s->loop, EOF_GRACE_S * 1000.0, grace_over, s);
		} else {
			log_info("end of input: shutting down");
			loop_stop(s->loop);
		}
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
			loop_stop(s->loop);
		}
	}
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
	if (sup_start(s->sup, &e) < 0) {
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
	if (s->opts.resume_version) {
		/* Started again on the client's root: initialize was answered
		 * by the process this one replaced. */
		snprintf(s->protocol_version, sizeof s->protocol_version, "%s", s->opts.resume_version);
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
	work_free(s->work);
	s->work = NULL;
	loop_free(s->loop);
	s->loop = NULL;
	close(sfd);
	cJSON_Delete(s->held);
	s->held = NULL;
	free(s->restart_root);
	s->restart_root = NULL;
	lines_free(&s->in);
	if (fl >= 0)
		fcntl(STDIN_FILENO, F_SETFL, fl);
	return 0;
}
