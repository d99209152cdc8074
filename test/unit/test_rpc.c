/* The JSON-RPC layer without a Python: lines in, reply lines out (stdout is
 * redirected to a pipe).  The live tests drive the whole binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../mcp/server.h"
#include "../../rpc/out.h"
#include "../../rpc/rpc.h"
#include "../../supervisor/supervisor.h"

static struct server srv;
static int out_r = -1, out_w = -1, saved_stdout = -1;
static char tmpdir[] = "/tmp/psm-rpc-XXXXXX";

static int setup(void **state)
{
	struct err e = { 0 };
	int p[2];
	assert_true(mkdtemp(tmpdir) != NULL);
	assert_int_equal(policy_builtin(&srv.policy, &e), 0);
	assert_int_equal(policy_resolve(srv.policy, tmpdir, &e), 0);
	char ws[256];
	snprintf(ws, sizeof ws, "%s/workspace", tmpdir);
	assert_int_equal(ws_open(&srv.ws, tmpdir, ws, &e), 0);
	srv.loop = loop_new();
	srv.sup = server_sup_new(&srv); /* never started: no zygote in unit tests */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	saved_stdout = dup(STDOUT_FILENO);
	out_w = p[1];
	out_r = p[0];
	fcntl(out_r, F_SETFL, O_NONBLOCK);
	return 0;
}

static int teardown(void **state)
{
	close(out_w);
	sup_free(srv.sup);
	loop_free(srv.loop);
	ws_close(&srv.ws);
	policy_free(srv.policy);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Sends one line, returns the reply (NULL when there was none). */
static cJSON *roundtrip(const char *line)
{
	char *copy = strdup(line);
	/* Only the server's replies go to the pipe; cmocka prints to stdout too. */
	fflush(stdout);
	dup2(out_w, STDOUT_FILENO);
	server_handle_line(&srv, copy, strlen(copy));
	dup2(saved_stdout, STDOUT_FILENO);
	free(copy);
	static char buf[1 << 20];
	ssize_t n = read(out_r, buf, sizeof buf - 1);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	assert_int_equal(buf[n - 1], '\n');
	assert_null(memchr(buf, '\n', (size_t)n - 1)); /* exactly one line */
	cJSON *j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "jsonrpc")->valuestring, "2.0");
	return j;
}

static int error_code(const cJSON *j)
{
	const cJSON *e = cJSON_GetObjectItem(j, "error");
	assert_non_null(e);
	return cJSON_GetObjectItem(e, "code")->valueint;
}

static void test_versions(void **state)
{
	const char *v[] = { "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25" };
	char line[300];
	for (size_t i = 0; i < 4; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\"}}", i, v[i]);
		cJSON *r = roundtrip(line);
		assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "protocolVersion")->valuestring, v[i]);
		cJSON_Delete(r);
	}
	cJSON *r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"1999-01-01\"}}");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "protocolVersion")->valuestring, "2025-11-25");
	cJSON_Delete(r);
}

static void test_errors(void **state)
{
	cJSON *r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":");
	assert_int_equal(error_code(r), -32700);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "id")));
	cJSON_Delete(r);

	r = roundtrip("[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]");
	assert_int_equal(error_code(r), -32600);
	cJSON_Delete(r);

	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}");
	assert_int_equal(error_code(r), -32602);
	cJSON_Delete(r);

	r = roundtrip("{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"ping\"}");
	assert_int_equal(error_code(r), -32600);
	cJSON_Delete(r);

	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"} trailing");
	assert_int_equal(error_code(r), -32700);
	cJSON_Delete(r);

	/* Notifications never get a reply, known or not, well-formed or not. */
	assert_null(roundtrip("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
	assert_null(roundtrip("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}"));
	assert_null(roundtrip("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":77}}"));
	assert_null(roundtrip("   "));
}

static void test_tools_list(void **state)
{
	cJSON *r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\"}");
	const cJSON *tools = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "tools");
	assert_int_equal(cJSON_GetArraySize(tools), 3);
	const char *names[] = { "execute_python", "list_artifacts", "verify_outputs" };
	for (int i = 0; i < 3; i++) {
		const cJSON *t = cJSON_GetArrayItem(tools, i);
		assert_string_equal(cJSON_GetObjectItem(t, "name")->valuestring, names[i]);
		assert_non_null(cJSON_GetObjectItem(t, "inputSchema"));
	}
	/* No outputSchema for execute_python without --structured-content. */
	assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(tools, 0), "outputSchema"));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(tools, 1), "annotations"), "readOnlyHint")));
	cJSON_Delete(r);
}

