/* The worker pool (see work.h).  One mutex guards both queues; a worker
 * signals a finished job with one write to an eventfd that the loop
 * watches, and the loop delivers done() in the order jobs finished. */
#include "work.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

#define WORK_MAX_THREADS 4

struct work {
	struct loop *loop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *qhead, *qtail;     /* waiting to run */
	struct job *dhead, *dtail;     /* run, waiting for done() */
	bool stop;
	int efd;
	pthread_t th[WORK_MAX_THREADS];
	int nth;
};

static void push(struct job **head, struct job **tail, struct job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static void *worker(void *arg)
{
	struct work *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->qhead && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		struct job *j = w->qhead;
		w->qhead = j->next;
		if (!w->qhead)
			w->qtail = NULL;
		pthread_mutex_unlock(&w->mu);
		j->run(j);
		pthread_mutex_lock(&w->mu);
		push(&w->dhead, &w->dtail, j);
		uint64_t one = 1;
		if (write(w->efd, &one, sizeof one) < 0 && errno != EAGAIN)
			log_warn("worker: cannot wake the event loop: %m");
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void deliver(void *arg, int fd, short revents)
{
	struct work *w = arg;
	uint64_t n;
	if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&w->mu);
	struct job *j = w->dhead;
	w->dhead = w->dtail = NULL;
	pthread_mutex_unlock(&w->mu);
	while (j) {
		struct job *next = j->next;
		j->done(j, j->abandoned);
		j = next;
	}
}

struct work *work_new(struct loop *l, int nthreads)
{
	struct work *w = xcalloc(1, sizeof *w);
	w->loop = l;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0 || pthread_mutex_init(&w->mu, NULL) != 0 || pthread_cond_init(&w->cv, NULL) != 0) {
		if (w->efd >= 0)
			close(w->efd);
		free(w);
		return NULL;
	}
	if (nthreads > WORK_MAX_THREADS)
		nthreads = WORK_MAX_THREADS;
	/* The workers take no signal: SIGINT, SIGTERM and SIGHUP are read from
	 * the loop's signalfd, and a signal handled on a worker would be lost
	 * to it. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&w->th[w->nth], NULL, worker, w) == 0)
			w->nth++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (w->nth == 0)
		log_warn("no worker thread could be started: workspace reads run on the event loop");
	loop_watch(l, w->efd, POLLIN, deliver, w);
	return w;
}

void work_submit(struct work *w, struct job *j)
{
	j->abandoned = false;
	if (!w || w->nth == 0) {
		j->run(j);
		j->done(j, false);
		return;
	}
	pthread_mutex_lock(&w->mu);
	push(&w->qhead, &w->qtail, j);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void work_abandon(struct job *j)
{
	if (j)
		j->abandoned = true;
}

void work_free(struct work *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nth; i++)
		pthread_join(w->th[i], NULL);
	loop_unwatch(w->loop, w->efd);
	/* Nobody waits for these any more. */
	struct job *lists[2] = { w->dhead, w->qhead };
	for (int k = 0; k < 2; k++)
		for (struct job *j = lists[k]; j;) {
			struct job *next = j->next;
			j->done(j, true);
			j = next;
		}
	close(w->efd);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
