/*
 * guard.c - libhpz when hpzerod goes away: the guard thread and its state.
 * The guard watches the connection; when it ends (crash, kill, watchdog,
 * restart) it tries to connect again every LIB_RETRY_MS and registers
 * every region again on the same userfaultfd, backing file and page-state
 * memfd, so that the new daemon adopts the state.  If no daemon answers
 * within HPZ_FALLBACK_MS, the guard takes each region's server lock and
 * serves the faults itself (serve.c) with the daemon's own resolve
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
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/userfaultfd.h>

#include "libhpz.h"
#include "hpz-state.h"
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

static pthread_cond_t	 lib_rcond = PTHREAD_COND_INITIALIZER;
static enum lib_mode	 lib_mode = LIB_CONNECTED;
static uint64_t		 lib_lost_at;		/* ms, CLOCK_MONOTONIC */
static uint64_t		 lib_conn_gen;		/* bumped by every connect */
static int		 lib_guard_sock = -1;	/* copy of the connection */
static int		 lib_guard_poll = -1;	/* the guard's own copy */
static int		 lib_guard_efd = -1;	/* wakes the guard */
static int		 lib_guard_running;
static int		 lib_fallback_ms = LIB_FALLBACK_MS_DEFAULT;

static uint64_t
lib_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
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
 * does: under the server lock, clear garbage in place, then unregister
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
	lib_keep_garbage(lr);
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

/* Drop our record of a region whose mapping is gone. */
void
lib_forget(const struct hpz_region *region)
{
	struct lib_region	*lr;

	pthread_mutex_lock(&lib_lock);
	lr = lib_lookup((uintptr_t)region->addr, region->len);
	if (lr != NULL) {
		lib_guard_unlink(lr);
		lib_region_free(lr);
	}
	pthread_mutex_unlock(&lib_lock);
}
