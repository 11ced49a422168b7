/*
 * uffd.c - a region's userfaultfd: read it, act on its events (REMOVE,
 * UNMAP, REMAP, FORK) and its children's, queue its faults to the workers
 * (fault.c resolves them), and the ioctls every user of it shares: map
 * with the EAGAIN pump, wake; and a region's release.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#include <event2/event.h>

#include "hpz.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffd-compat.h"
#include "uffdio.h"

#include "cctx.h"
#include "conf.h"
#include "globals.h"
#include "log.h"
#include "region.h"
#include "stats.h"
#include "topo.h"
#include "uffd.h"
#include "worker.h"

/* Faults read at once before other sources get a turn. */
#define UFFD_READ_BATCH	64
/* Batches one pump reads at most while an ioctl waits for events. */
#define UFFD_PUMP_BATCHES	16
/* A map's one wait for the events it would pump (fault.c's tries). */
#define UFFD_SETTLE_POLL_MS	1
/* How often tampering with a region's page state is logged at most. */
#define UFFD_TAMPER_LOG_NS	10000000000ULL

static int	uffd_batch(struct region *, struct ufork *, struct worker *);

/* What runs a fault read here (fault.c's), set from above (region.c). */
static void	(*uffd_fault_run)(struct worker *, struct work *);
/* Told of a region released, to stop its background work (scrub.c's). */
static void	(*uffd_released)(struct region *);

/*
 * The page path above this file, registered before any region (region.c):
 * what a worker runs for a fault, and who hears of a release.
 */
void
uffd_hooks(void (*run)(struct worker *, struct work *),
    void (*released)(struct region *))
{
	uffd_fault_run = run;
	uffd_released = released;
}

/* [limits] forks: a region's children at once (0: unlimited). */
static atomic_int	uffd_forks_max = UFFD_FORKS_DEFAULT;

void
uffd_limits(int forks)
{
	atomic_store(&uffd_forks_max, forks);
}

int
uffd_forks_limit(void)
{
	return (atomic_load(&uffd_forks_max));
}

