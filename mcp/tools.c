/* The tool catalogue (tools/list), the dispatch of tools/call, and the
 * requests whose replies read the workspace, prepared on a worker thread
 * (docs/TOOLS.md).  Each tool is in a file of its own: exec.c,
 * list_artifacts.c, verify_outputs.c, resources.c. */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"
#include "../rpc/work.h"
#include "../supervisor/supervisor.h"
#include "exec.h"
#include "list_artifacts.h"
#include "offload.h"
#include "reply.h"
#include "resources.h"
#include "schema.h"
#include "verify_outputs.h"

static cJSON *tool(const char *name, const char *title, const char *desc, cJSON *input, bool read_only, bool destructive)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", name);
	cJSON_AddStringToObject(t, "title", title);
	cJSON_AddStringToObject(t, "description", desc);
	cJSON_AddItemToObject(t, "inputSchema", input);
	cJSON *a = cJSON_AddObjectToObject(t, "annotations");
	cJSON_AddStringToObject(a, "title", title);
	cJSON_AddBoolToObject(a, "readOnlyHint", read_only);
	cJSON_AddBoolToObject(a, "destructiveHint", destructive);
	cJSON_AddBoolToObject(a, "idempotentHint", read_only);
	cJSON_AddBoolToObject(a, "openWorldHint", 0);
	return t;
}

/* A client of an older protocol version gets only the fields its version
 * defines: a strict client may reject the others, a lax one drops them. */
static void for_version(const struct server *s, cJSON *tools)
{
	cJSON *t;
	cJSON_ArrayForEach(t, tools)
	{
		if (!reply_version_at_least(s, MCP_V_STRUCTURED)) {
			cJSON_DeleteItemFromObjectCaseSensitive(t, "outputSchema");
			cJSON_DeleteItemFromObjectCaseSensitive(t, "title");
		}
		if (!reply_version_at_least(s, MCP_V_ANNOTATIONS))
			cJSON_DeleteItemFromObjectCaseSensitive(t, "annotations");
	}
}

cJSON *tools_list(const struct server *s)
{
	cJSON *tools = cJSON_CreateArray();
	char desc[1200];
	const struct policy_limits *l = &s->policy->limits;

	cJSON *props, *in = schema(&props);
	prop(props, "code", "string", "Python source. The last expression's value is returned like a notebook's Out[] (end it with ; to hide it).");
	cJSON *sess = prop(props, "session", "string", "Session name; state (variables, imports) persists per session. Default \"default\".");
	cJSON_AddStringToObject(sess, "pattern", "^[A-Za-z0-9_-]{1,64}$");
	cJSON_AddStringToObject(sess, "default", "default");
	cJSON *to = prop(props, "timeout_s", "number", "Wall-clock limit for this call in seconds.");
	cJSON_AddNumberToObject(to, "exclusiveMinimum", 0);
	cJSON_AddNumberToObject(to, "maximum", l->max_timeout_s);
	cJSON *rs = prop(props, "reset", "boolean", "Discard the session's state first.");
	cJSON_AddBoolToObject(rs, "default", 0);
	required(in, "code");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc,
		 "Run Python in a stateful sandboxed interpreter (numpy, pandas, matplotlib preloaded; random and numpy.random seeded with %ld). "
		 "Use it for any arithmetic, statistics, data parsing or chart instead of computing in your head. "
		 "Working directory is the project root (read-only); write files under %s/outputs/. No network, no programs. "
		 "plt.show() saves figures to %s/outputs/ and returns them as %s. Timeout %g s by default (max %g). "
		 "On a timeout or crash the session rolls back to its state before the call.",
		 l->seed, s->ws.display, s->ws.display, s->opts.images_link ? "links (their paths)" : "images",
		 l->timeout_s, l->max_timeout_s);
	cJSON *t = tool("execute_python", "Run Python", desc, in, false, false);
	if (s->opts.structured_content)
		cJSON_AddItemToObject(t, "outputSchema", exec_output_schema());
	cJSON_AddItemToArray(tools, t);

	in = schema(&props);
	cJSON *p = prop(props, "path", "string", "A directory (or file) under the workspace, as Python sees it.");
	cJSON_AddStringToObject(p, "default", s->ws.display);
	prop(props, "pattern", "string", "Glob on the file name, e.g. *.png");
	cJSON *ih = prop(props, "include_hidden", "boolean", "Include dot files and folders (.logs).");
	cJSON_AddBoolToObject(ih, "default", 0);
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc, "List the files in the sandbox workspace (%s/): path, size, MIME type, modification time (UTC) and SHA-256, sorted by path.",
		 s->ws.display);
	t = tool("list_artifacts", "List workspace files", desc, in, true, false);
	cJSON_AddItemToObject(t, "outputSchema", list_artifacts_schema());
	cJSON_AddItemToArray(tools, t);

	in = schema(&props);
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
	cJSON *vs = prop(props, "session", "string", "Session whose last execution must have succeeded.");
	cJSON_AddStringToObject(vs, "default", "default");
	cJSON *rq = prop(props, "require_success", "boolean", "Require exit_code 0 for the session's last execution.");
	cJSON_AddBoolToObject(rq, "default", 1);
	cJSON *ws = prop(props, "write_summary", "boolean", "Write the result to outputs/output_summary.json.");
	cJSON_AddBoolToObject(ws, "default", 1);
	required(in, "files");
	cJSON_AddBoolToObject(in, "additionalProperties", 0);
	snprintf(desc, sizeof desc,
		 "Quality gate before reporting a task done: checks that each file exists under %s/, is a regular file, is not empty and parses as its kind "
		 "(PNG, JPEG, SVG, CSV with even rows, JSON with required keys), and that the session's last execution succeeded. "
		 "Writes %s/outputs/output_summary.json. A failed check is a normal result with status \"failed\".",
		 s->ws.display, s->ws.display);
	t = tool("verify_outputs", "Verify outputs", desc, in, false, false);
	cJSON_AddItemToObject(t, "outputSchema", verify_outputs_schema());
	cJSON_AddItemToArray(tools, t);
	for_version(s, tools);
	return tools;
}

