/* The tool table: each tool's name (written here and nowhere else), schema,
 * description, annotations and how its call runs; tools/list and
 * tools/call read it, as redis's command table serves lookupCommand.  And
 * the requests whose replies read the workspace, prepared on a worker
 * thread (docs/TOOLS.md).  Each tool's work is in a file of its own:
 * exec.c, list_artifacts.c, verify_outputs.c; resources in resources.c. */
#include "tools.h"

#include <patchlevel.h> /* the embedded Python's version */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/util.h"
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "budget.h"
#include "exec.h"
#include "list_artifacts.h"
#include "offload.h"
#include "reply.h"
#include "resources.h"
#include "schema.h"
#include "verify_outputs.h"

/* What a tool's preparation on a worker needs from the loop, read there
 * first (the supervisor's state is the loop's alone). */
struct tool_facts {
	struct verify_sessions verify; /* verify_outputs: the sessions' last exit codes */
};

struct tool {
	const char *name, *title;
	bool read_only;   /* readOnlyHint (and idempotentHint) */
	bool destructive; /* destructiveHint */
	/* inputSchema, and the description (the policy, the workspace and
	 * the installed stack are in it). */
	cJSON *(*input)(const struct server *s);
	void (*describe)(const struct server *s, char *out, size_t n);
	/* outputSchema, or NULL; with `structured_only`, declared only with
	 * --structured-content. */
	cJSON *(*output)(void);
	bool structured_only;
	/* A call runs in one of two ways.  On the loop: call takes the
	 * request over and answers when it is done (execute_python drives the
	 * supervisor).  On a worker: the result is prepared off the loop,
	 * since it reads the workspace, and sent from the loop; before, if
	 * set, reads on the loop what the preparation needs. */
	void (*call)(struct server *s, const struct req *q, const cJSON *args, const cJSON *progress_token);
	cJSON *(*prepare)(const struct server *s, const cJSON *args, const struct tool_facts *f);
	void (*before)(struct server *s, const cJSON *args, struct tool_facts *f);
};

/* ------------------------------------------------------------ facts */

/* The modules of the usual data stack found beside the ones every session
 * imports, as ", scipy, sklearn" (or "").  Looked up once, on the file
 * system where the embedded interpreter's site finds packages (Debian's
 * dist-packages, the prefix's site-packages, the venv): the server never
 * runs Python, and these are only words for the model. */
