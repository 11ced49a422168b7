/*
 * worker.c - the worker pool.  One worker per CPU (or as many as asked),
 * pinned, made before serving, each with its own queue woken through an
 * eventfd.  An idle worker spins a short, adaptive while before it sleeps,
 * and polls the regions' uffds meanwhile, so a client faulting page after
 * page finds a handler already running.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <numa.h>

#include "hpz.h"

#include "clear.h"
#include "conf.h"
#include "globals.h"
#include "log.h"
#include "plan.h"
#include "stats.h"
#include "topo.h"
#include "worker.h"

#define WORKER_SPIN_MIN_NS	2000ULL
#define WORKER_POLL_MAX		256	/* sources an idle worker polls */

/*
 * A thread that makes userfaultfd ioctls into a client's address space
 * (UFFDIO_CONTINUE takes the client's VMA lock, or its mmap_lock when a
 * writer holds the VMA) may wait as long as the client likes.  Longer in
 * one ioctl than WORKER_STUCK_NS, far above any clear or map, it is stuck:
 * the watchdog gives its queued work to others, routing leaves it alone,
 * and faults of that client go to it, where they wait on their own client
 * only.  It stays that client's home WORKER_SLOW_HOLD_NS after it is back.
 * Spares keep the unstuck workers at the number asked, up to as many
 * again; past that, see hpzerod(8) (WORKERS).
 */
#define WORKER_STUCK_NS		(200ULL * 1000000)
#define WORKER_SLOW_HOLD_NS	(2000ULL * 1000000)
#define WORKER_WATCH_MS		50
#define WORKER_BG_MAX		HPZD_WORKERS_MAX
#define WORKER_TAKE_BATCH	64
#define WORKER_WAKE_MAX		16	/* fds one wake reads at most */

/* Who is in an ioctl on a client's mm, since when (0: not), which. */
struct worker_slot {
	atomic_uint_fast64_t	 since;
	atomic_uintptr_t	 mm;
	atomic_uint_fast64_t	 region;	/* its id, for the log */
	atomic_int		 pid;
	atomic_int		 stuck;		/* found so by the watchdog */
	atomic_uintptr_t	 slow_mm;	/* home of its faults, or 0 */
	atomic_uint		 owner;		/* uid of the client of mm */
	atomic_uint		 slow_owner;	/* the same, of slow_mm */
	atomic_uint_fast64_t	 slow_until;	/* avoided until (ns) */
	int			 bg;		/* a background thread's */
	char			 name[16];
};

struct worker {
	struct worker_slot	 slot;
	pthread_t		 thread;
	int			 id;
	int			 cpu;		/* pinned to, or -1 */
	int			 node;
	int			 efd;
	int			 epfd;		/* efd and the sources' fds */
	pthread_mutex_t		 lock;
	struct workq		 queue;
	atomic_int		 pending;	/* items in queue */
	atomic_int		 sleeping;	/* blocked on efd */
	atomic_int		 idle;		/* spinning or sleeping */
	uint64_t		 spin_ns;	/* current spin budget */
	atomic_int		 stop;
	int			 spare;		/* made for a stuck one */
};

/* What runs, from the settings (conf_worker); set by worker_start. */
struct worker_config	 worker_config;

static struct worker	*workers;
static int		*worker_cpus;
static int		 nworkers;	/* asked for, pinned, routed to */
static atomic_int	 worker_nlive;	/* those and the spares made */
static int		 worker_spares_max;

/* The watchdog (worker_watch_main), and background threads' slots. */
static pthread_t	 worker_watch_thread;
static int		 worker_watching;
static atomic_int	 worker_watch_stop;
static struct worker_slot worker_bg[WORKER_BG_MAX];
static atomic_int	 worker_nbg;
/* Slots with slow_mm set (the watchdog writes both). */
static atomic_int	 worker_nslow;
static int		 worker_all_caught;	/* said so (watchdog) */
static __thread struct worker_slot *worker_tls;

static void	*worker_main(void *);
/* Workers placed on their CPU so far: worker_start waits for them all. */
static pthread_mutex_t	 worker_placed_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 worker_placed_cond = PTHREAD_COND_INITIALIZER;
static int		 worker_placed;

/*
 * Faults to try again later (their client's mm was changing): due times in
 * ns, taken by whichever worker is idle when one is due.  A worker about
 * to sleep sleeps no longer than until the first is due; the one that
 * deferred is awake, so some worker always sees the list.
 */
static pthread_mutex_t	 worker_defer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct workq	 worker_deferred =
			    TAILQ_HEAD_INITIALIZER(worker_deferred);
static atomic_int	 worker_ndeferred;
static atomic_uint_fast64_t worker_defer_next = UINT64_MAX;

