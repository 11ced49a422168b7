/*
 * intercept.c - a range's faults come to us only while it holds garbage.
 *
 * A fresh page gains nothing from us (the kernel zeroes it anyway), and a
 * page the file holds gains nothing either: a round trip costs more than
 * the kernel's own page-cache hit.  So a region is registered on its uffd
 * for faults (MISSING | MINOR) only from the moment garbage is declared
 * (a reset, a discard) until none is left; in between it is registered
 * for write-protection alone, which traps no fault (we write-protect
 * nothing) but keeps the non-cooperative events coming (remove, unmap,
 * remap, fork), so moves are still followed and the kernel serves every
 * fault at its own speed.  The kernel keeps the registration while the
 * client holds its uffd, so the rule holds across our crash: garbage
 * means intercepted.
 *
 * Every switch runs on the main thread, where resets run, so a reset can
 * never slip between our look at the garbage count and the switch: a
 * reset turns interception on before it marks a page garbage, and the
 * switch off looks for no garbage, no reset queued and no page a reset
 * waits for.  Threads that see the last garbage page go kick the loop.
 *
 * Stepping aside: where the daemon cannot keep up (cost.c says no core is
 * left for it), a worker at a garbage fault drops the region's garbage
 * from the file (punch: the pages are holes, which read zero, and the
 * kernel zeroes each on its fault, on the client's thread, with no round
 * trip) and the loop then stops intercepting.  Pages are held while
 * punched and marked kept only after, with the range still intercepted,
 * so no fault meets a page half dropped and a crash leaves garbage.
 *
 * Only on shmem.  A punch on hugetlbfs also drops the file's reservation
 * of the range (hugetlb_unreserve_pages): the freed pages go back to the
 * host, anyone may take them, and the client's next touch of its own page
 * gets SIGBUS.  No call puts a reservation back atomically (a new mmap of
 * the range reserves again, but after the pages were free for anyone), so
 * a hugetlbfs region's garbage is always ours to clear.  On shmem a hole
 * is what a punch makes it, with nothing reserved to lose: the client's
 * fault allocates a page as any of its first touches would.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>

#include <fcntl.h>

#include "hpz.h"
#include "resolve.h"
#include "uffdio.h"

#include "cctx.h"
#include "conf.h"
#include "cost.h"
#include "globals.h"
#include "intercept.h"
#include "log.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "uffd.h"
#include "worker.h"

/* Pages a step aside drops in one punch at most. */
#define INTERCEPT_DROP_RUN	4096

static int	intercept_policy = INTERCEPT_AUTO;
static int	intercept_aside_policy = ASIDE_AUTO;

/* A region's faults are ours again after a SIGHUP (its context did it). */
static void
intercept_configured(struct region *r, int error, void *arg)
{
	(void)r;
	(void)error;	/* intercept_arm_done said it */
	(void)arg;
}

/* [policy] in hpzerod.conf (main thread; SIGHUP too). */
void
intercept_configure(const struct conf *c)
{
	intercept_policy = c->intercept;
	intercept_aside_policy = c->step_aside;
}

/*
 * A region under the policy just configured (main thread, for each).
 * intercept = always: its faults come back to us, registered on its
 * client's context (UFFDIO_REGISTER takes the client's mmap_lock).
 */
void
intercept_reconfigure(struct region *r)
{
	if (intercept_policy != INTERCEPT_ALWAYS)
		intercept_check(r);
	else if (r->started && !r->arming && !r->ending)
		(void)intercept_arm(r, intercept_configured, NULL);
}

/* The policies in force: INTERCEPT_*, ASIDE_*. */
void
intercept_policies(int *intercept, int *aside)
{
	*intercept = intercept_policy;
	*aside = intercept_aside_policy;
}

const char *
intercept_policy_name(int which)
{
	if (which == 0)
		return (intercept_policy == INTERCEPT_ALWAYS ? "always" :
		    "auto");
	switch (intercept_aside_policy) {
	case ASIDE_NEVER:
		return ("never");
	case ASIDE_ALWAYS:
		return ("always");
	}
	return ("auto");
}

/* A new region: libhpz registered it for faults. */
void
intercept_init(struct region *r)
{
	atomic_init(&r->intercepting, 1);
	atomic_init(&r->aside, ASIDE_NONE);
}

/* Children's copies of the range follow the parent's (evlock held). */
static void
intercept_children(struct region *r)
{
	struct ufork	*f;
	int		 error;

	TAILQ_FOREACH(f, &r->events.forks, entry) {
		if (atomic_load(&f->dead))
			continue;
		error = uffdio_register(f->uffd, atomic_load(&f->addr),
		    r->len, 1, NULL);
		if (error != 0 && error != -ESRCH && error != -ENOMEM &&
		    error != -EINVAL)
			log_warnx("region %llu: a child's range: "
			    "UFFDIO_REGISTER: %s", (unsigned long long)r->id,
			    strerror(-error));
	}
}

/*
 * Faults to us from now on (main thread), before garbage is declared.  0,
 * or a negative errno: then nothing may be declared garbage.
 */
