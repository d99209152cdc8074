/* Unit tests of policy/policy.c against the fixtures in fixtures/policy/.
 * Run from the repository root: build/test/test_policy. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../policy/policy.h"

#define FIX "fixtures/policy/"

static struct policy *load_ok(const char *path)
{
	struct err e = { 0 };
	struct policy *p = NULL;
	int rc = policy_load_file(path, &p, &e);
	if (rc != 0)
		print_error("%s: unexpected error: %s\n", path, e.msg);
	assert_int_equal(rc, 0);
	assert_non_null(p);
	return p;
}

static void assert_defaults(const struct policy *p)
{
	assert_int_equal(p->fs_read, FS_READ_ROOT);
	assert_int_equal(p->fs_write, FS_WRITE_WORKSPACE);
	assert_int_equal(p->n_fs_read_paths, 0);
	assert_int_equal(p->n_fs_write_paths, 0);
	assert_false(p->shell_exec);
	assert_false(p->net_access);
	assert_true(p->limits.timeout_s == 30);
	assert_true(p->limits.max_timeout_s == 600);
	assert_int_equal(p->limits.memory_mb, 2048);
	assert_int_equal(p->limits.max_output_chars, 8000);
	assert_int_equal(p->limits.max_processes, 64);
	assert_int_equal(p->limits.max_file_mb, 512);
	assert_int_equal(p->limits.max_sessions, 8);
	assert_int_equal(p->limits.max_workspace_mb, 4096);
	assert_true(p->limits.checkpoint);
	assert_int_equal(p->limits.seed, 0);
	assert_true(p->limits.persist);
	assert_int_equal(p->limits.persist_mb, 1024);
}

/* ---- valid files ----------------------------------------------------- */

static void test_project_skill_is_defaults(void **state)
{
	struct policy *p = load_ok("SKILL.md");
	assert_defaults(p);
	assert_string_equal(p->source, "SKILL.md");
	assert_string_equal(p->name, "code-interpreter-sandbox-executor");
	assert_non_null(p->description);
	assert_non_null(strstr(p->description, "stateful Python REPL"));
	policy_free(p);
}

static void test_builtin(void **state)
{
	struct err e = { 0 };
	struct policy *p = NULL, *f;
	assert_int_equal(policy_builtin(&p, &e), 0);
	assert_defaults(p);
	assert_string_equal(p->source, "<built-in SKILL.md>");
	f = load_ok("SKILL.md");
	assert_string_equal(p->name, f->name);
	assert_string_equal(p->description, f->description);
	assert_memory_equal(&p->limits, &f->limits, sizeof p->limits);
	policy_free(f);
	policy_free(p);
}

static void test_minimal_is_defaults(void **state)
{
	struct policy *p = load_ok(FIX "valid_minimal.md");
	assert_defaults(p);
	assert_string_equal(p->name, "minimal");
	policy_free(p);
}

static void test_lists_and_the_other_way(void **state)
{
	struct policy *p = load_ok(FIX "valid_lists.md");
	assert_int_equal(p->fs_read, FS_READ_LIST);
	assert_int_equal(p->n_fs_read_paths, 2);
	assert_string_equal(p->fs_read_paths[0], "data");
	assert_string_equal(p->fs_read_paths[1], "/usr/share/zoneinfo");
	assert_int_equal(p->fs_write, FS_WRITE_LIST);
	assert_int_equal(p->n_fs_write_paths, 2);
	assert_string_equal(p->fs_write_paths[0], "workspace/outputs");
	assert_string_equal(p->fs_write_paths[1], "build out");
	assert_true(p->shell_exec);
	assert_true(p->net_access);
	assert_int_equal(p->n_fs_read_deny, 2);
	assert_string_equal(p->fs_read_deny[1], "db/*.sqlite");
	assert_true(p->limits.timeout_s == 2.5);
	assert_true(p->limits.max_timeout_s == 60);
	assert_int_equal(p->limits.memory_mb, 512);
	assert_int_equal(p->limits.max_output_chars, 200);
	assert_int_equal(p->limits.max_processes, 4);
	assert_int_equal(p->limits.max_file_mb, 1);
	assert_int_equal(p->limits.max_sessions, 256);
	assert_int_equal(p->limits.max_workspace_mb, 10);
	assert_false(p->limits.checkpoint);
	assert_int_equal(p->limits.seed, 4294967295L);
	assert_false(p->limits.persist);
	assert_int_equal(p->limits.persist_mb, 1);
	policy_free(p);
}