static void test_input_errors(void **state)
{
	/* Wrong types and paths outside the workspace are results, not
	 * protocol errors, and say what to change. */
	const char *lines[] = {
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\",\"arguments\":{\"code\":5}}}",
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\",\"arguments\":{\"code\":\"1\",\"session\":\"../x\"}}}",
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_python\",\"arguments\":{\"code\":\"1\",\"timeout_s\":100000}}}",
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"list_artifacts\",\"arguments\":{\"path\":\"/etc\"}}}",
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"verify_outputs\",\"arguments\":{\"files\":[]}}}",
	};
	const char *expect[] = { "string", "A-Za-z0-9_-", "max_timeout_s", "workspace", "files" };
	for (size_t i = 0; i < 5; i++) {
		cJSON *r = roundtrip(lines[i]);
		const cJSON *res = cJSON_GetObjectItem(r, "result");
		assert_non_null(res);
		assert_true(cJSON_IsTrue(cJSON_GetObjectItem(res, "isError")));
		const char *text = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "content"), 0), "text")->valuestring;
		assert_non_null(strstr(text, expect[i]));
		cJSON_Delete(r);
	}
}

static void test_verify_and_resources(void **state)
{
	char path[300];
	snprintf(path, sizeof path, "%s/workspace/outputs/t.json", tmpdir);
	FILE *f = fopen(path, "w");
	fputs("{\"p95\": 1}", f);
	fclose(f);
	cJSON *r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"verify_outputs\",\"arguments\":"
			     "{\"files\":[{\"path\":\"workspace/outputs/t.json\",\"required_keys\":[\"p95\"]},\"workspace/nope.png\"],\"require_success\":false}}}");
	const cJSON *sc = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "structuredContent");
	assert_string_equal(cJSON_GetObjectItem(sc, "status")->valuestring, "failed");
	assert_int_equal(cJSON_GetObjectItem(sc, "failed")->valueint, 1);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(sc, "checks"), 0), "ok")));
	assert_string_equal(cJSON_GetObjectItem(sc, "summary_path")->valuestring, "workspace/outputs/output_summary.json");
	cJSON_Delete(r);

	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/read\",\"params\":{\"uri\":\"file:///etc/passwd\"}}");
	assert_int_equal(error_code(r), -32002);
	cJSON_Delete(r);

	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}");
	const cJSON *list = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "resources");
	assert_true(cJSON_GetArraySize(list) >= 2); /* t.json and output_summary.json */
	const char *uri = cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "uri")->valuestring;
	assert_memory_equal(uri, "file:///", 8);
	char line[1200];
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":{\"uri\":\"%s\"}}", uri);
	cJSON_Delete(r);
	r = roundtrip(line);
	assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "contents"));
	cJSON_Delete(r);
}

#define META "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}"

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = k ? cJSON_GetObjectItem(o, k) : o;
	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

static const cJSON *result_of(const cJSON *r)
{
	const cJSON *res = cJSON_GetObjectItem(r, "result");
	assert_non_null(res);
	return res;
}

/* A 2026-07-28 result: resultType, the server's identity in _meta. */
static void assert_modern_result(const cJSON *res)
{
	assert_string_equal(str(res, "resultType"), "complete");
	const cJSON *info = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "_meta"), "io.modelcontextprotocol/serverInfo");
	assert_string_equal(str(info, "name"), "python-sandbox-mcp");
	assert_non_null(cJSON_GetObjectItem(info, "version"));
}

