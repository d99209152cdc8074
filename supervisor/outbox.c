/* The outbox: what the supervisor's handlers owe the layer above and the
 * face, posted, never done on the spot.  A handler that ends a run, drops
 * one, frees a session to start its next run, or ends something the server
 * may wait for (the `ended` callback) records it here; the face
 * (supervisor.c: drain) performs it all at one safe point, with no handler
 * of the supervisor on the stack.  Also the notes, which go out with the
 * reply.
 *
 * Before, each of these was called from inside the handler that decided
 * it: a run's end started the next run from inside the end of the
 * previous one, and the layer above's done ran while the supervisor's
 * state was half changed.  Posted, the order of the effects stays the order
 * they were decided in (the outbox is a FIFO), and each is performed in one
 * place. */
#include "private.h"

struct post {
	enum post_kind kind;
	struct run *run;         /* POST_DONE, POST_DROP: the outbox owns it */
	struct session *s;       /* POST_START, POST_READ, POST_DEAD, POST_SETTLED */
	pid_t pid;               /* POST_SETTLED: the process that was settled */
	/* POST_DONE: the warm-up may load after this reply; POST_READ: a
	 * kill that waited for the process's pidfd follows the read;
	 * POST_DEAD: a sweep follows the death. */
	bool flag;
	struct post *later;   /* the next post, posted after it */
};

/* The drain runs from a timer of no delay, armed once when the outbox
 * turns non-empty: the loop (rpc/loop.c) runs due timers after the fd
 * events of its turn, and never inside one of them, so the drain always
 * starts with no handler on the stack; a post made during a turn is
 * performed in the same turn.  (A hook of the loop's own would do the same
 * for every user of the loop; the timer keeps this in the supervisor.)
 * The face also drains at the end of sup_submit and sup_cancel, which the
 * layer above calls from outside any handler of ours. */
static void outbox_fired(void *arg)
{
	struct sup *sup = arg;
	sup->ob_timer = 0;
	outbox_drain_now(sup, false);
}

static void post(struct sup *sup, enum post_kind kind, struct run *c, struct session *s, bool flag)
{
	struct post *p = xcalloc(1, sizeof *p);
	*p = (struct post){ .kind = kind, .run = c, .s = s, .flag = flag };
	if (sup->ob_tail)
		sup->ob_tail->later = p;
	else
		sup->ob_head = p;
	sup->ob_tail = p;
	if (kind == POST_DONE || kind == POST_DROP)
		sup->ob_runs++;
	if (!sup->ob_timer && !sup->ob_draining && sup->cfg.loop)
		sup->ob_timer = loop_timer(sup->cfg.loop, 0, outbox_fired, sup);
}

void post_done(struct sup *sup, struct run *c, bool warm)
{
	post(sup, POST_DONE, c, NULL, warm);
}

void post_drop(struct sup *sup, struct run *c)
{
	post(sup, POST_DROP, c, NULL, false);
}

void post_start(struct sup *sup, struct session *s)
{
	post(sup, POST_START, NULL, s, false);
}

void post_read(struct sup *sup, struct session *s)
{
	post(sup, POST_READ, NULL, s, false);
}

void post_dead(struct sup *sup, struct session *s, bool sweep)
{
	post(sup, POST_DEAD, NULL, s, sweep);
}

void post_settled(struct sup *sup, struct session *s, pid_t pid)
{
	post(sup, POST_SETTLED, NULL, s, false);
	sup->ob_tail->pid = pid;
}

void post_ended(struct sup *sup)
{
	sup->ob_ended = true;
	if (!sup->ob_timer && !sup->ob_draining && sup->cfg.loop)
		sup->ob_timer = loop_timer(sup->cfg.loop, 0, outbox_fired, sup);
}

bool outbox_holds_runs(const struct sup *sup)
{
	return sup->ob_runs > 0;
}

/* For the drain: the oldest post, out of the outbox (false: empty). */
bool outbox_take(struct sup *sup, enum post_kind *kind, struct run **c, struct session **s, bool *flag, pid_t *pid)
{
	struct post *p = sup->ob_head;
	if (!p)
		return false;
	sup->ob_head = p->later;
	if (!sup->ob_head)
		sup->ob_tail = NULL;
	if (p->kind == POST_DONE || p->kind == POST_DROP)
		sup->ob_runs--;
	*kind = p->kind;
	*c = p->run;
	*s = p->s;
	*flag = p->flag;
	*pid = p->pid;
	free(p);
	return true;
}

/* For the drain, once the outbox is empty: whether `ended` is owed. */
bool outbox_take_ended(struct sup *sup)
{
	bool e = sup->ob_ended;
	sup->ob_ended = false;
	return e;
}

void outbox_drain_now(struct sup *sup, bool teardown)
{
	/* Not again from inside the drain (the face entered from an event
	 * of the layer above): the drain running takes what is posted. */
	if (sup->ob_draining)
		return;
	if (sup->ob_timer) {
		loop_timer_cancel(sup->cfg.loop, sup->ob_timer);
		sup->ob_timer = 0;
	}
	sup->ob_draining = true;
	sup->ob_drain(sup, teardown);
	sup->ob_draining = false;
	/* The drain empties the outbox; should anything be left, the next
	 * turn takes it. */
	if (!teardown && (sup->ob_head || sup->ob_ended) && sup->cfg.loop)
		sup->ob_timer = loop_timer(sup->cfg.loop, 0, outbox_fired, sup);
}

/* Appends text to *dst as a paragraph of its own (a note). */
static void append_para(char **dst, const char *text)
{
	if (!text || !*text)
		return;
	size_t a = *dst ? strlen(*dst) : 0, b = strlen(text);
	char *n = xmalloc(a + b + 2);
	if (a) {
		memcpy(n, *dst, a);
		n[a++] = '\n';
	}
	memcpy(n + a, text, b + 1);
	free(*dst);
	*dst = n;
}

/* Adds a paragraph to the call's note (other parts of the server add
 * theirs). */
void add_note(struct run *c, const char *text)
{
	append_para(&c->note, text);
}

/* The call's note becomes text (what it said before, if anything, is the
 * caller's to keep in it). */
void set_note(struct run *c, const char *text)
{
	free(c->note);
	c->note = xstrdup(text);
}

/* Adds a paragraph to the note of the session's next reply. */
void note_next(struct session *s, const char *text)
{
	append_para(&s->next_note, text);
}
