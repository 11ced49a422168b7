/*
 * region.c - a registered region's life on the main thread: probe (on the
 * client's context), attach, start, our mapping of the backing file, its
 * page state, reset, teardown, and the tending pass that a kick from any
 * thread asks for.  Validation is region-check.c's; what the page path
 * reads of a region, region-page.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>

#include <event2/event.h>

#include "hpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffd-compat.h"

#include "cctx.h"
#include "fault.h"
#include "fdstore.h"
#include "globals.h"
#include "intercept.h"
#include "keep.h"
#include "log.h"
#include "pool-fill.h"
#include "prep.h"
#include "region-check.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "topo.h"
#include "uffd.h"
#include "worker.h"

struct regions	 region_all = TAILQ_HEAD_INITIALIZER(region_all);
static uint64_t	 region_next_id = 1;
/* Told of a region the tending pass let go (control-socket.c registers it). */
static void	(*region_released)(struct client *);

/* A reset being marked, or whose reply waits for pages our threads hold. */
struct region_reset {
	TAILQ_ENTRY(region_reset) entry;
	uint64_t		 next;		/* first page still to mark */
	uint64_t		 end;
	void			(*done)(void *, int);
	void			*arg;
};

/*
 * Take a region's page state: map the memfd, take the server lock, and
 * either start it (a fresh, all-zero memfd) or adopt it (one a daemon
 * already served: after a crash or restart).  Nothing here costs more for
 * more pages: what does (the garbage fill of HPZ_DISCARD, resolving what a
 * dead server left busy) is left in r->prep_kind for prep.c, and a fresh
 * state gets its magic only once that is done (region_start).
 */
static int
region_take_state(struct region *r, int sfd, const struct hpz_msg_register *m,
    char *why, size_t whylen)
{
	struct hpz_state_header	*h;
	struct stat		 st;
	off_t			 data;
	uint64_t		 i;
	int			 lockfd;

	if (fstat(sfd, &st) == -1)
		return (region_fail(why, whylen, -EINVAL,
		    "cannot stat the state fd: %s", strerror(errno)));
	r->sdev = st.st_dev;
	r->sino = st.st_ino;
	r->smaplen = HPZ_STATE_SIZE(r->npages);
	r->smap = mmap(NULL, r->smaplen, PROT_READ | PROT_WRITE, MAP_SHARED,
	    sfd, 0);
	if (r->smap == MAP_FAILED)
		return (region_fail(why, whylen, -ENOMEM,
		    "cannot map the state memfd: %s", strerror(errno)));
	/*
	 * Never wait for the lock: whoever holds it (a live server, or the
	 * client itself through an open file description of its own) would
	 * hold the event loop with it.
	 */
	lockfd = state_lock_server(sfd, 0);
	if (lockfd < 0)
		return (region_fail(why, whylen, lockfd == -EAGAIN ? -EBUSY :
		    lockfd, "cannot take the state memfd's server lock: %s",
		    lockfd == -EAGAIN ? "it is held elsewhere (another server, "
		    "or a lock on its byte 0 through another open file "
		    "description); refused without waiting" :
		    strerror(-lockfd)));
	r->lockfd = lockfd;
	h = r->smap;
	r->state = (_Atomic uint8_t *)((char *)r->smap + HPZ_STATE_PAGES_OFF);
	if (h->magic == 0) {
		for (i = 0; i < sizeof(*h); i++)
			if (((unsigned char *)h)[i] != 0)
				break;
		if (i != sizeof(*h))
			return (region_fail(why, whylen, -EINVAL,
			    "the state memfd is neither empty nor a page state"));
		/*
		 * All zero means all holes past the header: reading the bytes
		 * would cost a page each, allocated in our name.
		 */
		data = lseek(sfd, HPZ_STATE_PAGES_OFF, SEEK_DATA);
		if (data != -1 || errno != ENXIO)
			return (region_fail(why, whylen, -EINVAL,
			    "a new state memfd must be all zero: it holds data "
			    "at byte %lld (only holes past the header)",
			    (long long)data));
		r->fresh = 1;
		r->prep_kind = (m->flags & HPZ_DISCARD) ? PREP_FILL :
		    PREP_NONE;
		h->version = HPZ_STATE_VERSION;
		h->page_size = r->page_size;
		h->npages = r->npages;
		h->offset = r->offset;
	} else {
		if (h->magic != HPZ_STATE_MAGIC ||
		    h->version != HPZ_STATE_VERSION)
			return (region_fail(why, whylen, -EINVAL,
			    "the state memfd has an unknown format"));
		if (h->page_size != r->page_size || h->npages != r->npages ||
		    h->offset != r->offset)
			return (region_fail(why, whylen, -EINVAL,
			    "the state memfd describes another range"));
		r->adopted = 1;
		r->prep_kind = PREP_ADOPT;
	}
	h->addr = region_addr(r);
	h->len = r->len;
	h->flags = r->flags;
	h->uffd_features = r->features;
	h->uffd_ioctls = m->uffd_ioctls;
	h->generation++;
	h->server_pid = (int32_t)getpid();
	return (0);
}

