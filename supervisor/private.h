/* The supervisor's own rooms (the .c files of supervisor/): what they share.  Private
 * to this folder (make layers refuses an include of it from outside):
 * the layers above see only supervisor.h. */
#ifndef SUPERVISOR_PRIVATE_H
#define SUPERVISOR_PRIVATE_H

#include "supervisor.h"
#include "sesslock.h"

#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "../proto/config.h"
#include "../proto/smsg.h"
#include "../proto/zmsg.h"
#include "../proto/wire.h"
#include "../interp/procs.h"
#include "../interp/zygote.h"
#include "../jail/jail.h"
#include "../jail/ns.h"
#include "../jail/uid.h"
#include "outbuf.h"
#include "persist.h"
#include "savepace.h"
#include "usage.h"
#include "warmup.h"
#include "watch.h"
#include "../files/wswatch.h"
#include "kproc.h"
#include "replay.h"
#include "verdict.h"
#include "zlink.h"

/* A resumed checkpoint says hello and takes its own checkpoint within this,
 * or it is ended and the next call starts a new process. */
#define RESUME_MS resume_ms()
/* 30 s, or less under PSM_TEST_RESUME_MS=N (a test knob that can only
 * tighten it, so that a test of a copy that never answers does not wait
 * 30 s); checkpoint.c. */
double resume_ms(void);
/* Downscaling the call's images in the session gets its own time, once the
 * cell is done: the session first cuts an image to 1568 pixels a side
 * (interp/bootstrap/figures.py, _thumbnail), so an 8000x8000 PNG takes under 2 s;
 * the timer leaves room for a loaded machine, and a session that never
 * answers (code that patched PIL) is ended. */
#define THUMBS_MS 15000.0
#define WATCH_MS ((double)WATCH_INTERVAL_MS)
/* What a session may use of CPU while thawed to take its checkpoint (a
 * fork takes a few ms, also of a process of gigabytes). */
#define CHECKPOINT_CPU_MS 2000

/* Where a session's process is in its exchange with the server, which says
 * what it may send next: one row each in phase.c (phases[]).  The session is hostile: anything else
 * ends it as a crash. */
enum phase {
	P_NONE,      /* no process */
	P_IDLE,      /* frozen (SIGSTOP) between calls; sends nothing */
	P_RUNNING,   /* a cell was sent: hello (new process), started, result */
	P_CHECKPOINTING, /* thawed after a call to fork its checkpoint: the checkpoint next */
	P_SCANNING,  /* result and checkpoint in: the server's scan of the workspace runs */
	P_THUMB,     /* an image to downscale was sent: its data next */
	P_FREEZING,  /* all it had to say is in: being frozen and swept */
	P_RESUMING,  /* a checkpoint was told to resume (or a copy was forked): its hello next */
	P_RESUMED,   /* ... its hello is in: its own checkpoint next */
	P_FORKING,   /* thawed to fork a copy of itself for another session: the copy's pidfd next */
};

/* A checkpoint the session owes, whatever its phase: until it is in (and
 * the session frozen again, settled), no call is sent to it. */
enum ckpt_due {
	DUE_NONE,
	DUE_AFTER_CALL, /* after a reply: the checkpoint of the state it kept */
	DUE_RESUMED,    /* a checkpoint resumed (or a copy forked): its hello, then its own checkpoint */
};

/* The session's process as the server knows it, whatever the exchange
 * with it (enum phase): one value, entered in process.c only
 * (life_enter), along its table (lives[]), which says per row what may
 * happen next.  Each kind of word about a process comes once: the
 * kernel's pidfd (L_BORN -> L_LIVE), its end (the zygote's exit report
 * or its loss -> L_ENDED), the death taken (-> L_DYING). */
enum life {
	L_NONE,        /* no process, none wanted */
	L_WAITING,     /* one wanted: waiting for the zygote (or for a copy in flight) */
	L_BORN,        /* made (spawned or forked), its descriptors in; its pid and pidfd not yet */
	L_BORN_DOOMED, /* ... and a kill was asked meanwhile: it is killed once its pidfd is in */
	L_LIVE,        /* known: its pid and pidfd */
	L_LIVE_DOOMED, /* ... known from L_BORN_DOOMED: killed once what it sent is read (POST_READ) */
	L_KILLED,      /* SIGKILL sent: no call is sent to it; its exit report is awaited */
	L_ENDED,       /* its end is known (the zygote's report, or no report to come) and posted */
	L_DYING,       /* its death is being handled (death.c): no process or its copy next */
	L_COUNT
};

enum zstate { Z_DOWN, Z_WARMING, Z_READY, Z_FAILED };

struct session;
/* What the other rooms ask of a session's life (they never write it). */
/* A process exists, or is being made. */
#define proc_alive(s) ((s)->life >= L_BORN)
/* ... and the kernel's word on it (pid, pidfd) is in: what it sends is
 * read (an end posted included: its last words come first). */
