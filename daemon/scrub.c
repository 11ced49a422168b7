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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>

#include <numa.h>

#include "hpz.h"
#include "hpz-state.h"
#include "resolve.h"

#include "bucket.h"
#include "clear.h"
#include "conf.h"
#include "globals.h"
#include "hostmem.h"
#include "log.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "topo.h"
#include "uffd.h"
#include "worker.h"

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
static int		 scrub_enabled;
static double		 scrub_client_gbs;
static uint64_t		 scrub_ahead_min;
static uint64_t		 scrub_ahead_max;
static struct bucket	*scrub_global;
static int		 scrub_on_node[TOPO_NODES_MAX]; /* threads a node */

double
scrub_budget_gbs(int client)
{
	if (client)
		return (scrub_client_gbs);
	return (bucket_rate(scrub_global));
}

/*
 * The budget of r's client, with a reference.  The main thread may hand r
 * to another client (region_move) and free the old one meanwhile
 * (control_drop after control_orphan_check): reading r->client and taking
 * the reference under bucket_refs_lock, which bucket_free takes too, means we
 * see either the old client before its budget is let go, or the new one.
 */
static struct bucket *
scrub_client_budget(struct region *r)
{
	struct client	*c;
	struct bucket	*b;

	pthread_mutex_lock(&bucket_refs_lock);
	c = __atomic_load_n(&r->client, __ATOMIC_ACQUIRE);
	b = bucket_hold(c->budget);
	pthread_mutex_unlock(&bucket_refs_lock);
	return (b);
}

/* Wait until both budgets allow bytes more of background work. */
static void
scrub_throttle(struct region *r, uint64_t bytes)
{
	struct timespec	 ts;
	struct bucket	*cb;
	uint64_t	 now = stats_now_ns(), wg, wc, wait;

	wg = bucket_take(scrub_global, bytes, now);
	cb = scrub_client_budget(r);
	wc = bucket_take(cb, bytes, now);
	bucket_free(cb);
	wait = wg > wc ? wg : wc;
	if (wait == 0)
		return;
	atomic_fetch_add(&stats.bg_throttle_ns, wait);
	ts.tv_sec = (time_t)(wait / 1000000000ULL);
	ts.tv_nsec = (long)(wait % 1000000000ULL);
	nanosleep(&ts, NULL);
}

/* Does background clearing run for the region's garbage? */
int
scrub_region_enabled(const struct region *r)
{
	return (scrub_enabled && (r->flags & HPZ_NO_SCRUB) == 0);
}

/* Does the region want background work on its existing pages? */
static int
scrub_wants_scan(const struct region *r)
{
	if (r->flags & HPZ_AHEAD_EAGER)
		return (1);
	/* Stepping aside: the kernel zeroes its garbage, not us. */
	if (atomic_load(&r->aside) == ASIDE_WANTED ||
	    atomic_load(&r->aside) == ASIDE_DROPPING)
		return (0);
	return (scrub_enabled && (r->flags & HPZ_NO_SCRUB) == 0);
}

/* Queue r by priority, behind the regions of its own priority (lock held). */
static void
scrub_enqueue(struct region *r)
{
	struct region	*q;

	if (r->scrub.queued)
		TAILQ_REMOVE(&scrub_queue, r, scrub.bg);
	TAILQ_FOREACH(q, &scrub_queue, scrub.bg)
		if (q->priority < r->priority)
			break;
	if (q != NULL)
		TAILQ_INSERT_BEFORE(q, r, scrub.bg);
	else
		TAILQ_INSERT_TAIL(&scrub_queue, r, scrub.bg);
	r->scrub.queued = 1;
}

