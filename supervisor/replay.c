/* The replay log: "after this call, a checkpoint, or a line in the log?"
 *
 * A checkpoint (a fork of the session, frozen) after every call that keeps
 * its state costs the fork and then a copy of every page the next call
 * writes.  Most cells are cheap to run again, so after such a cell the
 * server only logs it (its code, its duration, a digest of its output),
 * here in the server's memory (the session is hostile: nothing of the log
 * lives in it).  A rollback resumes the last checkpoint and runs the logged
 * cells again, in order, comparing each one's output with the first run's;
 * the rolled-back call's reply says what was run again and what differed.
 * A checkpoint is still taken when running the cell again would be unsafe
 * or costly (replay_decide), and it empties the log.
 *
 * A hostile cell can make its second run differ, fail or run long: that
 * changes only what the reply says about its own session's state, within
 * the bounds here (each replayed cell has the timeout of twice its first
 * duration plus a second, and the call's watchdog); everything it can do
 * in a replay it could do by being sent again. */
#include "private.h"
#include "replay.h"
#include "kview.h"

#include "../common/hmac.h"
#include "../common/pstat.h"
#include "../files/artifacts.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* What of each output is kept to show where two runs part. */
#define SHOWN_MAX 400

/* A journal is the log written down (persist.h): its bounds are the log's. */
_Static_assert(JOURNAL_MAX_CELLS == REPLAY_MAX_CELLS, "a journal holds the log");
_Static_assert(JOURNAL_SHOWN_MAX >= SHOWN_MAX, "a journal keeps what the log shows");
_Static_assert(REPLAY_MAX_CODE + REPLAY_MAX_CELLS * (100u + SHOWN_MAX) < JOURNAL_MAX_BYTES, "a journal fits its bound");

struct replay_entry {
	int cell;
	char *code;
	double ms;            /* its call's duration: what bounds its run again */
	enum call_status first_status; /* how it ended the first time */
	unsigned char digest[HMAC_LEN];
	bool whole;          /* the digest covers the whole output */
	char *shown;
};

/* A cell being run again: a run of the supervisor's own, never handed to
 * the layer above. */
struct replay_run {
	struct run run;
	struct session *s;
	bool load;                /* the empty cell that loads a saved state with a journal */
	struct replay_entry e;
	struct ws_job *job;       /* its workspace walk under way, or NULL */
	unsigned long long ws0;   /* what the workspace took before it */
};

struct replay {
	struct replay_entry log[REPLAY_MAX_CELLS];
	int n;
	size_t code_bytes;
	double ms;               /* the log's prices, against the budget */
	struct run *pending;     /* logged in settled: its entry at finish_cur */
	double pending_ms, pending_price, pending_copied;
	/* The pages the last checkpoint shared with the session, and the
	 * faults the log's prices left out as their copying (copy_paid). */
	double shared_pages, copied;
	/* The least a copy-on-write fault has been seen to cost the session
	 * at most (us; 0: none seen yet): see replay_log_instead. */
	double fault_us;
	/* What checkpoints of this session cost (ms), which prices the
	 * budget (replay_budget_ms): the one the log starts from, its own
	 * time (asked to accepted) and the copying the calls since made
	 * (copy_paid); and the one before it, all told. */
	double base_ckpt_ms, period_copy_ms, last_fork_ms;
	/* The cells of the replay under way, kept until it ends: a rollback
	 * during it resumes the copy it started from, and the cells run
	 * since are run once more (at most once: second). */
	struct replay_entry again[REPLAY_MAX_CELLS];
	int n_again;
	int stop_cell;           /* the last cell this pass runs; a checkpoint after it */
	bool second;
	/* A replay under way (after a rollback, or of a journal after a
	 * restore: journal). */
	bool active, journal;
	enum call_state journal_state; /* what the loaded state was: restored or forked */
	struct run *to_hold;     /* the rolled-back call, until finish_cur hands it over */
	struct run *held;        /* ... whose reply waits for the replay */
	char *final_note;        /* the replay ended before the call was held */
	/* The cell whose state the process holds, and the one the last
	 * checkpoint holds (0: the fresh interpreter's). */
	int state_cell, base_cell;
	int from_cell;           /* the base the replay started from */
	int first, last, last_ok;
	int failed;              /* the cell that failed when run again, or 0 */
	bool lost;               /* ... and no copy of the state was left */
	double deadline;         /* loop_now_ms() by which the whole replay is over */
	char failed_why[240];
	int failed2;             /* the cell that failed when run once more, or 0 */
	char failed2_why[240];
	char differed[900];
	int n_differed;
	double t0;
	/* What the workspace took after the last cell run again (ws_walk),
	 * the next one's before. */
	bool ws_known;
	unsigned long long ws_last;
	/* The kernel's view of the session when cell kv_cell was sent. */
	int kv_cell;
	struct kview kv0;
	/* Whether the io of the process of generation io_gen refused the
	 * server (kview_read: not tried again). */
	bool io_denied;
	unsigned long io_gen;
	/* The view read at the freeze of the last cell judged (kv_after,
	 * with its one thread's schedstat line), which stands for the next
	 * cell's view before it when the session has not run since
	 * (replay_cell_sent): the process of generation kv_gen (no process
	 * put in its place since) and its checkpoint kv_ckpt then. */
	bool kv_kept;
	pid_t kv_ckpt;
	unsigned long kv_gen;
	struct kview kv_after;
};

/* ------------------------------------------------------------ the decision */

const char *replay_verdict_name(enum replay_verdict v)
{
	static const char *const names[] = {
		[REPLAY_LOG] = "log",
		[REPLAY_FORK_NO_BASE] = "fork: no checkpoint yet",
		[REPLAY_FORK_KIND] = "fork: not a plain kept state",
		[REPLAY_FORK_WROTE] = "fork: it changed the workspace",
		[REPLAY_FORK_THREADS] = "fork: more than one thread",
		[REPLAY_FORK_CODE] = "fork: the code may not run the same twice",
		[REPLAY_FORK_EFFECT] = "fork: an effect past the session's memory",
		[REPLAY_FORK_FULL] = "fork: the log is full",
		[REPLAY_FORK_BUDGET] = "fork: the budget is spent",
	};
	return (size_t)v < N_ELEMENTS(names) ? names[v] : "?";
}

static bool ident_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* After an identifier ending at p: whether a call with something in its
 * parentheses follows ("seed(0)", not "seed()"). */
static int call_args(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '(')
		return -1; /* not a call */
	p++;
	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	return *p != ')';
}

/* The words replay_code_unsafe looks for, each as a whole identifier. */
enum word_kind {
	/* Makes a second run see another value than the first: the clock, the
	 * operating system's entropy, the process id (a resumed copy is
	 * another process), threads (they run on between calls), temporary
	 * files (outside the workspace, so the server's diff does not see them
	 * written).  Code that builds the names at run time (getattr,
	 * __import__ of a string) is a hostile cell's own affair: its replay
	 * may differ, which the comparison of outputs reports. */
	W_NONDET,
	/* A file read: the project and the workspace can change between calls
	 * (the agent edits a module, the user replaces a CSV), and a cell run
	 * again would read the new bytes, so the state after the rollback
	 * would not be the one before it, often with the same output.  A
	 * checkpoint keeps what was read the first time. */
	W_INPUT,
	/* An import: a module of the project or the workspace is read from
	 * disk again on replay, one of the installed Python is the same bytes
	 * (apt does not run between two calls of a session), one already
	 * loaded is not read at all.  Which it was, the session says
	 * (import_read in its result, the bootstrap's _import_read: the
	 * "import" audit events of the cell, each module's file).  A session
	 * that lies about it gets its own cell logged instead of checkpointed:
	 * a rollback of its own state that may differ, which the comparison
	 * of outputs reports, and which its code could do to its own state
	 * anyway. */
	W_IMPORT,
	/* Seeds a generator when called with an argument; without one it is
	 * seeded from the operating system's entropy. */
	W_SEEDER,
	/* Reaches past the session's memory: a file written or removed, the
	 * network, a program started, a database.  Run again, it would do it
	 * twice (a payment posted twice, a line appended twice), which no
	 * rollback can undo.  The first filter only: the kernel's view of the
	 * call (kview_effect) catches what a function defined earlier does
	 * without naming it, and what it cannot see (a socket opened and
	 * closed within the cell) these words and a checkpoint cover. */
	W_EFFECT,
	/* The same, only as os.NAME: df.rename and list.remove are common
	 * and change nothing outside memory. */
	W_OSCALL,
	/* write: an effect, but for the session's own output (sys.stdout.write,
	 * os.write(1, ...)), which the server reads and compares. */
	W_WRITE,
};

