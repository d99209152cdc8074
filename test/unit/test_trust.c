/* Unit tests of policy/trust.c: the ceiling an unapproved project policy is
 * cut down to (key by key), the approval store, and the decision at
 * start-up.  Each test works in a fresh tree under /tmp:
 *   TMP/root/{data,out,workspace/outputs}   a project
 *   TMP/cfg                                 XDG_CONFIG_HOME */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
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

#include "../../policy/trust.h"
#include "tmptree.h"

struct t {
	char tmp[64], root[128], ws[160], cfg[128], store[200];
	struct policy *ceiling;
};

static void mk(const char *base, const char *rel)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof *t);
	struct err e = { 0 };
	snprintf(t->tmp, sizeof t->tmp, "/tmp/psm-trust-XXXXXX");
	if (!mkdtemp(t->tmp))
		return -1;
	snprintf(t->root, sizeof t->root, "%s/root", t->tmp);
	snprintf(t->ws, sizeof t->ws, "%s/workspace", t->root);
	snprintf(t->cfg, sizeof t->cfg, "%s/cfg", t->tmp);
	snprintf(t->store, sizeof t->store, "%s/python-sandbox-mcp/trusted", t->cfg);
	mk(t->tmp, "root");
	mk(t->root, "data");
	mk(t->root, "out");
	mk(t->root, "workspace");
	mk(t->root, "workspace/outputs");
	setenv("XDG_CONFIG_HOME", t->cfg, 1);
	if (policy_builtin(&t->ceiling, &e) < 0 || policy_resolve(t->ceiling, t->root, &e) < 0)
		return -1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	policy_free(t->ceiling);
	tmp_tree_remove(t->tmp);
	unsetenv("XDG_CONFIG_HOME");
	free(t);
	return 0;
}

/* A project policy from frontmatter lines, resolved against the tree. */
static struct policy *project(const struct t *t, const char *perms_and_limits)
{
	char text[2048];
	struct policy *p = NULL;
	struct err e = { 0 };
	snprintf(text, sizeof text, "---\nname: p\ndescription: d\n%s---\nbody\n", perms_and_limits);
	if (policy_parse(text, strlen(text), "SKILL.md", &p, &e) < 0 || policy_resolve(p, t->root, &e) < 0)
		fail_msg("%s", e.msg);
	return p;
}

static struct trust_report cut(const struct t *t, struct policy *p, const struct policy *c, bool apply)
{
	struct trust_report r;
	struct err e = { 0 };
	assert_int_equal(trust_ceiling(p, c ? c : t->ceiling, t->root, t->ws, apply, &r, &e), 0);
	return r;
}

static void test_hash(void **state)
{
	char hex[65];
	trust_hash("abc", 3, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_booleans(void **state)
{
	struct t *t = *state;
	struct policy *p = project(t, "permissions:\n  shell_exec: true\n  net_access: true\n");
	/* Reporting alone changes nothing. */
	struct trust_report r = cut(t, p, NULL, false);
	assert_int_equal(r.keys, TRUST_NET_ACCESS | TRUST_SHELL_EXEC);
	assert_string_equal(r.text, "- net_access: true\n- shell_exec: true\n");
	assert_true(p->net_access && p->shell_exec);
	trust_report_free(&r);
	r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_NET_ACCESS | TRUST_SHELL_EXEC);
	assert_false(p->net_access);
	assert_false(p->shell_exec);
	trust_report_free(&r);
	/* Once cut, nothing more is withheld. */
	r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, 0);
	assert_null(r.text);
	policy_free(p);
}

/* Tightening never needs approval: the policy is kept as it is. */
static void test_tighter_is_kept(void **state)
{
	struct t *t = *state;
	struct policy *p = project(t, "permissions:\n  fs_read: [data]\n  fs_write: false\n  shell_exec: false\n"
				      "limits:\n  timeout_s: 5\n  memory_mb: 512\n  max_sessions: 2\n  checkpoint: false\n  seed: 7\n");
	struct trust_report r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, 0);
	assert_null(r.text);
	assert_int_equal(p->fs_read, FS_READ_LIST);
	assert_int_equal(p->n_fs_read_paths, 1);
	assert_int_equal(p->fs_write, FS_WRITE_NONE);
	assert_true(p->limits.timeout_s == 5);
	assert_int_equal(p->limits.memory_mb, 512);
	assert_int_equal(p->limits.max_sessions, 2);
	assert_false(p->limits.checkpoint);
	assert_int_equal(p->limits.seed, 7);
	policy_free(p);

	p = project(t, "permissions:\n  fs_read: false\n  fs_write: [workspace/outputs]\n");
	r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, 0);
	assert_int_equal(p->fs_read, FS_READ_WORKSPACE);
	assert_int_equal(p->fs_write, FS_WRITE_LIST);
	policy_free(p);
}

