/*
 * cost.h - what one region's garbage faults took through us of late: the
 * step-aside policy (cost_keep) reads a region's own figures, never those
 * of the others, so one client's 1 GiB clears or busy threads do not move
 * another's policy.
 */
#ifndef HPZD_COST_H
#define HPZD_COST_H

#include <stdatomic.h>
#include <stdint.h>

struct cost_seen {
	atomic_uint_fast64_t	 ns;	/* moving average, read to answer */
	atomic_uint_fast64_t	 at;	/* when last fed (stats_now_ns) */
};

/* Forgotten after this long without a garbage fault. */
#define COST_SEEN_NS	1000000000ULL

void		 cost_seen_feed(struct cost_seen *, uint64_t ns, uint64_t now);
uint64_t	 cost_seen_get(const struct cost_seen *, uint64_t now);

#endif /* HPZD_COST_H */
