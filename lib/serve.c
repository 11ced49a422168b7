/*
 * serve.c - libhpz when hpzerod goes away: its fallback fault server.  A
 * guard thread watches the connection; when it ends (crash, kill,
 * watchdog, restart) the guard tries to connect again every LIB_RETRY_MS
 * and registers every region again on the same userfaultfd, backing file
 * and page-state memfd, so that the new daemon adopts the state.  If no
 * daemon answers within HPZ_FALLBACK_MS, the guard takes each region's
 * server lock and serves the faults itself with the daemon's own resolve
 * transaction (resolve.c) and map loop (uffdio.c), until a daemon is back.
 *
 * Locks: lib_lock (client.c) owns the connection and may be held across
 * anything, madvise included, which with non-cooperative uffd events waits
 * for someone to read the uffd.  lib_rlock guards the region list and the
 * mode, and is never held across anything that waits on the client's
 * memory or the daemon.  The guard never blocks on lib_lock (trylock), so
 * it can always read the uffds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>

#include "libhpz.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffdio.h"
#include "uffd-compat.h"

#define LIB_FALLBACK_MS_DEFAULT	2000
/* How often we try to reach a daemon while it is away. */
#define LIB_RETRY_MS		100
/*
 * How long letting go of a region waits for a server that holds its page
 * state (one finishing a fault): a server lets go in microseconds, one
 * that does not in this long is another live server.
 */
#define LIB_ABANDON_LOCK_MS	100
/* uffd messages read at once. */
#define LIB_READ_BATCH		64

pthread_mutex_t		 lib_rlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 lib_rcond = PTHREAD_COND_INITIALIZER;
static enum lib_mode	 lib_mode = LIB_CONNECTED;
static uint64_t		 lib_lost_at;		/* ms, CLOCK_MONOTONIC */
static uint64_t		 lib_conn_gen;		/* bumped by every connect */
static int		 lib_guard_sock = -1;	/* copy of the connection */
static int		 lib_guard_poll = -1;	/* the guard's own copy */
static int		 lib_guard_efd = -1;	/* wakes the guard */
static int		 lib_guard_running;
static int		 lib_fallback_ms = LIB_FALLBACK_MS_DEFAULT;

/* Messages read from one uffd, handled in order (guard thread only). */
static struct uffd_msg	*lib_q;
static size_t		 lib_qn, lib_qcap;

static uint64_t
lib_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

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

/* Wake the guard from its poll (a state change it must look at). */
static void
lib_guard_kick(void)
{
	uint64_t	one = 1;

	if (lib_guard_efd != -1)
		(void)write(lib_guard_efd, &one, sizeof(one));
	pthread_cond_broadcast(&lib_rcond);
}

/* The connection is gone while we have regions (rlock held). */
static void
lib_guard_lost(void)
{
	if (lib_regions == NULL || lib_mode != LIB_CONNECTED)
		return;
	lib_mode = LIB_LOST;
	lib_lost_at = lib_now_ms();
	lib_guard_kick();
}

/* client.c made a new connection (lib_lock held). */
void
lib_guard_connected(int sock)
{
	pthread_mutex_lock(&lib_rlock);
	if (lib_guard_sock != -1)
		close(lib_guard_sock);
	lib_guard_sock = fcntl(sock, F_DUPFD_CLOEXEC, 0);
	lib_conn_gen++;
	lib_guard_kick();
	pthread_mutex_unlock(&lib_rlock);
}

/* client.c dropped the connection (lib_lock held). */
void
lib_guard_disconnected(void)
{
	pthread_mutex_lock(&lib_rlock);
	if (lib_guard_sock != -1)
		close(lib_guard_sock);
	lib_guard_sock = -1;
	lib_guard_lost();
	pthread_mutex_unlock(&lib_rlock);
}

/* Do we serve this region ourselves right now? */
int
lib_guard_serving(struct lib_region *lr)
{
	int	serving;

	pthread_mutex_lock(&lib_rlock);
	serving = lib_mode == LIB_FALLBACK && lr->serving;
	pthread_mutex_unlock(&lib_rlock);
	return (serving);
}

enum lib_mode
lib_guard_mode(void)
{
	enum lib_mode	mode;

	pthread_mutex_lock(&lib_rlock);
	mode = lib_mode;
	pthread_mutex_unlock(&lib_rlock);
	return (mode);
}