/* The secret patterns: names at any depth, built-in paths at any depth,
 * the policy's own paths anchored at ROOT. */
static void test_secrets_match(void **state)
{
	struct policy *p = load_ok(FIX "valid_lists.md");
	static const char *const hidden[] = {
		".ssh", "a/b/.ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", "x/.config/gcloud",
		".kube", ".docker/config.json", "y/.docker/config.json", ".netrc", ".git-credentials",
		".npmrc", ".pypirc", ".env", "app/.env", ".env.local", "tls/a.pem", "k/.hidden.key",
		"id_rsa", "keys/id_rsa.pub", "id_ed25519", "private", "data/private", "db/app.sqlite",
	};
	static const char *const shown[] = {
		"ssh", ".config", ".config/other", ".docker", ".docker/other.json", "env", "x.env",
		"pem", "a.pem.txt", "privates", "sub/db/app.sqlite", "db/app.sqlite-journal",
		"keys", "my_id_rsa",
	};
	for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
		if (!secrets_match(p, hidden[i]))
			fail_msg("%s should be hidden", hidden[i]);
	for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
		if (secrets_match(p, shown[i]))
			fail_msg("%s should be readable", shown[i]);
	assert_true(secrets_match(NULL, ".env"));
	policy_free(p);
}

static void test_false_permissions(void **state)
{
	struct policy *p = load_ok(FIX "valid_false.md");
	assert_int_equal(p->fs_read, FS_READ_WORKSPACE);
	assert_int_equal(p->fs_write, FS_WRITE_NONE);
	assert_false(p->shell_exec);
	assert_false(p->net_access);
	policy_free(p);
}

static void test_empty_lists_mean_false(void **state)
{
	struct policy *p = load_ok(FIX "valid_empty_lists.md");
	assert_int_equal(p->fs_read, FS_READ_WORKSPACE);
	assert_int_equal(p->fs_write, FS_WRITE_NONE);
	assert_null(p->fs_read_paths);
	assert_null(p->fs_write_paths);
	policy_free(p);
}

static void test_crlf(void **state)
{
	struct policy *p = load_ok(FIX "valid_crlf.md");
	assert_string_equal(p->name, "crlf");
	assert_true(p->net_access);
	assert_true(p->limits.timeout_s == 10);
	policy_free(p);
}

static void test_parse_from_memory(void **state)
{
	static const char text[] = "\xef\xbb\xbf---\nname: mem\npermissions: {shell_exec: true}\n---";
	struct err e = { 0 };
	struct policy *p = NULL;
	assert_int_equal(policy_parse(text, sizeof text - 1, "mem.md", &p, &e), 0);
	assert_true(p->shell_exec);
	assert_string_equal(p->source, "mem.md");
	policy_free(p);
}

/* ---- errors: every fixture with its exact message -------------------- */

struct err_case {
	const char *file;
	const char *msg;
};

