/*
 * test-pool.c - unit tests of the pool's decisions (pool.c): when it
 * allocates, when it gives pages back and how many, and the per-uid share.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "conf.h"
#include "pool-fill.h"
#include "pool.h"


#define WINDOW_NS	60000000000ULL

Test(pool, fills_while_the_host_has_more_than_the_reserve)
{
	uint64_t	n;

	/* enabled, avail, in flight, node free, reserve, pages, target */
	cr_assert_eq(pool_decide(1, 100, 0, 100, 10, 0, 50, &n), POOL_FILL);
	cr_assert_eq(n, 1);
	cr_assert_eq(pool_decide(1, 11, 0, 11, 10, 49, 50, &n), POOL_FILL);
	/* At the reserve: stop, give nothing back. */
	cr_assert_eq(pool_decide(1, 10, 0, 10, 10, 20, 50, &n), POOL_NONE);
	/* Full. */
	cr_assert_eq(pool_decide(1, 100, 0, 100, 10, 50, 50, &n), POOL_NONE);
	/* The host has pages, the node none. */
	cr_assert_eq(pool_decide(1, 100, 0, 0, 10, 0, 50, &n), POOL_NONE);
	/* No reserve at all: fill to the last free page. */
	cr_assert_eq(pool_decide(1, 1, 0, 1, 0, 0, 50, &n), POOL_FILL);
	cr_assert_eq(pool_decide(1, 0, 0, 0, 0, 3, 50, &n), POOL_NONE);
}

Test(pool, yields_what_the_host_lacks_and_no_more)
{
	uint64_t	n;

	cr_assert_eq(pool_decide(1, 6, 0, 6, 10, 20, 50, &n), POOL_YIELD);
	cr_assert_eq(n, 4);
	cr_assert_eq(pool_decide(1, 0, 0, 0, 10, 3, 50, &n), POOL_YIELD);
	cr_assert_eq(n, 3, "gave back %llu of 3 pages", (unsigned long long)n);
	/* Nothing to give. */
	cr_assert_eq(pool_decide(1, 0, 0, 0, 10, 0, 50, &n), POOL_NONE);
}

/*
 * Pages in flight count as taken for filling (the kernel may not have
 * taken them yet) and as free for giving back (it may have): the last two
 * pages of a refill on two CPUs are no shortage of the host's.
 */
Test(pool, pages_in_flight_are_no_shortage)
{
	uint64_t	n;

	/* Two in flight, the host at the reserve once they land: wait. */
	cr_assert_eq(pool_decide(1, 0, 2, 0, 2, 6, UINT64_MAX, &n), POOL_NONE,
	    "gave back %llu pages being filled", (unsigned long long)n);
	/* One page in flight, no more to fill beside it. */
	cr_assert_eq(pool_decide(1, 2, 1, 2, 2, 5, UINT64_MAX, &n), POOL_NONE);
	/* Short even counting them: give back only what is missing. */
	cr_assert_eq(pool_decide(1, 0, 1, 0, 2, 6, UINT64_MAX, &n), POOL_YIELD);
	cr_assert_eq(n, 1);
	/* In flight is no room to fill: the count without them decides. */
	cr_assert_eq(pool_decide(1, 2, 3, 2, 2, 3, UINT64_MAX, &n), POOL_NONE);
	cr_assert_eq(pool_decide(1, 3, 3, 3, 2, 3, UINT64_MAX, &n), POOL_FILL);
}

Test(pool, shrinks_to_a_smaller_size_and_when_turned_off)
{
	uint64_t	n;

	cr_assert_eq(pool_decide(1, 100, 0, 100, 10, 50, 20, &n), POOL_SHRINK);
	cr_assert_eq(n, 30);
	cr_assert_eq(pool_decide(0, 100, 0, 100, 10, 50, 50, &n), POOL_SHRINK);
	cr_assert_eq(n, 50);
	cr_assert_eq(pool_decide(0, 100, 0, 100, 10, 0, 50, &n), POOL_NONE);
}

Test(pool, uid_share_comes_back_over_a_minute)
{
	double	t;

	t = pool_uid_refill(0, 1000, WINDOW_NS / 2);
	cr_assert_float_eq(t, 500, 1e-6);
	t = pool_uid_refill(-1000, 1000, WINDOW_NS / 2);
	cr_assert_float_eq(t, -500, 1e-6);
	/* Never more than the share. */
	t = pool_uid_refill(900, 1000, WINDOW_NS);
	cr_assert_float_eq(t, 1000, 1e-6);
	t = pool_uid_refill(1000, 1000, 0);
	cr_assert_float_eq(t, 1000, 1e-6);
}