/* Regions idle workers poll: main thread writes, workers read. */
static pthread_rwlock_t	 worker_poll_lock = PTHREAD_RWLOCK_INITIALIZER;
/* What an idle worker reads work from: a region's uffd (uffd.c). */
struct worker_source {
	int		(*read)(void *, struct worker *);
	void		*arg;
	int		 fd;		/* slept on by idle workers, or -1 */
	int		 node;		/* the worker's node reads it, or -1 */
};
static struct worker_source	 worker_poll[WORKER_POLL_MAX];
static atomic_int	 worker_npoll;

int
worker_count(void)
{
	return (atomic_load(&worker_nlive));
}

int
worker_id(const struct worker *w)
{
	return (w->id);
}

static inline void
worker_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * Which worker takes a fault: one on the node that holds the page, the one
 * on the faulting CPU if it is there, else one chosen by hash.  Pure, so
 * routing on many nodes can be tested with a made-up topology.
 */
int
worker_route(const struct topo *t, const int *worker_cpu, int n,
    int fault_cpu, int page_node, uint64_t hash)
{
	int	i, cand[HPZD_WORKERS_MAX], ncand = 0, cpu;

	if (n <= 0)
		return (-1);
	if (page_node >= 0) {
		for (i = 0; i < n; i++) {
			cpu = worker_cpu[i];
			if (cpu >= 0 && cpu < TOPO_CPUS_MAX &&
			    t->cpu_node[cpu] == page_node)
				cand[ncand++] = i;
		}
		for (i = 0; i < ncand; i++)
			if (worker_cpu[cand[i]] == fault_cpu)
				return (cand[i]);
		if (ncand > 0)
			return (cand[hash % (uint64_t)ncand]);
	}
	if (fault_cpu >= 0)
		for (i = 0; i < n; i++)
			if (worker_cpu[i] == fault_cpu)
				return (i);
	return ((int)(hash % (uint64_t)n));
}

/* Take the first queued item, or NULL. */
static struct work *
worker_pop(struct worker *w)
{
	struct work	*item;

	if (atomic_load(&w->pending) == 0)
		return (NULL);
	pthread_mutex_lock(&w->lock);
	item = TAILQ_FIRST(&w->queue);
	if (item != NULL) {
		TAILQ_REMOVE(&w->queue, item, entry);
		atomic_fetch_sub(&w->pending, 1);
	}
	pthread_mutex_unlock(&w->lock);
	return (item);
}

/*
 * Take queued items that match (for coalescing), at most max, in queue
 * order.  Returns how many.
 */
size_t
worker_take(struct worker *w, int (*match)(struct work *, void *), void *arg,
    struct work **out, size_t max)
{
	struct work	*item, *next;
	size_t		 n = 0;

	if (atomic_load(&w->pending) == 0)
		return (0);
	pthread_mutex_lock(&w->lock);
	for (item = TAILQ_FIRST(&w->queue); item != NULL && n < max;
	    item = next) {
		next = TAILQ_NEXT(item, entry);
		if (!match(item, arg))
			continue;
		TAILQ_REMOVE(&w->queue, item, entry);
		atomic_fetch_sub(&w->pending, 1);
		out[n++] = item;
	}
	pthread_mutex_unlock(&w->lock);
	return (n);
}

/* Queue an item on w and wake it if it sleeps. */
void
worker_push(struct worker *w, struct work *item)
{
	uint64_t	one = 1;

	pthread_mutex_lock(&w->lock);
	TAILQ_INSERT_TAIL(&w->queue, item, entry);
	atomic_fetch_add(&w->pending, 1);
	pthread_mutex_unlock(&w->lock);
	if (atomic_load(&w->sleeping) &&
	    write(w->efd, &one, sizeof(one)) == -1)
		fatal("worker %d: wake", w->id);
}

/* --- threads stuck in a client's kernel locks ---------------------------- */

/* Slot s avoided now: stuck, or home of a client lately stuck. */
static int
worker_slot_avoided(struct worker_slot *s, uint64_t now)
{
	return (atomic_load(&s->stuck) || now < atomic_load(&s->slow_until));
}

/*
 * Of n slots (their slow owners, and whether each is avoided now), the one
 * a fault of owner goes to when that owner's clients already hold max of
 * them (chosen by key, so that one address space keeps to one), or -1.
 * Pure, for the unit tests.
 */
int
worker_owner_home(const uint32_t *slow_owner, const int *avoided, int n,
    uint32_t owner, uint64_t key, int max)
{
	int	i, held = 0, pick;

	if (owner == WORKER_NO_OWNER || max <= 0)
		return (-1);
	for (i = 0; i < n; i++)
		held += avoided[i] && slow_owner[i] == owner;
	if (held < max)
		return (-1);
	pick = (int)(key % (uint64_t)held);
	for (i = 0; i < n; i++)
		if (avoided[i] && slow_owner[i] == owner && pick-- == 0)
			return (i);
	return (-1);
}

/*
 * The worker faults of mm go to while mm is slow (a worker of ours is, or
 * lately was, stuck in its kernel locks), or NULL.
 */
