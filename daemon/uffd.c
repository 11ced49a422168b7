/*
 * uffd.c - read faults from each region's userfaultfd and resolve them:
 * the fault path.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/userfaultfd.h>

#include <event2/event.h>

#include "hpzerod.h"

#ifndef UFFDIO_POISON
/* Linux 6.6; Debian 12's headers predate it. */
#define _UFFDIO_POISON	(0x08)
struct uffdio_poison {
	struct uffdio_range	range;
	__u64			mode;
	__s64			updated;
};
#define UFFDIO_POISON	_IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

/* Faults read at once before other sources get a turn. */
#define UFFD_READ_BATCH	64
/* Pages resolved together by one worker at most. */
#define UFFD_COALESCE_MAX	64

/* The CPU a thread last ran on (field 39 of its stat), or -1. */
int
uffd_thread_cpu(pid_t pid, uint32_t tid)
{
	char	 path[64], buf[1024], *p;
	ssize_t	 n;
	int	 fd, field, cpu = -1;

	if (pid <= 0 || tid == 0)
		return (-1);
	snprintf(path, sizeof(path), "/proc/%d/task/%u/stat", (int)pid, tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return (-1);
	buf[n] = '\0';
	/* The name may hold spaces and parentheses: start after the last ')'. */
	if ((p = strrchr(buf, ')')) == NULL)
		return (-1);
	for (field = 2; *p != '\0' && field < 39; p++)
		if (*p == ' ')
			field++;
	if (field == 39)
		cpu = atoi(p);
	return (cpu);
}

/*
 * Read the faults waiting in a region's uffd (one batch) and queue them:
 * on self when a spinning worker reads, else on the worker routing picks.
 * Returns how many faults were queued.
 */
int
uffd_read(struct region *r, struct worker *self)
{
	struct uffd_msg	 msgs[UFFD_READ_BATCH];
	struct work	*w;
	ssize_t		 n;
	size_t		 i, count;
	uint64_t	 now, idx;
	int		 queued = 0, cpu, node;

	n = read(r->uffd, msgs, sizeof(msgs));
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return (0);
		if (self == NULL) {
			/* A broken uffd would wake us forever: let it go. */
			log_warn("region %llu: read uffd, no longer serving it",
			    (unsigned long long)r->id);
			event_del(r->ev);
			worker_poll_remove(r);
		}
		return (0);
	}
	now = stats_now_ns();
	count = (size_t)n / sizeof(msgs[0]);
	for (i = 0; i < count; i++) {
		if (msgs[i].event != UFFD_EVENT_PAGEFAULT) {
			log_debug("region %llu: ignoring uffd event %u",
			    (unsigned long long)r->id, msgs[i].event);
			continue;
		}
		if ((w = calloc(1, sizeof(*w))) == NULL)
			fatal("calloc");
		w->type = WORK_FAULT;
		w->region = r;
		w->addr = msgs[i].arg.pagefault.address;
		w->kind = (msgs[i].arg.pagefault.flags &
		    UFFD_PAGEFAULT_FLAG_MINOR) ? FAULT_MINOR : FAULT_MISSING;
		w->tid = msgs[i].arg.pagefault.feat.ptid;
		w->t_read = now;
		atomic_fetch_add(&r->inflight, 1);
		queued++;
		if (self != NULL) {
			atomic_fetch_add(&stats.faults_polled, 1);
			worker_push(self, w);
			continue;
		}
		cpu = -1;
		if (worker_config.route == ROUTE_THREAD)
			cpu = uffd_thread_cpu(r->pid, w->tid);
		if (cpu < 0)
			cpu = sched_getcpu();
		node = r->node;
		if (w->kind == FAULT_MINOR && w->addr - r->addr < r->len) {
			idx = region_page_index(r, w->addr);
			node = region_page_node(r, idx);
		}
		worker_submit(w, cpu, node);
	}
	return (queued);
}

