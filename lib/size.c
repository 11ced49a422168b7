/*
 * size.c - parse a byte count: decimal digits, then an optional K, M, G
 * or T (either case), nothing else.  One parser for the daemon's settings
 * file and every command line.
 */
#include <errno.h>
#include <stdlib.h>

#include "size.h"

/* 0 and the bytes in *out, or -1 (garbage, a sign, blanks, overflow). */
int
size_parse(const char *s, uint64_t *out)
{
	unsigned long long	 v;
	char			*end;
	int			 shift = 0;

	/* strtoull would take blanks, a sign, and "-1" as 2^64-1. */
	if (s == NULL || *s < '0' || *s > '9')
		return (-1);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return (-1);
	switch (*end) {
	case 'K': case 'k':
		shift = 10;
		break;
	case 'M': case 'm':
		shift = 20;
		break;
	case 'G': case 'g':
		shift = 30;
		break;
	case 'T': case 't':
		shift = 40;
		break;
	}
	if (shift != 0)
		end++;
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return (-1);
	*out = (uint64_t)v << shift;
	return (0);
}