static const struct err_case err_cases[] = {
	{ "err_no_frontmatter.md",
	  ":1: no YAML frontmatter: the file must begin with a line \"---\", then name:, description:, permissions: and limits:, then a line \"---\"" },
	{ "err_unterminated.md",
	  ":1: the frontmatter that begins on line 1 is never closed; add a line \"---\" after its last key" },
	{ "err_yaml_syntax.md",
	  ":6: YAML syntax error: mapping values are not allowed in this context; check the indentation, colons and quotes" },
	{ "err_bad_utf8.md",
	  ":3: YAML error: invalid leading UTF-8 octet; the frontmatter must be UTF-8 text without control characters" },
	{ "err_empty.md",
	  ":2: the frontmatter is empty; write at least name: and description: (permissions and limits have defaults)" },
	{ "err_not_mapping.md",
	  ":2: the frontmatter must be a mapping of keys (name, description, metadata, license, version, allowed-tools, compatibility, triggers, permissions, limits), got a list" },
	{ "err_two_documents.md",
	  ":4: a second YAML document starts here; the frontmatter must be one mapping, so remove this document marker and what follows it" },
	{ "err_unknown_top.md",
	  ":4: permisions: unknown top-level key; accepted keys: name, description, metadata, license, version, allowed-tools, compatibility, triggers, permissions, limits" },
	{ "err_top_permission.md",
	  ":6: net_access: unknown top-level key; it is a permission: indent it under permissions:" },
	{ "err_key_escape.md",
	  ":4: \\x1b[31mred\\x0afake: line: unknown top-level key; accepted keys: name, description, metadata, license, version, allowed-tools, compatibility, triggers, permissions, limits" },
	{ "err_unknown_permission.md",
	  ":6: permissions.network: unknown key; accepted keys: fs_read, fs_write, shell_exec, net_access, fs_read_deny" },
	{ "err_read_deny_type.md",
	  ":6: permissions.fs_read_deny: expected a list of globs relative to the project root (e.g. [\"secrets/*\", \"*.sqlite\"]), got \"*.pem\" (a quoted string)" },
	{ "err_read_deny_absolute.md",
	  ":8: permissions.fs_read_deny[1]: \"/etc/secret\" is absolute; write a glob relative to the project root, e.g. \"etc/secret\"" },
	{ "err_read_deny_dotdot.md",
	  ":5: permissions.fs_read_deny[1]: \"../up/*\" leaves the project root; outside it nothing is readable anyway" },
	{ "err_read_deny_entry.md",
	  ":6: permissions.fs_read_deny[0]: expected a path, got true; write a path as a string" },
	{ "err_unknown_limit.md",
	  ":6: limits.cpu_s: unknown key; accepted keys: timeout_s, max_timeout_s, memory_mb, max_output_chars, max_processes, max_file_mb, max_sessions, max_workspace_mb, checkpoint, seed, persist, persist_mb" },
	{ "err_permissions_empty.md",
	  ":4: permissions: expected a mapping of fs_read, fs_write, shell_exec, net_access, fs_read_deny, got an empty value; remove the key to use the defaults" },
	{ "err_duplicate.md",
	  ":7: permissions.net_access: duplicate key (first on line 5); write each key once" },
	{ "err_fs_read_type.md",
	  ":5: permissions.fs_read: expected true (the project, read-only), false (the workspace only) or a list of paths, got \"yes please\" (a quoted string)" },
	{ "err_fs_read_entry.md",
	  ":7: permissions.fs_read[1]: expected a path, got true; write a path as a string" },
	{ "err_fs_read_root.md",
	  ":5: permissions.fs_read[1]: \"//.\" is the whole file system; list the directories that are needed" },
	{ "err_fs_write_type.md",
	  ":8: permissions.fs_write: expected \"workspace\", false or a list of directories inside the project, got 42" },
	{ "err_fs_write_true.md",
	  ":5: permissions.fs_write: true is not accepted; write \"workspace\", false, or a list of directories inside the project" },
	{ "err_fs_write_null.md",
	  ":5: permissions.fs_write: expected \"workspace\", false or a list of directories inside the project, got an empty value" },
	{ "err_fs_write_home.md",
	  ":6: permissions.fs_write[0]: \"~/.ssh\": ~ is not expanded; write the path relative to the project root or absolute" },
	{ "err_path_nul.md",
	  ":5: permissions.fs_write[0]: the path contains a NUL byte" },
	{ "err_shell_exec_type.md",
	  ":5: permissions.shell_exec: expected true or false, got \"false\" (a quoted string); write true or false without quotes" },
	{ "err_net_access_type.md",
	  ":5: permissions.net_access: expected true or false, got no, which YAML 1.1 reads as a boolean and YAML 1.2 as a string; write true or false" },
	{ "err_net_access_list.md",
	  ":6: permissions.net_access: expected true or false, got a list" },
	{ "err_tag.md",
	  ":5: permissions.net_access: explicit YAML tags (!!str, !name) are not accepted here; write the plain value" },
	{ "err_memory_float.md",
	  ":5: limits.memory_mb: expected an integer from 64 to 1048576 (megabytes; the interpreter needs at least 64), got 1.5" },
	{ "err_memory_low.md",
	  ":5: limits.memory_mb: expected an integer from 64 to 1048576 (megabytes; the interpreter needs at least 64), got 32" },
	{ "err_timeout_zero.md",
	  ":5: limits.timeout_s: expected a number from 0.001 to 86400 (seconds), got 0" },
	{ "err_timeout_quoted.md",
	  ":5: limits.timeout_s: expected a number from 0.001 to 86400 (seconds), got \"30\" (a quoted string); write the number without quotes" },
	{ "err_timeout_inf.md",
	  ":5: limits.max_timeout_s: expected a number from 0.001 to 86400 (seconds), got .inf" },
	{ "err_max_sessions.md",
	  ":5: limits.max_sessions: expected an integer from 1 to 256 (sessions), got 1000" },
	{ "err_seed_range.md",
	  ":5: limits.seed: expected an integer from 0 to 4294967295 (a 32-bit seed), got 4294967296" },
	{ "err_seed_octal.md",
	  ":5: limits.seed: expected an integer from 0 to 4294967295 (a 32-bit seed), got 0755" },
	{ "err_checkpoint_type.md",
	  ":5: limits.checkpoint: expected true or false, got 1" },
	{ "err_persist_type.md",
	  ":5: limits.persist: expected true or false, got \"yes\" (a quoted string); write true or false without quotes" },
	{ "err_persist_mb.md",
	  ":5: limits.persist_mb: expected an integer from 1 to 1048576 (megabytes per saved session), got 0" },
	{ "err_timeout_gt_max.md",
	  ":5: limits.timeout_s: 120 exceeds limits.max_timeout_s (60); lower timeout_s or raise max_timeout_s" },
	{ "err_max_below_default.md",
	  ":5: limits.max_timeout_s: 10 is below limits.timeout_s (30, the default); set timeout_s too or raise max_timeout_s" },
	{ "err_anchor.md",
	  ":5: YAML anchors (&name) and aliases (*name) are not accepted in a SKILL.md; write the value out in full" },
	{ "err_alias.md",
	  ":6: YAML anchors (&name) and aliases (*name) are not accepted in a SKILL.md; write the value out in full" },
	{ "err_deep.md",
	  ":5: the YAML is nested more than 16 levels deep; flatten it" },
	{ "err_huge_frontmatter.md",
	  ":928: the frontmatter is larger than 64 KiB; keep it to the keys and move long text into the body" },
};

