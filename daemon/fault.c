/*
 * fault.c - one fault's life after the uffd read it (uffd.c): a worker
 * takes it (fault_handle), gathers the adjacent faults queued for the
 * same action into a batch, and resolves the batch as one transaction
 * (resolve.c) with the operations here: clear (clear.c, shared with idle
 * workers when the page is big), populate, map (UFFDIO_CONTINUE with the
 * EAGAIN pump, uffd.c), wake.  What cannot be served is deferred, woken
 * or poisoned; the scrub, interception and the cost model hear of each
 * fault served.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/userfaultfd.h>

#include "hpz.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffd-compat.h"
#include "uffdio.h"

#include "clear.h"
#include "cost.h"
#include "fault.h"
#include "globals.h"
#include "intercept.h"
#include "log.h"
#include "plan.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "uffd.h"
#include "worker.h"

/* Pages resolved together by one worker at most. */
#define FAULT_COALESCE_MAX	64
/*
 * The kernel lets a map fail with EAGAIN from the time an event is raised
 * until the thread that raised it runs again after we read it:
 * microseconds usually.  A map tries this often, pumping the events, and
 * waits one short poll at most; then the fault is deferred (worker.c),
 * holding nothing, from 1 ms doubling to 64 ms, and woken after
 * FAULT_SETTLE_MS to fault again.
 */
#define FAULT_MAP_TRIES		16
#define FAULT_SETTLE_MS		30000ULL
#define FAULT_RETRY_MIN_NS	1000000ULL
#define FAULT_RETRY_MAX_NS	64000000ULL
/*
 * One stray fault in this many is logged: a range that grew or moved can
 * fault outside its region at fault rate, and the log must not follow.
 */
#define FAULT_STRAY_LOG_EVERY	1000
/* Faults in a row on one page outside the region before it is poisoned. */
#define FAULT_STRAY_POISON	3
/* A hole no free huge page can fill: tried again this long, then SIGBUS. */
#define FAULT_NOPAGE_NS		1000000000ULL

/* Allocate the file pages [idx, idx+n); the kernel zeroes them. */
static int
fault_populate(struct region *r, uint64_t idx, uint64_t n)
{
	int	error;

	if ((error = region_populate(r, idx, n)) != 0)
		return (error);
	atomic_fetch_add(&stats.pages_populated, n);
	atomic_fetch_add(&r->populated, n);
	return (0);
}

/* Tell a thread we cannot back its page: it gets SIGBUS, like the kernel. */
static void
fault_poison(struct region *r, struct ufork *f, uint64_t addr)
{
	struct uffdio_poison	up;

	memset(&up, 0, sizeof(up));
	up.range.start = addr;
	up.range.len = r->page_size;
	worker_ioctl_enter(uffd_mm(r, f), r->id, (int)r->pid,
	    r->owner);
	if (ioctl(uffd_fd(r, f), UFFDIO_POISON, &up) == -1 && errno != EEXIST) {
		worker_ioctl_leave();
		uffdio_wake(uffd_fd(r, f), addr, r->page_size);
	} else
		worker_ioctl_leave();
}

/*
 * A hole of r that could not be filled (populate's EFAULT inside the
 * file): tried again (0) while the host has a free huge page (a race with
 * a punch), and for FAULT_NOPAGE_NS after it was first seen with none;
 * then 1: no page to be had, SIGBUS, the kernel's own answer, where
 * trying again would fault for ever.
 */
static int
fault_no_page(struct region *r)
{
	uint_fast64_t	now = stats_now_ns(), since = 0;

	if (!state_no_free_page(r->page_size)) {
		atomic_store(&r->nopage_since, 0);
		return (0);
	}
	if (atomic_compare_exchange_strong(&r->nopage_since, &since, now))
		return (0);
	return (now - since >= FAULT_NOPAGE_NS);
}

/*
 * A fault we could not serve.  The mm gone: nobody waits.  The range gone
 * (unmapped or moved: ENOENT) or the mm never settling (EAGAIN): wake the
 * thread, which faults again or meets the kernel's verdict; never a lost
 * fault.  Anything else: poison.
 */