static struct worker *
worker_home_mm(uintptr_t mm)
{
	uint64_t	now;
	int		i, n;

	if (mm == 0 || atomic_load(&worker_nslow) == 0)
		return (NULL);
	now = stats_now_ns();
	n = atomic_load(&worker_nlive);
	for (i = 0; i < n; i++)
		if (atomic_load(&workers[i].slot.slow_mm) == mm &&
		    worker_slot_avoided(&workers[i].slot, now))
			return (&workers[i]);
	return (NULL);
}

/*
 * Where item must go, or NULL: its address space's home, else, when its
 * client's uid holds WORKER_OWNER_SLOW_MAX workers stuck already, one of
 * those (a uid's many processes, each holding its own lock, must not
 * catch every worker one by one: they wait on their own).
 */
static struct worker *
worker_home(const struct work *item)
{
	uint32_t	owners[HPZD_WORKERS_MAX * 2];
	int		avoided[HPZD_WORKERS_MAX * 2];
	uint64_t	now;
	struct worker	*h;
	int		i, n;

	if ((h = worker_home_mm(item->mm)) != NULL)
		return (h);
	if (item->mm == 0 || item->owner == WORKER_NO_OWNER ||
	    atomic_load(&worker_nslow) < WORKER_OWNER_SLOW_MAX)
		return (NULL);
	now = stats_now_ns();
	n = atomic_load(&worker_nlive);
	if (n > HPZD_WORKERS_MAX * 2)
		n = HPZD_WORKERS_MAX * 2;
	for (i = 0; i < n; i++) {
		owners[i] = atomic_load(&workers[i].slot.slow_owner);
		avoided[i] = atomic_load(&workers[i].slot.slow_mm) != 0 &&
		    worker_slot_avoided(&workers[i].slot, now);
	}
	i = worker_owner_home(owners, avoided, n, item->owner,
	    (uint64_t)item->mm / 64, WORKER_OWNER_SLOW_MAX);
	return (i >= 0 ? &workers[i] : NULL);
}

/* True while a thread of ours is, or lately was, stuck on mm (premap). */
int
worker_mm_slow(uintptr_t mm)
{
	uint64_t	now;
	int		i, n;

	if (mm == 0 || atomic_load(&worker_nslow) == 0)
		return (0);
	if (worker_home_mm(mm) != NULL)
		return (1);
	now = stats_now_ns();
	n = atomic_load(&worker_nbg);
	for (i = 0; i < n; i++)
		if (atomic_load(&worker_bg[i].slow_mm) == mm &&
		    worker_slot_avoided(&worker_bg[i], now))
			return (1);
	return (0);
}

/* Worker i, or the next one routing need not avoid (i if none). */
static int
worker_unstuck(int i)
{
	uint64_t	now;
	int		k, j, n;

	if (atomic_load(&worker_nslow) == 0)
		return (i);
	now = stats_now_ns();
	if (!worker_slot_avoided(&workers[i].slot, now))
		return (i);
	n = atomic_load(&worker_nlive);
	for (k = 1; k < n; k++) {
		j = (i + k) % n;
		if (!worker_slot_avoided(&workers[j].slot, now))
			return (j);
	}
	return (i);
}

/*
 * The calling thread enters (worker_ioctl_enter) or leaves an ioctl on the
 * address space mm of a client (region, pid: what the log names).  Only
 * threads with a slot (workers, worker_bg_slot) are watched.
 */
void
worker_ioctl_enter(uintptr_t mm, uint64_t region, int pid, uint32_t owner)
{
	struct worker_slot	*s = worker_tls;

	if (s == NULL)
		return;
	atomic_store(&s->mm, mm);
	atomic_store(&s->owner, owner);
	atomic_store(&s->region, region);
	atomic_store(&s->pid, pid);
	atomic_store(&s->since, stats_now_ns());
}

void
worker_ioctl_leave(void)
{
	struct worker_slot	*s = worker_tls;
	uint64_t		 now, since;

	if (s == NULL)
		return;
	since = atomic_exchange(&s->since, 0);
	if (!atomic_exchange(&s->stuck, 0))
		return;
	now = stats_now_ns();
	atomic_store(&s->slow_until, now + WORKER_SLOW_HOLD_NS);
	log_debug("%s: back from region %llu (pid %d) after %llu ms",
	    s->name, (unsigned long long)atomic_load(&s->region),
	    atomic_load(&s->pid),
	    (unsigned long long)((now - since) / 1000000));
}

/* A slot for a background thread that makes such ioctls (scrub.c). */
void
worker_bg_slot(const char *name)
{
	int	i;

	if ((i = atomic_fetch_add(&worker_nbg, 1)) >= WORKER_BG_MAX) {
		atomic_fetch_sub(&worker_nbg, 1);
		return;
	}
	snprintf(worker_bg[i].name, sizeof(worker_bg[i].name), "%s", name);
	worker_bg[i].bg = 1;
	worker_tls = &worker_bg[i];
}

