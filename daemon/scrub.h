/*
 * scrub.h - background work at SCHED_IDLE: scrub, allocate ahead, premap
 * (scrub.c).
 */
#ifndef HPZD_SCRUB_H
#define HPZD_SCRUB_H

#include <stdint.h>
#include <sys/queue.h>

#include "hpz-state.h"

struct conf;
struct region;

/*
 * The scrub's part of a region (struct region's scrub), guarded by
 * scrub_lock: its place in the queue, the scan, the read-ahead window.
 */
struct scrub_slice {
	TAILQ_ENTRY(region)	 bg;		/* in scrub_queue */
	int			 queued;	/* in scrub_queue */
	uint64_t		 cursor;	/* next page to scrub or populate */
	uint64_t		 ahead_start;	/* the read-ahead window */
	uint64_t		 ahead_lo;	/* next page of it to hand out */
	uint64_t		 ahead_hi;	/* exclusive */
	uint64_t		 ahead_last;	/* last missing fault's page */
	uint64_t		 ahead_pages;	/* current read-ahead window */
};

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
