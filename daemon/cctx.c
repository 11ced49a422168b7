/*
 * cctx.c - client contexts (see cctx.h): a thread per client process for
 * the system calls on what that client owns.
 *
 * Why: such a call can wait in the kernel on a lock the client holds (its
 * memfd's inode lock, held by a write from a buffer on its own unserved
 * uffd; its mmap_lock, held by a long populate or a FUSE-backed fault; a
 * FUSE server of its own that never answers).  Made on the event loop or
 * on a thread every client shares, that wait is everyone's.  Made here,
 * it is its client's alone: the loop hears of each finished job through
 * one eventfd and never waits for a context.
 *
 * Every field of every context is under cctx_lock; a context's thread
 * holds it only between jobs.  A job is the caller's memory until its
 * done callback runs (main thread); a cancelled job still gets its done
 * callback, which sees cctx_cancelled() and undoes what it must.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <event2/event.h>

#include "cctx.h"
#include "globals.h"
#include "log.h"
#include "stats.h"

/* An idle thread waits this long (ms) for work before it goes. */
#define CCTX_IDLE_MS		5000
/* The loop looks for stuck contexts this often (ms). */
#define CCTX_CHECK_MS		250
TAILQ_HEAD(cctx_jobs, cctx_job);

struct cctx {
	TAILQ_ENTRY(cctx)	 entry;
	pid_t			 pid;
	uid_t			 uid;
	int			 refs;
	int			 pending;	/* jobs queued or running */
	int			 thread;	/* a thread serves it now */
	struct cctx_jobs	 queue;
	struct cctx_job		*running;
	uint64_t		 since_ns;	/* running's start */
	int			 said;		/* running reported stuck */
	int			 waiting;	/* work queued, no thread
						   allowed yet (a limit) */
	pthread_cond_t		 cond;		/* work queued, or let go */
	uint64_t		 mapped;	/* bytes of its client's files
						   we map (a region holds x
						   while it counts here) */
};

static pthread_mutex_t	 cctx_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 cctx_gone = PTHREAD_COND_INITIALIZER;
static TAILQ_HEAD(, cctx) cctx_all = TAILQ_HEAD_INITIALIZER(cctx_all);
static struct cctx_jobs	 cctx_done = TAILQ_HEAD_INITIALIZER(cctx_done);
static int		 cctx_running;
static int		 cctx_stopping;
static int		 cctx_threads;
static int		 cctx_efd = -1;
static struct event	*cctx_ev;
static struct event	*cctx_timer;
static int		 cctx_stuck_max = 4;
static int		 cctx_uid_max = 32;	/* busy contexts of a uid */
static int		 cctx_threads_max = 256;	/* all contexts' threads */
/* The longest stuck job seen (main thread). */
static struct cctx_report cctx_worst;

/* [limits]: stuck_contexts, contexts (a uid's), threads (all); 0: none. */
void
cctx_limits(int stuck_max, int uid_max, int threads_max)
{
	cctx_stuck_max = stuck_max;
	cctx_uid_max = uid_max;
	cctx_threads_max = threads_max;
}

/* Threads kept for everything else (workers, reaper, scrub, prep). */
#define CCTX_HEADROOM	64
/* [limits] threads = 0 and nothing smaller above us: this many. */
#define CCTX_THREADS_DEFAULT	1024

/* Our cgroup's pids.max (cgroup v2), or -1: none or unlimited. */
static long
cctx_pids_max(void)
{
	char	 line[512], path[600], *p;
	FILE	*f;
	long	 max = -1;

	if ((f = fopen("/proc/self/cgroup", "r")) == NULL)
		return (-1);
	path[0] = '\0';
	while ((p = fgets(line, sizeof(line), f)) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((p = strstr(line, ":pids:")) != NULL) {	/* v1 */
			snprintf(path, sizeof(path),
			    "/sys/fs/cgroup/pids%s/pids.max", p + 6);
			break;
		}
		if (strncmp(line, "0::", 3) == 0)		/* v2 */
			snprintf(path, sizeof(path),
			    "/sys/fs/cgroup%s/pids.max", line + 3);
	}
	fclose(f);
	if (path[0] == '\0')
		return (-1);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	if (fgets(line, sizeof(line), f) != NULL && line[0] >= '0' &&
	    line[0] <= '9')
		max = strtol(line, NULL, 10);
	fclose(f);
	return (max);
}

