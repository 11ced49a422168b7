/*
 * scrub.c - background work, so a client almost never waits: garbage pages
 * cleared ahead of the faults (scrub), fresh pages allocated ahead
 * (populate: the kernel's zeroing runs here, not on the faulting thread),
 * and ready pages mapped before they are touched (premap).  Threads run at
 * SCHED_IDLE, so any fault handler preempts them, and take one extent at a
 * time within global and per-client bandwidth budgets.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/userfaultfd.h>

#include "hpzerod.h"

#define SCRUB_BURST_NS	10000000.0	/* a budget may run 10 ms ahead */

struct bucket {
	pthread_mutex_t	 lock;
	double		 rate;		/* bytes per ns, 0: unlimited */
	double		 tokens;	/* bytes that may go now; < 0: debt */
	uint64_t	 last;		/* ns of the last refill */
};

enum scrub_kind {
	SCRUB_AHEAD,		/* allocate [lo, lo+n) ahead of the faults */
	SCRUB_SCAN,		/* walk [lo, lo+n): clear garbage, populate */
};

static pthread_mutex_t	 scrub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 scrub_cond = PTHREAD_COND_INITIALIZER;
static TAILQ_HEAD(, region) scrub_queue = TAILQ_HEAD_INITIALIZER(scrub_queue);
static pthread_t	*scrub_threads;
static int		*scrub_cpus;
static int		 scrub_nthreads;
static int		 scrub_stopping;
static int		 scrub_enabled = 1;
static double		 scrub_client_gbs;
static uint64_t		 scrub_ahead_min = 4ULL << 20;
static uint64_t		 scrub_ahead_max = 256ULL << 20;
static struct bucket	*scrub_global;

/* A token bucket of gbs GB/s (0: unlimited). */
struct bucket *
bucket_new(double gbs)
{
	struct bucket	*b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return (NULL);
	pthread_mutex_init(&b->lock, NULL);
	bucket_set(b, gbs);
	return (b);
}

