/*
 * serve.c - libhpz's fallback fault server: what serves a region's faults
 * while no daemon does.  The guard (guard.c) decides when; this takes a
 * region's server lock and serves its faults with the daemon's own resolve
 * transaction (resolve.c) and map loop (uffdio.c), and lets go of it
 * again.  Everything here runs under lib_rlock: on the guard thread, or
 * from a call that lets a region go (lib_lock held too).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/userfaultfd.h>

#include "libhpz.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffdio.h"
#include "uffd-compat.h"

/* uffd messages read at once. */
#define LIB_READ_BATCH		64

/* Messages read from one uffd, handled in order (guard thread only). */
struct uffd_msg		*lib_q;
size_t			 lib_qn, lib_qcap;

/* A library has no log: one line on stderr, for rare events only. */
void
lib_warn(const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "libhpz[%d]: %s\n", (int)getpid(), buf);
}

/* Map a region's backing range for ourselves (not inherited by children). */
static void *
lib_map_backing(struct lib_region *lr)
{
	void	*p;

	p = mmap(NULL, lr->len, PROT_READ | PROT_WRITE, MAP_SHARED, lr->fd,
	    (off_t)lr->offset);
	if (p == MAP_FAILED)
		return (NULL);
	madvise(p, lr->len, MADV_DONTFORK);
	return (p);
}

/* Where lib_clear_run writes: our serving map, or one made for it. */
struct lib_clear {
	struct lib_region	*lr;
	void			*map;
};

/* The file would not punch pages [first, first+n): write zeros instead. */
static int
lib_clear_run(void *arg, uint64_t first, uint64_t n)
{
	struct lib_clear	*lc = arg;
	struct lib_region	*lr = lc->lr;

	if (lc->map == NULL && (lc->map = lib_map_backing(lr)) == NULL) {
		lib_warn("region %p: cannot drop or clear garbage: it stays "
		    "registered", (void *)lr->addr);
		return (-1);
	}
	memset((char *)lc->map + first * lr->page_size, 0, n * lr->page_size);
	return (0);
}

/* Bytes of garbage lib_keep_garbage clears in one go. */
#define LIB_KEEP_RUN_BYTES	(64ULL << 20)

/* Where lib_keep_garbage writes: a guarded mapping of its own. */
struct lib_keep {
	struct lib_region	*lr;
	char			*map;
};

static int
lib_keep_zero(void *arg, uint64_t idx, uint64_t n)
{
	struct lib_keep		*lk = arg;
	uint64_t		 ps = lk->lr->page_size;

	memset(lk->map + idx * ps, 0, n * ps);
	return (0);
}

static int
lib_keep_run(void *arg, uint64_t first, uint64_t n)
{
	struct lib_keep		*lk = arg;

	return (state_zero_present(lk->map, lk->lr->page_size, first, n,
	    lib_keep_zero, lk, NULL));
}

/*
 * Clear every garbage page in place and call it kept (server lock held),
 * as the daemon does before it lets go of a range: the pages stay in the
 * file, allocated as the client had them (a hugetlbfs punch would give
 * them and their reservation to anyone), and whatever the kernel shows
 * there from then on is zeros or the client's data.  Through a mapping of
 * our own whose holes a userfaultfd guards (no hole is filled); without a
 * mapping, the old way: punched, the last resort.  A region flagged
 * HPZ_RELEASE_HOLES (handed to a userfaultfd that serves missing pages)
 * is punched as asked.
 */
void
lib_keep_garbage(struct lib_region *lr)
{
	struct lib_keep		lk = { lr, NULL };
	struct lib_clear	lc = { lr, lr->map };
	uint64_t		run = LIB_KEEP_RUN_BYTES / lr->page_size, left;
	void			*p;
	int			guard;

	/* Holes asked for: a userfaultfd of the program's serves them. */
	if (lr->flags & HPZ_RELEASE_HOLES)
		goto punch;
	p = mmap(NULL, lr->len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_NORESERVE, lr->fd, (off_t)lr->offset);
	if (p != MAP_FAILED) {
		lk.map = p;
		madvise(p, lr->len, MADV_DONTFORK);
		/* Unguarded, a hole is filled (zeros): a page more, not less. */
		guard = uffdio_hole_guard((uint64_t)(uintptr_t)p, lr->len);
		(void)state_keep_garbage(lr->state, lr->npages, run,
		    lib_keep_run, &lk, &left);
		if (guard >= 0)
			close(guard);
		munmap(p, lr->len);
		if (left == 0)
			return;
	}
	lib_warn("region %p: cannot clear its garbage in place: punched "
	    "from the file", (void *)lr->addr);
punch:
	(void)state_drop_garbage(lr->state, lr->npages, lr->fd, lr->offset,
	    lr->page_size, lib_clear_run, &lc, NULL);
	if (lc.map != NULL && lc.map != lr->map)
		munmap(lc.map, lr->len);
}