/*
 * [limits] threads = 0: what the daemon's own limits leave for contexts.
 * The tasks our cgroup may have (pids.max, systemd's TasksMax=) and, for
 * a uid other than root, RLIMIT_NPROC (counted over all the uid's
 * threads, so this is an upper bound), less CCTX_HEADROOM for our own
 * threads; at most CCTX_THREADS_DEFAULT.
 */
int
cctx_threads_derived(void)
{
	struct rlimit	rl;
	long		n = CCTX_THREADS_DEFAULT, m;

	if ((m = cctx_pids_max()) > 0 && m - CCTX_HEADROOM < n)
		n = m - CCTX_HEADROOM;
	if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY &&
	    (long)rl.rlim_cur - CCTX_HEADROOM < n)
		n = (long)rl.rlim_cur - CCTX_HEADROOM;
	return (n < 1 ? 1 : (int)n);
}

int
cctx_threads_limit(void)
{
	return (cctx_threads_max);
}

/*
 * Does x hold a thread of ours, or want one (cctx_lock held)?  A context
 * counts from its first queued job (a close of a passed fd included) until
 * its thread has nothing left and has gone.
 */
static int
cctx_counts(const struct cctx *x)
{
	return (x->thread || x->pending > 0);
}

static int	cctx_thread(struct cctx *, char *, size_t);

static uint64_t
cctx_ms_since(uint64_t t0)
{
	uint64_t now = stats_now_ns();

	return (now > t0 ? (now - t0) / 1000000 : 0);
}

/* Unlink and free a context nothing needs (cctx_lock held). */
static void
cctx_free(struct cctx *x)
{
	TAILQ_REMOVE(&cctx_all, x, entry);
	pthread_cond_destroy(&x->cond);
	free(x);
}

static void *
cctx_main(void *arg)
{
	struct cctx	*x = arg;
	struct cctx_job	*j;
	struct timespec	 ts;
	uint64_t	 one = 1;

	pthread_mutex_lock(&cctx_lock);
	for (;;) {
		if ((j = TAILQ_FIRST(&x->queue)) != NULL) {
			TAILQ_REMOVE(&x->queue, j, entry);
			x->running = j;
			x->since_ns = stats_now_ns();
			x->said = 0;
			pthread_mutex_unlock(&cctx_lock);
			j->work(j);
			pthread_mutex_lock(&cctx_lock);
			x->running = NULL;
			x->pending--;
			TAILQ_INSERT_TAIL(&cctx_done, j, entry);
			if (write(cctx_efd, &one, sizeof(one)) == -1 &&
			    errno != EAGAIN)
				log_warn("client context: wake the main thread");
			continue;
		}
		if (x->refs == 0 || cctx_stopping)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += CCTX_IDLE_MS / 1000;
		if (pthread_cond_timedwait(&x->cond, &cctx_lock, &ts) ==
		    ETIMEDOUT && TAILQ_EMPTY(&x->queue))
			break;
	}
	x->thread = 0;
	if (x->refs == 0)
		cctx_free(x);
	cctx_threads--;
	pthread_cond_broadcast(&cctx_gone);
	pthread_mutex_unlock(&cctx_lock);
	return (NULL);
}

