/*
 * reap.c - close the descriptors clients passed, off the event loop.
 *
 * close() of a file whose last reference we hold runs its release on the
 * closing thread, and a client chooses what that costs: a TCP socket with
 * SO_LINGER and a full send queue to a peer that never reads waits up to
 * l_linger seconds, a FUSE file waits for its server's answer to FLUSH,
 * and closing a connection purges its queue, releasing every fd still in
 * flight in it.  So every descriptor that came from (or carries) a client
 * is closed here, by one thread made at start-up, never by the loop.
 *
 * The reaper asks a socket not to linger before it closes it, and reads
 * out what is queued in a client's connection (closing the fds that
 * carries the same way) before it closes that.  A close that blocks
 * anyway would hold up the others behind it: each batch of
 * closes runs with a timer that interrupts the one in progress with a
 * signal (REAP_SIGNAL, caught by a handler that does nothing, without
 * SA_RESTART) every REAP_STUCK_MS.
 * The linger wait ends on a signal; a FUSE flush ends once its server
 * answers the interrupt.  Whatever still blocks after that is counted and
 * logged, and the daemon serves on.
 *
 * A connection refused at accept is read out with no room for control
 * data: what its messages carry is never installed, so those files never
 * enter the daemon's table and no close(2) of ours flushes them (FUSE
 * sends FLUSH from close(2), from ->flush; a file dropped from a socket's
 * queue, or cut off a message as MSG_CTRUNC, only loses a reference,
 * fput, and its last reference runs ->release alone, where FUSE queues
 * RELEASE in the background and waits for nothing).  The kernel runs that
 * final fput on the task that closes the connection (task_work, on its
 * way back to user space; a kworker only for fputs from interrupts or
 * kernel threads, or from the unix garbage collector's worker when the
 * files form a cycle in flight).  A ->release can still wait (a TCP
 * socket lingering, a FUSE file with dirty pages in writeback cache): so
 * a refused connection is closed on a closer of its uid's own, made on
 * demand (reap_refused): a wait there holds up that uid's refused
 * connections only.  What such a wait leaves queued is counted per uid
 * and said once it passes REAP_REFUSED_MAX (a user-space daemon cannot
 * end a ->release the kernel waits in uninterruptibly).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "globals.h"
#include "log.h"
#include "reap.h"
#include "stats.h"

/* A close running longer than this is interrupted (and again each time). */
#define REAP_STUCK_MS	1000
#define REAP_SIGNAL	(SIGRTMIN + 2)
/* Messages read out of a connection before it is closed. */
#define REAP_DRAIN_MAX	1024
/* A uid's refused connections waiting for its closer: said past this. */
#define REAP_REFUSED_MAX	64

static pthread_mutex_t	 reap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 reap_cond = PTHREAD_COND_INITIALIZER;
static int		*reap_q;		/* fds to close, FIFO; a
						   connection to drain first
						   as -(fd + 1) */
static size_t		 reap_head, reap_n, reap_cap;
static int		 reap_running;		/* the thread exists */
static int		 reap_stopping;
static atomic_size_t	 reap_busy;		/* taken, not closed */
static int		 reap_idle;		/* waiting for work */
static int		 reap_kicked;		/* a wake-up is coming */
static struct event	*reap_ev;		/* wakes it after replies */
static pthread_t	 reap_thread;
static atomic_uint_fast64_t reap_closed;
static atomic_uint_fast64_t reap_slow;		/* closes interrupted */

static void
reap_signal_cb(int sig)
{
	(void)sig;
}

/* Block REAP_SIGNAL in the calling thread (and the threads it makes). */
void
reap_block_signal(void)
{
	sigset_t	set;

	sigemptyset(&set);
	sigaddset(&set, REAP_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* Arm (or, with ms 0, disarm) the interrupting timer. */
static void
reap_arm(timer_t timer, int armed, int ms)
{
	struct itimerspec	its;

	if (!armed)
		return;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = ms / 1000;
	its.it_value.tv_nsec = (ms % 1000) * 1000000L;
	its.it_interval = its.it_value;
	timer_settime(timer, 0, &its, NULL);
}

/*
 * A socket's close lingers only if it asked to (SO_LINGER): ask it not to.
 * This acts through the fd the client passed, as the client could itself,
 * and changes nothing but how its last close goes.
 */
void
reap_defuse(int fd)
{
	struct linger	off = { 0, 0 };
	struct stat	st;

	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
}

/* Close here, on the caller's thread, without lingering. */
void
reap_close_here(int fd)
{
	reap_defuse(fd);
	close(fd);	/* gone whatever close says */
}

/*
 * A client's connection: what is still queued in it would be released by
 * its close, on this thread, out of our reach.  Shut it so nothing more
 * comes, read the queue out (a bounded number of messages), and close
 * the fds those carry the way every other is closed.
 */
static void
reap_drain(int sock)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 253)];
	}		 cm;
	struct msghdr	 mh;
	struct iovec	 iov;
	struct cmsghdr	*c;
	char		 byte[64];
	size_t		 i, count;
	int		 fd, n;

	(void)shutdown(sock, SHUT_RDWR);
	for (n = 0; n < REAP_DRAIN_MAX; n++) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = byte;
		iov.iov_len = sizeof(byte);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		if (recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
			break;
		for (c = CMSG_FIRSTHDR(&mh); c != NULL;
		    c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET ||
			    c->cmsg_type != SCM_RIGHTS)
				continue;
			count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < count; i++) {
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
				    sizeof(fd));
				reap_close_here(fd);
			}
		}
	}
}