/*
 * Decide whether slot s is stuck (watchdog).  1 when it just became so:
 * it and its client's faults are marked; a slot back meanwhile is left as
 * it is (its leave and this agree whatever the order).
 */
static int
worker_watch_slot(struct worker_slot *s, uint64_t now)
{
	uint64_t	since = atomic_load(&s->since);
	uintptr_t	mm = atomic_load(&s->mm), was;
	int		zero = 0, one = 1;

	if (atomic_load(&s->stuck))
		return (0);
	/* Entered after now was read: not stuck. */
	if (since == 0 || since > now || now - since < WORKER_STUCK_NS) {
		/* Home of a client no longer slow: let it go. */
		if (atomic_load(&s->slow_mm) != 0 &&
		    now >= atomic_load(&s->slow_until)) {
			atomic_store(&s->slow_mm, 0);
			atomic_fetch_sub(&worker_nslow, 1);
		}
		return (0);
	}
	atomic_store(&s->slow_until, UINT64_MAX);
	atomic_store(&s->slow_owner, atomic_load(&s->owner));
	if ((was = atomic_exchange(&s->slow_mm, mm)) == 0)
		atomic_fetch_add(&worker_nslow, 1);
	if (!atomic_compare_exchange_strong(&s->stuck, &zero, 1))
		return (0);
	if (atomic_load(&s->since) != since) {
		/* Back already: a short caution, no more. */
		if (atomic_compare_exchange_strong(&s->stuck, &one, 0))
			atomic_store(&s->slow_until, now +
			    WORKER_SLOW_HOLD_NS);
		return (0);
	}
	atomic_fetch_add(&stats.threads_stuck_total, 1);
	/* Once a client: again while it is still slow is no news. */
	if (was == mm)
		log_debug("%s: stuck again on region %llu (pid %d)", s->name,
		    (unsigned long long)atomic_load(&s->region),
		    atomic_load(&s->pid));
	else
		log_warnx("%s: stuck %llu ms in a userfaultfd ioctl on region "
		    "%llu (pid %d), waiting on that client's memory map lock: "
		    "%s", s->name,
		    (unsigned long long)((now - since) / 1000000),
		    (unsigned long long)atomic_load(&s->region),
		    atomic_load(&s->pid), s->bg ? "no more premaps into that "
		    "client for now" : "its other work goes elsewhere, that "
		    "client's faults wait on it");
	return (1);
}

/* Queued work not of mm (the client w is stuck on). */
static int
worker_other_mm(struct work *item, void *arg)
{
	return (item->mm != *(uintptr_t *)arg);
}

/* Give what waits on stuck worker w, but its own client's, to others. */
static void
worker_take_over(struct worker *w)
{
	struct work	*item[WORKER_TAKE_BATCH];
	uintptr_t	 mm = atomic_load(&w->slot.slow_mm);
	size_t		 n, k;
	int		 j;

	while ((n = worker_take(w, worker_other_mm, &mm, item,
	    WORKER_TAKE_BATCH)) > 0) {
		atomic_fetch_add(&stats.work_taken_over, n);
		for (k = 0; k < n; k++) {
			j = worker_unstuck(w->id);
			if (item[k]->requeue != NULL)
				item[k]->requeue(item[k]);
			else
				worker_push(&workers[j], item[k]);
		}
		if (n < WORKER_TAKE_BATCH)
			break;
	}
}

/* Does worker w sleep on source src? */
static int
worker_sleeps_on(const struct worker *w, const struct worker_source *src)
{
	return (src->fd >= 0 && (src->node < 0 || w->cpu < 0 ||
	    src->node == w->node));
}

/*
 * Arm w's sleep on src's fd for one wake (op: EPOLL_CTL_ADD or _MOD).  One
 * shot: a worker woken reads and arms it again, and an entry whose source
 * went in a race can wake it once at most, never spin it.
 */
static void
worker_epoll_arm(struct worker *w, const struct worker_source *src, int op)
{
	struct epoll_event	ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.fd = src->fd;
	(void)epoll_ctl(w->epfd, op, src->fd, &ev);
}

/*
 * w's epoll: its eventfd, and the fds of the sources it reads, so that a
 * worker asleep is woken by a fault itself (on the faulting CPU, where the
 * client's thread has just left the CPU free) rather than by the loop's
 * second wake-up.  Caller holds worker_poll_lock, or w is not live yet.
 */
static int
worker_epoll_make(struct worker *w)
{
	struct epoll_event	ev;
	int			i, n;

	if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) == -1)
		return (errno);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = -1;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->efd, &ev) == -1) {
		i = errno;
		close(w->epfd);
		return (i);
	}
	n = atomic_load(&worker_npoll);
	for (i = 0; i < n; i++)
		if (worker_sleeps_on(w, &worker_poll[i]))
			worker_epoll_arm(w, &worker_poll[i], EPOLL_CTL_ADD);
	return (0);
}