/* Stop serving a region ourselves (rlock held): unmap, drop the lock. */
void
lib_serve_stop(struct lib_region *lr)
{
	if (lr->map != NULL)
		munmap(lr->map, lr->len);
	lr->map = NULL;
	if (lr->lockfd >= 0)
		close(lr->lockfd);
	lr->lockfd = -1;
	lr->serving = 0;
}

/*
 * Does the page state say garbage anywhere?  The bytes are walked where
 * the memfd holds data (holes are "keep"); when that cannot be told, yes.
 */
static int
lib_state_garbage(struct lib_region *lr)
{
	off_t		d, h, end = (off_t)HPZ_STATE_SIZE(lr->npages);
	uint64_t	i;

	for (d = HPZ_STATE_PAGES_OFF; d < end; d = h) {
		if ((d = lseek(lr->sfd, d, SEEK_DATA)) == -1)
			return (errno != ENXIO);
		if ((h = lseek(lr->sfd, d, SEEK_HOLE)) == -1 || h > end)
			h = end;
		for (i = (uint64_t)d - HPZ_STATE_PAGES_OFF;
		    i < (uint64_t)h - HPZ_STATE_PAGES_OFF && i < lr->npages;
		    i++)
			if ((atomic_load(&lr->state[i]) & PAGE_STATE_MASK) ==
			    PAGE_GARBAGE)
				return (1);
	}
	return (0);
}

/*
 * Serve a region ourselves (rlock held): take its server lock (-EAGAIN: a
 * live daemon has it), resolve what a dead server left busy, register the
 * range again (a daemon that exited cleanly unregistered it), map the
 * backing range, and wake every thread whose fault message the dead
 * server read and never answered: they fault again, to us.
 */
int
lib_serve_start(struct lib_region *lr)
{
	struct hpz_state_header	*h = lr->smap;
	struct uffdio_range	 range;
	int			 lockfd, error;

	if (lr->serving || lr->gone)
		return (0);
	if ((lockfd = state_lock_server(lr->sfd, 0)) < 0)
		return (lockfd);
	state_recover(lr->state, lr->npages);
	h->generation++;
	h->server_pid = (int32_t)getpid();
	if ((lr->map = lib_map_backing(lr)) == NULL) {
		error = -errno;
		close(lockfd);
		return (error);
	}
	lr->lockfd = lockfd;
	/*
	 * Faults only where garbage is: a range without leaves them to the
	 * kernel, as the daemon does; a reset of ours traps them first.
	 */
	lr->trapping = lib_state_garbage(lr);
	if ((error = uffdio_register(lr->uffd, lr->addr, lr->len,
	    lr->trapping, NULL)) != 0 && !lr->trapping &&
	    (error = uffdio_register(lr->uffd, lr->addr, lr->len, 1,
	    NULL)) == 0)
		lr->trapping = 1;
	if (error != 0) {
		/* The range is gone: leave no garbage in the file. */
		lib_warn("region %p: cannot register it again (%s): not "
		    "serving it", (void *)lr->addr, strerror(-error));
		lib_keep_garbage(lr);
		lib_serve_stop(lr);
		lr->gone = 1;
		return (error);
	}
	lr->serving = 1;
	range.start = lr->addr;
	range.len = lr->len;
	ioctl(lr->uffd, UFFDIO_WAKE, &range);
	return (0);
}

/* Read what a region's uffd holds onto the queue; how many messages. */
static size_t
lib_serve_read(struct lib_region *lr)
{
	struct uffd_msg	*q;
	ssize_t		 n;
	size_t		 cap;

	if (lib_qcap - lib_qn < LIB_READ_BATCH) {
		cap = lib_qcap * 2 + LIB_READ_BATCH;
		if ((q = realloc(lib_q, cap * sizeof(*q))) == NULL)
			return (0);
		lib_q = q;
		lib_qcap = cap;
	}
	n = read(lr->uffd, lib_q + lib_qn, LIB_READ_BATCH * sizeof(*lib_q));
	if (n <= 0)
		return (0);
	lib_qn += (size_t)n / sizeof(*lib_q);
	return ((size_t)n / sizeof(*lib_q));
}

