/*
 * pool-fill.c - the pool's fillers: one thread per CPU, at SCHED_IDLE,
 * bound to that CPU and its node's memory, allocating huge pages into the
 * node's pool files while the CPU has nothing else to do.  The kernel
 * zeroes a page as it allocates it, so a file of allocated pages is a file
 * of zero pages; running one filler per idle core is what makes the pool
 * refill at the machine's zeroing bandwidth, not one core's.
 *
 * The pool follows the host: by default ([pool] size_2m = all) it takes
 * every free, unreserved page above [pool] reserve_2m, and gives pages
 * back (truncates) when the host drops below it (see pool_decide).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/memfd.h>

#include <numaif.h>

#include "bucket.h"
#include "clear.h"
#include "conf.h"
#include "cost.h"
#include "globals.h"
#include "log.h"
#include "pool-fill.h"
#include "pool.h"
#include "stats.h"
#include "topo.h"

#define POOL_POLL_MS		50	/* the host's counts, at rest */
#define POOL_BUSY_BPS		(200ULL << 20)	/* refill, every CPU busy */
#define POOL_HOST_NS		5000000ULL /* counts this old are read again */
#define POOL_BACKOFF_NS		1000000000ULL /* after a failed allocation */

const struct pool_size pool_sizes[POOL_NSIZES] = {
	{ 2ULL << 20, "2 MiB", "hugepages-2048kB" },
	{ 1ULL << 30, "1 GiB", "hugepages-1048576kB" },
};

_Atomic uint64_t	 pool_reserve[POOL_NSIZES];	/* pages */
atomic_int		 pool_on;
struct bucket		*pool_fill_budget;

struct pool_filler {
	pthread_t	 thread;
	int		 node;
	int		 cpu;		/* -1: not bound */
};

static struct pool		*fill_pools;	/* POOL_NSIZES x fill_nnodes */
static int			 fill_nnodes;
static struct pool_filler	*fill_threads;
static int			 fill_nthreads;
static atomic_int		 fill_stopping;
static void			(*fill_kick_main)(void);
static pthread_mutex_t		 fill_nap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t		 fill_nap_cond;

/*
 * What a pool should do next, from the host's counts: free and unreserved
 * pages (avail), free pages on the pool's node, the reserve, what it holds
 * and what it wants.  *n pages for POOL_FILL, POOL_YIELD and POOL_SHRINK.
 * avail counts the pool's inflight pages as taken already, though the
 * kernel may not have taken them yet: so for filling (never past the
 * reserve), not for giving back, which counts them as the host's free
 * pages (else the last pages of a refill on every CPU looked like the
 * host short of its reserve, and were cut off the file being filled).
 */
enum pool_action
pool_decide(int enabled, uint64_t avail, uint64_t inflight,
    uint64_t node_free, uint64_t reserve, uint64_t pages, uint64_t target,
    uint64_t *n)
{
	uint64_t	free_now = avail + inflight;

	*n = 0;
	if (!enabled)
		target = 0;
	if (pages > target) {
		*n = pages - target;
		return (POOL_SHRINK);
	}
	if (free_now < reserve && pages > 0) {
		*n = reserve - free_now < pages ? reserve - free_now : pages;
		return (POOL_YIELD);
	}
	if (pages < target && avail > reserve && node_free > 0) {
		*n = 1;
		return (POOL_FILL);
	}
	return (POOL_NONE);
}

/* Pages of f a hand-out can have: the run from 0 before any failure. */
uint64_t
pool_file_ready(const struct pool_file *f)
{
	if (f->fd < 0)
		return (0);
	return (f->done < f->bad ? f->done : f->bad);
}

/* Pages p holds or is allocating (lock held). */
uint64_t
pool_held(const struct pool *p)
{
	uint64_t	n = 0;
	int		i;

	for (i = 0; i < POOL_FILES; i++)
		if (p->files[i].fd >= 0)
			n += p->files[i].next;
	return (n);
}

/* Publish p's level for status and the hand-outs (lock held). */
void
pool_recount(struct pool *p)
{
	uint64_t	n = 0;
	int		i;

	for (i = 0; i < POOL_FILES; i++)
		n += pool_file_ready(&p->files[i]);
	atomic_store(&p->ready, n);
	atomic_store(&p->host_avail, p->avail);
}