static void
fault_failed(struct region *r, struct ufork *f, uint64_t idx, uint64_t addr,
    int error)
{
	if (error == -ESRCH)
		return;
	/*
	 * Punched again while we mapped it, inside the file: fault again;
	 * unless no page has been to be had for a while (fault_no_page).
	 */
	if (error == -EFAULT && uffdio_in_file(r->fd, r->offset, idx,
	    r->page_size)) {
		if (!fault_no_page(r)) {
			uffdio_wake(uffd_fd(r, f), addr, r->page_size);
			return;
		}
		error = -ENOSPC;
	}
	/*
	 * A fault read before the range was left to the kernel: the kernel
	 * serves it now (and says SIGBUS itself if it must).
	 */
	if (error == -ENOENT || error == -EAGAIN ||
	    (f == NULL && !atomic_load(&r->intercepting))) {
		uffdio_wake(uffd_fd(r, f), addr, r->page_size);
		return;
	}
	if (error == -ENOSPC)
		log_warnx("region %llu: fault at 0x%llx: no page to be had for "
		    "it (the host has had no free huge page for %llu ms): "
		    "SIGBUS, as the kernel answers", (unsigned long long)r->id,
		    (unsigned long long)addr,
		    (unsigned long long)(FAULT_NOPAGE_NS / 1000000));
	else
		log_warnx("region %llu: cannot serve fault at 0x%llx: %s",
		    (unsigned long long)r->id, (unsigned long long)addr,
		    strerror(-error));
	fault_poison(r, f, addr);
}

/*
 * A fault outside the region: one queued before a move, or on a range that
 * grew or moved in part.  Wake it: it faults again, and most likely lands
 * inside once the event is read.  The same page again and again is a range
 * no region covers (it would fault forever): poison it, unless the region
 * is about to be released, which unregisters such pieces.
 */
static void
fault_stray(struct region *r, struct ufork *f, uint64_t addr)
{
	uint64_t	page = addr & ~(r->page_size - 1), last;
	int		n;

	if (atomic_fetch_add(&stats.faults_stray, 1) % FAULT_STRAY_LOG_EVERY ==
	    0)
		log_warnx("region %llu: fault at 0x%llx outside the region",
		    (unsigned long long)r->id, (unsigned long long)addr);
	last = atomic_exchange(&r->stray_page, page);
	if (last == page)
		n = atomic_fetch_add(&r->stray_n, 1) + 1;
	else {
		atomic_store(&r->stray_n, 1);
		n = 1;
	}
	if (n >= FAULT_STRAY_POISON && !atomic_load(&r->gone)) {
		atomic_store(&r->stray_n, 0);
		fault_poison(r, f, page);
		return;
	}
	uffdio_wake(uffd_fd(r, f), page, r->page_size);
}

/* A worker asked to help with a job. */
static void
fault_assist(struct worker *self, struct work *item)
{
	clear_job_run(item->job);
	clear_job_put(item->job);
	free(item);
}

/* What a queued fault must look like to join a coalesced batch. */
struct fault_match {
	struct region	*region;
	struct ufork	*fork;
	uint64_t	 base;
	enum fault_kind	 kind;
	uint64_t	 lo;		/* page index range it may fall in */
	uint64_t	 hi;
};

static int
fault_match(struct work *w, void *arg)
{
	struct fault_match	*m = arg;
	uint64_t		 idx;

	if (w->type != WORK_FAULT || w->region != m->region ||
	    w->fork != m->fork || w->kind != m->kind || w->addr < m->base ||
	    w->addr - m->base >= m->region->len)
		return (0);
	idx = (w->addr - m->base) / m->region->page_size;
	return (idx >= m->lo && idx <= m->hi);
}

/* Account one resolved fault. */
static void
fault_done(struct region *r, struct work *w, int shared)
{
	uint64_t	ns, max;

	atomic_fetch_add(&stats.faults, 1);
	atomic_fetch_add(w->kind == FAULT_MINOR ? &stats.faults_minor :
	    &stats.faults_missing, 1);
	if (shared)
		atomic_fetch_add(&stats.faults_shared, 1);
	atomic_fetch_add(&r->faults, 1);
	ns = stats_now_ns() - w->t_read;
	stats_fault_latency(ns);
	atomic_fetch_add(&r->fault_ns_total, ns);
	max = atomic_load(&r->fault_ns_max);
	while (ns > max && !atomic_compare_exchange_weak(&r->fault_ns_max,
	    &max, ns))
		;
}

/* A fault item finished with, whatever became of it. */
static void
fault_work_end(struct work *w)
{
	struct region	*r = w->region;

	uffd_work_free(w);
	region_work_done(r);
}