/* The CPU a thread last ran on (field 39 of its stat), or -1. */
int
uffd_thread_cpu(pid_t pid, uint32_t tid)
{
	char	 path[64], buf[1024], *p;
	int	 field, cpu = -1;

	if (pid <= 0 || tid == 0)
		return (-1);
	snprintf(path, sizeof(path), "/proc/%d/task/%u/stat", (int)pid, tid);
	if (topo_read_file(path, buf, sizeof(buf)) <= 0)
		return (-1);
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

/* Where the range lies in the process behind f (NULL: the client). */
uint64_t
uffd_base(const struct region *r, const struct ufork *f)
{
	if (f != NULL)
		return (atomic_load(&f->addr));
	return (region_addr(r));
}

/*
 * Whose address space a uffd of r acts on, as worker.c's stuck rule keys
 * it: the child's, the client process's, or the region's alone.
 */
uintptr_t
uffd_mm(const struct region *r, const struct ufork *f)
{
	if (f != NULL)
		return ((uintptr_t)f);
	return (r->pid > 0 ? (uintptr_t)r->pid : (uintptr_t)r);
}

int
uffd_fd(const struct region *r, const struct ufork *f)
{
	return (f != NULL ? f->uffd : r->uffd);
}

static void
uffd_fork_put(struct ufork *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	close(f->uffd);
	free(f);
}

/*
 * The hash that spreads faults over workers: region id times a prime, plus
 * the page index.  Adjacent pages of one region go to different workers,
 * and the same page index of two regions does not land together (a prime
 * shares no factor with the worker count).
 */
#define UFFD_ROUTE_PRIME	7919

static uint64_t
uffd_route_hash(const struct work *w)
{
	return (w->region->id * UFFD_ROUTE_PRIME +
	    region_page_index(w->region, w->addr));
}

/* Queue again a fault that waited for a page (any thread). */
void
uffd_requeue(struct work *w)
{
	worker_submit(w, -1, w->region->node, uffd_route_hash(w));
}

/* A fault item is done with: drop what it holds. */
void
uffd_work_free(struct work *w)
{
	if (w->type == WORK_FAULT)
		atomic_fetch_sub(&stats.faults_inflight, 1);
	if (w->fork != NULL)
		uffd_fork_put(w->fork);
	free(w);
}

/*
 * Mark the region for release by the main thread; stop background work.
 * What the client did to the region (its file refused our write) is a
 * warning; the rest (unmapped, moved) is news.
 */
static void
uffd_region_release(struct region *r, int warn, const char *why)
{
	/*
	 * gone is published last: from then on the main thread may free r
	 * (region_tend), so nothing of r is touched after it.  Two
	 * threads releasing at once may both log; scrub_remove is idempotent.
	 */
	if (atomic_load(&r->gone))
		return;
	if (warn)
		log_warnx("region %llu (pid %d): %s: releasing it",
		    (unsigned long long)r->id, (int)r->pid, why);
	else
		log_info("region %llu: %s: releasing it",
		    (unsigned long long)r->id, why);
	if (uffd_released != NULL)
		uffd_released(r);
	if (atomic_exchange(&r->gone, 1))
		return;
	hpzd_kick();
}

void
uffd_region_gone(struct region *r, const char *why)
{
	uffd_region_release(r, 0, why);
}

/* The region's file refused a write of ours (SIGBUS caught): let it go. */
void
uffd_region_refused(struct region *r, const char *why)
{
	uffd_region_release(r, 1, why);
}

/*
 * The client (f == NULL) or a child unmapped [start, end).  A region whose
 * range is partly or wholly gone is released as on unregister: garbage
 * punched, what is left unregistered (the kernel serves it, and a hole
 * reads zero).  A child is only let go once its whole range is gone:
 * closing its uffd would let the kernel map garbage pages it still has.
 */
static void
uffd_unmapped(struct region *r, struct ufork *f, uint64_t start,
    uint64_t end)
{
	uint64_t	base = uffd_base(r, f);

	if (end <= start || !region_overlaps(base, r->len, start, end - start))
		return;
	if (f == NULL) {
		uffd_region_gone(r, "its range was unmapped");
		return;
	}
	if (start <= base && end - base >= r->len) {
		atomic_store(&f->dead, 1);
		hpzd_kick();
	}
}

/*
 * The client (or a child) moved [from, from+len) to to.  A move of the
 * whole region: serve it at its new address from now on (faults read
 * later translate; one queued with the old address is woken and finds no
 * mapping there, as the kernel would do).  A move of a part: released,
 * with the moved piece unregistered too, so nothing faults forever on an
 * address no region covers.
 */
static void
uffd_remapped(struct region *r, struct ufork *f, uint64_t from, uint64_t to,
    uint64_t len)
{
	struct hpz_state_header	*h = r->smap;
	uint64_t		 base = uffd_base(r, f), lo, hi, nb;

	if (!region_overlaps(base, r->len, from, len))
		return;
	if (base >= from && base - from <= len && len - (base - from) >=
	    r->len) {
		nb = to + (base - from);
		if (f != NULL) {
			atomic_store(&f->addr, nb);
			return;
		}
		region_set_addr(r, nb);
		h->addr = nb;
		log_info("region %llu: moved from 0x%llx to 0x%llx",
		    (unsigned long long)r->id, (unsigned long long)base,
		    (unsigned long long)nb);
		return;
	}
	if (f != NULL)
		return;	/* the child's moved piece is stray: poisoned */
	lo = base > from ? base : from;
	hi = base + r->len < from + len ? base + r->len : from + len;
	if (r->events.nmoved < REGION_MOVED_MAX) {
		r->events.moved[r->events.nmoved][0] = to + (lo - from);
		r->events.moved[r->events.nmoved][1] = hi - lo;
		r->events.nmoved++;
	}
	uffd_region_gone(r, "part of its range was moved");
}

/*
 * Out of memory for a child's uffd: the region is let go, and the uffd
 * kept until its garbage is punched (closing it earlier would let the
 * kernel map the child garbage pages): uffd_forks_release closes it.
 * Past UFFD_LOST_FORKS such uffds it stays open, its child's faults on
 * the range waiting until the child exits: never a stale byte.
 */
static void
uffd_fork_lost(struct region *r, int ufd)
{
	if (r->events.nlost < UFFD_LOST_FORKS)
		r->events.lost[r->events.nlost++] = ufd;
	else
		log_warnx("region %llu: a child's uffd is left open",
		    (unsigned long long)r->id);
	uffd_region_refused(r, "out of memory for its forked child");
}

/*
 * A process with the region mapped forked without MADV_DONTFORK: its
 * child's copy of the range is registered on a new uffd, ufd.  The child
 * maps pages of the same file, so its faults are served with the same
 * page state (garbage cleared, data mapped as it is) on that uffd.
 */
static void
uffd_forked(struct region *r, struct ufork *parent, int ufd)
{
	struct ufork	*f;
	int		 fl, n = 0, max = atomic_load(&uffd_forks_max);

	/* Children not yet found gone: past the limit the region goes. */
	TAILQ_FOREACH(f, &r->events.forks, entry)
		if (!atomic_load(&f->dead))
			n++;
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		uffd_fork_lost(r, ufd);
		return;
	}
	atomic_store(&r->events.sweep, 1);
	r->events.resweep = UFFD_RESWEEP;
	if (max > 0 && n >= max) {
		log_warnx("region %llu (pid %d): %d forked children at once, "
		    "[limits] forks allows %d", (unsigned long long)r->id,
		    (int)r->pid, n + 1, max);
		uffd_region_refused(r, "too many forked children ([limits] "
		    "forks)");
	}
	fl = fcntl(ufd, F_GETFL);
	if (fl == -1 || fcntl(ufd, F_SETFL, fl | O_NONBLOCK) == -1)
		log_warn("region %llu: child's uffd", (unsigned long long)r->id);
	fcntl(ufd, F_SETFD, FD_CLOEXEC);
	f->region = r;
	f->uffd = ufd;
	f->pidfd = -1;
	atomic_init(&f->addr, uffd_base(r, parent));
	atomic_init(&f->refs, 1);
	TAILQ_INSERT_TAIL(&r->events.forks, f, entry);
	log_info("region %llu: client forked; serving the child too",
	    (unsigned long long)r->id);
	hpzd_kick();
}