static void test_error_fixtures(void **state)
{
	int failed = 0;
	for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
		const struct err_case *c = &err_cases[i];
		char path[256], want[1024];
		struct err e = { 0 };
		struct policy sentinel;
		struct policy *p = &sentinel; /* must be reset to NULL */
		int rc;

		snprintf(path, sizeof path, FIX "%s", c->file);
		snprintf(want, sizeof want, "%s%s", path, c->msg);
		rc = policy_load_file(path, &p, &e);
		if (rc >= 0 || p != NULL || strcmp(e.msg, want) != 0 || e.code != rc) {
			print_error("%s: rc %d\n  got:  %s\n  want: %s\n", c->file, rc, e.msg, want);
			failed++;
			policy_free(rc == 0 ? p : NULL);
		}
	}
	assert_int_equal(failed, 0);
}

/* Every error fixture, truncated at every length, fails cleanly or parses:
 * no crash, no leak, no read past the end (under ASan). */
static void test_truncations(void **state)
{
	for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
		char path[256], *buf;
		FILE *f;
		long n;
		snprintf(path, sizeof path, FIX "%s", err_cases[i].file);
		f = fopen(path, "rb");
		assert_non_null(f);
		fseek(f, 0, SEEK_END);
		n = ftell(f);
		rewind(f);
		if (n > 4096) { /* the big ones cost quadratic time */
			fclose(f);
			continue;
		}
		buf = malloc((size_t)n + 1);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
		fclose(f);
		for (long l = 0; l <= n; l++) {
			struct err e = { 0 };
			struct policy *p = NULL;
			char *exact = malloc((size_t)l + 1); /* no slack for ASan */
			assert_non_null(exact);
			memcpy(exact, buf, (size_t)l);
			if (policy_parse(exact, (size_t)l, "t.md", &p, &e) == 0)
				policy_free(p);
			else
				assert_true(strncmp(e.msg, "t.md:", 5) == 0);
			free(exact);
		}
		free(buf);
	}
}