#define proc_known(s) ((s)->life == L_LIVE || (s)->life == L_LIVE_DOOMED || (s)->life == L_KILLED || \
		       (((s)->life == L_ENDED || (s)->life == L_DYING) && (s)->pidfd >= 0))
/* Its end is asked (SIGKILL sent) or known: no call is sent to it. */
#define proc_ending(s) ((s)->life == L_KILLED || (s)->life == L_ENDED || (s)->life == L_DYING)

struct session {
	char name[SESSION_NAME_MAX + 1];
	int id;              /* spawn id, unique per process incarnation */
	enum life life;      /* its process (enum life): process.c only */
	pid_t pid;           /* in the zygote's pid namespace; 0 until known */
	int pidfd, ctrl, out_r, err_r;
	int ctrl_sndbuf;     /* ctrl's send buffer (SO_SNDBUF) in bytes, read once; 0: unknown */
	pid_t ckpt_pid;      /* the frozen copy to roll back to, 0 when none */
	int ckpt_pidfd;
	int dropped_pidfd;   /* the checkpoint it replaced (SIGKILLed), or -1 */
	pid_t dropped_hpid, dropped_pid; /* its pids, here and in the zygote's namespace */
	/* Host pids (this server's pid namespace), from the pidfds: the kernel's
	 * word, never the session's. */
	pid_t hpid, ckpt_hpid;
	/* When the server last asked for a checkpoint (W_TAKE_CHECKPOINT, or a
	 * resume signal, after which the copy takes its own): a checkpoint
	 * must be born at this clock tick or later (kproc_now_ticks). */
	unsigned long long ckpt_since;
	/* When the last checkpoint was asked for (loop_now_ms), and what the
	 * last one accepted took from the asking: what a cell run again after
	 * a rollback costs beside the cell itself, since each is followed by
	 * one (replay.c prices the log's budget with it). */
	double ckpt_asked_ms, ckpt_cost_ms;
	enum phase phase;
	bool hello_due;      /* a new process: its hello may precede the result */
	enum ckpt_due ckpt_due; /* a checkpoint on its way, and why (enum ckpt_due) */
	/* The checkpoint it owes (ckpt_due) must be in within RESUME_MS:
	 * armed and cancelled by checkpoint.c only. */
	uint64_t due_timer;
	/* Thawed to fork a copy (P_FORKING): the copy's pidfd within
	 * RESUME_MS; fork.c only. */
	uint64_t fork_timer;
	/* The looks at its live process (look_arm): process.c only. */
	uint64_t watch_timer, idle_timer;
	int idle_tries;
	int yield_tries;    /* the freeze's CPU given to it (freeze.c: FREEZE_YIELDS) */
	struct watch_look look; /* the previous look while freezing */
	long thaw_cpu0;         /* its CPU time when thawed for a checkpoint */
	int quiet_tries;        /* looks for its threads stopped (check_quiet) */
	int thaw_tries;         /* looks for it stopped before a thumbnail (state.c) */
	struct wire_expect expect[4];
	struct wire_reader rd;
	struct outbuf out, err;
	int cells;
	bool has_last;
	int last_exit;
	unsigned long last_seq;    /* orders the sessions' last calls (sup->ends) */
	struct run *cur, *qhead, *qtail;
	/* The call's deadline (its timeout, then the thumbnails', or the
	 * restore's bound) and its progress notes: call.c only. */
	uint64_t timeout_timer, progress_timer;
	struct wswatch *watch;   /* the workspace's disk use during a call */
	/* Its end as posted (L_ENDED), for death_handle: the status the
	 * report said, if it said one. */
	bool death_known;
	int death_status;
	double progress;
	/* Saved sessions (persist.c) */
	struct psave *save;        /* the state being written, or NULL */
	struct ptable *pieces;     /* the pieces of its last save on disk (persist.h), or NULL */
	struct prestore *restore;  /* the saved state being streamed in */
	struct run *restore_call; /* the call it was sent with */
	int restore_verdict;       /* RESTORE_* */
	double restore_age_s;
	uint32_t restore_cells;
	uint32_t restore_floor;    /* the cell of a first call stopped after the load: the retry counts on */
	bool restore_tried;        /* looked for a snapshot in this server's life */
	int restore_attempts;      /* calls that carried it without loading it */
	/* Loading the saved state is bounded on its own (restore_bound_ms),
	 * and the cell's timeout counts from W_RESTORED, when the session
	 * says it is loaded; never past the first deadline plus timeout_s. */
	bool restore_loading;      /* the timer is the load's bound, not the cell's */
	bool restore_said;         /* W_RESTORED came (accepted once) */
	bool restore_loaded;       /* it came after the server's good verdict */
	double restore_deadline;   /* the load's bound plus timeout_s: the call's end at the latest */
	bool cap_noted;            /* the reply said the state was over persist_mb */
	/* Held while this server keeps the session's saved state (sesslock.h);
	 * -1 with `unsaved`: another server holds it, so this one neither
	 * restores nor saves nor discards it. */
	int lock_fd;
	bool unsaved;
	/* The state the process holds is not on disk yet: set when the
	 * checkpoint of a kept state is taken, cleared when its save is in.
	 * At exit the server waits for these (sup_saving). */
	bool dirty;
	bool save_failed;          /* the last save failed: not tried again at exit */
	bool abandon_noted;        /* a reply said a save was cut short for a call */
	bool save_ran;             /* a saver ran since its processes were last ended */
	bool save_asked;           /* the checkpoint being taken was asked for a saver */
	bool save_missed;          /* it came without one: not asked again until a call */
	uint32_t saved_cells;      /* the cell whose state is on disk (0: none known) */
	/* The snapshot this server last wrote whole for the session (its
	 * nonce, its cell, the checkpoint it came from, counted by ckpt_gen),
	 * which a journal of the cells logged since may follow (journal_may). */
	bool snap_ours;
	unsigned char snap_nonce[16];
	uint32_t snap_cells;
	unsigned long snap_gen, save_gen, ckpt_gen;
	/* A journal read with the snapshot being restored, run again once it
	 * is loaded (replay_load_run); and the state the call it was loaded
	 * for reports (restored or forked), or STATE_PENDING. */
	struct journal_cell *journal;
	size_t journal_n;
	enum call_state journal_state;
	double unsaved_since;      /* loop_now_ms() when it last became dirty */
	uint32_t save_cells;       /* the cell of the save in progress */
	unsigned long unsaved_sig; /* the names the last note said could not be pickled */
	uint64_t save_timer;       /* the saver's watchdog (save_watch_fired) */
	uint64_t save_written0;    /* what it had written when the current call started */
	uint64_t persist_written0; /* persist_written_all then */
	double save_t0;
	struct wswatch *save_ws;   /* the workspace while the saver runs */
	char save_stop[300];       /* why the server stopped the saver, or "" */
	char fail_said[160];       /* the reason the last note gave for a failed save */
	struct save_pace pace;     /* when the state is saved: once it rests (savepace.h) */
	/* Branching (fork_from): the session this one is a copy of while the
	 * copy is being made, and in the parent the copy it is making. */
	struct session *fork_parent, *fork_child;
	/* The listener of the seccomp gate its process (or the one it was
	 * copied from) installed, or -1; and whether the one request it lets
	 * through for a copy is open (gate.c). */
	int gate_fd;
	bool gate_open;
	unsigned long gate_refused; /* requests refused, for the log */
	/* The memory watchdog's last count by proportional shares (limits.c:
	 * watch_fired): when the next may be taken, what it found, and the
	 * resident sum and the number of tasks it was taken beside. */
	double pss_next;
	long pss_tasks;
	uint64_t pss_total, pss_copy, pss_base;
	/* Which process the session has: counted up each time it gets a new
	 * one, the copy becomes it, or it has none (process.c). */
	unsigned long proc_gen;
	/* The watchdog's last look (limits.c: final_bounded): at which
	 * process (proc_gen), when, and what its memfds and the jail's tmpfs
	 * held then. */
	unsigned long look_gen;
	double look_at;
	uint64_t look_files;
	unsigned long long fork_asked; /* when the copy was asked for (kproc_now_ticks) */
	double fork_t0;            /* and in loop_now_ms(), for the log */
	char fork_of[SESSION_NAME_MAX + 1]; /* the first call of a copy names its parent */
	uint32_t fork_of_cells;
	bool fork_wait;            /* its first call waits for the parent to rest */
	char fork_wait_for[SESSION_NAME_MAX + 1];
	/* The session whose saved state this one starts from (fork_from a
	 * session that is only on disk), or "". */
	char fork_src[SESSION_NAME_MAX + 1];
	char *next_note;           /* for the next reply (note_next) */
	/* The cells run since the last checkpoint, to run again on a
	 * rollback (replay.c), or NULL. */
	struct replay *rp;
	/* Why the process was ended between calls (a protocol break while
	 * taking its checkpoint), for the next reply; "" when it was not. */
	char broke[256];
	bool broke_kept;     /* ... and its checkpoint held its last state */
	/* The copy to roll back to died from outside (the kernel's OOM killer,
	 * an operator's kill; checkpoint.c: copy_died) and no new one is in
	 * yet: how, for the notes; "" otherwise.  copy_retakes counts the
	 * copies taken again since the last call was sent. */
	char copy_lost[160];
	bool copy_given_up;  /* ... by the server, for a call (copy_given_up) */
	int copy_retakes;
	/* The state died with the process, from outside (the zygote died, or
	 * the copy and then the session): why, and the last cell whose state
	 * it held, for the next call, which brings back the saved state if
	 * there is one (saved.c: lost_outcome); "" otherwise. */
	char lost[400];
	int lost_cells;
	struct sup *sup;
	struct session *next;
};

