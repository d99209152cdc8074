/* Fuzz target: a SKILL.md (frontmatter and body) -> policy_parse.
 *
 * Besides "no crash, no leak", it checks what the contract promises of the
 * parser's outcome: an accepted policy has every limit inside its
 * documented range and no empty path list; a refused one has a message
 * on one line ("one clear line naming file, line and key")
 * that begins with the file's name. */
#include <math.h>
#include <string.h>

#include "../../policy/policy.h"
#include "fuzz.h"

static void check_accepted(struct policy *p)
{
	const struct policy_limits *l = &p->limits;
	FUZZ_CHECK(l->timeout_s >= 0.001 && l->timeout_s <= 86400, "timeout_s %g", l->timeout_s);
	FUZZ_CHECK(l->max_timeout_s >= 0.001 && l->max_timeout_s <= 86400, "max_timeout_s %g", l->max_timeout_s);
	FUZZ_CHECK(l->timeout_s <= l->max_timeout_s, "timeout_s %g > max_timeout_s %g", l->timeout_s, l->max_timeout_s);
	FUZZ_CHECK(l->memory_mb >= 64 && l->memory_mb <= 1048576, "memory_mb %ld", l->memory_mb);
	FUZZ_CHECK(l->max_output_chars >= 200 && l->max_output_chars <= 10000000, "max_output_chars %ld", l->max_output_chars);
	FUZZ_CHECK(l->max_processes >= 4 && l->max_processes <= 65536, "max_processes %ld", l->max_processes);
	FUZZ_CHECK(l->max_file_mb >= 1 && l->max_file_mb <= 1048576, "max_file_mb %ld", l->max_file_mb);
	FUZZ_CHECK(l->max_sessions >= 1 && l->max_sessions <= 256, "max_sessions %ld", l->max_sessions);
	FUZZ_CHECK(l->seed >= 0 && l->seed <= 4294967295L, "seed %ld", l->seed);
	FUZZ_CHECK(p->source && strcmp(p->source, "SKILL.md") == 0, "source");
	if (p->fs_read == FS_READ_LIST) {
		FUZZ_CHECK(p->n_fs_read_paths > 0 && p->n_fs_read_paths <= 64, "n_fs_read_paths %zu", p->n_fs_read_paths);
		for (size_t i = 0; i < p->n_fs_read_paths; i++)
			FUZZ_CHECK(p->fs_read_paths[i] && p->fs_read_paths[i][0], "fs_read path %zu empty", i);
	} else {
		FUZZ_CHECK(p->n_fs_read_paths == 0, "paths without a list mode");
	}
	if (p->fs_write == FS_WRITE_LIST) {
		FUZZ_CHECK(p->n_fs_write_paths > 0 && p->n_fs_write_paths <= 64, "n_fs_write_paths %zu", p->n_fs_write_paths);
		for (size_t i = 0; i < p->n_fs_write_paths; i++)
			FUZZ_CHECK(p->fs_write_paths[i] && p->fs_write_paths[i][0], "fs_write path %zu empty", i);
	} else {
		FUZZ_CHECK(p->n_fs_write_paths == 0, "paths without a list mode");
	}

	char *d = policy_describe(p);
	FUZZ_CHECK(d != NULL, "policy_describe");
	free(d);

	/* Tightening to the policy's own values always succeeds; loosening
	 * never does. */
	struct err e = { 0 };
	FUZZ_CHECK(policy_tighten(p, l->timeout_s, l->memory_mb, &e) == 0, "tighten to itself: %s", e.msg);
	FUZZ_CHECK(policy_tighten(p, l->max_timeout_s * 2, -1, &e) < 0, "loosened max_timeout_s");

	/* Paths resolve against a root that does not exist: realpath fails
	 * for every relative entry, and the messages must still be sane. */
	e = (struct err){ 0 };
	if (policy_resolve(p, "/nonexistent-psm-fuzz-root", &e) < 0)
		FUZZ_CHECK(e.msg[0] && !strchr(e.msg, '\n'), "resolve message: %s", e.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *text = fuzz_dup(data, size);
	struct err e = { 0 };
	struct policy *p = NULL;
	int rc = policy_parse((const char *)text, size, "SKILL.md", &p, &e);
	if (rc == 0) {
		FUZZ_CHECK(p != NULL, "success without a policy");
		check_accepted(p);
		policy_free(p);
	} else {
		FUZZ_CHECK(rc < 0 && p == NULL, "rc %d with a policy", rc);
		FUZZ_CHECK(e.code < 0 && e.msg[0], "an error without a message");
		FUZZ_CHECK(strncmp(e.msg, "SKILL.md", 8) == 0, "message does not name the file: %s", e.msg);
		for (const char *c = e.msg; *c; c++)
			FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in: %s",
				   (unsigned char)*c, e.msg);
	}
	free(text);
	return 0;
}