/* Background work on r from page from on (main thread). */
void
scrub_add(struct region *r, uint64_t from)
{
	pthread_mutex_lock(&scrub_lock);
	if (!r->scrub.queued || from < r->scrub.cursor)
		r->scrub.cursor = from;
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
	if (r->scrub.queued) {
		TAILQ_REMOVE(&scrub_queue, r, scrub.bg);
		r->scrub.queued = 0;
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
		if (r->scrub.ahead_pages != 0 && idx >= r->scrub.ahead_last &&
		    idx <= r->scrub.ahead_hi + 1)
			r->scrub.ahead_pages = r->scrub.ahead_pages * 2 > max ? max :
			    r->scrub.ahead_pages * 2;
		else
			r->scrub.ahead_pages = min;
		lo = idx + 1;
	} else if (r->scrub.ahead_pages != 0 && idx < r->scrub.ahead_hi &&
	    idx + r->scrub.ahead_pages / 2 >= r->scrub.ahead_hi) {
		/* Into the second half of the window: move it on. */
		lo = r->scrub.ahead_hi;
	} else {
		r->scrub.ahead_last = idx;
		pthread_mutex_unlock(&scrub_lock);
		return;
	}
	r->scrub.ahead_last = idx;
	hi = lo + r->scrub.ahead_pages;
	if (hi > r->npages)
		hi = r->npages;
	if (lo < hi && !atomic_load(&r->dying)) {
		if (lo >= r->scrub.ahead_start && lo <= r->scrub.ahead_hi) {
			/* Extend the window; what was handed out stays so. */
			if (hi > r->scrub.ahead_hi)
				r->scrub.ahead_hi = hi;
		} else {
			/* A window elsewhere: the rest of the old one goes. */
			r->scrub.ahead_start = r->scrub.ahead_lo = lo;
			r->scrub.ahead_hi = hi;
		}
		scrub_enqueue(r);
		pthread_cond_broadcast(&scrub_cond);
	}
	pthread_mutex_unlock(&scrub_lock);
}

/* Garbage pages of r not yet cleared: our own count, O(1) (resolve.c). */
uint64_t
scrub_region_pending(const struct region *r)
{
	return (resolve_garbage((struct resolve_table *)&r->rt));
}

/* What a background transaction works with (the operations' argument). */
struct scrub_ctx {
	struct region	*r;
	enum scrub_kind	 kind;
	int		 premap;
	int		 eager;
	int		 premapped;
};

/*
 * Pages the background allocates leave the host's reserve to others and
 * stay within a shmem region's bound (region_populate_spare): a page it
 * may not have is left to its fault.
 */
static int
scrub_op_populate(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct scrub_ctx	*x = rs->arg;
	uint64_t		 i;
	int			 error;

	for (i = idx; i < idx + n; i++)
		if ((error = region_populate_spare(x->r, i)) != 0) {
			if (error == -ENOSPC || error == -EDQUOT)
				atomic_fetch_add(&stats.bg_pages_spared, 1);
			return (error);
		}
	return (0);
}

/*
 * Is garbage page idx of a shmem region a hole (the client punched it
 * since)?  It reads zero: nothing to clear, and filling it would charge
 * the client's memory to the daemon.  mincore on our own mapping: no call
 * on the client's file.
 */
static int
scrub_shmem_hole(const struct region *r, uint64_t idx)
{
	unsigned char	vec[1];

	if (r->fs_magic == HUGETLBFS_MAGIC)
		return (0);
	return (mincore((char *)r->map + idx * r->page_size, 4096, vec) == 0 &&
	    (vec[0] & 1) == 0);
}

/*
 * Clear one garbage page with streaming stores, an extent at a time, each
 * behind a recovery point (clear.c): the client may truncate or punch its
 * file under us.  Give up (the page stays garbage) as soon as a fault
 * waits on the region, so that no fault waits behind more than one
 * extent.  The page is allocated first: writing through our mapping to a
 * page the file lacks would take one from the pool, or meet SIGBUS when
 * the pool is empty.  0, -EINTR (given up), -EFAULT (the file refused).
 */
