/*
 * test-stats.c - unit tests of the latency histogram's bucket
 * (stats_bucket in stats.c).
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "stats.h"

/* --- stats_bucket ------------------------------------------------------- */

Test(stats, bucket)
{
	int	b;

	cr_expect_eq(stats_bucket(0), 0);
	cr_expect_eq(stats_bucket(1), 0);
	cr_expect_eq(stats_bucket(2), 1);
	cr_expect_eq(stats_bucket(3), 1);
	cr_expect_eq(stats_bucket(4), 2);
	cr_expect_eq(stats_bucket(1023), 9);
	cr_expect_eq(stats_bucket(1024), 10);
	cr_expect_eq(stats_bucket(1ULL << 31), 31);
	cr_expect_eq(stats_bucket(1ULL << 32), STATS_HIST_BUCKETS - 1);
	cr_expect_eq(stats_bucket(1ULL << 40), STATS_HIST_BUCKETS - 1);
	cr_expect_eq(stats_bucket(UINT64_MAX), STATS_HIST_BUCKETS - 1);
	for (b = 1; b < STATS_HIST_BUCKETS; b++) {
		cr_expect_eq(stats_bucket(1ULL << b), b);
		cr_expect_eq(stats_bucket((1ULL << b) - 1), b - 1);
	}
}