/* Let go of the state memfd: unmap, drop the server lock, close. */
static void
region_release_state(struct region *r)
{
	if (r->smap != NULL && r->smap != MAP_FAILED)
		munmap(r->smap, r->smaplen);
	r->smap = NULL;
	r->state = NULL;
	if (r->lockfd >= 0)
		close(r->lockfd);
	r->lockfd = -1;
}

/*
 * Validate a register request, take the page state, map the file: every
 * call here is on what the client passed (fstat/fstatfs of its files, its
 * /proc maps, lseek on its memfd, which can wait on locks the client
 * holds), so it runs on the client's context (control.c), never on the
 * loop.  Nothing here reads or changes what the loop owns (the lists, the
 * ids, events).  On success *out is a region that owns uffd, fd and sfd,
 * on no list yet (region_attach); on failure nothing is kept and the
 * caller still owns the fds.  pid: the client's, 0 for none known.
 */
int
region_probe(pid_t pid, const struct hpz_msg_register *m, int uffd, int fd,
    int sfd, struct region **out, char *why, size_t whylen)
{
	struct backing	 b;
	struct region	*r;
	uint64_t	 need, npages;
	int		 error, fl;

	*out = NULL;
	if ((error = region_check_uffd(uffd, why, whylen)) != 0)
		return (error);
	if ((error = region_check_backing(fd, &b, why, whylen)) != 0)
		return (error);
	if ((error = region_check_range(m->addr, m->len, m->offset,
	    m->page_size, &b, why, whylen)) != 0)
		return (error);
	npages = m->len / b.page_size;
	if ((error = region_check_pages(npages, b.page_size, why,
	    whylen)) != 0)
		return (error);
	if ((error = region_check_state(sfd, npages, why, whylen)) != 0)
		return (error);
	/* The range must be the client's own shared mapping of that file. */
	if (pid > 0 && (error = region_check_mapping(pid, m->addr,
	    m->len, b.dev, b.ino, m->offset, why, whylen)) != 0)
		return (error);
	need = b.fs_magic == HUGETLBFS_MAGIC ?
	    UFFD_FEATURE_MINOR_HUGETLBFS : UFFD_FEATURE_MINOR_SHMEM;
	if ((m->uffd_features & need) == 0)
		return (region_fail(why, whylen, -ENOTSUP,
		    "the uffd lacks minor-fault support for this backing"));
	if ((m->uffd_ioctls & (1ULL << _UFFDIO_CONTINUE)) == 0 ||
	    (m->uffd_ioctls & (1ULL << _UFFDIO_WAKE)) == 0)
		return (region_fail(why, whylen, -ENOTSUP,
		    "the registered range does not offer UFFDIO_CONTINUE"));

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return (region_fail(why, whylen, -ENOMEM, "out of memory"));
	r->uffd = r->fd = r->sfd = r->lockfd = r->pidfd = -1;
	r->map = MAP_FAILED;
	region_set_addr(r, m->addr);
	r->len = m->len;
	r->offset = m->offset;
	r->page_size = b.page_size;
	r->npages = npages;
	r->flags = m->flags;
	r->features = m->uffd_features;
	r->fs_magic = b.fs_magic;
	r->dev = b.dev;
	r->ino = b.ino;
	r->pid = pid;
	r->owner = UINT32_MAX;
	r->node = topo.nnodes > 1 ? region_client_node(pid, m->addr) : -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	region_tend_init();
	uffd_region_init(r);
	intercept_init(r);

	if ((error = region_take_state(r, sfd, m, why, whylen)) != 0)
		goto fail;
	region_resolve_init(r);

	/* No reservation of our own: the client's mapping holds it. */
	r->map = mmap(NULL, r->len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, fd, (off_t)r->offset);
	if (r->map == MAP_FAILED) {
		error = region_fail(why, whylen, -ENOMEM,
		    "cannot map the backing file: %s", strerror(errno));
		goto fail;
	}
	madvise(r->map, r->len, MADV_DONTFORK);

	fl = fcntl(uffd, F_GETFL);
	if (fl == -1 || fcntl(uffd, F_SETFL, fl | O_NONBLOCK) == -1) {
		error = region_fail(why, whylen, -EINVAL,
		    "cannot make the uffd non-blocking: %s", strerror(errno));
		goto fail;
	}
	r->uffd = uffd;
	r->fd = fd;
	r->sfd = sfd;
	r->priority = HPZ_PRIO_DEFAULT;
	*out = r;
	return (0);

fail:
	region_free_probed(r);
	return (error);
}

