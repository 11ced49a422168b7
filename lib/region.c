/*
 * region.c - hpz_region_create and hpz_region_destroy: a memfd of the
 * chosen page size, sized and mapped MAP_SHARED, ready to register.  A
 * hugetlb region takes its file from hpzerod's pre-zeroed pool when the
 * daemon has one ready (pool.c), else makes its own.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/memfd.h>

#include "libhpz.h"
#include "uffd-compat.h"

/* Region flags hpz_region_create keeps for hpz_register: a new region
 * holds no garbage, so not HPZ_DISCARD. */
#define REGION_CREATE_FLAGS	(HPZ_AHEAD_ONFAULT | HPZ_AHEAD_EAGER | \
	HPZ_PREMAP | HPZ_NO_SCRUB | HPZ_NO_PREMAP)

int
hpz_region_create(struct hpz_region *region, size_t len, unsigned int flags)
{
	unsigned int	 mfd;
	size_t		 page, ready = 0;
	void		*p;
	int		 fd = -1, error;

	if (region == NULL)
		return (lib_fail(-EINVAL, "region is NULL"));
	if ((flags & HPZ_DISCARD) != 0)
		return (lib_fail(-EINVAL, "HPZ_DISCARD: a new region holds no "
		    "garbage"));
	if ((flags & ~(HPZ_PAGE_MASK | HPZ_NO_POOL | REGION_CREATE_FLAGS)) !=
	    0)
		return (lib_fail(-EINVAL, "unknown flags 0x%x (only "
		    "HPZ_PAGE_2M, HPZ_PAGE_1G, HPZ_PAGE_SHMEM, HPZ_NO_POOL and "
		    "region flags but HPZ_DISCARD)", flags));
	switch (flags & HPZ_PAGE_MASK) {
	case HPZ_PAGE_2M:
		mfd = MFD_HUGETLB | MFD_HUGE_2MB;
		page = 2UL << 20;
		break;
	case HPZ_PAGE_1G:
		mfd = MFD_HUGETLB | MFD_HUGE_1GB;
		page = 1UL << 30;
		break;
	case HPZ_PAGE_SHMEM:
		mfd = 0;
		page = (size_t)sysconf(_SC_PAGESIZE);
		break;
	default:
		return (lib_fail(-EINVAL, "HPZ_PAGE_1G and HPZ_PAGE_SHMEM "
		    "are exclusive"));
	}
	if (len == 0 || len % page != 0)
		return (lib_fail(-EINVAL, "length %zu is not a positive "
		    "multiple of the page size %zu", len, page));

	/* A pool file of any size will do: it is cut or grown to len. */
	if (mfd != 0 && (flags & HPZ_NO_POOL) == 0 &&
	    (fd = hpz_pool_take(len, flags & HPZ_PAGE_MASK, "hpz-region",
	    &ready)) < 0)
		fd = -1;
	if (fd == -1 && (fd = memfd_create("hpz-region", MFD_CLOEXEC | mfd)) ==
	    -1)
		return (lib_fail(-errno, "memfd_create: %s", strerror(errno)));
	if (ready != len && ftruncate(fd, (off_t)len) == -1) {
		error = lib_fail(-errno, "ftruncate: %s", strerror(errno));
		close(fd);
		return (error);
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		/* hugetlb: ENOMEM when the pool cannot reserve len. */
		error = lib_fail(-errno, "mmap of %zu bytes: %s%s", len,
		    strerror(errno), mfd != 0 ? " (are enough huge pages "
		    "reserved?)" : "");
		close(fd);
		return (error);
	}
	/*
	 * Map the pool's pages now (unless HPZ_NO_PREMAP), which costs a
	 * page-table entry each (they are allocated and zero: 0.5 us a 2 MiB
	 * page, against 15 for the touch that would map it), before any uffd
	 * can see a fault.
	 */
	if ((flags & HPZ_NO_PREMAP) == 0 && ready > 0)
		(void)madvise(p, ready < len ? ready : len, MADV_POPULATE_WRITE);
	memset(region, 0, sizeof(*region));
	region->addr = p;
	region->len = len;
	region->fd = fd;
	region->offset = 0;
	region->flags = flags & REGION_CREATE_FLAGS;
	return (0);
}

void
hpz_region_destroy(struct hpz_region *region)
{
	if (region == NULL || region->addr == NULL)
		return;
	if (lib_is_registered(region) && hpz_unregister(region) != 0) {
		/* Unmapping ends the registration: nothing can be exposed. */
		munmap(region->addr, region->len);
		lib_forget(region);
	} else
		munmap(region->addr, region->len);
	if (region->fd >= 0)
		close(region->fd);
	memset(region, 0, sizeof(*region));
	region->fd = -1;
}