/* Files of a pool: ready pages each (fd 0: there, -1: an empty slot). */
static void
files_of(struct pool_file *f, int n, const uint64_t *ready, const int *small)
{
	int	i;

	memset(f, 0, sizeof(*f) * (size_t)n);
	for (i = 0; i < n; i++) {
		f[i].fd = ready[i] > 0 ? 0 : -1;
		f[i].cap = f[i].next = f[i].done = f[i].bad = ready[i];
		f[i].small = small != NULL ? small[i] : 0;
	}
}

Test(pool, a_request_gets_a_file_of_its_size_not_the_biggest)
{
	struct pool_file	f[5];
	const uint64_t		r[5] = { 1, 2, 4, 57, 0 };

	files_of(f, 5, r, NULL);
	/* Exact fits first; else the smallest that holds it (cut). */
	cr_assert_eq(pool_pick_file(f, 5, 4), 2);
	cr_assert_eq(pool_pick_file(f, 5, 1), 0);
	cr_assert_eq(pool_pick_file(f, 5, 3), 2);
	cr_assert_eq(pool_pick_file(f, 5, 5), 3);
	/* More than any file: the largest; nothing asked for: the largest. */
	cr_assert_eq(pool_pick_file(f, 5, 100), 3);
	cr_assert_eq(pool_pick_file(f, 5, UINT64_MAX), 3);
	/* A file being taken or cut is no one else's. */
	f[2].taking = 1;
	cr_assert_eq(pool_pick_file(f, 5, 4), 3);
	f[3].busy = 1;
	cr_assert_eq(pool_pick_file(f, 5, 4), 1);
	/* Pages past a failure are not ready. */
	files_of(f, 5, r, NULL);
	f[3].bad = 3;
	cr_assert_eq(pool_file_ready(&f[3]), 3);
	cr_assert_eq(pool_pick_file(f, 5, 5), 2, "the largest ready: 4 of 5");
	files_of(f, 5, (const uint64_t[5]){ 0, 0, 0, 0, 0 }, NULL);
	cr_assert_eq(pool_pick_file(f, 5, 1), -1);
}

Test(pool, small_files_first_then_one_for_the_rest)
{
	struct pool_file	f[8];
	uint64_t		r[8] = { 0 };
	int			sm[8] = { 0 }, small;

	/* 512 pages of room: 1, 2, 4 (1/64), then the rest in one. */
	files_of(f, 8, r, sm);
	cr_assert_eq(pool_layout_cap(f, 8, 512, 1000, &small), 1);
	cr_assert_eq(small, 1);
	r[0] = 1; sm[0] = 1;
	files_of(f, 8, r, sm);
	cr_assert_eq(pool_layout_cap(f, 8, 512, 1000, &small), 2);
	r[1] = 2; sm[1] = 1;
	r[2] = 4; sm[2] = 1;
	files_of(f, 8, r, sm);
	cr_assert_eq(pool_layout_cap(f, 8, 512, 1000, &small), 1000);
	cr_assert_eq(small, 0, "the big file is a small one");
	/* The 2 was taken: it comes back before anything else. */
	r[1] = 0;
	files_of(f, 8, r, sm);
	cr_assert_eq(pool_layout_cap(f, 8, 512, 1000, &small), 2);
	/* A pool of 16 pages, or a few 1 GiB ones: one file for a guest. */
	files_of(f, 8, (const uint64_t[8]){ 0 }, NULL);
	cr_assert_eq(pool_layout_cap(f, 8, 16, 16, &small), 16);
	cr_assert_eq(small, 0);
	files_of(f, 8, (const uint64_t[8]){ 0 }, NULL);
	cr_assert_eq(pool_layout_cap(f, 8, 6, 6, &small), 6);
	cr_assert_eq(small, 0);
}

Test(pool, by_default_it_fills_every_free_page_above_the_reserve)
{
	struct conf	c;
	uint64_t	n, target;

	conf_defaults(&c);
	target = c.pool_size[0][0] == UINT64_MAX ? UINT64_MAX :
	    c.pool_size[0][0] / (2ULL << 20);
	/* A host of 12288 free pages, 1024 reserved: the pool takes 11264. */
	cr_assert_eq(pool_decide(1, 12288 - 11263, 0, 12288, 1024, 11263, target,
	    &n), POOL_FILL, "the default pool stops at %llu pages with 1025 "
	    "free and 1024 to keep", (unsigned long long)target);
	cr_assert_eq(pool_decide(1, 1024, 0, 12288, 1024, 11264, target, &n),
	    POOL_NONE);
	cr_assert_eq(c.pool_size[1][0], UINT64_MAX, "1 GiB pages: %llu bytes",
	    (unsigned long long)c.pool_size[1][0]);
}
