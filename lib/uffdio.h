/*
 * uffdio.h - the userfaultfd ioctls that hpzerod and libhpz's fallback
 * both make, written once (uffdio.c).
 */
#ifndef HPZ_UFFDIO_H
#define HPZ_UFFDIO_H

#include <stdint.h>

int	uffdio_register(int uffd, uint64_t addr, uint64_t len, int faults,
	    uint64_t *ioctls);
int	uffdio_wake(int uffd, uint64_t addr, uint64_t len);
int	uffdio_in_file(int fd, uint64_t offset, uint64_t idx,
	    uint64_t page_size);

#endif /* HPZ_UFFDIO_H */