/* Until when a request waits for the daemon or the fallback. */
uint64_t
lib_guard_deadline(void)
{
	return (lib_now_ms() + (uint64_t)lib_fallback_ms + 1000);
}

/* Sleep up to LIB_RETRY_MS or until the mode changes; 0 past deadline. */
int
lib_guard_wait(uint64_t deadline)
{
	struct timespec	ts;
	uint64_t	now = lib_now_ms(), ms;

	if (now >= deadline)
		return (0);
	ms = deadline - now < LIB_RETRY_MS ? deadline - now : LIB_RETRY_MS;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&lib_rlock);
	pthread_cond_timedwait(&lib_rcond, &lib_rlock, &ts);
	pthread_mutex_unlock(&lib_rlock);
	return (1);
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

/*
 * Drop every garbage page from the file and call it kept (server lock
 * held), as the daemon does before it lets go of a range: whatever the
 * kernel shows there from then on is zeros or the client's data.
 */
static void
lib_punch_garbage(struct lib_region *lr)
{
	struct lib_clear	lc = { lr, lr->map };

	(void)state_drop_garbage(lr->state, lr->npages, lr->fd, lr->offset,
	    lr->page_size, lib_clear_run, &lc, NULL);
	if (lc.map != NULL && lc.map != lr->map)
		munmap(lc.map, lr->len);
}

/* Stop serving a region ourselves (rlock held): unmap, drop the lock. */
static void
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
static int
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
		lib_punch_garbage(lr);
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

