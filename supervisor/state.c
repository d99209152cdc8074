/* The session's messages: every message a session sends is read here,
 * checked against its phase (phase.c: phases[]), and handed to the room
 * that acts on it; and the layer above's answer to a collect (collected),
 * which leads to the same next steps: the images to downscale, then the
 * freeze.  Near the top of the rooms: it calls them, and none of them
 * calls it.  The rooms that watch the session's control socket
 * (process.c at a spawn, checkpoint.c at a resume) are given ctrl_event
 * through the supervisor (sup->on_ctrl, set by sup_new), and call.c asks
 * for a collect with sup->on_collected; the outbox's drain and death.c (a
 * dead process's last words) call ctrl_event. */
#include "private.h"

#include "../common/pstat.h"

#include <fcntl.h>

/* THUMBS_MS, or less for the tests (PSM_TEST_THUMBS_MS). */
static double thumbs_ms(void)
{
	const char *t = getenv("PSM_TEST_THUMBS_MS");
	double v = t ? atof(t) : 0;
	return v > 0 && v < THUMBS_MS ? v : THUMBS_MS;
}

/* The session stops itself once its result is sent (interp/session.c):
 * the first thumbnail request waits in its socket until the session is
 * seen stopped, and a SIGCONT then lets it read the request.  Sent before
 * that stop, the SIGCONT would be lost (a stop signal after a continue
 * stops the process all the same), and the request would lie unread until
 * the call's deadline.  A session that does not stop itself reads the
 * request of its own accord; the looks end with its answer (the phase
 * moves on), each further apart (30 us, doubling up to WATCH_MS), so that
 * one that never stops costs the server little until that deadline. */
static void thaw_for_thumbs(void *arg)
{
	struct session *s = arg;
	look_fired(s, LOOK_IDLE);
	if (s->phase != P_THUMB || s->hpid <= 0 || s->pidfd < 0)
		return;
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)s->hpid);
	if (pstat_read_kept(AT_FDCWD, NULL, path, &ps) == 0 && (ps.state == 'T' || ps.state == 't')) {
		pidfd_signal(s->pidfd, SIGCONT);
		return;
	}
	double ms = 0.03 * (double)(1 << (s->thaw_tries < 10 ? s->thaw_tries : 10));
	s->thaw_tries++;
	look_arm(s->sup, s, LOOK_IDLE, ms < WATCH_MS ? ms : WATCH_MS, thaw_for_thumbs);
}

static void send_thumb_or_finish(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	char rel[4096];
	if (c->ev->next_thumb(c, rel, sizeof rel)) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", sup->cfg.ws->abs, rel);
		char *txt = smsg_thumb_encode(&(struct smsg_thumb){ .path = path, .max_bytes = 256 * 1024 - 1024 });
		int r = wire_send(s->ctrl, W_THUMB, txt, strlen(txt), NULL, 0);
		free(txt);
		if (r == 0) {
			/* The images are downscaled by the session (sandboxed
			 * work, never the server's), within what is left of the
			 * call's timeout, and at least THUMBS_MS.  Before, a
			 * fixed 15 s: a 3000 x 3000 figure under a sanitizer
			 * build on a loaded machine took longer, and a call
			 * with timeout_s 160 ended as "ran longer than its
			 * timeout (160 s)" after 40 s. */
			bool first = s->phase != P_THUMB;
			if (first && s->timeout_timer) {
				double left = c->t_start + c->timeout_ms - loop_now_ms();
				double least = thumbs_ms();
				c->thumb_ms = left > least ? left : least;
				call_deadline(sup, s, c->thumb_ms);
			}
			set_expect(sup, s, P_THUMB);
			if (first) {
				s->thaw_tries = 0;
				thaw_for_thumbs(s);
			}
			return; /* wait for W_THUMB_DATA */
		}
		/* The session cannot be asked: no more images are. */
	}
	begin_freeze(sup, s);
}

/* What the current run made is known: its images are downscaled next
 * (once the checkpoint is in too), unless the run is being finished (its
 * process died meanwhile). */
void collected(struct run *c, void *arg)
{
	struct session *s = arg;
	run_collected(c);
	if (s->cur != c)
		return;
	if (c->finish_pending) {
		finish_cur(s->sup, s);
	} else if (s->phase == P_SCANNING) {
		/* The watcher looks every 250 ms or more: the snapshot after
		 * the call is checked too, with files by their size.
		 * Attack: one fast write past max_workspace_mb (or a sparse
		 * file, 4 KiB on disk) in a call that ends before the watcher
		 * looks, which then ended ok.
		 * What the walks could not see counts as over the limit.
		 * Attack: 3 x 100 MB under 70 nested directories ended ok.
		 * What the server itself wrote meanwhile (a session's
		 * snapshot, under .sessions) is not the call's growth. */
		unsigned long long limit = (unsigned long long)s->sup->cfg.policy->limits.max_workspace_mb << 20;
		uint64_t own = persist_written_all(s->sup->persist) - s->persist_written0;
		unsigned long long after = c->ws_after > own ? c->ws_after - own : 0;
		if (c->unseen_after[0] || (after > limit && after > c->ws_before))
			over_limit_stop(s, c->ws_after, c->scratch_after, c->unseen_after[0] ? c->unseen_after : NULL);
		else
			send_thumb_or_finish(s->sup, s);
	}
}