/*
 * Let go of a probed region that was never attached (any thread): our
 * mappings and the server lock; the fds are the caller's again.
 */
void
region_free_probed(struct region *r)
{
	if (r->map != MAP_FAILED)
		munmap(r->map, r->len);
	region_release_state(r);
	if (r->rt.npages != 0)
		resolve_table_destroy(&r->rt);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->events.evlock);
	free(r);
}

/*
 * Put a probed region on c's lists (main thread): what only the loop can
 * check (the connection's count, overlaps with every other region), the
 * uffd watched, an id.  0, or a negative errno with why: r is untouched
 * and still the caller's.
 */
int
region_attach(struct client *c, struct region *r, char *why, size_t whylen)
{
	struct region	*other;

	if (c->nregions >= HPZD_REGIONS_PER_CLIENT)
		return (region_fail(why, whylen, -EDQUOT,
		    "this connection already has %d regions, the most one "
		    "may have", HPZD_REGIONS_PER_CLIENT));
	other = region_conflict(&region_all, c, region_addr(r), r->len,
	    r->dev, r->ino, r->offset);
	if (other != NULL)
		return (region_fail(why, whylen, -EBUSY,
		    "overlaps registered region %llu",
		    (unsigned long long)other->id));
	r->ev = event_new(hpzd_base, r->uffd, EV_READ | EV_PERSIST,
	    uffd_read_cb, r);
	if (r->ev == NULL)
		return (region_fail(why, whylen, -ENOMEM,
		    "cannot watch the uffd"));
	r->client = c;
	r->pid = c->pid;
	r->owner = (uint32_t)c->uid;
	if (c->ctx != NULL) {
		cctx_hold(c->ctx);
		r->ctx = c->ctx;
	}
	r->id = region_next_id++;
	r->attached = 1;
	TAILQ_INSERT_TAIL(&c->regions, r, entry);
	TAILQ_INSERT_TAIL(&region_all, r, all);
	c->nregions++;
	c->bytes += r->len;
	c->state_bytes += HPZ_STATE_SIZE(r->npages);
	return (0);
}

/*
 * Probe and attach at once, on the calling thread: for regions taken
 * back from the fd store at start, before anything is served.
 */
int
region_create(struct client *c, const struct hpz_msg_register *m, int uffd,
    int fd, int sfd, struct region **out, char *why, size_t whylen)
{
	struct region	*r;
	int		 error;

	if ((error = region_probe(c->pid, m, uffd, fd, sfd, &r, why,
	    whylen)) != 0)
		return (error);
	if ((error = region_attach(c, r, why, whylen)) != 0) {
		region_free_probed(r);
		return (error);
	}
	/* Its owner's address space: counted, never refused (it is ours). */
	cctx_mapped_add(r->ctx, (int64_t)r->len);
	*out = r;
	return (0);
}

