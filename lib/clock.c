/*
 * clock.c - CLOCK_MONOTONIC, in nanoseconds or seconds: wall-clock jumps
 * must not enter a figure, a deadline or a rate.
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

uint64_t
clock_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

double
clock_now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

static int
clock_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * The shortest span the clock can tell from nothing: the larger of its
 * resolution (clock_getres) and what one read costs (median of 101), since
 * every span includes a read.  Measured once; a figure from a shorter span
 * is an artifact of the timer and is printed as such.
 */
uint64_t
clock_resolution_ns(void)
{
	static uint64_t	 res;
	struct timespec	 ts;
	uint64_t	 d[101], t0, t1, r = 1;
	size_t		 i;

	if (res != 0)
		return (res);
	if (clock_getres(CLOCK_MONOTONIC, &ts) == 0)
		r = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	t0 = clock_now_ns();
	for (i = 0; i < sizeof d / sizeof d[0]; i++) {
		t1 = clock_now_ns();
		d[i] = t1 - t0;
		t0 = t1;
	}
	qsort(d, sizeof d / sizeof d[0], sizeof d[0], clock_cmp);
	if (d[sizeof d / sizeof d[0] / 2] > r)
		r = d[sizeof d / sizeof d[0] / 2];
	res = r > 0 ? r : 1;
	return (res);
}