static const struct {
	const char *w;
	enum word_kind kind;
} code_words[] = {
	{ "time", W_NONDET }, { "perf_counter", W_NONDET }, { "perf_counter_ns", W_NONDET },
	{ "monotonic", W_NONDET }, { "monotonic_ns", W_NONDET }, { "process_time", W_NONDET },
	{ "process_time_ns", W_NONDET }, { "time_ns", W_NONDET }, { "thread_time", W_NONDET },
	{ "clock_gettime", W_NONDET }, { "now", W_NONDET }, { "today", W_NONDET }, { "utcnow", W_NONDET },
	{ "urandom", W_NONDET }, { "getrandom", W_NONDET }, { "secrets", W_NONDET }, { "uuid1", W_NONDET },
	{ "uuid4", W_NONDET }, { "SystemRandom", W_NONDET }, { "getrandbits", W_NONDET }, { "getpid", W_NONDET },
	{ "tempfile", W_NONDET }, { "mkstemp", W_NONDET }, { "mkdtemp", W_NONDET }, { "gettempdir", W_NONDET },
	{ "NamedTemporaryFile", W_NONDET }, { "TemporaryFile", W_NONDET }, { "threading", W_NONDET },
	{ "Thread", W_NONDET }, { "multiprocessing", W_NONDET }, { "concurrent", W_NONDET }, { "asyncio", W_NONDET },
	{ "socket", W_NONDET }, { "__import__", W_NONDET }, { "importlib", W_NONDET }, { "exec", W_NONDET },
	{ "fork", W_NONDET },
	{ "import", W_IMPORT }, { "open", W_INPUT }, { "glob", W_INPUT }, { "listdir", W_INPUT }, { "scandir", W_INPUT },
	{ "walk", W_INPUT }, { "iterdir", W_INPUT }, { "exists", W_INPUT }, { "isfile", W_INPUT }, { "isdir", W_INPUT },
	{ "stat", W_INPUT }, { "lstat", W_INPUT }, { "getmtime", W_INPUT }, { "getsize", W_INPUT },
	{ "fromfile", W_INPUT }, { "genfromtxt", W_INPUT }, { "imread", W_INPUT }, { "memmap", W_INPUT },
	{ "ExcelFile", W_INPUT }, { "HDFStore", W_INPUT }, { "read", W_INPUT }, { "readline", W_INPUT },
	{ "readlines", W_INPUT }, { "readlink", W_INPUT }, { "load", W_INPUT }, { "loadtxt", W_INPUT },
	{ "seed", W_SEEDER }, { "default_rng", W_SEEDER }, { "RandomState", W_SEEDER }, { "Random", W_SEEDER },
	{ "Generator", W_SEEDER }, { "PCG64", W_SEEDER },
	/* the network */
	{ "urlopen", W_EFFECT }, { "urlretrieve", W_EFFECT }, { "urllib", W_EFFECT }, { "urllib3", W_EFFECT },
	{ "requests", W_EFFECT }, { "httpx", W_EFFECT }, { "aiohttp", W_EFFECT }, { "http", W_EFFECT },
	{ "HTTPConnection", W_EFFECT }, { "HTTPSConnection", W_EFFECT }, { "ftplib", W_EFFECT }, { "smtplib", W_EFFECT },
	{ "connect", W_EFFECT }, { "create_connection", W_EFFECT }, { "sendall", W_EFFECT }, { "sendto", W_EFFECT },
	{ "send", W_EFFECT }, { "webbrowser", W_EFFECT },
	/* programs */
	{ "subprocess", W_EFFECT }, { "Popen", W_EFFECT }, { "popen", W_EFFECT }, { "system", W_EFFECT },
	{ "posix_spawn", W_EFFECT }, { "posix_spawnp", W_EFFECT }, { "execv", W_EFFECT }, { "execve", W_EFFECT },
	{ "execvp", W_EFFECT }, { "execvpe", W_EFFECT }, { "execl", W_EFFECT }, { "execle", W_EFFECT },
	{ "execlp", W_EFFECT }, { "kill", W_EFFECT }, { "killpg", W_EFFECT }, { "ctypes", W_EFFECT }, { "cffi", W_EFFECT },
	/* databases */
	{ "sqlite3", W_EFFECT }, { "execute", W_EFFECT }, { "executemany", W_EFFECT }, { "executescript", W_EFFECT },
	{ "commit", W_EFFECT }, { "cursor", W_EFFECT }, { "create_engine", W_EFFECT }, { "sqlalchemy", W_EFFECT },
	{ "psycopg", W_EFFECT }, { "psycopg2", W_EFFECT }, { "pymysql", W_EFFECT },
	/* files written, moved or removed (write*, save* and to_* calls below) */
	{ "write", W_WRITE }, { "writelines", W_EFFECT }, { "save", W_EFFECT }, { "savefig", W_EFFECT },
	{ "tofile", W_EFFECT }, { "dump", W_EFFECT }, { "remove", W_OSCALL }, { "unlink", W_EFFECT },
	{ "rmdir", W_EFFECT }, { "rmtree", W_EFFECT }, { "rename", W_OSCALL }, { "renames", W_EFFECT },
	{ "replace", W_OSCALL },
	{ "mkdir", W_EFFECT }, { "makedirs", W_EFFECT }, { "truncate", W_EFFECT }, { "ftruncate", W_EFFECT },
	{ "fallocate", W_EFFECT }, { "posix_fallocate", W_EFFECT }, { "symlink", W_EFFECT }, { "chmod", W_EFFECT },
	{ "chown", W_EFFECT }, { "utime", W_EFFECT }, { "touch", W_EFFECT }, { "shutil", W_EFFECT },
	{ "copyfile", W_EFFECT }, { "copyfileobj", W_EFFECT }, { "copy2", W_EFFECT }, { "copytree", W_EFFECT },
	{ "mmap", W_EFFECT }, { "ZipFile", W_EFFECT }, { "tarfile", W_EFFECT }, { "ExcelWriter", W_EFFECT },
	{ "to_sql", W_EFFECT },
};

/* pandas' to_* that only convert (no file, no buffer): the other to_*
 * calls (to_csv, to_parquet, to_excel, to_pickle, to_hdf...) write. */
static const char *const to_pure[] = {
	"to_numpy", "to_dict", "to_list", "to_frame", "to_datetime", "to_numeric", "to_timedelta", "to_string",
	"to_records", "to_period", "to_timestamp", "to_series", "to_flat_index", "to_pydatetime", "to_offset",
	"to_tuples", "to_coo", "to_dense", "to_sparse", "to_julian_date", "to_xarray",
};

/* Whether b[0..len) is a call of a writer: write_text(, writerow(,
 * save_model(, to_csv(... (a prefix, and a call, so that a name like
 * saved or writer_count is no effect). */
static bool writer_call(const char *b, size_t len, const char *after)
{
	bool to = len > 3 && memcmp(b, "to_", 3) == 0;
	if (!(len > 5 && memcmp(b, "write", 5) == 0) && !(len > 4 && memcmp(b, "save", 4) == 0) && !to)
		return false;
	if (call_args(after) < 0)
		return false;
	for (size_t i = 0; to && i < N_ELEMENTS(to_pure); i++)
		if (strlen(to_pure[i]) == len && memcmp(to_pure[i], b, len) == 0)
			return false;
	return true;
}

