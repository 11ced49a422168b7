/*
 * clock.c - CLOCK_MONOTONIC, in nanoseconds or seconds: wall-clock jumps
 * must not enter a figure, a deadline or a rate.
 */
#include <stdint.h>
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
