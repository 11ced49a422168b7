/*
 * size.c - parse a byte count: decimal digits, then an optional K, M, G
 * or T (either case), nothing else.  One parser for the daemon's settings
 * file and every command line; and the client programs' way of printing
 * one back.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"

static const char	 size_suffixes[] = "kmgt";

/* 0 and the bytes in *out, or -1 (garbage, a sign, blanks, overflow). */
int
size_parse(const char *s, uint64_t *out)
{
	unsigned long long	 v;
	char			*end;
	const char		*sfx;
	int			 shift = 0;

	/* strtoull would take blanks, a sign, and "-1" as 2^64-1. */
	if (s == NULL || *s < '0' || *s > '9')
		return (-1);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return (-1);
	/* K, M, G, T: 2^10, 2^20, 2^30, 2^40. */
	if (*end != '\0' && (sfx = strchr(size_suffixes,
	    tolower((unsigned char)*end))) != NULL) {
		shift = 10 * (int)(sfx - size_suffixes + 1);
		end++;
	}
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return (-1);
	*out = (uint64_t)v << shift;
	return (0);
}

static const char *const size_units[] = {
	"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"
};
#define SIZE_NUNITS	(sizeof size_units / sizeof size_units[0])

/*
 * n bytes in the units people pick and read sizes in (enum
 * size_style); returns buf.
 */
const char *
size_format(enum size_style style, uint64_t n, char *buf, size_t len)
{
	uint64_t	 whole = n;
	double		 v = (double)n;
	size_t		 u = 0, max;

	if (style == SIZE_FMT_DECIMAL) {
		while (v >= 1024.0 && u < SIZE_NUNITS - 1) {
			v /= 1024.0;
			u++;
		}
		if (u == 0)
			snprintf(buf, len, "%llu B", (unsigned long long)n);
		else
			snprintf(buf, len, "%.2f %s", v, size_units[u]);
		return (buf);
	}
	/* Exact sizes stop at TiB, as hpz-bench and hpz-demo did. */
	max = 4;
	while (whole >= 1024 && whole % 1024 == 0 && u < max) {
		whole /= 1024;
		u++;
	}
	if (style == SIZE_FMT_EXACT || whole < 1024 || u == max) {
		snprintf(buf, len, "%llu %s", (unsigned long long)whole,
		    size_units[u]);
		return (buf);
	}
	/* Not a round number of the next unit: two decimals of it. */
	snprintf(buf, len, "%.2f %s", (double)whole / 1024.0,
	    size_units[u + 1]);
	return (buf);
}

/* Parse 512M, 1G, 4096 up to max; 0 on success, -1 on garbage, 0 or more. */
int
size_parse_max(const char *s, uint64_t max, size_t *out)
{
	uint64_t	v;

	if (size_parse(s, &v) != 0 || v == 0 || v > max)
		return (-1);
	*out = (size_t)v;
	return (0);
}
