/*
 * keep.c - garbage cleared in place when the daemon lets go of a range: a
 * region's teardown (hpz_unregister, its client gone, a graceful exit)
 * and a stored region released (fdstore.c).  A punch would free the pages,
 * and on hugetlbfs their reservation with them: another process may take
 * them before the client touches its range again, and the client meets
 * SIGBUS where it had memory.  So the pages stay in the file and zeros are
 * written over them through the daemon's mapping:
 *  - the mapping is guarded (uffdio_hole_guard): a page the file lacks
 *    (the client punched it, or truncated its file) is refused, never
 *    filled, so no hole is allocated in our name and a sparse region costs
 *    no memory;
 *  - every store is behind a recovery point (clear.c): the client may
 *    truncate or punch under us;
 *  - runs of pages are spread over the idle workers (clear_spread);
 *  - a graceful exit sets a deadline (keep_exit_deadline): what is not
 *    cleared by then stays garbage, and the caller leaves that range
 *    registered, for libhpz to serve (it clears a page on its fault).
 * It runs on the client's context (cctx.c): a call on its file may wait
 * on its locks, and only its own work waits with it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpz-state.h"
#include "uffdio.h"

#include "clear.h"
#include "keep.h"
#include "log.h"
#include "stats.h"
#include "worker.h"

/* Bytes one run of the walk covers at most: the deadline is checked
   between runs. */
#define KEEP_RUN_BYTES		(64ULL << 20)
/* Bytes a worker takes at a time: a fault it is needed for waits at most
   one such extent (about 0.1 ms). */
#define KEEP_EXTENT_BYTES	(2ULL << 20)

/* When clearing stops (stats_now_ns); 0: never. */
static _Atomic uint64_t	 keep_deadline_ns;

/* Clearing stops ms from now, for every region (a graceful exit). */
void
keep_exit_deadline(uint64_t ms)
{
	atomic_store(&keep_deadline_ns, stats_now_ns() + ms * 1000000ULL);
}

/* What keep_garbage's callbacks work with. */
struct keep {
	char		*map;
	uint64_t	 page_size;
	struct region	*r;		/* NULL: no helpers */
	uint64_t	 holes;
};

/* A worker's share of a keep job. */
static void
keep_assist(struct worker *self, struct work *item)
{
	(void)self;
	clear_job_run(item->job);
	clear_job_put(item->job);
	free(item);
}

static int
keep_offer(struct clear_job *job, void *arg)
{
	struct keep	*k = arg;

	return (worker_assist(job, k->r, -1, NULL, 0, keep_assist));
}

/*
 * Zeros over pages [idx, idx+n), in the file a moment ago: with the
 * workers, else here.  A store that meets SIGBUS (the client punched or
 * truncated the file under us) sends us back a page at a time; a page
 * that fails then is not in the file, which is all we want of it.
 */
static int
keep_zero(void *arg, uint64_t idx, uint64_t n)
{
	struct keep	*k = arg;
	uint64_t	 ps = k->page_size, len = n * ps, ext, i;
	char		*base = k->map + idx * ps;
	int		 error, helped;

	if (k->r != NULL) {
		ext = KEEP_EXTENT_BYTES;
		if (ext > worker_extent_max(&worker_config))
			ext = worker_extent_max(&worker_config);
		error = clear_spread(base, len, ext, keep_offer, k, &helped);
	} else
		error = clear_bulk_guarded(base, len);
	if (error != 0)
		for (i = 0; i < n; i++)
			if (clear_bulk_guarded(base + i * ps, ps) != 0)
				k->holes++;
	clear_fence();
	return (0);
}

/* One run of garbage pages: the present ones zeroed, holes left be. */
static int
keep_run(void *arg, uint64_t first, uint64_t n)
{
	struct keep	*k = arg;
	uint64_t	 dl = atomic_load(&keep_deadline_ns);

	if (dl != 0 && stats_now_ns() >= dl)
		return (-EINTR);
	return (state_zero_present(k->map, k->page_size, first, n, keep_zero,
	    k, &k->holes));
}

/*
 * Clear the garbage pages of state[0, npages) in place through map (our
 * shared mapping of the range, page 0 at map) and mark them kept.  r, if
 * not NULL, lends its workers.  Returns the pages cleared; *left: pages
 * still garbage (the deadline came, or the kernel refused); *holes:
 * garbage pages not in the file (nothing to clear: they read zero).
 */
uint64_t
keep_garbage(_Atomic uint8_t *state, uint64_t npages, void *map,
    uint64_t page_size, struct region *r, uint64_t *left, uint64_t *holes)
{
	struct keep	k = { map, page_size, r, 0 };
	uint64_t	run = KEEP_RUN_BYTES / page_size, cleared;
	int		guard;

	if ((guard = uffdio_hole_guard((uint64_t)(uintptr_t)map,
	    npages * page_size)) < 0)
		log_warnx("cannot guard our mapping against filling holes "
		    "(%s): a garbage page the client punched is allocated "
		    "and zeroed", strerror(-guard));
	cleared = state_keep_garbage(state, npages, run, keep_run, &k, left);
	if (guard >= 0)
		close(guard);
	*holes = k.holes;
	return (cleared);
}