/* The uffd is readable (main thread). */
void
uffd_read_cb(int fd, short events, void *arg)
{
	uffd_read(arg, NULL);
}

/* Map [addr, addr+len) in the client.  0, or a negative errno. */
int
uffd_continue(struct region *r, uint64_t addr, uint64_t len)
{
	struct uffdio_continue	uc;
	int			tries;

	for (tries = 0; tries < 1000; tries++) {
		memset(&uc, 0, sizeof(uc));
		uc.range.start = addr;
		uc.range.len = len;
		if (ioctl(r->uffd, UFFDIO_CONTINUE, &uc) == 0)
			return (0);
		if (errno == EEXIST)	/* already mapped: just wake */
			return (uffd_wake(r, addr, len));
		if (errno != EAGAIN && errno != EINTR)
			return (-errno);
		/* EAGAIN: the mm is changing under us; try again. */
		usleep(10);
	}
	return (-EAGAIN);
}

/* Wake the client's threads waiting on [addr, addr+len). */
int
uffd_wake(struct region *r, uint64_t addr, uint64_t len)
{
	struct uffdio_range	range;

	range.start = addr;
	range.len = len;
	if (ioctl(r->uffd, UFFDIO_WAKE, &range) == -1)
		return (-errno);
	return (0);
}

/*
 * Unregister the region's range in the client's mm: the kernel wakes the
 * waiters and serves later faults itself.  Call only after garbage pages
 * are gone.  Failing because the client's mm is gone is fine.
 */
int
uffd_unregister(struct region *r)
{
	struct uffdio_range	range;

	range.start = r->addr;
	range.len = r->len;
	if (ioctl(r->uffd, UFFDIO_UNREGISTER, &range) == -1) {
		if (errno != ESRCH && errno != EINVAL && errno != ENOMEM)
			log_warn("region %llu: UFFDIO_UNREGISTER",
			    (unsigned long long)r->id);
		return (-errno);
	}
	return (0);
}

/* Allocate the file pages [idx, idx+n); the kernel zeroes them. */
static int
uffd_populate(struct region *r, uint64_t idx, uint64_t n)
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
uffd_poison(struct region *r, uint64_t addr)
{
	struct uffdio_poison	up;

	memset(&up, 0, sizeof(up));
	up.range.start = addr;
	up.range.len = r->page_size;
	if (ioctl(r->uffd, UFFDIO_POISON, &up) == -1 && errno != EEXIST)
		uffd_wake(r, addr, r->page_size);
}

/* The client is gone when the uffd's mm has exited. */
static int
uffd_client_gone(int error)
{
	return (error == -ESRCH || error == -ENOENT);
}

static uint64_t
uffd_extent_max(void)
{
	if (worker_config.extent_max != 0)
		return (worker_config.extent_max);
	return (plan_extent_max(topo.llc_share));
}

/* A page cut in n pieces of whole subpages, none under the minimum. */
static uint64_t
uffd_piece(uint64_t page_size, int n)
{
	uint64_t	piece = (page_size / (uint64_t)n + 4095) & ~4095ULL;

	return (piece < PLAN_EXTENT_MIN ? PLAN_EXTENT_MIN : piece);
}

/* Bulk-clear [p, p+len) and account it. */
static void
uffd_bulk(char *p, uint64_t len)
{
	uint64_t	t0 = stats_now_ns();

	clear_bulk(p, len);
	atomic_fetch_add(&stats.bulk_ns, stats_now_ns() - t0);
	atomic_fetch_add(&stats.bulk_bytes, len);
}

/* Take and clear a job's extents until none is left. */
static void
uffd_job_run(struct job *job)
{
	size_t	i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->n) {
		uffd_bulk(job->base + job->ext[i].off, job->ext[i].len);
		/* Our streaming stores must land before anyone maps. */
		clear_fence();
		atomic_fetch_sub(&job->remaining, 1);
	}
}

static void
uffd_job_put(struct job *job)
{
	if (atomic_fetch_sub(&job->refs, 1) == 1)
		free(job);
}

