/* The sessions' seccomp gate, from the server's side: "may this process
 * make a process outside its session's tree?"  Once per fork_from, to the
 * parent's own process, while the server waits for its copy; never
 * otherwise.
 *
 * Each session process stacks a filter (jail/seccomp.h:
 * seccomp_session_gate) that sends clone with CLONE_PARENT and
 * prctl(PR_SET_CHILD_SUBREAPER, 0) to a listener instead of running them,
 * and hands that listener to the server with its first hello, before any
 * code of the project runs in it.  Its checkpoints, the copies forked from
 * it and their children inherit the filter, and so the listener: a copy
 * holds its parent's listener too (dup'd), and each holder looks at it.
 * Attack: a cell made children of the zygote with
 * clone(CLONE_PARENT | SIGCHLD) through ctypes, or dropped the session's
 * subreaper flag and double-forked; those processes were outside every
 * limit of the session (four of 200 MB ended "ok" under memory_mb 300, 203
 * of them under max_processes 64 left another session unable to fork).
 * Why the one request let through holds: the listener never was in the
 * session's hands once its code ran (it was closed before the bootstrap
 * started), the kernel refuses a second listener in a task's chain of
 * filters (EBUSY), so the cell cannot answer its own requests; and the
 * server lets one through only from the main thread of a session it has
 * thawed to fork a copy of itself, once.  What the cell's own code can do
 * in that moment (an at-fork hook that spends the request, a thread that
 * double-forks while the subreaper flag is down) makes at most a child of
 * the zygote that the server does not know: the sweep sent once the copy
 * is in (or has failed) ends it (fork.c: release_sweep). */
#include "private.h"

#include <linux/seccomp.h>
#include <sys/ioctl.h>

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

/* The session that may make its copy now through this request: the
 * request comes from its process's main thread, while it is thawed to
 * fork (P_FORKING) and has not spent its one request yet. */
static struct session *gate_grant(struct sup *sup, const struct seccomp_notif *req)
{
	if (req->data.nr != __NR_clone && req->data.nr != __NR_prctl)
		return NULL;
	for (struct session *s = sup->sessions; s; s = s->next)
		if (proc_alive(s) && s->hpid > 0 && (pid_t)req->pid == s->hpid && s->phase == P_FORKING && s->fork_child &&
		    s->gate_open)
			return s;
	return NULL;
}

/* Answers one request waiting on fd, whichever holder of the listener
 * looks first: the answer depends only on who asks (gate_grant), so a
 * copy's request read through its parent's old listener is answered as
 * through its own.  s is the session holding fd, NULL for a listener no
 * session holds any more (for the log). */
static void gate_answer(struct sup *sup, struct session *s, int fd)
{
	/* Looked at again: another holder of the same listener (a copy's)
	 * may have answered it in this turn of the loop, and the receive
	 * would then wait. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
		return;
	struct seccomp_notif req;
	memset(&req, 0, sizeof req);
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
		return; /* the asking thread died meanwhile */
	struct seccomp_notif_resp resp = { .id = req.id };
	struct session *g = gate_grant(sup, &req);
	if (g) {
		g->gate_open = false;
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	} else {
		resp.error = -EPERM;
		/* Said at the 1st, 2nd, 4th, 8th... refusal: a cell that asks in
		 * a loop does not fill the log. */
		unsigned long n = s ? ++s->gate_refused : 1;
		if (s && (n & (n - 1)) == 0)
			log_info("session %s: a process (pid %u) asked to leave the session's process tree (%s): refused (%lu so far)",
				 s->name, req.pid,
				 req.data.nr == __NR_clone ? "clone with CLONE_PARENT" : "prctl PR_SET_CHILD_SUBREAPER 0", n);
	}
	if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
		log_warn("the seccomp gate's answer failed: %s", strerror(errno));
}

static void gate_event(void *arg, int fd, short revents)
{
	struct session *s = arg;
	if ((revents & (POLLHUP | POLLERR)) && !(revents & POLLIN)) {
		/* No process with the filter is left. */
		gate_close(s->sup, s);
		return;
	}
	gate_answer(s->sup, s, fd);
}