/* A parked or deferred fault of a region being destroyed: let it go. */
void
fault_work_cancel(struct work *w)
{
	fault_work_end(w);
}

/*
 * One batch of faults: adjacent pages of one region (or child) needing the
 * same action, resolved as one transaction (resolve.c).  This is what the
 * operations below get as their argument.
 */
struct fault_batch {
	struct worker		*self;
	struct region		*r;
	struct ufork		*f;
	uint64_t		 base;		/* the range's address, once */
	struct work		*item[RESOLVE_BATCH_MAX];
	uint64_t		 iidx[RESOLVE_BATCH_MAX];
	size_t			 nitems;
	struct work		*cand[FAULT_COALESCE_MAX];
	uint64_t		 cidx[FAULT_COALESCE_MAX];
	size_t			 nc;
	int			 awake_only;	/* split: spinning helpers only */
	struct resolve		 rs;
};

static int
fault_op_populate(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct fault_batch	*b = rs->arg;

	return (fault_populate(b->r, idx, n));
}

/* Offer a clear job to idle workers (clear_split's helpers). */
static int
fault_offer(struct clear_job *job, void *arg)
{
	struct fault_batch	*b = arg;

	return (worker_assist(job, b->r, region_page_node(b->r, b->rs.hold.lo),
	    b->self, b->awake_only, fault_assist));
}

/*
 * Clear the batch through our mapping (clear.c): a page bigger than an
 * extent (1 GiB) in extents with every idle worker of its node; one page
 * cut in as many pieces as there are workers already spinning; else the
 * whole batch in one pass, every faulting neighbourhood last.
 */
static int
fault_op_clear(struct resolve *rs, uint64_t lo, uint64_t n)
{
	struct fault_batch	*b = rs->arg;
	struct region		*r = b->r;
	struct clear_cost	 cost = { 0, 0, 0, 0 };
	uint64_t		 ext = worker_extent_max(&worker_config);
	char			*base = (char *)r->map + lo * r->page_size;
	int			 error, helpers, helped = 0;

	if (r->page_size > ext) {
		b->awake_only = 0;
		error = clear_split(base, r->page_size, rs->off[0],
		    worker_config.hot_size, ext, fault_offer, b, &helped,
		    &cost);
	} else if (n == 1 && worker_config.split &&
	    r->page_size >= 2 * PLAN_EXTENT_MIN &&
	    (helpers = worker_spinning(b->self)) > 0) {
		b->awake_only = 1;
		error = clear_split(base, r->page_size, rs->off[0],
		    worker_config.hot_size, clear_piece(r->page_size,
		    helpers + 1), fault_offer, b, &helped, &cost);
	} else
		error = clear_pages(base, r->page_size, n, rs->off,
		    worker_config.hot_size, &cost);
	atomic_fetch_add(&stats.bulk_bytes, cost.bulk_bytes);
	atomic_fetch_add(&stats.bulk_ns, cost.bulk_ns);
	atomic_fetch_add(&stats.hot_bytes, cost.hot_bytes);
	atomic_fetch_add(&stats.hot_ns, cost.hot_ns);
	if (helped > 0)
		atomic_fetch_add(&stats.jobs_split, 1);
	if (error != 0)
		return (error);
	atomic_fetch_add(&stats.pages_cleared, n);
	atomic_fetch_add(&stats.bytes_cleared, n * r->page_size);
	atomic_fetch_add(&r->cleared, n);
	return (0);
}

static int
fault_op_map(struct resolve *rs, uint64_t idx, uint64_t n, uint64_t *done)
{
	struct fault_batch	*b = rs->arg;
	struct region		*r = b->r;

	return (uffd_map(b->self, r, b->f, b->base + idx * r->page_size,
	    n * r->page_size, FAULT_MAP_TRIES, done));
}

static void
fault_op_wake(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct fault_batch	*b = rs->arg;
	struct region		*r = b->r;

	uffdio_wake(uffd_fd(r, b->f), b->base + idx * r->page_size,
	    n * r->page_size);
}

static const struct resolve_ops fault_ops = {
	.populate = fault_op_populate,
	.clear = fault_op_clear,
	.map = fault_op_map,
	.wake = fault_op_wake,
	.want_map = NULL,
};

/*
 * The batch's first fault: claimed (0), or dealt with already (-1): one
 * outside the region is stray; one on a region being let go, or on a page
 * another thread of ours holds, is parked on the region, and no worker
 * waits for it.  The region's release unregisters the range, which wakes
 * what is parked for it; a holder queues again what it parked.
 */