/*
 * The size (pages) of the next file to grow, given the files there are
 * (room 0: a pool sized by hand, one file):
 * the smallest of 1, 2, 4 ... pages missing while the small ones stay
 * within 1/POOL_SMALL_SHARE of room (pages the pool may hold), so that a
 * small request takes a small file; else one for everything else, up to
 * every huge page of the host, so that a guest of any size that fits gets
 * one file.  *small says which.
 */
uint64_t
pool_layout_cap(const struct pool_file *files, int nfiles, uint64_t room,
    uint64_t host_total, int *small)
{
	uint64_t	budget = room / POOL_SMALL_SHARE, used = 0, s;
	int		i, have;

	for (i = 0; i < nfiles; i++)
		if (files[i].fd >= 0 && files[i].small)
			used += files[i].cap;
	for (s = 1; used + s <= budget; s *= 2) {
		for (have = 0, i = 0; i < nfiles && !have; i++)
			have = files[i].fd >= 0 && files[i].small &&
			    files[i].cap == s;
		if (!have) {
			*small = 1;
			return (s);
		}
	}
	*small = 0;
	s = host_total > room ? host_total : room;
	return (s > 0 ? s : 1);
}

/*
 * The file a request for want pages should get: the smallest holding at
 * least want (cut to measure), else the largest; -1 if none is ready.
 */
int
pool_pick_file(const struct pool_file *files, int nfiles, uint64_t want)
{
	uint64_t	r, best_ge = UINT64_MAX, best_lt = 0;
	int		i, ge = -1, lt = -1;

	for (i = 0; i < nfiles; i++) {
		if (files[i].fd < 0 || files[i].busy || files[i].taking ||
		    (r = pool_file_ready(&files[i])) == 0)
			continue;
		if (r >= want && r < best_ge) {
			best_ge = r;
			ge = i;
		} else if (r < want && r > best_lt) {
			best_lt = r;
			lt = i;
		}
	}
	return (ge >= 0 ? ge : lt);
}