bool replay_code_unsafe(const char *code, bool import_read, char *why, size_t n)
{
	bool random = false, seeded = false, unseeded = false;
	if (strstr(code, "/tmp") || strstr(code, "/dev/")) {
		snprintf(why, n, "%s", strstr(code, "/tmp") ? "/tmp" : "/dev/");
		return true;
	}
	for (const char *p = code; *p;) {
		if (!ident_char(*p) || (*p >= '0' && *p <= '9')) {
			p++;
			continue;
		}
		const char *b = p;
		while (ident_char(*p))
			p++;
		size_t len = (size_t)(p - b);
		for (size_t i = 0; i < N_ELEMENTS(code_words); i++) {
			if (strlen(code_words[i].w) != len || memcmp(code_words[i].w, b, len) != 0)
				continue;
			switch (code_words[i].kind) {
			case W_NONDET:
				snprintf(why, n, "%s", code_words[i].w);
				return true;
			case W_WRITE: {
				const char *q = p;
				while (*q == ' ' || *q == '\t')
					q++;
				bool own = (b - code >= 7 && (memcmp(b - 7, "stdout.", 7) == 0 || memcmp(b - 7, "stderr.", 7) == 0)) ||
					   (q[0] == '(' && (q[1] == '1' || q[1] == '2') && q[2] == ',');
				if (own)
					break;
				snprintf(why, n, "%s (an effect outside the session)", code_words[i].w);
				return true;
			}
			case W_OSCALL:
				if (b - code < 3 || memcmp(b - 3, "os.", 3) != 0 || (b - code > 3 && ident_char(b[-4])))
					break;
				/* fall through */
			case W_EFFECT:
				snprintf(why, n, "%s (an effect outside the session)", code_words[i].w);
				return true;
			case W_IMPORT:
				if (!import_read)
					break;
				/* fall through */
			case W_INPUT:
				snprintf(why, n, "%s (a file read)", code_words[i].w);
				return true;
			case W_SEEDER: {
				int a = call_args(p);
				if (a == 1)
					seeded = true;
				else if (a == 0)
					unseeded = true; /* default_rng(): seeded from the OS */
				break;
			}
			}
		}
		if (writer_call(b, len, p)) {
			snprintf(why, n, "%.*s (an effect outside the session)", (int)(len < 40 ? len : 40), b);
			return true;
		}
		/* read_csv, read_text, read_parquet, load_iris... */
		if (len > 5 && (memcmp(b, "read_", 5) == 0 || memcmp(b, "load_", 5) == 0)) {
			snprintf(why, n, "%.*s (a file read)", (int)(len < 40 ? len : 40), b);
			return true;
		}
		if (len == 6 && memcmp(b, "random", 6) == 0)
			random = true;
	}
	if (unseeded || (random && !seeded)) {
		snprintf(why, n, "%s", unseeded ? "a generator without a seed" : "random without a seed");
		return true;
	}
	return false;
}

enum replay_verdict replay_decide(const struct replay_facts *f, char *why, size_t n)
{
	if (!f->has_base)
		return REPLAY_FORK_NO_BASE;
	if (!f->plain)
		return REPLAY_FORK_KIND;
	if (f->wrote)
		return REPLAY_FORK_WROTE;
	if (f->effect) {
		if (why && n)
			snprintf(why, n, "%s", f->effect);
		return REPLAY_FORK_EFFECT;
	}
	if (f->threads != 1)
		return REPLAY_FORK_THREADS;
	if (!f->code || replay_code_unsafe(f->code, f->import_read, why, n))
		return REPLAY_FORK_CODE;
	if (f->log_n + 1 > REPLAY_MAX_CELLS || f->log_code + strlen(f->code) > REPLAY_MAX_CODE)
		return REPLAY_FORK_FULL;
	if (f->log_ms + f->ms >= f->budget_ms)
		return REPLAY_FORK_BUDGET;
	return REPLAY_LOG;
}

double replay_budget_ms(double fork_ms)
{
	const char *t = getenv("PSM_TEST_REPLAY_MS");
	if (t && *t) {
		char *end;
		double v = strtod(t, &end);
		if (*end == '\0' && v >= 0 && v < REPLAY_BUDGET_MS)
			return v;
	}
	/* Not a number (NaN fails every comparison): the floor. */
	double b = REPLAY_FORK_SHARE * fork_ms;
	if (!(b > REPLAY_BUDGET_MS))
		return REPLAY_BUDGET_MS;
	return b < REPLAY_BUDGET_MAX_MS ? b : REPLAY_BUDGET_MAX_MS;
}

/* ------------------------------------------------------------ the log */

static struct replay *rp_of(struct session *s)
{
	if (!s->rp)
		s->rp = xcalloc(1, sizeof *s->rp);
	return s->rp;
}

static void entry_free(struct replay_entry *e)
{
	free(e->code);
	free(e->shown);
	*e = (struct replay_entry){ 0 };
}

static void replay_clear(struct session *s)
{
	struct replay *rp = s->rp;
	if (!rp)
		return;
	for (int i = 0; i < rp->n; i++)
		entry_free(&rp->log[i]);
	rp->n = 0;
	rp->code_bytes = 0;
	rp->ms = 0;
	rp->pending = NULL;
}

static void again_clear(struct replay *rp)
{
	for (int i = 0; i < rp->n_again; i++)
		entry_free(&rp->again[i]);
	rp->n_again = 0;
}

void replay_checkpoint_taken(struct session *s, bool resumed)
{
	struct replay *rp = rp_of(s);
	log_debug("session %s: a checkpoint holds the state after cell %d%s", s->name, resumed ? rp->base_cell : rp->state_cell,
		  resumed ? " (the resumed copy's own)" : "");
	rp->kv_kept = false; /* the session ran to fork it */
	if (resumed)
		return; /* a resumed copy's own checkpoint holds the base again */
	s->ckpt_gen++;
	if (rp->base_ckpt_ms > 0 || rp->period_copy_ms > 0)
		rp->last_fork_ms = rp->base_ckpt_ms + rp->period_copy_ms;
	rp->base_ckpt_ms = s->ckpt_cost_ms;
	rp->period_copy_ms = 0;
	replay_clear(s);
	rp->base_cell = rp->state_cell;
}

/* The session's threads, as the kernel counts them (one pread of a kept
 * stat, not a listing); 0 when unknown. */
static int thread_count(pid_t hpid)
{
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)hpid);
	if (hpid <= 0 || pstat_read_kept(AT_FDCWD, NULL, path, &ps) < 0 || ps.num_threads < 0 || ps.num_threads > INT_MAX)
		return 0;
	return (int)ps.num_threads;
}

/* Where kview_read keeps, for the session's current process, that its io
 * refused the server. */
static bool *io_memo(const struct session *s, struct replay *rp)
{
	if (rp->io_gen != s->proc_gen) {
		rp->io_gen = s->proc_gen;
		rp->io_denied = false;
	}
	return &rp->io_denied;
}

/* The view kept at the last freeze, when it still holds: the same
 * process (the same generation: a process put in the session's place
 * may have been given the same pid), frozen with one
 * thread then and not put on a CPU since (its schedstat line unchanged:
 * the kernel counts every time a task runs, and a stopped process that
 * never ran made no thread, wrote, opened, closed, reaped and faulted
 * nothing), with the same checkpoint.  That spares about 15 system calls
 * of a warm call's 73 (the descriptors' listing and each one's fdinfo,
 * the io, the stats and the children lists).
 *
 * What other processes may change meanwhile without the session running
 * only makes the kept view more cautious than a fresh one, never less,
 * where it guards against running an effect again: the checkpoint's own
 * counters (it may reap its saver) only grow, and a child orphaned to the
 * session shows up at the freeze as one the cell started (a checkpoint,
 * as a fresh view would have it).  The one thing another process can
 * move back is the offset of a descriptor it shares (the checkpoint's
 * saver runs the state's own code, `__reduce__`): a cell that moves it
 * forward again by as much is then logged, and its run again after a
 * rollback reads other bytes.  That is the session's own code making its
 * own rollback differ, which it can do by itself; the run again is
 * compared with the first one's output and a difference is named in the
 * reply (replay_end), and it writes nothing more for it (wchar is the
 * session's own, which only grows while it runs). */
static bool kept_view_holds(struct session *s, struct replay *rp)
{
	char now[sizeof rp->kv_after.runs];
	return rp->kv_kept && s->proc_gen == rp->kv_gen && s->ckpt_hpid == rp->kv_ckpt && kview_runs(s, now, sizeof now) &&
	       strcmp(now, rp->kv_after.runs) == 0;
}