/*
 * What the reaper does with one entry, done by the caller: with no reaper,
 * or no room in its queue.  Defused and drained first, a close here does
 * not linger either.
 */
static void reap_close_now(int, int);

/* A client's connection, shut, drained and closed here (its context). */
void
reap_close_conn_here(int fd)
{
	reap_close_now(fd, 1);
}

static void
reap_close_now(int fd, int drain)
{
	if (drain)
		reap_drain(fd);
	reap_close_here(fd);
}

/*
 * Take what is queued, all of it, and close it with the timer armed: any
 * close still running REAP_STUCK_MS after the batch began is interrupted,
 * and again every REAP_STUCK_MS.
 */
static void *
reap_main(void *arg)
{
	struct sigevent	 sev;
	sigset_t	 set;
	timer_t		 timer;
	uint64_t	 t0;
	size_t		 i, n, cap = 0, room;
	int		*batch = NULL, *more, *b, one, armed = 0;

	(void)arg;
	memset(&timer, 0, sizeof(timer));
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = REAP_SIGNAL;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0)
		armed = 1;
	else
		log_warn("reaper: timer_create: a blocking close will not be "
		    "interrupted");
	sigemptyset(&set);
	sigaddset(&set, REAP_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	pthread_mutex_lock(&reap_lock);
	for (;;) {
		while (reap_n == 0 && !reap_stopping) {
			reap_idle = 1;
			pthread_cond_wait(&reap_cond, &reap_lock);
			reap_idle = 0;
		}
		if (reap_n == 0)
			break;
		/* Out of memory for all of it: as much as fits, or one. */
		if (reap_n > cap) {
			if ((more = realloc(batch, reap_n * sizeof(*batch))) !=
			    NULL) {
				batch = more;
				cap = reap_n;
			} else
				log_warn("reaper: closing fewer at once");
		}
		b = cap > 0 ? batch : &one;
		room = cap > 0 ? cap : 1;
		for (n = 0; reap_n > 0 && n < room; n++, reap_n--) {
			b[n] = reap_q[reap_head];
			reap_head = (reap_head + 1) % reap_cap;
		}
		atomic_store(&reap_busy, n);
		pthread_mutex_unlock(&reap_lock);
		reap_arm(timer, armed, REAP_STUCK_MS);
		for (i = 0; i < n; i++) {
			t0 = stats_now_ns();
			if (b[i] < 0)
				reap_close_now(-(b[i] + 1), 1);
			else
				reap_close_now(b[i], 0);
			if (stats_now_ns() - t0 >= REAP_STUCK_MS * 1000000ULL) {
				atomic_fetch_add(&reap_slow, 1);
				log_warnx("reaper: closing a descriptor a "
				    "client passed took over %d ms (a "
				    "lingering socket or a slow FUSE "
				    "server?)", REAP_STUCK_MS);
			}
			atomic_fetch_sub(&reap_busy, 1);
		}
		reap_arm(timer, armed, 0);
		atomic_fetch_add(&reap_closed, n);
		pthread_mutex_lock(&reap_lock);
	}
	pthread_mutex_unlock(&reap_lock);
	if (armed)
		timer_delete(timer);
	free(batch);
	return (NULL);
}

/*
 * Wake the reaper once per turn of the loop, after the callbacks that
 * queued fds (and sent their replies): a wake-up costs a system call and
 * a context switch, which no reply should wait for.
 */
static void
reap_kick_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	pthread_mutex_lock(&reap_lock);
	reap_kicked = 0;
	if (reap_n > 0 && reap_idle)
		pthread_cond_signal(&reap_cond);
	pthread_mutex_unlock(&reap_lock);
}