/* The 2026-07-28 era: chosen by each request's _meta, whatever initialize
 * chose before (test_versions ran it). */
static void test_modern(void **state)
{
	cJSON *r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{" META "}}");
	const cJSON *res = result_of(r);
	const cJSON *sv = cJSON_GetObjectItem(res, "supportedVersions");
	assert_int_equal(cJSON_GetArraySize(sv), 5);
	assert_string_equal(str(cJSON_GetArrayItem(sv, 0), NULL), "2026-07-28");
	assert_string_equal(str(cJSON_GetArrayItem(sv, 4), NULL), "2024-11-05");
	assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "capabilities"), "tools"));
	assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "capabilities"), "logging"));
	assert_non_null(strstr(str(res, "instructions"), "workspace/outputs/"));
	assert_modern_result(res);
	cJSON_Delete(r);

	/* Lists are cacheable results: ttlMs and cacheScope. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" META "}}");
	res = result_of(r);
	assert_modern_result(res);
	assert_true(cJSON_GetObjectItem(res, "ttlMs")->valuedouble > 0);
	assert_string_equal(str(res, "cacheScope"), "private");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(res, "tools")), 3);
	cJSON_Delete(r);
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\",\"params\":{" META "}}");
	res = result_of(r);
	assert_modern_result(res);
	assert_int_equal(cJSON_GetObjectItem(res, "ttlMs")->valueint, 0);
	cJSON_Delete(r);

	/* A tool result: resultType, no cache hint. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"list_artifacts\",\"arguments\":{}," META "}}");
	res = result_of(r);
	assert_modern_result(res);
	assert_null(cJSON_GetObjectItem(res, "ttlMs"));
	cJSON_Delete(r);

	/* A version this server does not know: -32022 naming every version
	 * it speaks. */
	const char *bad[] = { "2099-01-01", "2026-07-29" };
	for (size_t i = 0; i < 2; i++) {
		char line[400];
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"_meta\":"
			 "{\"io.modelcontextprotocol/protocolVersion\":\"%s\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}", bad[i]);
		r = roundtrip(line);
		assert_int_equal(error_code(r), -32022);
		const cJSON *data = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"), "data");
		assert_string_equal(str(data, "requested"), bad[i]);
		assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(data, "supported"), 0), NULL), "2026-07-28");
		cJSON_Delete(r);
	}
	/* A legacy version named in _meta is followed, for that request:
	 * 2024-11-05 has no tool annotations, and no resultType. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2024-11-05\"}}}");
	res = result_of(r);
	assert_null(cJSON_GetObjectItem(res, "resultType"));
	assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "tools"), 0), "annotations"));
	cJSON_Delete(r);
	/* The client's capabilities are required beside a modern version. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
	assert_int_equal(error_code(r), -32602);
	assert_non_null(strstr(str(cJSON_GetObjectItem(r, "error"), "message"), "clientCapabilities"));
	cJSON_Delete(r);
	/* What 2026-07-28 removed is not found there, and says why. */
	const char *gone[] = { "ping", "logging/setLevel", "initialize" };
	for (size_t i = 0; i < 3; i++) {
		char line[400];
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":{\"level\":\"info\"," META "}}", gone[i]);
		r = roundtrip(line);
		assert_int_equal(error_code(r), -32601);
		assert_non_null(strstr(str(cJSON_GetObjectItem(r, "error"), "message"), "2026-07-28"));
		cJSON_Delete(r);
	}
	/* Resource not found is -32602 in this era, -32002 in the legacy one. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/read\",\"params\":{\"uri\":\"file:///etc/passwd\"," META "}}");
	assert_int_equal(error_code(r), -32602);
	cJSON_Delete(r);
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{\"uri\":\"file:///etc/passwd\"}}");
	assert_int_equal(error_code(r), -32002);
	cJSON_Delete(r);
	/* A legacy request after modern ones: no modern fields. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}");
	res = result_of(r);
	assert_null(cJSON_GetObjectItem(res, "resultType"));
	assert_null(cJSON_GetObjectItem(res, "ttlMs"));
	cJSON_Delete(r);
	/* initialize never answers 2026-07-28: that era has no handshake. */
	r = roundtrip("{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2026-07-28\"}}");
	assert_string_equal(str(result_of(r), "protocolVersion"), "2025-11-25");
	cJSON_Delete(r);
}