int
intercept_on(struct region *r)
{
	int	error;

	/* A new epoch of garbage: the step-aside question is asked again. */
	atomic_store(&r->aside, ASIDE_NONE);
	if (atomic_load(&r->intercepting))
		return (0);
	if ((error = uffdio_register(r->uffd, region_addr(r), r->len,
	    1, NULL)) != 0) {
		log_warnx("region %llu: cannot intercept its faults again: "
		    "UFFDIO_REGISTER: %s", (unsigned long long)r->id,
		    strerror(-error));
		return (error);
	}
	pthread_mutex_lock(&r->events.evlock);
	intercept_children(r);
	pthread_mutex_unlock(&r->events.evlock);
	atomic_store(&r->intercepting, 1);
	atomic_fetch_add(&stats.intercept_on, 1);
	return (0);
}

/* May the region leave its faults to the kernel now?  (Main thread.) */
static int
intercept_may_idle(struct region *r)
{
	if (!atomic_load(&r->intercepting) || r->idle_refused ||
	    !r->started || atomic_load(&r->gone) || atomic_load(&r->dying) ||
	    r->ending)
		return (0);
	/* Read-ahead on faults needs the faults. */
	if (intercept_policy == INTERCEPT_ALWAYS ||
	    (r->flags & HPZ_AHEAD_ONFAULT))
		return (0);
	return (resolve_garbage(&r->rt) == 0 && TAILQ_EMPTY(&r->resets) &&
	    resolve_resets_pending(&r->rt) == 0);
}

/*
 * The switches of a region's registration, on its client's context:
 * UFFDIO_REGISTER takes the client's mmap_lock, which the client can hold
 * for seconds (a populate over a large range) or without end (a fault on
 * a FUSE mapping whose server does not answer).
 */
static void intercept_switched(struct region *, int);

static void
intercept_off_work(struct cctx_job *j)
{
	struct region	*r = j->arg;

	r->switch_error = uffdio_register(r->uffd, region_addr(r), r->len,
	    0, NULL);
	if (r->switch_error == 0)
		(void)uffd_wake(r, region_addr(r), r->len);
}

static void
intercept_off_done(struct cctx_job *j)
{
	struct region	*r = j->arg;
	int		 error = r->switch_error;
	void		(*cb)(struct region *) = r->switched_cb;

	r->switching = 0;
	r->switched_cb = NULL;
	intercept_switched(r, error);
	if (cb != NULL)
		cb(r);
}

static void
intercept_switched(struct region *r, int error)
{
	if (error != 0) {
		/* An older kernel: no uffd-wp on shared memory.  Stay. */
		if (error != -ESRCH && error != -ENOMEM)
			log_info("region %llu: cannot leave its faults to the "
			    "kernel (UFFDIO_REGISTER write-protect: %s): "
			    "they stay ours", (unsigned long long)r->id,
			    strerror(-error));
		r->idle_refused = 1;
		return;
	}
	atomic_store(&r->intercepting, 0);
	atomic_fetch_add(&stats.intercept_off, 1);
}

/*
 * No garbage left: leave the range's faults to the kernel (main thread;
 * the switch itself on the client's context).  Threads blocked on faults
 * we have not answered are woken: they fault again, to the kernel; what
 * we still hold of them is served as the page state says (never a clear:
 * nothing is garbage) or woken.
 */
void
intercept_check(struct region *r)
{
	if (!intercept_may_idle(r) || r->switching || r->arming)
		return;
	r->switching = 1;
	(void)cctx_submit(r->ctx, &r->ctx_switch, intercept_off_work,
	    intercept_off_done, r, "UFFDIO_REGISTER (faults to the kernel) "
	    "on its memory map");
}

static void
intercept_arm_work(struct cctx_job *j)
{
	struct region	*r = j->arg;

	r->arm_error = uffdio_register(r->uffd, region_addr(r), r->len, 1,
	    NULL);
	if (r->arm_error == 0) {
		pthread_mutex_lock(&r->events.evlock);
		intercept_children(r);
		pthread_mutex_unlock(&r->events.evlock);
	}
}

static void
intercept_arm_done(struct cctx_job *j)
{
	struct region	*r = j->arg;
	int		 error = r->arm_error;

	r->arming = 0;
	if (r->ending)
		error = -ECANCELED;
	else if (error != 0)
		log_warnx("region %llu: cannot intercept its faults again: "
		    "UFFDIO_REGISTER: %s", (unsigned long long)r->id,
		    strerror(-error));
	else {
		atomic_store(&r->intercepting, 1);
		atomic_fetch_add(&stats.intercept_on, 1);
	}
	r->arm_cb(r, error, r->arm_arg);
}

/*
 * Make sure the region's faults are ours before garbage is declared
 * (main thread): 0 if they are (nothing called), or 1: cb(r, error, arg)
 * is called from the loop once the registration is made on the client's
 * context (after a switch away still in flight), error 0 or negative
 * (-ECANCELED: the region went meanwhile).  One at a time a region.
 */