/*
 * One non-cooperative event (r->events.evlock held, in the order read).
 *
 * UFFD_EVENT_REMOVE (MADV_DONTNEED, MADV_REMOVE; MADV_FREE does not apply
 * to shared mappings) changes no page state.  The event does not say which
 * it was, and it comes before the kernel acts.  DONTNEED only drops the
 * page tables: the page stays in the file with what it held, and its next
 * fault is MINOR, resolved by its state as before (garbage cleared, data
 * mapped as it is).  REMOVE punches the page out of the file: its next
 * fault is MISSING and gets a page the kernel zeroes, whatever the state
 * says; a garbage page so punched is harmlessly cleared later by the scrub
 * or dropped at release.  Marking anything garbage here could write zeros
 * over data (DONTNEED keeps it), marking anything data could map garbage
 * uncleared: so nothing changes.
 */
static void
uffd_event(struct region *r, struct ufork *f, const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_REMOVE:
		log_debug("region %llu: %s dropped [0x%llx, 0x%llx)",
		    (unsigned long long)r->id, f ? "child" : "client",
		    (unsigned long long)m->arg.remove.start,
		    (unsigned long long)m->arg.remove.end);
		break;
	case UFFD_EVENT_UNMAP:
		uffd_unmapped(r, f, m->arg.remove.start, m->arg.remove.end);
		break;
	case UFFD_EVENT_REMAP:
		uffd_remapped(r, f, m->arg.remap.from, m->arg.remap.to,
		    m->arg.remap.len);
		break;
	case UFFD_EVENT_FORK:
		uffd_forked(r, f, (int)m->arg.fork.ufd);
		break;
	default:
		log_debug("region %llu: ignoring uffd event %u",
		    (unsigned long long)r->id, m->event);
		break;
	}
}

/*
 * Read one batch from a uffd of r (f: a child's; r->events.evlock held) and act
 * on it: its events first, in order, so that a fault read with a move
 * translates; then its faults, queued on self when a worker reads, else on
 * the worker routing picks.  Messages read, or -1 with errno.
 */
static int
uffd_batch(struct region *r, struct ufork *f, struct worker *self)
{
	struct uffd_msg	 msgs[UFFD_READ_BATCH];
	struct work	*w;
	ssize_t		 n;
	size_t		 i, count;
	uint64_t	 now, idx, base;
	int		 cpu, node;

	n = read(uffd_fd(r, f), msgs, sizeof(msgs));
	if (n == -1)
		return (-1);
	now = stats_now_ns();
	count = (size_t)n / sizeof(msgs[0]);
	for (i = 0; i < count; i++)
		if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
			uffd_event(r, f, &msgs[i]);
	base = uffd_base(r, f);
	for (i = 0; i < count; i++) {
		if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
			continue;
		/*
		 * Out of memory: the region goes; its release unregisters
		 * the range (or closes the child's uffd), waking the fault.
		 */
		if ((w = calloc(1, sizeof(*w))) == NULL) {
			uffd_region_refused(r, "out of memory for a fault");
			continue;
		}
		w->type = WORK_FAULT;
		w->run = uffd_fault_run;
		w->requeue = uffd_requeue;
		atomic_fetch_add(&stats.faults_inflight, 1);
		w->region = r;
		w->addr = msgs[i].arg.pagefault.address;
		w->kind = (msgs[i].arg.pagefault.flags &
		    UFFD_PAGEFAULT_FLAG_MINOR) ? FAULT_MINOR : FAULT_MISSING;
		w->tid = msgs[i].arg.pagefault.feat.ptid;
		w->t_read = now;
		w->mm = uffd_mm(r, f);
		w->owner = r->owner;
		if (f != NULL) {
			atomic_fetch_add(&f->refs, 1);
			w->fork = f;
			if (w->tid != 0)
				atomic_store(&f->tid, w->tid);
		}
		atomic_fetch_add(&r->inflight, 1);
		if (self != NULL) {
			atomic_fetch_add(&stats.faults_polled, 1);
			worker_push_polled(self, w);
			continue;
		}
		cpu = -1;
		if (worker_config.route == ROUTE_THREAD && f == NULL)
			cpu = uffd_thread_cpu(r->pid, w->tid);
		if (cpu < 0)
			cpu = sched_getcpu();
		node = r->node;
		if (w->kind == FAULT_MINOR && w->addr - base < r->len) {
			idx = (w->addr - base) / r->page_size;
			node = region_page_node(r, idx);
		}
		worker_submit(w, cpu, node, uffd_route_hash(w));
	}
	return ((int)count);
}