static const char *extra_stack(const struct server *s)
{
	static char found[120];
	static bool done;
	if (done)
		return found;
	done = true;
	static const char *const mods[] = { "scipy", "sklearn", "statsmodels", "seaborn" };
	char dirs[5][4200];
	size_t nd = 0;
	snprintf(dirs[nd++], sizeof dirs[0], "%s/lib/python3/dist-packages", PSM_PY_PREFIX);
	snprintf(dirs[nd++], sizeof dirs[0], "%s/lib/python%d.%d/dist-packages", PSM_PY_PREFIX, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	snprintf(dirs[nd++], sizeof dirs[0], "%s/lib/python%d.%d/site-packages", PSM_PY_PREFIX, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	snprintf(dirs[nd++], sizeof dirs[0], "/usr/local/lib/python%d.%d/dist-packages", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	if (s->opts.venv)
		snprintf(dirs[nd++], sizeof dirs[0], "%s/lib/python%d.%d/site-packages", s->opts.venv, PY_MAJOR_VERSION, PY_MINOR_VERSION);
	size_t n = 0;
	for (size_t m = 0; m < N_ELEMENTS(mods); m++)
		for (size_t d = 0; d < nd; d++) {
			char path[4300];
			struct stat st;
			snprintf(path, sizeof path, "%.4200s/%s/__init__.py", dirs[d], mods[m]);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				n += (size_t)snprintf(found + n, sizeof found - n, ", %s", mods[m]);
				break;
			}
		}
	return found;
}

/* "numpy, pandas and matplotlib preloaded as np, pd and plt; also
 * installed: scipy, sklearn" */
static void stack_text(const struct server *s, char *out, size_t n)
{
	const char *extra = extra_stack(s);
	if (*extra)
		snprintf(out, n, "numpy, pandas and matplotlib.pyplot preloaded as np, pd and plt; also installed: %s", extra + 2);
	else
		snprintf(out, n, "numpy, pandas and matplotlib.pyplot preloaded as np, pd and plt");
}

/* What the policy lets the code touch, for the model: "the project is
 * readable (read-only), files are written under workspace/outputs/, no
 * network, no programs". */
static void permissions_text(const struct server *s, char *out, size_t n)
{
	const struct policy *p = s->policy;
	const char *ws = s->ws.display;
	size_t k = 0;
	if (p->fs_read == FS_READ_ROOT)
		k += (size_t)snprintf(out + k, n - k, "the working directory is the project root, readable (read-only)");
	else if (p->fs_read == FS_READ_WORKSPACE)
		k += (size_t)snprintf(out + k, n - k, "only %s/ is readable", ws);
	else
		k += (size_t)snprintf(out + k, n - k, "the working directory is the project root; only %s/ and the paths the policy lists are readable", ws);
	if (k < n) {
		if (p->fs_write == FS_WRITE_WORKSPACE)
			k += (size_t)snprintf(out + k, n - k, "; write files under %s/outputs/", ws);
		else if (p->fs_write == FS_WRITE_NONE)
			k += (size_t)snprintf(out + k, n - k, "; nothing is writable");
		else
			k += (size_t)snprintf(out + k, n - k, "; writable: %s/ and the directories the policy lists", ws);
	}
	if (k < n)
		snprintf(out + k, n - k, "%s%s", p->net_access ? "; network allowed" : "; no network",
			 p->shell_exec ? "; programs may run" : "; no programs");
}

/* ------------------------------------------------------------ execute_python */

static cJSON *exec_input(const struct server *s)
{
	const struct policy_limits *l = &s->policy->limits;
	char desc[600];
	cJSON *props, *in = schema(&props);
	prop(props, "code", "string", "Python source. The last expression's value is returned like a notebook's Out[] (end it with ; to hide it).");
	if (l->persist)
		snprintf(desc, sizeof desc,
			 "Session name: the handle of one interpreter state (variables, imports, functions). It lives until reset: true; "
			 "it is saved after each successful call and restored after the server restarts. At most %ld sessions at once: each keeps its slot until the server exits (reset: true keeps it too). Default \"default\".",
			 l->max_sessions);
	else
		snprintf(desc, sizeof desc,
			 "Session name: the handle of one interpreter state (variables, imports, functions). It lives until reset: true "
			 "or until the server exits (not saved: limits.persist is off). At most %ld sessions at once: each keeps its slot until the server exits (reset: true keeps it too). Default \"default\".",
			 l->max_sessions);
	cJSON *sess = prop(props, "session", "string", desc);
	cJSON_AddStringToObject(sess, "pattern", "^[A-Za-z0-9_-]{1,64}$");
	cJSON_AddStringToObject(sess, "default", "default");
	snprintf(desc, sizeof desc, "Wall-clock limit for this call in seconds (default %g, at most %g).", l->timeout_s, l->max_timeout_s);
	cJSON *to = prop(props, "timeout_s", "number", desc);
	cJSON_AddNumberToObject(to, "exclusiveMinimum", 0);
	cJSON_AddNumberToObject(to, "maximum", l->max_timeout_s);
	cJSON *rs = prop(props, "reset", "boolean", "Discard the session's state first (its saved copy too).");
	cJSON_AddBoolToObject(rs, "default", 0);
	cJSON *fk = prop(props, "fork_from", "string",
			 "Start `session` (a new name) as a copy of this session's state, to try an alternative without touching it. "
			 "The copy has its own limits and counts against max_sessions.");
	cJSON_AddStringToObject(fk, "pattern", "^[A-Za-z0-9_-]{1,64}$");
	required(in, "code");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	return in;
}

static void exec_describe(const struct server *s, char *out, size_t n)
{
	const struct policy_limits *l = &s->policy->limits;
	char stack[200], perms[400];
	stack_text(s, stack, sizeof stack);
	permissions_text(s, perms, sizeof perms);
	snprintf(out, n,
		 "Run Python in a stateful sandboxed interpreter (%s; random and numpy.random seeded with %ld). "
		 "Use it for any arithmetic, statistics, data parsing or chart instead of computing in your head. "
		 "State persists per session. Sandbox: %s. "
		 "plt.show() saves figures to %s/outputs/ and returns them as %s. "
		 "Limits: %g s per call by default (timeout_s up to %g), %ld MB of memory; a reply shows at most %ld KiB of output "
		 "(%ld characters per stream), longer output keeps its head and tail and the whole text is saved under %s/.logs/. "
		 "On a timeout, crash or the memory limit the session rolls back to its state before the call. "
		 "The server records every call: verify_outputs with reproduce and notebook turns the session into a notebook and re-runs it.",
		 stack, l->seed, perms, s->ws.display, s->opts.images_link ? "links (their paths)" : "images",
		 l->timeout_s, l->max_timeout_s, l->memory_mb, s->opts.max_reply_kb > 0 ? s->opts.max_reply_kb : (long)REPLY_DEFAULT_KB,
		 l->max_output_chars, s->ws.display);
}

static void exec_row_call(struct server *s, const struct req *q, const cJSON *args, const cJSON *progress_token)
{
	exec_call(s, q, args, progress_token);
}

/* ------------------------------------------------------------ list_artifacts */

static cJSON *list_input(const struct server *s)
{
	cJSON *props, *in = schema(&props);
	cJSON *p = prop(props, "path", "string", "A directory (or file) under the workspace, as Python sees it.");
	cJSON_AddStringToObject(p, "default", s->ws.display);
	prop(props, "pattern", "string", "Glob on the file name, e.g. *.png");
	cJSON *ih = prop(props, "include_hidden", "boolean", "Include dot files and folders (.logs).");
	cJSON_AddBoolToObject(ih, "default", 0);
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	return in;
}

static void list_describe(const struct server *s, char *out, size_t n)
{
	snprintf(out, n, "List the files in the sandbox workspace (%s/): path, size, MIME type, modification time (UTC) and SHA-256, sorted by path. Reads only.",
		 s->ws.display);
}

static cJSON *list_prepare(const struct server *s, const cJSON *args, const struct tool_facts *f)
{
	(void)f;
	return list_artifacts_call(s, args);
}

/* ------------------------------------------------------------ verify_outputs */

static cJSON *verify_input(const struct server *s)
{
	(void)s;
	cJSON *props, *in = schema(&props);
	cJSON *files = prop(props, "files", "array", "Paths under the workspace, or objects {path, kind, min_bytes, required_keys, min_rows}.");
	cJSON *items = cJSON_AddObjectToObject(files, "items");
	cJSON *any = cJSON_AddArrayToObject(items, "anyOf");
	cJSON *str = cJSON_CreateObject();
	cJSON_AddStringToObject(str, "type", "string");
	cJSON_AddItemToArray(any, str);
	cJSON *obj = cJSON_CreateObject();
	cJSON_AddStringToObject(obj, "type", "object");
	cJSON *oprops = cJSON_AddObjectToObject(obj, "properties");
	prop(oprops, "path", "string", "file path");
	cJSON *kind = prop(oprops, "kind", "string", "defaults from the extension");
	const char *const kinds[] = { "png", "jpeg", "svg", "csv", "json", "text", "any" };
	cJSON_AddItemToObject(kind, "enum", cJSON_CreateStringArray(kinds, 7));
	prop(oprops, "min_bytes", "integer", "default 1");
	cJSON *rk = prop(oprops, "required_keys", "array", "json: keys the top-level object must have");
	cJSON *rki = cJSON_AddObjectToObject(rk, "items");
	cJSON_AddStringToObject(rki, "type", "string");
	prop(oprops, "min_rows", "integer", "csv: data rows after the header");
	required(obj, "path");
	cJSON_AddItemToArray(any, obj);
	cJSON_AddNumberToObject(files, "minItems", 1);
	prop(props, "session", "string",
	     "Session whose last execution must have succeeded. Without it: \"default\" when it ran code, else the session whose call ended last "
	     "(the result names the session it looked at); also the session of provenance, notebook and reproduce.");
	cJSON *rq = prop(props, "require_success", "boolean", "Require exit_code 0 for the session's last execution.");
	cJSON_AddBoolToObject(rq, "default", 1);
	cJSON *ws = prop(props, "write_summary", "boolean", "Write the result to outputs/output_summary.json.");
	cJSON_AddBoolToObject(ws, "default", 1);
	prop(props, "notebook", "string",
	     "Also write the session as a notebook a person can open and re-run: a .ipynb (or .py) path under the workspace, e.g. workspace/outputs/analysis.ipynb.");
	cJSON *rp = prop(props, "reproduce", "boolean",
			 "Run the session's kept cells again in a fresh session on a copy of the project (no network; the originals are never touched) and check that each file comes out byte for byte the same.");
	cJSON_AddBoolToObject(rp, "default", 0);
	required(in, "files");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	return in;
}

static void verify_describe(const struct server *s, char *out, size_t n)
{
	snprintf(out, n,
		 "Quality gate before reporting a task done: checks that each file exists under %s/, is a regular file, is not empty and parses as its kind "
		 "(PNG, JPEG, SVG; CSV: a header row, then rows with as many fields as the header, at least min_rows of them; JSON, with required_keys), "
		 "and that the session's last execution succeeded; each check names the recorded cell that wrote those bytes (provenance). "
		 "Before calling a task done, ask for notebook (the session as a notebook for the user) and reproduce: true (the cells run again must give the same files). "
		 "Writes %s/outputs/output_summary.json. A failed check is a normal result with status \"failed\".",
		 s->ws.display, s->ws.display);
}

/* The session whose last exit verify_outputs checks: the one named, else
 * "default" when it ran code, else the session whose call ended last (an
 * agent that worked in a named session only is not failed for a
 * "default" it never used); and the sessions that ran, for the reason. */
static void verify_before(struct server *s, const cJSON *args, struct tool_facts *f)
{
	struct verify_sessions *v = &f->verify;
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	char latest[72];
	v->n_ran = sup_sessions_ran(s->sup, v->ran, sizeof v->ran, latest, sizeof latest);
	const char *sname = cJSON_IsString(session) ? session->valuestring : "default";
	if (!session_name_valid(sname))
		return;
	v->has_exit = sup_last_exit(s->sup, sname, &v->exit_code);
	if (!cJSON_IsString(session) && !v->has_exit && latest[0]) {
		sname = latest;
		v->has_exit = sup_last_exit(s->sup, sname, &v->exit_code);
	}
	snprintf(v->checked, sizeof v->checked, "%s", sname);
}

static cJSON *verify_prepare(const struct server *s, const cJSON *args, const struct tool_facts *f)
{
	return verify_outputs_call(s, args, &f->verify);
}

/* ------------------------------------------------------------ the table */

static const struct tool tools[TOOL_COUNT] = {
	[TOOL_EXEC] = { .name = "execute_python", .title = "Run Python", .input = exec_input, .describe = exec_describe,
			.output = exec_output_schema, .structured_only = true, .call = exec_row_call },
	[TOOL_LIST] = { .name = "list_artifacts", .title = "List workspace files", .read_only = true, .input = list_input,
			.describe = list_describe, .output = list_artifacts_schema, .prepare = list_prepare },
	[TOOL_VERIFY] = { .name = "verify_outputs", .title = "Verify outputs", .input = verify_input, .describe = verify_describe,
			  .output = verify_outputs_schema, .before = verify_before, .prepare = verify_prepare },
};

const char *tool_name(enum tool_id t)
{
	return tools[t].name;
}

/* "execute_python, list_artifacts, verify_outputs" */
static const char *tool_names(void)
{
	static char names[200];
	if (!names[0])
		for (size_t i = 0, n = 0; i < TOOL_COUNT; i++)
			n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", tools[i].name);
	return names;
}

static const struct tool *tool_find(const char *name)
{
	for (size_t i = 0; i < TOOL_COUNT; i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

/* One entry of tools/list, with only the fields version v defines: a
 * strict client may reject the others, a lax one drops them. */
static cJSON *tool_entry(const struct server *s, const struct tool *t, enum mcp_version v)
{
	char desc[1600];
	t->describe(s, desc, sizeof desc);
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "name", t->name);
	if (v >= MCP_V_STRUCTURED)
		cJSON_AddStringToObject(e, "title", t->title);
	cJSON_AddStringToObject(e, "description", desc);
	cJSON_AddItemToObject(e, "inputSchema", t->input(s));
	if (t->output && v >= MCP_V_STRUCTURED && (!t->structured_only || s->opts.structured_content))
		cJSON_AddItemToObject(e, "outputSchema", t->output());
	if (v >= MCP_V_ANNOTATIONS) {
		/* Clients act on these: Claude Code runs read-only tools in
		 * parallel and allows only them in plan mode; VS Code and Codex
		 * ask before a tool that is not read-only. */
		cJSON *a = cJSON_AddObjectToObject(e, "annotations");
		cJSON_AddStringToObject(a, "title", t->title);
		cJSON_AddBoolToObject(a, "readOnlyHint", t->read_only);
		cJSON_AddBoolToObject(a, "destructiveHint", t->destructive);
		cJSON_AddBoolToObject(a, "idempotentHint", t->read_only);
		/* The code reaches the network only where the policy allows it. */
		cJSON_AddBoolToObject(a, "openWorldHint", t->call && s->policy->net_access);
	}
	return e;
}

cJSON *tools_list(const struct server *s, enum mcp_version v)
{
	cJSON *list = cJSON_CreateArray();
	for (size_t i = 0; i < TOOL_COUNT; i++)
		cJSON_AddItemToArray(list, tool_entry(s, &tools[i], v));
	return list;
}

char *tools_instructions(const struct server *s)
{
	char stack[200], perms[400];
	stack_text(s, stack, sizeof stack);
	permissions_text(s, perms, sizeof perms);
	return xasprintf("A stateful Python interpreter in a sandbox (%s). "
			 "Compute numbers, statistics and charts with %s instead of in your head; state persists per session "
			 "(the session argument names it). Sandbox: %s; inputs can be read from the project or %s/. "
			 "Call %s on the files a task must produce before reporting it done.",
			 stack, tools[TOOL_EXEC].name, perms, s->ws.display, tools[TOOL_VERIFY].name);
}

static void submit_tool(struct server *s, const struct req *q, const struct tool *t, const cJSON *args);

void tools_call(struct server *s, const struct req *q, const cJSON *params)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	char msg[400];
	if (!cJSON_IsString(name)) {
		snprintf(msg, sizeof msg, "tools/call needs params.name: one of %s", tool_names());
		answer_error(s, q, RPC_INVALID_PARAMS, msg, NULL);
		return;
	}
	const struct tool *t = tool_find(name->valuestring);
	if (!t) {
		snprintf(msg, sizeof msg, "unknown tool \"%.100s\": the tools are %s", name->valuestring, tool_names());
		answer_error(s, q, RPC_INVALID_PARAMS, msg, NULL);
		return;
	}
	cJSON *empty = NULL;
	if (!args || cJSON_IsNull(args))
		args = empty = cJSON_CreateObject();
	if (s->opts.refuse_all)
		tool_reply(s, q, tool_text_result(s->opts.refuse_all, true));
	else if (!cJSON_IsObject(args))
		tool_reply(s, q, tool_text_result("\"arguments\" must be an object", true));
	else if (t->call)
		t->call(s, q, args, (cJSON_IsString(token) || cJSON_IsNumber(token)) ? token : NULL);
	else
		submit_tool(s, q, t, args);
	cJSON_Delete(empty);
}

/* ------------------------------------------------------------ off the loop */

/* A request whose reply reads the workspace: prepared on a worker thread,
 * sent from the loop.  The copies of id and params belong to the job. */
struct tool_job {
	struct job j;
	struct server *s;     /* run() reads only s->ws and s->policy, which never change */
	const struct tool *tool; /* a tool call, or NULL: a resources request */
	void (*resource)(const struct server *s, struct reply *out, const cJSON *params);
	cJSON *id, *params;
	struct req q;         /* q.id is id */
	struct tool_facts facts;
	struct reply out;
};

static void tool_job_run(struct job *j)
{
	struct tool_job *t = (struct tool_job *)j;
	if (t->tool)
		t->out.result = t->tool->prepare(t->s, t->params, &t->facts);
	else
		t->resource(t->s, &t->out, t->params);
}

static void tool_job_done(struct job *j, bool abandoned)
{
	struct tool_job *t = (struct tool_job *)j;
	struct server *s = t->s;
	if (abandoned) {
		cJSON_Delete(t->out.result);
		cJSON_Delete(t->out.data);
	} else if (t->out.result && t->tool) {
		tool_reply(s, &t->q, t->out.result);
	} else if (t->out.result) {
		answer(s, &t->q, t->out.result);
	} else {
		answer_error(s, &t->q, t->out.code ? t->out.code : RPC_INTERNAL_ERROR, t->out.msg[0] ? t->out.msg : "out of memory", t->out.data);
	}
	cJSON_Delete(t->id);
	cJSON_Delete(t->params);
	free(t);
	if (!abandoned) {
		s->jobs--;
		reply_call_done(s);
	}
}

static struct tool_job *job_new(struct server *s, const struct req *q, const cJSON *params)
{
	struct tool_job *t = xcalloc(1, sizeof *t);
	t->id = cJSON_Duplicate(q->id, 1);
	t->q = *q;
	t->q.id = t->id;
	t->params = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
	t->s = s;
	t->j.run = tool_job_run;
	t->j.done = tool_job_done;
	return t;
}

static void job_submit(struct server *s, struct tool_job *t)
{
	s->jobs++;
	work_submit(s->work, &t->j);
}

static void submit_tool(struct server *s, const struct req *q, const struct tool *tool, const cJSON *args)
{
	struct tool_job *t = job_new(s, q, args);
	t->tool = tool;
	if (tool->before)
		tool->before(s, args, &t->facts);
	job_submit(s, t);
}

void resources_list(struct server *s, const struct req *q, const cJSON *params)
{
	struct tool_job *t = job_new(s, q, params);
	t->resource = resources_list_run;
	job_submit(s, t);
}

void resources_read(struct server *s, const struct req *q, const cJSON *params)
{
	struct tool_job *t = job_new(s, q, params);
	t->resource = resources_read_run;
	job_submit(s, t);
}
