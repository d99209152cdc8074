/* Fuzz target: one JSON-RPC line through the real dispatcher
 * (server_handle_line in mcp/server.c): parsing, lifecycle, tools/list,
 * tools/call of every tool, resources, logging.  The one stub is the
 * interpreter: the supervisor is disabled, so execute_python answers at
 * once with the reason instead of forking a zygote.  list_artifacts,
 * verify_outputs and resources run for real against a temporary workspace.
 *
 * Checks: whatever the line, the server writes whole lines on stdout, each
 * one JSON-RPC message in valid UTF-8, and never more than one reply per
 * request (a notification gets none). */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../mcp/server.h"
#include "../../supervisor/supervisor.h"
#include "../../common/text.h"
#include "fuzz.h"

static struct server srv;
static int out_r = -1;
static char *buf;
#define BUF_MAX (8u << 20)

static char root[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The scratch project goes when the fuzzer or the replay exits. */
static void remove_root(void)
{
	if (root[0])
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	struct err e = { 0 };
	char tmpl[] = "/tmp/psm-fuzz-dispatch-XXXXXX", ws[128];
	FUZZ_CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
	snprintf(root, sizeof root, "%s", tmpl);
	atexit(remove_root);
	snprintf(ws, sizeof ws, "%s/workspace", root);
	FUZZ_CHECK(policy_builtin(&srv.policy, &e) == 0, "%s", e.msg);
	FUZZ_CHECK(policy_resolve(srv.policy, root, &e) == 0, "%s", e.msg);
	FUZZ_CHECK(ws_open(&srv.ws, root, ws, &e) == 0, "%s", e.msg);
	srv.loop = loop_new();
	srv.sup = server_sup_new(&srv);
	sup_disable(srv.sup, "fuzzing: no interpreter");
	int p[2];
	FUZZ_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
	fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	dup2(p[1], STDOUT_FILENO);
	close(p[1]);
	out_r = p[0];
	buf = malloc(BUF_MAX + 1);
	FUZZ_CHECK(buf != NULL, "malloc");
	/* The workspace has something to list, verify and read. */
	char f[256];
	snprintf(f, sizeof f, "%s/outputs/a.json", ws);
	FILE *fp = fopen(f, "w");
	if (fp) {
		fputs("{\"p95\": 1}", fp);
		fclose(fp);
	}
}

static size_t drain(void)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = read(out_r, buf + n, BUF_MAX - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		FUZZ_CHECK(n < BUF_MAX, "more than 8 MiB of replies to one line");
	}
	buf[n] = 0;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!buf)
		setup();
	if (size > MCP_MAX_LINE || memchr(data, '\n', size))
		return 0; /* the line reader splits at newlines and bounds lines */
	char *line = malloc(size + 1);
	FUZZ_CHECK(line != NULL, "malloc");
	memcpy(line, data, size);
	line[size] = 0;
	server_handle_line(&srv, line, size);
	free(line);

	size_t n = drain();
	FUZZ_CHECK(n == 0 || buf[n - 1] == '\n', "a reply that is not a whole line");
	int replies = 0;
	for (char *p = buf; p < buf + n;) {
		char *nl = memchr(p, '\n', (size_t)(buf + n - p));
		*nl = 0;
		FUZZ_CHECK(utf8_valid((const unsigned char *)p, (size_t)(nl - p)), "a reply that is not UTF-8: %s", p);
		cJSON *m = cJSON_Parse(p);
		FUZZ_CHECK(cJSON_IsObject(m), "a reply that is not a JSON object: %s", p);
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "jsonrpc");
		FUZZ_CHECK(cJSON_IsString(v) && strcmp(v->valuestring, "2.0") == 0, "not JSON-RPC 2.0: %s", p);
		FUZZ_CHECK(cJSON_GetObjectItemCaseSensitive(m, "result") || cJSON_GetObjectItemCaseSensitive(m, "error") ||
			   cJSON_GetObjectItemCaseSensitive(m, "method"), "neither result, error nor notification: %s", p);
		cJSON_Delete(m);
		replies++;
		p = nl + 1;
	}
	FUZZ_CHECK(replies <= 1, "%d replies to one line", replies);
	return 0;
}
