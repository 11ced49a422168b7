/*
 * prep-thread.c - the prep thread: one thread, made at start-up, that
 * takes jobs in order off the event loop (prep.c's page-state walks,
 * dropping the garbage of a stored region that is not taken back in
 * fdstore.c, the cost measure at start).  The loop hears that a job is
 * done through an eventfd and finishes the request there.
 *
 * A job's work runs on the prep thread, its done callback on the main
 * thread.  Without the thread (the fuzzer) a job runs at once, inline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <event2/event.h>

#include "globals.h"
#include "log.h"
#include "prep-thread.h"

TAILQ_HEAD(prep_jobs, prep_job);

static pthread_mutex_t	 prep_lock = PTHREAD_MUTEX_INITIALIZER;
/* prep_cond: work is queued; prep_idle: a job stopped running. */
static pthread_cond_t	 prep_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t	 prep_idle = PTHREAD_COND_INITIALIZER;
static struct prep_jobs	 prep_queue = TAILQ_HEAD_INITIALIZER(prep_queue);
static struct prep_jobs	 prep_done = TAILQ_HEAD_INITIALIZER(prep_done);
static pthread_t	 prep_thread;
static int		 prep_running;
static int		 prep_stopping;
static int		 prep_efd = -1;
static struct event	*prep_ev;

static void *
prep_main(void *arg)
{
	struct prep_job	*j;
	uint64_t	 one = 1;

	(void)arg;
	pthread_mutex_lock(&prep_lock);
	for (;;) {
		while (TAILQ_EMPTY(&prep_queue) && !prep_stopping)
			pthread_cond_wait(&prep_cond, &prep_lock);
		if ((j = TAILQ_FIRST(&prep_queue)) == NULL)
			break;
		TAILQ_REMOVE(&prep_queue, j, entry);
		j->where = PREP_RUNNING;
		pthread_mutex_unlock(&prep_lock);
		j->work(j);
		pthread_mutex_lock(&prep_lock);
		j->where = PREP_FINISHED;
		TAILQ_INSERT_TAIL(&prep_done, j, entry);
		pthread_cond_broadcast(&prep_idle);
		if (write(prep_efd, &one, sizeof(one)) == -1 &&
		    errno != EAGAIN)
			log_warn("prep: wake the main thread");
	}
	pthread_mutex_unlock(&prep_lock);
	return (NULL);
}

/* The finished jobs: their requests end here (main thread). */
static void
prep_done_cb(int fd, short events, void *arg)
{
	struct prep_job	*j;
	uint64_t	 v;

	(void)events;
	(void)arg;
	if (read(fd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("prep: read eventfd");
	for (;;) {
		pthread_mutex_lock(&prep_lock);
		if ((j = TAILQ_FIRST(&prep_done)) != NULL)
			TAILQ_REMOVE(&prep_done, j, entry);
		pthread_mutex_unlock(&prep_lock);
		if (j == NULL)
			break;
		j->done(j);	/* it may free j: not touched after */
	}
}

/* Start the prep thread (once, before serving). */
int
prep_start(void)
{
	int	error;

	if (prep_running)
		return (0);
	if ((prep_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		error = -errno;
		log_warn("prep: eventfd");
		return (error);
	}
	prep_ev = event_new(hpzd_base, prep_efd, EV_READ | EV_PERSIST,
	    prep_done_cb, NULL);
	if (prep_ev == NULL || event_add(prep_ev, NULL) == -1) {
		log_warnx("prep: cannot watch its eventfd");
		error = -ENOMEM;
		goto fail;
	}
	if ((error = hpzd_thread_start(&prep_thread, prep_main,
	    "hpzd-prep")) != 0)
		goto fail;
	prep_running = 1;
	return (0);
fail:
	if (prep_ev != NULL)
		event_free(prep_ev);
	prep_ev = NULL;
	close(prep_efd);
	prep_efd = -1;
	return (error);
}

/* Finish what is queued (a stored region's garbage must go), then stop. */
void
prep_stop(void)
{
	if (!prep_running)
		return;
	pthread_mutex_lock(&prep_lock);
	prep_stopping = 1;
	pthread_cond_broadcast(&prep_cond);
	pthread_mutex_unlock(&prep_lock);
	pthread_join(prep_thread, NULL);
	prep_running = 0;
	prep_done_cb(prep_efd, EV_READ, NULL);
	event_free(prep_ev);
	prep_ev = NULL;
	close(prep_efd);
	prep_efd = -1;
}

/*
 * Run a job j (the caller's, kept until done is called or it is called
 * off): its work on the prep thread, then its done callback on the main
 * thread.  1 if it was queued, 0 if it already ran (no thread).
 */
int
prep_submit(struct prep_job *j, void (*work)(struct prep_job *),
    void (*done)(struct prep_job *), void *arg)
{
	memset(j, 0, sizeof(*j));
	j->work = work;
	j->done = done;
	j->arg = arg;
	if (!prep_running) {
		j->where = PREP_RUNNING;
		work(j);
		j->where = PREP_FINISHED;
		done(j);
		return (0);
	}
	pthread_mutex_lock(&prep_lock);
	j->where = PREP_QUEUED;
	TAILQ_INSERT_TAIL(&prep_queue, j, entry);
	pthread_cond_signal(&prep_cond);
	pthread_mutex_unlock(&prep_lock);
	return (1);
}

/*
 * Call off a job (main thread): once this returns its work has stopped,
 * within one slice, and its done callback will not be called.
 */
void
prep_cancel(struct prep_job *j)
{
	pthread_mutex_lock(&prep_lock);
	switch (j->where) {
	case PREP_QUEUED:
		TAILQ_REMOVE(&prep_queue, j, entry);
		break;
	case PREP_RUNNING:
		atomic_store(&j->cancel, 1);
		while (j->where == PREP_RUNNING)
			pthread_cond_wait(&prep_idle, &prep_lock);
		/* FALLTHROUGH */
	case PREP_FINISHED:
		TAILQ_REMOVE(&prep_done, j, entry);
		break;
	}
	pthread_mutex_unlock(&prep_lock);
}

/* Should the work stop (between slices)? */
int
prep_cancelled(const struct prep_job *j)
{
	return (atomic_load(&j->cancel));
}

void *
prep_arg(const struct prep_job *j)
{
	return (j->arg);
}

/* Any other job: work on the prep thread, done on the main thread. */
int
prep_job(struct prep_job *j, void (*work)(struct prep_job *),
    void (*done)(struct prep_job *), void *arg)
{
	return (prep_submit(j, work, done, arg));
}