void tools_call(struct server *s, const cJSON *id, const cJSON *params)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	if (!cJSON_IsString(name)) {
		rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name: one of execute_python, list_artifacts, verify_outputs", NULL);
		return;
	}
	cJSON *empty = NULL;
	if (!args || cJSON_IsNull(args)) {
		empty = cJSON_CreateObject();
		args = empty;
	}
	const char *n = name->valuestring;
	bool known = !strcmp(n, "execute_python") || !strcmp(n, "list_artifacts") || !strcmp(n, "verify_outputs");
	if (!known) {
		char msg[300];
		snprintf(msg, sizeof msg, "unknown tool \"%.100s\": the tools are execute_python, list_artifacts, verify_outputs", n);
		rpc_error(id, RPC_INVALID_PARAMS, msg, NULL);
	} else if (!cJSON_IsObject(args)) {
		tool_reply(s, id, tool_text_result("\"arguments\" must be an object", true));
	} else if (!strcmp(n, "execute_python")) {
		exec_call(s, id, args, (cJSON_IsString(token) || cJSON_IsNumber(token)) ? token : NULL);
	} else if (!strcmp(n, "list_artifacts")) {
		list_artifacts_submit(s, id, args);
	} else {
		verify_outputs_submit(s, id, args);
	}
	cJSON_Delete(empty);
}

/* ------------------------------------------------------------ off the loop */

enum tool_kind { T_LIST, T_VERIFY, T_RES_LIST, T_RES_READ };

/* A request whose reply reads the workspace: prepared on a worker thread,
 * sent from the loop.  The copies of id and params belong to the job. */
struct tool_job {
	struct job j;
	struct server *s;     /* run() reads only s->ws, which never changes */
	enum tool_kind kind;
	cJSON *id, *params;
	bool has_exit;        /* verify_outputs: read on the loop beforehand */
	int exit_code;
	struct reply out;
};

static void tool_job_run(struct job *j)
{
	struct tool_job *t = (struct tool_job *)j;
	switch (t->kind) {
	case T_LIST: t->out.result = list_artifacts_call(t->s, t->params); break;
	case T_VERIFY: t->out.result = verify_outputs_call(t->s, t->params, t->has_exit, t->exit_code); break;
	case T_RES_LIST: resources_list_run(t->s, &t->out, t->params); break;
	case T_RES_READ: resources_read_run(t->s, &t->out, t->params); break;
	}
}

static void tool_job_done(struct job *j, bool abandoned)
{
	struct tool_job *t = (struct tool_job *)j;
	struct server *s = t->s;
	if (abandoned) {
		cJSON_Delete(t->out.result);
		cJSON_Delete(t->out.data);
	} else if (t->out.result && (t->kind == T_LIST || t->kind == T_VERIFY)) {
		tool_reply(s, t->id, t->out.result);
	} else if (t->out.result) {
		rpc_result(t->id, t->out.result);
	} else {
		rpc_error(t->id, t->out.code ? t->out.code : RPC_INTERNAL_ERROR, t->out.msg[0] ? t->out.msg : "out of memory", t->out.data);
	}
	cJSON_Delete(t->id);
	cJSON_Delete(t->params);
	free(t);
	if (!abandoned) {
		s->jobs--;
		reply_call_done(s);
	}
}

static void submit_tool(struct server *s, enum tool_kind kind, const cJSON *id, const cJSON *params, bool has_exit, int exit_code)
{
	struct tool_job *t = xcalloc(1, sizeof *t);
	t->id = cJSON_Duplicate(id, 1);
	t->params = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
	t->s = s;
	t->kind = kind;
	t->has_exit = has_exit;
	t->exit_code = exit_code;
	t->j.run = tool_job_run;
	t->j.done = tool_job_done;
	s->jobs++;
	work_submit(s->work, &t->j);
}

void resources_list(struct server *s, const cJSON *id, const cJSON *params)
{
	submit_tool(s, T_RES_LIST, id, params, false, 0);
}

void resources_read(struct server *s, const cJSON *id, const cJSON *params)
{
	submit_tool(s, T_RES_READ, id, params, false, 0);
}

/* The session whose last exit verify_outputs checks, read here on the loop
 * (the supervisor's state is the loop's alone). */
void verify_outputs_submit(struct server *s, const cJSON *id, const cJSON *args)
{
	const cJSON *session = cJSON_GetObjectItemCaseSensitive(args, "session");
	const char *sname = cJSON_IsString(session) ? session->valuestring : "default";
	int exit_code = 0;
	bool has_exit = session_name_valid(sname) && sup_last_exit(s->sup, sname, &exit_code);
	submit_tool(s, T_VERIFY, id, args, has_exit, exit_code);
}

void list_artifacts_submit(struct server *s, const cJSON *id, const cJSON *args)
{
	submit_tool(s, T_LIST, id, args, false, 0);
}