/*
 * Read the messages waiting in a region's uffd (one batch): events handled,
 * faults queued.  A spinning worker (self) skips a uffd another thread is
 * reading.  Returns how many messages were read.
 */
int
uffd_read(struct region *r, struct worker *self)
{
	int	n;

	if (self != NULL) {
		if (pthread_mutex_trylock(&r->events.evlock) != 0)
			return (0);
	} else
		pthread_mutex_lock(&r->events.evlock);
	n = uffd_batch(r, NULL, self);
	pthread_mutex_unlock(&r->events.evlock);
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return (0);
		if (self == NULL) {
			/* A broken uffd would wake us forever: let it go. */
			log_warn("region %llu: read uffd, no longer serving it",
			    (unsigned long long)r->id);
			event_del(r->ev);
			uffd_poll_stop(r);
		}
		return (0);
	}
	return (n);
}

static int
uffd_poll(void *arg, struct worker *self)
{
	return (uffd_read(arg, self));
}

/* Idle workers read r's uffd too (main thread). */
void
uffd_poll_start(struct region *r)
{
	r->polled = worker_poll_add(uffd_poll, r, r->uffd, r->node);
}

/* After this returns no worker reads r's uffd (main thread). */
void
uffd_poll_stop(struct region *r)
{
	if (!r->polled)
		return;
	worker_poll_remove(r);
	r->polled = 0;
}

/* The uffd is readable (main thread). */
void
uffd_read_cb(int fd, short events, void *arg)
{
	uffd_read(arg, NULL);
}

/* Whose uffd uffd_map maps on: a region or one of its children. */
struct uffd_mapper {
	struct region	*r;
	struct ufork	*f;
	struct worker	*self;
};

/*
 * Read what waits in a uffd of r, so that an ioctl refused with EAGAIN
 * (the client's mm is changing: an event is pending) may go through.
 * Returns how many messages were read.
 */
static int
uffd_pump(void *arg)
{
	struct uffd_mapper	*m = arg;
	struct region		*r = m->r;
	int			 i, n, total = 0;

	pthread_mutex_lock(&r->events.evlock);
	for (i = 0; i < UFFD_PUMP_BATCHES; i++) {
		if ((n = uffd_batch(r, m->f, m->self)) <= 0)
			break;
		total += n;
	}
	pthread_mutex_unlock(&r->events.evlock);
	return (total);
}

/* A map may wait on the client's mm: watched (worker.c). */
static void
uffd_map_watch(void *arg, int on)
{
	struct uffd_mapper	*m = arg;
	struct region		*r = m->r;

	if (on)
		worker_ioctl_enter(uffd_mm(r, m->f), r->id, (int)r->pid,
		    r->owner);
	else
		worker_ioctl_leave();
}

/*
 * UFFDIO_CONTINUE [addr, addr+len) on a uffd of r (uffdio_map).  EAGAIN
 * means an event is pending, or the thread that raised one has not run
 * since we read it: read and handle what is there (faults read with it
 * are queued), then try again; once nothing was there, wait for the uffd
 * one short poll, once.  Past that the mm is the client's to settle:
 * -EAGAIN, and the caller tries again later without holding anything, so
 * a client whose thread stops in the middle of an munmap parks its own
 * faults, not a worker.  tries counts the EAGAINs that made no progress.
 * 0, or a negative errno with *done pages mapped before the one refused.
 */
int
uffd_map(struct worker *self, struct region *r, struct ufork *f,
    uint64_t addr, uint64_t len, int tries, uint64_t *done)
{
	struct uffd_mapper		m = { r, f, self };
	struct uffdio_map_policy	p = {
		.tries = tries,
		.per_ioctl = 0,
		.partial_now = 1,
		.poll_ms = UFFD_SETTLE_POLL_MS,
		.poll_once = 1,
		.pump = uffd_pump,
		.watch = uffd_map_watch,
		.arg = &m,
	};

	return (uffdio_map(uffd_fd(r, f), addr, len, r->page_size, &p, done));
}

/*
 * Map a ready page ahead of the client (background): one more try after
 * the pending events are read, never a wait; EEXIST is returned.
 */
int
uffd_premap(struct region *r, uint64_t addr, uint64_t len, uint64_t *done)
{
	/* Not into a client whose mm held a thread of ours lately. */
	if (worker_mm_slow(uffd_mm(r, NULL))) {
		*done = 0;
		return (-EAGAIN);
	}
	return (uffd_map(NULL, r, NULL, addr, len, 2, done));
}

/* Wake the client's threads waiting on [addr, addr+len). */
int
uffd_wake(struct region *r, uint64_t addr, uint64_t len)
{
	return (uffdio_wake(r->uffd, addr, len));
}

/* The child behind f exited: let it go (main thread). */
static void
uffd_fork_exit_cb(int fd, short events, void *arg)
{
	struct ufork	*f = arg;

	atomic_store(&f->dead, 1);
	hpzd_kick();
}