void replay_cell_sent(struct session *s, const struct run *c)
{
	struct replay *rp = rp_of(s);
	rp->kv_cell = c->cell;
	bool kept = kept_view_holds(s, rp);
	if (kept)
		rp->kv0 = rp->kv_after;
	else
		kview_read(s, &rp->kv0, io_memo(s, rp));
	log_debug("session %s: the kernel's view before cell %d: %s", s->name, c->cell,
		  kept ? "the one read at the last freeze (the session has not run since)" : "read now");
	rp->kv_kept = false;
}

bool replay_view_own(struct session *s, const struct run *c)
{
	struct replay *rp = rp_of(s);
	return rp->kv_cell == c->cell && rp->kv0.valid && rp->kv0.own;
}

/* What a call spent, at most, copying pages the last checkpoint shared
 * with the session (ms): its minor faults (the session's own, counted by
 * the kernel) at the least CPU time per fault seen in a call of this
 * session, never more than COPY_FAULT_US_MAX, as a share of the CPU time
 * the call took, that share of its duration (on a loaded machine a call
 * waits for a CPU too: with three CPU hogs on two CPUs, 195 us of the
 * call's time a fault); and in all the log no more faults than the pages
 * the session held when that checkpoint was taken: each is copied once,
 * the next write finds it the session's own.  A call of less than
 * COPY_CPU_MIN_MS of CPU (the clock ticks are too coarse) counts its
 * faults against its duration.  Sets rp->pending_copied, the faults it
 * counted. */
static double copy_paid(struct replay *rp, const struct kview *now, double call_ms)
{
	rp->pending_copied = 0;
	if (!rp->kv0.valid || !now->valid || now->minflt <= rp->kv0.minflt || call_ms <= 0)
		return 0;
	if (rp->n == 0) {
		/* The first cell after the checkpoint: the process held then
		 * what the checkpoint holds. */
		rp->shared_pages = rp->kv0.rss > 0 ? (double)rp->kv0.rss : 0;
		rp->copied = 0;
	}
	static double tick_ms;
	if (tick_ms == 0) {
		long hz = sysconf(_SC_CLK_TCK);
		tick_ms = hz > 0 ? 1000.0 / (double)hz : 10.0;
	}
	double cpu_ms = now->cpu_ticks > rp->kv0.cpu_ticks ? (double)(now->cpu_ticks - rp->kv0.cpu_ticks) * tick_ms : 0;
	bool by_cpu = cpu_ms >= COPY_CPU_MIN_MS;
	double base = by_cpu ? cpu_ms : call_ms;
	double faults = (double)(now->minflt - rp->kv0.minflt);
	/* A call of many faults bounds what one costs: all its time at most. */
	double per = base * 1000.0 / faults;
	if (faults >= COPY_LEARN_FAULTS && (rp->fault_us == 0 || per < rp->fault_us))
		rp->fault_us = per;
	double us = rp->fault_us > 0 && rp->fault_us < COPY_FAULT_US_MAX ? rp->fault_us : COPY_FAULT_US_MAX;
	double left = rp->shared_pages - rp->copied;
	rp->pending_copied = faults < left ? faults : left > 0 ? left : 0;
	double share = rp->pending_copied * us / 1000.0 / base;
	return call_ms * (share < 1 ? share : 1);
}

bool replay_log_instead(struct sup *sup, struct session *s, struct run *c)
{
	struct replay *rp = rp_of(s);
	/* What running it again costs: the call's time (a replay takes no
	 * checkpoint between the cells it runs, one after the last), and the
	 * first cell after a checkpoint also carries that checkpoint's cost
	 * (from the asking to its acceptance), for the one the replay ends
	 * with.  Each cell run again once took a checkpoint after it, priced
	 * into every cell: a hundred cheap cells then took 1.6 s to run
	 * again, and a copy-bound cell made the next one copy as much again.
	 *
	 * Not priced: what a call spent copying the pages the checkpoint
	 * before it shared (copy_paid).  A checkpoint makes the next call
	 * that rewrites a large array copy all of it (`a += 1` on 1 GiB: 4.1
	 * s on a VM whose copy-on-write fault costs 17 us, against 51 ms),
	 * so priced with it such a call was always over the budget: a
	 * checkpoint, and the next call copied the GiB again, call after call
	 * (98 times the time without checkpoints).  A rollback pays those
	 * copies once (the resumed copy takes its own checkpoint before the
	 * cells run again, which copy the same pages again); a checkpoint
	 * makes the calls after it pay them every time.  Each page is copied
	 * once, so a replay is bounded by the budget plus one copy of the
	 * state the checkpoint holds, and each cell run again still has its
	 * own deadline (twice its whole first duration and a second).
	 * Attack: a session that faults pages on purpose makes its calls look
	 * like copying: they are logged, and its own rollback runs them again
	 * within those bounds; no other session shares the estimate. */
	double call_ms = loop_now_ms() - c->t_start;
	double copy_ms = 0;
	struct replay_facts f = {
		.has_base = s->ckpt_pidfd >= 0,
		.plain = c->state == STATE_KEPT && !sup->stopping && !c->new_session,
		/* The diff of the workspace's files, and what the sandbox alone
		 * writes beside them (.cache, the private temp directory, fs_write
		 * directories outside): mcp/exec.c folds both into ws_changed.
		 * Not the workspace's whole size, which counts .logs and .sessions,
		 * where the server's own writes land (a long output's log). */
		.wrote = c->ws_changed,
		.code = c->code,
		/* Unknown without a result: as if it read. */
		.import_read = !c->result || c->result->import_read,
		.ms = call_ms,
		.log_n = rp->n,
		.log_code = rp->code_bytes,
		.log_ms = rp->ms,
	};
	/* Read only when nothing earlier in the table takes a checkpoint
	 * anyway (about 35 us; the log's own bookkeeping checks follow). */
	char effect[128];
	double kview_us = 0;
	if (f.has_base && f.plain && !f.wrote) {
		drain_all(s); /* every byte it wrote to its pipes, counted */
		struct kview *now = xmalloc(sizeof *now);
		double t0 = loop_now_ms();
		kview_read(s, now, io_memo(s, rp));
		kview_us = (loop_now_ms() - t0) * 1000.0;
		if (rp->kv_cell != c->cell)
			rp->kv0.valid = false;
		/* Readable when the cell went, the session was told not to
		 * read its own (replay_view_own): its result carries no word
		 * on its writes or descriptors to stand in for ours now, so
		 * the call counts as unseen (a checkpoint), never as clean.
		 * Attack: a function defined earlier writes into a pipe and
		 * dups it 300 times (more than the view holds); logged, the
		 * rollback wrote the line into the pipe a second time. */
		if (rp->kv0.own && !now->own)
			now->valid = false;
		f.effect = kview_effect(&rp->kv0, now, s->out.total_bytes + s->err.total_bytes, c->result, effect, sizeof effect);
		copy_ms = copy_paid(rp, now, call_ms);
		/* The view listed the frozen session's threads (no second
		 * listing); an unreadable view is an effect already. */
		f.threads = now->valid ? now->threads : thread_count(s->hpid);
		/* Kept for the next cell (kept_view_holds): read while stopped
		 * with one thread, its schedstat line with it. */
		rp->kv_kept = now->valid && now->own && now->threads == 1 && now->runs_known;
		if (rp->kv_kept) {
			rp->kv_after = *now;
			rp->kv_gen = s->proc_gen;
			rp->kv_ckpt = s->ckpt_hpid;
		}
		free(now);
	} else {
		f.threads = thread_count(s->hpid);
	}
	f.ms = call_ms - copy_ms + (rp->n == 0 && s->ckpt_cost_ms > 0 ? s->ckpt_cost_ms : 0);
	/* The budget, priced by what a checkpoint of this session costs: the
	 * last one all told, or the one the log starts from so far, whichever
	 * is more (the copies it forces come in the calls after it).
	 * Attack: a session that makes its checkpoints look dear (it delays
	 * its report, or faults on purpose) raises its own budget only, to
	 * REPLAY_BUDGET_MAX_MS at most: its own rollback runs more of its
	 * own cells again, each under its own deadline, the whole under
	 * twice their first durations and 2 s (queue_again). */
	rp->period_copy_ms += copy_ms;
	double fork_ms = rp->base_ckpt_ms + rp->period_copy_ms;
	if (rp->last_fork_ms > fork_ms)
		fork_ms = rp->last_fork_ms;
	f.budget_ms = replay_budget_ms(fork_ms);
	char why[128] = "";
	enum replay_verdict v = replay_decide(&f, why, sizeof why);
	log_debug("session %s: cell %d (%.0f ms, %.0f ms to run again): %s%s%s (%d logged, %.0f ms of a budget of %.0f ms for a checkpoint "
		  "costing %.0f ms; the kernel's view read in %.0f us; %.0f ms left out as copying for the checkpoint)",
		  s->name, c->cell, call_ms, f.ms, replay_verdict_name(v), *why ? ": " : "", why, rp->n, rp->ms, f.budget_ms, fork_ms,
		  kview_us, copy_ms);
	if (v != REPLAY_LOG)
		return false;
	rp->pending = c;
	rp->pending_ms = call_ms;
	rp->pending_price = f.ms;
	return true;
}

