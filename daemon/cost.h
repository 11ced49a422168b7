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

struct region;

/* cost.c: what a fault costs here, and whether the daemon pays. */
struct cost {
	uint64_t	 rt_ns;		/* uffd round trip, the page cached */
	int		 huge;		/* rt_ns measured on a 2 MiB page */
	uint64_t	 kzero_ns;	/* the kernel zeroing a 2 MiB page */
	uint64_t	 ktouch_ns;	/* its first touch: fault + zeroing */
	uint64_t	 clear_ns;	/* our bulk clear of a 2 MiB page */
	int		 measured;	/* rt_ns and ktouch_ns both known */
};
void		 cost_measure(void);
void		 cost_get(struct cost *);
void		 cost_text(char *, size_t);
double		 cost_fault_gain(const struct cost *, uint64_t page_size);
int		 cost_keep(const struct cost *, uint64_t page_size, int scrub,
		    int demand, int ncpus, int queued, int nworkers,
		    uint64_t observed_ns);
int		 cost_keep_region(const struct region *, int scrub);
int		 cost_demand(void);
void		 cost_observe(struct region *, uint64_t ns);
uint64_t	 cost_served_2m(void);
long long	 cost_host_avail(uint64_t page_size);

#endif /* HPZD_COST_H */