static int
fault_begin(struct worker *self, struct fault_batch *b, struct work *first)
{
	struct region	*r = first->region;
	uint64_t	 idx, off;

	b->self = self;
	b->r = r;
	b->f = first->fork;
	b->nitems = 0;
	b->nc = 0;
	/* One base for the whole batch: a move may come meanwhile. */
	b->base = uffd_base(r, b->f);
	if (first->addr < b->base || first->addr - b->base >= r->len) {
		fault_stray(r, b->f, first->addr);
		fault_work_end(first);
		return (-1);
	}
	if (atomic_load(&r->gone)) {
		resolve_park(&r->rt, &first->park);
		return (-1);
	}
	idx = (first->addr - b->base) / r->page_size;
	off = first->addr - (b->base + idx * r->page_size);
	resolve_begin(&b->rs, &r->rt, &fault_ops, b, first->kind, 0);
	switch (resolve_claim(&b->rs, idx, off, &first->park)) {
	case RESOLVE_CLAIMED:
		break;
	case RESOLVE_HELD:
		return (-1);	/* parked */
	default:
		fault_stray(r, b->f, first->addr);
		fault_work_end(first);
		return (-1);
	}
	scrub_fault(r, idx, first->kind);
	b->item[0] = first;
	b->iidx[0] = idx;
	b->nitems = 1;
	return (0);
}

/* Add the queued candidate for page idx to the batch, if it may join. */
static int
fault_join(struct fault_batch *b, uint64_t idx)
{
	struct region	*r = b->r;
	size_t		 k;

	for (k = 0; k < b->nc && (b->cand[k] == NULL || b->cidx[k] != idx);
	    k++)
		;
	if (k == b->nc || !resolve_extend(&b->rs, idx, b->cand[k]->addr -
	    (b->base + idx * r->page_size)))
		return (0);
	b->item[b->nitems] = b->cand[k];
	b->iidx[b->nitems++] = idx;
	b->cand[k] = NULL;
	return (1);
}

/*
 * Gather faults queued on adjacent pages that need the same action: one
 * clear pass, one UFFDIO_CONTINUE.  Outward from the fault, stopping at
 * the first page that cannot join (held, or another action).
 */
static void
fault_gather(struct fault_batch *b)
{
	struct region		*r = b->r;
	struct fault_match	 m;
	uint64_t		 idx = b->iidx[0], maxp, plo, phi, page, ext;
	size_t			 k;

	ext = worker_extent_max(&worker_config);
	maxp = ext / r->page_size;
	if (maxp > FAULT_COALESCE_MAX)
		maxp = FAULT_COALESCE_MAX;
	if (maxp <= 1 || r->page_size > ext)
		return;
	m.region = r;
	m.fork = b->f;
	m.base = b->base;
	m.kind = b->item[0]->kind;
	m.lo = idx >= maxp - 1 ? idx - (maxp - 1) : 0;
	m.hi = idx + (maxp - 1) < r->npages ? idx + (maxp - 1) :
	    r->npages - 1;
	b->nc = worker_take(b->self, fault_match, &m, b->cand,
	    FAULT_COALESCE_MAX);
	if (b->nc == 0)
		return;
	for (k = 0; k < b->nc; k++)
		b->cidx[k] = (b->cand[k]->addr - b->base) / r->page_size;
	plan_coalesce(b->cidx, b->nc, idx, maxp, &plo, &phi);
	for (page = idx + 1; page <= phi; page++)
		if (!fault_join(b, page))
			break;
	for (page = idx; page > plo; page--)
		if (!fault_join(b, page - 1))
			break;
}

/*
 * The mm was changing (EAGAIN): try the fault again a little later, on
 * whichever worker is free then, holding nothing meanwhile.  A region
 * being let go, or a fault waiting too long, is woken instead: it faults
 * again, to us or (once the range is unregistered) to the kernel.
 */
static void
fault_defer(struct fault_batch *b, struct work *w, uint64_t idx)
{
	struct region	*r = b->r;

	if (atomic_load(&r->dying) || stats_now_ns() - w->t_read >
	    FAULT_SETTLE_MS * 1000000ULL) {
		uffdio_wake(uffd_fd(r, b->f), b->base + idx * r->page_size,
		    r->page_size);
		fault_work_end(w);
		return;
	}
	w->backoff = w->backoff == 0 ? FAULT_RETRY_MIN_NS :
	    w->backoff * 2 > FAULT_RETRY_MAX_NS ? FAULT_RETRY_MAX_NS :
	    w->backoff * 2;
	worker_defer(w, w->backoff);
}