static void test_fs_read(void **state)
{
	struct t *t = *state;
	char want[600];
	struct policy *p = project(t, "permissions:\n  fs_read: [data, /usr/share, workspace]\n");
	struct trust_report r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_FS_READ);
	assert_string_equal(r.text, "- fs_read: /usr/share (outside the project)\n");
	assert_int_equal(p->fs_read, FS_READ_LIST);
	assert_int_equal(p->n_fs_read_paths, 2);
	snprintf(want, sizeof want, "%s/data", t->root);
	assert_string_equal(p->fs_read_paths[0], want);
	assert_string_equal(p->fs_read_paths[1], t->ws);
	trust_report_free(&r);
	policy_free(p);

	/* Nothing left: the workspace only. */
	p = project(t, "permissions:\n  fs_read: [/usr/share, /etc]\n");
	r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_FS_READ);
	assert_string_equal(r.text, "- fs_read: /usr/share (outside the project)\n- fs_read: /etc (outside the project)\n");
	assert_int_equal(p->fs_read, FS_READ_WORKSPACE);
	assert_int_equal(p->n_fs_read_paths, 0);
	assert_null(p->fs_read_paths);
	trust_report_free(&r);
	policy_free(p);
}

static void test_fs_write(void **state)
{
	struct t *t = *state;
	char want[600];
	struct policy *p = project(t, "permissions:\n  fs_write: [out, workspace/outputs]\n");
	struct trust_report r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_FS_WRITE);
	snprintf(want, sizeof want, "- fs_write: %s/out (outside the workspace)\n", t->root);
	assert_string_equal(r.text, want);
	assert_int_equal(p->fs_write, FS_WRITE_LIST);
	assert_int_equal(p->n_fs_write_paths, 1);
	snprintf(want, sizeof want, "%s/outputs", t->ws);
	assert_string_equal(p->fs_write_paths[0], want);
	trust_report_free(&r);
	policy_free(p);

	/* The intersection of [out] and "workspace" is nothing writable. */
	p = project(t, "permissions:\n  fs_write: [out]\n");
	r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_FS_WRITE);
	assert_int_equal(p->fs_write, FS_WRITE_NONE);
	assert_null(p->fs_write_paths);
	trust_report_free(&r);
	policy_free(p);
}

static void test_limits(void **state)
{
	struct t *t = *state;
	struct policy *p = project(t, "limits:\n  timeout_s: 100\n  max_timeout_s: 1000\n  memory_mb: 4096\n"
				      "  max_output_chars: 20000\n  max_processes: 128\n  max_file_mb: 1024\n"
				      "  max_sessions: 16\n  max_workspace_mb: 8192\n  checkpoint: false\n  seed: 3\n"
				      "  persist: false\n  persist_mb: 2048\n");
	struct trust_report r = cut(t, p, NULL, true);
	assert_int_equal(r.keys, TRUST_LIMITS);
	assert_string_equal(r.text,
			    "- limits.timeout_s: 100 (at most 30 without approval)\n"
			    "- limits.max_timeout_s: 1000 (at most 600 without approval)\n"
			    "- limits.memory_mb: 4096 (at most 2048 without approval)\n"
			    "- limits.max_output_chars: 20000 (at most 8000 without approval)\n"
			    "- limits.max_processes: 128 (at most 64 without approval)\n"
			    "- limits.max_file_mb: 1024 (at most 512 without approval)\n"
			    "- limits.max_sessions: 16 (at most 8 without approval)\n"
			    "- limits.max_workspace_mb: 8192 (at most 4096 without approval)\n"
			    "- limits.persist_mb: 2048 (at most 1024 without approval)\n");
	assert_true(p->limits.timeout_s == 30);
	assert_true(p->limits.max_timeout_s == 600);
	assert_int_equal(p->limits.memory_mb, 2048);
	assert_int_equal(p->limits.max_output_chars, 8000);
	assert_int_equal(p->limits.max_processes, 64);
	assert_int_equal(p->limits.max_file_mb, 512);
	assert_int_equal(p->limits.max_sessions, 8);
	assert_int_equal(p->limits.max_workspace_mb, 4096);
	assert_int_equal(p->limits.persist_mb, 1024);
	assert_false(p->limits.persist); /* grants nothing: kept */
	assert_false(p->limits.checkpoint); /* grants nothing: kept */
	assert_int_equal(p->limits.seed, 3);
	trust_report_free(&r);
	policy_free(p);

	/* timeout_s stays within max_timeout_s whatever the mix. */
	p = project(t, "limits:\n  timeout_s: 20\n  max_timeout_s: 900\n");
	r = cut(t, p, NULL, true);
	assert_true(p->limits.timeout_s == 20);
	assert_true(p->limits.max_timeout_s == 600);
	trust_report_free(&r);
	policy_free(p);
}

