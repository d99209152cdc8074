/* A session: the zygote's child that runs one session's cells.
 *
 * zygote_session_main runs in each forked child: it moves its descriptors
 * into place, takes the per-session jail step, then serves W_EXEC/W_THUMB
 * until its control socket closes.  Here too the session's checkpoints
 * (a frozen fork of itself after a call), their savers, and its copies for
 * fork_from.  User code runs here, so nothing it sends back is trusted. */
#include "session.h"
#include "forkfd.h"
#include "precopy.h"
#include "bigmem.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../jail/jail.h"
#include "pyembed.h"
#include "../proto/result.h"
#include "../proto/smsg.h"
#include "../proto/wire.h"

#define SESSION_CTRL_FD 3

/* Moves fd to a number >= 64 so that the dup2()s into 1, 2, 3 cannot clobber
 * one another. */
static int lift_fd(int fd)
{
	int n = fcntl(fd, F_DUPFD_CLOEXEC, 64);
	close(fd);
	return n;
}

/* What ps shows for each process of the jail (libbsd's setproctitle, over
 * the argv area): "python-sandbox-mcp: zygote", "...: session NAME",
 * "...: checkpoint NAME cell N" for the copy that holds the state after
 * cell N.  An operator sees at a glance which process is which. */
static char session_name[65];
static long last_cell;

static void title_session(void)
{
	setproctitle("-python-sandbox-mcp: session %s", session_name);
}

/* The checkpoint: sessions that never lose work.  After each reply
 * the session forks a frozen copy of itself that waits for SIGUSR1.  The copy
 * is taken while the agent reads the reply, so no call waits for the fork.
 * When a call times out, crashes or is cancelled, the server kills the
 * session and signals the copy, which resumes as the session on the same
 * control socket and pipes: the state is what it was before the call. */
static pid_t checkpoint_pid, zygote_pid;
/* Whether code ran (a cell, a thumbnail) since this process last forked
 * its checkpoint: when not, a new checkpoint is of the same state (a
 * save's), and the pre-copy copies again what calls keep writing instead
 * of scanning (precopy_again). */
static bool ran_since_fork = true;

/* Saved sessions: the largest state to save (0: do not save), and the
 * saver of the current checkpoint (its child), killed when a call comes. */
static unsigned long long persist_cap;
static pid_t saver_pid;

/* The pre-copy after each checkpoint's fork (precopy.h): at most this many
 * bytes (set from memory_mb by the zygote), and these bounds in time, well
 * inside the server's 2 s CPU budget for taking a checkpoint.  256 MB and
 * 800 ms: `str.len()` over 5 million strings writes the reference counts
 * of 280 MB of objects, which 64 MB and 100 ms left mostly to the next
 * call's faults (on the bench's VM a page copied here costs about 11 us
 * of CPU, a fault in the call 15 to 18 us: 256 MB take about 0.7 s, while
 * the agent reads the reply). */
static size_t precopy_cap, precopy_max_map, precopy_mem_limit;
#define PRECOPY_MAX_BYTES ((size_t)256 << 20)
#define PRECOPY_SCAN_MS 50.0
#define PRECOPY_RUN_MS 800.0

/* The pre-copy's budget for this checkpoint: precopy_cap, and never more
 * than the room below three quarters of memory_mb once this process's
 * resident memory is counted (the copies are the session's own memory on
 * top of what its checkpoint keeps, and a guess the next call proves
 * wrong must not be what brings the session near its limit). */
static size_t precopy_budget(void)
{
	if (!precopy_mem_limit)
		return precopy_cap;
	size_t used = self_resident_bytes(), room = precopy_mem_limit - precopy_mem_limit / 4;
	return used >= room ? 0 : room - used < precopy_cap ? room - used : precopy_cap;
}

/* Leaves the blocks the allocator mapped afresh out of the next scan
 * (precopy_skip says why). */
static void precopy_skip_fresh(void)
{
	static uintptr_t at[PRECOPY_SKIP_MAX];
	static size_t len[PRECOPY_SKIP_MAX];
	precopy_skip(at, len, bigmem_fresh(at, len, PRECOPY_SKIP_MAX));
}