/*
 * Serve a region region_create() made, once prep.c has done what was
 * left: a fresh state gets its magic (from now on it is a page state to
 * adopt), the uffd is read, and threads a dead server left waiting are
 * woken.  0, or -1 if the uffd cannot be watched (the caller destroys it).
 */
int
region_start(struct region *r)
{
	struct hpz_state_header	*h = r->smap;

	if (r->fresh) {
		atomic_thread_fence(memory_order_release);
		h->magic = HPZ_STATE_MAGIC;
		r->fresh = 0;
	}
	if (event_add(r->ev, NULL) == -1)
		return (-1);
	/* Nothing is served yet: no one else counts garbage. */
	atomic_store(&r->rt.garbage, (int_fast64_t)r->garbage_found);
	r->started = 1;
	/*
	 * Garbage: its faults must be ours, whatever mode a dead server left
	 * the range in (the fd store keeps the uffd, and its registration).
	 * None: the kernel serves them (intercept.c).
	 */
	if (r->garbage_found > 0) {
		/* Armed on its context already (control_region_ready). */
		if (intercept_on(r) != 0)
			return (-1);
	} else
		intercept_check(r);
	uffd_poll_start(r);
	/*
	 * A fault whose message a dead server read is still waiting: wake
	 * every thread of the range, so it faults again and reaches us.
	 */
	if (r->adopted)
		uffd_wake(r, region_addr(r), r->len);
	if ((r->flags & HPZ_AHEAD_EAGER) || r->garbage_found > 0)
		scrub_add(r, 0);
	return (0);
}

/*
 * The region whose page state lives in the file of device dev, inode ino
 * (the fstat of what a client passed is made on its context), or NULL.
 */
struct region *
region_find_state_id(dev_t dev, ino_t ino)
{
	struct region	*r;

	TAILQ_FOREACH(r, &region_all, all)
		if (r->sdev == dev && r->sino == ino)
			return (r);
	return (NULL);
}

/* Give a region taken back from the fd store the id it had. */
void
region_set_id(struct region *r, uint64_t id)
{
	r->id = id;
}

/* Ids up to max are taken (by regions in the fd store). */
void
region_reserve_ids(uint64_t max)
{
	if (region_next_id <= max)
		region_next_id = max + 1;
}

/* Hand a region to another client (a client back after our restart). */
void
region_move(struct region *r, struct client *to)
{
	struct client	*from = r->client;

	TAILQ_REMOVE(&from->regions, r, entry);
	from->nregions--;
	from->bytes -= r->len;
	from->state_bytes -= HPZ_STATE_SIZE(r->npages);
	r->client = to;
	r->pid = to->pid;
	r->owner = (uint32_t)to->uid;
	TAILQ_INSERT_TAIL(&to->regions, r, entry);
	to->nregions++;
	to->bytes += r->len;
	to->state_bytes += HPZ_STATE_SIZE(r->npages);
}

/*
 * The region's private record of held pages and its count of garbage
 * pages (resolve.c), once the page state is taken.  The count starts at
 * zero: prep.c fills or counts the state off the loop (r->garbage_found),
 * and region_start() sets it before anything is served.
 */
void
region_resolve_init(struct region *r)
{
	resolve_table_init(&r->rt, r->state, r->npages, 0);
	TAILQ_INIT(&r->resets);
}

/*
 * A drain looks again this often (ns) for work parked or deferred
 * meanwhile: short, since the event loop waits with it.  One that took
 * REGION_DRAIN_WARN_MS or more is said in the log.
 */
#define REGION_DRAIN_POLL_NS	10000000L
#define REGION_DRAIN_WARN_MS	100

/*
 * Block until every work item of the region has finished.  What is parked
 * (a page held, the region going) or deferred (the client's mm changing)
 * is let go instead of waited for: nothing a client does keeps us here.
 * What runs is bounded (a clear, an allocation, a map that does not wait).
 */