/* RESTORE_BUSY: opened for writing while the session read it (persist.c). */
enum { RESTORE_BUSY = 3, RESTORE_PENDING = 2, RESTORE_OK = 1, RESTORE_BAD = 0 };

struct sup {
	struct sup_config cfg;
	unsigned long ends;      /* calls ended so far (session.last_seq) */
	struct work *work;       /* for the workspace's watch, or NULL */
	enum zstate z;
	pid_t zpid;
	struct zlink *zl;        /* its socket, read and written through zlink.c */
	char zerror[768];
	/* Why the zygote was ended for breaking its protocol, for the calls
	 * its end touches; "" otherwise. */
	char zbroke[400];
	/* Why the zygote died (killed from outside, crashed), while its end is
	 * handled: what each session it carried lost; "" otherwise. */
	char zdied[400];
	/* The scratch directory of the namespace-free mode (TMPDIR on the
	 * host), made by the server for each zygote and removed when it ends;
	 * its identity, so that only that directory is removed. */
	char scratch[256];
	dev_t scratch_dev;
	ino_t scratch_ino;
	/* That directory lies on a tmpfs: what it holds is memory, counted
	 * toward each running call's memory_mb (see watch_fired). */
	bool scratch_tmpfs;
	unsigned long long scratch_bytes; /* at the last walk (files/wswatch.h) */
	int restarts;
	double last_restart;     /* loop_now_ms() of the last restart */
	double ready_at;         /* loop_now_ms() when the zygote was last ready */
	uint64_t restart_timer;  /* the next start of a zygote, or 0 */
	int next_id;
	unsigned long long epoch; /* the zygote's count of exits, from W_EXITED */
	pid_t zhpid;             /* the zygote's host pid (the sessions' parent) */
	char proc[320];          /* where the watchdog reads the jail's processes */
	bool proc_jail;          /* proc is the jail's own procfs (pids in the jail) */
	/* The sessions' smaps_rollup cannot be read here (not root, no
	 * CAP_SYS_PTRACE; or a kernel before 5.9): memory is counted by RSS. */
	bool pss_off;
	/* Seccomp listeners of ended sessions, held until no process with
	 * their filter is left (gate.c). */
	struct gate_orphan *gate_orphans;
	struct session *sessions;
	struct persist *persist;
	struct warmup *warm;     /* the learned warm-up (warmup.c) */
	bool stopping;           /* the server is exiting: saves first (sup_shutdown) */
	/* A sweep that came while a fork was being made (the new process is a
	 * child of the zygote the server does not know yet), sent after it. */
	bool sweep_held;
	double held_epoch;
	/* A sweep leaves what was born in its list's clock tick or later
	 * (zygote.c: sweep); another one, SWEEP_AGAIN_MS later, judges it. */
	uint64_t sweep_again_timer;
	double save_test_ms;     /* PSM_TEST_SAVE_MS (save_budget), or 0 */
	double save_test_wall_ms; /* PSM_TEST_SAVE_WALL_MS (save_budget), or 0 */
	bool settle_test;         /* PSM_TEST_ZYGOTE_SETTLE_MS: always settle through the zygote */
	int copy_kill_test;       /* PSM_TEST_KILL_COPY_AT_SEND: copies still to kill as a call goes (send_exec) */
	/* The outbox (outbox.c): the effects posted and not yet performed,
	 * oldest first; how many of them hold a run; `ended` owed; the
	 * timer that drains them; a drain running; and the drain itself
	 * (supervisor.c, set by sup_new). */
	struct post *ob_head, *ob_tail;
	int ob_runs;
	bool ob_ended;
	uint64_t ob_timer;
	bool ob_draining;
	void (*ob_drain)(struct sup *sup, bool teardown);
	/* The handler of a session's control socket (state.c: ctrl_event),
	 * set by sup_new: process.c and checkpoint.c watch the socket with
	 * it without calling up into the file that judges the messages. */
	void (*on_ctrl)(void *arg, int fd, short revents);
	/* The handler of a run's collect answered (state.c: collected), set
	 * by sup_new: call.c asks the layer above with it. */
	void (*on_collected)(struct run *c, void *arg);
	/* Who takes a finished run before it goes to the outbox (replay.c:
	 * replay_ended), set by sup_new: call.c's finish_cur ends the
	 * server's own runs and logs the others with it, decided at once
	 * (what the session runs next depends on it), without calling up. */
	bool (*on_finished)(struct sup *sup, struct session *s, struct run *c);
};

