/*
 * uffdio.c - the userfaultfd ioctls that hpzerod (daemon/intercept.c,
 * daemon/fault.c, daemon/uffd.c) and libhpz's fallback (serve.c) both
 * make: register a range, wake its waiters, map a range with the EAGAIN
 * pump, and the test that tells a page refused with EFAULT from one past
 * the end of its file.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

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

/*
 * Guard a mapping of our own against allocating: a new userfaultfd with
 * UFFD_FEATURE_SIGBUS, [addr, addr+len) registered MISSING on it.  From
 * then on a touch of a page the file lacks (a hole, past its end) is
 * refused instead of given a fresh page: MADV_POPULATE_WRITE answers
 * EFAULT, a store meets SIGBUS.  Pages in the file map as before.  The
 * guard's fd (closing it lifts the guard), or a negative errno.
 */
int
uffdio_hole_guard(uint64_t addr, uint64_t len)
{
	struct uffdio_api	api;
	struct uffdio_register	reg;
	int			fd, dev, error;

	if ((fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)) < 0) {
		error = -errno;
		if ((dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC)) < 0)
			return (error);
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(dev);
		if (fd < 0)
			return (error);
	}
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_SIGBUS;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = addr;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(fd, UFFDIO_API, &api) == -1 || api.api != UFFD_API ||
	    ioctl(fd, UFFDIO_REGISTER, &reg) == -1) {
		error = errno != 0 ? -errno : -ENOTSUP;
		close(fd);
		return (error);
	}
	return (fd);
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

/*
 * UFFDIO_CONTINUE [addr, addr+len) on uffd, retried while EAGAIN says an
 * event is pending (the client's mm is changing and waits for its uffd to
 * be read): pump what waits there, try again.  EINTR tries again.  A part
 * mapped before the kernel stopped is skipped (the kernel woke it).  0, or
 * a negative errno with *done pages mapped before the one refused.
 *
 * The daemon (daemon/uffd.c uffd_map) and libhpz's fallback (serve.c
 * lib_op_map) retry differently in four ways, and p says which:
 *  1. What spends a try.  The daemon: an EAGAIN that made no progress
 *     (EINTR and partial progress are free), its caller's tries, and the
 *     last one is not pumped.  libhpz: every ioctl, whatever it answered,
 *     1000 of them, and every EAGAIN is pumped, the last too.  p->tries,
 *     and p->per_ioctl for libhpz's count.
 *  2. EAGAIN after some progress.  The daemon maps the rest at once;
 *     libhpz pumps first, as for any EAGAIN.  p->partial_now.
 *  3. The pump.  The daemon reads and handles up to UFFD_PUMP_BATCHES
 *     batches under the region's evlock; libhpz reads one batch onto its
 *     queue, handled in order after the fault.  p->pump.
 *  4. When the pump read nothing.  The daemon waits on the uffd once
 *     (UFFD_SETTLE_POLL_MS) and gives up at the next empty pump: the mm
 *     is the client's to settle, and no worker waits for it.  libhpz waits
 *     1 ms every time: its own mm, only its 1000 tries bound it.
 *     p->poll_ms, and p->poll_once for the daemon's once.
 * And p->watch: the daemon's workers are watched while an ioctl may wait
 * on the client's mm (worker_ioctl_enter); libhpz has no watchdog (NULL).
 */
int
uffdio_map(int uffd, uint64_t addr, uint64_t len, uint64_t page_size,
    const struct uffdio_map_policy *p, uint64_t *done)
{
	struct uffdio_continue	uc;
	struct pollfd		pfd;
	uint64_t		mapped = 0;
	int			tries = p->tries, polled = 0, error = EAGAIN;

	for (;;) {
		if (p->per_ioctl && tries-- <= 0)
			break;
		memset(&uc, 0, sizeof(uc));
		uc.range.start = addr;
		uc.range.len = len;
		if (p->watch != NULL)
			p->watch(p->arg, 1);
		if (ioctl(uffd, UFFDIO_CONTINUE, &uc) == 0) {
			if (p->watch != NULL)
				p->watch(p->arg, 0);
			*done = (mapped + len) / page_size;
			return (0);
		}
		error = errno;
		if (p->watch != NULL)
			p->watch(p->arg, 0);
		if (uc.mapped > 0 && (uint64_t)uc.mapped < len) {
			addr += (uint64_t)uc.mapped;
			len -= (uint64_t)uc.mapped;
			mapped += (uint64_t)uc.mapped;
			if (error == EAGAIN && p->partial_now)
				continue;	/* partial: the rest, now */
		}
		if (error == EINTR)
			continue;
		if (error != EAGAIN || (!p->per_ioctl && --tries <= 0))
			break;
		if (p->pump(p->arg) > 0)
			continue;
		if (polled && p->poll_once)
			break;
		pfd.fd = uffd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		(void)poll(&pfd, 1, p->poll_ms);
		polled = 1;
	}
	*done = mapped / page_size;
	return (-error);
}