static void
region_drain(struct region *r)
{
	struct resolve_waiters	 parked = TAILQ_HEAD_INITIALIZER(parked);
	struct workq		 deferred = TAILQ_HEAD_INITIALIZER(deferred);
	struct resolve_waiter	*pw;
	struct work		*w;
	struct timespec		 ts;
	uint64_t		 t0 = stats_now_ns(), waited;

	for (;;) {
		resolve_cancel_waiters(&r->rt, &parked);
		worker_cancel(r, &deferred);
		while ((pw = TAILQ_FIRST(&parked)) != NULL) {
			TAILQ_REMOVE(&parked, pw, entry);
			fault_work_cancel(worker_parked(pw));
		}
		while ((w = TAILQ_FIRST(&deferred)) != NULL) {
			TAILQ_REMOVE(&deferred, w, entry);
			fault_work_cancel(w);
		}
		pthread_mutex_lock(&r->lock);
		if (atomic_load(&r->inflight) == 0) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		/* Again soon: a holder may park or defer more meanwhile. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += REGION_DRAIN_POLL_NS;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
		pthread_mutex_unlock(&r->lock);
	}
	if ((waited = (stats_now_ns() - t0) / 1000000) >=
	    REGION_DRAIN_WARN_MS)
		log_warnx("region %llu: waited %llu ms for its work in flight "
		    "before letting it go (the event loop waits with it)",
		    (unsigned long long)r->id, (unsigned long long)waited);
}

/*
 * Punch every garbage page out of the file, as a region flagged
 * HPZ_RELEASE_HOLES asks: it is handed to a userfaultfd of the client's
 * that serves missing pages (QEMU's postcopy), which must find holes
 * where no data is.  A run the file will not punch (sealed
 * F_SEAL_FUTURE_WRITE, say) stays garbage: the client's own stale bytes
 * in the client's own file, freed with it when its last fd closes.
 */
static void
region_punch_garbage(struct region *r)
{
	uint64_t	dropped, left;

	dropped = state_drop_garbage(r->state, r->npages, r->fd, r->offset,
	    r->page_size, NULL, NULL, &left);
	if (left != 0)
		log_warnx("region %llu: the file refused to punch %llu garbage "
		    "pages (sealed against writes?): they stay in the file, "
		    "unwritten, until the client's last fd closes",
		    (unsigned long long)r->id, (unsigned long long)left);
	resolve_forget_garbage(&r->rt, dropped);
	atomic_fetch_add(&stats.pages_punched, dropped);
}

/*
 * Clear every garbage page in place (keep.c), so no one can map stale
 * bytes and the client keeps every page it had: a punch would free them
 * (and on hugetlbfs their reservation), for anyone to take.  A region we
 * believe holds no garbage is not walked (a sparse region can have 2^28
 * pages): a client that wrote garbage bytes behind our back leaves its
 * own stale bytes in its own file, nothing else.  Returns the pages still
 * garbage (a graceful exit's deadline came first): its range must stay
 * registered, for libhpz to serve.
 */
static uint64_t
region_keep_garbage(struct region *r)
{
	uint64_t	cleared, left, holes, t0, ms;

	/*
	 * A region let go before it served (its prep cancelled) has no count
	 * yet, and a cancelled HPZ_DISCARD fill left part of its pages
	 * unmarked: the client declared them all garbage, so they all are.
	 * A rare path, and bounded by [limits] region_pages.
	 */
	if (!r->started) {
		if (r->prep_kind == PREP_FILL)
			memset((void *)r->state, PAGE_GARBAGE, r->npages);
	} else if (resolve_garbage(&r->rt) == 0)
		return (0);
	if (r->flags & HPZ_RELEASE_HOLES) {
		region_punch_garbage(r);
		return (0);
	}
	t0 = stats_now_ns();
	cleared = keep_garbage(r->state, r->npages, r->map, r->page_size, r,
	    &left, &holes);
	ms = (stats_now_ns() - t0) / 1000000;
	resolve_forget_garbage(&r->rt, cleared);
	if (cleared != 0)
		log_info("region %llu: %llu garbage pages cleared in place "
		    "(%llu MiB, %llu of them holes) in %llu ms",
		    (unsigned long long)r->id, (unsigned long long)cleared,
		    (unsigned long long)((cleared - holes) * r->page_size >>
		    20), (unsigned long long)holes, (unsigned long long)ms);
	if (left != 0)
		log_warnx("region %llu: %llu garbage pages not cleared within "
		    "the exit's %d ms: the range stays registered, for "
		    "libhpz to serve (it clears each page on its fault)",
		    (unsigned long long)r->id, (unsigned long long)left,
		    KEEP_EXIT_MS);
	return (left);
}

/* Tell the resets still waiting that the region is gone (main thread). */
static void
region_reset_cancel(struct region *r)
{
	struct region_reset	*rr;

	while ((rr = TAILQ_FIRST(&r->resets)) != NULL) {
		TAILQ_REMOVE(&r->resets, rr, entry);
		rr->done(rr->arg, -ECANCELED);
		free(rr);
	}
	if (r->reset_ev != NULL)
		event_free(r->reset_ev);
	r->reset_ev = NULL;
}

/*
 * The teardown's calls on what the client owns (its context's thread):
 * garbage cleared in place, its range unregistered from its uffd (the
 * kernel wakes and serves any waiter from then on; with garbage left, the
 * range stays registered for libhpz), children's uffds closed last, our
 * mappings and its fds let go.  Each may wait on a lock
 * the client holds (its file's inode lock, its mmap_lock, a FUSE server
 * of its own on close): only this client's context waits with it.
 */
static void
region_teardown_work(struct cctx_job *j)
{
	struct region	*r = j->arg;

	if (region_keep_garbage(r) == 0)
		uffd_unregister(r);
	uffd_forks_release(r);
	munmap(r->map, r->len);
	r->map = MAP_FAILED;
	region_release_state(r);
	close(r->uffd);
	close(r->fd);
	close(r->sfd);
	r->uffd = r->fd = r->sfd = -1;
	if (r->pidfd >= 0)
		close(r->pidfd);
	r->pidfd = -1;
	/*
	 * Ours was the file's last reference once its client has gone (an
	 * exited guest unmapped it before its socket closed): its pages are
	 * the host's again, and the fillers need not wait out their nap.
	 */
	pool_fill_kick();
}

/* The teardown is done (main thread): its caller told, r freed. */
static void
region_teardown_done(struct cctx_job *j)
{
	struct region	*r = j->arg;

	if (r->then != NULL)
		r->then(r->then_arg);
	/* Unmapped now: the address space is its uid's again. */
	cctx_mapped_add(r->ctx, -(int64_t)r->len);
	cctx_put(r->ctx);
	resolve_table_destroy(&r->rt);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->events.evlock);
	free(r);
}

/*
 * Stop serving a region (main thread): no more faults read, queued work
 * finished, off every list; then its teardown (region_teardown_work) on
 * its client's context, and then(arg) on the loop once that is done.
 * The loop never waits for the teardown.
 */
void
region_destroy_then(struct region *r, void (*then)(void *), void *arg)
{
	struct client	*c = r->client;

	r->ending = 1;
	prep_region_cancel(r);
	scrub_remove(r);
	uffd_poll_stop(r);
	event_del(r->ev);
	region_drain(r);
	region_reset_cancel(r);
	/* The loop's part of the children: their events. */
	uffd_forks_unwatch(r);

	TAILQ_REMOVE(&c->regions, r, entry);
	TAILQ_REMOVE(&region_all, r, all);
	c->nregions--;
	c->bytes -= r->len;
	c->state_bytes -= HPZ_STATE_SIZE(r->npages);
	fdstore_forget(r);
	event_free(r->ev);
	r->ev = NULL;
	r->then = then;
	r->then_arg = arg;
	(void)cctx_submit(r->ctx, &r->ctx_end, region_teardown_work,
	    region_teardown_done, r, "a region's teardown (clear of its "
	    "garbage in place, UFFDIO_UNREGISTER, close of its fds)");
}

void
region_destroy(struct region *r)
{
	region_destroy_then(r, NULL, NULL);
}

/*
 * A probed region whose register failed after the probe (main thread):
 * our mappings and its fds let go on its client's context.  Nothing was
 * served, so nothing is cleared.
 */
static void
region_discard_work(struct cctx_job *j)
{
	struct region	*r = j->arg;
	int		 fds[3] = { r->uffd, r->fd, r->sfd };

	region_free_probed(r);
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
}

/* A discard's job, and the address space its probe was charged. */
struct region_discard {
	struct cctx_job	 job;
	uint64_t	 len;
};

static void
region_discard_done(struct cctx_job *j)
{
	struct region_discard	*d = (struct region_discard *)j;
	struct cctx		*x = j->ctx;

	cctx_mapped_add(x, -(int64_t)d->len);	/* unmapped now */
	free(d);
	cctx_put(x);
}

/*
 * Let go of a probed region that will not be attached (main thread), on
 * x's thread; the address space charged to x for it (control_map_take)
 * is given back once it is unmapped.
 */
void
region_discard(struct cctx *x, struct region *r)
{
	struct region_discard	*d;

	if ((d = calloc(1, sizeof(*d))) == NULL) {
		uint64_t	len = r->len;

		/* No memory for the job: on the loop, as before contexts. */
		region_discard_work(&(struct cctx_job){ .arg = r });
		cctx_mapped_add(x, -(int64_t)len);
		return;
	}
	d->len = r->len;
	if (x != NULL)
		cctx_hold(x);
	(void)cctx_submit(x, &d->job, region_discard_work,
	    region_discard_done, r, "a refused register's close of its fds");
}

static struct region *
region_match(struct client *c, uint64_t addr, uint64_t len, int exact)
{
	struct region	*r;
	uint64_t	 base;

	TAILQ_FOREACH(r, &c->regions, entry) {
		base = region_addr(r);
		if (exact) {
			if (base == addr && r->len == len)
				return (r);
		} else if (addr >= base && len <= r->len &&
		    addr - base <= r->len - len)
			return (r);
	}
	return (NULL);
}

/*
 * The client's region holding [addr, addr+len), or exactly it, where it
 * lies now.  A client's mremap returns once a reader of its uffd has taken
 * the event, which may still be on its way to r->addr (under evlock): on a
 * miss, wait for each region's reader to be done and look again.
 */
struct region *
region_find(struct client *c, uint64_t addr, uint64_t len, int exact)
{
	struct region	*r;

	if ((r = region_match(c, addr, len, exact)) != NULL)
		return (r);
	TAILQ_FOREACH(r, &c->regions, entry) {
		pthread_mutex_lock(&r->events.evlock);
		pthread_mutex_unlock(&r->events.evlock);
	}
	return (region_match(c, addr, len, exact));
}

/*
 * Pages one turn of the event loop marks at most: a reset of a sparse
 * 1 TiB region of 4 KiB pages (2^28 pages) goes in slices, other clients
 * served between them.
 */
#define REGION_RESET_SLICE	16384

static void
region_reset_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	region_reset_work(arg);
}

