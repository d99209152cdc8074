/* The kernel's view of a session (kview.h). */
#include "private.h"
#include "kview.h"

#include "../common/pcache.h"
#include "../common/pdir.h"
#include "../common/pstat.h"

#include <stddef.h>

/* A process's /proc directory: open, or -1 (its files read by path), and
 * its path (the key of the descriptors pcache.h keeps). */
struct pdirfd {
	int fd;
	char path[32];
};

/* Reads a small /proc file of the process into buf (NUL-terminated). */
static bool proc_read(const struct pdirfd *p, const char *name, char *buf, size_t size)
{
	return pcache_read(p->fd, p->path, name, buf, size) > 0;
}

static bool field_ull(const char *text, const char *key, unsigned long long *v)
{
	const char *p = strstr(text, key);
	if (!p)
		return false;
	char *end;
	errno = 0;
	*v = strtoull(p + strlen(key), &end, 10);
	return errno == 0 && end != p + strlen(key);
}

static int kfd_cmp(const void *a, const void *b)
{
	int x = ((const struct kfd *)a)->fd, y = ((const struct kfd *)b)->fd;
	return (x > y) - (x < y);
}

static bool read_fds(const struct pdirfd *p, struct kview *kv)
{
	struct pdir dir;
	char at[sizeof p->path + 8];
	snprintf(at, sizeof at, "%s/fdinfo", p->path); /* by path, as kview_read says */
	if (pdir_open(&dir, AT_FDCWD, at) < 0)
		return false;
	bool ok = true;
	for (const char *name; ok && (name = pdir_next(&dir));) {
		if (name[0] < '0' || name[0] > '9')
			continue;
		/* More than the view holds (the session's count, hostile):
		 * not seen, so an effect, never a write past the array. */
		if (kv->n >= KV_FDS) {
			ok = false;
			break;
		}
		char buf[512];
		struct kfd *k = &kv->fd[kv->n];
		unsigned long long flags = 0, mnt = 0;
		const char *fl = NULL;
		ok = pdir_read(&dir, name, buf, sizeof buf) > 0 && field_ull(buf, "pos:\t", &k->pos) &&
		     field_ull(buf, "mnt_id:\t", &mnt) && field_ull(buf, "ino:\t", &k->ino) && (fl = strstr(buf, "flags:\t")) &&
		     sscanf(fl + 7, "%llo", &flags) == 1;
		if (!ok)
			break;
		k->fd = atoi(name);
		k->flags = (unsigned)flags;
		k->mnt = (int)mnt;
		kv->n++;
	}
	ok = ok && dir.err == 0;
	pdir_close(&dir);
	qsort(kv->fd, (size_t)kv->n, sizeof kv->fd[0], kfd_cmp);
	return ok;
}

/* A process's page faults and its reaped children's, from its stat. */
static bool faults(const struct pdirfd *p, const char *name, unsigned long long *flt, unsigned long long *maj, unsigned long long *cflt,
		   unsigned long long *cmaj, struct kview *kv, struct pstat *out)
{
	struct pstat ps;
	if (pstat_read_kept(p->fd, p->path, name, &ps) < 0)
		return false;
	if (out)
		*out = ps;
	*flt = ps.minflt, *cflt = ps.cminflt, *maj = ps.majflt, *cmaj = ps.cmajflt;
	if (kv) {
		kv->minflt = ps.minflt;
		kv->rss = ps.rss;
		kv->cpu_ticks = ps.utime + ps.stime;
	}
	return true;
}

/* Adds to kv the children of every thread of the process whose /proc
 * directory is pfd, as the kernel lists them (zombies too), and with own
 * (the session) counts its threads; false when they cannot all be read or
 * do not fit.  seen: the process's stat just read (pdir_open_tasks_seen),
 * or NULL. */
static bool list_kids(const struct pdirfd *proc, struct kview *kv, bool own, const struct pstat *seen)
{
	struct pdir dir;
	if (pdir_open_tasks_seen(&dir, proc->fd, proc->path, seen) < 0)
		return false;
	bool ok = true;
	for (const char *tid; ok && (tid = pdir_next(&dir));) {
		char path[300], buf[400];
		snprintf(path, sizeof path, "%.20s/children", tid);
		ssize_t k = pdir_read(&dir, path, buf, sizeof buf);
		ok = k >= 0 && (size_t)k < sizeof buf - 1;
		if (!ok)
			buf[0] = '\0';
		for (char *p = buf, *end; ok && *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			ok = pid > 0 && kv->nkids < KV_KIDS;
			if (ok)
				kv->kid[kv->nkids++] = (pid_t)pid;
		}
		if (own)
			kv->threads++;
	}
	ok = ok && dir.err == 0;
	pdir_close(&dir);
	return ok;
}