/* Start the reaper (once, before serving; hpzd_base exists). */
int
reap_start(void)
{
	struct sigaction	sa;
	int			error;

	if (reap_running)
		return (0);
	if ((reap_ev = event_new(hpzd_base, -1, 0, reap_kick_cb, NULL)) ==
	    NULL) {
		log_warnx("reaper: cannot make its event");
		return (-ENOMEM);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = reap_signal_cb;	/* no SA_RESTART: interrupt */
	sigemptyset(&sa.sa_mask);
	if (sigaction(REAP_SIGNAL, &sa, NULL) == -1) {
		error = -errno;
		log_warn("reaper: sigaction");
		goto fail;
	}
	if ((error = hpzd_thread_start(&reap_thread, reap_main,
	    "hpzd-reap")) != 0)
		goto fail;
	reap_running = 1;
	return (0);
fail:
	event_free(reap_ev);
	reap_ev = NULL;
	return (error);
}

/*
 * Close what is queued and stop, waiting at most a few seconds: a close
 * still blocked then is left to the exit, where the kernel does not linger.
 */
void
reap_stop(void)
{
	struct timespec	ts;

	if (!reap_running)
		return;
	pthread_mutex_lock(&reap_lock);
	reap_stopping = 1;
	pthread_cond_broadcast(&reap_cond);
	pthread_mutex_unlock(&reap_lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3;
	if (pthread_timedjoin_np(reap_thread, NULL, &ts) != 0) {
		log_warnx("reaper: %zu descriptors still closing at exit",
		    reap_n + atomic_load(&reap_busy));
		pthread_detach(reap_thread);
		return;
	}
	reap_running = 0;
	free(reap_q);
	reap_q = NULL;
	reap_head = reap_n = reap_cap = 0;
	event_free(reap_ev);
	reap_ev = NULL;
}

static void
reap_enqueue(int fd, int drain)
{
	int	*q;
	size_t	 i, cap;

	if (fd < 0)
		return;
	if (!reap_running) {
		reap_close_now(fd, drain);
		return;
	}
	pthread_mutex_lock(&reap_lock);
	if (reap_n == reap_cap) {
		cap = reap_cap * 2 + 64;
		if ((q = malloc(cap * sizeof(*q))) == NULL) {
			/* Out of memory: closed here, as without the reaper. */
			pthread_mutex_unlock(&reap_lock);
			log_warn("reaper: a descriptor is closed on the loop");
			reap_close_now(fd, drain);
			return;
		}
		for (i = 0; i < reap_n; i++)
			q[i] = reap_q[(reap_head + i) % reap_cap];
		free(reap_q);
		reap_q = q;
		reap_head = 0;
		reap_cap = cap;
	}
	reap_q[(reap_head + reap_n) % reap_cap] = drain ? -(fd + 1) : fd;
	reap_n++;
	/* A busy reaper looks again before it sleeps: no wake-up needed. */
	if (reap_idle && !reap_kicked) {
		reap_kicked = 1;
		event_active(reap_ev, EV_TIMEOUT, 0);
	}
	pthread_mutex_unlock(&reap_lock);
}

/*
 * A uid's closer of refused connections: made when one is refused, gone
 * once its queue is empty.  Its list and queues are under reap_lock.
 */
struct reap_uid {
	LIST_ENTRY(reap_uid)	 entry;
	uid_t			 uid;
	int			*q;		/* FIFO of connections */
	size_t			 head, n, cap;
	int			 running;	/* its thread exists */
	int			 said;		/* past REAP_REFUSED_MAX, said */
};
static LIST_HEAD(, reap_uid) reap_uids = LIST_HEAD_INITIALIZER(reap_uids);
static atomic_size_t	 reap_refused_n;	/* queued or closing */

/*
 * Empty a refused connection without taking what its messages carry: a
 * receive with no room for control data installs no fd (MSG_CTRUNC), the
 * files lose their last reference here, ->release only, never ->flush.
 * Closed with its queue empty, its peer reads our refusal; closed with
 * data unread, the peer's next read would fail ECONNRESET instead.
 */
static void
reap_drop(int sock)
{
	struct msghdr	mh;
	struct iovec	iov;
	char		byte[64];
	int		n;

	for (n = 0; n < REAP_DRAIN_MAX; n++) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = byte;
		iov.iov_len = sizeof(byte);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (recvmsg(sock, &mh, MSG_DONTWAIT) <= 0)
			break;
	}
}

/*
 * Close one refused connection, its messages read out with nothing they
 * carry taken (reap_drop): the files queued in it lose their last
 * reference here, on this thread.  A socket among them that lingers is
 * cut short by the timer's signal.
 */
static void *
reap_uid_main(void *arg)
{
	struct reap_uid	*u = arg;
	struct sigevent	 sev;
	sigset_t	 set;
	timer_t		 timer;
	int		 fd, armed = 0;

	memset(&timer, 0, sizeof(timer));
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = REAP_SIGNAL;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0)
		armed = 1;
	sigemptyset(&set);
	sigaddset(&set, REAP_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	pthread_mutex_lock(&reap_lock);
	while (u->n > 0) {
		fd = u->q[u->head];
		u->head = (u->head + 1) % u->cap;
		u->n--;
		pthread_mutex_unlock(&reap_lock);
		reap_arm(timer, armed, REAP_STUCK_MS);
		reap_drop(fd);
		close(fd);	/* gone whatever close says */
		reap_arm(timer, armed, 0);
		atomic_fetch_add(&reap_closed, 1);
		/* Counted until closed. */
		atomic_fetch_sub(&reap_refused_n, 1);
		pthread_mutex_lock(&reap_lock);
	}
	u->running = 0;
	LIST_REMOVE(u, entry);
	pthread_mutex_unlock(&reap_lock);
	if (armed)
		timer_delete(timer);
	free(u->q);
	free(u);
	return (NULL);
}

/* Start u's closer (reap_lock held); 0 or -errno. */
static int
reap_uid_start(struct reap_uid *u)
{
	pthread_attr_t	attr;
	pthread_t	t;
	sigset_t	all, old;
	int		error;

	if (pthread_attr_init(&attr) != 0)
		return (-ENOMEM);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&t, &attr, reap_uid_main, u);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0)
		return (-error);
	pthread_setname_np(t, "hpzd-refused");
	u->running = 1;
	return (0);
}

