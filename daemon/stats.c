/*
 * stats.c - daemon-wide counters: relaxed atomics any thread adds to, and
 * the latency histogram.  What reads them for a reply is status.c.
 */
#include "clock.h"

#include "stats.h"

struct stats	stats;

uint64_t
stats_now_ns(void)
{
	return (clock_now_ns());
}

/* Log2 bucket of a latency: bucket i holds [2^i, 2^(i+1)) ns. */
int
stats_bucket(uint64_t ns)
{
	int	b;

	if (ns == 0)
		return (0);
	b = 63 - __builtin_clzll(ns);
	return (b < STATS_HIST_BUCKETS ? b : STATS_HIST_BUCKETS - 1);
}

/* Account one resolved fault, from read to mapped. */
void
stats_fault_latency(uint64_t ns)
{
	uint_fast64_t	max;

	atomic_fetch_add_explicit(&stats.hist[stats_bucket(ns)], 1,
	    memory_order_relaxed);
	atomic_fetch_add_explicit(&stats.fault_ns_total, ns,
	    memory_order_relaxed);
	max = atomic_load_explicit(&stats.fault_ns_max, memory_order_relaxed);
	while (ns > max && !atomic_compare_exchange_weak(&stats.fault_ns_max,
	    &max, ns))
		;
}