/* A child's uffd is readable (main thread). */
static void
uffd_fork_read_cb(int fd, short events, void *arg)
{
	struct ufork	*f = arg;
	struct region	*r = f->region;
	int		 n;

	pthread_mutex_lock(&r->events.evlock);
	n = uffd_batch(r, f, NULL);
	pthread_mutex_unlock(&r->events.evlock);
	if (n == -1 && errno != EAGAIN && errno != EINTR) {
		log_warn("region %llu: read child's uffd",
		    (unsigned long long)r->id);
		atomic_store(&f->dead, 1);
		hpzd_kick();
	}
}

/* Stop watching a child: its events and its exit (main thread). */
static void
uffd_fork_unwatch(struct ufork *f)
{
	if (f->ev != NULL)
		event_free(f->ev);
	if (f->pidev != NULL)
		event_free(f->pidev);
	if (f->pidfd >= 0)
		close(f->pidfd);
	f->ev = f->pidev = NULL;
	f->pidfd = -1;
}

/* Let go of a child's uffd (main thread; f is off the list). */
static void
uffd_fork_release(struct ufork *f)
{
	uffd_fork_unwatch(f);
	uffd_fork_put(f);
}

/*
 * A child's uffd closed on its client's context: a close takes the
 * child's mmap_lock while its mm lives (userfaultfd_release), which the
 * client can hold.
 */
struct uffd_close {
	struct cctx_job	 job;
	struct ufork	*f;
};

static void
uffd_fork_close_work(struct cctx_job *j)
{
	struct uffd_close	*k = j->arg;

	uffd_fork_put(k->f);
}

static void
uffd_fork_close_done(struct cctx_job *j)
{
	struct cctx	*x = j->ctx;

	free(j->arg);
	cctx_put(x);
}

/* A dead child let go (main thread; f off the list): closed on r's context. */
static void
uffd_fork_release_ctx(struct region *r, struct ufork *f)
{
	struct uffd_close	*k;

	uffd_fork_unwatch(f);
	if (r->ctx == NULL || (k = calloc(1, sizeof(*k))) == NULL) {
		/* Its mm is gone: the close takes no lock of the client's. */
		uffd_fork_put(f);
		return;
	}
	k->f = f;
	cctx_hold(r->ctx);
	(void)cctx_submit(r->ctx, &k->job, uffd_fork_close_work,
	    uffd_fork_close_done, k, "close a forked child's uffd");
}

/*
 * Is the child behind a uffd gone?  An unregister of a page no mapping
 * of ours uses fails with ENOMEM once the child's mm has no user left
 * (mmget_not_zero), and asks nothing of a live one.  On r's context: on a
 * live child it takes its mmap_lock.
 */
#define UFFD_PROBE_ADDR	0x7fffffffe000ULL
/* The client's children watched at most, and new ones a sweep takes. */
#define UFFD_KIDS_MAX	256
#define UFFD_KIDS_NEW	16

static int
uffd_child_gone(int ufd)
{
	struct uffdio_range	range = { UFFD_PROBE_ADDR, 4096 };

	if (ioctl(ufd, UFFDIO_UNREGISTER, &range) == 0)
		return (0);
	return (errno == ENOMEM || errno == ESRCH);
}

struct uffd_sweep {
	struct cctx_job	  job;
	struct region	 *r;
	struct ufork	**f;
	int		  n;
	pid_t		  pid;		/* the client */
	pid_t		 *known;	/* children watched already */
	int		  nknown;
	pid_t		  kid[UFFD_KIDS_NEW];	/* new ones: pid, pidfd */
	int		  kidfd[UFFD_KIDS_NEW];
	int		  nkid;
	int		  alive;	/* children not found gone */
};

/*
 * The client's children not watched yet (its threads' children lists),
 * each with a pidfd: a fork event names no pid, so every child of the
 * client is watched, and any one's exit looks at them all again.
 */
static void
uffd_sweep_kids(struct uffd_sweep *k)
{
	char		 path[64], buf[4096], *p, *end;
	struct dirent	*e;
	DIR		*d;
	FILE		*fp;
	long		 v;
	int		 i, fd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)k->pid);
	if (k->pid <= 0 || (d = opendir(path)) == NULL)
		return;
	while ((e = readdir(d)) != NULL && k->nkid < UFFD_KIDS_NEW) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children",
		    (int)k->pid, e->d_name);
		if ((fp = fopen(path, "re")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), fp) == NULL)
			buf[0] = '\0';
		fclose(fp);
		for (p = buf; k->nkid < UFFD_KIDS_NEW; p = end) {
			v = strtol(p, &end, 10);
			if (end == p || v <= 0)
				break;
			for (i = 0; i < k->nknown; i++)
				if (k->known[i] == (pid_t)v)
					break;
			for (fd = 0; fd < k->nkid; fd++)
				if (k->kid[fd] == (pid_t)v)
					break;
			if (i < k->nknown || fd < k->nkid)
				continue;
			fd = (int)syscall(SYS_pidfd_open, (pid_t)v, 0);
			if (fd < 0)
				continue;
			k->kid[k->nkid] = (pid_t)v;
			k->kidfd[k->nkid++] = fd;
		}
	}
	closedir(d);
}