/* outbox.c: what a handler owes the layer above or the face, performed by
 * the face's drain once no handler is on the stack (never on the spot). */
enum post_kind {
	POST_DONE,  /* a finished run for the layer above (ev->done) */
	POST_DROP,  /* a run dropped unfinished (ev->drop) */
	POST_START, /* the session may start its next run */
	POST_READ,  /* read the session's control socket (what it sent while it could not be judged) */
	POST_DEAD,  /* the session's process is gone: its death (then a sweep, for an exit report) */
	POST_SETTLED, /* the zygote ended what the frozen process left: the call is over */
};
/* The run is the outbox's from here: the poster must not touch it again.
 * warm: the warm-up may load what sessions taught it after this reply. */
void post_done(struct sup *sup, struct run *c, bool warm);
void post_drop(struct sup *sup, struct run *c);
void post_start(struct sup *sup, struct session *s);
/* What the process sent is read; then a kill asked before its pidfd was in
 * (L_LIVE_DOOMED) is done, as it was asked after what it sent. */
void post_read(struct sup *sup, struct session *s);
/* The session's death (process.c: session_reported_dead, session_gone);
 * sweep: the zygote is told what is left to keep after it. */
void post_dead(struct sup *sup, struct session *s, bool sweep);
/* The zygote's W_SETTLED for the session's process pid (zstart.c): settled
 * (freeze.c) if that process is still the one being frozen. */