static int
lib_wake(struct lib_region *lr, uint64_t addr, uint64_t len)
{
	return (uffdio_wake(lr->uffd, addr, len));
}

/* Allocate pages [idx, idx+n) in the file through our mapping. */
static int
lib_populate(struct lib_region *lr, uint64_t idx, uint64_t n)
{
	return (state_populate(lr->map, lr->fd, lr->offset, lr->page_size,
	    idx, n));
}

static int
lib_op_populate(struct resolve *rs, uint64_t idx, uint64_t n)
{
	return (lib_populate(rs->arg, idx, n));
}

/*
 * Write zeros over pages [lo, lo+n) through our own mapping.  This runs in
 * the client's own process, so no SIGBUS handler is set behind the
 * program's back: the pages are put in the file first (MADV_POPULATE_WRITE
 * answers EFAULT, never a signal, when the file cannot have them), and
 * the memset after that can only fault if this very process truncates or
 * punches its own file meanwhile, which is the SIGBUS its own thread would
 * get touching the page.
 */
static int
lib_op_clear(struct resolve *rs, uint64_t lo, uint64_t n)
{
	struct lib_region	*lr = rs->arg;
	int			 error;

	if ((error = lib_populate(lr, lo, n)) != 0)
		return (error);
	memset((char *)lr->map + lo * lr->page_size, 0, n * lr->page_size);
	return (0);
}

/* Read what waits in a region's uffd onto the queue (uffdio_map's pump). */
static int
lib_map_pump(void *arg)
{
	return ((int)lib_serve_read(arg));
}

/*
 * Map [idx, idx+n) in our own process (uffdio_map).  EAGAIN means a
 * non-cooperative event (unmap, remap, remove) is changing the mm and
 * waits for someone to read it: that is us, so read (the messages queue
 * up, handled in order) and try again; wait on the uffd rather than spin
 * when nothing is there.  Our own mm settles: 1000 ioctls at most.
 */
static int
lib_op_map(struct resolve *rs, uint64_t idx, uint64_t n, uint64_t *done)
{
	struct lib_region		*lr = rs->arg;
	struct uffdio_map_policy	 p = {
		.tries = 1000,
		.per_ioctl = 1,
		.partial_now = 0,
		.poll_ms = 1,
		.poll_once = 0,
		.pump = lib_map_pump,
		.watch = NULL,
		.arg = lr,
	};

	return (uffdio_map(lr->uffd, lr->addr + idx * lr->page_size,
	    n * lr->page_size, lr->page_size, &p, done));
}

static void
lib_op_wake(struct resolve *rs, uint64_t idx, uint64_t n)
{
	struct lib_region	*lr = rs->arg;

	(void)lib_wake(lr, lr->addr + idx * lr->page_size, n * lr->page_size);
}

static const struct resolve_ops lib_ops = {
	.populate = lib_op_populate,
	.clear = lib_op_clear,
	.map = lib_op_map,
	.wake = lib_op_wake,
	.want_map = NULL,
};

/*
 * A hole no page could fill (only the guard thread serves): tried again
 * (0) while the host has a free huge page, and for LIB_NOPAGE_MS after it
 * was first seen with none; then 1 (the daemon's fault_no_page).
 */
#define LIB_NOPAGE_MS	1000
static int
lib_no_page(const struct lib_region *lr)
{
	static int		 np_on;
	static struct timespec	 np_since;
	struct timespec		 now;

	if (!state_no_free_page(lr->page_size)) {
		np_on = 0;
		return (0);
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!np_on) {
		np_on = 1;
		np_since = now;
		return (0);
	}
	return ((now.tv_sec - np_since.tv_sec) * 1000 +
	    (now.tv_nsec - np_since.tv_nsec) / 1000000 >= LIB_NOPAGE_MS);
}

/*
 * Resolve one fault as the daemon does, through the same transaction
 * (resolve.c): claim the page, let its state alone decide whether zeros
 * are written, say it is cleared before it is mapped, map it, release it.
 * Only the guard thread serves, under lib_rlock, so the table of held
 * pages lives as long as the fault; a BUSY bit found is nobody's.
 */
