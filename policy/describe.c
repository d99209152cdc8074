/* The policy as --check and the log show it: every permission and limit
 * in words (policy_describe). */
#include "private.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_paths(FILE *f, char *const *v, size_t n)
{
	char buf[PATH_MAX * 4 + 8];
	for (size_t i = 0; i < n; i++)
		fprintf(f, "    - %s\n", esc_bytes(buf, sizeof buf, v[i], strlen(v[i]), PATH_MAX));
}

char *policy_describe(const struct policy *p)
{
	char *out = NULL, buf[SHOW_MAX * 4 + 8];
	size_t size = 0;
	const struct policy_limits *L;
	FILE *f;

	if (!p)
		return NULL;
	L = &p->limits;
	f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	fprintf(f, "policy from %s\n", p->source ? p->source : "<unknown>");
	if (p->name)
		fprintf(f, "  name: %s\n", esc_bytes(buf, sizeof buf, p->name, strlen(p->name), 80));
	fputs("permissions:\n", f);
	switch (p->fs_read) {
	case FS_READ_ROOT:
		fputs("  fs_read: true (the project root read-only, and the workspace)\n", f);
		break;
	case FS_READ_WORKSPACE:
		fputs("  fs_read: false (the workspace only)\n", f);
		break;
	case FS_READ_LIST:
		fputs("  fs_read: these paths read-only, and the workspace\n", f);
		put_paths(f, p->fs_read_paths, p->n_fs_read_paths);
		break;
	}
	switch (p->fs_write) {
	case FS_WRITE_WORKSPACE:
		fputs("  fs_write: workspace (the workspace only)\n", f);
		break;
	case FS_WRITE_NONE:
		fputs("  fs_write: false (nothing writable)\n", f);
		break;
	case FS_WRITE_LIST:
		fputs("  fs_write: these directories only\n", f);
		put_paths(f, p->fs_write_paths, p->n_fs_write_paths);
		break;
	}
	fputs("  fs_read_deny: never readable, at any depth under what fs_read shows: the built-in secrets\n    ", f);
	for (const char *const *q = secrets_builtin(); *q; q++)
		fprintf(f, "%s%s", *q, q[1] ? " " : "\n");
	if (p->n_fs_read_deny) {
		fputs("    and the policy's own (relative to the project root)\n", f);
		put_paths(f, p->fs_read_deny, p->n_fs_read_deny);
	}
	fprintf(f, "  shell_exec: %s\n",
		p->shell_exec ? "true (programs may be executed)" : "false (no program can be executed)");
	fprintf(f, "  net_access: %s\n",
		p->net_access ? "true (network allowed)" : "false (no network, no DNS)");
	fputs("limits:\n", f);
	fprintf(f, "  timeout_s: %g\n", L->timeout_s);
	fprintf(f, "  max_timeout_s: %g\n", L->max_timeout_s);
	fprintf(f, "  memory_mb: %ld\n", L->memory_mb);
	fprintf(f, "  max_output_chars: %ld\n", L->max_output_chars);
	fprintf(f, "  max_processes: %ld\n", L->max_processes);
	fprintf(f, "  max_file_mb: %ld\n", L->max_file_mb);
	fprintf(f, "  max_sessions: %ld\n", L->max_sessions);
	fprintf(f, "  max_workspace_mb: %ld (a call that grows the workspace past it is stopped and rolled back)\n",
		L->max_workspace_mb);
	fprintf(f, "  checkpoint: %s\n", L->checkpoint ? "true" : "false");
	fprintf(f, "  seed: %ld\n", L->seed);
	fprintf(f, "  persist: %s\n", L->persist ? "true (saved in the background, restored after a restart)" : "false");
	fprintf(f, "  persist_mb: %ld\n", L->persist_mb);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
