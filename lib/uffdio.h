/*
 * uffdio.h - the userfaultfd ioctls that hpzerod and libhpz's fallback
 * both make, written once (uffdio.c).
 */
#ifndef HPZ_UFFDIO_H
#define HPZ_UFFDIO_H

#include <stdint.h>

int	uffdio_register(int uffd, uint64_t addr, uint64_t len, int faults,
	    uint64_t *ioctls);
int	uffdio_hole_guard(uint64_t addr, uint64_t len);
int	uffdio_wake(int uffd, uint64_t addr, uint64_t len);
int	uffdio_in_file(int fd, uint64_t offset, uint64_t idx,
	    uint64_t page_size);

/* How uffdio_map retries a map refused with EAGAIN (see uffdio.c). */
struct uffdio_map_policy {
	int	 tries;		/* what spends one: per_ioctl */
	int	 per_ioctl;	/* every ioctl spends a try, else an EAGAIN
				   that made no progress */
	int	 partial_now;	/* EAGAIN after some progress: the rest at
				   once, no pump */
	int	 poll_ms;	/* wait on the uffd when a pump read nothing */
	int	 poll_once;	/* once; the next empty pump gives up */
	/* Read what waits in the uffd; how many messages were read. */
	int	(*pump)(void *arg);
	/* Around each ioctl, which may wait on the client's mm (or NULL). */
	void	(*watch)(void *arg, int on);
	void	*arg;		/* pump's and watch's */
};

int	uffdio_map(int uffd, uint64_t addr, uint64_t len, uint64_t page_size,
	    const struct uffdio_map_policy *, uint64_t *done);

#endif /* HPZ_UFFDIO_H */