/* A watched child of the client exited: look at the children (main). */
static void
uffd_kid_exit_cb(int fd, short events, void *arg)
{
	struct uffd_kid	*kid = arg;

	(void)fd;
	(void)events;
	atomic_store(&kid->region->events.sweep, 1);
	hpzd_kick();
	/* Watched once (not persistent): its slot is free again. */
	event_free(kid->ev);
	kid->ev = NULL;
	close(kid->pidfd);
	kid->pidfd = -1;
	kid->pid = -1;
}

/* The time to look again has come (main thread). */
static void
uffd_later_cb(int fd, short events, void *arg)
{
	struct region	*r = arg;

	(void)fd;
	(void)events;
	atomic_store(&r->events.sweep, 1);
	hpzd_kick();
}

/*
 * A child lives that no exit watch covers (it was not in its parent's
 * list yet, or more children live than are watched), and the sweeps a
 * fork allows are spent: look again in UFFD_RESWEEP_MS, so that its uffd
 * goes soon after it does, without a fork or an exit to wake us.
 */
static void
uffd_sweep_later(struct region *r)
{
	struct timeval	tv = { 0, UFFD_RESWEEP_MS * 1000 };

	if (r->ending)
		return;
	if (r->events.later == NULL &&
	    (r->events.later = evtimer_new(hpzd_base, uffd_later_cb,
	    r)) == NULL)
		return;
	if (!evtimer_pending(r->events.later, NULL))
		evtimer_add(r->events.later, &tv);
}

/* Stop watching the client's children (main thread). */
static void
uffd_kids_unwatch(struct region *r)
{
	int	i;

	if (r->events.later != NULL)
		event_free(r->events.later);
	r->events.later = NULL;

	for (i = 0; i < r->events.nkids; i++) {
		if (r->events.kids[i].ev != NULL)
			event_free(r->events.kids[i].ev);
		if (r->events.kids[i].pidfd >= 0)
			close(r->events.kids[i].pidfd);
	}
	free(r->events.kids);
	r->events.kids = NULL;
	r->events.nkids = 0;
}

/* The new children's pidfds, watched (main thread). */
static void
uffd_kids_add(struct uffd_sweep *k)
{
	struct region	*r = k->r;
	struct uffd_kid	*kid;
	int		 i, j, max = atomic_load(&uffd_forks_max);

	if (max <= 0 || max > UFFD_KIDS_MAX)
		max = UFFD_KIDS_MAX;
	if (r->events.kids == NULL && k->nkid > 0 &&
	    (r->events.kids = calloc((size_t)max,
	    sizeof(*r->events.kids))) != NULL) {
		r->events.nkids = max;
		for (j = 0; j < max; j++) {
			r->events.kids[j].pid = -1;
			r->events.kids[j].pidfd = -1;
		}
	}
	for (i = 0; i < k->nkid; i++) {
		kid = NULL;
		for (j = 0; r->ending == 0 && j < r->events.nkids; j++)
			if (r->events.kids[j].pid == -1) {
				kid = &r->events.kids[j];
				break;
			}
		if (kid == NULL) {	/* every slot watched: a fork looks */
			close(k->kidfd[i]);
			continue;
		}
		if (kid->pidfd >= 0)
			close(kid->pidfd);
		if (kid->ev != NULL)
			event_free(kid->ev);
		kid->pid = k->kid[i];
		kid->pidfd = k->kidfd[i];
		kid->region = r;
		kid->ev = event_new(hpzd_base, kid->pidfd, EV_READ,
		    uffd_kid_exit_cb, kid);
		if (kid->ev == NULL || event_add(kid->ev, NULL) == -1) {
			if (kid->ev != NULL)
				event_free(kid->ev);
			kid->ev = NULL;
			close(kid->pidfd);
			kid->pidfd = -1;
			kid->pid = -1;
		}
	}
}

/* Look at each child of the region: mark the gone ones dead. */
static void
uffd_sweep_work(struct cctx_job *j)
{
	struct uffd_sweep	*k = j->arg;
	int			 i, any = 0;

	/*
	 * The children first: one that exits after this is watched, one
	 * that exited before is found gone below.
	 */
	uffd_sweep_kids(k);
	for (i = 0; i < k->n; i++) {
		if (uffd_child_gone(k->f[i]->uffd)) {
			atomic_store(&k->f[i]->dead, 1);
			any = 1;
		} else
			k->alive++;
		uffd_fork_put(k->f[i]);
	}
	if (any)
		hpzd_kick();
}

