/*
 * test-bucket.c - unit tests of the token bucket behind the background
 * budgets (bucket.c).
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "bucket.h"

/* --- background budgets (scrub.c token buckets) ---------------------------- */

Test(bucket, unlimited_never_waits)
{
	struct bucket	*b = bucket_new(0);

	cr_assert_not_null(b);
	cr_assert_eq(bucket_take(b, 1ULL << 40, 1000), 0);
	cr_assert_eq(bucket_take(NULL, 1ULL << 30, 1000), 0);
	bucket_free(b);
}

Test(bucket, rate_holds_on_average)
{
	struct bucket	*b = bucket_new(1.0);	/* 1 GB/s: a byte a ns */
	uint64_t	 now = 1000000, wait, total = 0;
	int		 i;

	cr_assert_not_null(b);
	/* 100 requests of 2 MiB at once: they must be spread over time. */
	for (i = 0; i < 100; i++) {
		wait = bucket_take(b, 2 << 20, now);
		total = wait;
	}
	/* The last one waits for about all 200 MiB at 1 byte/ns. */
	cr_assert_geq(total, 99ULL * (2 << 20), "last wait %llu ns",
	    (unsigned long long)total);
	cr_assert_leq(total, 100ULL * (2 << 20));
	bucket_free(b);
}

Test(bucket, refills_with_time_up_to_a_burst)
{
	struct bucket	*b = bucket_new(2.0);	/* 2 bytes a ns */

	cr_assert_eq(bucket_take(b, 0, 1000), 0);
	/* 1 ms later: 2 MB of credit, so 1 MB goes at once. */
	cr_assert_eq(bucket_take(b, 1000000, 1001000), 0);
	/* A long idle time is capped: 10 s of credit is not 20 GB. */
	cr_assert_gt(bucket_take(b, 1ULL << 32, 10001001000ULL), 0);
	bucket_free(b);
}

Test(bucket, set_changes_rate)
{
	struct bucket	*b = bucket_new(1.0);

	cr_assert_gt(bucket_take(b, 1 << 20, 1000), 0);
	bucket_set(b, 0);
	cr_assert_eq(bucket_take(b, 1 << 30, 2000), 0);
	bucket_free(b);
}