/* What the last call left below this process was ended by the zygote while
 * the server held us frozen (zygote.c: settle); its zombies are reaped here,
 * the retired checkpoints among them.  Only a courtesy: a session that does
 * not reap only fills its own share of the process limit. */
static void reap_ended(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void make_checkpoint(bool save);

/* The labels of the pieces the server holds of the last save (hex; the
 * last W_TAKE_CHECKPOINT that asked for a save): the saver names those
 * instead of sending them (bootstrap save_state). */
static char *save_known = "";


/* Runs in a fresh fork of the checkpoint, right after a reply: pickles the
 * state into the pipe to the server (bootstrap save_state), then exits.
 * User code runs here (__reduce__, __getstate__), in a copy whose changes
 * die with it: the session and its checkpoint are other processes.  Its
 * output would land in the next call's stdout: it goes to /dev/null. */
static __attribute__((noreturn)) void run_saver(int wfd, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	setproctitle("-python-sandbox-mcp: saver %s cell %ld", session_name, last_cell);
	/* Background work: the sessions' own calls come first. */
	setpriority(PRIO_PROCESS, 0, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
	/* Nothing for the saver to say to the server but the state. */
	close(SESSION_CTRL_FD);
	/* The labels are hex digits only (smsg_take_checkpoint_decode). */
	size_t n = 96 + strlen(save_known);
	char *arg = malloc(n);
	if (!arg)
		_exit(0);
	snprintf(arg, n, "{\"fd\": %d, \"cap\": %llu, \"known\": \"%s\"}", wfd, persist_cap, save_known);
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	if (py_call("save_state", arg, &out, &len, &is_bytes, &e) == 0)
		free(out);
	_exit(0);
}

/* Forks the saver; -1 when it could not. */
static pid_t fork_saver(int wfd, const sigset_t *mask)
{
	pid_t parent = getpid();
	fflush(NULL);
	PyOS_BeforeFork();
	pid_t pid = fork();
	if (pid == 0) {
		PyOS_AfterFork_Child();
		sigprocmask(SIG_SETMASK, mask, NULL);
		run_saver(wfd, parent);
	}
	PyOS_AfterFork_Parent();
	return pid;
}

/* A new checkpoint replaces the one a save still runs from: that save is
 * abandoned (the server has stopped reading it already, and ends whatever
 * it started).  The checkpoint, frozen by the server, cannot do it: the
 * session kills its grandchild itself.  A save goes on while the next call
 * runs: it is a fork of the frozen copy, not of this process. */
static void abandon_save(void)
{
	if (saver_pid > 0)
		kill(saver_pid, SIGKILL);
	saver_pid = 0;
}

/* save: the server asked for the state to be saved too (it does once the
 * session rests, and at exit; savepace.h): the copy forks a saver. */
/* The checkpoint itself (the child of make_checkpoint's fork): it starts
 * its saver, waits frozen for the resume signal, and once resumed becomes
 * the session, says hello and takes a checkpoint of its own. */
static void checkpoint_child(int sp[2], int sync[2], const sigset_t *usr1, const sigset_t *old, pid_t session)
{
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	PyOS_AfterFork_Child();
	/* Its pagemap descriptor is the session's map, not its own: a
	 * resumed checkpoint goes without the pre-copy. */
	precopy_close();
	/* A group of its own: a kill of the session's group (by the
	 * code, with os.killpg) must not end it. */
	setpgid(0, 0);
	/* The state is saved by a fork of this copy, off the session's
	 * path: the session answers the next call meanwhile. */
	pid_t saver = -1;
	if (sp[1] >= 0) {
		close(sp[0]);
		close(sync[0]);
		saver = fork_saver(sp[1], old);
		close(sp[1]);
		int32_t v = saver;
		if (write(sync[1], &v, sizeof v) != (ssize_t)sizeof v)
			log_warn("checkpoint: could not report its saver");
		close(sync[1]);
	}
	/* Wait for the resume signal.  Should the session and the zygote
	 * both be gone (no pid namespace to end us), give up. */
	for (;;) {
		struct timespec one = { 1, 0 };
		if (sigtimedwait(usr1, NULL, &one) == SIGUSR1)
			break;
		if (saver > 0 && waitpid(saver, NULL, WNOHANG) != 0)
			saver = -1;
		pid_t pp = getppid();
		if (pp != session && pp != zygote_pid)
			_exit(0);
	}
	if (saver > 0) {
		kill(saver, SIGKILL);
		waitpid(saver, NULL, 0);
	}
	sigprocmask(SIG_SETMASK, old, NULL);
	/* Resumed: this process is the session now. */
	checkpoint_pid = 0;
	title_session();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_CHILD_SUBREAPER, 1); /* not inherited: see zygote_session_main */
	if (py_call("after_rollback", "", &out, &len, &is_bytes, &e) == 0)
		free(out);
	/* Whatever waits on the socket was meant for the dead session (a
	 * cell sent before the server knew): the server sends nothing new
	 * until our hello, so all of it is stale. */
	char junk[65536];
	while (recv(SESSION_CTRL_FD, junk, sizeof junk, MSG_DONTWAIT) > 0)
		;
	/* The server already holds this process's pidfd (it signalled it). */
	send_msg(SESSION_CTRL_FD, W_HELLO, smsg_hello_encode(&(struct smsg_hello){ .pid = getpid(), .resumed = true }), NULL, 0);
	/* A copy of this state at once: the next cell may fail too.
	 * Its save waits until the session rests (the server asks). */
	make_checkpoint(false);
}

/* In the session, after the fork: the saver's pid from the checkpoint
 * (sync), and the pipe its state comes through (sp), or -1 when no saver
 * runs. */
static int saver_pipe(int sp[2], int sync[2], pid_t pid)
{
	int save_fd = -1;
	if (sp[1] >= 0) {
		close(sp[1]);
		close(sync[1]);
		int32_t v = -1;
		ssize_t n;
		do
			n = pid > 0 ? read(sync[0], &v, sizeof v) : 0;
		while (n < 0 && errno == EINTR);
		close(sync[0]);
		if (n == (ssize_t)sizeof v && v > 0) {
			saver_pid = v;
			save_fd = sp[0];
		} else {
			close(sp[0]);
		}
	}
	return save_fd;
}

static void make_checkpoint(bool save)
{
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	pid_t session = getpid();
	if (py_call("before_checkpoint", "", &out, &len, &is_bytes, &e) == 0)
		free(out);
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* Blocked before the fork, so a resume signal cannot be lost. */
	sigprocmask(SIG_BLOCK, &usr1, &old);
	/* A call that waits already (the server's W_HURRY is in) makes this
	 * state one its next cell replaces at once: a save of it would be
	 * abandoned when that cell is read, and forking its saver would only
	 * delay the call (the session waits for the saver's pid).  None is
	 * started; the next checkpoint with time to spare saves. */
	struct pollfd hurry = { .fd = SESSION_CTRL_FD, .events = POLLIN };
	bool waited = poll(&hurry, 1, 0) == 1;
	/* Saved sessions: sp carries the state to the server, sync the
	 * saver's pid back to the session (which kills it when a call comes:
	 * the server freezes the checkpoint as soon as it has it). */
	int sp[2] = { -1, -1 }, sync[2] = { -1, -1 };
	if (persist_cap && save && !waited && (pipe2(sp, O_CLOEXEC) < 0 || pipe2(sync, O_CLOEXEC) < 0)) {
		if (sp[0] >= 0) {
			close(sp[0]);
			close(sp[1]);
		}
		sp[0] = sp[1] = -1;
	}
	abandon_save();
	/* What the last call wrote is known only while the previous checkpoint
	 * still shares the rest: the first checkpoint of a session, or the
	 * first after a rollback, has none to compare with (everything would
	 * look written), so it pre-copies nothing; nor when a call waits
	 * already (W_HURRY). */
	if (checkpoint_pid > 0 && precopy_cap && !waited && poll(&hurry, 1, 0) == 0) {
		if (ran_since_fork) {
			precopy_skip_fresh();
			precopy_scan(precopy_budget(), precopy_max_map, PRECOPY_SCAN_MS);
		} else
			precopy_again(precopy_budget());
	} else
		precopy_unknown();
	/* Memory the cells freed and malloc keeps for later is given back
	 * first: forked, it would be shared with the checkpoint, so that each
	 * page the next cells reuse costs a fault and a copy (glibc keeps
	 * freed blocks of up to 32 MB, a column of 4M rows, in its heap), and
	 * the checkpoint would hold it for nothing.  Given back, the reuse is
	 * a fault on a fresh page, a huge one where numpy asked for them.
	 * Measured at 4M rows: 29k minor faults per call instead of 40k, for
	 * 0.1 to 6 ms here. */
	malloc_trim(0);
	bigmem_before_fork();
	fflush(NULL);
	PyOS_BeforeFork();
	/* The copy is born with its title: the server may freeze it before it
	 * runs a single line of its own. */
	setproctitle("-python-sandbox-mcp: checkpoint %s cell %ld", session_name, last_cell);
	int pidfd = -1;
	pid_t pid = fork_pidfd(&pidfd);
	bigmem_after_fork(pid == 0);
	if (pid != 0)
		title_session();
	if (pid == 0) {
		checkpoint_child(sp, sync, &usr1, &old, session);
		return;
	}
	/* Also from the parent: the child may not have run yet when the code
	 * signals the session's group. */
	if (pid > 0)
		setpgid(pid, pid);
	PyOS_AfterFork_Parent();
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		log_warn("checkpoint: fork failed: %s", strerror(errno));
	/* The copies the next call would make one fault at a time, made now,
	 * before the report: the server waits for it either way before the
	 * next call, and it counts this time against the checkpoint's CPU
	 * budget (bounded far below it here).  A call that comes meanwhile
	 * (W_HURRY on the control socket) cuts it short: back to back, the
	 * copies would only delay it. */
	if (pid > 0) {
		precopy_run(PRECOPY_RUN_MS, SESSION_CTRL_FD);
		ran_since_fork = false;
	} else
		precopy_forget();
	int save_fd = saver_pipe(sp, sync, pid);
	/* The previous copy is ended by the server once it has accepted this
	 * one.  Without a pidfd (no fork, no descriptor left) the message
	 * still goes out, so the server need not wait for its timer: it ends
	 * this process and resumes the previous checkpoint. */
	if (pid > 0)
		checkpoint_pid = pid;
	/* The saver's pipe rides with the checkpoint (never without it). */
	int fds[2] = { pidfd, save_fd };
	send_msg(SESSION_CTRL_FD, W_CHECKPOINT, smsg_checkpoint_encode(&(struct smsg_checkpoint){ .pid = pid }),
		 pidfd >= 0 ? fds : NULL, pidfd < 0 ? 0 : save_fd >= 0 ? 2 : 1);
	if (pidfd >= 0)
		close(pidfd);
	if (save_fd >= 0)
		close(save_fd);
}

/* A session's control socket (fds[0]) and output pipes (fds[1], fds[2])
 * moved to 3, 1 and 2; every other descriptor above 3 is closed. */
static void fds_into_place(int fds[3])
{
	int c = lift_fd(fds[0]), o = lift_fd(fds[1]), er = lift_fd(fds[2]);
	if (c < 0 || o < 0 || er < 0 || dup2(o, 1) < 0 || dup2(er, 2) < 0 || dup2(c, SESSION_CTRL_FD) < 0)
		_exit(71);
	if (syscall(SYS_close_range, SESSION_CTRL_FD + 1, ~0U, 0) < 0)
		for (int fd = SESSION_CTRL_FD + 1; fd < 1024; fd++)
			close(fd);
}

/* The copy, in its own process (fork_copy): it becomes session `name` on
 * the descriptors fds[3], with the state it was forked with.  Returns into
 * the session's loop. */
static void become_copy(const char *name, int fds[3], bool checkpoints)
{
	PyOS_AfterFork_Child();
	/* Its parent (the intermediate fork) exits at once: wait until the
	 * copy is the zygote's child, then die with the zygote. */
	for (int i = 0; i < 2000 && getppid() != zygote_pid; i++)
		usleep(500);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != zygote_pid)
		_exit(0);
	/* Its pagemap descriptor describes the parent's pages (and could not
	 * be opened again: the process is not dumpable): no pre-copy. */
	precopy_close();
	/* Nothing of the parent's: its control socket and pipes go. */
	fds_into_place(fds);
	checkpoint_pid = 0;
	saver_pid = 0;
	snprintf(session_name, sizeof session_name, "%s", name);
	title_session();
	setpgid(0, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	cJSON *arg = cJSON_CreateObject();
	cJSON_AddStringToObject(arg, "name", name);
	char *txt = cJSON_PrintUnformatted(arg);
	cJSON_Delete(arg);
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	if (txt && py_call("fork_init", txt, &out, &len, &is_bytes, &e) == 0)
		free(out);
	free(txt);
	send_msg(SESSION_CTRL_FD, W_HELLO, smsg_hello_encode(&(struct smsg_hello){ .pid = getpid(), .resumed = true }), NULL, 0);
	/* Its first cell may fail: a copy of the forked state to go back to
	 * (and, saved sessions, the save of it under its own name). */
	if (checkpoints)
		make_checkpoint(false);
}

/* W_FORK (fork_from): a copy of this session for another session, which
 * must be a child of the zygote like every session (the sweep, the exit
 * reports and the clean-up all rest on that): a clone with CLONE_PARENT,
 * which also gives this process the copy's pidfd (the sandbox has no
 * pidfd_open).  With several threads the copy is made one level down and
 * reparented (forkfd.h): the subreaper flag is dropped for that moment.
 * Either is the one request the session's seccomp gate lets through while
 * the server waits for this copy (jail/seccomp.h); the server sweeps the
 * zygote's children once the copy is in, so that an orphan a thread of the
 * session made in that moment does not outlive it.  Returns true in the
 * copy, which carries on as the new session. */
static bool fork_copy(struct wire_msg *m, bool checkpoints)
{
	struct smsg_fork req;
	struct err de = { 0 };
	struct smsg_forked rep = { 0 };
	if (smsg_fork_decode(m->data, m->len, &req, &de) < 0 || m->nfds != 3) {
		snprintf(rep.error, sizeof rep.error, "malformed request");
		send_msg(SESSION_CTRL_FD, W_FORKED, smsg_forked_encode(&rep), NULL, 0);
		return false;
	}
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	/* random reseeds itself in a forked child: the copy goes on with the
	 * parent's sequence, as a checkpoint does. */
	if (py_call("before_checkpoint", "", &out, &len, &is_bytes, &e) == 0)
		free(out);
	bigmem_before_fork();
	fflush(NULL);
	PyOS_BeforeFork();
	int pidfd = -1;
	pid_t copy = fork_pidfd_sibling(&pidfd);
	bigmem_after_fork(copy == 0);
	precopy_unknown();
	if (copy == 0) {
		int fds[3] = { m->fds[0], m->fds[1], m->fds[2] };
		m->nfds = 0;
		become_copy(req.name, fds, checkpoints);
		return true;
	}
	int err = errno;
	PyOS_AfterFork_Parent();
	if (copy < 0 || pidfd < 0) {
		snprintf(rep.error, sizeof rep.error, "%s", copy < 0 ? strerror(err) : "no pidfd for the copy");
		send_msg(SESSION_CTRL_FD, W_FORKED, smsg_forked_encode(&rep), NULL, 0);
		if (pidfd >= 0)
			close(pidfd);
		return false;
	}
	rep.pid = copy;
	send_msg(SESSION_CTRL_FD, W_FORKED, smsg_forked_encode(&rep), &pidfd, 1);
	close(pidfd);
	return false;
}

/* A cell (W_EXEC) or a thumbnail to make (W_THUMB): run by the bootstrap,
 * its answer sent back; the process ends when the server is gone. */
static void run_cell(struct wire_msg *m)
{
	char *out;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	uint32_t reply_type = m->type == W_THUMB ? W_THUMB_DATA : W_RESULT;
	ran_since_fork = true;
	if (m->type == W_EXEC)
		reap_ended();
	/* Tells the server the cell was received: should this process die
	 * before this point, the server sends the cell again rather than
	 * report a crash of code that never ran. */
	if (m->type == W_EXEC && wire_send(SESSION_CTRL_FD, W_STARTED, "", 0, NULL, 0) < 0)
		_exit(0);
	if (m->type == W_EXEC) {
		bigmem_cell(true);
		struct smsg_exec ex;
		if (smsg_exec_decode(m->data, m->len, &ex, &e) == 0)
			last_cell = ex.cell;
		else
			log_error("%s", e.msg); /* the bootstrap answers it too */
		smsg_exec_free(&ex);
		e = (struct err){ 0 };
	} else if (m->type == W_THUMB) {
		struct smsg_thumb th;
		if (smsg_thumb_decode(m->data, m->len, &th, &e) < 0)
			log_error("%s", e.msg); /* the bootstrap answers it too */
		smsg_thumb_free(&th);
		e = (struct err){ 0 };
	}
	/* The first call after a restart brings the saved state on a
	 * pipe from the server, or the snapshot file and a socket to the
	 * server (bootstrap _restore). */
	int restore_fd = m->type == W_EXEC && (m->nfds == 1 || m->nfds == 2) ? m->fds[0] : -1;
	if (restore_fd >= 0) {
		char num[32];
		if (m->nfds == 2)
			snprintf(num, sizeof num, "%d,%d", m->fds[0], m->fds[1]);
		else
			snprintf(num, sizeof num, "%d", restore_fd);
		if (py_call("restore_fd", num, &out, &len, &is_bytes, &e) == 0)
			free(out);
		/* Loaded before the cell, and said: the cell's timeout starts
		 * when the server reads W_RESTORED (supervisor/saved.c). */
		if (py_call("restore_load", (const char *)m->data, &out, &len, &is_bytes, &e) == 0)
			free(out);
		e = (struct err){ 0 };
		if (wire_send(SESSION_CTRL_FD, W_RESTORED, "", 0, NULL, 0) < 0)
			_exit(0);
	}
	if (py_call("handle", (const char *)m->data, &out, &len, &is_bytes, &e) < 0) {
		/* The bootstrap itself failed (user code broke an internal);
		 * still answer, so the server never waits forever. */
		struct cell_result r = { .status = RESULT_ERROR, .has_error = true };
		r.error.type = "InternalError";
		r.error.message = e.msg;
		out = result_encode(&r);
		len = strlen(out);
		if (reply_type == W_THUMB_DATA)
			len = 0;
	}
	if (m->type == W_EXEC)
		bigmem_cell(false);
	fflush(NULL); /* C-level stdio of extensions, before the reply */
	/* The checkpoint the server retired just before this cell (the
	 * last call's state replaced by a newer one) has died by now: its
	 * zombie goes here, since the next checkpoint request, which reaps
	 * too, may be many calls away (cells only logged take none,
	 * supervisor/replay.c). */
	if (m->type == W_EXEC)
		reap_ended();
	if (restore_fd >= 0) {
		char *o2;
		size_t l2;
		if (py_call("restore_fd", "-1", &o2, &l2, &is_bytes, &e) == 0)
			free(o2);
	}
	wire_msg_free(m);
	int r = wire_send(SESSION_CTRL_FD, reply_type, out, len, NULL, 0);
	free(out);
	if (r < 0)
		_exit(0);
	/* Stopped by its own hand once a cell's result is sent: the server
	 * stops it anyway (its freeze), and waking it from its next read
	 * only to stop it cost this process a wake-up on every call, and the
	 * server a second look, a call in five, for a stop not yet done.  The
	 * server thaws it for whatever it asks next (a cell, a checkpoint, a
	 * fork_from copy), and for a thumbnail once it has seen it stopped
	 * (supervisor/state.c).  A help, never trusted: a session that does
	 * not stop is stopped by the server, as before. */
	if (reply_type == W_RESULT)
		raise(SIGSTOP);
	/* The checkpoint of this state is taken when the server asks
	 * (W_TAKE_CHECKPOINT), once it has seen this process idle. */
}

void zygote_session_main(const struct zmsg_spawn *sp, int fds[3])
{
	bool checkpoints = sp->checkpoint;
	/* Only stdin, stdout, stderr and the control socket survive: user code
	 * must not inherit the zygote's socket (it could ask for sessions). */
	fds_into_place(fds);
	log_set_prefix("session");
	snprintf(session_name, sizeof session_name, "%s", sp->name);
	if (checkpoints)
		persist_cap = sp->persist_cap;
	title_session();
	setpgid(0, 0);
	/* Whatever the code forks stays below the session, orphaned or not, so
	 * end_left_behind finds it by its parent chain. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	zygote_pid = getppid();
	/* Its large arrays' allocator: anything the zygote kept or mapped is
	 * shared with it (bigmem.h). */
	bigmem_after_fork(true);

	/* Before the session makes itself non-dumpable, which makes its
	 * pagemap unreadable to itself (precopy.h).  Without it, the pages
	 * are copied as the next call writes them, as without a pre-copy.
	 * The code can read the descriptor too: the flags of its own pages,
	 * which it could learn anyway; never page frame numbers (refused in
	 * precopy_open). */
	if (checkpoints && precopy_cap)
		(void)precopy_open();
	struct err e = { 0 };
	if (jail_session_enter(&e) < 0) {
		log_error("session jail: %s", e.msg);
		_exit(72);
	}
	/* The gate on the ways out of the session's tree (jail/seccomp.h),
	 * stacked now, while the process still runs nothing but this file:
	 * its listener goes to the server with the hello and is closed here,
	 * before the bootstrap runs any code of the project (a venv's .pth
	 * files), which could otherwise answer the gate's requests itself. */
	int gate = -1;
	if (jail_session_gate(&gate, &e) < 0) {
		log_error("session jail: %s", e.msg);
		_exit(72);
	}
	forkfd_gated();
	send_msg(SESSION_CTRL_FD, W_HELLO, smsg_hello_encode(&(struct smsg_hello){ .pid = getpid() }), gate >= 0 ? &gate : NULL,
		 gate >= 0);
	if (gate >= 0)
		close(gate);
	char *out;
	size_t len;
	int is_bytes;
	/* What the bootstrap reads is what was checked. */
	char *init_json = zmsg_spawn_encode(sp);
	if (py_call("session_init", init_json, &out, &len, &is_bytes, &e) < 0) {
		log_error("%s", e.msg);
		_exit(73);
	}
	free(init_json);
	free(out);

	for (;;) {
		struct wire_msg m;
		int r = wire_recv(SESSION_CTRL_FD, &m, WIRE_MAX_PAYLOAD);
		if (r < 0)
			_exit(r == -EPIPE ? 0 : 74);
		if (m.type == W_HURRY) {
			/* Late: the checkpoint it was about is in already. */
			wire_msg_free(&m);
			continue;
		}
		if (m.type == W_FORK) {
			/* In the parent: its descriptors for the copy go (they
			 * were handed over); in the copy: they are its own now. */
			fork_copy(&m, checkpoints);
			wire_msg_free(&m);
			continue;
		}
		if (m.type == W_TAKE_CHECKPOINT) {
			/* After the reply went out and the server froze and swept
			 * us: taken while the agent reads the reply.  With a saver
			 * when the server asks ({"save": true}). */
			struct smsg_take_checkpoint tc;
			struct err te = { 0 };
			if (smsg_take_checkpoint_decode(m.data, m.len, &tc, &te) < 0)
				log_error("%s", te.msg); /* taken without a saver */
			bool save = tc.save;
			if (save) {
				if (*save_known)
					free(save_known);
				save_known = *tc.known ? strdup(tc.known) : NULL;
				if (!save_known)
					save_known = "";
			}
			smsg_take_checkpoint_free(&tc);
			wire_msg_free(&m);
			/* The zombies of what the sweep ended first: they still
			 * count against RLIMIT_NPROC, and a cell that filled it
			 * (a fork bomb that caught its EAGAIN and ended ok) would
			 * leave no room for the checkpoint's fork; without one the
			 * server rolls the session back, losing that call. */
			reap_ended();
			if (checkpoints)
				make_checkpoint(save);
			continue;
		}
		run_cell(&m);
	}
}

void zygote_session_precopy(long memory_mb)
{
	/* An eighth of memory_mb, at most 256 MB: the pre-copied pages are
	 * the session's own memory on top of its checkpoint's. */
	long mb = memory_mb;
	precopy_cap = mb > 0 && ((size_t)mb << 20) / 8 < PRECOPY_MAX_BYTES ? ((size_t)mb << 20) / 8 : PRECOPY_MAX_BYTES;
	precopy_mem_limit = mb > 0 ? (size_t)mb << 20 : 0;
	/* A mapping larger than twice memory_mb is never all resident: a
	 * reservation, not worth walking page by page. */
	precopy_max_map = mb > 0 ? (size_t)mb << 21 : (size_t)1 << 36;
}
