/*
 * hostmem.h - the host's free huge pages, and the reserve the daemon's
 * own allocations leave to other programs ([pool] reserve_2m, reserve_1g
 * in hpzerod.conf).  A leaf: sysfs and a lock, nothing of the daemon.
 */
#ifndef HPZD_HOSTMEM_H
#define HPZD_HOSTMEM_H

#include <stdint.h>

/* The reserves, in bytes (scrub_configure passes the conf's). */
void		 hostmem_set_reserve(uint64_t bytes_2m, uint64_t bytes_1g);
/* Pages of page_size the reserve keeps (0 for sizes without one). */
uint64_t	 hostmem_reserve(uint64_t page_size);
/* Free, unreserved pages of page_size (free less resv), or -1. */
long long	 hostmem_avail(uint64_t page_size);
/* free_hugepages and resv_hugepages of page_size: 0, or -1. */
int		 hostmem_counts(uint64_t page_size, long long *free_pages,
		    long long *resv);
/* Pages above the reserve (negative: below), or INT64_MIN unknown. */
int64_t		 hostmem_spare(uint64_t page_size);
/* Held around a checked allocation, so two of ours see each other's. */
void		 hostmem_lock(void);
void		 hostmem_unlock(void);

#endif /* HPZD_HOSTMEM_H */