/* Start spare worker i (watchdog); 0 or an errno. */
static int
worker_spawn(int i, int spare)
{
	struct worker	*w = &workers[i];
	int		 error;

	w->id = i;
	w->spare = spare;
	if (spare) {
		w->cpu = -1;	/* unpinned: it stands in for a stuck one */
		w->node = 0;
	}
	w->spin_ns = (uint64_t)worker_config.spin_us * 1000;
	snprintf(w->slot.name, sizeof(w->slot.name), "worker %d", i);
	TAILQ_INIT(&w->queue);
	if ((w->efd = eventfd(0, EFD_CLOEXEC)) == -1)
		return (errno);
	if ((error = worker_epoll_make(w)) != 0) {
		close(w->efd);
		return (error);
	}
	pthread_mutex_init(&w->lock, NULL);
	if ((error = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
		pthread_mutex_destroy(&w->lock);
		close(w->epfd);
		close(w->efd);
		return (error);
	}
	return (0);
}

/*
 * One look at every thread in a client's ioctl: mark the stuck, move
 * their other work, and make a spare when fewer than asked are free.
 */
static void
worker_watch_pass(void)
{
	uint64_t	now = stats_now_ns();
	int		i, n, nbg, stuck = 0, bgstuck = 0, free = 0, error;

	n = atomic_load(&worker_nlive);
	for (i = 0; i < n; i++) {
		worker_watch_slot(&workers[i].slot, now);
		if (atomic_load(&workers[i].slot.stuck)) {
			stuck++;
			worker_take_over(&workers[i]);
		} else if (!worker_slot_avoided(&workers[i].slot, now))
			free++;
	}
	nbg = atomic_load(&worker_nbg);
	for (i = 0; i < nbg; i++) {
		worker_watch_slot(&worker_bg[i], now);
		if (atomic_load(&worker_bg[i].stuck))
			bgstuck++;
	}
	atomic_store(&stats.workers_stuck, stuck);
	atomic_store(&stats.bg_threads_stuck, bgstuck);
	if (free > 0)
		worker_all_caught = 0;
	if (free >= nworkers || stuck == 0)
		return;
	if (n >= nworkers + worker_spares_max) {
		if (free == 0 && !worker_all_caught) {
			worker_all_caught = 1;
			log_warnx("every worker waits on a client's memory "
			    "map lock, and %d spares are made already: faults "
			    "wait until one is back", worker_spares_max);
		}
		return;
	}
	/* Under the lock: no source comes or goes unseen by the spare. */
	pthread_rwlock_wrlock(&worker_poll_lock);
	if ((error = worker_spawn(n, 1)) == 0)
		atomic_store(&worker_nlive, n + 1);
	pthread_rwlock_unlock(&worker_poll_lock);
	if (error != 0) {
		log_warnx("worker %d: a spare: %s", n, strerror(error));
		return;
	}
	atomic_store(&stats.workers_spare, n + 1 - nworkers);
	log_info("worker %d: a spare, while %d wait on a client", n, stuck);
}

static void *
worker_watch_main(void *arg)
{
	struct timespec	ts = { 0, WORKER_WATCH_MS * 1000000L };

	(void)arg;
	pthread_setname_np(pthread_self(), "hpz-wwatch");
	while (!atomic_load(&worker_watch_stop)) {
		nanosleep(&ts, NULL);
		worker_watch_pass();
	}
	return (NULL);
}

/* A fault a spinning worker read: its own, unless its client is slow. */
void
worker_push_polled(struct worker *self, struct work *item)
{
	struct worker	*h;

	if ((h = worker_home(item)) != NULL && h != self)
		worker_push(h, item);
	else
		worker_push(self, item);
}

/*
 * Route a fault read on the main thread to its worker: its address
 * space's home if it has one, else by the CPU it was read on, the node
 * of its page and hash, which spreads faults over the workers.
 */
void
worker_submit(struct work *item, int fault_cpu, int page_node, uint64_t hash)
{
	struct worker	*h;
	int		 i;

	if ((h = worker_home(item)) != NULL) {
		worker_push(h, item);
		return;
	}
	if (worker_config.route == ROUTE_HASH)
		fault_cpu = -1;
	i = worker_route(&topo, worker_cpus, nworkers, fault_cpu, page_node,
	    hash);
	worker_push(&workers[worker_unstuck(i)], item);
}

/*
 * Offer a job's extents to idle workers of node (-1: any); each holds a
 * reference to the job, and runs run with it.  Returns how many were
 * asked.
 */
int
worker_assist(struct clear_job *job, struct region *r, int node,
    struct worker *self, int awake_only,
    void (*run)(struct worker *, struct work *))
{
	struct work	*item;
	uint64_t	 now = stats_now_ns();
	int		 i, n, asked = 0;

	n = atomic_load(&worker_nlive);
	for (i = 0; i < n; i++) {
		if (&workers[i] == self || !atomic_load(&workers[i].idle) ||
		    worker_slot_avoided(&workers[i].slot, now))
			continue;
		if (awake_only && atomic_load(&workers[i].sleeping))
			continue;
		if (node >= 0 && workers[i].node != node)
			continue;
		if ((item = calloc(1, sizeof(*item))) == NULL)
			break;
		item->type = WORK_ASSIST;
		item->run = run;
		item->job = job;
		item->region = r;
		clear_job_get(job);
		worker_push(&workers[i], item);
		asked++;
	}
	return (asked);
}

/* Try a fault again in delay_ns, on whichever worker is idle then. */
void
worker_defer(struct work *item, uint64_t delay_ns)
{
	uint64_t	due = stats_now_ns() + delay_ns;

	item->due = due;
	pthread_mutex_lock(&worker_defer_lock);
	TAILQ_INSERT_TAIL(&worker_deferred, item, entry);
	atomic_fetch_add(&worker_ndeferred, 1);
	if (due < atomic_load(&worker_defer_next))
		atomic_store(&worker_defer_next, due);
	pthread_mutex_unlock(&worker_defer_lock);
}

/*
 * Move the deferred items that are due onto w's queue.  Returns the ns
 * until the next one is due, or UINT64_MAX when none waits.
 */
static uint64_t
worker_take_due(struct worker *w)
{
	struct work	*item, *next;
	uint64_t	 now, first = UINT64_MAX;

	if (atomic_load(&worker_ndeferred) == 0)
		return (UINT64_MAX);
	now = stats_now_ns();
	if (now < atomic_load(&worker_defer_next))
		return (atomic_load(&worker_defer_next) - now);
	pthread_mutex_lock(&worker_defer_lock);
	for (item = TAILQ_FIRST(&worker_deferred); item != NULL; item = next) {
		next = TAILQ_NEXT(item, entry);
		if (item->due > now) {
			if (item->due < first)
				first = item->due;
			continue;
		}
		TAILQ_REMOVE(&worker_deferred, item, entry);
		atomic_fetch_sub(&worker_ndeferred, 1);
		worker_push_polled(w, item);
	}
	atomic_store(&worker_defer_next, first);
	pthread_mutex_unlock(&worker_defer_lock);
	return (first == UINT64_MAX ? UINT64_MAX : first - now);
}

/* Take the deferred items of a region being let go (main thread). */
void
worker_cancel(struct region *r, struct workq *out)
{
	struct work	*item, *next;

	if (atomic_load(&worker_ndeferred) == 0)
		return;
	pthread_mutex_lock(&worker_defer_lock);
	for (item = TAILQ_FIRST(&worker_deferred); item != NULL; item = next) {
		next = TAILQ_NEXT(item, entry);
		if (item->region != r)
			continue;
		TAILQ_REMOVE(&worker_deferred, item, entry);
		atomic_fetch_sub(&worker_ndeferred, 1);
		TAILQ_INSERT_TAIL(out, item, entry);
	}
	pthread_mutex_unlock(&worker_defer_lock);
}

/* Workers other than self idle and spinning (not asleep) right now. */
int
worker_spinning(const struct worker *self)
{
	int	i, n = 0, live = atomic_load(&worker_nlive);

	for (i = 0; i < live; i++)
		if (&workers[i] != self && atomic_load(&workers[i].idle) &&
		    !atomic_load(&workers[i].sleeping))
			n++;
	return (n);
}

/*
 * Idle workers of node (-1: any) call read(arg, worker) for work from now
 * on: 1, or 0 when the list is full (then none does).
 */
int
worker_poll_add(int (*read)(void *, struct worker *), void *arg, int fd,
    int node)
{
	int	i, n, live, added = 0;

	pthread_rwlock_wrlock(&worker_poll_lock);
	n = atomic_load(&worker_npoll);
	if (n < WORKER_POLL_MAX) {
		worker_poll[n].read = read;
		worker_poll[n].arg = arg;
		worker_poll[n].fd = fd;
		worker_poll[n].node = node;
		atomic_store(&worker_npoll, n + 1);
		added = 1;
		live = atomic_load(&worker_nlive);
		for (i = 0; i < live; i++)
			if (worker_sleeps_on(&workers[i], &worker_poll[n]))
				worker_epoll_arm(&workers[i], &worker_poll[n],
				    EPOLL_CTL_ADD);
	}
	pthread_rwlock_unlock(&worker_poll_lock);
	return (added);
}

/* After this returns no worker reads from arg. */
void
worker_poll_remove(void *arg)
{
	int	i, k, n, live;

	pthread_rwlock_wrlock(&worker_poll_lock);
	n = atomic_load(&worker_npoll);
	for (i = 0; i < n; i++) {
		if (worker_poll[i].arg == arg) {
			live = atomic_load(&worker_nlive);
			for (k = 0; k < live; k++)
				if (worker_sleeps_on(&workers[k],
				    &worker_poll[i]))
					(void)epoll_ctl(workers[k].epfd,
					    EPOLL_CTL_DEL, worker_poll[i].fd,
					    NULL);
			worker_poll[i] = worker_poll[n - 1];
			atomic_store(&worker_npoll, n - 1);
			break;
		}
	}
	pthread_rwlock_unlock(&worker_poll_lock);
}

/*
 * While idle: read whatever faults wait in the sources (the regions'
 * uffds).  Not those of a region on another node: a fault read here is served here, and the
 * page would come from our node (that node's workers, or the reader, take
 * them).
 */
static int
worker_poll_uffds(struct worker *w)
{
	int	i, n, got = 0;

	if (atomic_load(&worker_npoll) == 0)
		return (0);
	if (pthread_rwlock_tryrdlock(&worker_poll_lock) != 0)
		return (0);
	n = atomic_load(&worker_npoll);
	for (i = 0; i < n; i++)
		if (worker_poll[i].node < 0 || w->cpu < 0 ||
		    worker_poll[i].node == w->node)
			got += worker_poll[i].read(worker_poll[i].arg, w);
	pthread_rwlock_unlock(&worker_poll_lock);
	return (got);
}

/*
 * Spin for work a while, polling uffds; the budget doubles when work came
 * while spinning and halves when it did not.  1 if work is there.
 */
static int
worker_spin(struct worker *w)
{
	uint64_t	start, max;
	unsigned int	i;

	max = (uint64_t)worker_config.spin_us * 1000;
	if (max == 0)
		return (0);
	start = stats_now_ns();
	for (i = 0;; i++) {
		if (atomic_load(&w->pending) != 0 ||
		    ((i & 15) == 0 && worker_poll_uffds(w) > 0)) {
			w->spin_ns = w->spin_ns * 2 > max ? max :
			    w->spin_ns * 2;
			return (1);
		}
		worker_relax();
		if ((i & 63) != 0)
			continue;
		if (stats_now_ns() - start > w->spin_ns)
			break;
		/*
		 * A thread of a client's that we just woke on this CPU runs
		 * before our spin goes on (we spin on the CPU a fault left).
		 */
		sched_yield();
	}
	w->spin_ns = w->spin_ns / 2 < WORKER_SPIN_MIN_NS ? WORKER_SPIN_MIN_NS :
	    w->spin_ns / 2;
	return (0);
}

/*
 * A source's fd woke w from its sleep: read it (its faults come to w, who
 * is on the CPU the faulting thread left) and arm the fd again.  An fd no
 * source has now (it went meanwhile), or a broken one, is left disarmed.
 */
static void
worker_woken_by(struct worker *w, int fd, uint32_t events)
{
	int	i, n;

	pthread_rwlock_rdlock(&worker_poll_lock);
	n = atomic_load(&worker_npoll);
	for (i = 0; i < n; i++) {
		if (worker_poll[i].fd != fd || !worker_sleeps_on(w,
		    &worker_poll[i]))
			continue;
		(void)worker_poll[i].read(worker_poll[i].arg, w);
		/*
		 * A broken uffd (an error or hang-up, which a client can
		 * cause) would wake us at once for ever: left disarmed; the
		 * loop's own watch reads it, fails and lets the region go.
		 */
		if (!(events & (EPOLLERR | EPOLLHUP)))
			worker_epoll_arm(w, &worker_poll[i], EPOLL_CTL_MOD);
		break;
	}
	pthread_rwlock_unlock(&worker_poll_lock);
}

/* Pin to our CPU and prefer its node for what we allocate. */
static void
worker_place(struct worker *w)
{
	cpu_set_t	set;

	if (w->cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		log_warnx("worker %d: cannot pin to CPU %d", w->id, w->cpu);
	if (numa_available() != -1 && topo.nnodes > 1)
		numa_set_preferred(w->node);
}

static void *
worker_main(void *arg)
{
	struct worker		*w = arg;
	struct work		*item;
	struct epoll_event	 ev[WORKER_WAKE_MAX];
	char			 name[16];
	uint64_t		 v, due;
	int			 ms, i, n;

	snprintf(name, sizeof(name), "hpz-worker-%d", w->id);
	pthread_setname_np(pthread_self(), name);
	worker_tls = &w->slot;
	worker_place(w);
	pthread_mutex_lock(&worker_placed_lock);
	worker_placed++;
	pthread_cond_signal(&worker_placed_cond);
	pthread_mutex_unlock(&worker_placed_lock);
	atomic_fetch_add(&hpzd_busy, 1);	/* awake: cost.c */
	for (;;) {
		if ((item = worker_pop(w)) != NULL) {
			atomic_store(&w->idle, 0);
			item->run(w, item);
			continue;
		}
		if ((due = worker_take_due(w)) == 0 ||
		    atomic_load(&w->pending) != 0)
			continue;
		atomic_store(&w->idle, 1);
		if (w->stop)
			break;
		if (worker_spin(w))
			continue;
		atomic_store(&w->sleeping, 1);
		atomic_fetch_sub(&hpzd_busy, 1);
		if (atomic_load(&w->pending) != 0 || w->stop) {
			atomic_fetch_add(&hpzd_busy, 1);
			atomic_store(&w->sleeping, 0);
			continue;
		}
		/*
		 * Asleep until woken, by a push or a fault on a source, or
		 * until a deferred fault is due.
		 */
		due = worker_take_due(w);
		ms = due == UINT64_MAX ? -1 : (int)(due / 1000000ULL) + 1;
		n = 0;
		if (atomic_load(&w->pending) == 0 &&
		    (n = epoll_wait(w->epfd, ev, WORKER_WAKE_MAX, ms)) == -1) {
			if (errno != EINTR)
				fatal("worker %d: epoll_wait", w->id);
			n = 0;
		}
		atomic_fetch_add(&hpzd_busy, 1);
		atomic_store(&w->sleeping, 0);
		for (i = 0; i < n; i++) {
			if (ev[i].data.fd == -1) {
				if (read(w->efd, &v, sizeof(v)) == -1 &&
				    errno != EINTR && errno != EAGAIN)
					fatal("worker %d: read eventfd", w->id);
			} else
				worker_woken_by(w, ev[i].data.fd,
				    ev[i].events);
		}
	}
	atomic_fetch_sub(&hpzd_busy, 1);
	return (NULL);
}

/* The largest extent a clear takes: as set, or one CPU's share of the LLC. */
uint64_t
worker_extent_max(const struct worker_config *cfg)
{
	if (cfg->extent_max != 0)
		return (cfg->extent_max);
	return (plan_extent_max(topo.llc_share));
}

/*
 * Make the pool, one worker per online CPU in turn; returns once running
 * (0), or with none running and what failed logged (a negative errno).
 */
int
worker_start(const struct worker_config *cfg)
{
	int	i, error = 0, cpu, n = cfg->nworkers, cap;

	if (n < 1 || n > HPZD_WORKERS_MAX)
		return (-EINVAL);
	worker_config = *cfg;
	/* Room for the spares (worker_watch_pass): as many again. */
	worker_spares_max = n < HPZD_WORKERS_MAX - n ? n :
	    HPZD_WORKERS_MAX - n;
	cap = n + worker_spares_max;
	if ((workers = calloc((size_t)cap, sizeof(*workers))) == NULL ||
	    (worker_cpus = calloc((size_t)n, sizeof(*worker_cpus))) == NULL) {
		log_warn("%d workers", n);
		free(workers);
		workers = NULL;
		return (-ENOMEM);
	}
	worker_placed = 0;
	cpu = -1;
	for (i = 0; i < n; i++) {
		/* Next online CPU, wrapping; -1 (unpinned) if none known. */
		if (topo.ncpus > 0) {
			do
				cpu = (cpu + 1) % topo.ncpus;
			while (!topo.cpu_online[cpu]);
		}
		workers[i].cpu = cpu;
		workers[i].node = cpu >= 0 ? topo.cpu_node[cpu] : 0;
		worker_cpus[i] = cpu;
		if ((error = worker_spawn(i, 0)) != 0) {
			log_warnx("worker %d: %s", i, strerror(error));
			error = -error;
			break;
		}
	}
	/* Those started, whether or not all were: stopped again on failure. */
	nworkers = i;
	atomic_store(&worker_nlive, i);
	pthread_mutex_lock(&worker_placed_lock);
	while (worker_placed < nworkers)
		pthread_cond_wait(&worker_placed_cond, &worker_placed_lock);
	pthread_mutex_unlock(&worker_placed_lock);
	if (error == 0) {
		atomic_store(&worker_watch_stop, 0);
		if ((error = pthread_create(&worker_watch_thread, NULL,
		    worker_watch_main, NULL)) != 0) {
			log_warnx("worker watchdog: pthread_create: %s",
			    strerror(error));
			error = -error;
		} else
			worker_watching = 1;
	}
	if (error != 0)
		worker_stop();
	return (error);
}

/* Finish queued work, then end every worker. */
void
worker_stop(void)
{
	uint64_t	one = 1;
	int		i, n;

	if (worker_watching) {
		atomic_store(&worker_watch_stop, 1);
		pthread_join(worker_watch_thread, NULL);
		worker_watching = 0;
	}
	n = atomic_load(&worker_nlive);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&workers[i].lock);
		workers[i].stop = 1;
		pthread_mutex_unlock(&workers[i].lock);
		if (write(workers[i].efd, &one, sizeof(one)) == -1)
			log_warn("worker %d: wake", i);
	}
	for (i = 0; i < n; i++) {
		pthread_join(workers[i].thread, NULL);
		close(workers[i].epfd);
		close(workers[i].efd);
		pthread_mutex_destroy(&workers[i].lock);
	}
	free(workers);
	free(worker_cpus);
	workers = NULL;
	worker_cpus = NULL;
	nworkers = 0;
	atomic_store(&worker_nlive, 0);
}