/* Finished jobs: their done callbacks, in order (main thread). */
static void
cctx_done_cb(int fd, short events, void *arg)
{
	struct cctx_job	*j;
	uint64_t	 v;

	(void)events;
	(void)arg;
	if (fd >= 0 && read(fd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("client context: read eventfd");
	for (;;) {
		pthread_mutex_lock(&cctx_lock);
		if ((j = TAILQ_FIRST(&cctx_done)) != NULL)
			TAILQ_REMOVE(&cctx_done, j, entry);
		pthread_mutex_unlock(&cctx_lock);
		if (j == NULL)
			break;
		j->done(j);	/* it may free j */
	}
}

/*
 * Look for contexts stuck in a job (main thread): each is said once, with
 * what it waits in and for whom; the worst is kept for hpzctl status.
 */
static void
cctx_check_cb(int fd, short events, void *arg)
{
	struct cctx	*x;
	uint64_t	 ms, stuck = 0, longest = 0;
	struct timeval	 tv = { 0, CCTX_CHECK_MS * 1000 };
	char		 why[160];

	(void)fd;
	(void)events;
	(void)arg;
	pthread_mutex_lock(&cctx_lock);
	memset(&cctx_worst, 0, sizeof(cctx_worst));
	TAILQ_FOREACH(x, &cctx_all, entry) {
		/* Releases waiting for a thread: one may start now. */
		if (x->waiting && !x->thread && !TAILQ_EMPTY(&x->queue) &&
		    cctx_thread(x, why, sizeof(why)) == 0)
			log_info("client pid %d uid %u: its context has a "
			    "thread again", (int)x->pid, (unsigned)x->uid);
		if (x->thread)
			cctx_worst.contexts++;
		if (cctx_counts(x))
			cctx_worst.busy++;
		if (x->running == NULL ||
		    (ms = cctx_ms_since(x->since_ns)) < CCTX_STUCK_MS)
			continue;
		stuck++;
		if (!x->said) {
			x->said = 1;
			atomic_fetch_add(&stats.contexts_stuck_total, 1);
			log_warnx("client pid %d uid %u: its context is stuck in "
			    "the kernel for %llu ms in %s (a lock the client "
			    "holds?): only its own requests wait",
			    (int)x->pid, (unsigned)x->uid,
			    (unsigned long long)ms, x->running->what);
		}
		if (ms > longest) {
			longest = ms;
			cctx_worst.longest_ms = ms;
			cctx_worst.longest_pid = (int32_t)x->pid;
			cctx_worst.longest_uid = x->uid;
			snprintf(cctx_worst.longest_what,
			    sizeof(cctx_worst.longest_what), "%s",
			    x->running->what);
		}
	}
	cctx_worst.stuck = stuck;
	pthread_mutex_unlock(&cctx_lock);
	if (cctx_timer != NULL)
		evtimer_add(cctx_timer, &tv);
}

void
cctx_report(struct cctx_report *rep)
{
	*rep = cctx_worst;
}

int
cctx_start(void)
{
	struct timeval	tv = { 0, CCTX_CHECK_MS * 1000 };
	int		error;

	if (cctx_running)
		return (0);
	if ((cctx_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		error = -errno;
		log_warn("client contexts: eventfd");
		return (error);
	}
	cctx_ev = event_new(hpzd_base, cctx_efd, EV_READ | EV_PERSIST,
	    cctx_done_cb, NULL);
	cctx_timer = evtimer_new(hpzd_base, cctx_check_cb, NULL);
	if (cctx_ev == NULL || cctx_timer == NULL ||
	    event_add(cctx_ev, NULL) == -1 ||
	    evtimer_add(cctx_timer, &tv) == -1) {
		log_warnx("client contexts: cannot watch their eventfd");
		if (cctx_ev != NULL)
			event_free(cctx_ev);
		if (cctx_timer != NULL)
			event_free(cctx_timer);
		cctx_ev = cctx_timer = NULL;
		close(cctx_efd);
		cctx_efd = -1;
		return (-ENOMEM);
	}
	cctx_stopping = 0;
	cctx_running = 1;
	return (0);
}

/*
 * Let every context finish what is queued, waiting at most wait_ms: a
 * context stuck in the kernel is left behind (the process exits next).
 */
void
cctx_stop(int wait_ms)
{
	struct timespec	ts;
	int		left;

	if (!cctx_running)
		return;
	pthread_mutex_lock(&cctx_lock);
	cctx_stopping = 1;
	{
		struct cctx	*x;

		TAILQ_FOREACH(x, &cctx_all, entry)
			pthread_cond_signal(&x->cond);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += wait_ms / 1000;
	ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (cctx_threads > 0)
		if (pthread_cond_timedwait(&cctx_gone, &cctx_lock, &ts) ==
		    ETIMEDOUT)
			break;
	left = cctx_threads;
	pthread_mutex_unlock(&cctx_lock);
	if (left > 0)
		log_warnx("client contexts: %d still stuck in the kernel after "
		    "%d ms: left behind", left, wait_ms);
	else
		cctx_done_cb(-1, 0, NULL);
	event_free(cctx_ev);
	event_free(cctx_timer);
	cctx_ev = cctx_timer = NULL;
	cctx_running = 0;
	/* The eventfd stays open while a thread left behind may write it. */
	if (left == 0) {
		close(cctx_efd);
		cctx_efd = -1;
	}
}

/* The context of process pid, made if there is none; NULL: no memory. */
struct cctx *
cctx_get(pid_t pid, uid_t uid)
{
	struct cctx	*x;

	pthread_mutex_lock(&cctx_lock);
	TAILQ_FOREACH(x, &cctx_all, entry)
		if (x->pid == pid && x->uid == uid)
			break;
	if (x == NULL && (x = calloc(1, sizeof(*x))) != NULL) {
		x->pid = pid;
		x->uid = uid;
		TAILQ_INIT(&x->queue);
		pthread_cond_init(&x->cond, NULL);
		TAILQ_INSERT_TAIL(&cctx_all, x, entry);
	}
	if (x != NULL)
		x->refs++;
	pthread_mutex_unlock(&cctx_lock);
	return (x);
}

void
cctx_hold(struct cctx *x)
{
	pthread_mutex_lock(&cctx_lock);
	x->refs++;
	pthread_mutex_unlock(&cctx_lock);
}

/* Let go of a context: it goes once its thread has nothing left. */
void
cctx_put(struct cctx *x)
{
	if (x == NULL)
		return;
	pthread_mutex_lock(&cctx_lock);
	if (--x->refs == 0) {
		if (x->thread)
			pthread_cond_signal(&x->cond);
		else if (TAILQ_EMPTY(&x->queue))
			cctx_free(x);
	}
	pthread_mutex_unlock(&cctx_lock);
}

pid_t
cctx_pid(const struct cctx *x)
{
	return (x->pid);
}

/*
 * The address space our mappings of x's client's files take: charged
 * before the mmap, given back once the munmap is done (main thread; the
 * mapping's holder keeps x).  A negative delta gives back.
 */
void
cctx_mapped_add(struct cctx *x, int64_t delta)
{
	if (x == NULL)
		return;
	pthread_mutex_lock(&cctx_lock);
	if (delta < 0 && (uint64_t)-delta > x->mapped) {
		log_warnx("client pid %d: %llu mapped bytes given back, %llu "
		    "held", (int)x->pid, (unsigned long long)-delta,
		    (unsigned long long)x->mapped);
		x->mapped = 0;
	} else
		x->mapped += (uint64_t)delta;
	pthread_mutex_unlock(&cctx_lock);
}

/* [limits] contexts and threads in force, and the threads at work now. */
void
cctx_thread_figures(uint64_t *uid_max, uint64_t *threads_max,
    uint64_t *threads)
{
	pthread_mutex_lock(&cctx_lock);
	*uid_max = (uint64_t)cctx_uid_max;
	*threads_max = (uint64_t)cctx_threads_max;
	*threads = (uint64_t)cctx_threads;
	pthread_mutex_unlock(&cctx_lock);
}

/* What the contexts of uid (all uids: all != 0) have mapped. */
uint64_t
cctx_mapped(uid_t uid, int all)
{
	struct cctx	*x;
	uint64_t	 n = 0;

	pthread_mutex_lock(&cctx_lock);
	TAILQ_FOREACH(x, &cctx_all, entry)
		if (all || x->uid == uid)
			n += x->mapped;
	pthread_mutex_unlock(&cctx_lock);
	return (n);
}

/*
 * May x have a thread (cctx_lock held)?  0, or -errno with the limit it
 * would pass named in why: its uid's busy contexts ([limits] contexts),
 * all contexts' threads ([limits] threads).
 */
static int
cctx_may_start(const struct cctx *x, char *why, size_t whylen)
{
	const struct cctx	*y;
	int			 n = 0;

	if (cctx_threads_max > 0 && cctx_threads >= cctx_threads_max) {
		snprintf(why, whylen, "the daemon runs %d client context "
		    "threads, the most it may ([limits] threads in "
		    "hpzerod.conf): refused until one ends", cctx_threads);
		return (-EAGAIN);
	}
	if (cctx_uid_max > 0) {
		TAILQ_FOREACH(y, &cctx_all, entry)
			if (y != x && y->uid == x->uid && cctx_counts(y))
				n++;
		if (n >= cctx_uid_max) {
			snprintf(why, whylen, "uid %u has %d client contexts "
			    "at work, the most it may ([limits] contexts in "
			    "hpzerod.conf): refused until one is done",
			    (unsigned)x->uid, n);
			return (-EBUSY);
		}
	}
	return (0);
}

/* Start x's thread (cctx_lock held): 0 or -errno, why says it. */
static int
cctx_thread(struct cctx *x, char *why, size_t whylen)
{
	pthread_attr_t	attr;
	pthread_t	t;
	sigset_t	all, old;
	char		name[16];
	int		error;

	if ((error = cctx_may_start(x, why, whylen)) != 0)
		return (error);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&t, &attr, cctx_main, x);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0) {
		snprintf(why, whylen, "the daemon cannot start a thread for "
		    "this client's context (%s): refused", strerror(error));
		return (-error);
	}
	snprintf(name, sizeof(name), "hpzd-c%d", (int)x->pid);
	pthread_setname_np(t, name);
	x->thread = 1;
	x->waiting = 0;
	cctx_threads++;
	return (0);
}

static int
cctx_queue(struct cctx *x, struct cctx_job *j, void (*work)(struct cctx_job *),
    void (*done)(struct cctx_job *), void *arg, const char *what, int refuse)
{
	char	why[sizeof(j->why)];
	int	error;

	memset(j, 0, sizeof(*j));
	j->work = work;
	j->done = done;
	j->arg = arg;
	j->what = what;
	j->ctx = x;
	if (!cctx_running || x == NULL) {
		work(j);
		done(j);
		return (0);
	}
	pthread_mutex_lock(&cctx_lock);
	if (!x->thread && (error = cctx_thread(x, why, sizeof(why))) != 0) {
		if (refuse) {
			pthread_mutex_unlock(&cctx_lock);
			atomic_fetch_add(&stats.requests_refused_stuck, 1);
			log_warnx("client pid %d uid %u: %s refused: %s",
			    (int)x->pid, (unsigned)x->uid, what, why);
			j->error = error;
			snprintf(j->why, sizeof(j->why), "%s", why);
			done(j);
			return (-1);
		}
		/*
		 * A release (a close, a teardown): it must happen, and never
		 * here; it waits, queued, for a thread (cctx_check_cb).
		 */
		if (!x->waiting)
			log_warnx("client pid %d uid %u: %s waits for a thread "
			    "of its context: %s", (int)x->pid,
			    (unsigned)x->uid, what, why);
		x->waiting = 1;
	}
	TAILQ_INSERT_TAIL(&x->queue, j, entry);
	x->pending++;
	pthread_cond_signal(&x->cond);
	pthread_mutex_unlock(&cctx_lock);
	return (1);
}

/*
 * Run job j (the caller's until done is called): work on x's thread after
 * what x already has queued, then done on the main thread.  1 if queued
 * (where no thread may start now, under a limit or as pthread_create
 * fails, it waits for one: never on the loop); 0 if it ran at once (no
 * contexts at all: the fuzzer, the unit tests).
 */
int
cctx_submit(struct cctx *x, struct cctx_job *j, void (*work)(struct cctx_job *),
    void (*done)(struct cctx_job *), void *arg, const char *what)
{
	return (cctx_queue(x, j, work, done, arg, what, 0));
}

/*
 * The same for a client's request: where no thread may start for x (a
 * limit, or pthread_create fails), j is refused: done is called at once
 * with cctx_job_error(j) set and cctx_job_why(j) naming the limit, work
 * never runs, and -1 is returned.
 */
int
cctx_submit_request(struct cctx *x, struct cctx_job *j,
    void (*work)(struct cctx_job *), void (*done)(struct cctx_job *),
    void *arg, const char *what)
{
	return (cctx_queue(x, j, work, done, arg, what, 1));
}

/* Ask a job to stop between slices; its done callback still comes. */
void
cctx_cancel(struct cctx_job *j)
{
	atomic_store(&j->cancel, 1);
}

int
cctx_cancelled(const struct cctx_job *j)
{
	return (atomic_load(&j->cancel));
}

/* Was j refused before it ran (a limit, no thread)?  0 or -errno. */
int
cctx_job_error(const struct cctx_job *j)
{
	return (j->error);
}

/* Why j was refused, naming the limit (for the client's reply). */
const char *
cctx_job_why(const struct cctx_job *j)
{
	return (j->why);
}

/* Is a job of x running or queued? */
int
cctx_busy(const struct cctx *x)
{
	int	busy;

	pthread_mutex_lock(&cctx_lock);
	busy = x->running != NULL || !TAILQ_EMPTY(&x->queue);
	pthread_mutex_unlock(&cctx_lock);
	return (busy);
}

/* How many of x's jobs are queued or running. */
int
cctx_pending(const struct cctx *x)
{
	int	n;

	if (x == NULL)
		return (0);
	pthread_mutex_lock(&cctx_lock);
	n = x->pending;
	pthread_mutex_unlock(&cctx_lock);
	return (n);
}

/*
 * May process pid of uid connect?  No (-EBUSY, why names the limit) while
 * uid is at [limits] stuck_contexts (cctx_uid_refused), or at [limits]
 * contexts and pid has no context at work already: a new process would
 * bring its passed fds to a context that may have no thread.
 */
int
cctx_may_connect(pid_t pid, uid_t uid, char *why, size_t whylen)
{
	struct cctx	*x;
	int		 n = 0, own = 0, error;

	if ((error = cctx_uid_refused(uid, why, whylen)) != 0)
		return (error);
	if (cctx_uid_max <= 0)
		return (0);
	pthread_mutex_lock(&cctx_lock);
	TAILQ_FOREACH(x, &cctx_all, entry)
		if (x->uid == uid && cctx_counts(x)) {
			n++;
			if (x->pid == pid)
				own = 1;
		}
	pthread_mutex_unlock(&cctx_lock);
	if (own || n < cctx_uid_max)
		return (0);
	snprintf(why, whylen, "uid %u has %d client contexts at work, the "
	    "most it may ([limits] contexts in hpzerod.conf): refused until "
	    "one is done", (unsigned)uid, n);
	return (-EBUSY);
}

/*
 * May uid be given new work?  No (-EBUSY, why says so) once it has
 * [limits] stuck_contexts contexts stuck in the kernel: each holds a
 * thread of ours for as long as the uid chooses.
 */
int
cctx_uid_refused(uid_t uid, char *why, size_t whylen)
{
	struct cctx	*x;
	int		 n = 0;

	if (cctx_stuck_max <= 0)
		return (0);
	pthread_mutex_lock(&cctx_lock);
	TAILQ_FOREACH(x, &cctx_all, entry)
		if (x->uid == uid && x->running != NULL &&
		    cctx_ms_since(x->since_ns) >= CCTX_STUCK_MS)
			n++;
	pthread_mutex_unlock(&cctx_lock);
	if (n < cctx_stuck_max)
		return (0);
	atomic_fetch_add(&stats.requests_refused_stuck, 1);
	snprintf(why, whylen, "uid %u has %d client contexts stuck in the "
	    "kernel (on locks its own processes hold), the most it may have "
	    "([limits] stuck_contexts in hpzerod.conf): refused until they "
	    "let go", (unsigned)uid, n);
	return (-EBUSY);
}
