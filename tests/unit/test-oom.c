/*
 * test-oom.c - what the daemon does when an allocation or a thread it
 * needs is refused: a start function returns the error with nothing left
 * running, and work a client causes goes on another way, the daemon
 * alive.  The program is linked with --wrap for calloc, malloc, realloc
 * and pthread_create (Makefile.am): the daemon's calls come here, and
 * fail while a test says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <criterion/criterion.h>
#include <event2/event.h>

#include "conf.h"
#include "globals.h"
#include "prep.h"
#include "reap.h"
#include "scrub.h"
#include "worker.h"

void	*__real_calloc(size_t, size_t);
void	*__real_malloc(size_t);
void	*__real_realloc(void *, size_t);
int	 __real_pthread_create(pthread_t *, const pthread_attr_t *,
	    void *(*)(void *), void *);
void	*__wrap_calloc(size_t, size_t);
void	*__wrap_malloc(size_t);
void	*__wrap_realloc(void *, size_t);
int	 __wrap_pthread_create(pthread_t *, const pthread_attr_t *,
	    void *(*)(void *), void *);

/*
 * Allocations refused while oom_refuse is set (any thread), and threads
 * refused once oom_threads_left more are made (-1: none refused).
 */
static atomic_int	oom_refuse;
static atomic_int	oom_threads_left = -1;

void *
__wrap_calloc(size_t n, size_t size)
{
	if (atomic_load(&oom_refuse)) {
		errno = ENOMEM;
		return (NULL);
	}
	return (__real_calloc(n, size));
}

void *
__wrap_malloc(size_t size)
{
	if (atomic_load(&oom_refuse)) {
		errno = ENOMEM;
		return (NULL);
	}
	return (__real_malloc(size));
}

void *
__wrap_realloc(void *p, size_t size)
{
	if (atomic_load(&oom_refuse)) {
		errno = ENOMEM;
		return (NULL);
	}
	return (__real_realloc(p, size));
}

int
__wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
    void *(*fn)(void *), void *arg)
{
	int	left = atomic_load(&oom_threads_left);

	if (left == 0)
		return (EAGAIN);
	if (left > 0)
		atomic_store(&oom_threads_left, left - 1);
	return (__real_pthread_create(t, attr, fn, arg));
}

static void
oom_setup(void)
{
	hpzd_base = event_base_new();
	cr_assert_not_null(hpzd_base);
}

/* Threads of this process now. */
static int
oom_nthreads(void)
{
	DIR		*d;
	struct dirent	*e;
	int		 n = 0;

	cr_assert_not_null(d = opendir("/proc/self/task"));
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return (n);
}

static int
fd_open(int fd)
{
	return (fcntl(fd, F_GETFD) != -1);
}

/* A fd the reaper has no room to queue is closed at once, not fatal. */
Test(oom, reap_closes_here, .init = oom_setup)
{
	int	p[2], q[2];

	cr_assert_eq(reap_start(), 0);
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(pipe(q), 0);
	atomic_store(&oom_refuse, 1);
	reap_close(p[0]);
	atomic_store(&oom_refuse, 0);
	cr_expect_not(fd_open(p[0]), "the fd the queue had no room for is "
	    "still open");
	/* The reaper goes on: a fd queued once memory is back is closed. */
	reap_close(q[0]);
	reap_stop();
	cr_expect_not(fd_open(q[0]), "a fd queued later was not closed");
	close(p[1]);
	close(q[1]);
}

/*
 * A TCP socket whose close() lingers: SO_LINGER for an hour and a full send
 * queue to *peer, accepted here and never read (as a hostile client would
 * pass one).  *lsn: the listener.
 */
static int
oom_linger_socket(int *lsn, int *peer)
{
	struct sockaddr_in	a;
	struct linger		lg = { 1, 3600 };
	socklen_t		al = sizeof(a);
	char			buf[65536];
	int			small = 4096, c, fl;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_neq(*lsn = socket(AF_INET, SOCK_STREAM, 0), -1);
	cr_assert_eq(setsockopt(*lsn, SOL_SOCKET, SO_RCVBUF, &small,
	    sizeof(small)), 0);
	cr_assert_eq(bind(*lsn, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(*lsn, 1), 0);
	cr_assert_eq(getsockname(*lsn, (struct sockaddr *)&a, &al), 0);
	cr_assert_neq(c = socket(AF_INET, SOCK_STREAM, 0), -1);
	cr_assert_eq(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small,
	    sizeof(small)), 0);
	cr_assert_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_neq(*peer = accept(*lsn, NULL, NULL), -1);
	fl = fcntl(c, F_GETFL);
	cr_assert_eq(fcntl(c, F_SETFL, fl | O_NONBLOCK), 0);
	memset(buf, 0x42, sizeof(buf));
	while (write(c, buf, sizeof(buf)) > 0)
		;
	cr_assert_eq(fcntl(c, F_SETFL, fl), 0);
	cr_assert_eq(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)),
	    0);
	return (c);
}