/* The id of a request from the start of a line too long to read whole. */
static void expect_prefix_id(const char *line, size_t n, const char *want)
{
	cJSON *id = rpc_id_from_prefix(line, n ? n : strlen(line));
	char *got = id ? cJSON_PrintUnformatted(id) : NULL;
	if (want)
		assert_string_equal(got ? got : "(none)", want);
	else
		assert_null(got);
	free(got);
	cJSON_Delete(id);
}

static void test_prefix_id(void **state)
{
	(void)state;
	expect_prefix_id("{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"x\",\"params\":{\"pad\":\"xxxx", 0, "21");
	expect_prefix_id(" { \"method\" : \"ping\", \"params\": {\"a\": [1, {\"id\": 5}], \"s\": \"}\\\"\"}, \"id\" : \"big \\\"one\\\"\" ,\"x", 0, "\"big \\\"one\\\"\"");
	expect_prefix_id("{\"method\":\"ping\",\"params\":{\"pad\":\"xxxx", 0, NULL);
	expect_prefix_id("{\"id\":12", 0, NULL);          /* cut inside the number */
	expect_prefix_id("{\"id\":\"abc", 0, NULL);       /* cut inside the string */
	expect_prefix_id("{\"id\":[1],\"x\":", 0, NULL);  /* not a number or a string */
	expect_prefix_id("[{\"id\":1}]", 0, NULL);
	expect_prefix_id("{\"id\":7}", 3, NULL);
}

/* ------------------------------------------------------------ the output queue
 * The real writer thread on a real pipe, the loop run for real: a reader
 * that reads nothing, slowly, or goes away. */

static struct {
	struct loop *l;
	int n;
	char why[256];
	double at;
} cutrec;

static void on_cut(void *arg, const char *why)
{
	cutrec.n++;
	cutrec.at = loop_now_ms();
	snprintf(cutrec.why, sizeof cutrec.why, "%s", why);
	loop_stop(cutrec.l);
}

static void stop_loop(void *arg)
{
	loop_stop(arg);
}

static struct loop *out_begin(int fd, size_t cap, double stall_ms)
{
	memset(&cutrec, 0, sizeof cutrec);
	cutrec.l = loop_new();
	struct out_config c = { .loop = cutrec.l, .fd = fd, .cap = cap, .stall_ms = stall_ms, .cut = on_cut };
	assert_true(out_start(&c));
	return cutrec.l;
}

/* Line i: a JSON object padded to a size that varies from 10 bytes to
 * 200 KB (more than a pipe holds, more than one write's chunk). */
static size_t make_line(char *buf, int i)
{
	size_t pad = ((size_t)i * 7919) % 200000;
	int n = sprintf(buf, "{\"n\":%d,\"pad\":\"", i);
	memset(buf + n, 'a' + i % 26, pad);
	memcpy(buf + n + pad, "\"}", 2);
	return (size_t)n + pad + 2;
}

struct reader {
	int fd;
	size_t want;       /* stop after this many bytes (0: until EOF) */
	useconds_t pause;  /* between reads */
	size_t chunk;
	char *got;
	size_t len;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	size_t cap = 1 << 20;
	r->got = malloc(cap);
	for (;;) {
		if (r->want && r->len >= r->want)
			break;
		if (r->len + r->chunk > cap)
			r->got = realloc(r->got, cap *= 2);
		ssize_t n = read(r->fd, r->got + r->len, r->chunk);
		if (n <= 0)
			break;
		r->len += (size_t)n;
		if (r->pause)
			usleep(r->pause);
	}
	return NULL;
}

