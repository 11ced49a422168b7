/*
 * prep.c - the work of a request whose cost grows with a region's page
 * count, done off the event loop: filling a new HPZ_DISCARD page state with
 * garbage, resolving what a dead server left busy in an adopted one (and
 * counting its garbage), dropping the garbage of a stored region that is
 * not taken back (fdstore.c).  One thread, made at start-up, takes the
 * jobs in order and works in slices that each look for a cancel; the loop
 * hears that a job is done through an eventfd and finishes the request
 * there.  The reply waits for the job; the loop does not.
 *
 * A job's work runs on the prep thread, its done callback on the main
 * thread.  Without the thread (the fuzzer) a job runs at once, inline.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <linux/magic.h>

#include <event2/event.h>

#include "hpz-state.h"

#include "cctx.h"
#include "globals.h"
#include "log.h"
#include "prep.h"
#include "region.h"

/* State bytes worked on between two looks at the cancel flag. */
#define PREP_SLICE	(1ULL << 20)

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
static int
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
static void
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

/*
 * The next run of page-state bytes of a state memfd (sfd, npages pages)
 * at or after page from that holds data: [*lo, *hi).  Holes read zero
 * (PAGE_KEEP, nothing to do) and reading them through a shared mapping
 * would allocate them, so walks go by SEEK_DATA.  0 when there is none.
 */
int
prep_state_extent(int sfd, uint64_t npages, uint64_t from, uint64_t *lo,
    uint64_t *hi)
{
	off_t	d, h;

	if (from >= npages)
		return (0);
	d = lseek(sfd, (off_t)(HPZ_STATE_PAGES_OFF + from), SEEK_DATA);
	if (d == -1) {
		if (errno == ENXIO)
			return (0);
		*lo = from;		/* cannot tell: all of it */
		*hi = npages;
		return (1);
	}
	if ((uint64_t)d >= HPZ_STATE_PAGES_OFF + npages)
		return (0);
	h = lseek(sfd, d, SEEK_HOLE);
	*lo = (uint64_t)d - HPZ_STATE_PAGES_OFF;
	*hi = h == -1 || (uint64_t)h > HPZ_STATE_PAGES_OFF + npages ?
	    npages : (uint64_t)h - HPZ_STATE_PAGES_OFF;
	return (*hi > *lo);
}

/*
 * The next run of the region's pages [*lo, *hi) at or after page from
 * that its file holds (data, garbage or not): holes hold nothing stale,
 * and a page allocated later is zeroed by the kernel.  shmem says where
 * its data is (SEEK_DATA); hugetlbfs does not, but says how much it holds
 * (st_blocks): none, or all of it as far as we can tell.  0: none left.
 */
static int
prep_file_extent(struct region *r, uint64_t from, uint64_t *lo,
    uint64_t *hi)
{
	struct stat	st;
	off_t		d, h, start, end;

	if (from >= r->npages)
		return (0);
	if (r->fs_magic == HUGETLBFS_MAGIC) {
		if (fstat(r->fd, &st) == 0 && st.st_blocks == 0)
			return (0);
		*lo = from;
		*hi = r->npages;
		return (1);
	}
	start = (off_t)(r->offset + from * r->page_size);
	end = (off_t)(r->offset + r->len);
	if ((d = lseek(r->fd, start, SEEK_DATA)) == -1) {
		if (errno == ENXIO)
			return (0);
		*lo = from;		/* cannot tell: all of it */
		*hi = r->npages;
		return (1);
	}
	if (d >= end)
		return (0);
	if ((h = lseek(r->fd, d, SEEK_HOLE)) == -1 || h > end)
		h = end;
	*lo = ((uint64_t)d - r->offset) / r->page_size;
	*hi = ((uint64_t)h - r->offset + r->page_size - 1) / r->page_size;
	return (*hi > *lo);
}

/*
 * A new HPZ_DISCARD region: every page the file holds is garbage.  A hole
 * is not: nothing was ever written there, and a region with no garbage at
 * all leaves its faults to the kernel from the start (intercept.c).
 */