/* The children of every thread, each with its faults; and the children of
 * each of them but the session's current checkpoint (s->ckpt_hpid), which
 * are the checkpoint it replaced and what the last call left: all of them
 * were ended with SIGKILL (the server, through the replaced one's pidfd;
 * the zygote's sweep, before the session rested), so none of them runs
 * again to reap a child of its own.  Their children can only come to the
 * session (its subreaper) and be reaped there, adding what they wrote and
 * faulted to its counters: the replaced checkpoint's saver, with the last
 * save's bytes.  Listed before the cell and at its freeze alike, they count
 * as the session's children from the start.  (The current checkpoint is
 * frozen and may yet reap its own saver: its children are never listed, so
 * their bytes are never taken off.)  False when they cannot all be read. */
static bool read_children(const struct pdirfd *p, const struct session *s, struct kview *kv, const struct pstat *seen)
{
	bool ok = list_kids(p, kv, true, seen);
	for (int i = 0, n = kv->nkids; ok && i < n; i++) {
		if (kv->kid[i] == s->ckpt_hpid)
			continue;
		struct pdirfd kid;
		snprintf(kid.path, sizeof kid.path, "/proc/%d", (int)kv->kid[i]);
		kid.fd = open(kid.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		/* Gone since the list (reaped): its children went to the
		 * session after its list was read, and what they bring
		 * counts as the cell's (a checkpoint, never less). */
		if (kid.fd >= 0) {
			ok = list_kids(&kid, kv, false, NULL);
			close(kid.fd);
		}
	}
	for (int i = 0; ok && i < kv->nkids; i++) {
		/* Read by path, not through a directory of its own: the kid
		 * may be gone (reaped) and its pid another's by now, which
		 * the stat and io read as well as a directory would. */
		const struct pdirfd by_path = { .fd = AT_FDCWD, .path = "" };
		char stat[64];
		unsigned long long f, m, cf, cm;
		snprintf(stat, sizeof stat, "/proc/%d/stat", (int)kv->kid[i]);
		/* Gone since the list (reaped): it counts in the parent's. */
		kv->kid_flt[i] = kv->kid_maj[i] = kv->kid_wchar[i] = 0;
		if (faults(&by_path, stat, &f, &m, &cf, &cm, NULL, NULL)) {
			kv->kid_flt[i] = f + cf;
			kv->kid_maj[i] = m + cm;
		}
		/* What it wrote so far, itself and what it reaped: added to the
		 * session's wchar when the session reaps it.  Unreadable (no
		 * ptrace access), 0: then its bytes count as the cell's.  Not
		 * read when the session's own io was not (kv->own false: only
		 * the session's word counts then, and the kids' bytes with
		 * it). */
		char io[64], buf[1024];
		snprintf(io, sizeof io, "/proc/%d/io", (int)kv->kid[i]);
		if (!kv->own || !proc_read(&by_path, io, buf, sizeof buf) || !field_ull(buf, "wchar: ", &kv->kid_wchar[i]))
			kv->kid_wchar[i] = 0;
	}
	return ok;
}

/* The session's main thread's schedstat line into line; false when it
 * cannot be read or says nothing (all zero).  The caller asks the pidfd
 * afterwards. */
static bool runs_line(const struct session *s, char *line, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/schedstat", (int)s->hpid);
	ssize_t k = s->hpid > 0 && s->pidfd >= 0 ? pcache_read(AT_FDCWD, NULL, path, line, n) : -1;
	return k > 0 && strspn(line, "0 \n") < (size_t)k;
}

/* The kernel's view of the stopped session; kv->valid false when any part
 * could not be read, or the process is no longer the one the pidfd
 * names (its pid was taken by another).
 *
 * Its files are read by path (most through descriptors kept since their
 * first read, pcache.h), with no directory of its own opened and closed
 * around them (two system calls a view, two views a call): the pidfd's
 * look after the last read is what says they were all this process's.
 * While the process is not reaped its pid names no other, so every read
 * before that look read it; once it is, the view is not valid. */
void kview_read(const struct session *s, struct kview *kv, bool *io_denied)
{
	memset(kv, 0, offsetof(struct kview, fd));
	char buf[1024];
	struct pdirfd p = { .fd = -1 };
	if (s->hpid <= 0 || s->pidfd < 0)
		return;
	snprintf(p.path, sizeof p.path, "/proc/%d", (int)s->hpid);
	unsigned long long flt = 0, maj = 0;
	/* io and fdinfo need ptrace's read access to the process, which a
	 * server without CAP_SYS_PTRACE lacks (the session is undumpable):
	 * then the session's own word stands in for them (kview_effect). */
	if (!io_denied || !*io_denied) {
		ssize_t k = pcache_read(p.fd, p.path, "io", buf, sizeof buf);
		/* Refused: the server lacks that access to this process, and
		 * nothing it does gives it back (three system calls a view,
		 * two views a call, spared from now on).  A session cannot
		 * make the read fail (that would take other credentials); if
		 * it could, it would only put its own word in the place of
		 * the kernel's for its own rollback, which it can spoil
		 * anyway. */
		if (io_denied && (k == -EACCES || k == -EPERM))
			*io_denied = true;
		kv->own = k > 0 && field_ull(buf, "wchar: ", &kv->wchar) && read_fds(&p, kv);
	}
	/* Stopped: the stat read for its faults also says its threads. */
	struct pstat ps;
	bool ok = faults(&p, "stat", &flt, &maj, &kv->cminflt, &kv->cmajflt, kv, &ps) && read_children(&p, s, kv, &ps);
	kv->runs_known = runs_line(s, kv->runs, sizeof kv->runs);
	kv->valid = ok && pidfd_signal(s->pidfd, 0) == 0;
}

bool kview_runs(const struct session *s, char *line, size_t n)
{
	return runs_line(s, line, n) && pidfd_signal(s->pidfd, 0) == 0;
}

static bool has_kid(const struct kview *kv, pid_t pid)
{
	for (int i = 0; i < kv->nkids; i++)
		if (kv->kid[i] == pid)
			return true;
	return false;
}

/* The bytes the children there before and reaped during the cell had
 * written before it: a saver's pipe (the saver of a retired checkpoint is
 * reparented to the session, which reaps it in the next cell), never the
 * cell's.  Only what they had written when the cell was sent: what a child
 * wrote meanwhile counts as the cell's. */
static unsigned long long gone_wchar(const struct kview *a, const struct kview *b)
{
	unsigned long long w = 0;
	for (int i = 0; i < a->nkids; i++)
		if (!has_kid(b, a->kid[i]))
			w += a->kid_wchar[i];
	return w;
}

/* A child at the freeze that was not there before, or one reaped during
 * the cell: its faults land in the session's cminflt (every process
 * started faults in pages).  The children there before (the checkpoint
 * the last one replaced, killed and reaped by the session now) add what
 * they had; anything else is a process the cell started. */
static bool started(const struct kview *a, const struct kview *b)
{
	unsigned long long flt = 0, maj = 0;
	for (int i = 0; i < b->nkids; i++)
		if (!has_kid(a, b->kid[i]))
			return true;
	for (int i = 0; i < a->nkids; i++)
		if (!has_kid(b, a->kid[i])) {
			flt += a->kid_flt[i];
			maj += a->kid_maj[i];
		}
	return b->cminflt != a->cminflt + flt || b->cmajflt != a->cmajflt + maj;
}

/* The session's own word on what the cell did (its result's effect: an
 * audit event, a descriptor; printable letters only), or NULL. */
static const char *said_effect(const struct cell_result *r, char *why, size_t n)
{
	if (!r || !r->effect)
		return NULL;
	char word[RESULT_EFFECT_MAX + 1];
	size_t k = 0;
	for (const char *p = r->effect; *p && k + 1 < sizeof word; p++)
		word[k++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
					    *p == '_' || *p == ' '
				    ? *p
				    : '?';
	word[k] = '\0';
	snprintf(why, n, "the session saw it: %.90s", word);
	return why;
}

/* What the call did past the session's memory, as two views of it show
 * (before, at its freeze), with `output` the bytes the server read from
 * its stdout and stderr and r the cell's result; NULL when nothing.  why
 * gets the reason.  Without ptrace's read access the bytes written and
 * the descriptors are the session's word (r->wchar, r->effect): about its
 * own rollback, as import_read is; a session that lies gets its own cell
 * run again, which it could do by itself.  Missing, a checkpoint. */
const char *kview_effect(const struct kview *a, const struct kview *b, unsigned long long output,
				const struct cell_result *r, char *why, size_t n)
{
	bool own = a->own && b->own;
	/* Without its own counter, the session's; without either (an
	 * undumpable process of an unprivileged user reads no io of its own),
	 * none: its audit events and descriptors below still count. */
	unsigned long long grew = b->wchar - a->wchar, gone = own ? gone_wchar(a, b) : 0;
	/* Seen: 19 of 84 calls of an agent's loop checkpointed for "it
	 * wrote 280 MB besides its output", the last save's, reaped. */
	if (grew >= gone)
		grew -= gone;
	long long wrote = own ? (long long)grew : r ? r->wchar : -1;
	if (!a->valid || !b->valid || !r)
		snprintf(why, n, "the kernel's view of the session could not be read");
	else if (wrote >= 0 && (unsigned long long)wrote > output)
		snprintf(why, n, "it wrote %llu bytes besides its output (a file, a pipe or a socket)",
			 (unsigned long long)wrote - output);
	else if (own && (unsigned long long)wrote < output)
		snprintf(why, n, "part of its output was written by another process");
	else if (started(a, b))
		snprintf(why, n, "it started a process");
	else if (said_effect(r, why, n))
		return why;
	else if (!own)
		return NULL;
	else if (a->n != b->n)
		snprintf(why, n, "it opened or closed a file descriptor");
	else {
		for (int i = 0; i < a->n; i++) {
			const struct kfd *x = &a->fd[i], *y = &b->fd[i];
			if (x->fd != y->fd || x->ino != y->ino || x->mnt != y->mnt) {
				snprintf(why, n, "it opened or closed a file descriptor");
				return why;
			}
			if (x->pos != y->pos || x->flags != y->flags) {
				snprintf(why, n, "it moved the offset of descriptor %d, shared with the checkpoint", x->fd);
				return why;
			}
		}
		return NULL;
	}
	return why;
}