/* The ceiling is the built-in SKILL.md; should it ever be tighter than
 * "true"/"workspace", the intersection still holds. */
static void test_other_ceilings(void **state)
{
	struct t *t = *state;
	char want[600];
	struct policy *c = project(t, "permissions:\n  fs_read: [data]\n  fs_write: [workspace/outputs]\n");
	struct policy *p = project(t, "permissions:\n  fs_read: true\n  fs_write: workspace\n");
	struct trust_report r = cut(t, p, c, true);
	assert_int_equal(r.keys, TRUST_FS_READ | TRUST_FS_WRITE);
	assert_int_equal(p->fs_read, FS_READ_LIST);
	assert_int_equal(p->n_fs_read_paths, 1);
	snprintf(want, sizeof want, "%s/data", t->root);
	assert_string_equal(p->fs_read_paths[0], want);
	assert_int_equal(p->fs_write, FS_WRITE_LIST);
	assert_int_equal(p->n_fs_write_paths, 1);
	trust_report_free(&r);
	policy_free(p);
	policy_free(c);

	/* Deny lists: the tighter is the union. */
	c = project(t, "permissions:\n  fs_read_deny: [\"*.sqlite\", \"data/private\"]\n");
	p = project(t, "permissions:\n  fs_read_deny: [\"data/private\"]\n");
	r = cut(t, p, c, true);
	assert_int_equal(r.keys, TRUST_FS_READ);
	assert_string_equal(r.text, "- fs_read_deny without *.sqlite (the built-in policy denies it)\n");
	assert_int_equal(p->n_fs_read_deny, 2);
	assert_string_equal(p->fs_read_deny[1], "*.sqlite");
	trust_report_free(&r);
	policy_free(p);
	policy_free(c);

	c = project(t, "permissions:\n  fs_read: false\n  fs_write: false\n");
	p = project(t, "permissions:\n  fs_read: [data, workspace/outputs]\n  fs_write: workspace\n");
	r = cut(t, p, c, true);
	assert_int_equal(r.keys, TRUST_FS_READ | TRUST_FS_WRITE);
	assert_int_equal(p->fs_read, FS_READ_LIST); /* the workspace is readable in every mode */
	assert_int_equal(p->n_fs_read_paths, 1);
	assert_int_equal(p->fs_write, FS_WRITE_NONE);
	trust_report_free(&r);
	policy_free(p);
	policy_free(c);
}

static void test_keys_and_command(void **state)
{
	assert_true(trust_key_withheld(TRUST_NET_ACCESS | TRUST_LIMITS, "net_access"));
	assert_true(trust_key_withheld(TRUST_NET_ACCESS | TRUST_LIMITS, "limits"));
	assert_false(trust_key_withheld(TRUST_NET_ACCESS | TRUST_LIMITS, "shell_exec"));
	assert_false(trust_key_withheld(~0u, "something_else"));
	assert_false(trust_key_withheld(~0u, NULL));
	char *cmd = trust_command("/p/it's", "/p/it's/S.md", false);
	assert_string_equal(cmd, "python-sandbox-mcp --trust --root '/p/it'\\''s'");
	free(cmd);
	/* A path with a newline or an escape sequence cannot forge lines. */
	cmd = trust_clean("/p/a\nb\x1b[2J\\");
	assert_string_equal(cmd, "/p/a\\x0ab\\x1b[2J\\x5c");
	free(cmd);
	cmd = trust_command("/p", "/x/S.md", true);
	assert_string_equal(cmd, "python-sandbox-mcp --trust --root '/p' --skill '/x/S.md'");
	free(cmd);
}

