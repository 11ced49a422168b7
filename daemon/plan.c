/*
 * plan.c - the extent planner: how a clear is cut up and in what order.
 * Pure arithmetic, so that tests can check every edge.
 */
#include "plan.h"

#define PLAN_SUBPAGE	4096ULL

/* The largest extent one clear should cover: the LLC share, sane bounds. */
uint64_t
plan_extent_max(uint64_t llc_share)
{
	uint64_t	max = llc_share;

	if (max < PLAN_EXTENT_MIN)
		max = PLAN_EXTENT_MIN;
	if (max > PLAN_EXTENT_MAX)
		max = PLAN_EXTENT_MAX;
	return (max & ~(PLAN_SUBPAGE - 1));
}

/*
 * The hot window of a fault: the faulting 4 KiB subpage and hot/2 on each
 * side, in whole subpages, inside [0, page_size).  Compares rather than
 * adds past page_size, so any hot size is safe.
 */
void
plan_window(uint64_t page_size, uint64_t fault_off, uint64_t hot,
    uint64_t *start, uint64_t *len)
{
	uint64_t	sub, end, half;

	if (page_size == 0) {
		*start = *len = 0;
		return;
	}
	if (fault_off >= page_size)
		fault_off = page_size - 1;
	sub = fault_off & ~(PLAN_SUBPAGE - 1);
	half = (hot / 2 + PLAN_SUBPAGE - 1) & ~(PLAN_SUBPAGE - 1);
	*start = sub > half ? sub - half : 0;
	end = page_size - sub > PLAN_SUBPAGE ? sub + PLAN_SUBPAGE : page_size;
	end = page_size - end > half ? end + half : page_size;
	*len = end - *start;
}

/*
 * Cut [0, len) less the window [wstart, wstart+wlen) into extents of at
 * most max bytes.  Extents come farthest from the window first, so the
 * lines nearest the fault are written last; the window itself is not in
 * the list (it is cleared after, with ordinary stores).  Returns the number
 * of extents, or 0 if nout is too small.
 */
size_t
plan_split(uint64_t len, uint64_t wstart, uint64_t wlen, uint64_t max,
    struct plan_extent *out, size_t nout)
{
	uint64_t	wend = wstart + wlen, pos, n;
	size_t		count = 0;

	if (max == 0 || wstart > len || wlen > len - wstart)
		return (0);
	/* Before the window: from the start towards it. */
	for (pos = 0; pos < wstart; pos += n) {
		n = wstart - pos < max ? wstart - pos : max;
		if (count == nout)
			return (0);
		out[count].off = pos;
		out[count].len = n;
		count++;
	}
	/* After the window: from the end towards it, then reversed below. */
	for (pos = len; pos > wend; pos -= n) {
		n = pos - wend < max ? pos - wend : max;
		if (count == nout)
			return (0);
		out[count].off = pos - n;
		out[count].len = n;
		count++;
	}
	/* Both sides approach the window; the extents touching it last. */
	plan_sort_by_distance(out, count, wstart, wend);
	return (count);
}

/* Distance of an extent from the window (0 when it touches it). */
static uint64_t
plan_distance(const struct plan_extent *e, uint64_t wstart, uint64_t wend)
{
	if (e->off + e->len <= wstart)
		return (wstart - (e->off + e->len));
	if (e->off >= wend)
		return (e->off - wend);
	return (0);
}

/* Insertion sort, farthest from the window first (lists are short). */
void
plan_sort_by_distance(struct plan_extent *e, size_t n, uint64_t wstart,
    uint64_t wend)
{
	struct plan_extent	tmp;
	size_t			i, j;

	for (i = 1; i < n; i++) {
		tmp = e[i];
		for (j = i; j > 0 && plan_distance(&e[j - 1], wstart, wend) <
		    plan_distance(&tmp, wstart, wend); j--)
			e[j] = e[j - 1];
		e[j] = tmp;
	}
}

/*
 * Coalescing: the longest run of consecutive page indices around first that
 * the available ones (idx[0..n)) allow, at most max_pages long.
 */
void
plan_coalesce(const uint64_t *idx, size_t n, uint64_t first,
    uint64_t max_pages, uint64_t *lo, uint64_t *hi)
{
	size_t	i;
	int	grew;

	*lo = *hi = first;
	if (max_pages <= 1)
		return;
	do {
		grew = 0;
		for (i = 0; i < n && *hi - *lo + 1 < max_pages; i++) {
			if (*hi != UINT64_MAX && idx[i] == *hi + 1) {
				(*hi)++;
				grew = 1;
			} else if (*lo != 0 && idx[i] == *lo - 1) {
				(*lo)--;
				grew = 1;
			}
		}
	} while (grew && *hi - *lo + 1 < max_pages);
}