/* Nobody answered in time: serve every region ourselves (rlock held). */
static void
lib_fallback_start(void)
{
	struct lib_region	*lr;
	int			 n = 0, busy = 0;

	lib_mode = LIB_FALLBACK;
	for (lr = lib_regions; lr != NULL; lr = lr->next) {
		if (lib_serve_start(lr) == 0 && lr->serving)
			n++;
		else if (!lr->gone)
			busy++;
	}
	lib_warn("hpzerod is away: libhpz serves %d region(s) itself%s", n,
	    busy != 0 ? " (others are held by another server)" : "");
	lib_guard_kick();
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
	/* Punched again while we mapped it, inside the file: fault again. */
	if (error == -EFAULT && uffdio_in_file(lr->fd, lr->offset, idx,
	    lr->page_size)) {
		lib_wake(lr, page, lr->page_size);
		return;
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
			lib_punch_garbage(lr);
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
static void
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

/* Register a region with the (new) daemon again (lib_lock held). */
static int
lib_reregister(struct lib_region *lr)
{
	struct hpz_msg_register	req;
	struct hpz_msg		reply;
	uint64_t		ioctls;
	int			fds[3], error;

	/* Where the last server saw it: a whole-region mremap moves it. */
	lib_follow(lr);
	/* The daemon leaves the faults to the kernel if it finds no garbage. */
	if ((error = uffdio_register(lr->uffd, lr->addr, lr->len, 1,
	    &ioctls)) != 0)
		return (lib_fail(error, "UFFDIO_REGISTER: %s",
		    strerror(-error)));
	madvise((void *)lr->addr, lr->len, MADV_DONTFORK);
	lr->ioctls = ioctls;
	proto_init(&req, HPZ_MSG_REGISTER, sizeof(req), 0);
	req.addr = lr->addr;
	req.len = lr->len;
	req.offset = lr->offset;
	req.page_size = lr->page_size;
	req.uffd_features = lr->features;
	req.uffd_ioctls = ioctls;
	req.flags = lr->flags;
	fds[0] = lr->uffd;
	fds[1] = lr->fd;
	fds[2] = lr->sfd;
	if ((error = lib_call(&req, sizeof(req), fds, 3, &reply,
	    HPZ_MSG_REPLY)) == 0)
		lr->id = reply.u.reply.region_id;
	return (error);
}

/*
 * Connect and register every region again (lib_lock held): the daemon
 * adopts each page state (or re-attaches a region it kept in systemd's fd
 * store).  If we were serving, we stop first (the fault in hand is
 * finished: we take lib_rlock) and give up the server locks, which the
 * daemon takes.  A region the daemon refuses is let go the safe way.
 */
static int
lib_guard_restore(void)
{
	struct lib_region	*lr, *next;
	enum lib_mode		 was;
	int			 error, lost, n = 0;

	lib_disconnect();
	if ((error = lib_connect()) != 0)
		return (error);
	pthread_mutex_lock(&lib_rlock);
	was = lib_mode;
	lib_mode = LIB_RESTORING;
	for (lr = lib_regions; lr != NULL; lr = lr->next)
		lib_serve_stop(lr);
	pthread_mutex_unlock(&lib_rlock);

	for (lr = lib_regions; lr != NULL; lr = next) {
		next = lr->next;
		if (lr->gone) {
			lib_guard_unlink(lr);
			lib_region_free(lr);
			continue;
		}
		if ((error = lib_reregister(lr)) == 0) {
			n++;
			continue;
		}
		pthread_mutex_lock(&lib_rlock);
		lost = lib_guard_sock == -1;
		pthread_mutex_unlock(&lib_rlock);
		if (lost)
			break;
		lib_warn("region %p: hpzerod will not take it back (%s): "
		    "unregistering it", (void *)lr->addr, hpz_last_error());
		if (lib_guard_abandon(lr) != 0)
			lib_warn("region %p: %s", (void *)lr->addr,
			    hpz_last_error());
		error = 0;
	}

	pthread_mutex_lock(&lib_rlock);
	if (error != 0) {
		lib_mode = LIB_LOST;
		/* We were serving: nobody is now, so serve again at once. */
		if (was == LIB_FALLBACK)
			lib_lost_at = 0;
	} else
		lib_mode = LIB_CONNECTED;
	lib_guard_kick();
	pthread_mutex_unlock(&lib_rlock);
	if (error == 0 && was == LIB_FALLBACK)
		lib_warn("hpzerod is back: it serves %d region(s) again", n);
	return (error);
}

/*
 * Before a request (lib_lock held): if the connection was lost while we
 * have regions, register them again first.  0, or why we cannot.
 */
int
lib_guard_ready(void)
{
	enum lib_mode	mode;

	pthread_mutex_lock(&lib_rlock);
	if (lib_regions == NULL)
		lib_mode = LIB_CONNECTED;
	mode = lib_mode;
	pthread_mutex_unlock(&lib_rlock);
	if (mode == LIB_CONNECTED)
		return (0);
	return (lib_guard_restore());
}

/* Take a region off the list (lib_lock held) and stop serving it. */
void
lib_guard_unlink(struct lib_region *lr)
{
	struct lib_region	**pp;

	pthread_mutex_lock(&lib_rlock);
	for (pp = &lib_regions; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == lr) {
			*pp = lr->next;
			break;
		}
	}
	lib_serve_stop(lr);
	pthread_mutex_unlock(&lib_rlock);
}

/*
 * A reset while we serve (lib_lock held): garbage in the shared state
 * first, then our page tables zapped, so every later touch faults to us
 * (or to a daemon that adopts the state) and is cleared.
 */
int
lib_guard_reset(struct lib_region *lr, uintptr_t addr, size_t len)
{
	uint64_t	i, first;
	int		error;

	if ((addr - lr->addr) % lr->page_size != 0 ||
	    len % lr->page_size != 0)
		return (lib_fail(-EINVAL, "the range is not whole pages of "
		    "the region"));
	first = (addr - lr->addr) / lr->page_size;
	pthread_mutex_lock(&lib_rlock);
	/* Faults must come to us before anything is garbage. */
	if (!lr->trapping) {
		if ((error = uffdio_register(lr->uffd, lr->addr, lr->len, 1,
		    NULL)) != 0) {
			pthread_mutex_unlock(&lib_rlock);
			return (lib_fail(error, "UFFDIO_REGISTER: %s: nothing "
			    "was reset", strerror(-error)));
		}
		lr->trapping = 1;
	}
	for (i = first; i < first + len / lr->page_size; i++)
		state_reset(&lr->state[i]);
	pthread_mutex_unlock(&lib_rlock);
	if (madvise((void *)addr, len, MADV_DONTNEED) == -1)
		return (lib_fail(-errno, "madvise(MADV_DONTNEED): %s",
		    strerror(errno)));
	return (0);
}

/*
 * Let go of a region without a daemon (lib_lock held), the way the daemon
 * does: under the server lock, drop garbage from the file, then unregister
 * (the kernel serves the range from then on), then forget it.
 */
int
lib_guard_abandon(struct lib_region *lr)
{
	struct uffdio_range	range;
	int			lockfd = -1;

	pthread_mutex_lock(&lib_rlock);
	if (lr->lockfd < 0) {
		if ((lockfd = state_lock_server(lr->sfd,
		    LIB_ABANDON_LOCK_MS)) < 0) {
			pthread_mutex_unlock(&lib_rlock);
			return (lib_fail(-EBUSY, "another server holds the "
			    "region's page state"));
		}
		state_recover(lr->state, lr->npages);
	}
	lib_punch_garbage(lr);
	range.start = lr->addr;
	range.len = lr->len;
	ioctl(lr->uffd, UFFDIO_UNREGISTER, &range);
	madvise((void *)lr->addr, lr->len, MADV_DOFORK);
	pthread_mutex_unlock(&lib_rlock);
	lib_guard_unlink(lr);
	if (lockfd >= 0)
		close(lockfd);
	lib_region_free(lr);
	return (0);
}

/* Connected: sleep until the connection ends or something changes. */
static void
lib_guard_watch(void)
{
	struct pollfd	pfd[2];
	uint64_t	gen, v;

	pthread_mutex_lock(&lib_rlock);
	gen = lib_conn_gen;
	if (lib_guard_poll != -1)
		close(lib_guard_poll);
	lib_guard_poll = lib_guard_sock == -1 ? -1 :
	    fcntl(lib_guard_sock, F_DUPFD_CLOEXEC, 0);
	pfd[0].fd = lib_guard_poll;
	pthread_mutex_unlock(&lib_rlock);
	pfd[0].events = POLLRDHUP;
	pfd[1].fd = lib_guard_efd;
	pfd[1].events = POLLIN;
	for (;;) {
		pfd[0].revents = pfd[1].revents = 0;
		if (poll(pfd, 2, -1) == -1 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN) {
			(void)read(lib_guard_efd, &v, sizeof(v));
			break;
		}
		if (pfd[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			pthread_mutex_lock(&lib_rlock);
			if (gen == lib_conn_gen)
				lib_guard_lost();
			pthread_mutex_unlock(&lib_rlock);
			/* Only a change (new connection, new mode) now. */
			pfd[0].fd = -1;
		}
	}
}

/* Lost: try the daemon; past the fallback time, serve ourselves. */
static void
lib_guard_lost_tick(void)
{
	struct pollfd	pfd;
	uint64_t	v;

	if (pthread_mutex_trylock(&lib_lock) == 0) {
		if (lib_guard_mode() == LIB_LOST)
			(void)lib_guard_restore();
		pthread_mutex_unlock(&lib_lock);
	}
	pthread_mutex_lock(&lib_rlock);
	if (lib_regions == NULL && lib_mode == LIB_LOST)
		lib_mode = LIB_CONNECTED;
	if (lib_mode == LIB_LOST &&
	    lib_now_ms() >= lib_lost_at + (uint64_t)lib_fallback_ms)
		lib_fallback_start();
	pthread_mutex_unlock(&lib_rlock);
	if (lib_guard_mode() == LIB_LOST || lib_guard_mode() ==
	    LIB_RESTORING) {
		pfd.fd = lib_guard_efd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, LIB_RETRY_MS) == 1)
			(void)read(lib_guard_efd, &v, sizeof(v));
	}
}