/* Lines queued to a client that reads nothing: out_line returns at once,
 * the loop's timers fire meanwhile; once read, every line is there, whole
 * and in order. */
static void test_out_unread_then_read(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct loop *l = out_begin(p[1], 0, 60000);
	char *line = malloc(300000), *want = malloc(64u << 20);
	size_t wlen = 0;
	for (int i = 0; i < 150; i++) {
		size_t n = make_line(line, i);
		out_line(line, n);
		memcpy(want + wlen, line, n);
		want[wlen + n] = '\n';
		wlen += n + 1;
	}
	/* More waits than a pipe holds: the writer is blocked on the reader. */
	usleep(100000);
	assert_true(out_waiting() > wlen - (1u << 20));
	double t0 = loop_now_ms();
	loop_timer(l, 50, stop_loop, l);
	loop_run(l);
	assert_true(loop_now_ms() - t0 >= 50);
	assert_int_equal(cutrec.n, 0);

	struct reader r = { .fd = p[0], .want = wlen, .chunk = 1 << 16 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, read_all, &r), 0);
	assert_true(out_drain(30000));
	pthread_join(th, NULL);
	assert_int_equal(r.len, wlen);
	assert_memory_equal(r.got, want, wlen);
	assert_int_equal(out_waiting(), 0);
	out_stop();
	loop_free(l);
	free(r.got);
	free(line);
	free(want);
	close(p[0]);
	close(p[1]);
}

/* Stops the writer and frees what a test of the queue used. */
static void out_end(struct loop *l, int p[2], char *got, char *line)
{
	out_stop();
	loop_free(l);
	free(got);
	free(line);
	close(p[0]);
	close(p[1]);
}

/* A line with nothing queued before it is written by out_line itself, as
 * far as the stream takes it without waiting: the rest waits for the
 * writer, and comes after, whole and in order. */
static void test_out_at_once(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int room = fcntl(p[1], F_GETPIPE_SZ);
	assert_true(room > 0);
	struct loop *l = out_begin(p[1], 0, 60000);
	/* Fits: in the pipe when out_line returns, nothing waits. */
	out_line("{\"a\":1}", 7);
	assert_int_equal(out_waiting(), 0);
	char got[16];
	assert_int_equal(read(p[0], got, sizeof got), 8);
	assert_memory_equal(got, "{\"a\":1}\n", 8);
	/* Longer than the pipe: what it took at once is written, the rest
	 * waits (the writer can add nothing while the pipe is full). */
	char *line = malloc(300000);
	size_t n = make_line(line, 37); /* 93,003 bytes of padding: more than a pipe holds */
	assert_true(n + 1 > (size_t)room);
	out_line(line, n);
	assert_int_equal(out_waiting(), n + 1 - (size_t)room);
	out_line("{\"b\":2}", 7); /* after it, never before */
	struct reader r = { .fd = p[0], .want = n + 9, .chunk = 1 << 16 };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, read_all, &r), 0);
	assert_true(out_drain(30000));
	pthread_join(th, NULL);
	assert_int_equal(r.len, n + 9);
	assert_memory_equal(r.got, line, n);
	assert_memory_equal(r.got + n, "\n{\"b\":2}\n", 9);
	out_end(l, p, r.got, line);
}

/* More than cap bytes unread: cut off, from the loop (never inside
 * out_line), what waits dropped, later lines dropped. */
static void test_out_cap(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct loop *l = out_begin(p[1], 1u << 20, 60000);
	char *line = malloc(300000);
	size_t n = make_line(line, 25); /* 197 KB */
	for (int i = 0; i < 12; i++)
		out_line(line, n);
	assert_int_equal(cutrec.n, 0); /* not from inside out_line */
	assert_int_equal(out_waiting(), 0);
	out_line(line, n); /* dropped */
	assert_int_equal(out_waiting(), 0);
	loop_timer(l, 10000, stop_loop, l);
	loop_run(l);
	assert_int_equal(cutrec.n, 1);
	assert_non_null(strstr(cutrec.why, "the client has left 1 MiB of replies unread (at most 1 MiB may wait)"));
	assert_false(out_drain(1000));
	close(p[0]); /* the writer's blocked write fails: it can be joined */
	out_stop();
	loop_free(l);
	free(line);
	close(p[1]);
}

