/*
 * plan.h - the extent planner, pure arithmetic (plan.c).
 */
#ifndef HPZD_PLAN_H
#define HPZD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PLAN_EXTENT_MIN		(256ULL << 10)
#define PLAN_EXTENT_MAX		(64ULL << 20)
#define PLAN_HOT_DEFAULT	(64ULL << 10)	/* the fault +- 32 KiB */
struct plan_extent {
	uint64_t	off;
	uint64_t	len;
};
uint64_t	 plan_extent_max(uint64_t llc_share);
void		 plan_window(uint64_t page_size, uint64_t fault_off,
		    uint64_t hot, uint64_t *start, uint64_t *len);
size_t		 plan_split(uint64_t len, uint64_t wstart, uint64_t wlen,
		    uint64_t max, struct plan_extent *out, size_t nout);
void		 plan_sort_by_distance(struct plan_extent *, size_t,
		    uint64_t wstart, uint64_t wend);
void		 plan_coalesce(const uint64_t *idx, size_t n, uint64_t first,
		    uint64_t max_pages, uint64_t *lo, uint64_t *hi);

#endif /* HPZD_PLAN_H */
