/*
 * util.c - the clock and the size formatting the client programs share.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "size.h"
#include "util.h"

static const char *const util_units[] = {
	"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
};
#define UTIL_NUNITS	(sizeof util_units / sizeof util_units[0])

/* Monotonic nanoseconds; wall-clock jumps must not enter a figure. */
uint64_t
util_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* Seconds on the monotonic clock. */
double
util_now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/*
 * n bytes in the units people pick and read sizes in (enum
 * util_size_style); returns buf.
 */
const char *
util_size(enum util_size_style style, uint64_t n, char *buf, size_t len)
{
	uint64_t	 whole = n;
	double		 v = (double)n;
	size_t		 u = 0, max;

	if (style == UTIL_SIZE_DECIMAL) {
		while (v >= 1024.0 && u < UTIL_NUNITS - 1) {
			v /= 1024.0;
			u++;
		}
		if (u == 0)
			snprintf(buf, len, "%llu B", (unsigned long long)n);
		else
			snprintf(buf, len, "%.2f %s", v, util_units[u]);
		return (buf);
	}
	/* Exact sizes stop at TiB, as hpz-bench and hpz-demo always did. */
	max = 4;
	while (whole >= 1024 && whole % 1024 == 0 && u < max) {
		whole /= 1024;
		u++;
	}
	if (style == UTIL_SIZE_EXACT || whole < 1024 || u == max) {
		snprintf(buf, len, "%llu %s", (unsigned long long)whole,
		    util_units[u]);
		return (buf);
	}
	/* Not a round number of the next unit: two decimals of it. */
	snprintf(buf, len, "%.2f %s", (double)whole / 1024.0,
	    util_units[u + 1]);
	return (buf);
}

/* Parse 512M, 1G, 4096 up to max; 0 on success, -1 on garbage, 0 or more. */
int
util_parse_size(const char *s, uint64_t max, size_t *out)
{
	uint64_t	v;

	if (size_parse(s, &v) != 0 || v == 0 || v > max)
		return (-1);
	*out = (size_t)v;
	return (0);
}
