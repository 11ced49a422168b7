/*
 * clear.c - clear kernels.  One plain kernel for now; the clearing-engine
 * work replaces it with non-temporal and neighbourhood-last variants.
 */
#include <string.h>

#include "hpzerod.h"

/* Write zeros over [p, p+len). */
void
clear_range(void *p, size_t len)
{
	memset(p, 0, len);
}