/*
 * A connection refused at accept (main thread): closed, nothing it
 * carries taken, on its
 * uid's closer.  With no memory or no thread for one it stays queued,
 * the uid's alone, until the uid's next refusal starts one.
 */
void
reap_refused(int fd, uid_t uid)
{
	struct reap_uid	*u;
	int		*q;
	size_t		 i, cap;
	int		 error;

	if (fd < 0)
		return;
	/* Nothing more comes into it: the peer's sends fail from now. */
	(void)shutdown(fd, SHUT_RD);
	pthread_mutex_lock(&reap_lock);
	LIST_FOREACH(u, &reap_uids, entry)
		if (u->uid == uid)
			break;
	if (u == NULL) {
		if ((u = calloc(1, sizeof(*u))) == NULL)
			goto nomem;
		u->uid = uid;
		LIST_INSERT_HEAD(&reap_uids, u, entry);
	}
	if (u->n == u->cap) {
		cap = u->cap * 2 + 8;
		if ((q = malloc(cap * sizeof(*q))) == NULL)
			goto nomem;
		for (i = 0; i < u->n; i++)
			q[i] = u->q[(u->head + i) % u->cap];
		free(u->q);
		u->q = q;
		u->head = 0;
		u->cap = cap;
	}
	u->q[(u->head + u->n) % u->cap] = fd;
	u->n++;
	atomic_fetch_add(&reap_refused_n, 1);
	if (u->n > REAP_REFUSED_MAX && !u->said) {
		u->said = 1;
		log_warnx("uid %u: %zu refused connections wait to be closed "
		    "(a close of what they carry waits in the kernel): they "
		    "hold up that uid's refused connections only",
		    (unsigned)uid, u->n);
	}
	if (!u->running && (error = reap_uid_start(u)) != 0)
		log_warnx("uid %u: no thread to close its refused connections "
		    "(%s): they wait for its next refusal", (unsigned)uid,
		    strerror(-error));
	pthread_mutex_unlock(&reap_lock);
	return;
nomem:
	pthread_mutex_unlock(&reap_lock);
	/* No memory even for its entry: the connection stays open, leaked
	   rather than closed on the loop. */
	log_warnx("uid %u: no memory to close a refused connection: its "
	    "descriptor is left open", (unsigned)uid);
}

/* Close fd, later, on the reaper (now, if there is none); main thread. */
void
reap_close(int fd)
{
	reap_enqueue(fd, 0);
}

/* Close a client's connection, later, with what is queued in it. */
void
reap_close_conn(int fd)
{
	reap_enqueue(fd, 1);
}

/*
 * Closes queued elsewhere (on the clients' contexts, control-client.c): n
 * more, or fewer, for reap_pending's count.
 */
static atomic_int_fast64_t reap_away;

void
reap_away_add(int n)
{
	atomic_fetch_add(&reap_away, n);
}

/* Descriptors waiting to be closed (the one being closed included). */
uint64_t
reap_pending(void)
{
	uint64_t	n;

	pthread_mutex_lock(&reap_lock);
	n = reap_n + (uint64_t)atomic_load(&reap_busy) +
	    (uint64_t)atomic_load(&reap_away) +
	    (uint64_t)atomic_load(&reap_refused_n);
	pthread_mutex_unlock(&reap_lock);
	return (n);
}

/* Closes that took longer than REAP_STUCK_MS. */
uint64_t
reap_slow_count(void)
{
	return (atomic_load(&reap_slow));
}