static int
scrub_op_clear(struct resolve *rs, uint64_t lo, uint64_t n)
{
	struct scrub_ctx	*x = rs->arg;
	struct region		*r = x->r;
	uint64_t		 ext, off, len, t0;
	char			*page = (char *)r->map + lo * r->page_size;

	if (n != 1)
		return (-EINTR);
	/* A shmem hole stays one: its fault, if any, is the client's. */
	if (scrub_shmem_hole(r, lo)) {
		atomic_fetch_add(&stats.bg_pages_spared, 1);
		return (-EINTR);
	}
	/* A garbage page on hugetlbfs is in the file: this maps it. */
	if (region_populate(r, lo, 1) != 0)
		return (-EINTR);	/* no page to be had: the fault says */
	ext = worker_extent_max(&worker_config);
	for (off = 0; off < r->page_size; off += len) {
		if (off != 0 && atomic_load(&r->rt.nwaiting) != 0)
			return (-EINTR);
		len = r->page_size - off < ext ? r->page_size - off : ext;
		t0 = stats_now_ns();
		if (clear_bulk_guarded(page + off, len) != 0)
			return (-EFAULT);
		atomic_fetch_add(&stats.bg_ns, stats_now_ns() - t0);
	}
	clear_fence();
	atomic_fetch_add(&stats.bg_pages_cleared, 1);
	atomic_fetch_add(&stats.bg_bytes_cleared, r->page_size);
	atomic_fetch_add(&r->bg_cleared, 1);
	return (0);
}

/* Premap: one more try after the pending events are read, never a wait. */
static int
scrub_op_map(struct resolve *rs, uint64_t idx, uint64_t n, uint64_t *done)
{
	struct scrub_ctx	*x = rs->arg;
	struct region		*r = x->r;

	return (uffd_premap(r, region_addr(r) + idx * r->page_size,
	    n * r->page_size, done));
}

static void
scrub_op_wake(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct scrub_ctx	*x = rs->arg;
	struct region		*r = x->r;

	uffd_wake(r, region_addr(r) + idx * r->page_size,
	    n * r->page_size);
}

/*
 * Map a ready page before the client touches it: one zeroed (now or
 * before), or one that holds data when the region asks for everything
 * (eager, or read-ahead).  Never one still garbage (resolve.c sees to it).
 */
static int
scrub_op_want_map(struct resolve *rs, uint8_t was, int cleared)
{
	struct scrub_ctx	*x = rs->arg;

	if (!x->premap)
		return (0);
	if (cleared || was == PAGE_ZEROED)
		return (1);
	return (was == PAGE_KEEP && (x->eager || x->kind == SCRUB_AHEAD));
}

static const struct resolve_ops scrub_ops = {
	.populate = scrub_op_populate,
	.clear = scrub_op_clear,
	.map = scrub_op_map,
	.wake = scrub_op_wake,
	.want_map = scrub_op_want_map,
};

/*
 * Allocate pages [lo, lo+n) of the file, a page at a time so that a fault
 * never waits long behind us; the kernel zeroes new ones.  At the host's
 * reserve, or past a shmem region's bound, the rest is left to the faults.
 */
static int
scrub_populate(struct region *r, uint64_t lo, uint64_t n)
{
	uint64_t	i;
	int		error;

	for (i = lo; i < lo + n && !atomic_load(&r->dying); i++) {
		scrub_throttle(r, r->page_size);
		if ((error = region_populate_spare(r, i)) != 0) {
			if (error == -ENOSPC || error == -EDQUOT)
				atomic_fetch_add(&stats.bg_pages_spared,
				    lo + n - i);
			return (error);
		}
		atomic_fetch_add(&stats.bg_pages_populated, 1);
	}
	return (0);
}

/* Does page state s (a hint: read without a claim) want our work? */
static int
scrub_wants(const struct scrub_ctx *x, enum scrub_kind kind, int scrub,
    uint8_t s)
{
	switch (s) {
	case PAGE_GARBAGE:
		return (kind == SCRUB_SCAN && scrub);
	case PAGE_MAPPED:
		return (0);
	case PAGE_ZEROED:
		return (x->premap);
	default:
		return (x->premap && (x->eager || kind == SCRUB_AHEAD));
	}
}