void post_settled(struct sup *sup, struct session *s, pid_t pid);
/* A run or a save ended: the server may be waiting for that (cfg.ended). */
void post_ended(struct sup *sup);
bool outbox_holds_runs(const struct sup *sup);
bool outbox_take(struct sup *sup, enum post_kind *kind, struct run **c, struct session **s, bool *flag, pid_t *pid);
bool outbox_take_ended(struct sup *sup);
/* Performs what is posted now (teardown: runs are done or dropped, nothing
 * is started).  Only where no handler of the supervisor is on the stack. */
void outbox_drain_now(struct sup *sup, bool teardown);
void add_note(struct run *c, const char *text);
void set_note(struct run *c, const char *text);
void note_next(struct session *s, const char *text);

/* supervisor.c (the face: the top of the supervisor, called by none of
 * the files below but through the outbox's drain and the run's events) */
void prepared(struct run *c, void *arg);

/* call.c */
void fail_call_now(struct sup *sup, struct session *s, const char *msg);
void requeue_first(struct session *s);
void run_in_place(struct session *s, struct run *r);
void queue_take(struct session *s, struct run *c);
void queue_put_back(struct session *s, struct run *c);
void queue_append(struct session *s, struct run *c);
void queue_unlink(struct session *s, struct run **pp);
void queue_fix_tail(struct session *s);
void queue_put_ahead(struct session *s, struct run *head, struct run **tail, struct run *last);
void cur_none(struct session *s);
void queue_none(struct session *s);
void last_none(struct session *s);
void run_prepared(struct run *c);
void run_waits(struct run *c);
void run_collected(struct run *c);
void run_no_resend(struct run *r);
void progress_none(struct session *s);
void run_clock_start(struct run *c);
void ws_watch_stop(struct session *s);
void ws_watch_set(struct session *s, struct wswatch *w);
/* The call's deadline, ms from now (any earlier one cancelled). */
void call_deadline(struct sup *sup, struct session *s, double ms);
/* Progress notes every PROGRESS_MS, for a call that asked for them. */
void progress_start(struct sup *sup, struct session *s);
void cancel_timers(struct sup *sup, struct session *s);
void finish_cur(struct sup *sup, struct session *s);
void collect(struct session *s, struct run *c);
bool requeue_unstarted(struct sup *sup, struct session *s);
void decide_on_death(struct run *c, int wstatus, bool status_known, bool rolled_back);
/* The workspace grew past max_workspace_mb: the call stops (rolled back). */
void over_limit_stop(struct session *s, unsigned long long bytes, unsigned long long scratch, const char *unseen);

/* zstart.c */
void end_orphans(void);
void remove_scratch(struct sup *sup);
void send_sweep(struct sup *sup, unsigned long long epoch);
unsigned long long sweep_release_epoch(struct sup *sup);
void zygote_none(struct sup *sup);
void sweep_again(struct sup *sup);
#define SWEEP_AGAIN_MS 50.0
/* The pids of the live sessions and their checkpoints (at most max, in
 * the zygote's namespace): false when there are more. */
bool live_pids(const struct sup *sup, pid_t *out, size_t max, size_t *n);
/* The sessions that waited for the zygote (or for no copy in flight) start. */
void zygote_timers_stop(struct sup *sup);
void spawn_pending(struct sup *sup);
/* The learned warm-up works in the zygote only while no call runs: tells it. */
void warm_busy(struct sup *sup);