/* text (or "") with every occurrence of mark left out (malloc'd). */
static char *without(const char *text, const char *mark)
{
	if (!text)
		return xstrdup("");
	size_t ml = mark ? strlen(mark) : 0;
	char *out = xmalloc(strlen(text) + 1), *o = out;
	for (const char *p = text; *p;) {
		const char *hit = ml ? strstr(p, mark) : NULL;
		size_t n = hit ? (size_t)(hit - p) : strlen(p);
		memcpy(o, p, n);
		o += n;
		p += n + (hit ? ml : 0);
	}
	*o = 0;
	return out;
}

/* What the digest and the note see of a run's output: its status, every
 * byte it wrote to stdout and stderr (the streams' own digests, taken as
 * the server read them: the reply shows a head and a tail of a long
 * output, and a difference in the middle must not read as the same), its
 * value and its error.  Each part with its length, so that no two outputs
 * run together.  False when a stream's digest could not be taken: then
 * the two runs are not called the same.  The text the note quotes is the
 * reply's, without the path of the log file a long or binary output was
 * written to (the run again writes a log of its own). */
static bool digest_of(const struct session *s, const struct run *c, unsigned char out[HMAC_LEN], char **shown)
{
	static const unsigned char key[] = "python-sandbox-mcp replay digest";
	struct hmac *h = hmac_new(key, sizeof key - 1);
	const struct cell_result *r = c->result;
	const struct result_error *er = r && r->has_error ? &r->error : NULL;
	unsigned char streams[2][HMAC_LEN];
	bool whole = outbuf_digest(&s->out, streams[0]) && outbuf_digest(&s->err, streams[1]);
	const char *parts[] = {
		call_status_name(c->status), r && r->value ? r->value : "", er && er->type ? er->type : "",
		er && er->message ? er->message : "", er && er->traceback ? er->traceback : "",
	};
	memset(out, 0, HMAC_LEN);
	for (size_t i = 0; h && i < N_ELEMENTS(parts); i++) {
		uint64_t len = strlen(parts[i]);
		hmac_update(h, &len, sizeof len);
		hmac_update(h, parts[i], len);
	}
	if (h)
		hmac_update(h, streams, sizeof streams);
	if (!h || hmac_final(h, out) < 0)
		whole = false;
	hmac_free(h);
	if (shown) {
		char *out_text = without(c->out_text, c->out_log);
		char buf[SHOWN_MAX + 1];
		snprintf(buf, sizeof buf, "%s%s%s", out_text, *parts[1] && *out_text ? "\n" : "", *parts[1] ? parts[1] : parts[3]);
		*shown = xstrdup(buf);
		free(out_text);
	}
	return whole;
}

/* ------------------------------------------------------------ the replay */

/* A cell run again is held to max_workspace_mb like a call: everything
 * the limit bounds (the workspace with its hidden folders, the scratch
 * directory, each fs_write directory outside the workspace) is measured
 * before and after it by art_limit_measure, the same measure as a call's
 * (every file by the larger of its size and its blocks, so a sparse file
 * counts by its size), walked on a worker, and the end of the run judged
 * by the same check as a call's (call.c: collected).  What the walk cannot
 * see counts as over the limit after the run, with the reason.
 * Attack: a logged cell that writes a 300 MB sparse file only on its
 * second run, under max_workspace_mb 20; the replay reported it "with the
 * same output". */
struct ws_job {
	struct job j;
	struct replay_run *rr;    /* loop only; NULL once abandoned */
	const struct workspace *ws;
	char *scratch;
	const char *const *fs_write; /* the policy's, which outlives the job */
	size_t n_fs_write;
	bool after;
	unsigned long long bytes, scratch_bytes;
	char unseen[600];
	void (*then)(struct run *r, void *arg);
	void *arg;
};

static void ws_run(struct job *j)
{
	struct ws_job *w = (struct ws_job *)j;
	struct art_usage u;
	art_limit_measure(w->ws, w->scratch, w->fs_write, w->n_fs_write, &u);
	w->bytes = u.charged;
	if (u.unseen) {
		char buf[512];
		snprintf(w->unseen, sizeof w->unseen, "%s", art_unseen_text(u.unseen, "", u.where, buf, sizeof buf));
		w->bytes = w->after ? ULLONG_MAX : 0; /* unseen: over the limit after, nothing before */
	}
}

static void ws_done(struct job *j, bool abandoned)
{
	struct ws_job *w = (struct ws_job *)j;
	struct replay_run *rr = abandoned ? NULL : w->rr;
	if (rr) {
		rr->job = NULL;
		if (w->after) {
			rr->run.ws_before = rr->ws0;
			rr->run.ws_after = w->bytes;
			rr->run.scratch_after = w->scratch_bytes;
			snprintf(rr->run.unseen_after, sizeof rr->run.unseen_after, "%s", w->unseen);
			if (rr->s->rp) {
				rr->s->rp->ws_known = w->bytes != ULLONG_MAX;
				rr->s->rp->ws_last = w->bytes;
			}
		} else {
			rr->ws0 = w->bytes;
		}
		w->then(&rr->run, w->arg);
	}
	free(w->scratch);
	free(w);
}

static void ws_walk(struct run *r, bool after, void (*then)(struct run *r, void *arg), void *arg)
{
	struct replay_run *rr = (struct replay_run *)r;
	struct sup *sup = rr->s->sup;
	struct ws_job *w = xcalloc(1, sizeof *w);
	const char *scratch = sup_scratch(sup);
	const struct policy *p = sup->cfg.policy;
	bool list = p->fs_write == FS_WRITE_LIST;
	*w = (struct ws_job){ .j = { .run = ws_run, .done = ws_done }, .rr = rr, .ws = sup->cfg.ws, .after = after,
			      .scratch = scratch ? xstrdup(scratch) : NULL,
			      .fs_write = list ? (const char *const *)p->fs_write_paths : NULL,
			      .n_fs_write = list ? p->n_fs_write_paths : 0, .then = then, .arg = arg };
	rr->job = w;
	work_submit(sup->work, &w->j);
}

static void rr_prepare(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	/* No snapshot: its files are not reported to anyone.  The walk after
	 * the cell before it is this one's before: one walk a cell. */
	struct replay_run *rr = (struct replay_run *)r;
	struct replay *rp = rr->s->rp;
	if (rp && rp->ws_known) {
		rr->ws0 = rp->ws_last;
		ready(r, arg);
		return;
	}
	ws_walk(r, false, ready, arg);
}

static void rr_collect(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	ws_walk(r, true, ready, arg);
}

static bool rr_next_thumb(struct run *r, char *rel, size_t size)
{
	(void)r;
	(void)rel;
	(void)size;
	return false;
}

static void rr_thumb(struct run *r, const unsigned char *data, size_t len)
{
	(void)r;
	(void)data;
	(void)len;
}

static void rr_progress(struct run *r, double progress, double elapsed_s, const char *last_line)
{
	(void)r;
	(void)progress;
	(void)elapsed_s;
	(void)last_line;
}

static void rr_free(struct replay_run *rr)
{
	if (rr->job) {
		rr->job->rr = NULL;
		work_abandon(&rr->job->j);
	}
	run_outcome_free(&rr->run);
	entry_free(&rr->e);
	free(rr);
}

static void rr_drop(struct run *r)
{
	rr_free((struct replay_run *)r);
}

