/*
 * tclock.h - the monotonic clock in nanoseconds, for the test programs
 * that time their own calls (the soak, the stress test, the systemd
 * client).
 */
#ifndef TCLOCK_H
#define TCLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
tclock_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

#endif