/* Serving: read every served uffd; now and then, look for a daemon. */
static void
lib_guard_serve_tick(uint64_t *next_try)
{
	static struct pollfd	*pfd;
	static size_t		 cap;
	struct lib_region	*lr;
	struct pollfd		*p;
	size_t			 n = 0;
	uint64_t		 now, v;
	int			 wait;

	pthread_mutex_lock(&lib_rlock);
	if (lib_regions == NULL)
		lib_mode = LIB_CONNECTED;
	if (lib_mode != LIB_FALLBACK) {
		pthread_mutex_unlock(&lib_rlock);
		return;
	}
	for (lr = lib_regions; lr != NULL; lr = lr->next) {
		/* One a live server held before may be free now. */
		if (!lr->serving && !lr->gone)
			(void)lib_serve_start(lr);
		if (!lr->serving)
			continue;
		if (n + 2 > cap) {
			if ((p = realloc(pfd, (cap * 2 + 8) *
			    sizeof(*p))) == NULL)
				break;
			pfd = p;
			cap = cap * 2 + 8;
		}
		pfd[n].fd = lr->uffd;
		pfd[n].events = POLLIN;
		n++;
	}
	pthread_mutex_unlock(&lib_rlock);
	if (n + 1 > cap) {
		if ((p = realloc(pfd, (cap + 8) * sizeof(*p))) == NULL) {
			poll(NULL, 0, LIB_RETRY_MS);
			return;
		}
		pfd = p;
		cap += 8;
	}
	pfd[n].fd = lib_guard_efd;
	pfd[n].events = POLLIN;
	now = lib_now_ms();
	wait = *next_try > now ? (int)(*next_try - now) : 0;
	if (poll(pfd, n + 1, wait) > 0 && (pfd[n].revents & POLLIN))
		(void)read(lib_guard_efd, &v, sizeof(v));

	pthread_mutex_lock(&lib_rlock);
	if (lib_mode == LIB_FALLBACK)
		for (lr = lib_regions; lr != NULL; lr = lr->next)
			if (lr->serving)
				lib_serve_uffd(lr);
	pthread_mutex_unlock(&lib_rlock);

	if (lib_now_ms() >= *next_try) {
		*next_try = lib_now_ms() + LIB_RETRY_MS;
		if (pthread_mutex_trylock(&lib_lock) == 0) {
			if (lib_guard_mode() == LIB_FALLBACK)
				(void)lib_guard_restore();
			pthread_mutex_unlock(&lib_lock);
		}
	}
}

