/*
 * region-page.c - a region's pages, for every layer that serves them:
 * where the region lies in its client now, which node holds a page,
 * allocating pages of its file, and the count of work in flight on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>

#include <numaif.h>

#include "hpz.h"
#include "hpz-state.h"

#include "hostmem.h"
#include "region.h"
#include "topo.h"

/* Do [a, a+alen) and [b, b+blen) share a byte? */
int
region_overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	if (alen == 0 || blen == 0)
		return (0);
	/* Distances, not ends: a range may end exactly at 2^64. */
	return (a <= b ? b - a < alen : a - b < blen);
}

/*
 * Where the region lies in the client now.  A worker reading the client's
 * mremap event writes it (uffd.c) while the main thread and the workers
 * read it: every access goes through these two.
 */
uint64_t
region_addr(const struct region *r)
{
	return (__atomic_load_n(&r->addr, __ATOMIC_ACQUIRE));
}

void
region_set_addr(struct region *r, uint64_t addr)
{
	__atomic_store_n(&r->addr, addr, __ATOMIC_RELEASE);
}

uint64_t
region_page_index(const struct region *r, uint64_t addr)
{
	return ((addr - region_addr(r)) / r->page_size);
}

/* A worker finished an item of this region: wake anyone waiting. */
void
region_work_done(struct region *r)
{
	pthread_mutex_lock(&r->lock);
	atomic_fetch_sub(&r->inflight, 1);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/*
 * The node the client's policy asks for at addr, from its numa_maps
 * ("bind:N" or "prefer:N" naming one node), or -1.
 */
int
region_client_node(pid_t pid, uint64_t addr)
{
	char		 path[64], line[4096], *p;
	FILE		*f;
	unsigned long long start;
	int		 node = -1;

	if (pid <= 0)
		return (-1);
	snprintf(path, sizeof(path), "/proc/%d/numa_maps", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL) {
		start = strtoull(line, &p, 16);
		if (start != addr || *p != ' ')
			continue;
		p++;
		if ((strncmp(p, "bind:", 5) == 0 ||
		    strncmp(p, "prefer:", 7) == 0) &&
		    strpbrk(strchr(p, ':'), ",-") > strchr(p, ' '))
			node = atoi(strchr(p, ':') + 1);
		break;
	}
	fclose(f);
	return (node);
}

/* The node holding page idx (present pages), else the region's choice. */
int
region_page_node(const struct region *r, uint64_t idx)
{
	int	node = -1;

	if (topo.nnodes <= 1)
		return (-1);
	if (get_mempolicy(&node, NULL, 0, (char *)r->map + idx * r->page_size,
	    MPOL_F_NODE | MPOL_F_ADDR) == -1)
		return (r->node);
	return (node);
}

/* Allocate pages [idx, idx+n) of the file (state_populate). */
int
region_populate(struct region *r, uint64_t idx, uint64_t n)
{
	return (state_populate(r->map, r->fd, r->offset, r->page_size, idx,
	    n));
}

/*
 * Allocate page idx of the file for background work (scrub.c: scrub,
 * eager and read-ahead population, premap), which no client waits for:
 * 0 (the page is there), -ENOSPC (hugetlbfs: the host is at its reserve),
 * -EDQUOT (shmem: the region's background fills are spent), or a negative
 * errno.
 *
 * hugetlbfs: while the host has more free, unreserved pages than the
 * reserve ([pool] reserve_2m, reserve_1g), checked under hostmem_lock so
 * that our own threads do not pass it together.  A hole the client's
 * mapping reserved costs the host nothing (resv_hugepages falls with
 * free_hugepages), but only the counters around a fill tell such a hole
 * from an unreserved one, and a fill cannot be undone (the client may
 * write the page at once).  So each fill is watched: one that took the
 * reservation marks the region's holes reserved (a mapping without
 * MAP_NORESERVE reserves its whole range), one taken from the free pages
 * marks them not.  At the reserve, a region known reserved goes on, one
 * known not stops, and one not known yet fills one page to learn: at
 * most one page below the reserve in the region's life, and none once a
 * fill above the reserve has taught us.
 *
 * shmem: a page in the page cache (mincore on our mapping, no call on the
 * client's file) is there; a hole is filled only while the region's
 * background fills are fewer than its pages (its size, once over its
 * life), so that a client punching its file again and again does not have
 * it refilled without end in the daemon's memory cgroup.
 */
int
region_populate_spare(struct region *r, uint64_t idx)
{
	unsigned char	vec[1];
	char		*p = (char *)r->map + idx * r->page_size;
	long long	 f0, v0, f1, v1;
	int		 error, known;

	if (r->fs_magic != HUGETLBFS_MAGIC) {
		if (mincore(p, 4096, vec) == 0 && (vec[0] & 1))
			return (0);
		if (atomic_fetch_add(&r->bg_filled, 1) >= r->npages) {
			atomic_store(&r->bg_filled, r->npages);
			return (-EDQUOT);
		}
		return (region_populate(r, idx, 1));
	}
	hostmem_lock();
	known = hostmem_counts(r->page_size, &f0, &v0) == 0;
	if (known && f0 - v0 - (long long)hostmem_reserve(r->page_size) < 1 &&
	    r->bg_resv < 0) {
		hostmem_unlock();
		return (-ENOSPC);
	}
	error = region_populate(r, idx, 1);
	if (error == 0 && known && hostmem_counts(r->page_size, &f1,
	    &v1) == 0) {
		if (v1 < v0)
			r->bg_resv = 1;		/* the file's reservation */
		else if (f1 < f0)
			r->bg_resv = -1;	/* the host's free pages */
	}
	hostmem_unlock();
	return (error);
}
