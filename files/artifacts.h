/* The workspace's files: snapshots (to list what a call created or
 * modified) and list_artifacts.  Walks never follow symlinks. */
#ifndef FILES_ARTIFACTS_H
#define FILES_ARTIFACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "../common/err.h"
#include "fsafe.h"

struct art_entry {
	char *rel;              /* path relative to the workspace, owned */
	off_t bytes;
	off_t alloc;            /* allocated on disk: st_blocks * 512 */
	struct timespec mtime;
	dev_t dev;
	ino_t ino;
	bool is_symlink;        /* listed, never followed */
};

struct art_list {
	struct art_entry *v;
	size_t n, cap;
	bool truncated;         /* stopped at max_entries */
};

struct art_scan_opts {
	const char *subdir;     /* relative to the workspace, "" for all */
	const char *pattern;    /* fnmatch glob on the file name, or NULL */
	bool include_hidden;    /* names starting with '.' (files and dirs) */
	size_t max_entries;     /* 0 = 100000; also caps the directories visited */
	const char *const *exclude; /* NULL-terminated workspace-relative paths
	                             * skipped with all beneath them (the
	                             * server's snapshot passes ".logs"); may be NULL */
};

/* Whether rel (workspace-relative) is one of dirs (NULL-terminated) or lies
 * beneath one. */
bool art_path_under(const char *rel, const char *const *dirs);

/* What the server and the zygote write in the workspace for themselves:
 * .logs (whole outputs, named in replies and readable as resources by
 * URI), .cache (matplotlib's font cache) and .sessions (saved sessions).
 * None is a call's artifact, and none is listed as a resource, nor by
 * list_artifacts unless hidden files are asked for. */
extern const char *const art_server_dirs[];

/* Directories deeper than this below the scanned one are not entered (and
 * the list is marked truncated). */
#define ART_MAX_DEPTH 64

/* Regular files and symlinks beneath the workspace, sorted by rel.  out
 * is initialised here (art_list_free it even after an error).  Which
 * entries are kept when the list is truncated is unspecified. */
int art_scan(const struct workspace *ws, const struct art_scan_opts *o, struct art_list *out, struct err *e);
void art_list_free(struct art_list *l);

/* What the regular files of l take: each by the larger of its size and its
 * allocated blocks, so a sparse file counts by its size (it may be filled
 * in place later, and copying or reading it costs that much) and one
 * with blocks preallocated past its end (fallocate KEEP_SIZE) by those. */
unsigned long long art_list_bytes(const struct art_list *l);

enum art_change { ART_CREATED, ART_MODIFIED };

/* Calls fn for each entry of `after` that is absent from `before`
 * (created) or differs in size, mtime or inode (modified).  Both sorted. */
void art_diff(const struct art_list *before, const struct art_list *after,
	      void (*fn)(const struct art_entry *en, enum art_change c, void *arg), void *arg);

/* SHA-256 of a file beneath the workspace (no symlinks), lowercase hex.
 * Reads at most max bytes: a file whose size (its apparent size: a sparse
 * file of 1 GiB costs the reading of 1 GiB of zeros) is larger, or that
 * grows past max while it is read, is -EFBIG without a hash.  *cost (may be
 * NULL) gets the bytes read, to charge to the caller's budget. */
int art_sha256(const struct workspace *ws, const char *rel, off_t max, char hex[65], off_t *cost, struct err *e);

/* What the workspace takes on disk: the allocated blocks of everything
 * beneath it (files, directories, the server's logs), hidden or not, with
 * no symlink followed and each directory entry visited once.  Visits at
 * most max_entries entries (0: 1000000); *complete is false when it
 * stopped there, and *bytes then counts what it saw. */
int art_disk_usage(const struct workspace *ws, size_t max_entries, unsigned long long *bytes, bool *complete,
		   struct err *e);

/* The same for a directory outside the workspace that the sandbox writes
 * (the namespace-free mode's private temp directory): `dir` is opened
 * with no symlink in its last component.  0, or -errno when it cannot be
 * opened (*bytes 0). */
int art_dir_usage(const char *dir, size_t max_entries, unsigned long long *bytes, bool *complete);

#endif