static void *
lib_guard_main(void *arg)
{
	uint64_t	next_try = 0;

	(void)arg;
	for (;;) {
		switch (lib_guard_mode()) {
		case LIB_CONNECTED:
			lib_guard_watch();
			break;
		case LIB_LOST:
		case LIB_RESTORING:
			lib_guard_lost_tick();
			break;
		case LIB_FALLBACK:
			lib_guard_serve_tick(&next_try);
			break;
		}
	}
	return (NULL);
}

/* Start the guard once a region is registered (lib_lock held). */
void
lib_guard_start(void)
{
	pthread_attr_t	 attr;
	pthread_t	 t;
	sigset_t	 all, old;
	const char	*s;
	char		*end;
	long		 v;

	if (lib_guard_running)
		return;
	if ((s = getenv("HPZ_FALLBACK_MS")) != NULL && *s != '\0') {
		v = strtol(s, &end, 10);
		if (*end == '\0' && v >= 0 && v <= 3600 * 1000)
			lib_fallback_ms = (int)v;
		else
			lib_warn("HPZ_FALLBACK_MS=%s is not 0 to 3600000: "
			    "using %d", s, LIB_FALLBACK_MS_DEFAULT);
	}
	if (lib_guard_efd == -1 &&
	    (lib_guard_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1) {
		lib_warn("eventfd: %s: nothing will notice if hpzerod dies",
		    strerror(errno));
		return;
	}
	/* Signals are the application's: the guard takes none. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, lib_guard_main, NULL) == 0) {
		pthread_setname_np(t, "hpz-guard");
		lib_guard_running = 1;
	} else
		lib_warn("cannot start the guard thread: nothing will notice "
		    "if hpzerod dies");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * In a fork child: no guard runs here, and no copy of our connection or
 * server locks may outlive the parent's wish to drop them (an OFD lock
 * lasts while any copy of its fd is open).
 */
void
lib_guard_fork_child(void)
{
	struct lib_region	*lr;

	pthread_mutex_init(&lib_rlock, NULL);
	pthread_cond_init(&lib_rcond, NULL);
	lib_mode = LIB_CONNECTED;
	lib_guard_running = 0;
	if (lib_guard_sock != -1)
		close(lib_guard_sock);
	if (lib_guard_poll != -1)
		close(lib_guard_poll);
	if (lib_guard_efd != -1)
		close(lib_guard_efd);
	lib_guard_sock = lib_guard_poll = lib_guard_efd = -1;
	free(lib_q);
	lib_q = NULL;
	lib_qn = lib_qcap = 0;
	for (lr = lib_regions; lr != NULL; lr = lr->next) {
		if (lr->lockfd >= 0)
			close(lr->lockfd);
		lr->lockfd = -1;
		lr->map = NULL;		/* MADV_DONTFORK: not here */
		lr->serving = 0;
	}
}