/* The supervisor ends its own runs itself (replay_run_ended, from
 * finish_cur): they are no run of the layer above, and their outcome
 * decides at once what the session runs next; none goes to the outbox. */
static const struct run_events replay_events = {
	.prepare = rr_prepare,
	.collect = rr_collect,
	.next_thumb = rr_next_thumb,
	.thumb = rr_thumb,
	.progress = rr_progress,
	.done = replay_run_ended,
	.drop = rr_drop,
};

double replay_timeout_ms(const struct run *c)
{
	const struct replay_run *rr = (const struct replay_run *)c;
	if (rr->load)
		return c->timeout_ms; /* its own, after the load's bound */
	double left = rr->s->rp ? rr->s->rp->deadline - loop_now_ms() : c->timeout_ms;
	left = left > 50.0 ? left : 50.0;
	return c->timeout_ms < left ? c->timeout_ms : left;
}

void replay_lost(struct sup *sup, struct session *s, struct run *c)
{
	/* The process died between two cells run again and no copy was
	 * left: they must not run in a new interpreter. */
	run_verdict(c, V_LOST, NULL);
	replay_run_ended(c);
	(void)sup;
}

bool replay_ended(struct sup *sup, struct session *s, struct run *c)
{
	if (!replay_is_run(c))
		return replay_call_done(sup, s, c);
	replay_run_ended(c);
	return true;
}

bool replay_is_run(const struct run *c)
{
	return c && c->ev == &replay_events;
}

int replay_cell(const struct run *c)
{
	return ((const struct replay_run *)c)->e.cell;
}

/* The session's bytes as the note shows them: printable ASCII, so that a
 * cut never splits a character and no control byte reaches the reply. */
static char printable(char ch)
{
	unsigned char u = (unsigned char)ch;
	return u == '\n' || u == '\t' ? ' ' : u < 0x20 || u >= 0x7f || u == '`' ? '?' : ch;
}

static void plain(char *dst, size_t n, const char *text)
{
	size_t k = 0;
	for (; text[k] && k + 1 < n; k++)
		dst[k] = printable(text[k]);
	dst[k] = '\0';
}

/* Quotes a window of text around offset at, on one line. */
static void quote(char *dst, size_t n, const char *text, size_t at)
{
	size_t len = strlen(text), k = 0;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	size_t from = at > 20 ? (at - 20 < len ? at - 20 : len) : 0;
	if (from > 0 && k + 3 < n) {
		memcpy(dst, "...", 3);
		k = 3;
	}
	for (size_t i = from; i < len && i < from + 60 && k + 4 < n; i++)
		dst[k++] = printable(text[i]);
	if (from + 60 < len && k + 4 < n) {
		memcpy(dst + k, "...", 3);
		k += 3;
	}
	dst[k] = '\0';
}

static void append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t n, const char *fmt, ...)
{
	size_t k = strlen(buf);
	if (k + 1 >= n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + k, n - k, fmt, ap);
	va_end(ap);
}

static void replay_end(struct sup *sup, struct session *s);
static bool run_once_more(struct session *s, int upto);

/* The cells queued to run again are not run after all. */
static void drop_queued(struct session *s)
{
	for (struct run **pp = &s->qhead; *pp;) {
		if (replay_is_run(*pp)) {
			struct run *q = *pp;
			*pp = q->next;
			rr_free((struct replay_run *)q);
		} else {
			pp = &(*pp)->next;
		}
	}
	queue_fix_tail(s);
}

/* A cell run again is over: its output compared with the first run's. */
static void load_ended(struct replay_run *rr);

void replay_run_ended(struct run *r)
{
	struct replay_run *rr = (struct replay_run *)r;
	struct session *s = rr->s;
	if (rr->load) {
		load_ended(rr);
		return;
	}
	struct replay *rp = s->rp;
	if (r->state == STATE_KEPT)
		rp->state_cell = rr->e.cell;
	char *shown = NULL;
	unsigned char d[HMAC_LEN];
	bool whole = digest_of(s, r, d, &shown) && rr->e.whole;
	if (r->status != rr->e.first_status || r->state == STATE_ROLLED_BACK || r->state == STATE_NEW) {
		/* Its status changed (it fails now, or ran out of time or
		 * memory): the session was rolled back to the copy the replay
		 * started from.  The cells before it run once more from there
		 * (run_once_more), so that the state is the one after the cell
		 * before it; the cells after it are not run again. */
		int *failed = rp->failed ? &rp->failed2 : &rp->failed;
		char *why = rp->failed ? rp->failed2_why : rp->failed_why;
		size_t wn = sizeof rp->failed_why;
		*failed = rr->e.cell;
		rp->lost = r->state == STATE_NEW; /* no checkpoint was left to go back to */
		const struct result_error *er = r->result && r->result->has_error ? &r->result->error : NULL;
		char et[80], em[120];
		plain(et, sizeof et, er && er->type ? er->type : "");
		plain(em, sizeof em, er && er->message ? er->message : "");
		if (r->status == CALL_ERROR && et[0])
			snprintf(why, wn, "%s: %s", et, em);
		else if (r->status == CALL_LIMITS && r->ws_bytes == ULLONG_MAX)
			snprintf(why, wn, "the workspace could not be walked whole after it, which counts as past limits.max_workspace_mb");
		else if (r->status == CALL_LIMITS && r->ws_bytes)
			snprintf(why, wn, "it grew the workspace to %llu MB, past limits.max_workspace_mb of %ld MB; its files stay",
				 r->ws_bytes >> 20, s->sup->cfg.policy->limits.max_workspace_mb);
		else if (r->status == CALL_TIMEOUT)
			snprintf(why, wn, "it ran past %.1f s, twice its first duration and a second", r->timeout_ms / 1000.0);
		else
			snprintf(why, wn, "%s; the first time it ended %s", call_status_name(r->status),
				 call_status_name(rr->e.first_status));
		int upto = rr->e.cell - 1;
		free(shown);
		rr_free(rr);
		if (run_once_more(s, upto))
			return;
		drop_queued(s); /* the cells after it are not run again */
		rp->last_ok = rp->base_cell; /* the copy's state, resumed */
		replay_end(s->sup, s);
		return;
	}
	if (!whole) {
		/* Not compared: the note says so, never "the same". */
		if (rp->n_differed++ < 3)
			append(rp->differed, sizeof rp->differed, "%scell %d's output could not be compared with the first run's",
			       rp->n_differed > 1 ? "; " : "", rr->e.cell);
	} else if (memcmp(d, rr->e.digest, HMAC_LEN) != 0) {
		const char *a = rr->e.shown ? rr->e.shown : "", *b = shown;
		size_t i = 0;
		while (a[i] && a[i] == b[i])
			i++;
		char qa[80], qb[80];
		quote(qa, sizeof qa, a, i);
		quote(qb, sizeof qb, b, i);
		if (rp->n_differed++ < 3)
			append(rp->differed, sizeof rp->differed, "%scell %d gave another output when run again (first `%s`, now `%s`)",
			       rp->n_differed > 1 ? "; " : "", rr->e.cell, qa, qb);
	}
	free(shown);
	rp->last_ok = rr->e.cell;
	bool last = rr->e.cell >= rp->stop_cell;
	rr_free(rr);
	if (last)
		replay_end(s->sup, s);
}

/* "cell 3" or "cells 3 to 5". */
static void cells(char *buf, size_t n, int from, int to)
{
	if (from == to)
		snprintf(buf, n, "cell %d", from);
	else
		snprintf(buf, n, "cells %d to %d", from, to);
}

/* What the note says of a journal run again after a restore: it follows
 * the restore's own note in the reply of the call the state was loaded
 * for. */