int
intercept_arm(struct region *r, void (*cb)(struct region *, int, void *),
    void *arg)
{
	if (atomic_load(&r->intercepting) && !r->switching)
		return (0);
	r->arming = 1;
	r->arm_cb = cb;
	r->arm_arg = arg;
	(void)cctx_submit(r->ctx, &r->ctx_arm, intercept_arm_work,
	    intercept_arm_done, r, "UFFDIO_REGISTER (faults to hpzerod) on "
	    "its memory map");
	return (1);
}

/* Punch pages [first, first+n) of the region's file (resolve_drop). */
static int
intercept_punch(void *arg, uint64_t first, uint64_t n)
{
	struct region	*r = arg;

	if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)(r->offset + first * r->page_size),
	    (off_t)(n * r->page_size)) == -1)
		return (-errno);
	return (0);
}

/*
 * Should the daemon keep serving this region's garbage faults?  What the
 * step_aside setting says, else what the costs and the machine say.
 */
static int
intercept_keep(struct region *r)
{
	if (intercept_aside_policy == ASIDE_NEVER ||
	    intercept_policy == INTERCEPT_ALWAYS ||
	    (r->flags & HPZ_AHEAD_ONFAULT) || r->idle_refused)
		return (1);
	/* A punch would give the client's reserved pages to anyone. */
	if (r->fs_magic == HUGETLBFS_MAGIC)
		return (1);
	if (intercept_aside_policy == ASIDE_AUTO &&
	    cost_keep_region(r, scrub_region_enabled(r)))
		return (1);
	return (0);
}

/*
 * A fault on a garbage page (a worker): step aside if we cannot keep up.
 * The decision is made here; the punches are not: a punch takes the
 * file's inode lock, which its client can hold without end (a write into
 * the file from a buffer it never lets fault in), and a worker is every
 * client's.  The loop queues them on the client's context
 * (intercept_aside_start); this fault, and those that come meanwhile, are
 * served as before.
 */
void
intercept_fault(struct region *r)
{
	int	expect;

	if (atomic_load(&r->aside) != ASIDE_NONE ||
	    !atomic_load(&r->intercepting) || intercept_keep(r))
		return;
	expect = ASIDE_NONE;
	if (!atomic_compare_exchange_strong(&r->aside, &expect,
	    ASIDE_WANTED))
		return;
	hpzd_kick();
}

/*
 * The region's garbage nobody holds is dropped, on its client's context;
 * what others hold is theirs to finish.  Faults that waited for pages the
 * drop held go back to the workers at once: region_drain counts them.
 */
static void
intercept_aside_work(struct cctx_job *j)
{
	struct resolve_waiters	 woken = TAILQ_HEAD_INITIALIZER(woken);
	struct resolve_waiter	*pw;
	struct region		*r = j->arg;
	struct work		*w;
	uint64_t		 dropped, held = 0, before;
	int			 resets_done = 0, error;

	before = resolve_garbage(&r->rt);
	error = resolve_drop(&r->rt, 0, r->npages, INTERCEPT_DROP_RUN,
	    intercept_punch, r, &woken, &resets_done, &dropped, &held);
	while ((pw = TAILQ_FIRST(&woken)) != NULL) {
		TAILQ_REMOVE(&woken, pw, entry);
		w = worker_parked(pw);
		uffd_requeue(w);
	}
	atomic_fetch_add(&stats.steps_aside, 1);
	atomic_fetch_add(&stats.pages_aside, dropped);
	atomic_fetch_add(&stats.pages_punched, dropped);
	log_debug("region %llu: stepped aside: %llu of %llu garbage pages "
	    "dropped for the kernel to zero on their faults (%llu held)%s",
	    (unsigned long long)r->id, (unsigned long long)dropped,
	    (unsigned long long)before, (unsigned long long)held,
	    error != 0 ? ": the file refused a punch" : "");
	if (error != 0) {
		/* Sealed against writes, say: our clears it is, this time. */
		atomic_store(&r->aside, ASIDE_REFUSED);
		scrub_add(r, 0);
	} else if (resolve_garbage(&r->rt) != 0) {
		/* Held pages left: the scrub finishes what they leave. */
		atomic_store(&r->aside, ASIDE_NONE);
		scrub_add(r, 0);
	}
	/* A reset that waited for the pages the drop held: the loop answers. */
	(void)resets_done;
	hpzd_kick();
}

static void
intercept_aside_done(struct cctx_job *j)
{
	struct region	*r = j->arg;

	r->aside_queued = 0;
	/* A new epoch of garbage may have asked again meanwhile. */
	intercept_aside_start(r);
}

/* A worker decided the region steps aside: its punches (main thread). */
void
intercept_aside_start(struct region *r)
{
	int	expect = ASIDE_WANTED;

	if (r->aside_queued || r->ending || atomic_load(&r->gone) ||
	    !atomic_compare_exchange_strong(&r->aside, &expect,
	    ASIDE_DROPPING))
		return;
	r->aside_queued = 1;
	(void)cctx_submit(r->ctx, &r->ctx_aside, intercept_aside_work,
	    intercept_aside_done, r, "a punch of its garbage (a step "
	    "aside)");
}
