/*
 * keep.h - a region's garbage cleared in place, not punched, when the
 * daemon lets go of its range (keep.c).
 */
#ifndef HPZD_KEEP_H
#define HPZD_KEEP_H

#include <stdatomic.h>
#include <stdint.h>

struct region;

/* How long a graceful exit spends clearing, at most (ms). */
#define KEEP_EXIT_MS		5000

void		 keep_exit_deadline(uint64_t ms);
uint64_t	 keep_garbage(_Atomic uint8_t *state, uint64_t npages,
		    void *map, uint64_t page_size, struct region *r,
		    uint64_t *left, uint64_t *holes);
#endif /* HPZD_KEEP_H */