static void test_missing_file(void **state)
{
	struct err e = { 0 };
	struct policy *p = NULL;
	assert_int_equal(policy_load_file(FIX "no-such-file.md", &p, &e), -ENOENT);
	assert_string_equal(e.msg, FIX "no-such-file.md: the file does not exist");
	assert_null(p);
	assert_int_equal(policy_load_file(FIX, &p, &e), -EINVAL);
	assert_string_equal(e.msg, FIX ": not a regular file; pass a SKILL.md file");
}

static void test_huge_file(void **state)
{
	char dir[] = "/tmp/test_policy.XXXXXX", path[PATH_MAX];
	size_t len = (1u << 20) + 1;
	char *big = malloc(len);
	struct err e = { 0 };
	struct policy *p = NULL;
	FILE *f;

	assert_non_null(big);
	memset(big, 'x', len);
	memcpy(big, "---\nname: t\n---\n", 16);
	assert_int_equal(policy_parse(big, len, "big.md", &p, &e), -EFBIG);
	assert_string_equal(e.msg,
			    "big.md: the file is larger than 1 MiB (1048577 bytes); a SKILL.md should be a few KiB");
	/* exactly at the cap is fine */
	assert_int_equal(policy_parse(big, len - 1, "big.md", &p, &e), 0);
	policy_free(p);

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/SKILL.md", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(big, 1, len, f), len);
	fclose(f);
	assert_int_equal(policy_load_file(path, &p, &e), -EFBIG);
	assert_non_null(strstr(e.msg, "SKILL.md: the file is larger than 1 MiB (1048577 bytes)"));
	assert_true(strncmp(e.msg, path, strlen(path)) == 0);
	unlink(path);
	rmdir(dir);
	free(big);
}

/* ---- policy_resolve -------------------------------------------------- */

struct tree {
	char top[64];
	char root[200]; /* mkdtemp paths are short */
	char sibling[200];
};

static void mk(const char *base, const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0700), 0);
}

/* top/root/{out/sub,.git/hooks,link->../../sibling,rootlink->/}, top/sibling */
static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof *t);
	char p[PATH_MAX + 16], *real;
	if (!t)
		return -1;
	strcpy(t->top, "/tmp/test_policy.XXXXXX");
	if (!mkdtemp(t->top))
		return -1;
	real = realpath(t->top, NULL);
	snprintf(t->root, sizeof t->root, "%s/root", real);
	snprintf(t->sibling, sizeof t->sibling, "%s/sibling", real);
	free(real);
	mk(t->top, "root");
	mk(t->top, "sibling");
	mk(t->root, "out");
	mk(t->root, "out/sub");
	mk(t->root, ".git");
	mk(t->root, ".git/hooks");
	snprintf(p, sizeof p, "%s/link", t->root);
	assert_int_equal(symlink("../sibling", p), 0);
	snprintf(p, sizeof p, "%s/rootlink", t->root);
	assert_int_equal(symlink("/", p), 0);
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->top);
	if (system(cmd) != 0)
		return -1;
	free(t);
	return 0;
}

