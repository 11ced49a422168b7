/*
 * uffd-compat.h - what <linux/userfaultfd.h> lacks on older systems, for
 * both the daemon and libhpz.
 */
#ifndef HPZ_UFFD_COMPAT_H
#define HPZ_UFFD_COMPAT_H

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

#endif /* HPZ_UFFD_COMPAT_H */
