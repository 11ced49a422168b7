/*
 * test-pool.c - unit tests of the pool's decisions (pool.c): when it
 * allocates, when it gives pages back and how many, and the per-uid share.
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "hpzerod.h"


#define WINDOW_NS	60000000000ULL

Test(pool, fills_while_the_host_has_more_than_the_reserve)
{
	uint64_t	n;

	/* enabled, avail, node free, reserve, pages, target */
	cr_assert_eq(pool_decide(1, 100, 100, 10, 0, 50, &n), POOL_FILL);
	cr_assert_eq(n, 1);
	cr_assert_eq(pool_decide(1, 11, 11, 10, 49, 50, &n), POOL_FILL);
	/* At the reserve: stop, give nothing back. */
	cr_assert_eq(pool_decide(1, 10, 10, 10, 20, 50, &n), POOL_NONE);
	/* Full. */
	cr_assert_eq(pool_decide(1, 100, 100, 10, 50, 50, &n), POOL_NONE);
	/* The host has pages, the node none. */
	cr_assert_eq(pool_decide(1, 100, 0, 10, 0, 50, &n), POOL_NONE);
	/* No reserve at all: fill to the last free page. */
	cr_assert_eq(pool_decide(1, 1, 1, 0, 0, 50, &n), POOL_FILL);
	cr_assert_eq(pool_decide(1, 0, 0, 0, 3, 50, &n), POOL_NONE);
}

Test(pool, yields_what_the_host_lacks_and_no_more)
{
	uint64_t	n;

	cr_assert_eq(pool_decide(1, 6, 6, 10, 20, 50, &n), POOL_YIELD);
	cr_assert_eq(n, 4);
	cr_assert_eq(pool_decide(1, 0, 0, 10, 3, 50, &n), POOL_YIELD);
	cr_assert_eq(n, 3, "gave back %llu of 3 pages", (unsigned long long)n);
	/* Nothing to give. */
	cr_assert_eq(pool_decide(1, 0, 0, 10, 0, 50, &n), POOL_NONE);
}

Test(pool, shrinks_to_a_smaller_size_and_when_turned_off)
{
	uint64_t	n;

	cr_assert_eq(pool_decide(1, 100, 100, 10, 50, 20, &n), POOL_SHRINK);
	cr_assert_eq(n, 30);
	cr_assert_eq(pool_decide(0, 100, 100, 10, 50, 50, &n), POOL_SHRINK);
	cr_assert_eq(n, 50);
	cr_assert_eq(pool_decide(0, 100, 100, 10, 0, 50, &n), POOL_NONE);
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
