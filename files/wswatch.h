/* The workspace's disk use, watched from the trusted side while a call
 * runs (limits.max_workspace_mb).  The code could otherwise fill the disk
 * in one call: RLIMIT_FSIZE bounds each file, not their number.
 *
 * A walk of the workspace's allocated blocks (artifacts.c: art_disk_usage)
 * runs on a worker thread, never on the loop; the first walk, WSWATCH_MIN_MS
 * into the call, is its baseline, then one runs every WSWATCH_MIN_MS or four
 * times as long as the last walk took, whichever is longer, so a huge tree
 * costs at most a fifth of one worker and a short call none.  The call is
 * over the limit when the workspace takes more than the limit and more than
 * its baseline: files that were there before (or written in the call's
 * first WSWATCH_MIN_MS) never stop it by themselves while it runs; the end
 * of the call is judged against the snapshot taken before it
 * (supervisor.c).
 *
 * Without namespaces the sandbox's private temp directory (TMPDIR, a
 * directory of the host's /tmp) is disk, or memory where /tmp is a tmpfs,
 * that no mount caps: when one is given it is walked too, and the two
 * count together against the limit.
 * Attack: with max_workspace_mb 20, a cell wrote 400 MB to TMPDIR and the
 * call said ok; on a tmpfs /tmp, host memory held until the server ended.
 * The fs_write directories outside the workspace count with it too.
 * Attack: 300 MB in results/ under max_workspace_mb 20 ended ok.
 *
 * What a walk cannot see (directories nested deeper than ART_MAX_DEPTH,
 * more entries than it visits, a directory it cannot read) counts as over
 * the limit, never as zero: over() gets why.
 * Attack: 3 x 100 MB under 70 nested directories, with max_workspace_mb
 * 20, ended ok in every mode (the walk skipped depth 64 and beyond). */
#ifndef FILES_WSWATCH_H
#define FILES_WSWATCH_H

#include "../rpc/loop.h"
#include "../rpc/work.h"
#include "fsafe.h"

#define WSWATCH_MIN_MS 250.0

struct wswatch;

/* Starts watching for one call; over(arg, bytes, unseen) is called (once,
 * on the loop) when the workspace (plus scratch, a directory or NULL, and
 * the n directories of fs_write outside the workspace) grew past
 * limit_bytes, or when a walk could not see all of it (unseen says what,
 * else it is NULL). */
struct wswatch *wswatch_start(struct loop *loop, struct work *work, const struct workspace *ws, const char *scratch,
			      const char *const *fs_write, size_t n, unsigned long long limit_bytes,
			      void (*over)(void *arg, unsigned long long bytes, const char *unseen), void *arg);
/* What the scratch directory took at the last walk (0 before the first). */
unsigned long long wswatch_scratch_bytes(const struct wswatch *w);
/* The server itself has added `extra` bytes to the workspace since the
 * watch started (a session's snapshot it is writing): they count neither
 * against the limit nor as growth.  It only grows; NULL-safe. */
void wswatch_allow(struct wswatch *w, unsigned long long extra);
/* Stops watching and frees w (NULL-safe); a walk in progress is abandoned. */
void wswatch_stop(struct wswatch *w);

#endif