/* Let go of our mapping of f, and of the file unless it is handed out. */
void
pool_file_drop(struct pool_file *f)
{
	if (f->fd < 0 && f->map != NULL) {
		/* No file, no mapping of ours: whatever is there now is not. */
		log_warnx("pool: an empty file slot still named a mapping "
		    "(%p): left alone", (void *)f->map);
		f->map = NULL;
	}
	if (f->map != NULL)
		munmap(f->map, f->maplen);
	f->map = NULL;
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

/*
 * The pools' own traffic with the host, by page size: took counts the
 * pages they took from it, net (up as a filler claims a page, down once a
 * page claimed in vain, cut off or dropped is the host's again, after the
 * call that frees it); pending counts the pages between the two (in
 * flight, or being given back), which the host's counts may show or not.
 */
static _Atomic int64_t	 pool_took[POOL_NSIZES];
static _Atomic int64_t	 pool_pending[POOL_NSIZES];

/* n pages of psi start to go back to the host (pool_took_end after). */
void
pool_took_begin(int psi, uint64_t n)
{
	atomic_fetch_add(&pool_pending[psi], (int64_t)n);
}

/* Of the n pages begun, back went back to the host. */
void
pool_took_end(int psi, uint64_t n, uint64_t back)
{
	atomic_fetch_sub(&pool_took[psi], (int64_t)back);
	atomic_fetch_sub(&pool_pending[psi], (int64_t)n);
}

static uint64_t
pool_read_count(int fd)
{
	char	buf[32];
	ssize_t	n;

	if (fd < 0 || (n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return (0);
	buf[n] = '\0';
	return (strtoull(buf, NULL, 10));
}

/*
 * The host's level for p's page size: free less reserved pages, plus what
 * the pools took, so that only others move it (a program reserving or
 * allocating pages takes it down, one freeing them puts it up).  A change
 * of ours under way as the counts are read may show in them or not: *high
 * can only be above the level, *low (the pages under way taken off) only
 * below it; either may be NULL.  *freep, *resvp: the counts read.
 */
void
pool_host_level(const struct pool *p, int64_t *low, int64_t *high,
    uint64_t *freep, uint64_t *resvp)
{
	int64_t	t0, t1, q0, q1, level;

	t0 = atomic_load(&pool_took[p->psi]);
	q0 = atomic_load(&pool_pending[p->psi]);
	*freep = pool_read_count(p->fd_free);
	*resvp = pool_read_count(p->fd_resv);
	t1 = atomic_load(&pool_took[p->psi]);
	q1 = atomic_load(&pool_pending[p->psi]);
	level = (int64_t)*freep - (int64_t)*resvp;
	if (high != NULL)
		*high = level + (t0 > t1 ? t0 : t1);
	if (low != NULL)
		*low = level + (t0 < t1 ? t0 : t1) - (q0 > q1 ? q0 : q1);
}

/* The host's counts for p, again if they are old (filler). */
static void
pool_counts(struct pool *p, uint64_t now)
{
	uint64_t	free, resv, total, node_free;
	int64_t		high;

	pthread_mutex_lock(&p->lock);
	if (p->reading || now - p->host_at < POOL_HOST_NS) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->reading = 1;
	pthread_mutex_unlock(&p->lock);
	pool_host_level(p, NULL, &high, &free, &resv);
	total = pool_read_count(p->fd_nr);
	node_free = p->fd_node >= 0 ? pool_read_count(p->fd_node) : free;
	pthread_mutex_lock(&p->lock);
	/* Pages being touched now may not show in the counts yet. */
	resv += (uint64_t)p->nflight;
	p->avail = free > resv ? free - resv : 0;
	node_free = node_free > (uint64_t)p->nflight ? node_free -
	    (uint64_t)p->nflight : 0;
	p->node_free = node_free;
	p->host_total = total;
	p->level = high;
	p->host_at = now;
	p->reading = 0;
	atomic_store(&p->host_avail, p->avail);
	pthread_mutex_unlock(&p->lock);
}

/* A new file of cap pages for p, mapped (no lock held): 0 or -1. */
static int
pool_new_file(struct pool *p, struct pool_file *f, uint64_t cap)
{
	unsigned int		shift = (unsigned int)__builtin_ctzll(
				    p->page_size);
	struct sched_param	sp;
	void			*m;
	int			fd;

	/* The file may be sealed by its program, never by us. */
	fd = memfd_create("hpz-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING |
	    MFD_HUGETLB | (shift << MFD_HUGE_SHIFT));
	if (fd == -1 || ftruncate(fd, (off_t)(cap * p->page_size)) == -1) {
		if (!p->failed)
			log_warn("pool: %s pages, node %d: a file of %llu "
			    "pages", pool_sizes[p->psi].human, p->node,
			    (unsigned long long)cap);
		if (fd >= 0)
			close(fd);
		return (-1);
	}
	/*
	 * mmap takes our mmap_lock for writing: not at SCHED_IDLE, where a
	 * busy machine could leave us holding it while others wait.
	 */
	memset(&sp, 0, sizeof(sp));
	(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	m = mmap(NULL, (size_t)(cap * p->page_size), PROT_READ, MAP_SHARED |
	    MAP_NORESERVE, fd, 0);
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	if (m == MAP_FAILED) {
		log_warn("pool: %s pages, node %d: mmap", pool_sizes[p->psi].human,
		    p->node);
		close(fd);
		return (-1);
	}
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->map = m;
	f->maplen = (size_t)(cap * p->page_size);
	f->cap = cap;
	f->bad = cap;
	return (0);
}

/* The fault allocates the page, zeroed, into the file. */
static void
pool_touch_body(void *arg)
{
	(void)*(volatile unsigned char *)arg;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif
static atomic_int	pool_no_populate;	/* the kernel lacks it */

/*
 * Allocate the page at addr of our mapping (the kernel zeroes it): 1, or
 * 0 when the host has none left for us.  MADV_POPULATE_WRITE faults it in
 * the kernel, without the exception a touch costs (about 12 us on a
 * nested VM, against 180 us to zero 2 MiB), and fails with an error where
 * the touch would SIGBUS; before Linux 5.14, the guarded touch.
 */
static int
pool_alloc_page(unsigned char *addr, uint64_t size)
{
	if (!atomic_load(&pool_no_populate)) {
		if (madvise(addr, size, MADV_POPULATE_WRITE) == 0)
			return (1);
		if (errno != EINVAL)
			return (0);
		atomic_store(&pool_no_populate, 1);
	}
	/* Faults on the page SIGBUS when the host has none left for us. */
	return (clear_guarded(addr, size, pool_touch_body, addr) == 0);
}

/* The growing file of p: not full, nobody taking or cutting it (lock). */
static struct pool_file *
pool_growing(struct pool *p)
{
	struct pool_file	*f;
	int			 i;

	for (i = 0; i < POOL_FILES; i++) {
		f = &p->files[i];
		if (f->fd >= 0 && !f->full && !f->busy && !f->taking &&
		    f->next < f->cap && f->bad == f->cap)
			return (f);
	}
	return (NULL);
}

/*
 * The end of a step that changed p's files: count them again, let the
 * lock go, and wake the main thread when a hand-out waits on the file.
 */
static int
pool_done_step(struct pool *p, int kick)
{
	pool_recount(p);
	pthread_mutex_unlock(&p->lock);
	if (kick && fill_kick_main != NULL)
		fill_kick_main();
	return (1);
}

/*
 * Allocate one page of p (lock held on entry, released on return); more:
 * pages are missing beside this one, so the fillers napping are woken to
 * take them (one page a filler at a time: each a CPU of its own).
 */
static int
pool_fill_one(struct pool *p, uint64_t room, uint64_t now, int more)
{
	struct pool_file	*f, nf;
	struct timespec		 ts;
	uint64_t		 i, cap, t1, wait;
	int			 k, small, ok;

	if ((f = pool_growing(p)) == NULL) {
		if (p->creating) {
			pthread_mutex_unlock(&p->lock);
			return (0);
		}
		for (k = 0; k < POOL_FILES && p->files[k].fd >= 0; k++)
			;
		if (k == POOL_FILES) {
			pthread_mutex_unlock(&p->lock);
			return (0);	/* every slot full: wait for a taker */
		}
		cap = pool_layout_cap(p->files, POOL_FILES, room,
		    p->host_total, &small);
		p->creating = 1;
		pthread_mutex_unlock(&p->lock);
		ok = pool_new_file(p, &nf, cap) == 0;
		pthread_mutex_lock(&p->lock);
		p->creating = 0;
		if (!ok) {
			p->failed = 1;
			p->backoff = now + POOL_BACKOFF_NS;
			pthread_mutex_unlock(&p->lock);
			return (0);
		}
		nf.small = small;
		p->files[k] = nf;
		f = &p->files[k];
	}
	i = f->next++;
	if (f->next == f->cap)
		f->full = 1;
	f->inflight++;
	atomic_fetch_add(&pool_took[p->psi], 1);
	atomic_fetch_add(&pool_pending[p->psi], 1);
	p->avail = p->avail > 0 ? p->avail - 1 : 0;
	p->node_free = p->node_free > 0 ? p->node_free - 1 : 0;
	if (p->nflight++ == 0)
		p->busy_since = now;
	pthread_mutex_unlock(&p->lock);
	/*
	 * The others nap until a poll (POOL_POLL_MS) unless told: a refill
	 * of a few 1 GiB pages is over in a few of those.
	 */
	if (more)
		pool_fill_kick();

	/* The budget, if one is set (a claimed page waits, not the lock). */
	if (pool_fill_budget != NULL && (wait = bucket_take(pool_fill_budget,
	    p->page_size, now)) > 0) {
		ts.tv_sec = (time_t)(wait / 1000000000ULL);
		ts.tv_nsec = (long)(wait % 1000000000ULL);
		nanosleep(&ts, NULL);
	}
	ok = pool_alloc_page(f->map + i * p->page_size, p->page_size);

	t1 = stats_now_ns();
	pthread_mutex_lock(&p->lock);
	f->inflight--;
	if (--p->nflight == 0)
		atomic_fetch_add(&p->fill_ns, t1 - p->busy_since);
	pool_took_end(p->psi, 1, ok ? 0 : 1);
	if (ok) {
		f->done++;
		p->failed = 0;
		atomic_fetch_add(&p->filled, 1);
	} else {
		/* The pages went elsewhere, or a cgroup limit: later. */
		if (i < f->bad)
			f->bad = i;
		f->full = 1;
		if (!p->failed)
			log_info("pool: %s pages, node %d: cannot allocate a "
			    "page; trying again later",
			    pool_sizes[p->psi].human, p->node);
		p->failed = 1;
		p->backoff = t1 + POOL_BACKOFF_NS;
	}
	return (pool_done_step(p, f->taking && f->inflight == 0));
}

/*
 * Give n pages of p back (lock held on entry, released on return): from
 * the file that holds most, first any pages past a failure.
 */
int
pool_cut(struct pool *p, uint64_t n, int yield)
{
	struct pool_file	*f = NULL, *g;
	uint64_t		 keep, had, r, best = 0;
	int			 i, ok;

	for (i = 0; i < POOL_FILES; i++) {
		g = &p->files[i];
		if (g->fd >= 0 && g->inflight == 0 && !g->busy &&
		    !g->taking && g->next > best) {
			best = g->next;
			f = g;
		}
	}
	if (f == NULL) {
		pthread_mutex_unlock(&p->lock);
		return (0);
	}
	had = f->next;
	r = pool_file_ready(f);
	keep = r > n ? r - n : 0;
	f->busy = 1;
	pool_took_begin(p->psi, had - keep);
	pthread_mutex_unlock(&p->lock);
	if (keep == 0) {
		/* A copy: the slot stays taken (busy) until we are back. */
		struct pool_file	gone = *f;

		pool_file_drop(&gone);
		ok = 1;
	} else
		ok = ftruncate(f->fd, (off_t)(keep * p->page_size)) == 0;
	pool_took_end(p->psi, had - keep, ok ? had - keep : 0);
	pthread_mutex_lock(&p->lock);
	f->busy = 0;
	if (keep == 0) {
		/*
		 * The slot is empty: its mapping went with the copy.  A map
		 * left here was unmapped again by pool_stop, at an address
		 * the process had reused meanwhile (a thread's stack: the
		 * daemon died of SIGSEGV in pthread_join as it stopped).
		 */
		f->fd = -1;
		f->map = NULL;
	} else if (ok) {
		/* Its size is what it holds: it grows no more. */
		f->next = f->done = keep;
		f->cap = keep;
		f->bad = keep;
		f->full = 1;
	}
	if (ok) {
		p->avail += had - keep;
		p->node_free += had - keep;
		if (yield)
			atomic_fetch_add(&p->yielded, had - keep);
	} else
		log_warn("pool: %s pages, node %d: ftruncate",
		    pool_sizes[p->psi].human, p->node);
	return (pool_done_step(p, f->taking));
}

/*
 * Has the process behind pidfd exited?  A poll that cannot wait, on our
 * own descriptor: the one system call made under a pool's lock.  No
 * pidfd (a client in another pid namespace): not known, so no.
 */
static int
pool_taker_gone(int pidfd)
{
	struct pollfd	pfd = { .fd = pidfd, .events = POLLIN };

	return (pidfd >= 0 && poll(&pfd, 1, 0) == 1);
}

/* A short hand-out's hold is over (lock held). */
void
pool_owed_end(struct pool *p)
{
	p->owed = 0;
	if (p->owed_pidfd >= 0)
		close(p->owed_pidfd);
	p->owed_pidfd = -1;
}

/*
 * What is left of p's hold for the host (pool-hold.c): the pages it holds
 * less those others have taken since it was set (a plain guest mapping
 * them: the pool must not give back again for what the guest already has);
 * 0 once that is nothing or its bound has passed, which ends it (lock
 * held).
 */
uint64_t
pool_hold_left(struct pool *p, uint64_t now)
{
	int64_t	taken;

	if (p->hold == 0)
		return (0);
	taken = p->hold_mark - p->level;
	if (now >= p->hold_until || (taken > 0 && (uint64_t)taken >= p->hold)) {
		p->hold = 0;
		return (0);
	}
	return (taken > 0 ? p->hold - (uint64_t)taken : p->hold);
}

/*
 * May p take a page now, as far as the other programs are concerned?
 * While their runnable threads take every online CPU (ours, workers and
 * fillers awake, do not count: cost_demand), a refill would take memory
 * bandwidth, locks and caches from them, which SCHED_IDLE does not give
 * back: the pool then refills at POOL_BUSY_BPS at most, so that a host
 * busy for good still gets its pool, slowly.  Unknown: yes.
 */
static int
pool_may_fill(struct pool *p, uint64_t now)
{
	static atomic_uint_fast64_t	 busy_at[POOL_NSIZES];
	uint64_t			 at, gap;
	int				 demand = cost_demand();

	if (demand < 0 || demand < topo_online())
		return (1);
	gap = p->page_size * 1000000000ULL / POOL_BUSY_BPS;
	at = atomic_load(&busy_at[p->psi]);
	if (now - at < gap)
		return (0);
	return (atomic_compare_exchange_strong(&busy_at[p->psi], &at, now));
}

/* One step of work on p; 1 if it did some (filler). */
static int
pool_step(struct pool *p)
{
	enum pool_action	 act;
	uint64_t		 now = stats_now_ns(), n, reserve, held, target;
	uint64_t		 room;
	int			 more, fresh = 0;

	pool_counts(p, now);
again:
	pthread_mutex_lock(&p->lock);
	reserve = atomic_load(&pool_reserve[p->psi]);
	/*
	 * A short hand-out's rest is held for its program until it has it
	 * (others took as many pages since: its mmap reserved them), or has
	 * exited, or for [pool] short_hold_ms.  Its exit, not the host's
	 * pages coming back: another client freeing pages must not end it.
	 */
	if (p->owed > 0 && (now >= p->owed_until ||
	    p->level + (int64_t)p->owed <= p->owed_mark ||
	    pool_taker_gone(p->owed_pidfd)))
		pool_owed_end(p);
	/*
	 * Pages asked for the host (hpzctl reserve): what it keeps free is
	 * at least as many, given back here too if a cut on the main thread
	 * could not have them (a file in flight).
	 */
	if ((n = pool_hold_left(p, now)) > reserve)
		reserve = n;
	held = pool_held(p);
	target = atomic_load(&p->target);
	act = pool_decide(atomic_load(&pool_on), p->avail,
	    (uint64_t)p->nflight, p->node_free, reserve, held, target, &n);
	/*
	 * Counts up to POOL_HOST_NS old, taken down by every page claimed
	 * since, count a page both as claimed and as the kernel's once it
	 * lands: a shortage is read again from the host before pages are
	 * cut (the last pages of a refill on two CPUs were given back).
	 */
	if (act == POOL_YIELD && !fresh && p->host_at != now) {
		fresh = 1;
		p->host_at = 0;
		pthread_mutex_unlock(&p->lock);
		pool_counts(p, now);
		goto again;
	}
	switch (act) {
	case POOL_FILL:
		/*
		 * What a short hand-out's client still has to allocate is
		 * not ours to take meanwhile (but no reason to give more).
		 */
		if (now < p->backoff || p->avail <= reserve + p->owed)
			break;
		/*
		 * Every CPU busy with other programs: paced (cuts are never
		 * held back).
		 */
		if (!pool_may_fill(p, now))
			break;
		if (now < p->quiet_until) {
			if (p->avail < p->quiet_avail)
				break;	/* a taker starts: POOL_QUIET_NS */
			/*
			 * Its pages came back (the guest exited): the quiet
			 * is over, not only while the host holds them all:
			 * the first page refilled would arm it again.
			 */
			p->quiet_until = 0;
		}
		reserve += p->owed;
		/*
		 * Small files only where the pool follows the host: a pool
		 * sized by hand is sized for a guest, and is one file.
		 */
		room = target != UINT64_MAX ? 0 : held + (p->avail - reserve);
		more = held + 1 < target && p->avail > reserve + 1 &&
		    p->node_free > 1;
		return (pool_fill_one(p, room, now, more));
	case POOL_YIELD:
	case POOL_SHRINK:
		return (pool_cut(p, n, act == POOL_YIELD));
	case POOL_NONE:
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return (0);
}

void
pool_fill_kick(void)
{
	/* Without the lock: a kick lost in a race costs one poll interval. */
	pthread_cond_broadcast(&fill_nap_cond);
}

static void
pool_nap(int ms)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	atomic_fetch_sub(&hpzd_busy, 1);
	pthread_mutex_lock(&fill_nap_lock);
	if (!atomic_load(&fill_stopping))
		pthread_cond_timedwait(&fill_nap_cond, &fill_nap_lock, &ts);
	pthread_mutex_unlock(&fill_nap_lock);
	atomic_fetch_add(&hpzd_busy, 1);
}

/* A filler: its CPU's idle time, its node's pages. */
static void *
pool_main(void *arg)
{
	struct pool_filler	*t = arg;
	struct sched_param	 sp;
	cpu_set_t		 set;
	unsigned long		 mask[TOPO_NODES_MAX / (8 * sizeof(long)) + 1];
	char			 name[32];	/* the kernel keeps 15 */
	int			 i, did;

	/* hpz-pool-NODE-CPU: the node first, as one filler a node was named. */
	if (t->cpu >= 0)
		snprintf(name, sizeof(name), "hpz-pool-%d-%d", t->node, t->cpu);
	else
		snprintf(name, sizeof(name), "hpz-pool-%d", t->node);
	name[15] = '\0';
	pthread_setname_np(pthread_self(), name);
	memset(&sp, 0, sizeof(sp));
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
		log_warnx("pool: %s: cannot use SCHED_IDLE", name);
	if (t->cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(t->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	if (fill_nnodes > 1) {
		memset(mask, 0, sizeof(mask));
		mask[t->node / (8 * sizeof(long))] |= 1UL << (t->node %
		    (8 * sizeof(long)));
		if (set_mempolicy(MPOL_BIND, mask, TOPO_NODES_MAX + 1) == -1)
			log_warn("pool: %s: set_mempolicy", name);
	}
	atomic_fetch_add(&hpzd_busy, 1);
	while (!atomic_load(&fill_stopping)) {
		did = 0;
		for (i = 0; i < POOL_NSIZES; i++) {
			struct pool	*p = &fill_pools[i * fill_nnodes +
					    t->node];

			if (p->page_size != 0)
				did |= pool_step(p);
		}
		if (!did)
			pool_nap(POOL_POLL_MS);
	}
	atomic_fetch_sub(&hpzd_busy, 1);
	return (NULL);
}

/*
 * Start a filler per online CPU, each on its CPU and node (a node without
 * CPUs gets one filler, unbound, its memory still bound): 0 or -errno,
 * with what started left running for pool_fill_stop.
 */
int
pool_fill_start(struct pool *pools, int nnodes, void (*kick)(void))
{
	pthread_condattr_t	ca;
	int			cpu, node, n = 0, has, error;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fill_nap_cond, &ca);
	pthread_condattr_destroy(&ca);
	fill_pools = pools;
	fill_nnodes = nnodes;
	fill_kick_main = kick;
	if ((fill_threads = calloc((size_t)(TOPO_CPUS_MAX + nnodes),
	    sizeof(*fill_threads))) == NULL)
		return (-ENOMEM);
	for (node = 0; node < nnodes; node++) {
		has = 0;
		for (cpu = 0; cpu < topo.ncpus && cpu < TOPO_CPUS_MAX; cpu++) {
			if (!topo.cpu_online[cpu] || (nnodes > 1 &&
			    topo.cpu_node[cpu] != node))
				continue;
			fill_threads[n].node = node;
			fill_threads[n++].cpu = cpu;
			has = 1;
		}
		if (!has) {
			fill_threads[n].node = node;
			fill_threads[n++].cpu = -1;
		}
	}
	for (; fill_nthreads < n; fill_nthreads++)
		if ((error = pthread_create(&fill_threads[fill_nthreads].thread,
		    NULL, pool_main, &fill_threads[fill_nthreads])) != 0) {
			log_warnx("pool: filler %d: pthread_create: %s",
			    fill_nthreads, strerror(error));
			return (-error);
		}
	log_info("pool: %d fillers (one a CPU, SCHED_IDLE) on %d node%s",
	    fill_nthreads, nnodes, nnodes > 1 ? "s" : "");
	return (0);
}

void
pool_fill_stop(void)
{
	int	i;

	atomic_store(&fill_stopping, 1);
	pthread_mutex_lock(&fill_nap_lock);
	pthread_cond_broadcast(&fill_nap_cond);
	pthread_mutex_unlock(&fill_nap_lock);
	for (i = 0; i < fill_nthreads; i++)
		pthread_join(fill_threads[i].thread, NULL);
	free(fill_threads);
	fill_threads = NULL;
	fill_nthreads = 0;
	if (fill_pools != NULL)
		pthread_cond_destroy(&fill_nap_cond);
	fill_pools = NULL;
	atomic_store(&fill_stopping, 0);
}