static void expect_resolve_error(const struct tree *t, const char *fixture, int code,
				 const char *want)
{
	char path[256];
	struct err e = { 0 };
	struct policy *p;
	char **before_w, *w0 = NULL;

	snprintf(path, sizeof path, FIX "%s", fixture);
	p = load_ok(path);
	before_w = p->fs_write_paths;
	if (p->n_fs_write_paths)
		w0 = strdup(p->fs_write_paths[0]);
	assert_int_equal(policy_resolve(p, t->root, &e), code);
	if (strcmp(e.msg, want) != 0)
		print_error("got:  %s\nwant: %s\n", e.msg, want);
	assert_string_equal(e.msg, want);
	/* a failed resolve leaves the policy as it was */
	assert_ptr_equal(p->fs_write_paths, before_w);
	if (w0)
		assert_string_equal(p->fs_write_paths[0], w0);
	free(w0);
	policy_free(p);
}

static void test_resolve_ok(void **state)
{
	const struct tree *t = *state;
	struct err e = { 0 };
	struct policy *p = load_ok(FIX "valid_resolve.md");
	char want[PATH_MAX + 16];

	assert_int_equal(policy_resolve(p, t->root, &e), 0);
	snprintf(want, sizeof want, "%s/out", t->root);
	assert_string_equal(p->fs_read_paths[0], want);
	assert_string_equal(p->fs_read_paths[1], want);
	assert_string_equal(p->fs_read_paths[2], "/usr/share");
	assert_string_equal(p->fs_write_paths[0], want);
	snprintf(want, sizeof want, "%s/out/sub", t->root);
	assert_string_equal(p->fs_write_paths[1], want);
	/* idempotent */
	assert_int_equal(policy_resolve(p, t->root, &e), 0);
	assert_string_equal(p->fs_write_paths[1], want);
	policy_free(p);

	/* the defaults have no lists: nothing to do */
	p = load_ok("SKILL.md");
	assert_int_equal(policy_resolve(p, t->root, &e), 0);
	policy_free(p);
}

static void test_resolve_write_outside(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_write_outside.md:7: permissions.fs_write[1]: \"../sibling\" resolves to %s, outside the project root %s; list directories inside the project",
		 t->sibling, t->root);
	expect_resolve_error(t, "err_write_outside.md", -EPERM, want);
}

/* The real error first: a directory outside the project is reported
 * before one that is only missing (which a user would create, only to be
 * told next that another entry can never be written). */
static void test_resolve_write_outside_first(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_write_missing_first.md:8: permissions.fs_write[2]: \"/etc\" resolves to /etc, outside the project root %s; list directories inside the project",
		 t->root);
	expect_resolve_error(t, "err_write_missing_first.md", -EPERM, want);
	/* Missing and outside: outside, by the path as written. */
	int top = (int)(strrchr(t->root, '/') - t->root);
	snprintf(want, sizeof want,
		 FIX "err_write_missing_outside.md:7: permissions.fs_write[1]: \"../missing-sibling\" is outside the project root %s (it would be %.*s/missing-sibling); list directories inside the project",
		 t->root, top, t->root);
	expect_resolve_error(t, "err_write_missing_outside.md", -EPERM, want);
}

/* "workspace" in a list is the default workspace, which serving creates
 * (as for fs_write: workspace): a fresh project is no error. */
static void test_resolve_workspace_list(void **state)
{
	const struct tree *t = *state;
	struct err e = { 0 };
	struct policy *p = load_ok(FIX "valid_workspace_list.md");
	char want[PATH_MAX + 16];

	assert_int_equal(policy_resolve(p, t->root, &e), 0);
	snprintf(want, sizeof want, "%s/workspace", t->root);
	assert_string_equal(p->fs_read_paths[0], want);
	assert_string_equal(p->fs_write_paths[0], want);
	snprintf(want, sizeof want, "%s/out/sub", t->root);
	assert_string_equal(p->fs_write_paths[1], want);
	policy_free(p);
}

static void test_resolve_write_symlink(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_write_symlink.md:5: permissions.fs_write[1]: \"link\" resolves to %s, outside the project root %s; list directories inside the project",
		 t->sibling, t->root);
	expect_resolve_error(t, "err_write_symlink.md", -EPERM, want);
}