/* A seccomp listener, as the kernel names its file. */
static bool is_listener(int fd)
{
	char path[64], link[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return false;
	link[n] = '\0';
	return strcmp(link, "anon_inode:seccomp notify") == 0;
}

void gate_attach(struct sup *sup, struct session *s, int fd)
{
	gate_close(sup, s);
	if (fd < 0)
		return;
	if (!is_listener(fd)) {
		/* Not ours to answer: whatever it is, it is closed, and the
		 * session's requests, should it have a gate, fail closed
		 * (ENOSYS once no one holds the listener). */
		log_warn("session %s: its hello carried a descriptor that is no seccomp listener: closed", s->name);
		close(fd);
		return;
	}
	s->gate_fd = fd;
	loop_watch(sup->cfg.loop, fd, POLLIN, gate_event, s);
}

void gate_share(struct sup *sup, struct session *copy, const struct session *parent)
{
	gate_close(sup, copy);
	if (parent->gate_fd < 0)
		return;
	int fd = fcntl(parent->gate_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		log_warn("session %s: cannot hold its seccomp gate: %s", copy->name, strerror(errno));
		return;
	}
	copy->gate_fd = fd;
	loop_watch(sup->cfg.loop, fd, POLLIN, gate_event, copy);
}

/* A listener no session holds any more: kept, answering as any holder
 * does (a copy forked from that session may still hold it too), until the
 * kernel says no process with its filter is left (POLLHUP).
 * Attack: were it closed while a process of the session still lived (a
 * reset kills the session, the sweep ends its children a moment later),
 * the kernel would let go of the filter's listener, and that process could
 * stack a listener of its own (refused with EBUSY only while this one is
 * held), answer its own clone(CLONE_PARENT) and make a child of the zygote
 * born after the sweep's list. */
struct gate_orphan {
	int fd;
	struct sup *owner;
	struct gate_orphan *later; /* the list of them, in sup->gate_orphans */
};

static void orphan_event(void *arg, int fd, short revents)
{
	struct gate_orphan *o = arg;
	if ((revents & (POLLHUP | POLLERR)) && !(revents & POLLIN)) {
		loop_unwatch(o->owner->cfg.loop, fd);
		close(fd);
		o->fd = -1; /* freed with the others (gate_free) */
		return;
	}
	gate_answer(o->owner, NULL, fd);
}

/* The parent may pass its gate once, for the copy it makes; passed (or
 * not) once the copy is in or has failed. */
void gate_pass_once(struct session *p)
{
	p->gate_open = true;
}

void gate_passed(struct session *p)
{
	p->gate_open = false;
}

/* A new session: no gate yet. */
void gate_none(struct session *s)
{
	s->gate_fd = -1;
}

void gate_close(struct sup *sup, struct session *s)
{
	s->gate_open = false;
	if (s->gate_fd < 0)
		return;
	loop_unwatch(sup->cfg.loop, s->gate_fd);
	struct gate_orphan *o = NULL;
	/* A slot whose listener is gone first: the list stays as long as
	 * the most listeners ever held at once. */
	for (struct gate_orphan *q = sup->gate_orphans; q && !o; q = q->later)
		if (q->fd < 0)
			o = q;
	if (!o) {
		o = xcalloc(1, sizeof *o);
		o->owner = sup;
		o->later = sup->gate_orphans;
		sup->gate_orphans = o;
	}
	o->fd = s->gate_fd;
	s->gate_fd = -1;
	loop_watch(sup->cfg.loop, o->fd, POLLIN, orphan_event, o);
}

void gate_free(struct sup *sup)
{
	while (sup->gate_orphans) {
		struct gate_orphan *o = sup->gate_orphans;
		sup->gate_orphans = o->later;
		if (o->fd >= 0) {
			loop_unwatch(sup->cfg.loop, o->fd);
			close(o->fd);
		}
		free(o);
	}
}