/* process.c */
struct session *session_by_pid(struct sup *sup, pid_t pid);
struct session *session_by_id(struct sup *sup, int id);
struct session *find_session(struct sup *sup, const char *name);
/* The session sent what it must not send now: ended like a crash. */
void violation(struct sup *sup, struct session *s, const char *what);
bool fork_in_flight(const struct sup *sup);
void kill_session(struct session *s);
void session_close_fds(struct sup *sup, struct session *s);
void session_no_process(struct sup *sup, struct session *s);
void session_fds_none(struct session *s);
void spawn_wait(struct session *s);
void spawn_unwait(struct session *s);
void spawn_given_up(struct session *s);
void session_new_id(struct sup *sup, struct session *s);
void copy_retake(struct session *s);
void copy_retakes_none(struct session *s);
const char *life_name(const struct session *s);
void copy_lost_set(struct session *s, const char *why);
void copy_given_up(struct session *s, const char *why);
void copy_lost_none(struct session *s);
void session_known(struct session *s, pid_t ns, pid_t host, int pidfd);
void session_is_copy(struct session *s);
void session_reported_dead(struct sup *sup, struct session *s, int wstatus, bool status_known);
void session_gone(struct sup *sup, struct session *s);
/* The looks at a live process end (the memory watchdog's, the freeze's). */
enum look { LOOK_WATCH, LOOK_IDLE };
void look_arm(struct sup *sup, struct session *s, enum look which, double ms, void (*cb)(void *arg));
void look_fired(struct session *s, enum look which);
bool look_armed(struct session *s, enum look which);
void look_cancel(struct sup *sup, struct session *s, enum look which);
void looks_stop(struct sup *sup, struct session *s);
bool death_take(struct session *s, int *wstatus, bool *status_known);
void copy_known(struct session *s, int pidfd, pid_t ns, pid_t host);
void drop_checkpoint(struct session *s);
void drain_all(struct session *s);
void pipe_event(void *arg, int fd, short revents);
void discard_ctrl_input(struct session *s);
int session_fds_new(int mine[3], int theirs[3]);
void close3(int fds[3]);
void session_adopt_fds(struct sup *sup, struct session *s, const int mine[3], enum phase ph);
int spawn_session(struct sup *sup, struct session *s);

/* phase.c */
void set_expect(struct sup *sup, struct session *s, enum phase ph);
void set_due(struct session *s, enum ckpt_due due);
void hello_awaited(struct session *s);
void hello_heard(struct session *s);
void session_broke(struct session *s, const char *what);
void broke_none(struct session *s);
bool phase_deadline_missing(const struct session *s);
const char *phase_name(enum phase ph);

/* state.c: the session's control socket is readable (or has been left
 * unread).  Called by the face's drain; the rooms below that watch the
 * socket take it from sup->on_ctrl. */
void ctrl_event(void *arg, int fd, short revents);
/* The layer above's collect answered: what the run made is known
 * (call.c's collect hands it over as sup->on_collected). */
void collected(struct run *c, void *arg);
/* The saved state's bytes are judged (given to restore_begin by the face). */
void restore_answered(void *arg, int verdict);

/* death.c: the death posted, handled by the outbox's drain. */
void death_handle(struct sup *sup, struct session *s);

/* limits.c */
void scratch_none(struct sup *sup);
void workspace_over(void *arg, unsigned long long bytes, const char *unseen);
/* Watches what counts against max_workspace_mb (files/wswatch.h): the
 * workspace, the scratch directory, the fs_write directories outside it. */
struct wswatch *sup_wswatch(struct sup *sup, void (*over)(void *arg, unsigned long long bytes, const char *unseen),
			    void *arg);
void start_watch(struct sup *sup, struct session *s);
void stop_watch(struct sup *sup, struct session *s);
/* The watchdog's last count of a call, once its session is stopped and
 * the freeze's quiet check is in (freeze.c calls it once a freeze): quiet
 * (nothing below the session, nothing orphaned), a look at the session
 * alone, or a bound from a recent look that stands for it; else the full
 * look (the count by proportional shares taken whenever it was last).
 * True when the session was ended for a limit. */
bool final_look(struct sup *sup, struct session *s, bool quiet);

/* freeze.c */
void begin_freeze(struct sup *sup, struct session *s);
void settled(struct sup *sup, struct session *s);