static void journal_note(const struct replay *rp, char *note, size_t n, const char *range, double secs)
{
	if (rp->failed && rp->lost) {
		snprintf(note, n,
			 "then %s, which ran after that save and were kept as a journal instead of a new snapshot, should have run again "
			 "on it, but the session's process ended while cell %d ran again (%s) and no copy of the state was left: this "
			 "call runs in a new interpreter",
			 range, rp->failed2 ? rp->failed2 : rp->failed, rp->failed2 ? rp->failed2_why : rp->failed_why);
		return;
	}
	if (rp->failed) {
		char gone[64], then[400] = "";
		cells(gone, sizeof gone, rp->failed, rp->last);
		if (rp->failed2)
			snprintf(then, sizeof then, ", and cell %d failed when run once more to rebuild the state before it (%s)", rp->failed2,
				 rp->failed2_why);
		snprintf(note, n,
			 "then %s, which ran after that save and were kept as a journal instead of a new snapshot, should have run again "
			 "on it, but cell %d failed when run again (%s)%s, so the state is as after cell %d: what %s did to variables is "
			 "gone (run them again if you need it)",
			 range, rp->failed, rp->failed_why, then, rp->last_ok, gone);
		if (rp->n_differed)
			append(note, n, "; before it, %s", rp->differed);
		return;
	}
	snprintf(note, n,
		 "then %s, which ran after that save and were kept as a journal instead of a new snapshot, ran again on it (%.2f s)",
		 range, secs);
	if (rp->second)
		append(note, n, " (the session's process ended meanwhile, so it went back to the loaded state and ran them once more)");
	if (rp->n_differed)
		append(note, n, ", but %s: what %s computed may differ from before", rp->differed, rp->n_differed > 1 ? "they" : "it");
	else
		append(note, n, ", with the same output as the first time");
}

/* The replay is over: the note for the call that rolled back (or the next
 * reply, when that call is sent again). */
static void replay_end(struct sup *sup, struct session *s)
{
	struct replay *rp = s->rp;
	rp->active = false;
	again_clear(rp);
	char note[2000];
	double secs = (loop_now_ms() - rp->t0) / 1000.0;
	char range[64];
	cells(range, sizeof range, rp->first, rp->last);
	bool journal = rp->journal;
	rp->journal = false;
	if (journal) {
		journal_note(rp, note, sizeof note, range, secs);
		/* The call the state was loaded for reports it restored (or
		 * forked), unless no copy of it was left. */
		if (!(rp->failed && rp->lost))
			s->journal_state = rp->journal_state;
	} else if (rp->failed && rp->lost) {
		snprintf(note, sizeof note,
			 "the session was rolled back: nothing this call did to variables was kept (files it wrote stay); to rebuild the "
			 "state before it, the copy taken after cell %d was resumed and %s were to be run again, but the session's process "
			 "ended while cell %d ran again (%s) and no copy of the state was left: the next call starts a new interpreter",
			 rp->from_cell, range, rp->failed2 ? rp->failed2 : rp->failed, rp->failed2 ? rp->failed2_why : rp->failed_why);
	} else if (rp->failed) {
		char gone[64], then[400] = "";
		cells(gone, sizeof gone, rp->last_ok + 1, rp->last);
		if (rp->failed2)
			snprintf(then, sizeof then, ", and cell %d failed when run once more to rebuild the state before it (%s)", rp->failed2,
				 rp->failed2_why);
		snprintf(note, sizeof note,
			 "the session was rolled back: nothing this call did to variables was kept (files it wrote stay); to rebuild the "
			 "state before it, the copy taken after cell %d was resumed and %s were to be run again, but cell %d failed when run "
			 "again (%s)%s, so the state is as after cell %d: what %s did to variables is gone",
			 rp->from_cell, range, rp->failed, rp->failed_why, then, rp->last_ok, gone);
		if (rp->second && !rp->failed2 && rp->last_ok > rp->from_cell) {
			char redo[64];
			cells(redo, sizeof redo, rp->from_cell + 1, rp->last_ok);
			append(note, sizeof note, "; the failure took the process back to that copy, so %s ran once more to rebuild the state "
			       "before cell %d", redo, rp->failed);
		}
		if (rp->n_differed)
			append(note, sizeof note, "; before it, %s", rp->differed);
	} else {
		snprintf(note, sizeof note,
			 "the session was rolled back to its state before this call: everything defined earlier is still there, nothing "
			 "this call did to variables was kept (files it wrote stay); to rebuild that state, the copy taken after cell %d "
			 "was resumed and %s run again (%.2f s)",
			 rp->from_cell, range, secs);
		if (rp->second)
			append(note, sizeof note, " (the session's process ended during the replay, so it went back to that copy and ran "
						  "them once more)");
		if (rp->n_differed)
			append(note, sizeof note, ", but %s: what %s computed may differ from before", rp->differed,
			       rp->n_differed > 1 ? "they" : "it");
		else
			append(note, sizeof note, ", with the same output as the first time");
	}
	log_info("session %s: replay of %s after a %s: %s", s->name, range, journal ? "restore" : "rollback",
		 rp->failed ? "stopped" : rp->n_differed ? "outputs differed" : "same outputs");
	struct run *c = rp->held;
	rp->held = NULL;
	if (c) {
		add_note(c, note);
		post_done(sup, c, false);
		post_ended(sup);
	} else if (rp->to_hold) {
		free(rp->final_note);
		rp->final_note = xstrdup(note);
	} else {
		note_next(s, note);
	}
}

/* Queues, ahead of every call and in order, the kept cells after the
 * checkpoint (base_cell) up to cell upto, each in a run of the server's
 * own; the whole pass gets a deadline of its own.  False when none. */
static bool queue_again(struct session *s, int upto)
{
	struct replay *rp = s->rp;
	struct run *head = NULL, **tail = &head, *last = NULL;
	double ms = 0;
	for (int i = 0; i < rp->n_again; i++) {
		const struct replay_entry *a = &rp->again[i];
		if (a->cell <= rp->base_cell || a->cell > upto)
			continue;
		struct replay_run *rr = xcalloc(1, sizeof *rr);
		rr->s = s;
		rr->e = *a;
		rr->e.code = xstrdup(a->code);
		rr->e.shown = a->shown ? xstrdup(a->shown) : NULL;
		struct run *r = &rr->run;
		snprintf(r->session, sizeof r->session, "%s", s->name);
		r->code = rr->e.code;
		/* Bounded: a cell that notices its second run and sleeps
		 * cannot hold the rolled-back call's reply for long.  By its
		 * whole first duration, copying included (copy_paid). */
		r->timeout_ms = 2.0 * rr->e.ms + 1000.0;
		r->ev = &replay_events; /* its verdict pending (0), as xcalloc left it */
		/* Never sent again to another process: a replay that did not
		 * start failed (it must not run in a new interpreter). */
		run_no_resend(r);
		*tail = last = r;
		tail = &r->next;
		ms += a->ms;
	}
	if (!head)
		return false;
	/* The whole pass is bounded too, not only each cell: twice what the
	 * cells took the first time, and two seconds.
	 * Attack: a full log of cells that each sleep on their second run,
	 * holding the rolled-back call's reply a second each. */
	rp->deadline = loop_now_ms() + 2.0 * ms + 2000.0;
	rp->stop_cell = upto;
	queue_put_ahead(s, head, tail, last);
	return true;
}

/* The process was rolled back to the copy the replay started from while
 * cells ran again (one failed, or the process died between two): the
 * cells kept since then went with it, so those up to upto run once more,
 * and the checkpoint after the last of them keeps the state.  Once only:
 * false when this was the second pass, or when none is to run. */
static bool run_once_more(struct session *s, int upto)
{
	struct replay *rp = s->rp;
	if (rp->second || rp->lost || upto <= rp->base_cell)
		return false;
	drop_queued(s);
	rp->second = true;
	/* What differs from the first run is now what the second pass
	 * gives: the state comes from it. */
	rp->differed[0] = '\0';
	rp->n_differed = 0;
	rp->last_ok = rp->base_cell;
	return queue_again(s, upto);
}

/* The checkpoint after cell c run again: only after the last cell of the
 * pass.  Between two, a checkpoint would make the next cell copy every
 * page it writes (a replayed rewrite of a large array copies all of it
 * each time); a failure resumes the copy the replay started from and runs
 * the cells before it once more instead (run_once_more). */
bool replay_run_checkpoint(const struct run *c)
{
	const struct replay_run *rr = (const struct replay_run *)c;
	return rr->load || !rr->s->rp || rr->e.cell >= rr->s->rp->stop_cell;
}

