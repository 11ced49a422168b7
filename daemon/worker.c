/*
 * worker.c - the worker pool: threads made before serving, each with its
 * own queue woken through an eventfd.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "hpzerod.h"

struct worker {
	pthread_t		 thread;
	int			 id;
	int			 efd;
	pthread_mutex_t		 lock;
	TAILQ_HEAD(, work)	 queue;
	int			 stop;
};

static struct worker	*workers;
static int		 nworkers;
static pthread_barrier_t worker_barrier;

int
worker_count(void)
{
	return (nworkers);
}

/* Take everything queued for w, or wait for the eventfd. */
static void *
worker_main(void *arg)
{
	struct worker	*w = arg;
	struct work	*item;
	char		 name[16];
	uint64_t	 v;

	snprintf(name, sizeof(name), "hpz-worker-%d", w->id);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&worker_barrier);
	for (;;) {
		pthread_mutex_lock(&w->lock);
		item = TAILQ_FIRST(&w->queue);
		if (item != NULL)
			TAILQ_REMOVE(&w->queue, item, entry);
		if (item == NULL && w->stop) {
			pthread_mutex_unlock(&w->lock);
			break;
		}
		pthread_mutex_unlock(&w->lock);
		if (item != NULL) {
			uffd_handle(item);
			continue;
		}
		if (read(w->efd, &v, sizeof(v)) == -1 && errno != EINTR)
			fatal("worker %d: read eventfd", w->id);
	}
	return (NULL);
}

/* Make the pool; returns once every worker is running. */
int
worker_start(int n)
{
	int	i, error;

	if (n < 1 || n > HPZD_WORKERS_MAX)
		return (-EINVAL);
	if ((workers = calloc((size_t)n, sizeof(*workers))) == NULL)
		return (-ENOMEM);
	pthread_barrier_init(&worker_barrier, NULL, (unsigned)n + 1);
	for (i = 0; i < n; i++) {
		workers[i].id = i;
		pthread_mutex_init(&workers[i].lock, NULL);
		TAILQ_INIT(&workers[i].queue);
		if ((workers[i].efd = eventfd(0, EFD_CLOEXEC)) == -1)
			fatal("eventfd");
		error = pthread_create(&workers[i].thread, NULL, worker_main,
		    &workers[i]);
		if (error != 0) {
			errno = error;
			fatal("pthread_create");
		}
	}
	nworkers = n;
	pthread_barrier_wait(&worker_barrier);
	return (0);
}

/* Finish queued work, then end every worker. */
void
worker_stop(void)
{
	uint64_t	one = 1;
	int		i;

	for (i = 0; i < nworkers; i++) {
		pthread_mutex_lock(&workers[i].lock);
		workers[i].stop = 1;
		pthread_mutex_unlock(&workers[i].lock);
		if (write(workers[i].efd, &one, sizeof(one)) == -1)
			log_warn("worker %d: wake", i);
	}
	for (i = 0; i < nworkers; i++) {
		pthread_join(workers[i].thread, NULL);
		close(workers[i].efd);
		pthread_mutex_destroy(&workers[i].lock);
	}
	pthread_barrier_destroy(&worker_barrier);
	free(workers);
	workers = NULL;
	nworkers = 0;
}

/*
 * Queue a fault.  Faults on one page always go to one worker, so they are
 * resolved in order and the second finds the page mapped.
 */
void
worker_submit(struct work *item)
{
	struct worker	*w;
	uint64_t	 idx, one = 1;
	int		 empty;

	idx = region_page_index(item->region, item->addr);
	w = &workers[(item->region->id * 7919 + idx) % (uint64_t)nworkers];
	pthread_mutex_lock(&w->lock);
	empty = TAILQ_EMPTY(&w->queue);
	TAILQ_INSERT_TAIL(&w->queue, item, entry);
	pthread_mutex_unlock(&w->lock);
	if (empty && write(w->efd, &one, sizeof(one)) == -1)
		fatal("worker %d: wake", w->id);
}