/* A worker asked to help with a job. */
void
uffd_assist(struct work *item)
{
	uffd_job_run(item->job);
	uffd_job_put(item->job);
	free(item);
}

/*
 * Clear one page as a job shared with other workers: a page bigger than
 * an extent (1 GiB), in extents, with every idle worker of its node; or a
 * smaller page cut in as many pieces as there are workers already
 * spinning.  Farthest from the fault first; the neighbourhood of the
 * faulting subpage last, here, with ordinary stores.
 */
static int
uffd_clear_split(struct worker *self, struct region *r, uint64_t idx,
    uint64_t fault_off, uint64_t extent, int awake_only)
{
	struct job	*job;
	uint64_t	 ws, wl, t0;
	char		*page = (char *)r->map + idx * r->page_size;

	plan_window(r->page_size, fault_off, worker_config.hot_size, &ws, &wl);
	if ((job = calloc(1, sizeof(*job))) == NULL)
		return (-ENOMEM);
	job->base = page;
	job->n = plan_split(r->page_size, ws, wl, extent, job->ext,
	    JOB_EXTENTS_MAX);
	if (job->n == 0 && r->page_size > wl) {
		free(job);
		return (-E2BIG);
	}
	atomic_init(&job->remaining, job->n);
	atomic_init(&job->refs, 1);
	if (worker_assist(job, r, idx, self, awake_only) > 0)
		atomic_fetch_add(&stats.jobs_split, 1);
	uffd_job_run(job);
	while (atomic_load(&job->remaining) != 0)
		sched_yield();
	uffd_job_put(job);
	t0 = stats_now_ns();
	clear_hot(page + ws, wl);
	atomic_fetch_add(&stats.hot_ns, stats_now_ns() - t0);
	atomic_fetch_add(&stats.hot_bytes, wl);
	atomic_fetch_add(&stats.pages_cleared, 1);
	atomic_fetch_add(&stats.bytes_cleared, r->page_size);
	atomic_fetch_add(&r->cleared, 1);
	return (0);
}

/*
 * Clear pages [lo, hi] that fit in an extent: the bulk of every page with
 * streaming stores, one fence, then each faulting neighbourhood with
 * ordinary stores so it is in cache when the client resumes.
 */
static void
uffd_clear_pages(struct region *r, uint64_t lo, uint64_t hi,
    const uint64_t *fault_off)
{
	struct plan_extent	 ext[8];
	uint64_t		 i, ws, wl, t0;
	size_t			 n, e;
	char			*page;

	for (i = lo; i <= hi; i++) {
		page = (char *)r->map + i * r->page_size;
		plan_window(r->page_size, fault_off[i - lo],
		    worker_config.hot_size, &ws, &wl);
		n = plan_split(r->page_size, ws, wl, r->page_size, ext, 8);
		for (e = 0; e < n; e++)
			uffd_bulk(page + ext[e].off, ext[e].len);
	}
	clear_fence();
	t0 = stats_now_ns();
	for (i = lo; i <= hi; i++) {
		page = (char *)r->map + i * r->page_size;
		plan_window(r->page_size, fault_off[i - lo],
		    worker_config.hot_size, &ws, &wl);
		clear_hot(page + ws, wl);
		atomic_fetch_add(&stats.hot_bytes, wl);
	}
	atomic_fetch_add(&stats.hot_ns, stats_now_ns() - t0);
	n = (size_t)(hi - lo + 1);
	atomic_fetch_add(&stats.pages_cleared, n);
	atomic_fetch_add(&stats.bytes_cleared, n * r->page_size);
	atomic_fetch_add(&r->cleared, n);
}

/* What a queued fault must look like to join a coalesced batch. */
struct uffd_match {
	struct region	*region;
	enum fault_kind	 kind;
	uint64_t	 lo;		/* page index range it may fall in */
	uint64_t	 hi;
};

