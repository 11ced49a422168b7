/*
 * uffd-compat.h - what the kernel headers (<linux/userfaultfd.h>,
 * <sys/mman.h>, <linux/memfd.h>) lack on older systems, for the daemon,
 * libhpz and the client programs: each fallback names the Linux that
 * brought it.
 */
#ifndef HPZ_UFFD_COMPAT_H
#define HPZ_UFFD_COMPAT_H

#include <sys/mman.h>
#include <linux/memfd.h>
#include <linux/userfaultfd.h>

#ifndef UFFDIO_POISON
/* Linux 6.6; Debian 12's headers predate it. */
#define _UFFDIO_POISON	(0x08)
struct uffdio_poison {
	struct uffdio_range	range;
	__u64			mode;
	__s64			updated;
};
#define UFFDIO_POISON	_IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/* mmap(MAP_HUGETLB) page sizes (Linux 3.8); glibc may not define them. */
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT		26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB		(21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB		(30 << MAP_HUGE_SHIFT)
#endif

/* memfd_create(MFD_HUGETLB) page sizes (Linux 4.14). */
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB		(21U << MFD_HUGE_SHIFT)
#endif
#ifndef MFD_HUGE_1GB
#define MFD_HUGE_1GB		(30U << MFD_HUGE_SHIFT)
#endif

#endif /* HPZ_UFFD_COMPAT_H */
