/*
 * stats.h - the counters, relaxed atomics (stats.c).
 */
#ifndef HPZD_STATS_H
#define HPZD_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "hpz-counters.h"

/*
 * Counters; relaxed atomics, read by status.  The D lines of hpz-counters.h
 * (stats_fill copies them into the reply as they are), then what only the
 * daemon sees.
 */
#define STATS_HIST_BUCKETS	32	/* bucket i: [2^i, 2^(i+1)) ns */
#define STATS_FIELD(name, kind, unit, prom, label, help) \
	atomic_uint_fast64_t	name;
#define STATS_NONE(name, kind, unit, prom, label, help)
struct stats {
	HPZ_COUNTERS_ALL(STATS_FIELD, STATS_NONE)
	atomic_uint_fast64_t	hist[STATS_HIST_BUCKETS];
	atomic_uint_fast64_t	faults_stray;	/* outside their region */
	atomic_uint_fast64_t	faults_inflight; /* read, not yet answered */
};

extern struct stats	 stats;
uint64_t	 stats_now_ns(void);
void		 stats_fault_latency(uint64_t ns);
int		 stats_bucket(uint64_t ns);

#endif /* HPZD_STATS_H */