void
bucket_free(struct bucket *b)
{
	if (b == NULL)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void
bucket_set(struct bucket *b, double gbs)
{
	pthread_mutex_lock(&b->lock);
	b->rate = gbs > 0 ? gbs : 0;	/* 1 GB/s is 1 byte per ns */
	b->tokens = 0;
	b->last = 0;
	pthread_mutex_unlock(&b->lock);
}

/*
 * Spend bytes at time now (ns).  Returns how long the caller must wait
 * before using them: tokens may go into debt, so a big request waits in
 * proportion to its size and the average rate holds.
 */
uint64_t
bucket_take(struct bucket *b, uint64_t bytes, uint64_t now)
{
	double	wait;

	if (b == NULL)
		return (0);
	pthread_mutex_lock(&b->lock);
	if (b->rate == 0) {
		pthread_mutex_unlock(&b->lock);
		return (0);
	}
	if (b->last != 0 && now > b->last)
		b->tokens += (double)(now - b->last) * b->rate;
	if (b->tokens > b->rate * SCRUB_BURST_NS)
		b->tokens = b->rate * SCRUB_BURST_NS;
	b->last = now;
	b->tokens -= (double)bytes;
	wait = b->tokens < 0 ? -b->tokens / b->rate : 0;
	pthread_mutex_unlock(&b->lock);
	return ((uint64_t)wait);
}

double
scrub_budget_gbs(int client)
{
	double	gbs;

	if (client)
		return (scrub_client_gbs);
	if (scrub_global == NULL)
		return (0);
	pthread_mutex_lock(&scrub_global->lock);
	gbs = scrub_global->rate;
	pthread_mutex_unlock(&scrub_global->lock);
	return (gbs);
}

/* Wait until both budgets allow bytes more of background work. */
static void
scrub_throttle(struct region *r, uint64_t bytes)
{
	struct timespec	ts;
	uint64_t	now = stats_now_ns(), wg, wc, wait;

	wg = bucket_take(scrub_global, bytes, now);
	wc = bucket_take(r->client->budget, bytes, now);
	wait = wg > wc ? wg : wc;
	if (wait == 0)
		return;
	atomic_fetch_add(&stats.bg_throttle_ns, wait);
	ts.tv_sec = (time_t)(wait / 1000000000ULL);
	ts.tv_nsec = (long)(wait % 1000000000ULL);
	nanosleep(&ts, NULL);
}

/* Does the region want background work on its existing pages? */
static int
scrub_wants_scan(const struct region *r)
{
	if (r->flags & HPZ_AHEAD_EAGER)
		return (1);
	return (scrub_enabled && (r->flags & HPZ_NO_SCRUB) == 0);
}

/* Queue r by priority, behind the regions of its own priority (lock held). */
static void
scrub_enqueue(struct region *r)
{
	struct region	*q;

	if (r->queued)
		TAILQ_REMOVE(&scrub_queue, r, bg);
	TAILQ_FOREACH(q, &scrub_queue, bg)
		if (q->priority < r->priority)
			break;
	if (q != NULL)
		TAILQ_INSERT_BEFORE(q, r, bg);
	else
		TAILQ_INSERT_TAIL(&scrub_queue, r, bg);
	r->queued = 1;
}

/* Background work on r from page from on (main thread). */
void
scrub_add(struct region *r, uint64_t from)
{
	pthread_mutex_lock(&scrub_lock);
	if (!r->queued || from < r->cursor)
		r->cursor = from;
	if (!atomic_load(&r->dying)) {
		scrub_enqueue(r);
		pthread_cond_broadcast(&scrub_cond);
	}
	pthread_mutex_unlock(&scrub_lock);
}

/* No more background work for r; running work is drained by the caller. */
void
scrub_remove(struct region *r)
{
	atomic_store(&r->dying, 1);
	pthread_mutex_lock(&scrub_lock);
	if (r->queued) {
		TAILQ_REMOVE(&scrub_queue, r, bg);
		r->queued = 0;
	}
	pthread_mutex_unlock(&scrub_lock);
}

/*
 * A fault on an HPZ_AHEAD_ONFAULT region: allocate the pages after it.  The
 * window starts at ahead_min, doubles while the client keeps coming in
 * order (a miss right after the window, or a touch in its second half),
 * up to ahead_max; a fault elsewhere starts over.
 */
void
scrub_fault(struct region *r, uint64_t idx, enum fault_kind kind)
{
	uint64_t	min, max, lo, hi;

	if ((r->flags & HPZ_AHEAD_ONFAULT) == 0)
		return;
	min = scrub_ahead_min / r->page_size;
	max = scrub_ahead_max / r->page_size;
	if (min < 1)
		min = 1;
	if (max < min)
		max = min;
	pthread_mutex_lock(&scrub_lock);
	if (kind == FAULT_MISSING) {
		/* A miss: the window was too small, or the client jumped. */
		if (r->ahead_pages != 0 && idx >= r->ahead_last &&
		    idx <= r->ahead_hi + 1)
			r->ahead_pages = r->ahead_pages * 2 > max ? max :
			    r->ahead_pages * 2;
		else
			r->ahead_pages = min;
		lo = idx + 1;
	} else if (r->ahead_pages != 0 && idx < r->ahead_hi &&
	    idx + r->ahead_pages / 2 >= r->ahead_hi) {
		/* Into the second half of the window: move it on. */
		lo = r->ahead_hi;
	} else {
		r->ahead_last = idx;
		pthread_mutex_unlock(&scrub_lock);
		return;
	}
	r->ahead_last = idx;
	hi = lo + r->ahead_pages;
	if (hi > r->npages)
		hi = r->npages;
	if (lo < hi && !atomic_load(&r->dying)) {
		if (lo >= r->ahead_start && lo <= r->ahead_hi) {
			/* Extend the window; what was handed out stays so. */
			if (hi > r->ahead_hi)
				r->ahead_hi = hi;
		} else {
			/* A window elsewhere: the rest of the old one goes. */
			r->ahead_start = r->ahead_lo = lo;
			r->ahead_hi = hi;
		}
		scrub_enqueue(r);
		pthread_cond_broadcast(&scrub_cond);
	}
	pthread_mutex_unlock(&scrub_lock);
}

/* Garbage pages of r not yet cleared. */
uint64_t
scrub_region_pending(const struct region *r)
{
	uint64_t	i, n = 0;

	for (i = 0; i < r->npages; i++)
		if ((atomic_load(&r->state[i]) & PAGE_STATE_MASK) ==
		    PAGE_GARBAGE)
			n++;
	return (n);
}

/* Garbage pages of every region (main thread). */
uint64_t
scrub_pending_pages(void)
{
	struct region	*r;
	uint64_t	 n = 0;

	TAILQ_FOREACH(r, &region_all, all)
		n += scrub_region_pending(r);
	return (n);
}

/*
 * Map a ready page before the client touches it.  EEXIST: the client still
 * has it mapped (its own zap is on the way), which is no premap.
 */
static int
scrub_premap(struct region *r, uint64_t idx)
{
	int	error;

	/* EAGAIN (an event pending) is retried once the events are read. */
	if ((error = uffd_premap(r, uffd_region_addr(r) + idx * r->page_size,
	    r->page_size)) != 0)
		return (error);
	atomic_fetch_add(&stats.bg_pages_premapped, 1);
	return (0);
}

/*
 * Clear one garbage page with streaming stores, an extent at a time; give
 * up (leaving it garbage) as soon as a fault waits for the page, so that
 * no fault waits behind more than one extent.  The page is allocated
 * first: writing through our mapping to a page the file lacks would take
 * one from the pool, or kill us with SIGBUS when the pool is empty.
 * 1 if cleared.
 */
static int
scrub_clear(struct region *r, uint64_t idx)
{
	uint64_t	ext, off, n, t0;
	char		*page = (char *)r->map + idx * r->page_size;

	if (region_populate(r, idx, 1) != 0)
		return (0);	/* no page to be had: the fault will say so */

	ext = worker_config.extent_max != 0 ? worker_config.extent_max :
	    plan_extent_max(topo.llc_share);
	for (off = 0; off < r->page_size; off += n) {
		if (off != 0 && atomic_load(&r->fault_waiting) != 0)
			return (0);
		n = r->page_size - off < ext ? r->page_size - off : ext;
		t0 = stats_now_ns();
		clear_bulk(page + off, n);
		atomic_fetch_add(&stats.bg_ns, stats_now_ns() - t0);
	}
	clear_fence();
	atomic_fetch_add(&stats.bg_pages_cleared, 1);
	atomic_fetch_add(&stats.bg_bytes_cleared, r->page_size);
	atomic_fetch_add(&r->bg_cleared, 1);
	return (1);
}

/*
 * Allocate pages [lo, lo+n) of the file, a page at a time so that a fault
 * never waits long behind us; the kernel zeroes new ones.
 */
static int
scrub_populate(struct region *r, uint64_t lo, uint64_t n)
{
	uint64_t	i;
	int		error;

	for (i = lo; i < lo + n && !atomic_load(&r->dying); i++) {
		scrub_throttle(r, r->page_size);
		if ((error = region_populate(r, i, 1)) != 0)
			return (error);
		atomic_fetch_add(&stats.bg_pages_populated, 1);
	}
	return (0);
}

/* One chunk of background work on r (a reference is held). */
static void
scrub_chunk(struct region *r, enum scrub_kind kind, uint64_t lo, uint64_t n)
{
	uint64_t	i;
	uint8_t		was, now;
	int		premap = (r->flags & HPZ_PREMAP) != 0;
	int		eager = (r->flags & HPZ_AHEAD_EAGER) != 0;
	int		scrub = scrub_enabled && (r->flags & HPZ_NO_SCRUB) == 0;

	if (kind == SCRUB_AHEAD || eager) {
		/* Idempotent: existing pages, data or not, stay as they are. */
		if (scrub_populate(r, lo, n) != 0)
			return;
		if (kind == SCRUB_AHEAD && !premap)
			return;
	}
	for (i = lo; i < lo + n && !atomic_load(&r->dying); i++) {
		/* Wait for the budget before taking the page, not holding it. */
		if (kind == SCRUB_SCAN && scrub &&
		    (atomic_load(&r->state[i]) & PAGE_STATE_MASK) ==
		    PAGE_GARBAGE)
			scrub_throttle(r, r->page_size);
		if (!state_claim(&r->state[i], &was))
			continue;	/* a fault has it */
		now = was;
		if (was == PAGE_GARBAGE && kind == SCRUB_SCAN && scrub &&
		    scrub_clear(r, i)) {
			now = PAGE_ZEROED;
			/* Before any premap: a crash then leaves data. */
			state_mark_cleared(&r->state[i]);
		}
		/* Never map a page that is still garbage. */
		if (premap && (now == PAGE_ZEROED || (now == PAGE_KEEP &&
		    (eager || kind == SCRUB_AHEAD)))) {
			switch (scrub_premap(r, i)) {
			case 0:
			case -EEXIST:
				now = PAGE_MAPPED;
				break;
			default:
				break;	/* client gone or busy: on fault */
			}
		}
		state_release(&r->state[i], now);
		if (atomic_load(&r->fault_waiting) != 0)
			region_wake_waiters(r);
	}
}

/* Take the next chunk of the most urgent region (lock held). */
static struct region *
scrub_take(enum scrub_kind *kind, uint64_t *lo, uint64_t *n)
{
	struct region	*r;
	uint64_t	 chunk, ext;

	ext = worker_config.extent_max != 0 ? worker_config.extent_max :
	    plan_extent_max(topo.llc_share);
	while ((r = TAILQ_FIRST(&scrub_queue)) != NULL) {
		chunk = ext / r->page_size;
		if (chunk < 1)
			chunk = 1;
		if (r->ahead_lo < r->ahead_hi) {
			*kind = SCRUB_AHEAD;
			*lo = r->ahead_lo;
			*n = r->ahead_hi - r->ahead_lo < chunk ?
			    r->ahead_hi - r->ahead_lo : chunk;
			r->ahead_lo += *n;
		} else if (r->cursor < r->npages && scrub_wants_scan(r)) {
			*kind = SCRUB_SCAN;
			*lo = r->cursor;
			*n = r->npages - r->cursor < chunk ?
			    r->npages - r->cursor : chunk;
			r->cursor += *n;
		} else {
			TAILQ_REMOVE(&scrub_queue, r, bg);
			r->queued = 0;
			continue;
		}
		/* Round robin among regions of one priority. */
		scrub_enqueue(r);
		atomic_fetch_add(&r->inflight, 1);
		return (r);
	}
	return (NULL);
}

static void *
scrub_main(void *arg)
{
	struct sched_param	 sp;
	struct region		*r;
	enum scrub_kind		 kind;
	uint64_t		 lo, n;
	cpu_set_t		 set;
	char			 name[16];
	int			 id = (int)(intptr_t)arg;

	snprintf(name, sizeof(name), "hpz-scrub-%d", id);
	pthread_setname_np(pthread_self(), name);
	memset(&sp, 0, sizeof(sp));
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
		log_warnx("scrub %d: cannot use SCHED_IDLE", id);
	if (scrub_cpus[id] >= 0) {
		CPU_ZERO(&set);
		CPU_SET(scrub_cpus[id], &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	pthread_mutex_lock(&scrub_lock);
	for (;;) {
		while (!scrub_stopping &&
		    (r = scrub_take(&kind, &lo, &n)) == NULL)
			pthread_cond_wait(&scrub_cond, &scrub_lock);
		if (scrub_stopping)
			break;
		pthread_mutex_unlock(&scrub_lock);
		scrub_chunk(r, kind, lo, n);
		region_work_done(r);
		pthread_mutex_lock(&scrub_lock);
	}
	pthread_mutex_unlock(&scrub_lock);
	return (NULL);
}

/* Settings that SIGHUP may change. */
void
scrub_configure(const struct conf *c)
{
	struct client	*cl;

	struct region	*r;
	int		 was;

	pthread_mutex_lock(&scrub_lock);
	was = scrub_enabled;
	scrub_enabled = c->scrub;
	scrub_client_gbs = c->client_gbs;
	scrub_ahead_min = c->ahead_min;
	scrub_ahead_max = c->ahead_max;
	pthread_cond_broadcast(&scrub_cond);
	pthread_mutex_unlock(&scrub_lock);
	if (scrub_global != NULL)
		bucket_set(scrub_global, c->background_gbs);
	TAILQ_FOREACH(cl, &control_clients, entry)
		if (cl->budget != NULL)
			bucket_set(cl->budget, c->client_gbs);
	/* Garbage left while scrubbing was off: go over it now. */
	if (!was && c->scrub)
		TAILQ_FOREACH(r, &region_all, all)
			scrub_add(r, 0);
}

/* Start the background threads, one per online CPU unless told. */
int
scrub_start(const struct conf *c)
{
	int	i, n, cpu, error;

	if ((scrub_global = bucket_new(c->background_gbs)) == NULL)
		return (-ENOMEM);
	scrub_configure(c);
	n = c->scrub_threads > 0 ? c->scrub_threads :
	    (topo.ncpus > 0 ? topo.ncpus : 1);
	if (n > HPZD_WORKERS_MAX)
		n = HPZD_WORKERS_MAX;
	scrub_threads = calloc((size_t)n, sizeof(*scrub_threads));
	scrub_cpus = calloc((size_t)n, sizeof(*scrub_cpus));
	if (scrub_threads == NULL || scrub_cpus == NULL)
		return (-ENOMEM);
	cpu = -1;
	for (i = 0; i < n; i++) {
		scrub_cpus[i] = -1;
		if (topo.ncpus > 0) {
			do
				cpu = (cpu + 1) % topo.ncpus;
			while (!topo.cpu_online[cpu]);
			scrub_cpus[i] = cpu;
		}
		error = pthread_create(&scrub_threads[i], NULL, scrub_main,
		    (void *)(intptr_t)i);
		if (error != 0) {
			errno = error;
			fatal("pthread_create");
		}
	}
	scrub_nthreads = n;
	return (0);
}

void
scrub_stop(void)
{
	int	i;

	pthread_mutex_lock(&scrub_lock);
	scrub_stopping = 1;
	pthread_cond_broadcast(&scrub_cond);
	pthread_mutex_unlock(&scrub_lock);
	for (i = 0; i < scrub_nthreads; i++)
		pthread_join(scrub_threads[i], NULL);
	free(scrub_threads);
	free(scrub_cpus);
	scrub_threads = NULL;
	scrub_cpus = NULL;
	scrub_nthreads = 0;
	bucket_free(scrub_global);
	scrub_global = NULL;
}