/*
 * What the transaction did, fault by fault.  r stays ours only while the
 * batch holds one of its faults that the main thread cannot take: each
 * counts in r->inflight, which region_destroy drains first, and a fault
 * parked or deferred is one it takes (and lets go).  So every touch of r
 * below comes before the fault it is made for is let go, parked or
 * deferred; a fault lost (its file refused the clear) is parked only once
 * the region is released, for the release touches r.
 */
static void
fault_finish(struct fault_batch *b)
{
	struct resolve		*rs = &b->rs;
	struct region		*r = b->r;
	struct resolve_waiter	*pw;
	struct work		*w;
	uint64_t		 idx;
	size_t			 i, k;
	int			 lost = 0, took;

	if (rs->tampered)
		uffd_tampered(r, rs->tampered);
	if (b->nitems > 1)
		atomic_fetch_add(&stats.faults_coalesced, b->nitems - 1);
	for (i = 0; i < b->nitems; i++) {
		w = b->item[i];
		idx = b->iidx[i];
		k = idx - rs->hold.lo;
		switch (rs->result[k]) {
		case RESOLVE_DONE:
			fault_done(r, w, 0);
			/* What a garbage fault through us costs now. */
			if (rs->action == ACTION_CLEAR && i == 0)
				cost_observe(r, stats_now_ns() - w->t_read);
			fault_work_end(w);
			break;
		case RESOLVE_RETRY:
			fault_defer(b, w, idx);
			break;
		case RESOLVE_LOST:
			lost = 1;	/* parked below */
			break;
		case RESOLVE_FAILED:
			fault_failed(r, b->f, idx, b->base + idx *
			    r->page_size, rs->error);
			fault_work_end(w);
			break;
		case RESOLVE_READY:
		case RESOLVE_SKIPPED:
			/* Nothing mapped: let it fault again. */
			uffdio_wake(uffd_fd(r, b->f), b->base + idx *
			    r->page_size, r->page_size);
			fault_work_end(w);
			break;
		}
	}
	/* Parked after the release: its unregister wakes them. */
	if (lost) {
		uffd_region_refused(r, "its file refused a fault's clear "
		    "(truncated or punched under us)");
		for (i = 0; i < b->nitems; i++)
			if (rs->result[b->iidx[i] - rs->hold.lo] ==
			    RESOLVE_LOST)
				resolve_park(&r->rt, &b->item[i]->park);
	}
	/* Candidates left over: duplicates of a page just mapped, or later. */
	for (k = 0; k < b->nc; k++) {
		if ((w = b->cand[k]) == NULL)
			continue;
		idx = b->cidx[k];
		took = resolve_holds_page(rs, idx) &&
		    rs->result[idx - rs->hold.lo] == RESOLVE_DONE;
		if (took) {
			fault_done(r, w, 1);
			fault_work_end(w);
		} else
			worker_push(b->self, w);
	}
	/* Faults that waited for our pages: ours to take next. */
	while ((pw = TAILQ_FIRST(&rs->woken)) != NULL) {
		TAILQ_REMOVE(&rs->woken, pw, entry);
		w = worker_parked(pw);
		worker_push(b->self, w);
	}
	/* The last garbage gone: the loop may leave the faults to the kernel. */
	if (rs->resets_done || rs->garbage_gone)
		hpzd_kick();
}

/*
 * A garbage fault on a region that cannot keep up: step aside
 * (intercept.c decides; its punches are made on the client's context).
 * The fault in hand goes on as it was (its page is claimed, and clearing
 * it costs less than allocating it again).
 */
static void
fault_aside(struct fault_batch *b)
{
	if (b->rs.action != ACTION_CLEAR || b->f != NULL)
		return;
	intercept_fault(b->r);
}

/*
 * Resolve a fault (in a worker), with any queued faults on adjacent pages
 * that need the same action: claim, gather, one transaction (resolve.c),
 * then account, defer or fail each fault.
 */
void
fault_handle(struct worker *self, struct work *first)
{
	struct fault_batch	b;

	if (fault_begin(self, &b, first) != 0)
		return;
	fault_aside(&b);
	fault_gather(&b);
	resolve_run(&b.rs);
	fault_finish(&b);
}