bool replay_begin(struct sup *sup, struct session *s, struct run *c)
{
	struct replay *rp = s->rp;
	if (!rp)
		return false;
	int had = rp->state_cell;
	rp->state_cell = rp->base_cell;
	rp->pending = NULL;
	if (rp->active && !replay_is_run(c)) {
		/* Rolled back between two cells run again (the process died
		 * while idle, or the checkpoint after the last one failed): the
		 * state is the copy's the replay started from; the cells kept
		 * since then run once more, or, a second time, the replay stops
		 * there. */
		if (run_once_more(s, rp->stop_cell))
			return true;
		drop_queued(s);
		if (!rp->failed2) {
			int *failed = rp->failed ? &rp->failed2 : &rp->failed;
			char *why = rp->failed ? rp->failed2_why : rp->failed_why;
			*failed = had + 1 > rp->first ? had + 1 : rp->first;
			snprintf(why, sizeof rp->failed_why, "the session's process ended before the state after it was kept");
		}
		rp->last_ok = rp->base_cell;
		replay_end(sup, s);
	}
	if (rp->n == 0)
		return false;
	rp->active = true;
	rp->ws_known = false;
	rp->to_hold = c;
	rp->held = NULL;
	rp->failed = rp->failed2 = 0;
	rp->lost = false;
	rp->second = false;
	rp->failed_why[0] = rp->failed2_why[0] = rp->differed[0] = '\0';
	rp->n_differed = 0;
	rp->first = rp->log[0].cell;
	rp->last = rp->log[rp->n - 1].cell;
	rp->last_ok = rp->from_cell = rp->base_cell;
	rp->t0 = loop_now_ms();
	free(rp->final_note);
	rp->final_note = NULL;
	/* The log becomes the replay's: kept until it ends, for a second
	 * pass (run_once_more). */
	again_clear(rp);
	for (int i = 0; i < rp->n; i++) {
		rp->again[i] = rp->log[i];
		rp->log[i] = (struct replay_entry){ 0 };
	}
	rp->n_again = rp->n;
	rp->n = 0;
	rp->code_bytes = 0;
	rp->ms = 0;
	queue_again(s, rp->last);
	(void)sup;
	return true;
}

int replay_journal(struct session *s, uint32_t base, struct journal_cell **out)
{
	struct replay *rp = s->rp;
	*out = NULL;
	/* Only a log that is all that ran since its checkpoint, with nothing
	 * of it under way: a checkpoint for any reason since (a file written,
	 * the budget, an effect) empties it, and the next save is whole. */
	if (!rp || rp->n == 0 || rp->active || rp->held || rp->pending || rp->base_cell != (int)base ||
	    rp->log[rp->n - 1].cell != s->cells || rp->log[0].cell <= rp->base_cell)
		return 0;
	struct journal_cell *v = xcalloc((size_t)rp->n, sizeof *v);
	for (int i = 0; i < rp->n; i++) {
		const struct replay_entry *e = &rp->log[i];
		v[i] = (struct journal_cell){ .cell = e->cell, .status = (int)e->first_status, .whole = e->whole, .ms = e->ms,
					      .code = xstrdup(e->code), .shown = e->shown ? xstrdup(e->shown) : NULL };
		memcpy(v[i].digest, e->digest, sizeof v[i].digest);
	}
	*out = v;
	return rp->n;
}

struct run *replay_load_run(struct session *s, struct run *c)
{
	struct replay_run *rr = xcalloc(1, sizeof *rr);
	rr->s = s;
	rr->load = true;
	/* Cell 0 (xcalloc's): its entry in the session's history names no
	 * function that a later save looks up by cell (and a state that does
	 * not come back counts from 1, as the session does). */
	rr->e.code = xstrdup("");
	rr->e.first_status = CALL_OK;
	struct run *r = &rr->run;
	snprintf(r->session, sizeof r->session, "%s", s->name);
	r->code = rr->e.code;
	r->timeout_ms = 10000.0;
	r->ev = &replay_events;
	run_no_resend(r);
	/* The call's walk before it stands for this one's; the call walks
	 * again once the cells ran again. */
	rr->ws0 = c->ws_before;
	run_in_place(s, r);
	restore_carried_by(s, r);
	s->journal_state = STATE_PENDING;
	return r;
}

/* The empty cell that loaded the saved state is over: its note goes to
 * the next reply (the call it was loaded for), and when the state came
 * back the journal's cells run again on it, ahead of that call, each
 * compared with its first run as after a rollback. */
static void load_ended(struct replay_run *rr)
{
	struct session *s = rr->s;
	struct run *r = &rr->run;
	size_t n = 0;
	struct journal_cell *v = journal_take(s, &n);
	if (r->note)
		note_next(s, r->note);
	bool back = (r->state == STATE_RESTORED || r->state == STATE_FORKED) && proc_alive(s);
	if (!back) {
		/* Not loaded: the journal's cells follow no state here.  A
		 * fresh interpreter counts the call from 1. */
		if (r->state == STATE_NEW)
			cells_after_load(s, 0);
		journal_cells_free(v, n);
		rr_free(rr);
		return;
	}
	struct replay *rp = rp_of(s);
	int base = (int)s->restore_cells;
	rp->journal_state = r->state;
	again_clear(rp);
	for (size_t i = 0; i < n && rp->n_again < REPLAY_MAX_CELLS; i++) {
		if (v[i].cell <= base)
			continue;
		struct replay_entry *e = &rp->again[rp->n_again++];
		*e = (struct replay_entry){ .cell = v[i].cell, .code = v[i].code, .ms = v[i].ms,
					    .first_status = (enum call_status)v[i].status, .whole = v[i].whole, .shown = v[i].shown };
		memcpy(e->digest, v[i].digest, sizeof e->digest);
		v[i].code = v[i].shown = NULL;
	}
	journal_cells_free(v, n);
	rp->state_cell = rp->base_cell = rp->last_ok = rp->from_cell = base;
	cells_after_load(s, base);
	rr_free(rr);
	if (rp->n_again == 0) {
		s->journal_state = rp->journal_state;
		return;
	}
	rp->active = rp->journal = true;
	rp->to_hold = rp->held = NULL;
	rp->failed = rp->failed2 = 0;
	rp->lost = rp->second = false;
	rp->failed_why[0] = rp->failed2_why[0] = rp->differed[0] = '\0';
	rp->n_differed = 0;
	rp->first = rp->again[0].cell;
	rp->last = rp->again[rp->n_again - 1].cell;
	rp->t0 = loop_now_ms();
	free(rp->final_note);
	rp->final_note = NULL;
	cells_after_load(s, rp->last);
	queue_again(s, rp->last);
}

bool replay_call_done(struct sup *sup, struct session *s, struct run *c)
{
	struct replay *rp = rp_of(s);
	(void)sup;
	if (c->state == STATE_KEPT || c->state == STATE_RESTORED || c->state == STATE_FORKED)
		rp->state_cell = c->cell;
	s->journal_state = STATE_PENDING; /* said by the call after a journal's cells */
	if (rp->pending == c) {
		rp->pending = NULL;
		struct replay_entry *e = &rp->log[rp->n];
		e->cell = c->cell;
		e->code = xstrdup(c->code);
		e->ms = rp->pending_ms;
		e->first_status = c->status;
		e->whole = digest_of(s, c, e->digest, &e->shown);
		rp->code_bytes += strlen(c->code);
		rp->ms += rp->pending_price;
		rp->copied += rp->pending_copied;
		rp->n++;
		return false;
	}
	if (rp->to_hold == c) {
		rp->to_hold = NULL;
		if (rp->active) {
			rp->held = c; /* its reply waits for the replay */
			return true;
		}
		if (rp->final_note) {
			add_note(c, rp->final_note);
			free(rp->final_note);
			rp->final_note = NULL;
		}
	}
	return false;
}

/* A cell run again kept its state: whether its status is the first run's
 * (false: the session is rolled back to the checkpoint before it). */
bool replay_run_same_status(const struct run *c)
{
	return c->status == ((const struct replay_run *)c)->e.first_status;
}

bool replay_active(const struct session *s)
{
	return s->rp && (s->rp->active || s->rp->held);
}

void replay_free(struct session *s)
{
	struct replay *rp = s->rp;
	if (!rp)
		return;
	replay_clear(s);
	again_clear(rp);
	if (rp->held)
		post_drop(s->sup, rp->held);
	rp->held = NULL;
	free(rp->final_note);
	free(rp);
	s->rp = NULL;
}