static void test_resolve_write_git(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_write_git.md:5: permissions.fs_write[1]: \".git/hooks\" is inside %s/.git, where written files would act outside the sandbox; list another directory",
		 t->root);
	expect_resolve_error(t, "err_write_git.md", -EPERM, want);
}

static void test_resolve_write_root(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_write_root.md:5: permissions.fs_write[0]: \".\" is the project root itself (%s); list directories inside it, such as workspace",
		 t->root);
	expect_resolve_error(t, "err_write_root.md", -EPERM, want);
}

static void test_resolve_read_missing(void **state)
{
	const struct tree *t = *state;
	char want[1024];
	snprintf(want, sizeof want,
		 FIX "err_read_missing.md:7: permissions.fs_read[1]: \"no-such-dir\" does not exist (looked for %s/no-such-dir); create it or remove it from the list",
		 t->root);
	expect_resolve_error(t, "err_read_missing.md", -ENOENT, want);
}

static void test_resolve_read_rootlink(void **state)
{
	const struct tree *t = *state;
	expect_resolve_error(t, "err_read_rootlink.md", -EINVAL,
			     FIX "err_read_rootlink.md:5: permissions.fs_read[1]: \"rootlink\" resolves to /, the whole file system; list the directories that are needed");
}

/* A fs_write directory that holds the SKILL.md itself would let the code
 * grant itself more on the next start. */
static void test_resolve_write_over_policy(void **state)
{
	const struct tree *t = *state;
	char path[512], want[2048];
	struct err e = { 0 };
	struct policy *p;
	FILE *f;

	snprintf(path, sizeof path, "%s/out/SKILL.md", t->root);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("---\nname: t\npermissions:\n  fs_write: [out]\n---\n", f);
	fclose(f);
	p = load_ok(path);
	assert_int_equal(policy_resolve(p, t->root, &e), -EPERM);
	snprintf(want, sizeof want,
		 "%s:4: permissions.fs_write[0]: \"out\" contains the policy file %s, which sandboxed code could then rewrite; list another directory",
		 path, path);
	assert_string_equal(e.msg, want);
	policy_free(p);
	unlink(path);
}

/* A policy built by hand has no line records: the message has no line. */
static void test_resolve_hand_built(void **state)
{
	const struct tree *t = *state;
	char *paths[] = { strdup("/etc") };
	struct policy p = { .source = strdup("hand"), .fs_read = FS_READ_ROOT,
			    .fs_write = FS_WRITE_LIST, .fs_write_paths = paths,
			    .n_fs_write_paths = 1 };
	struct err e = { 0 };
	char want[1024];

	assert_int_equal(policy_resolve(&p, t->root, &e), -EPERM);
	snprintf(want, sizeof want,
		 "hand: permissions.fs_write[0]: \"/etc\" resolves to /etc, outside the project root %s; list directories inside the project",
		 t->root);
	assert_string_equal(e.msg, want);
	assert_int_equal(policy_resolve(&p, "/", &e), -EINVAL);
	assert_string_equal(e.msg, "the project root cannot be /; pass --root with the project directory");
	free(paths[0]);
	free(p.source);
}

/* ---- tighten, describe, free ----------------------------------------- */

static void test_tighten(void **state)
{
	struct err e = { 0 };
	struct policy *p = load_ok("SKILL.md");

	/* not given: nothing changes */
	assert_int_equal(policy_tighten(p, -1, -1, &e), 0);
	assert_defaults(p);

	assert_int_equal(policy_tighten(p, 100, -1, &e), -EINVAL);
	assert_string_equal(e.msg, "--timeout 100 exceeds the policy's timeout_s (30); flags can only tighten");
	assert_int_equal(policy_tighten(p, -1, 4096, &e), -EINVAL);
	assert_string_equal(e.msg, "--memory 4096 exceeds the policy's memory_mb (2048); flags can only tighten");
	assert_int_equal(policy_tighten(p, 0, -1, &e), -EINVAL);
	assert_int_equal(policy_tighten(p, NAN, -1, &e), -EINVAL);
	assert_int_equal(policy_tighten(p, -1, 32, &e), -EINVAL);
	/* one bad flag changes nothing */
	assert_int_equal(policy_tighten(p, 10, 4096, &e), -EINVAL);
	assert_defaults(p);

	/* equal is allowed */
	assert_int_equal(policy_tighten(p, 30, 2048, &e), 0);
	assert_true(p->limits.timeout_s == 30);
	assert_true(p->limits.max_timeout_s == 30); /* a call cannot ask for more */

	assert_int_equal(policy_tighten(p, 5, 512, &e), 0);
	assert_true(p->limits.timeout_s == 5);
	assert_true(p->limits.max_timeout_s == 5);
	assert_int_equal(policy_tighten(p, -1, 64, &e), 0);
	assert_int_equal(p->limits.memory_mb, 64);
	assert_int_equal(policy_tighten(p, 6, -1, &e), -EINVAL);
	assert_string_equal(e.msg, "--timeout 6 exceeds the policy's timeout_s (5); flags can only tighten");
	policy_free(p);
}