static void
uffd_sweep_done(struct cctx_job *j)
{
	struct uffd_sweep	*k = j->arg;
	int			 i, n;

	/* Refused (no thread): the children it held are let go here. */
	if (cctx_job_error(j) != 0)
		for (i = 0; i < k->n; i++)
			uffd_fork_put(k->f[i]);
	uffd_kids_add(k);
	/*
	 * More children alive than watched: a child not yet in its parent's
	 * list when we looked (its fork still returning).  Look again, a few
	 * times a fork (a grandchild is never in the list).
	 */
	for (i = n = 0; i < k->r->events.nkids; i++)
		if (k->r->events.kids[i].pid > 0)
			n++;
	if (k->alive > n && k->r->events.resweep > 0) {
		k->r->events.resweep--;
		atomic_store(&k->r->events.sweep, 1);
	} else if (k->alive > n)
		uffd_sweep_later(k->r);
	k->r->events.sweeping = 0;
	if (atomic_load(&k->r->events.sweep))
		hpzd_kick();
	cctx_put(j->ctx);
	free(k->known);
	free(k->f);
	free(k);
}

/*
 * A child came since the last look (main thread, evlock held): look for
 * the children gone on r's context.  A child is gone when its process
 * exits; the fork event names no pid (a fault names a thread): so each
 * new fork, each watched child's exit and each faulted child's exit looks
 * again, and no more than [limits] forks are ever held.
 */
static void
uffd_sweep(struct region *r)
{
	struct uffd_sweep	*k;
	struct ufork		*f;
	int			 i, n = 0;

	if (r->events.sweeping || r->ctx == NULL || atomic_load(&r->gone) ||
	    !atomic_exchange(&r->events.sweep, 0))
		return;
	TAILQ_FOREACH(f, &r->events.forks, entry)
		n++;
	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->f = calloc((size_t)n + 1, sizeof(*k->f))) == NULL) {
		free(k);
		atomic_store(&r->events.sweep, 1);
		return;
	}
	k->r = r;
	k->pid = r->pid;
	if (r->events.nkids > 0 && (k->known = calloc(
	    (size_t)r->events.nkids, sizeof(*k->known))) != NULL)
		for (i = 0; i < r->events.nkids; i++)
			if (r->events.kids[i].pid > 0)
				k->known[k->nknown++] = r->events.kids[i].pid;
	TAILQ_FOREACH(f, &r->events.forks, entry) {
		if (atomic_load(&f->dead))
			continue;
		atomic_fetch_add(&f->refs, 1);
		k->f[k->n++] = f;
	}
	r->events.sweeping = 1;
	cctx_hold(r->ctx);
	(void)cctx_submit(r->ctx, &k->job, uffd_sweep_work, uffd_sweep_done,
	    k, "look for a region's children gone");
}

/*
 * The loop's part of letting the children go (main thread): their events
 * and exit watches.  Their uffds stay open for uffd_forks_release.
 */
void
uffd_forks_unwatch(struct region *r)
{
	struct ufork	*f;

	pthread_mutex_lock(&r->events.evlock);
	TAILQ_FOREACH(f, &r->events.forks, entry)
		uffd_fork_unwatch(f);
	pthread_mutex_unlock(&r->events.evlock);
	uffd_kids_unwatch(r);
}

/*
 * A fork waits until its event is read, and the loop stopped reading the
 * region's uffd when it let the region go: with the range unregistered
 * (its garbage gone, no new event comes), read what is left, closing the
 * uffd of each child it hands us as the others are (the client's context).
 */
#define UFFD_DRAIN_MAX	64

static void
uffd_drain_forks(struct region *r)
{
	struct uffd_msg	msg[16];
	ssize_t		n;
	int		i, k;

	if (!r->events.unregistered || r->uffd < 0)
		return;
	for (k = 0; k < UFFD_DRAIN_MAX; k++) {
		pthread_mutex_lock(&r->events.evlock);
		n = read(r->uffd, msg, sizeof(msg));
		pthread_mutex_unlock(&r->events.evlock);
		if (n <= 0)
			break;
		for (i = 0; i < (int)(n / (ssize_t)sizeof(msg[0])); i++)
			if (msg[i].event == UFFD_EVENT_FORK)
				close((int)msg[i].arg.fork.ufd);
	}
}

/*
 * Close every child's uffd of a region being destroyed, after its garbage
 * is punched: the kernel then serves the children from the file.  After
 * uffd_forks_unwatch, any thread (the client's context).
 */
void
uffd_forks_release(struct region *r)
{
	struct ufork	*f;

	uffd_drain_forks(r);
	pthread_mutex_lock(&r->events.evlock);
	while ((f = TAILQ_FIRST(&r->events.forks)) != NULL) {
		TAILQ_REMOVE(&r->events.forks, f, entry);
		pthread_mutex_unlock(&r->events.evlock);
		uffd_fork_release(f);
		pthread_mutex_lock(&r->events.evlock);
	}
	while (r->events.nlost > 0)
		close(r->events.lost[--r->events.nlost]);
	pthread_mutex_unlock(&r->events.evlock);
}

/*
 * Out of memory to watch a child's exit: as if it had no pidfd, the child
 * is let go once its range is gone or its uffd fails.
 */