/* The saved state's bytes are judged (persist_restore.c, through the
 * callback the face gave restore_begin): with nothing to load, the call's
 * deadline is its own timeout again. */
void restore_answered(void *arg, int verdict)
{
	struct session *s = arg;
	double ms;
	if (restore_judged(s, verdict, &ms))
		call_deadline(s->sup, s, ms);
}

/* W_CHECKPOINT: the checkpoint's pidfd, checked by accept_checkpoint. */
static void on_checkpoint(struct sup *sup, struct session *s, struct wire_msg *m)
{
	struct run *c = s->cur;
	/* The saver's pipe (saved sessions): the state after this call,
	 * streamed by a fork of the checkpoint, copied to disk and
	 * authenticated here (persist.c), once the checkpoint itself is
	 * accepted.  Without it (a call was waiting already, so the
	 * session started no save; or no pipe was left) the state stays
	 * dirty: the next state's save, or the one at exit, covers it. */
	int save_fd = -1;
	/* A body that is not one (proto/smsg.h) claims no pid, which
	 * accept_checkpoint refuses. */
	struct smsg_checkpoint cm;
	struct err de = { 0 };
	pid_t claim = smsg_checkpoint_decode(m->data, m->len, &cm, &de) == 0 && cm.pid > 0 ? cm.pid : 0;
	/* The saver's pipe must be one: a read end of a pipe, nothing
	 * the server would open, seek or wait on otherwise.
	 * Attack: a session passes its end of a socket, a file of the
	 * workspace or /dev/zero where the saver's pipe belongs. */
	if (m->nfds == 2 && !kproc_pipe_reader(m->fds[1])) {
		violation(sup, s, "a checkpoint message whose second descriptor is not a pipe's read end");
		return;
	}
	if (m->nfds == 2) {
		save_fd = m->fds[1];
		m->fds[1] = -1;
		m->nfds = 1;
	}
	/* The message is the checkpoint: without its pidfd it is not
	 * what the server asked for, and the session is ended as a
	 * crash, rolled back to the previous checkpoint, and the next
	 * reply says so.
	 * Attack: a cell that uses up its descriptors (or lowers its
	 * own limit) leaves a session that cannot take a checkpoint;
	 * it said so, and the server went on with no copy of the state
	 * at all and said nothing (a later crash lost everything). */
	char why[160], what[240];
	int ar = m->nfds == 0 ? -EPROTO : accept_checkpoint(sup, s, m->fds[0], claim, why, sizeof why);
	if (ar == -ESRCH && checkpoint_again(sup, s)) {
		/* Dead before it was taken in (killed from outside): asked
		 * again (its saver died with it). */
		if (save_fd >= 0)
			close(save_fd);
		return;
	}
	if (ar < 0) {
		if (save_fd >= 0)
			close(save_fd);
		snprintf(what, sizeof what, "a checkpoint that is not a new child of the session (%s)", why);
		violation(sup, s, m->nfds == 0 ? "a checkpoint message without the checkpoint" : what);
		return;
	}
	/* A saver's pipe is read only when the server asked for one.
	 * Attack: a session that hands one with every checkpoint would
	 * have the server copy, hash and write its whole state after
	 * every call again, the CPU that saving at rest spares. */
	if (save_fd >= 0 && persist_on(sup->persist) && s->save_asked)
		save_begin(sup, s, save_fd);
	else if (save_fd >= 0)
		close(save_fd);
	/* Asked for a saver and none came (a call waits already, or no
	 * pipe or process was left): the state stays dirty, for the
	 * next call's state or the exit, not asked for again at once. */
	save_answered(s, save_fd >= 0);
	m->nfds = 0; /* kept */
	if (s->phase == P_RESUMED || s->ckpt_due == DUE_AFTER_CALL) {
		begin_freeze(sup, s);
	} else {
		/* The images next, once what the run made is known too
		 * (collected). */
		set_expect(sup, s, P_SCANNING);
		if (c->collected)
			send_thumb_or_finish(sup, s);
	}
}