static void test_describe(void **state)
{
	struct policy *p = load_ok(FIX "valid_lists.md");
	char *d = policy_describe(p);
	assert_non_null(d);
	assert_string_equal(d,
			    "policy from " FIX "valid_lists.md\n"
			    "  name: lists\n"
			    "permissions:\n"
			    "  fs_read: these paths read-only, and the workspace\n"
			    "    - data\n"
			    "    - /usr/share/zoneinfo\n"
			    "  fs_write: these directories only\n"
			    "    - workspace/outputs\n"
			    "    - build out\n"
			    "  fs_read_deny: never readable, at any depth under what fs_read shows: the built-in secrets\n"
			    "    .ssh .gnupg .aws .azure .config/gcloud .kube .docker/config.json .netrc "
			    ".git-credentials .npmrc .pypirc .env .env.* *.pem *.key id_rsa* id_ed25519*\n"
			    "    and the policy's own (relative to the project root)\n"
			    "    - private\n"
			    "    - db/*.sqlite\n"
			    "  shell_exec: true (programs may be executed)\n"
			    "  net_access: true (network allowed)\n"
			    "limits:\n"
			    "  timeout_s: 2.5\n"
			    "  max_timeout_s: 60\n"
			    "  memory_mb: 512\n"
			    "  max_output_chars: 200\n"
			    "  max_processes: 4\n"
			    "  max_file_mb: 1\n"
			    "  max_sessions: 256\n"
			    "  max_workspace_mb: 10 (a call that grows the workspace past it is stopped and rolled back)\n"
			    "  checkpoint: false\n"
			    "  seed: 4294967295\n"
			    "  persist: false\n"
			    "  persist_mb: 1\n");
	free(d);
	policy_free(p);

	p = load_ok("SKILL.md");
	d = policy_describe(p);
	assert_non_null(strstr(d, "  fs_read: true (the project root read-only, and the workspace)\n"));
	assert_non_null(strstr(d, "  fs_write: workspace (the workspace only)\n"));
	assert_non_null(strstr(d, "  shell_exec: false (no program can be executed)\n"));
	assert_non_null(strstr(d, "  net_access: false (no network, no DNS)\n"));
	free(d);
	policy_free(p);
}

static void test_free_null(void **state)
{
	policy_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_project_skill_is_defaults),
		cmocka_unit_test(test_builtin),
		cmocka_unit_test(test_minimal_is_defaults),
		cmocka_unit_test(test_lists_and_the_other_way),
		cmocka_unit_test(test_secrets_match),
		cmocka_unit_test(test_false_permissions),
		cmocka_unit_test(test_empty_lists_mean_false),
		cmocka_unit_test(test_crlf),
		cmocka_unit_test(test_parse_from_memory),
		cmocka_unit_test(test_error_fixtures),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_huge_file),
		cmocka_unit_test_setup_teardown(test_resolve_ok, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_outside, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_outside_first, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_workspace_list, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_symlink, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_git, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_root, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_read_missing, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_read_rootlink, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_write_over_policy, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_resolve_hand_built, tree_setup, tree_teardown),
		cmocka_unit_test(test_tighten),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_free_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