static void test_store(void **state)
{
	struct t *t = *state;
	struct err e = { 0 };
	struct stat st;
	char a[65], b[65], path[256], dir[400];
	trust_hash("a", 1, a);
	trust_hash("b", 1, b);
	snprintf(path, sizeof path, "%s/S.md", t->root);

	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 0); /* no store yet */
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 0);
	assert_int_equal(stat(t->store, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(dir, sizeof dir, "%s/python-sandbox-mcp", t->cfg);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, b, t->ws, &e), 0);  /* the file changed */
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, "/other", a, t->ws, &e), 0);
	/* A new approval of the same path replaces the old one. */
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, path, b, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, b, t->ws, &e), 1);
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, "/other", a, t->ws, &e), 0);
	assert_int_equal(trust_revoke(TRUST_KIND_SKILL, t->root, path, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, b, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, "/other", a, t->ws, &e), 1);
	assert_int_equal(trust_revoke(TRUST_KIND_SKILL, t->root, path, t->ws, &e), 0);

	/* A path with a newline would make two lines. */
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, "/x\n/y", a, t->ws, &e), -EINVAL);

	/* Writable by others: refused, and so approves nothing. */
	assert_int_equal(chmod(t->store, 0622), 0);
	assert_true(trust_lookup(TRUST_KIND_SKILL, t->root, "/other", a, t->ws, &e) < 0);
	assert_non_null(strstr(e.msg, "writable by other users"));
	assert_true(trust_approve(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e) < 0);
	assert_int_equal(chmod(t->store, 0600), 0);

	/* A symlink planted in its place, to a file that approves: refused. */
	char planted[600], line[400];
	snprintf(planted, sizeof planted, "%s/planted", t->tmp);
	FILE *f = fopen(planted, "w");
	snprintf(line, sizeof line, "%s %s\n", a, path);
	fputs(line, f);
	fclose(f);
	chmod(planted, 0600);
	assert_int_equal(unlink(t->store), 0);
	assert_int_equal(symlink(planted, t->store), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "symlink"));
	assert_int_equal(unlink(t->store), 0);

	/* A store inside the project is refused for reading and writing. */
	char inside[256];
	snprintf(inside, sizeof inside, "%s/.config", t->root);
	setenv("XDG_CONFIG_HOME", inside, 1);
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), -EPERM);
	assert_non_null(strstr(e.msg, "inside the project"));
	assert_int_equal(stat(inside, &st), -1); /* and nothing was created there */
	assert_int_equal(mkdir(inside, 0700), 0);
	snprintf(dir, sizeof dir, "%s/python-sandbox-mcp", inside);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(planted, sizeof planted, "%s/trusted", dir);
	f = fopen(planted, "w");
	fputs(line, f);
	fclose(f);
	chmod(planted, 0600);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), -EPERM);
	setenv("XDG_CONFIG_HOME", t->cfg, 1);
}

static void test_decide(void **state)
{
	struct t *t = *state;
	struct trust_state s;
	struct err e = { 0 };
	char skill[256];
	snprintf(skill, sizeof skill, "%s/S.md", t->root);
	const char *text = "---\nname: p\ndescription: d\npermissions:\n  net_access: true\n---\n";
	FILE *f = fopen(skill, "w");
	fputs(text, f);
	fclose(f);
	struct policy *p = NULL;
	assert_int_equal(policy_load_file(skill, &p, &e), 0);
	assert_int_equal(policy_resolve(p, t->root, &e), 0);

	assert_int_equal(trust_decide(&s, p, true, t->root, t->ws, false, &e), 0);
	assert_false(s.approved);
	assert_int_equal(s.withheld, TRUST_NET_ACCESS);
	assert_false(p->net_access);
	assert_non_null(s.note);
	assert_non_null(strstr(s.note, "- net_access: true\n"));
	assert_non_null(strstr(s.note, "python-sandbox-mcp --trust --root '"));
	assert_non_null(strstr(s.note, skill));
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, s.path, s.hex, t->ws, &e), 0);
	trust_state_free(&s);
	policy_free(p);

	/* Approved: all of it applies, no note. */
	assert_int_equal(policy_load_file(skill, &p, &e), 0);
	assert_int_equal(policy_resolve(p, t->root, &e), 0);
	assert_int_equal(trust_decide(&s, p, true, t->root, t->ws, false, &e), 0);
	assert_true(s.approved);
	assert_int_equal(s.withheld, 0);
	assert_null(s.note);
	assert_true(p->net_access);
	trust_state_free(&s);
	policy_free(p);

	/* The built-in policy: nothing to decide. */
	assert_int_equal(policy_builtin(&p, &e), 0);
	assert_int_equal(trust_decide(&s, p, false, t->root, t->ws, false, &e), 0);
	assert_false(s.project);
	assert_null(s.note);
	trust_state_free(&s);
	policy_free(p);
}

