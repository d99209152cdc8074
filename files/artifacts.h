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

/* What a walk could not see.  Whatever it is counts as over any limit on
 * the workspace's size, never as zero (art_unseen_text says why). */
enum {
	ART_UNSEEN_DEPTH = 1,      /* directories nested deeper than ART_MAX_DEPTH */
	ART_UNSEEN_ENTRIES = 2,    /* more entries than the walk visits */
	ART_UNSEEN_UNREADABLE = 4, /* a directory or an entry it could not open or stat */
	ART_UNSEEN_NAME = 8,       /* a path longer than PATH_MAX */
};

struct art_list {
	struct art_entry *v;
	size_t n, cap;
	bool truncated;         /* stopped at max_entries, or unseen is set */
	unsigned unseen;        /* ART_UNSEEN_* */
	char where[256];        /* the first place not seen (workspace-relative) */
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

/* A bound on every walk of the calling thread together, for a walk done
 * where waiting is costly: the event loop's own snapshot of a small
 * workspace (mcp/exec.c).  Between art_budget_begin(n, ms) and
 * art_budget_end, the walks of this thread (art_scan and the usage walks)
 * visit at most n entries between them, counted as they are read from
 * their directories, and stop at the first entry read after ms
 * milliseconds; a caller about to read a file's bytes asks
 * art_budget_refuse() first.
 * Once the budget is spent every walk stops where it is, and
 * art_budget_end() returns true: what they returned is then partial and
 * must be thrown away.  n == 0 bounds nothing and only counts.  *visited
 * (may be NULL) gets the entries the walks visited. */
void art_budget_begin(size_t n, double ms);
/* Inside a bounded budget: true, and the budget counts as spent (the
 * caller reads nothing).  Otherwise false. */
bool art_budget_refuse(void);
bool art_budget_end(size_t *visited);

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

/* What a tree takes on disk, as a walk of it saw. */
struct art_usage {
	unsigned long long blocks;  /* the allocated blocks of every entry */
	unsigned long long charged; /* blocks, but each regular file by the larger
	                             * of its size and its blocks (art_list_bytes) */
	size_t seen;                /* entries visited */
	unsigned unseen;            /* ART_UNSEEN_*: then the sums are too low */
	char where[256];            /* the first place not seen, under the tree */
};

/* Adds b to a (the sums, the flags, a's first place not seen or else b's). */
void art_usage_add(struct art_usage *a, const struct art_usage *b);

/* Why a walk (unseen: ART_UNSEEN_* of a usage or a list) did not see
 * everything, for a reply: "directories nested deeper than 64 levels
 * (first: workspace/d/d/...)" ...; `shown` names the tree ("workspace").
 * "" when unseen is 0. */
const char *art_unseen_text(unsigned unseen, const char *shown, const char *where, char *buf, size_t n);

/* What the workspace takes on disk: everything beneath it (files,
 * directories, the server's logs, caches and saved sessions), hidden or
 * not, with no symlink followed and each directory entry visited once.
 * Visits at most max_entries entries (0: 1000000).  A directory it cannot
 * enter (too deep, unreadable) or an entry past the last it visits is
 * marked in u->unseen, never counted as zero silently. */
int art_disk_usage(const struct workspace *ws, size_t max_entries, struct art_usage *u, struct err *e);

/* The same for a directory beneath the workspace (rel; a missing one
 * takes nothing). */
int art_ws_dir_usage(const struct workspace *ws, const char *rel, size_t max_entries, struct art_usage *u);

/* The same for a directory outside the workspace that the sandbox writes
 * (the namespace-free mode's private temp directory, an fs_write
 * directory): `dir` is opened with no symlink in its last component; the
 * workspace, where it lies beneath `dir`, is left out (skip_ws, may be
 * NULL).  0, or -errno when it cannot be opened: then u->unseen says so,
 * except for a directory that does not exist (it takes nothing). */
int art_dir_usage(const char *dir, const struct workspace *skip_ws, size_t max_entries, struct art_usage *u);

/* The directories outside the workspace whose disk counts with it against
 * max_workspace_mb: scratch (may be NULL), then each of fs_write (n
 * absolute paths) that is neither beneath the workspace (counted with it)
 * nor beneath another one listed.  NULL-terminated, owned (art_dirs_free). */
char **art_outside_dirs(const struct workspace *ws, const char *scratch, const char *const *fs_write, size_t n);
char **art_dirs_dup(const char *const *dirs);
void art_dirs_free(char **dirs);

/* Everything that counts against max_workspace_mb at once: the workspace
 * (unless with_ws is false) and the directories `outside`
 * (art_outside_dirs).  *scratch_bytes (may be NULL) gets the blocks of the
 * first outside directory when it is the scratch one (has_scratch). */
void art_limit_usage(const struct workspace *ws, bool with_ws, const char *const *outside, bool has_scratch,
		     struct art_usage *u, unsigned long long *scratch_bytes);

/* One measurement of all that max_workspace_mb bounds (the workspace, the
 * scratch directory or NULL, the n fs_write directories), for code run
 * outside the calls' own snapshots (a replayed run): compare u->charged
 * before and after as the end-of-call check does (each file by the larger
 * of its size and its blocks); u->unseen set counts as over the limit
 * (art_unseen_text(u->unseen, "", u->where, ...) says why).  It walks:
 * call it off the loop. */
void art_limit_measure(const struct workspace *ws, const char *scratch, const char *const *fs_write, size_t n,
		       struct art_usage *u);

#endif
