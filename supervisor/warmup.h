/* Learned warm-up, the trusted side (docs/WARMUP.md).
 *
 * Sessions report, with each result, the modules their cell imported that
 * the zygote did not hold.  Those reports come from hostile code: each name
 * is checked here (a dotted identifier of bounded length, a bounded count
 * per report) and is only ever a name to the zygote, which loads nothing
 * but installed code (interp/warm.c, bootstrap warm_probe).  After a reply,
 * the server sends the zygote the names it has not been sent yet; the
 * zygote answers each with W_WARMED, and only names it loaded are learned.
 *
 * The learned list is per project (by canonical ROOT), at most WARMUP_MAX
 * names, most recently used first, and kept across restarts in the user's
 * state directory ($XDG_STATE_HOME/python-sandbox-mcp/warm-<sha256 of
 * ROOT>.json, mode 0600, common/userdir.c): never in the project, so a
 * cloned repository cannot bring a list of its own. */
#ifndef SUPERVISOR_WARMUP_H
#define SUPERVISOR_WARMUP_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../policy/policy.h"
#include "../proto/zmsg.h"
#include "../files/fsafe.h"

#define WARMUP_MAX 32          /* names learned per project */
#define WARMUP_REPORT_MAX 16   /* names taken from one result */
#define WARMUP_NAME_MAX 128

enum warmup_mode { WARMUP_ON, WARMUP_OFF, WARMUP_CLEAR };

struct warmup;

/* The store of this project.  Always returns an object; with WARMUP_OFF it
 * learns and loads nothing; WARMUP_CLEAR removes the saved list first, then
 * works as WARMUP_ON.  When no private state directory can be used (or it
 * lies where the sandboxed code can write), names are learned for this run
 * only, and the log says why. */
struct warmup *warmup_new(const struct workspace *ws, const struct policy *p, enum warmup_mode mode);
void warmup_free(struct warmup *w);

/* A dotted identifier: ASCII letters, digits and _, at most 8 parts of at
 * most 64 characters, at most WARMUP_NAME_MAX in all. */
bool warmup_name_valid(const char *name);

/* Why a valid name is never sent to a zygote, or NULL. */
const char *warmup_name_denied(const char *name);

/* A session's report (the n "imports" of its result, proto/result.h;
 * untrusted): new valid names become candidates, known ones move to the
 * front. */
void warmup_note(struct warmup *w, const char *const *imports, size_t n);

/* A reply went out, and the zygote is ready: the W_WARM body that sends it
 * every name it has not been sent yet (malloc'd), or NULL; *n the number
 * of names, each of which the zygote answers once (W_WARMED).  Never
 * before the first reply of a zygote, so the learned list never delays the
 * first result. */
char *warmup_after_reply(struct warmup *w, int *n);

/* Whether a call is running or queued: while one is, the zygote starts no
 * new warm-up work (a probe, an import step), since every reply waits for
 * the zygote (it settles the session) and a spawn waits for its loop.  The
 * W_WARM body to send when that changed, or NULL; warmup_busy_sent says
 * it went out. */
char *warmup_busy(const struct warmup *w, bool busy);
void warmup_busy_sent(struct warmup *w, bool busy);

/* A new zygote starts: it holds nothing learned yet. */
void warmup_zygote_started(struct warmup *w);

/* The zygote's W_WARMED for one name: false when the zygote was not sent
 * that name, or answered it already (it is then broken, and ended). */
bool warmup_outcome(struct warmup *w, const struct zmsg_warmed *m);

/* The learned names, most recent first (for the tests and the logs). */
size_t warmup_count(const struct warmup *w);
const char *warmup_name(const struct warmup *w, size_t i);

#endif