static atomic_int	oom_closed;

static void *
oom_close_main(void *arg)
{
	reap_close(*(int *)arg);
	atomic_store(&oom_closed, 1);
	return (NULL);
}

/*
 * A fd closed on the loop for want of memory is still closed the reaper's
 * way: a passed socket that asked to linger does not hold the loop.
 */
Test(oom, reap_here_does_not_linger, .init = oom_setup)
{
	pthread_t	t;
	int		c, lsn, peer, ms;

	cr_assert_eq(reap_start(), 0);
	c = oom_linger_socket(&lsn, &peer);
	atomic_store(&oom_refuse, 1);
	cr_assert_eq(pthread_create(&t, NULL, oom_close_main, &c), 0);
	/* A liveness bound: the close lingers an hour if it is not defused. */
	for (ms = 0; ms < 10000 && !atomic_load(&oom_closed); ms += 10)
		usleep(10000);
	atomic_store(&oom_refuse, 0);
	cr_assert(atomic_load(&oom_closed), "closing a lingering socket "
	    "with no room in the reaper's queue still ran after 10 s: the "
	    "loop would wait with it");
	pthread_join(t, NULL);
	cr_expect_not(fd_open(c), "the lingering socket is still open");
	reap_stop();
	close(peer);
	close(lsn);
}

static atomic_int	oom_worked, oom_done;
static pthread_t	oom_main_thread;
static atomic_int	oom_work_on_main;

static void
oom_work(struct prep_job *j)
{
	(void)j;
	atomic_store(&oom_work_on_main,
	    pthread_equal(pthread_self(), oom_main_thread) ? 1 : 0);
	atomic_store(&oom_worked, 1);
}

static void
oom_job_done(struct prep_job *j)
{
	(void)j;
	atomic_store(&oom_done, atomic_load(&oom_worked) ? 1 : -1);
}

/*
 * A prep job needs no memory: with every allocation refused it is still
 * queued and its work, a walk that grows with a region's pages, runs on the
 * prep thread, never on the loop; its done comes when the loop turns.
 */
Test(oom, prep_needs_no_memory, .init = oom_setup)
{
	struct prep_job	job;
	int		ms;

	oom_main_thread = pthread_self();
	cr_assert_eq(prep_start(), 0);
	atomic_store(&oom_refuse, 1);
	cr_expect_eq(prep_job(&job, oom_work, oom_job_done, NULL), 1,
	    "a job was not queued when memory was short");
	/* A liveness bound: the prep thread takes it at once. */
	for (ms = 0; ms < 10000 && atomic_load(&oom_done) == 0; ms += 10) {
		event_base_loop(hpzd_base, EVLOOP_NONBLOCK);
		usleep(10000);
	}
	atomic_store(&oom_refuse, 0);
	cr_expect_eq(atomic_load(&oom_worked), 1, "its work did not run");
	cr_expect_eq(atomic_load(&oom_work_on_main), 0, "its work ran on the "
	    "loop's thread");
	cr_expect_eq(atomic_load(&oom_done), 1, "its done did not run after "
	    "its work");
	prep_stop();
}

/*
 * A worker thread refused: worker_start says so, with the workers it
 * began stopped; a later start works.
 */
Test(oom, worker_start_fails_whole, .init = oom_setup)
{
	struct worker_config	cfg = worker_config;
	int			before = oom_nthreads();

	cfg.nworkers = 4;
	atomic_store(&oom_threads_left, 2);
	cr_expect_eq(worker_start(&cfg), -EAGAIN);
	atomic_store(&oom_threads_left, -1);
	cr_expect_eq(oom_nthreads(), before, "%d workers left running",
	    oom_nthreads() - before);
	cfg.nworkers = 2;
	cr_assert_eq(worker_start(&cfg), 0, "a start after a failed one");
	worker_stop();
	/* No memory for the pool at all. */
	atomic_store(&oom_refuse, 1);
	cr_expect_eq(worker_start(&cfg), -ENOMEM);
	atomic_store(&oom_refuse, 0);
}

/* A background thread refused: scrub_start says so, none left running. */
Test(oom, scrub_start_fails_whole, .init = oom_setup)
{
	struct conf	c;
	int		before = oom_nthreads();

	conf_defaults(&c);
	c.scrub_threads = 3;
	atomic_store(&oom_threads_left, 1);
	cr_expect_eq(scrub_start(&c), -EAGAIN);
	atomic_store(&oom_threads_left, -1);
	cr_expect_eq(oom_nthreads(), before, "%d background threads left "
	    "running", oom_nthreads() - before);
}
