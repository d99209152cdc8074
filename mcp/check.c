/* --check: a real session, probed from inside and judged from outside.
 *
 * The check starts this very binary as a server (the hidden --check-session
 * option, same ROOT, workspace, policy and limits), talks MCP to it over
 * pipes like any client, and runs the probes as an execute_python call: the
 * zygote is exec'd, jailed and started exactly as when serving, so what
 * keeps a session from starting (a server that is pid 1, a layer the kernel
 * refuses) fails the check too.  The server prints the jail's report on its
 * stderr between two marker lines; everything else it logs is shown only
 * when something went wrong.
 *
 * Nothing on the host changes: the zygote skips the chown of root-owned
 * writable directories and the matplotlib cache in the workspace; a missing
 * workspace is not created (an empty stand-in is used and removed); the
 * probe call ends in an exception so that nothing is saved after it; the
 * write probe's target is checked from outside and removed should it exist. */
#include "check.h"
#include "../common/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../jail/jail.h"
#include "../supervisor/supervisor.h"
#include "../supervisor/watch.h"

#define CHECK_TIMEOUT_MS 180000
#define CAP_OUT (4u << 20)

struct buf {
	char *s;
	size_t n;
};

static void buf_add(struct buf *b, const char *d, size_t n)
{
	if (b->n + n > CAP_OUT)
		return; /* bounded: a runaway server cannot grow us */
	char *t = xrealloc(b->s, b->n + n + 1);
	memcpy(t + b->n, d, n);
	b->n += n;
	t[b->n] = '\0';
	b->s = t;
}

/* Without namespaces no mount caps the private temp directory: what the
 * server counts it against instead (supervisor/limits.c, files/wswatch.h). */
static void scratch_line(const struct policy *p, FILE *f)
{
	struct statfs fs;
	bool tmpfs = statfs("/tmp", &fs) == 0 && fs.f_type == TMPFS_MAGIC;
	fprintf(f, "  scratch   counted       TMPDIR (a private directory under /tmp) counts with the workspace against "
		"max_workspace_mb (%ld MB)%s\n", p->limits.max_workspace_mb,
		tmpfs ? "; /tmp is a tmpfs here, so it also counts toward memory_mb" : "");
}

/* The fs_write directories outside the workspace are disk that no mount
 * caps either: they count with the workspace (files/artifacts.h:
 * art_outside_dirs; one beneath the workspace is counted with it). */
static void outside_lines(const struct check_opts *o, FILE *f)
{
	const struct policy *p = o->policy;
	char ws[PATH_MAX];
	if (p->fs_write != FS_WRITE_LIST)
		return;
	if (!realpath(o->workspace, ws))
		snprintf(ws, sizeof ws, "%s", o->workspace);
	for (size_t i = 0; i < p->n_fs_write_paths; i++)
		if (!path_under(p->fs_write_paths[i], ws))
			fprintf(f, "  fs_write  counted       %s (outside the workspace) counts with the workspace against "
				"max_workspace_mb (%ld MB)\n", p->fs_write_paths[i], p->limits.max_workspace_mb);
}

/* The probes, as Python run in the session.  Each prints errno (0 when the
 * operation went through: an escape when the policy forbids it). */
static char *probe_code(const struct policy *p, const char *probe_path)
{
	char *code = NULL;
	if (asprintf(&code,
		     "import os, socket, json\n"
		     "res = {}\n"
		     "def t(name, fn):\n"
		     "    try:\n"
		     "        fn(); res[name] = 0\n"
		     "    except OSError as e:\n"
		     "        res[name] = e.errno or -1\n"
		     "t('write', lambda: open(%s, 'x').close())\n"
		     "%s"
		     "%s"
		     "print('psm-probes ' + json.dumps(res), flush=True)\n"
		     "raise RuntimeError('probes done')  # an error: nothing is saved after it\n",
		     probe_path,
		     p->net_access ? "" : "t('socket', lambda: socket.socket(socket.AF_INET).close())\n",
		     p->shell_exec ? "" : "t('exec', lambda: os.waitpid(os.posix_spawn('/usr/bin/true', ['true'], {}), 0))\n") < 0)
		return NULL;
	return code;
}

