/*
 * uffdio.c - the userfaultfd ioctls that hpzerod (daemon/intercept.c,
 * daemon/fault.c, daemon/uffd.c) and libhpz's fallback (guard.c) both
 * make: register a range, wake its waiters, and the test that tells a
 * page refused with EFAULT from one past the end of its file.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "uffd-compat.h"
#include "uffdio.h"

/*
 * Register [addr, addr+len) on uffd: for its faults (MISSING | MINOR), or,
 * with faults 0, for write-protection alone, which traps no fault
 * (nothing is write-protected) but keeps the range's events coming: the
 * daemon's way to leave a range without garbage to the kernel.  A range
 * registered for its faults must allow UFFDIO_CONTINUE.  *ioctls (if not
 * NULL) gets what the kernel allows.  0 or a negative errno.
 */
int
uffdio_register(int uffd, uint64_t addr, uint64_t len, int faults,
    uint64_t *ioctls)
{
	struct uffdio_register	reg;

	memset(&reg, 0, sizeof(reg));
	reg.range.start = addr;
	reg.range.len = len;
	reg.mode = faults ? UFFDIO_REGISTER_MODE_MISSING |
	    UFFDIO_REGISTER_MODE_MINOR : UFFDIO_REGISTER_MODE_WP;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) == -1)
		return (-errno);
	if (faults && (reg.ioctls & (1ULL << _UFFDIO_CONTINUE)) == 0)
		return (-ENOTSUP);
	if (ioctls != NULL)
		*ioctls = reg.ioctls;
	return (0);
}

/* Wake the threads waiting on [addr, addr+len).  0 or a negative errno. */
int
uffdio_wake(int uffd, uint64_t addr, uint64_t len)
{
	struct uffdio_range	range;

	range.start = addr;
	range.len = len;
	if (ioctl(uffd, UFFDIO_WAKE, &range) == -1)
		return (-errno);
	return (0);
}

/*
 * A map refused with EFAULT: page idx is missing from the file again after
 * we put it back (the client punched it twice, its right: a balloon does).
 * Does the page still lie inside the file (fd, the range at offset)?  Then
 * the thread may use it: wake it and it faults again.  Past the end of the
 * file it is the kernel's SIGBUS.  The file is hugetlbfs or shmem: fstat
 * of it cannot block.
 */
int
uffdio_in_file(int fd, uint64_t offset, uint64_t idx, uint64_t page_size)
{
	struct stat	st;

	return (fstat(fd, &st) == 0 &&
	    offset + (idx + 1) * page_size <= (uint64_t)st.st_size);
}