static int
uffd_match(struct work *w, void *arg)
{
	struct uffd_match	*m = arg;
	uint64_t		 idx;

	if (w->type != WORK_FAULT || w->region != m->region ||
	    w->kind != m->kind || w->addr < m->region->addr ||
	    w->addr - m->region->addr >= m->region->len)
		return (0);
	idx = region_page_index(m->region, w->addr);
	return (idx >= m->lo && idx <= m->hi);
}

/* Account one resolved fault. */
static void
uffd_done(struct region *r, struct work *w, int shared)
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

/*
 * Resolve a fault (in a worker), with any queued faults on adjacent pages
 * that need the same action: one clear pass, one UFFDIO_CONTINUE.  Each
 * page is claimed first; its state alone decides what may be written.
 */
void
uffd_handle(struct worker *self, struct work *first)
{
	struct region		*r = first->region;
	struct work		*cand[UFFD_COALESCE_MAX], *got[UFFD_COALESCE_MAX];
	struct uffd_match	 m;
	uint64_t		 idx, lo, hi, maxp, i, page, off[UFFD_COALESCE_MAX];
	uint64_t		 cidx[UFFD_COALESCE_MAX], plo, phi;
	uint8_t			 was, now, w2;
	enum page_action	 action;
	size_t			 nc = 0, k, j;
	int			 error = 0, took, helpers, waited;

	if (first->addr < r->addr || first->addr - r->addr >= r->len) {
		/*
		 * The client registered more on this uffd than it told us.
		 * Answer (wake it, the kernel decides what follows), never
		 * leave it hanging; say so once in a while.
		 */
		if (atomic_fetch_add(&stats.faults_stray, 1) % 1000 == 0)
			log_warnx("region %llu: fault at 0x%llx outside the "
			    "region: woken, not served",
			    (unsigned long long)r->id,
			    (unsigned long long)first->addr);
		uffd_wake(r, first->addr & ~4095ULL, 4096);
		region_work_done(r);
		free(first);
		return;
	}
	idx = region_page_index(r, first->addr);
	waited = 0;
	while (!state_claim(&r->state[idx], &was)) {
		/* Another worker (or background work) owns it: wait. */
		atomic_fetch_add(&r->fault_waiting, 1);
		region_wait_page(r, idx);
		atomic_fetch_sub(&r->fault_waiting, 1);
		waited = 1;
	}
	scrub_fault(r, idx, first->kind);
	action = state_fault_action(was, first->kind);
	/* Raced a fault on the same page that mapped it: just wake. */
	if (waited && was == PAGE_MAPPED) {
		state_release(&r->state[idx], was);
		if ((error = uffd_continue(r, r->addr + idx * r->page_size,
		    r->page_size)) == 0)
			uffd_done(r, first, 1);
		region_work_done(r);
		free(first);
		return;
	}
	lo = hi = idx;
	for (k = 0; k < UFFD_COALESCE_MAX; k++)
		got[k] = NULL;
	got[0] = first;
	off[0] = first->addr - (r->addr + idx * r->page_size);

	/* Gather queued neighbours needing the same action. */
	maxp = uffd_extent_max() / r->page_size;
	if (maxp > UFFD_COALESCE_MAX)
		maxp = UFFD_COALESCE_MAX;
	if (maxp > 1 && r->page_size <= uffd_extent_max()) {
		m.region = r;
		m.kind = first->kind;
		m.lo = idx >= maxp - 1 ? idx - (maxp - 1) : 0;
		m.hi = idx + (maxp - 1) < r->npages ? idx + (maxp - 1) :
		    r->npages - 1;
		nc = worker_take(self, uffd_match, &m, cand, UFFD_COALESCE_MAX);
	}
	for (k = 0; k < nc; k++)
		cidx[k] = region_page_index(r, cand[k]->addr);
	if (nc > 0) {
		plan_coalesce(cidx, nc, idx, maxp, &plo, &phi);
		/* Claim outward from the fault; stop at the first misfit. */
		for (page = idx + 1; page <= phi; page++) {
			for (k = 0; k < nc && (cand[k] == NULL ||
			    cidx[k] != page); k++)
				;
			if (k == nc || !state_claim(&r->state[page], &w2))
				break;
			if (state_fault_action(w2, first->kind) != action) {
				state_release(&r->state[page], w2);
				break;
			}
			hi = page;
			got[hi - lo] = cand[k];
			cand[k] = NULL;
		}
		for (page = idx; page > plo; page--) {
			for (k = 0; k < nc && (cand[k] == NULL ||
			    cidx[k] != page - 1); k++)
				;
			if (k == nc || !state_claim(&r->state[page - 1], &w2))
				break;
			if (state_fault_action(w2, first->kind) != action) {
				state_release(&r->state[page - 1], w2);
				break;
			}
			/* Shift the batch up one slot to keep lo at 0. */
			for (j = hi - lo + 1; j > 0; j--)
				got[j] = got[j - 1];
			lo = page - 1;
			got[0] = cand[k];
			cand[k] = NULL;
		}
		for (i = lo; i <= hi; i++)
			off[i - lo] = got[i - lo]->addr -
			    (r->addr + i * r->page_size);
	}

	now = was;
	switch (action) {
	case ACTION_POPULATE:
		if ((error = uffd_populate(r, lo, hi - lo + 1)) == 0)
			now = PAGE_ZEROED;
		break;
	case ACTION_CLEAR:
		if (r->page_size > uffd_extent_max())
			error = uffd_clear_split(self, r, idx, off[0],
			    uffd_extent_max(), 0);
		else if (lo == hi && worker_config.split &&
		    r->page_size >= 2 * PLAN_EXTENT_MIN &&
		    (helpers = worker_spinning(self)) > 0)
			error = uffd_clear_split(self, r, idx, off[0],
			    uffd_piece(r->page_size, helpers + 1), 1);
		else
			uffd_clear_pages(r, lo, hi, off);
		if (error == 0)
			now = PAGE_ZEROED;
		break;
	case ACTION_MAP:
		break;
	}
	if (error == 0) {
		/* Cleared before mapped: a crash from here leaves data. */
		if (action != ACTION_MAP)
			for (i = lo; i <= hi; i++)
				state_mark_cleared(&r->state[i]);
		error = uffd_continue(r, r->addr + lo * r->page_size,
		    (hi - lo + 1) * r->page_size);
		if (error == -EFAULT && action == ACTION_MAP) {
			/* A page left the file after the fault: refill. */
			if ((error = uffd_populate(r, lo, hi - lo + 1)) == 0)
				error = uffd_continue(r,
				    r->addr + lo * r->page_size,
				    (hi - lo + 1) * r->page_size);
		}
		if (error == 0)
			now = PAGE_MAPPED;
	}
	for (i = lo; i <= hi; i++)
		state_release(&r->state[i], now);
	if (hi > lo)
		atomic_fetch_add(&stats.faults_coalesced, hi - lo);

	for (i = lo; i <= hi; i++) {
		if (error == 0)
			uffd_done(r, got[i - lo], 0);
		else if (!uffd_client_gone(error)) {
			log_warnx("region %llu: cannot serve fault at 0x%llx: "
			    "%s", (unsigned long long)r->id,
			    (unsigned long long)got[i - lo]->addr,
			    strerror(-error));
			uffd_poison(r, r->addr + i * r->page_size);
		}
		region_work_done(r);
		free(got[i - lo]);
	}
	/* Candidates left over: duplicates of a page just mapped, or later. */
	for (k = 0; k < nc; k++) {
		if (cand[k] == NULL)
			continue;
		took = error == 0 && cidx[k] >= lo && cidx[k] <= hi;
		if (took) {
			uffd_done(r, cand[k], 1);
			region_work_done(r);
			free(cand[k]);
		} else
			worker_push(self, cand[k]);
	}
}