static void
uffd_fork_unwatched(struct region *r, struct ufork *f)
{
	log_warnx("region %llu: cannot watch a child's exit (out of memory): "
	    "it is let go with its range", (unsigned long long)r->id);
	if (f->pidev != NULL)
		event_free(f->pidev);
	f->pidev = NULL;
	close(f->pidfd);
	f->pidfd = -2;
}

/*
 * The main thread's part of a region's children (region_tend): watch the
 * uffds of new ones and the exit of each, let the dead ones go.
 */
void
uffd_tend(struct region *r)
{
	struct uforks	 dead = TAILQ_HEAD_INITIALIZER(dead);
	struct ufork	*f, *next;
	uint32_t	 tid;
	int		 pidfd;

	pthread_mutex_lock(&r->events.evlock);
	for (f = TAILQ_FIRST(&r->events.forks); f != NULL; f = next) {
		next = TAILQ_NEXT(f, entry);
		if (atomic_load(&f->dead)) {
			TAILQ_REMOVE(&r->events.forks, f, entry);
			TAILQ_INSERT_TAIL(&dead, f, entry);
			continue;
		}
		if (f->ev == NULL) {
			f->ev = event_new(hpzd_base, f->uffd,
			    EV_READ | EV_PERSIST, uffd_fork_read_cb, f);
			if (f->ev == NULL || event_add(f->ev, NULL) == -1)
				uffd_region_refused(r, "cannot watch its "
				    "forked child's uffd (out of memory)");
			else	/* Faults may have come before we watched. */
				event_active(f->ev, EV_READ, 0);
		}
		/*
		 * A fault told us a thread of the child, still alive (it is
		 * waiting for us): a single-threaded child's is its pid.
		 */
		tid = atomic_load(&f->tid);
		if (f->pidev == NULL && f->pidfd == -1 && tid != 0) {
			pidfd = (int)syscall(SYS_pidfd_open, (pid_t)tid, 0);
			f->pidfd = pidfd >= 0 ? pidfd : -2;
			if (pidfd >= 0) {
				f->pidev = event_new(hpzd_base, pidfd, EV_READ,
				    uffd_fork_exit_cb, f);
				if (f->pidev == NULL ||
				    event_add(f->pidev, NULL) == -1)
					uffd_fork_unwatched(r, f);
			}
		}
	}
	uffd_sweep(r);
	pthread_mutex_unlock(&r->events.evlock);
	while ((f = TAILQ_FIRST(&dead)) != NULL) {
		TAILQ_REMOVE(&dead, f, entry);
		log_info("region %llu: a child is gone",
		    (unsigned long long)r->id);
		if (f->pidfd == -2)
			f->pidfd = -1;
		uffd_fork_release_ctx(r, f);
	}
}

/* A new region's event-handling fields. */
void
uffd_region_init(struct region *r)
{
	pthread_mutex_init(&r->events.evlock, NULL);
	TAILQ_INIT(&r->events.forks);
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

	int			i, error = 0;

	/* Pieces moved away first: they are registered on this uffd too. */
	for (i = 0; i < r->events.nmoved; i++) {
		range.start = r->events.moved[i][0];
		range.len = r->events.moved[i][1];
		if (ioctl(r->uffd, UFFDIO_UNREGISTER, &range) == -1 &&
		    errno != ESRCH && errno != EINVAL && errno != ENOMEM)
			log_warn("region %llu: UFFDIO_UNREGISTER of a moved "
			    "piece", (unsigned long long)r->id);
	}
	range.start = region_addr(r);
	range.len = r->len;
	if (ioctl(r->uffd, UFFDIO_UNREGISTER, &range) == -1) {
		error = -errno;
		if (errno != ESRCH && errno != EINVAL && errno != ENOMEM)
			log_warn("region %llu: UFFDIO_UNREGISTER",
			    (unsigned long long)r->id);
	}
	r->events.unregistered = error == 0 || error == -ESRCH ||
	    error == -ENOMEM;
	return (error);
}

/*
 * The page state said BUSY where no thread of ours holds the page: the
 * client wrote it (only a server may set BUSY, and a dead server's bits
 * were resolved when we adopted the state).  It is ignored, the page
 * served as its state says; said once a while per region, not per page.
 */
void
uffd_tampered(struct region *r, int n)
{
	uint64_t	now = stats_now_ns(), last;

	(void)n;
	last = atomic_load(&r->tamper_log_ns);
	if (last != 0 && now - last < UFFD_TAMPER_LOG_NS)
		return;
	if (!atomic_compare_exchange_strong(&r->tamper_log_ns, &last, now))
		return;
	log_warnx("region %llu (pid %d): its page state says busy where no "
	    "thread of ours holds the page (%llu times so far): the client "
	    "wrote it; ignored, pages served as their state says",
	    (unsigned long long)r->id, (int)r->pid,
	    (unsigned long long)atomic_load(&r->rt.tampered));
}