/*
 * Go on with the resets queued on r, in order (main thread): mark the
 * next slice of the first; once it is all marked and no page a thread of
 * ours held when the reset came is still held, tell its caller.  Called
 * again on the next turn (a slice left), or when a holder lets go.
 */
void
region_reset_work(struct region *r)
{
	struct region_reset	*rr;
	uint64_t		 n;

	while ((rr = TAILQ_FIRST(&r->resets)) != NULL) {
		if (rr->next < rr->end) {
			n = rr->end - rr->next < REGION_RESET_SLICE ?
			    rr->end - rr->next : REGION_RESET_SLICE;
			resolve_reset(&r->rt, rr->next, n);
			rr->next += n;
			if (rr->next < rr->end) {
				if (r->reset_ev == NULL &&
				    (r->reset_ev = event_new(hpzd_base, -1, 0,
				    region_reset_cb, r)) == NULL) {
					/* Its destroy answers the resets. */
					uffd_region_refused(r, "out of memory "
					    "for the rest of a reset");
					return;
				}
				event_active(r->reset_ev, EV_TIMEOUT, 0);
				return;
			}
		}
		if (resolve_resets_pending(&r->rt) != 0)
			return;		/* the last holder kicks us */
		TAILQ_REMOVE(&r->resets, rr, entry);
		rr->done(rr->arg, 0);
		free(rr);
	}
}