static void on_message(struct sup *sup, struct session *s, struct wire_msg *m)
{
	struct run *c = s->cur;
	/* It ran to send this: an earlier look says nothing about it now. */
	s->look = (struct watch_look){ 0 };
	switch (m->type) {
	case W_HELLO:
		if (s->phase == P_RESUMING) {
			if (!sup->cfg.policy->limits.checkpoint)
				begin_freeze(sup, s);
			else
				set_expect(sup, s, P_RESUMED);
		} else {
			hello_heard(s);
			/* A new process: its gate (gate.c), or none. */
			gate_attach(sup, s, m->nfds == 1 ? m->fds[0] : -1);
			m->nfds = 0; /* kept, or closed */
			set_expect(sup, s, s->phase);
		}
		return;
	case W_STARTED:
		hello_heard(s);
		c->started = true;
		set_expect(sup, s, s->phase);
		return;
	case W_RESTORED: {
		double ms;
		if (restore_loaded(s, &ms))
			call_deadline(sup, s, ms); /* the cell's timeout starts now */
		set_expect(sup, s, s->phase);
		return;
	}
	case W_CHECKPOINT:
		on_checkpoint(sup, s, m);
		return;
	case W_RESULT: {
		/* The first of the two looks that must find it asleep before it
		 * is frozen (begin_freeze), taken now: the scan of what the call
		 * made runs in between, so the second look needs no wait. */
		if (s->hpid > 0)
			watch_idle(s->hpid, &s->look);
		/* Measured now: thumbnails made after the cell are the server's
		 * work, not the call's. */
		usage_end(&c->usage, s->hpid, s->pidfd, s->ckpt_hpid);
		/* Decoded once, every field held to its bound (proto/result.h):
		 * the first field that is wrong is named in the call's error.
		 * Attack: a cell writes its own result frame (it owns the
		 * control socket) whose error type is a number, or whose
		 * lists hold a million entries; read by key, the first made
		 * an "ok" reply with the error dropped. */
		struct err de = { 0 };
		struct cell_result *res = result_parse(m->data, m->len, &de);
		if (!res) {
			violation(sup, s, de.msg);
			return;
		}
		run_take_result(c, res); /* one per run: the phase moves on after it */
		enum verdict_claim said = res->status == RESULT_OK ? V_SAID_OK : res->status == RESULT_MEMORY ? V_SAID_MEMORY : V_SAID_ERROR;
		if (!run_verdict(c, said, &(struct verdict_facts){ .forked = c->forked })) {
			/* Cancelled or over a limit meanwhile: its end is on the way. */
			set_expect(sup, s, P_NONE);
			return;
		}
		/* A status that rolls back (memory: a failed allocation may
		 * have left objects half-built) is acted on by killing the
		 * process, so the checkpoint resumes. */
		if (call_status_table[c->status].rolls_back) {
			set_expect(sup, s, P_NONE);
			kill_session(s);
			return;
		}
		/* The modules the cell imported: a report from the session,
		 * checked by warmup_note. */
		warmup_note(sup->warm, res->imports, res->n_imports);
		restore_outcome(sup, s, c);
		set_expect(sup, s, P_SCANNING);
		collect(s, c); /* then the thumbnails */
		return;
	}
	case W_THUMB_DATA:
		look_cancel(sup, s, LOOK_IDLE); /* thaw_for_thumbs: answered */
		c->ev->thumb(c, m->data, m->len);
		send_thumb_or_finish(sup, s);
		return;
	case W_FORKED: {
		/* The parent rests again (frozen, swept: the copy is known
		 * now, when one was made). */
		struct session *copy = NULL;
		enum forked_next next = forked(sup, s, m, &copy);
		if (next != FORKED_BROKE) {
			fork_rest_deadline(sup, s);
			begin_freeze(sup, s);
		}
		if (next == FORKED_COPY)
			forked_release(sup, copy);
		return;
	}
	default:
		violation(sup, s, "an unexpected message");
	}
}

void ctrl_event(void *arg, int fd, short revents)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	(void)revents;
	/* Being ended (a protocol break, a rolled-back status): nothing more
	 * it says matters. */
	if (s->phase == P_NONE)
		return;
	/* Nothing from a new process is judged before the zygote's report of
	 * it (its pidfd) is in: that report is already on its way, on the
	 * zygote's socket.  What it sent stays unread; the report's handler
	 * (z_spawned, or forked for a copy) posts a read of it, which the
	 * outbox's drain performs in the same loop turn.  (Before, this
	 * read the zygote's socket here, and delivered its events, another
	 * session's death among them, inside this handler.) */
	if (!proc_known(s))
		return;
	for (int budget = 0; budget < 64; budget++) {
		struct wire_msg m;
		int r = wire_reader_step(&s->rd, fd, &m);
		if (r == 0)
			return;
		if (r == -EPIPE) {
			/* End of stream: the process is ended; its exit (from the
			 * zygote) finishes the call. */
			loop_unwatch(sup->cfg.loop, fd);
			kill_session(s);
			return;
		}
		if (r < 0) {
			char what[96];
			uint32_t type, len;
			memcpy(&type, s->rd.hdr + 4, 4);
			memcpy(&len, s->rd.hdr + 8, 4);
			snprintf(what, sizeof what, "%s (type %u, %u bytes)",
				 r == -EMSGSIZE ? "a message over its size" : "a message it may not send now", type, len);
			violation(sup, s, what);
			return;
		}
		on_message(sup, s, &m);
		wire_msg_free(&m);
		if (s->phase == P_NONE || s->ctrl != fd)
			return;
	}
}