/* Approvals name their project: one project's approval of a file, or a
 * line of the earlier form ("HEX PATH"), never approves it for another. */
static void test_store_names_root(void **state)
{
	struct t *t = *state;
	struct err e = { 0 };
	char a[65], other[200], path[256], line[1200];
	trust_hash("a", 1, a);
	snprintf(path, sizeof path, "%s/S.md", t->root);
	snprintf(other, sizeof other, "%s/other", t->tmp);
	assert_int_equal(mkdir(other, 0755), 0);

	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 1);
	/* Project B whose SKILL.md is a symlink to this file: its real path
	 * is the same, its ROOT is not. */
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, other, path, a, t->ws, &e), 0);
	/* A venv is not a policy file. */
	assert_int_equal(trust_lookup(TRUST_KIND_VENV, t->root, path, a, t->ws, &e), 0);
	assert_int_equal(trust_revoke(TRUST_KIND_SKILL, t->root, path, t->ws, &e), 1);

	/* The earlier form: still right for a ROOT that holds the file, and
	 * only there; --untrust removes it; other lines survive a rewrite. */
	FILE *f = fopen(t->store, "a");
	snprintf(line, sizeof line, "%s %s\n%s %s\tskill\t%s/x.md\n# a comment\n", a, path, a, other, other);
	fputs(line, f);
	fclose(f);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, other, path, a, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_VENV, t->root, path, a, t->ws, &e), 0);
	char ox[256];
	snprintf(ox, sizeof ox, "%s/x.md", other);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, other, ox, a, t->ws, &e), 1);
	assert_int_equal(trust_approve(TRUST_KIND_VENV, t->root, "/v", a, t->ws, &e), 0);
	assert_int_equal(trust_revoke(TRUST_KIND_SKILL, t->root, path, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, t->root, path, a, t->ws, &e), 0);
	assert_int_equal(trust_lookup(TRUST_KIND_SKILL, other, ox, a, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_VENV, t->root, "/v", a, t->ws, &e), 1);
	/* A venv's approvals of a root go at once, whatever their path. */
	assert_int_equal(trust_revoke(TRUST_KIND_VENV, t->root, NULL, t->ws, &e), 1);
	assert_int_equal(trust_lookup(TRUST_KIND_VENV, t->root, "/v", a, t->ws, &e), 0);
	/* A tab would forge a field. */
	assert_int_equal(trust_approve(TRUST_KIND_SKILL, t->root, "/x\t/y", a, t->ws, &e), -EINVAL);
}