static char *json_string_literal(const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return t;
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Outside what the policy lets the code write: ROOT, or its parent when
 * ROOT itself is writable. */
static void probe_target(const struct check_opts *o, char *out, size_t n)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", o->root);
	bool writable = strcmp(o->root, o->workspace) == 0;
	for (size_t i = 0; o->policy->fs_write == FS_WRITE_LIST && i < o->policy->n_fs_write_paths; i++)
		writable |= strcmp(o->policy->fs_write_paths[i], o->root) == 0;
	if (writable) {
		char *slash = strrchr(dir, '/');
		if (slash && slash != dir)
			*slash = '\0';
	}
	snprintf(out, n, "%.3800s/.psm-check-probe-%d", strcmp(dir, "/") ? dir : "", (int)getpid());
}

static const char *probe_word(const cJSON *v)
{
	if (!cJSON_IsNumber(v))
		return "not probed (allowed by the policy)";
	return v->valueint ? "refused" : "ALLOWED (escape)";
}

/* Runs the server, returns its stdout and stderr and the reply's text. */
static int converse(const struct check_opts *o, const char *ws, const char *code,
		    struct buf *out, struct buf *err)
{
	int in[2], po[2], pe[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return -errno;
	char *argv[32];
	int a = 0;
#define ARG(x) (argv[a++] = (char *)(uintptr_t)(x))
	ARG("python-sandbox-mcp");
	ARG("--check-session");
	ARG("--root");
	ARG(o->root);
	ARG("--workspace");
	ARG(ws);
	if (o->skill_path) {
		ARG("--skill");
		ARG(o->skill_path);
	}
	if (o->venv) {
		ARG("--venv");
		ARG(o->venv);
	}
	char t[32], m[32];
	if (o->timeout_s > 0) {
		snprintf(t, sizeof t, "%g", o->timeout_s);
		ARG("--timeout");
		ARG(t);
	}
	if (o->memory_mb > 0) {
		snprintf(m, sizeof m, "%ld", o->memory_mb);
		ARG("--memory");
		ARG(m);
	}
	ARG("--log-level");
	ARG("warning");
#undef ARG
	argv[a] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		exec_self(o->self_exe, argv, environ);
		_exit(127);
	}
	close(in[0]);
	close(po[1]);
	close(pe[1]);
	char *lit = json_string_literal(code);
	char *req = NULL;
	int rn = asprintf(&req,
			  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
			  "\"capabilities\":{},\"clientInfo\":{\"name\":\"python-sandbox-mcp --check\",\"version\":\"1\"}}}\n"
			  "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
			  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\","
			  "\"arguments\":{\"session\":\"psm-check\",\"code\":%s}}}\n",
			  lit ? lit : "\"\"");
	free(lit);
	signal(SIGPIPE, SIG_IGN);
	/* A short write: the server died at once; its stderr says why. */
	ssize_t wr = rn > 0 ? write(in[1], req, (size_t)rn) : 0;
	(void)wr;
	free(req);
	bool replied = false, closed_in = false;
	double deadline = mono_ms() + CHECK_TIMEOUT_MS;
	struct pollfd pf[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
	while ((pf[0].fd >= 0 || pf[1].fd >= 0) && mono_ms() < deadline) {
		if (replied && !closed_in) {
			close(in[1]); /* end of input: the server shuts down */
			closed_in = true;
		}
		int r = poll(pf, 2, 1000);
		if (r < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			char chunk[65536];
			ssize_t k = read(pf[i].fd, chunk, sizeof chunk);
			if (k <= 0) {
				close(pf[i].fd);
				pf[i].fd = -1;
				continue;
			}
			buf_add(i ? err : out, chunk, (size_t)k);
		}
		replied = out->s && strstr(out->s, "\"id\":2");
	}
	if (!closed_in)
		close(in[1]);
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	/* A server that has not gone within 10 s more is ended. */
	int st;
	for (int i = 0; i < 100 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(100000);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	return replied ? 0 : -ETIMEDOUT;
}

/* The text of the tools/call reply (id 2), or NULL. */
static char *reply_text(const char *out, bool *is_error)
{
	for (const char *line = out; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		cJSON *j = cJSON_ParseWithLength(line, n);
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
		if (cJSON_IsNumber(id) && id->valueint == 2) {
			const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
			const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
			const cJSON *first = cJSON_GetArrayItem(content, 0);
			const char *txt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first, "text"));
			*is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError"));
			char *copy = txt ? xstrdup(txt) : NULL;
			if (!txt) {
				const cJSON *er = cJSON_GetObjectItemCaseSensitive(j, "error");
				const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(er, "message"));
				copy = xstrdup(msg ? msg : "no result");
				*is_error = true;
			}
			cJSON_Delete(j);
			return copy;
		}
		cJSON_Delete(j);
		line = end ? end + 1 : NULL;
	}
	return NULL;
}