static void
prep_fill(atomic_int *cancel, struct region *r)
{
	uint64_t	i, n, lo, hi, found = 0;

	for (i = 0; prep_file_extent(r, i, &lo, &hi); i = hi) {
		for (i = lo; i < hi; i += n) {
			if (atomic_load(cancel))
				return;
			n = hi - i < PREP_SLICE ? hi - i : PREP_SLICE;
			/* Nobody serves it yet: plain stores will do. */
			memset((void *)(r->state + i), PAGE_GARBAGE, n);
			found += n;
		}
	}
	atomic_thread_fence(memory_order_release);
	r->garbage_found = found;
}

/* An adopted state: resolve what a dead server left busy, count garbage. */
static void
prep_adopt(atomic_int *cancel, struct region *r)
{
	uint64_t	lo, hi, i, n, k, recovered = 0, garbage = 0;

	for (i = 0; prep_state_extent(r->sfd, r->npages, i, &lo, &hi);
	    i = hi) {
		for (i = lo; i < hi; i += n) {
			if (atomic_load(cancel))
				return;
			n = hi - i < PREP_SLICE ? hi - i : PREP_SLICE;
			recovered += state_recover(r->state + i, n);
			for (k = i; k < i + n; k++)
				if ((atomic_load_explicit(&r->state[k],
				    memory_order_relaxed) & PAGE_STATE_MASK) ==
				    PAGE_GARBAGE)
					garbage++;
		}
	}
	r->recovered = recovered;
	r->garbage_found = garbage;
}

static void
prep_region_walk(atomic_int *cancel, struct region *r)
{
	if (r->prep_kind == PREP_FILL)
		prep_fill(cancel, r);
	else if (r->prep_kind == PREP_ADOPT)
		prep_adopt(cancel, r);
}

static void
prep_region_work(struct prep_job *j)
{
	prep_region_walk(&j->cancel, j->arg);
}

static void
prep_region_done(struct prep_job *j)
{
	struct region	*r = j->arg;

	r->prep = NULL;
	r->prep_kind = PREP_NONE;
	r->prep_ready(r);
}

/*
 * The same walk on the region's client context: its lseeks wait on the
 * client's memfd's inode lock, which the client can hold, so they are
 * made where only that client waits.  A walk called off (the region
 * destroyed meanwhile) ends here: its teardown, queued behind it on the
 * same context, frees the region after this.
 */
static void
prep_region_cwork(struct cctx_job *j)
{
	prep_region_walk(&j->cancel, j->arg);
}

static void
prep_region_cdone(struct cctx_job *j)
{
	struct region	*r = j->arg;

	r->prep = NULL;
	if (cctx_cancelled(j))
		return;
	r->prep_kind = PREP_NONE;
	r->prep_ready(r);
}

/*
 * Do what a new region needs before it serves (main thread), then call
 * ready(r): at once when nothing is left or without the thread (0), else
 * once the walk is done (1), on the region's client context where it has
 * one, else on the prep thread.
 */
int
prep_region(struct region *r, void (*ready)(struct region *))
{
	r->prep_ready = ready;
	if (r->prep_kind == PREP_NONE) {
		ready(r);
		return (0);
	}
	/* Set before it may run (at once, without the thread): done clears it. */
	r->prep = &r->prep_slot;
	if (r->ctx != NULL)
		return (cctx_submit(r->ctx, &r->ctx_prep, prep_region_cwork,
		    prep_region_cdone, r, "a page state walk (lseek "
		    "SEEK_DATA on its files)"));
	return (prep_submit(r->prep, prep_region_work, prep_region_done, r));
}

/*
 * The region goes before it served: stop its walk (main thread).  On a
 * client context this never waits: the walk stops at its next slice, or
 * when the kernel lets it go, and its done callback then does nothing.
 */
void
prep_region_cancel(struct region *r)
{
	if (r->prep == NULL)
		return;
	if (r->ctx != NULL) {
		cctx_cancel(&r->ctx_prep);
		return;
	}
	prep_cancel(r->prep);
	r->prep = NULL;
}

/* Any other job: work on the prep thread, done on the main thread. */
int
prep_job(struct prep_job *j, void (*work)(struct prep_job *),
    void (*done)(struct prep_job *), void *arg)
{
	return (prep_submit(j, work, done, arg));
}