static void
lib_serve_fault(struct lib_region *lr, uint64_t addr, uint64_t flags)
{
	static int		 warned;
	struct uffdio_poison	 up;
	struct resolve_table	 t;
	struct resolve		 rs;
	enum fault_kind		 kind;
	uint64_t		 idx, page;
	int			 error;

	if (!lr->serving || addr < lr->addr || addr - lr->addr >= lr->len) {
		lib_wake(lr, addr & ~(LIB_BASE_PAGE - 1), LIB_BASE_PAGE);
		return;
	}
	kind = (flags & UFFD_PAGEFAULT_FLAG_MINOR) ? FAULT_MINOR :
	    FAULT_MISSING;
	idx = (addr - lr->addr) / lr->page_size;
	page = lr->addr + idx * lr->page_size;
	resolve_table_init(&t, lr->state, lr->npages, 0);
	resolve_begin(&rs, &t, &lib_ops, lr, kind, 0);
	if (resolve_claim(&rs, idx, addr - page, NULL) != RESOLVE_CLAIMED) {
		resolve_table_destroy(&t);
		lib_wake(lr, page, lr->page_size);
		return;
	}
	resolve_run(&rs);
	resolve_table_destroy(&t);
	switch (rs.result[0]) {
	case RESOLVE_DONE:
		return;
	case RESOLVE_FAILED:
	case RESOLVE_LOST:
		break;
	default:
		/* Not mapped (the mm never settled): let it fault again. */
		lib_wake(lr, page, lr->page_size);
		return;
	}
	error = rs.error;
	if (error == -ESRCH || error == -ENOENT)
		return;
	/*
	 * Punched again while we mapped it, inside the file: fault again;
	 * unless the host has had no free huge page for it for a while: then
	 * SIGBUS, the kernel's own answer (the daemon's fault_no_page).
	 */
	if (error == -EFAULT && uffdio_in_file(lr->fd, lr->offset, idx,
	    lr->page_size)) {
		if (!lib_no_page(lr)) {
			lib_wake(lr, page, lr->page_size);
			return;
		}
		error = -ENOSPC;
	}
	if (!warned++)
		lib_warn("region %p: cannot serve a fault at 0x%llx: %s",
		    (void *)lr->addr, (unsigned long long)addr,
		    strerror(-error));
	/* Like the kernel when it cannot back a page: SIGBUS, not a hang. */
	memset(&up, 0, sizeof(up));
	up.range.start = page;
	up.range.len = lr->page_size;
	if (ioctl(lr->uffd, UFFDIO_POISON, &up) == -1 && errno != EEXIST)
		lib_wake(lr, page, lr->page_size);
}

/* One message from a region's uffd: a fault, or an event to consume. */
static void
lib_serve_msg(struct lib_region *lr, const struct uffd_msg *msg)
{
	static int	warned_fork;

	switch (msg->event) {
	case UFFD_EVENT_PAGEFAULT:
		lib_serve_fault(lr, msg->arg.pagefault.address,
		    msg->arg.pagefault.flags);
		break;
	case UFFD_EVENT_FORK:
		/* We serve no child (MADV_DONTFORK should keep them out). */
		close((int)msg->arg.fork.ufd);
		if (!warned_fork++)
			lib_warn("region %p: a child inherited a registered "
			    "range; libhpz does not serve children",
			    (void *)lr->addr);
		break;
	case UFFD_EVENT_REMAP:
		if (msg->arg.remap.from == lr->addr &&
		    msg->arg.remap.len == lr->len) {
			lr->addr = msg->arg.remap.to;
			/* Where the next server (and lib_follow) looks. */
			((struct hpz_state_header *)lr->smap)->addr = lr->addr;
		}
		break;
	case UFFD_EVENT_UNMAP:
		if (msg->arg.remove.start <= lr->addr &&
		    msg->arg.remove.end >= lr->addr + lr->len &&
		    lr->serving) {
			/* Gone from the mm: no garbage may stay in the file. */
			lib_keep_garbage(lr);
			lib_serve_stop(lr);
			lr->gone = 1;
		}
		break;
	case UFFD_EVENT_REMOVE:
	default:
		/* Reading it was what the client waited for. */
		break;
	}
}

/* Handle what a region's uffd holds (rlock held, guard thread). */
void
lib_serve_uffd(struct lib_region *lr)
{
	struct uffd_msg	msg;
	size_t		i;

	lib_qn = 0;
	if (lib_serve_read(lr) == 0)
		return;
	/* lib_op_map may read more onto the queue: copy each out. */
	for (i = 0; i < lib_qn; i++) {
		msg = lib_q[i];
		lib_serve_msg(lr, &msg);
	}
	lib_qn = 0;
}