/* Whether serving could make the missing directory path (ws_open makes it
 * and its parents): the nearest ancestor that exists must be writable by
 * this user, on a file system mounted read-write.  False with why. */
static bool creatable(const char *path, char *why, size_t n)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof p, "%s", path);
	struct stat st;
	while (stat(p, &st) != 0) {
		char *sl = strrchr(p, '/');
		if (!sl || sl == p) {
			snprintf(p, sizeof p, "/");
			break;
		}
		*sl = '\0';
	}
	if (faccessat(AT_FDCWD, p, W_OK | X_OK, AT_EACCESS) == 0)
		return true;
	snprintf(why, n, "%.3800s: %s", p, strerror(errno));
	return false;
}

int check_run(const struct check_opts *o, FILE *f)
{
	/* The workspace is not made by a check: an empty stand-in when the
	 * real one is missing. */
	char standin[64] = "", no_ws[PATH_MAX + 200] = "";
	const char *ws = o->workspace;
	char outputs[4200];
	snprintf(outputs, sizeof outputs, "%s/outputs", o->workspace);
	if (!is_dir(o->workspace) || !is_dir(outputs)) {
		/* Named like the jail's scratch directories, so that the same
		 * careful removal applies to whatever the session left. */
		snprintf(standin, sizeof standin, "/tmp/psm-scratch-check-XXXXXX");
		if (!mkdtemp(standin)) {
			fprintf(f, "check: cannot make a stand-in workspace: %s\n", strerror(errno));
			return 1;
		}
		chmod(standin, 0755);
		char sub[128];
		snprintf(sub, sizeof sub, "%s/outputs", standin);
		mkdir(sub, 0755);
		ws = standin;
		/* A read-only checkout used to pass the check, and then
		 * serving stopped at start: said here, with what to pass. */
		const char *missing = is_dir(o->workspace) ? outputs : o->workspace;
		if (!creatable(missing, no_ws, sizeof no_ws))
			fprintf(f, "workspace %s is missing and cannot be created (%s); this check uses an empty stand-in\n",
				missing, no_ws);
		else
			fprintf(f, "workspace %s is missing (serving creates it); this check uses an empty stand-in\n",
				o->workspace);
	}
	char target[4096];
	probe_target(o, target, sizeof target);
	char *lit = json_string_literal(target);
	char *code = lit ? probe_code(o->policy, lit) : NULL;
	free(lit);
	struct buf out = { 0 }, err = { 0 };
	int rc = code ? converse(o, ws, code, &out, &err) : -ENOMEM;
	free(code);

	/* The jail's report, as the session's zygote made it. */
	const char *b = err.s ? strstr(err.s, CHECK_JAIL_BEGIN "\n") : NULL;
	const char *e = b ? strstr(b, CHECK_JAIL_END) : NULL;
	bool enforceable = false;
	char why[2048] = "";
	if (b && e) {
		b += strlen(CHECK_JAIL_BEGIN "\n");
		fprintf(f, "%.*s", (int)(e - b), b);
		enforceable = strncmp(b, "jail: enforceable", 17) == 0;
		const char *nsfree = strstr(b, "\nmode: Landlock + seccomp");
		if (nsfree && nsfree < e)
			scratch_line(o->policy, f);
		outside_lines(o, f);
		static const char no[] = "jail: NOT enforceable: ";
		if (strncmp(b, no, strlen(no)) == 0)
			snprintf(why, sizeof why, "%.*s", (int)strcspn(b + strlen(no), "\n"), b + strlen(no));
	} else {
		fprintf(f, "jail: no report: the interpreter did not start\n");
	}
	bool is_error = false;
	char *text = rc == 0 ? reply_text(out.s, &is_error) : NULL;
	const char *pl = text ? strstr(text, "psm-probes ") : NULL;
	cJSON *probes = pl ? cJSON_ParseWithLength(pl + 11, strcspn(pl + 11, "\n")) : NULL;
	/* A jail that said why it cannot be enforced said it all: the
	 * session's refusal and the server's log would only repeat it. */
	if (!probes && !why[0]) {
		fprintf(f, "session: %s\n", text ? text : rc == -ETIMEDOUT ? "no reply within 180 s" : strerror(-rc));
		/* The server's own account of what went wrong. */
		for (const char *l = err.s; l && *l;) {
			const char *end = strchr(l, '\n');
			size_t n = end ? (size_t)(end - l) : strlen(l);
			if ((strstr(l, " error: ") && strstr(l, " error: ") < l + n) ||
			    (strstr(l, " warning: ") && strstr(l, " warning: ") < l + n))
				fprintf(f, "  %.*s\n", (int)n, l);
			l = end ? end + 1 : NULL;
		}
	}
	/* The write probe is judged from outside too: the file must not exist. */
	struct stat sb;
	bool exists = lstat(target, &sb) == 0;
	if (exists)
		unlink(target);
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(probes, "write");
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(probes, "socket");
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(probes, "exec");
	bool good = enforceable && probes && cJSON_IsNumber(w) && w->valueint != 0 && !exists &&
		    (!cJSON_IsNumber(s) || s->valueint != 0) && (!cJSON_IsNumber(x) || x->valueint != 0) &&
		    (o->policy->net_access || cJSON_IsNumber(s)) && (o->policy->shell_exec || cJSON_IsNumber(x));
	if (probes) {
		fprintf(f, "probes (in a real session):\n");
		char wl[4200];
		snprintf(wl, sizeof wl, "write %s", target);
		const char *names[3] = { wl, "socket(AF_INET)", "execve /usr/bin/true" };
		const cJSON *vals[3] = { w, s, x };
		for (int i = 0; i < 3; i++) {
			bool errn = cJSON_IsNumber(vals[i]) && vals[i]->valueint > 0;
			fprintf(f, "  %-40s %s%s%s\n", names[i],
				i == 0 && exists ? "ALLOWED (escape)" : probe_word(vals[i]),
				errn ? ": " : "", errn ? strerror(vals[i]->valueint) : "");
		}
	}
	watch_describe_memory(o->policy->limits.memory_mb, o->policy->limits.max_processes, f);
	if (!good)
		fprintf(f, "check: %s%s\n", why[0] ? "" : "the policy is NOT enforced", why);
	else if (no_ws[0])
		fprintf(f, "check: the server cannot serve here: the workspace %s cannot be created (%s). %s\n",
			o->workspace, no_ws, WS_REMEDY);
	else
		fprintf(f, "check: the policy is enforced\n");
	cJSON_Delete(probes);
	free(text);
	free(out.s);
	free(err.s);
	if (standin[0])
		jail_scratch_remove(standin);
	return good && !no_ws[0] ? 0 : 1;
}
