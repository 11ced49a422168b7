/*
 * hostmem.c - the host's free huge pages and the reserve.  The pools
 * (pool.c) and every page the daemon allocates on a client's behalf in
 * the background (scrub.c: scrub, eager and read-ahead population,
 * premap) leave the reserve to programs that do not use hpzerod: they
 * allocate only while the host has more free, unreserved pages than it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hostmem.h"

#define HOSTMEM_2M	(2ULL << 20)
#define HOSTMEM_1G	(1ULL << 30)

static _Atomic uint64_t	 hostmem_resv_2m;	/* pages */
static _Atomic uint64_t	 hostmem_resv_1g;
static pthread_mutex_t	 hostmem_mtx = PTHREAD_MUTEX_INITIALIZER;

void
hostmem_set_reserve(uint64_t bytes_2m, uint64_t bytes_1g)
{
	atomic_store(&hostmem_resv_2m, bytes_2m / HOSTMEM_2M);
	atomic_store(&hostmem_resv_1g, bytes_1g / HOSTMEM_1G);
}

uint64_t
hostmem_reserve(uint64_t page_size)
{
	if (page_size == HOSTMEM_2M)
		return (atomic_load(&hostmem_resv_2m));
	if (page_size == HOSTMEM_1G)
		return (atomic_load(&hostmem_resv_1g));
	return (0);
}

/* A number from a sysfs file of page_size's directory, or -1. */
static long long
hostmem_read(uint64_t page_size, const char *name)
{
	char		path[128], buf[32];
	ssize_t		n;
	int		fd;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/"
	    "hugepages-%llukB/%s", (unsigned long long)(page_size >> 10), name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return (-1);
	buf[n] = '\0';
	return (strtoll(buf, NULL, 10));
}

int
hostmem_counts(uint64_t page_size, long long *free_pages, long long *resv)
{
	*free_pages = hostmem_read(page_size, "free_hugepages");
	*resv = hostmem_read(page_size, "resv_hugepages");
	return (*free_pages < 0 || *resv < 0 ? -1 : 0);
}

long long
hostmem_avail(uint64_t page_size)
{
	long long	free_pages, resv;

	if (hostmem_counts(page_size, &free_pages, &resv) != 0)
		return (-1);
	return (free_pages - resv);
}

int64_t
hostmem_spare(uint64_t page_size)
{
	long long	avail = hostmem_avail(page_size);

	if (avail < 0)
		return (INT64_MIN);
	return ((int64_t)avail - (int64_t)hostmem_reserve(page_size));
}

void
hostmem_lock(void)
{
	pthread_mutex_lock(&hostmem_mtx);
}

void
hostmem_unlock(void)
{
	pthread_mutex_unlock(&hostmem_mtx);
}
