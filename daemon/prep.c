/*
 * prep.c - the work of a request whose cost grows with a region's page
 * count, done off the event loop (on the prep thread, prep-thread.c, or
 * the region's client context): filling a new HPZ_DISCARD page state with
 * garbage, resolving what a dead server left busy in an adopted one (and
 * counting its garbage).  The walks go in slices that each look for a
 * cancel; the reply waits for the walk, the loop does not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/magic.h>

#include "hpz-state.h"

#include "cctx.h"
#include "prep-thread.h"
#include "prep.h"
#include "region.h"

/* State bytes worked on between two looks at the cancel flag. */
#define PREP_SLICE	(1ULL << 20)

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
