/*
 * prep.h - a new region's page-state walk, off the loop (prep.c).
 */
#ifndef HPZD_PREP_H
#define HPZD_PREP_H

#include <stdint.h>

#include "prep-thread.h"

struct region;

/* What is left to do before a new region serves (prep.c). */
enum prep_kind {
	PREP_NONE,		/* nothing: a fresh state, not HPZ_DISCARD */
	PREP_FILL,		/* a fresh HPZ_DISCARD state: all garbage */
	PREP_ADOPT,		/* an adopted state: resolve busy, count */
};

int		 prep_region(struct region *, void (*ready)(struct region *));
void		 prep_region_cancel(struct region *);
int		 prep_state_extent(int sfd, uint64_t npages, uint64_t from,
		    uint64_t *lo, uint64_t *hi);

#endif /* HPZD_PREP_H */