/* checkpoint.c */
/* The checkpoint the session owes (ckpt_due) has RESUME_MS to come. */
void arm_due_timer(struct sup *sup, struct session *s);
void cancel_due_timer(struct sup *sup, struct session *s);
bool roll_back(struct sup *sup, struct session *s, int wstatus, bool status_known);
/* The checkpoint the last one replaced (killed, maybe still exiting): its
 * pids here and in the zygote's namespace, as they were when it was
 * dropped, while its pidfd says it is not yet reaped (its pid cannot have
 * gone to another process before that), or 0 when it is gone or there is
 * none.  A reading of checkpoint.c's fields, inline so that the freeze, the
 * watchdog and the saver need not call checkpoint.c; one system call, read
 * up to three times per call (the pids from the pidfd's fdinfo were three
 * each). */
static inline void dying_pids(const struct session *s, pid_t *host, pid_t *ns)
{
	*host = *ns = 0;
	if (s->dropped_pidfd >= 0 && s->dropped_hpid > 0 && pidfd_signal(s->dropped_pidfd, 0) == 0) {
		*host = s->dropped_hpid;
		*ns = s->dropped_pid;
	}
}
int accept_checkpoint(struct sup *sup, struct session *s, int pidfd, pid_t said, char *why, size_t n);
/* The session rests (or waits to run its next call) without a copy of its
 * state, its copy killed from outside: one is taken now.  False when it
 * cannot be now. */
bool retake_copy(struct sup *sup, struct session *s);
bool copy_lost_before_call(struct sup *sup, struct session *s);
bool checkpoint_again(struct sup *sup, struct session *s);
void take_checkpoint(struct sup *sup, struct session *s, bool save);
void take_owed_checkpoint(struct sup *sup, struct session *s, bool save);
/* At rest with a state not on disk: saved once it has rested (savepace.h). */
void save_when_idle(struct sup *sup, struct session *s);
void thaw_mark(struct session *s);

/* saved.c */
/* An idle session whose state is not on disk, with nothing on the way
 * that would save it: a checkpoint taken again starts a save. */
bool save_startable(const struct sup *sup, const struct session *s);
bool save_at_exit(struct sup *sup, struct session *s);
void save_stopping(struct sup *sup);
void end_save_tree(struct sup *sup, struct session *s);
void save_watch_stop(struct sup *sup, struct session *s);
void quiet_abandon_save(struct sup *sup, struct session *s);
void save_state_new(struct session *s);
void save_none(struct session *s);
void cells_none(struct session *s);
int cell_next(struct session *s);
void run_cell(struct run *c, int cell);
void state_copied_from(struct session *s, const struct session *p);
void restore_anew(struct session *s);
void state_lost(struct session *s, const char *why, int held);
void cell_unsent(struct session *s, const struct run *c);
void restore_unloaded(struct session *s);
void restore_load_begin(struct session *s, double deadline);
void save_state_copied(struct sup *sup, struct session *s);
void save_state_died(struct session *s);
/* Whether a save due now may be a journal of the cells the replay log
 * logged (persist.h): the snapshot on disk is this server's last whole
 * one, taken from the checkpoint the session still holds. */
bool journal_may(const struct sup *sup, const struct session *s);
/* Writes the journal of cells v[0..n) (freed) after that snapshot: true
 * when the state is then saved; false when it could not be written (said
 * at warn level; the caller saves the state whole). */
bool journal_write(struct sup *sup, struct session *s, struct journal_cell *v, size_t n);
/* The journal read with the snapshot being restored, handed over (the
 * session no longer holds it). */
struct journal_cell *journal_take(struct session *s, size_t *n);
/* The saved state goes with run r instead of the call it was opened for. */
void restore_carried_by(struct session *s, struct run *r);
/* The cell the loaded state stands at (a journal's last; 0 for a new
 * interpreter, whose next cell is 1). */
void cells_after_load(struct session *s, int cells);
void save_forget(struct sup *sup, struct session *s);
bool save_ask(struct sup *sup, struct session *s, bool save);
void save_unasked(struct session *s);
void save_answered(struct session *s, bool had_pipe);
char *save_take_message(struct session *s);
void save_begin(struct sup *sup, struct session *s, int fd);
void save_cut(struct sup *sup, struct session *s);
void save_superseded(struct sup *sup, struct session *s, struct run *c);
void restore_outcome(struct sup *sup, struct session *s, struct run *c);
double restore_bound_ms(const struct sup *sup, uint64_t bytes);
bool restore_judged(struct session *s, int verdict, double *ms);
bool restore_loaded(struct session *s, double *ms);
/* The state was lost from outside (s->lost): the reply of the first call
 * in the new process says what, and what came back (restored: the saved
 * state was loaded). */
void lost_outcome(struct session *s, struct run *c, bool restored);
/* done: the restore's verdict on the bytes (state.c: restore_answered). */
int restore_begin(struct sup *sup, struct session *s, struct run *c, uint64_t *bytes, int *format, int fds[2],
		  prestore_done_fn done);