/* One page through the resolve transaction, as a background thread. */
static void
scrub_page(struct scrub_ctx *x, uint64_t i, int flags)
{
	struct region		*r = x->r;
	struct resolve		 rs;
	struct resolve_waiter	*pw;
	struct work		*w;

	resolve_begin(&rs, &r->rt, &scrub_ops, x, FAULT_MINOR, flags);
	if (resolve_claim(&rs, i, 0, NULL) != RESOLVE_CLAIMED)
		return;		/* a fault has it */
	resolve_run(&rs);
	if (rs.result[0] == RESOLVE_DONE)
		atomic_fetch_add(&stats.bg_pages_premapped, 1);
	if (rs.result[0] == RESOLVE_LOST)
		uffd_region_refused(r, "its file refused the scrub's clear "
		    "(truncated or punched under us)");
	if (rs.tampered)
		uffd_tampered(r, rs.tampered);
	while ((pw = TAILQ_FIRST(&rs.woken)) != NULL) {
		TAILQ_REMOVE(&rs.woken, pw, entry);
		w = worker_parked(pw);
		uffd_requeue(w);
	}
	/* The last garbage gone: the loop may leave the faults to the kernel. */
	if (rs.resets_done || rs.garbage_gone)
		hpzd_kick();
}

/* One chunk of background work on r (a reference is held). */
static void
scrub_chunk(struct region *r, enum scrub_kind kind, uint64_t lo, uint64_t n,
    int node)
{
	struct scrub_ctx	 x;
	uint64_t		 i;
	uint8_t			 s;
	int			 scrub, flags, cross, error;

	x.r = r;
	x.kind = kind;
	/* Premapping ready pages is the default: HPZ_NO_PREMAP says not. */
	x.premap = (r->flags & HPZ_NO_PREMAP) == 0;
	x.eager = (r->flags & HPZ_AHEAD_EAGER) != 0;
	scrub = scrub_enabled && (r->flags & HPZ_NO_SCRUB) == 0 &&
	    atomic_load(&r->aside) != ASIDE_WANTED &&
	    atomic_load(&r->aside) != ASIDE_DROPPING;
	if (kind == SCRUB_AHEAD || x.eager) {
		/*
		 * Idempotent: existing pages, data or not, stay as they are.
		 * They come from the region's node, also when no thread of
		 * ours runs there (scrub_take).
		 */
		cross = r->node >= 0 && node >= 0 && r->node != node;
		if (cross)
			numa_set_preferred(r->node);
		error = scrub_populate(r, lo, n);
		if (cross)
			numa_set_preferred(node);
		if (error != 0)
			return;
		if (kind == SCRUB_AHEAD && !x.premap)
			return;
	}
	flags = RESOLVE_IDLE | (kind == SCRUB_SCAN && scrub ? 0 :
	    RESOLVE_NOCLEAR);
	for (i = lo; i < lo + n && !atomic_load(&r->dying); i++) {
		s = atomic_load(&r->state[i]) & PAGE_STATE_MASK;
		if (!scrub_wants(&x, kind, scrub, s))
			continue;
		/* Wait for the budget before taking the page, not holding it. */
		if (s == PAGE_GARBAGE)
			scrub_throttle(r, r->page_size);
		scrub_page(&x, i, flags);
	}
}

/*
 * Take the next chunk of the most urgent region (lock held) for a thread
 * of node (-1: none known): a region on another node is left to that
 * node's threads, if it has any.
 */
