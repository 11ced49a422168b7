/*
 * uffd.c - read faults from each region's userfaultfd and resolve them:
 * the fault path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/userfaultfd.h>

#include <event2/event.h>

#include "hpzerod.h"

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

/* Faults read per callback before other sources get a turn. */
#define UFFD_READ_BATCH	64

/*
 * The uffd is readable: read fault messages until EAGAIN (or a batch) and
 * hand each to a worker.
 */
void
uffd_read_cb(int fd, short events, void *arg)
{
	struct region	*r = arg;
	struct uffd_msg	 msgs[UFFD_READ_BATCH];
	struct work	*w;
	ssize_t		 n;
	size_t		 i, count;
	uint64_t	 now;

	n = read(fd, msgs, sizeof(msgs));
	if (n == -1) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		/* A broken uffd would wake us forever: stop watching it. */
		log_warn("region %llu: read uffd, no longer serving it",
		    (unsigned long long)r->id);
		event_del(r->ev);
		return;
	}
	now = stats_now_ns();
	count = (size_t)n / sizeof(msgs[0]);
	for (i = 0; i < count; i++) {
		if (msgs[i].event != UFFD_EVENT_PAGEFAULT) {
			log_debug("region %llu: ignoring uffd event %u",
			    (unsigned long long)r->id, msgs[i].event);
			continue;
		}
		if ((w = calloc(1, sizeof(*w))) == NULL)
			fatal("calloc");
		w->region = r;
		w->addr = msgs[i].arg.pagefault.address;
		w->kind = (msgs[i].arg.pagefault.flags &
		    UFFD_PAGEFAULT_FLAG_MINOR) ? FAULT_MINOR : FAULT_MISSING;
		w->tid = msgs[i].arg.pagefault.feat.ptid;
		w->t_read = now;
		atomic_fetch_add(&r->inflight, 1);
		worker_submit(w);
	}
}

/* Map [addr, addr+len) in the client.  0, or a negative errno. */
int
uffd_continue(struct region *r, uint64_t addr, uint64_t len)
{
	struct uffdio_continue	uc;
	int			tries;

	for (tries = 0; tries < 1000; tries++) {
		memset(&uc, 0, sizeof(uc));
		uc.range.start = addr;
		uc.range.len = len;
		if (ioctl(r->uffd, UFFDIO_CONTINUE, &uc) == 0)
			return (0);
		if (errno == EEXIST)	/* already mapped: just wake */
			return (uffd_wake(r, addr, len));
		if (errno != EAGAIN && errno != EINTR)
			return (-errno);
		/* EAGAIN: the mm is changing under us; try again. */
		usleep(10);
	}
	return (-EAGAIN);
}

/* Wake the client's threads waiting on [addr, addr+len). */
int
uffd_wake(struct region *r, uint64_t addr, uint64_t len)
{
	struct uffdio_range	range;

	range.start = addr;
	range.len = len;
	if (ioctl(r->uffd, UFFDIO_WAKE, &range) == -1)
		return (-errno);
	return (0);
}

/*
 * Unregister the region's range in the client's mm: the kernel wakes the
 * waiters and serves later faults itself.  Call only after garbage pages
 * are gone.  Failing because the client's mm is gone is fine.
 */
int
uffd_unregister(struct region *r)
{
	struct uffdio_range	range;

	range.start = r->addr;
	range.len = r->len;
	if (ioctl(r->uffd, UFFDIO_UNREGISTER, &range) == -1) {
		if (errno != ESRCH && errno != EINVAL && errno != ENOMEM)
			log_warn("region %llu: UFFDIO_UNREGISTER",
			    (unsigned long long)r->id);
		return (-errno);
	}
	return (0);
}

/* Allocate the file page behind page idx; the kernel zeroes it. */
static int
uffd_populate(struct region *r, uint64_t idx)
{
	if (fallocate(r->fd, 0, (off_t)(r->offset + idx * r->page_size),
	    (off_t)r->page_size) == -1)
		return (-errno);
	atomic_fetch_add(&stats.pages_populated, 1);
	return (0);
}

/* Tell a thread we cannot back its page: it gets SIGBUS, like the kernel. */
static void
uffd_poison(struct region *r, uint64_t addr)
{
	struct uffdio_poison	up;

	memset(&up, 0, sizeof(up));
	up.range.start = addr;
	up.range.len = r->page_size;
	if (ioctl(r->uffd, UFFDIO_POISON, &up) == -1 && errno != EEXIST)
		uffd_wake(r, addr, r->page_size);
}

/* The client is gone when the uffd's mm has exited. */
static int
uffd_client_gone(int error)
{
	return (error == -ESRCH || error == -ENOENT);
}

/*
 * Resolve one fault (in a worker).  The page is claimed; its state decides:
 * populate a missing page, clear a garbage one, map the rest as they are.
 */
void
uffd_handle(struct work *w)
{
	struct region	*r = w->region;
	uint64_t	 idx, page, ns;
	uint8_t		 was, now;
	enum page_action action;
	int		 error;

	if (w->addr < r->addr || w->addr - r->addr >= r->len) {
		log_warnx("region %llu: fault at 0x%llx outside the region",
		    (unsigned long long)r->id, (unsigned long long)w->addr);
		goto out;
	}
	idx = region_page_index(r, w->addr);
	page = r->addr + idx * r->page_size;

	while (!state_claim(&r->state[idx], &was)) {
		/* Another worker owns it; its map will serve us too. */
		region_wait_page(r, idx);
		atomic_fetch_add(&stats.faults_shared, 1);
	}
	now = was;
	action = state_fault_action(was, w->kind);
	error = 0;
	switch (action) {
	case ACTION_POPULATE:
		error = uffd_populate(r, idx);
		if (error == 0)
			now = PAGE_ZEROED;
		break;
	case ACTION_CLEAR:
		clear_range((char *)r->map + idx * r->page_size, r->page_size);
		atomic_fetch_add(&stats.pages_cleared, 1);
		atomic_fetch_add(&stats.bytes_cleared, r->page_size);
		atomic_fetch_add(&r->cleared, 1);
		now = PAGE_ZEROED;
		break;
	case ACTION_MAP:
		break;
	}
	if (error == 0) {
		error = uffd_continue(r, page, r->page_size);
		if (error == -EFAULT && action == ACTION_MAP) {
			/* The page left the file after the fault: refill. */
			if ((error = uffd_populate(r, idx)) == 0) {
				now = PAGE_ZEROED;
				error = uffd_continue(r, page, r->page_size);
			}
		}
		if (error == 0)
			now = PAGE_MAPPED;
	}
	state_release(&r->state[idx], now);

	if (error == 0) {
		atomic_fetch_add(&stats.faults, 1);
		atomic_fetch_add(w->kind == FAULT_MINOR ? &stats.faults_minor :
		    &stats.faults_missing, 1);
		atomic_fetch_add(&r->faults, 1);
		ns = stats_now_ns() - w->t_read;
		stats_fault_latency(ns);
	} else if (uffd_client_gone(error)) {
		log_debug("region %llu: client gone", (unsigned long long)r->id);
	} else {
		log_warnx("region %llu: cannot serve fault at 0x%llx: %s",
		    (unsigned long long)r->id, (unsigned long long)w->addr,
		    strerror(-error));
		uffd_poison(r, page);
	}
out:
	region_work_done(r);
	free(w);
}