/* gate.c: the seccomp gate on the ways out of a session's tree.  attach
 * takes fd (the listener from a new process's hello; -1: none); share
 * gives a copy its parent's; close lets go of it (held and answered until
 * no process uses it); free ends those at the server's end. */
void gate_attach(struct sup *sup, struct session *s, int fd);
void gate_share(struct sup *sup, struct session *copy, const struct session *parent);
void gate_close(struct sup *sup, struct session *s);
void gate_none(struct session *s);
void gate_pass_once(struct session *p);
void gate_passed(struct session *p);
void gate_free(struct sup *sup);

/* fork.c */
/* The session is a copy of session name, said by its first reply. */
void fork_of_set(struct session *s, const char *name);
void fork_of_none(struct session *s);
void fork_rest_deadline(struct sup *sup, struct session *p);
void cancel_fork_timer(struct sup *sup, struct session *p);
void fork_failed(struct sup *sup, struct session *p, const char *why);
/* W_FORKED, the copy's pidfd, judged (the kernel's word only).  What the
 * parent does next is its caller's (state.c), in this order: FORKED_NONE,
 * no copy (fork_failed said why): the parent is frozen again;
 * FORKED_COPY, the copy is *copy: the parent is frozen again, then
 * forked_release; FORKED_BROKE: the parent broke its protocol and is
 * ended (violation). */
enum forked_next { FORKED_NONE, FORKED_COPY, FORKED_BROKE };
enum forked_next forked(struct sup *sup, struct session *p, struct wire_msg *m, struct session **copy);
void forked_release(struct sup *sup, struct session *copy);
void forks_waiting(struct sup *sup, struct session *p);
int begin_copy(struct sup *sup, struct session *s, struct run *c);

/* replay.c */
/* In settled, after a call that keeps its state: true when the cell is
 * only logged (no checkpoint), false when a checkpoint is to be taken. */
bool replay_log_instead(struct sup *sup, struct session *s, struct run *c);
/* In send_exec, before a call's cell is sent (the process still
 * stopped): the kernel's view of the session, to tell what the cell did
 * past its memory. */
void replay_cell_sent(struct session *s, const struct run *c);
/* That view, read just now for cell c, holds the session's io counter and
 * descriptors (the server may ptrace-read it): the session need not read
 * its own (W_EXEC's no_self_view). */
bool replay_view_own(struct session *s, const struct run *c);
/* In finish_cur, before the reply: the logged cell's entry is made (its
 * output digest); true when the call is a rolled-back one whose reply
 * waits for the replay (replay.c hands it over then). */
bool replay_call_done(struct sup *sup, struct session *s, struct run *c);
/* finish_cur's hook (sup->on_finished): a cell run again is ended here
 * (replay_run_ended), any other run goes through replay_call_done; true
 * when the run is taken (no reply is posted for it now). */
bool replay_ended(struct sup *sup, struct session *s, struct run *c);
/* A checkpoint was accepted: the log starts again from it (not for a
 * resumed copy's own checkpoint, which holds the old base). */
void replay_checkpoint_taken(struct session *s, bool resumed);
/* In roll_back: queues the logged cells to run again ahead of every call;
 * c (or NULL) is the call whose reply waits for them.  False when the
 * log is empty. */
bool replay_begin(struct sup *sup, struct session *s, struct run *c);
/* A save at rest or at exit as a journal of the logged cells when it may
 * be one (journal_may): true when the state is saved so (checkpoint.c). */
bool save_as_journal(struct sup *sup, struct session *s);
/* The log since the last checkpoint as journal cells, when it is all that
 * ran since that checkpoint, whose state is the snapshot of cell base: its
 * length with *out allocated, else 0. */
int replay_journal(struct session *s, uint32_t base, struct journal_cell **out);
/* Call c, the current one, carries a saved state with a journal: an
 * empty cell of the server's own carries the state in its place and c goes
 * back to the head of the queue; once the state is loaded, the journal's
 * cells run again before it (replay.c).  Returns that run, now current. */
struct run *replay_load_run(struct session *s, struct run *c);
bool replay_is_run(const struct run *c);
/* In settled, after cell c run again kept its state: whether the
 * checkpoint is taken now (after the last cell of the replay only). */
bool replay_run_checkpoint(const struct run *c);
/* A cell run again is over (finish_cur): its output compared with the
 * first run's; the replay stops or ends here. */
void replay_run_ended(struct run *c);
/* A cell run again: its timeout, within what is left of the replay's. */
double replay_timeout_ms(const struct run *c);
/* A cell to run again, but the session's process is gone with its
 * checkpoints: the replay ends (it never runs in a new interpreter). */
void replay_lost(struct sup *sup, struct session *s, struct run *c);
int replay_cell(const struct run *c);
bool replay_run_same_status(const struct run *c);
bool replay_active(const struct session *s);
void replay_free(struct session *s);

#endif
