/*
 * scrub.h - background work at SCHED_IDLE: scrub, allocate ahead, premap
 * (scrub.c).
 */
#ifndef HPZD_SCRUB_H
#define HPZD_SCRUB_H

#include <stdint.h>

#include "hpz-state.h"

struct conf;
struct region;

int		 scrub_start(const struct conf *);
void		 scrub_stop(void);
int		 scrub_configure(const struct conf *);
void		 scrub_add(struct region *, uint64_t from);
void		 scrub_remove(struct region *);
void		 scrub_fault(struct region *, uint64_t idx, enum fault_kind);
uint64_t	 scrub_region_pending(const struct region *);
double		 scrub_budget_gbs(int client);
int		 scrub_region_enabled(const struct region *);

#endif /* HPZD_SCRUB_H */