static struct region *
scrub_take(enum scrub_kind *kind, uint64_t *lo, uint64_t *n, int node)
{
	struct region	*r, *next;
	uint64_t	 chunk, ext;

	ext = worker_extent_max(&worker_config);
	for (r = TAILQ_FIRST(&scrub_queue); r != NULL; r = next) {
		next = TAILQ_NEXT(r, scrub.bg);
		if (node >= 0 && r->node >= 0 && r->node != node &&
		    r->node < TOPO_NODES_MAX && scrub_on_node[r->node] > 0)
			continue;
		chunk = ext / r->page_size;
		if (chunk < 1)
			chunk = 1;
		if (r->scrub.ahead_lo < r->scrub.ahead_hi) {
			*kind = SCRUB_AHEAD;
			*lo = r->scrub.ahead_lo;
			*n = r->scrub.ahead_hi - r->scrub.ahead_lo < chunk ?
			    r->scrub.ahead_hi - r->scrub.ahead_lo : chunk;
			r->scrub.ahead_lo += *n;
		} else if (r->scrub.cursor < r->npages && scrub_wants_scan(r)) {
			*kind = SCRUB_SCAN;
			*lo = r->scrub.cursor;
			*n = r->npages - r->scrub.cursor < chunk ?
			    r->npages - r->scrub.cursor : chunk;
			r->scrub.cursor += *n;
		} else {
			TAILQ_REMOVE(&scrub_queue, r, scrub.bg);
			r->scrub.queued = 0;
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
	int			 id = (int)(intptr_t)arg, node = -1;

	snprintf(name, sizeof(name), "hpz-scrub-%d", id);
	pthread_setname_np(pthread_self(), name);
	/* Its premaps wait on clients' mms: watched (worker.c). */
	worker_bg_slot(name);
	memset(&sp, 0, sizeof(sp));
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
		log_warnx("scrub %d: cannot use SCHED_IDLE", id);
	if (scrub_cpus[id] >= 0) {
		CPU_ZERO(&set);
		CPU_SET(scrub_cpus[id], &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		/* What we allocate comes from our node, as a worker's. */
		if (topo.nnodes > 1 && numa_available() != -1) {
			node = topo.cpu_node[scrub_cpus[id]];
			numa_set_preferred(node);
		}
	}
	pthread_mutex_lock(&scrub_lock);
	for (;;) {
		while (!scrub_stopping &&
		    (r = scrub_take(&kind, &lo, &n, node)) == NULL)
			pthread_cond_wait(&scrub_cond, &scrub_lock);
		if (scrub_stopping)
			break;
		pthread_mutex_unlock(&scrub_lock);
		atomic_fetch_add(&hpzd_busy, 1);	/* cost.c: ours */
		scrub_chunk(r, kind, lo, n, node);
		atomic_fetch_sub(&hpzd_busy, 1);
		region_work_done(r);
		pthread_mutex_lock(&scrub_lock);
	}
	pthread_mutex_unlock(&scrub_lock);
	return (NULL);
}

/*
 * Settings that SIGHUP may change: 1 if scrubbing was off and is on now
 * (the caller hands it every region's garbage again), else 0.
 */
int
scrub_configure(const struct conf *c)
{
	int	was;

	hostmem_set_reserve(c->pool_reserve[0], c->pool_reserve[1]);
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
	return (!was && c->scrub);
}

/*
 * Start the background threads, one per online CPU unless told: 0, or
 * with none running and what failed logged, a negative errno.
 */
int
scrub_start(const struct conf *c)
{
	int	i, n, cpu, error = 0;

	if ((scrub_global = bucket_new(c->background_gbs)) == NULL) {
		log_warn("scrub: its budget");
		return (-ENOMEM);
	}
	(void)scrub_configure(c);	/* no region yet */
	n = c->scrub_threads > 0 ? c->scrub_threads :
	    (topo.ncpus > 0 ? topo.ncpus : 1);
	if (n > HPZD_WORKERS_MAX)
		n = HPZD_WORKERS_MAX;
	scrub_threads = calloc((size_t)n, sizeof(*scrub_threads));
	scrub_cpus = calloc((size_t)n, sizeof(*scrub_cpus));
	if (scrub_threads == NULL || scrub_cpus == NULL) {
		log_warn("scrub: %d threads", n);
		scrub_stop();
		return (-ENOMEM);
	}
	/* Where each runs, and how many on each node, before any starts. */
	memset(scrub_on_node, 0, sizeof(scrub_on_node));
	cpu = -1;
	for (i = 0; i < n; i++) {
		scrub_cpus[i] = -1;
		if (topo.ncpus > 0) {
			do
				cpu = (cpu + 1) % topo.ncpus;
			while (!topo.cpu_online[cpu]);
			scrub_cpus[i] = cpu;
			if (topo.nnodes > 1 && topo.cpu_node[cpu] >= 0 &&
			    topo.cpu_node[cpu] < TOPO_NODES_MAX)
				scrub_on_node[topo.cpu_node[cpu]]++;
		}
	}
	for (i = 0; i < n; i++) {
		if ((error = pthread_create(&scrub_threads[i], NULL,
		    scrub_main, (void *)(intptr_t)i)) != 0) {
			log_warnx("scrub thread %d: pthread_create: %s", i,
			    strerror(error));
			error = -error;
			break;
		}
	}
	scrub_nthreads = i;
	if (error != 0)
		scrub_stop();
	return (error);
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