/*
 * The main thread's tending pass over every region, after a kick from
 * any thread (hpzd_kick): the children's uffds (uffd.c), resets whose
 * reply waited for pages our threads held, a step aside a worker decided,
 * garbage gone (intercept.c), and a region released: destroyed, then the
 * control plane hears that its client may be done (region_on_release).
 */
static void
region_tend_one(struct region *r)
{
	struct client	*c;

	uffd_tend(r);
	if (!TAILQ_EMPTY(&r->resets))
		region_reset_work(r);
	/* A step aside decided by a worker: its punches, on the context. */
	intercept_aside_start(r);
	/* Garbage gone: its faults go to the kernel from now on. */
	if (!atomic_load(&r->gone))
		intercept_check(r);
	if (atomic_load(&r->gone)) {
		c = r->client;
		region_destroy(r);
		if (region_released != NULL)
			region_released(c);
	}
}

static void
region_tend(void)
{
	struct region	*r, *next;

	for (r = TAILQ_FIRST(&region_all); r != NULL; r = next) {
		next = TAILQ_NEXT(r, all);
		region_tend_one(r);
	}
}

/*
 * The tending pass runs after each kick; a fault read runs fault_handle;
 * a release stops the scrub (once, main thread, before any region).
 */
void
region_tend_init(void)
{
	/* The page path's hooks upward, set before any region is made. */
	uffd_hooks(fault_handle, scrub_remove);
	hpzd_kick_init(region_tend);
}