/* Nothing read for stall_ms while lines wait: cut off by the loop's check;
 * and out_drain (the exit's wait) gives up after its own bound. */
static void test_out_stall(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct loop *l = out_begin(p[1], 0, 200);
	char *line = malloc(300000);
	size_t n = make_line(line, 25);
	double t0 = loop_now_ms();
	out_line(line, n);
	loop_timer(l, 10000, stop_loop, l);
	loop_run(l);
	assert_int_equal(cutrec.n, 1);
	assert_true(cutrec.at - t0 >= 200);
	assert_non_null(strstr(cutrec.why, "the client has read nothing of its replies for 0.2 s"));
	assert_int_equal(out_waiting(), 0);
	/* The writer is still blocked on the pipe nobody reads: out_stop
	 * cancels that write and joins it (out_start works again below). */
	t0 = loop_now_ms();
	out_stop();
	assert_true(loop_now_ms() - t0 < 10000);
	loop_free(l);
	close(p[0]);

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	l = out_begin(p[1], 0, 60000);
	out_line(line, n);
	t0 = loop_now_ms();
	assert_false(out_drain(300));
	assert_true(loop_now_ms() - t0 >= 300);
	assert_int_equal(cutrec.n, 0);
	loop_timer(l, 10000, stop_loop, l);
	loop_run(l); /* the cut is told when the loop runs again */
	assert_int_equal(cutrec.n, 1);
	close(p[0]);
	out_stop();
	loop_free(l);
	free(line);
	close(p[1]);
}

static void all_written(void *arg)
{
	struct loop *l = arg;
	if (out_waiting() == 0)
		loop_stop(l);
	else
		loop_timer(l, 20, all_written, l);
}

/* A client that reads slowly but reads is never cut off, however long the
 * whole takes: each chunk written is progress. */
static void test_out_slow_reader(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	struct loop *l = out_begin(p[1], 0, 1000);
	char *line = malloc(300000);
	size_t n = make_line(line, 25), total = 0;
	for (int i = 0; i < 20; i++) {
		out_line(line, n);
		total += n + 1;
	}
	struct reader r = { .fd = p[0], .want = total, .chunk = 1 << 16, .pause = 50000 };
	pthread_t th;
	double t0 = loop_now_ms();
	assert_int_equal(pthread_create(&th, NULL, read_all, &r), 0);
	loop_timer(l, 20, all_written, l);
	loop_run(l);
	pthread_join(th, NULL);
	assert_true(loop_now_ms() - t0 > 2000); /* longer than the stall bound */
	assert_int_equal(cutrec.n, 0);
	assert_int_equal(r.len, total);
	out_end(l, p, r.got, line);
}

/* A client whose stdout is closed: lines are dropped, nothing is cut off
 * (end of input follows), the writer stops. */
static void test_out_gone(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	struct loop *l = out_begin(p[1], 0, 60000);
	out_line("{\"a\":1}", 7);
	assert_false(out_drain(10000));
	out_line("{\"a\":2}", 7);
	assert_int_equal(out_waiting(), 0);
	assert_int_equal(cutrec.n, 0);
	out_stop();
	loop_free(l);
	close(p[1]);
}

int main(void)
{
	/* A closed pipe is EPIPE, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_prefix_id),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_tools_list),
		cmocka_unit_test(test_input_errors),
		cmocka_unit_test(test_verify_and_resources),
		cmocka_unit_test(test_modern),
		cmocka_unit_test(test_out_unread_then_read),
		cmocka_unit_test(test_out_at_once),
		cmocka_unit_test(test_out_cap),
		cmocka_unit_test(test_out_stall),
		cmocka_unit_test(test_out_slow_reader),
		cmocka_unit_test(test_out_gone),
		cmocka_unit_test(test_versions), /* lines written at once again after out_stop */
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