static void put(const char *dir, const char *rel, const char *text)
{
	char p[1200];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	mkdir(dir, 0755);
	for (char *s = strchr(p + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The venv's fingerprint covers pyvenv.cfg, the .pth files, sitecustomize
 * and the venv's modules that a .pth line imports, and nothing else. */
static void test_venv_fingerprint(void **state)
{
	struct t *t = *state;
	struct err e = { 0 };
	char venv[200], h1[65], h2[65], *files = NULL;
	snprintf(venv, sizeof venv, "%s/venv", t->tmp);
	const char *sp = "lib/python3.11/site-packages";
	char rel[300];
	put(venv, "pyvenv.cfg", "version = 3.11.2\n");
#define SP(x) (snprintf(rel, sizeof rel, "%s/%s", sp, x), rel)
	put(venv, SP("a.pth"), "# comment\nimport mod_a, pkg_b as x; from mod_c import y; __import__('mod_d').z()\n./extra\n");
	put(venv, SP("mod_a.py"), "A = 1\n");
	put(venv, SP("pkg_b/__init__.py"), "B = 1\n");
	put(venv, SP("mod_c.py"), "y = 1\n");
	put(venv, SP("mod_d.py"), "def z(): pass\n");
	put(venv, SP("x.py"), "# the alias of pkg_b: not a module of the .pth\n");
	put(venv, SP("unrelated.py"), "U = 1\n");
	put(venv, SP("sitecustomize.py"), "S = 1\n");
	assert_int_equal(trust_venv_fingerprint(venv, h1, &files, &e), 0);
	assert_string_equal(files, "  - pyvenv.cfg\n"
			    "  - lib/python3.11/site-packages/sitecustomize.py\n"
			    "  - lib/python3.11/site-packages/a.pth\n"
			    "  - lib/python3.11/site-packages/mod_a.py\n"
			    "  - lib/python3.11/site-packages/pkg_b/__init__.py\n"
			    "  - lib/python3.11/site-packages/mod_c.py\n"
			    "  - lib/python3.11/site-packages/mod_d.py\n");
	free(files);
	/* What does not run at start changes nothing. */
	put(venv, SP("unrelated.py"), "U = 2\n");
	assert_int_equal(trust_venv_fingerprint(venv, h2, NULL, &e), 0);
	assert_string_equal(h1, h2);
	/* A module a .pth imports, a .pth, pyvenv.cfg: each changes it. */
	const char *changes[] = { "mod_d.py", "a.pth", "sitecustomize.py", NULL };
	for (const char **c = changes; *c; c++) {
		put(venv, SP(*c), "changed\n");
		assert_int_equal(trust_venv_fingerprint(venv, h2, NULL, &e), 0);
		assert_string_not_equal(h1, h2);
		memcpy(h1, h2, sizeof h1);
	}
	put(venv, SP("b.pth"), "import os\n"); /* a new .pth */
	assert_int_equal(trust_venv_fingerprint(venv, h2, NULL, &e), 0);
	assert_string_not_equal(h1, h2);
	/* A FIFO planted as a .pth cannot be approved (and does not hang). */
	char fifo[800];
	snprintf(fifo, sizeof fifo, "%s/%s", venv, SP("c.pth"));
	assert_int_equal(mkfifo(fifo, 0644), 0);
	assert_int_equal(trust_venv_fingerprint(venv, h2, NULL, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "not a regular file"));
	unlink(fifo);
	snprintf(fifo, sizeof fifo, "%s/pyvenv.cfg", venv);
	unlink(fifo);
	assert_true(trust_venv_fingerprint(venv, h2, NULL, &e) < 0);
#undef SP
}

static void test_decide_venv(void **state)
{
	struct t *t = *state;
	struct trust_state s;
	struct err e = { 0 };
	struct policy *p = NULL;
	char venv[200];
	snprintf(venv, sizeof venv, "%s/.interpreter-venv", t->root);
	put(venv, "pyvenv.cfg", "version = 3.11.2\n");
	put(venv, "lib/python3.11/site-packages/v.pth", "import os\n");
	const char *writable[] = { t->ws, NULL };

	assert_int_equal(policy_builtin(&p, &e), 0);
	assert_int_equal(trust_decide(&s, p, false, t->root, t->ws, false, &e), 0);
	assert_int_equal(trust_decide_venv(&s, venv, false, t->root, t->ws, writable, false, &e), 0);
	assert_false(trust_venv_used(&s));
	assert_false(s.venv.pth_off);
	assert_non_null(s.note);
	assert_non_null(strstr(s.note, "virtual environment ("));
	assert_non_null(strstr(s.note, "is not approved on this machine, so the interpreter runs without it"));
	assert_non_null(strstr(s.note, "python-sandbox-mcp --trust --root '"));
	assert_null(strstr(s.note, "policy ("));
	assert_int_equal(trust_approve(TRUST_KIND_VENV, t->root, s.venv.path, s.venv.hex, t->ws, &e), 0);
	trust_state_free(&s);

	assert_int_equal(trust_decide(&s, p, false, t->root, t->ws, false, &e), 0);
	assert_int_equal(trust_decide_venv(&s, venv, false, t->root, t->ws, writable, false, &e), 0);
	assert_true(trust_venv_used(&s));
	assert_null(s.note);
	trust_state_free(&s);

	/* --venv: used without approval; below a writable directory, without
	 * its .pth files. */
	char inws[300];
	snprintf(inws, sizeof inws, "%s/venv", t->ws);
	put(inws, "pyvenv.cfg", "version = 3.11.2\n");
	assert_int_equal(trust_decide(&s, p, false, t->root, t->ws, false, &e), 0);
	assert_int_equal(trust_decide_venv(&s, inws, true, t->root, t->ws, writable, false, &e), 0);
	assert_true(trust_venv_used(&s));
	assert_true(s.venv.pth_off);
	assert_null(s.note);
	trust_state_free(&s);
	policy_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash),
		cmocka_unit_test_setup_teardown(test_booleans, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tighter_is_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fs_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fs_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_ceilings, setup, teardown),
		cmocka_unit_test(test_keys_and_command),
		cmocka_unit_test_setup_teardown(test_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_decide, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_names_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_venv_fingerprint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_decide_venv, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