/* The control plane hears of each region the tending pass let go. */
void
region_on_release(void (*released)(struct client *))
{
	region_released = released;
}

/*
 * Declare [addr, addr+len) garbage.  The client zaps its mapping once we
 * answer, so we may answer only when no thread of ours can still map old
 * bytes of the range: the pages it held when the reset came are marked
 * in its hold (resolve.c), and the answer waits until they are let go.
 * No page a client's state calls busy is waited for (only our own holds
 * count), and nothing blocks the loop.  Returns 0 when done now (the
 * caller answers), 1 when done(arg, 0) will be called later from the loop
 * (done(arg, -ECANCELED) if the region goes first), -EINVAL, -ENOMEM
 * (nothing reset), or intercept_on's error.
 */
int
region_reset(struct region *r, uint64_t addr, uint64_t len,
    void (*done)(void *, int), void *arg)
{
	struct region_reset	*rr;
	uint64_t		 first, n;
	int			 error;

	if ((addr - region_addr(r)) % r->page_size != 0 ||
	    len % r->page_size != 0)
		return (-EINVAL);
	/* Before anything is marked: out of memory, nothing was reset. */
	if ((rr = calloc(1, sizeof(*rr))) == NULL) {
		log_warn("region %llu: reset", (unsigned long long)r->id);
		return (-ENOMEM);
	}
	/* Faults must come to us before anything is garbage. */
	if ((error = intercept_on(r)) != 0) {
		free(rr);
		return (error == -EINVAL ? -EFAULT : error);
	}
	first = region_page_index(r, addr);
	n = len / r->page_size;
	if (TAILQ_EMPTY(&r->resets) && n <= REGION_RESET_SLICE) {
		resolve_reset(&r->rt, first, n);
		if (resolve_resets_pending(&r->rt) == 0) {
			free(rr);
			return (0);
		}
		first += n;	/* marked: only the answer waits */
		n = 0;
	}
	rr->next = first;
	rr->end = first + n;
	rr->done = done;
	rr->arg = arg;
	TAILQ_INSERT_TAIL(&r->resets, rr, entry);
	region_reset_work(r);
	/* Background work starts on HPZ_MSG_SCRUB, after the client's zap. */
	return (1);
}

/* New flags and priority for a registered region (HPZ_DISCARD stays). */
void
region_set_policy(struct region *r, uint32_t flags, int prio)
{
	r->flags = (r->flags & HPZ_DISCARD) | (flags & ~HPZ_DISCARD);
	r->priority = prio;
	scrub_add(r, 0);
}

