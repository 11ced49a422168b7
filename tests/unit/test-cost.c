/*
 * test-cost.c - unit tests of the step-aside policy (daemon/cost.c): when
 * cost_keep keeps a garbage fault and when it hands it to the kernel, and
 * that what one region saw (cost_seen) moves only its own policy.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "cost.h"

#define PAGE_2M		(2 * 1024ULL * 1024)

/*
 * The step-aside policy (cost.c): the daemon keeps a garbage fault while
 * its wait (a round trip and the region's clears queued before it, on the
 * share of a CPU a thread gets) is shorter than the kernel's first touch
 * (on the same share).
 */
Test(cost, cost_keep_steps_aside_only_when_behind)
{
	struct cost	c = { .rt_ns = 25000, .huge = 1, .kzero_ns = 95000,
	    .ktouch_ns = 130000, .clear_ns = 33000, .measured = 1 };
	struct cost	none = { 0 };

	/* Nothing measured: keep serving, as before calibration. */
	cr_assert(cost_keep(&none, PAGE_2M, 0, 99, 2, 99, 2, 0));
	/* An idle core and the scrub clearing ahead: keep. */
	cr_assert(cost_keep(&c, PAGE_2M, 1, 1, 2, 64, 2, 0));
	/* One fault, a quiet machine: 58 us against 130. */
	cr_assert(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2, 0));
	/* Four faults a worker queued: 25 + 4 x 33 > 130: step aside. */
	cr_assert_not(cost_keep(&c, PAGE_2M, 0, 1, 2, 8, 2, 0));
	/* Three runnable threads a CPU: a third of one each, 124 < 390. */
	cr_assert(cost_keep(&c, PAGE_2M, 1, 6, 2, 1, 2, 0));
	/*
	 * Fifty: the client's thread gets a twenty-fifth of a CPU too, so
	 * the kernel's touch takes 3250 us against our 850: a busy machine
	 * alone never makes a region step aside.
	 */
	cr_assert(cost_keep(&c, PAGE_2M, 0, 100, 2, 1, 2, 0));
	/* Busy and the region's own queue long: 25 + 4 x 33 x 50 > 6500. */
	cr_assert_not(cost_keep(&c, PAGE_2M, 0, 100, 2, 8, 2, 0));
	/* Quiet and one fault, but faults took 150 us of late: aside. */
	cr_assert_not(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2, 150000));
	/* ... 50 us: 25 + 50 = 75 us against 130: keep. */
	cr_assert(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2, 50000));
	/* 4 KiB pages: nothing measured to go by. */
	cr_assert(cost_keep(&c, 4096, 0, 8, 2, 64, 2, 0));
}

/*
 * One region's observations move only its own policy: a 1 GiB region
 * whose clears take 60 ms a fault, and a 2 MiB one whose faults went slow,
 * leave a quiet 2 MiB region serving its faults; and what a region saw is
 * forgotten after COST_SEEN_NS without a garbage fault.
 */
Test(cost, cost_seen_is_per_region)
{
	struct cost		c = { .rt_ns = 25000, .huge = 1,
	    .kzero_ns = 95000, .ktouch_ns = 130000, .clear_ns = 33000,
	    .measured = 1 };
	struct cost_seen	giant, slow, quiet;
	uint64_t		now = 5000000000ULL;
	int			i;

	memset(&giant, 0, sizeof(giant));
	memset(&slow, 0, sizeof(slow));
	memset(&quiet, 0, sizeof(quiet));
	for (i = 0; i < 64; i++) {
		cost_seen_feed(&giant, 60000000, now);
		cost_seen_feed(&slow, 400000, now);
	}
	cr_assert_eq(cost_seen_get(&quiet, now), 0);
	cr_assert_geq(cost_seen_get(&slow, now), 390000);
	/* The slow 2 MiB region steps aside on what it saw itself. */
	cr_assert_not(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2,
	    cost_seen_get(&slow, now)));
	/* The quiet one keeps: the others' figures are not its own. */
	cr_assert(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2,
	    cost_seen_get(&quiet, now)));
	/* 60 ms for a 1 GiB page: 512 x 130 us would be the kernel's. */
	cr_assert(cost_keep(&c, 1ULL << 30, 0, 1, 2, 1, 2,
	    cost_seen_get(&giant, now)));
	/* A second without a garbage fault: forgotten. */
	cr_assert_eq(cost_seen_get(&slow, now + COST_SEEN_NS + 1), 0);
	cr_assert(cost_keep(&c, PAGE_2M, 0, 1, 2, 1, 2,
	    cost_seen_get(&slow, now + COST_SEEN_NS + 1)));
}
