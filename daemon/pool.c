/*
 * pool.c - the pre-zeroed pool: huge pages allocated ahead, on idle cores,
 * into memfds of our own, one per page size and NUMA node, and handed whole
 * to a client that asks (HPZ_MSG_POOL_TAKE).  The kernel zeroes a page when
 * fallocate allocates it, so a client that touches a pool file later takes
 * a page-cache hit, not the zeroing.
 *
 * Rules: a file goes to one client, once, and never comes back (we close
 * our fd as it leaves; nothing of it is stored anywhere, so a restarted
 * daemon starts with no pool); pages come from the node the client's policy
 * asks for (one filler thread a node, bound to it); the pool never brings
 * the host's free, unreserved count below the reserve, and gives pages back
 * (truncates) when others bring it below.
 *
 * Threads: a filler a node at SCHED_IDLE does every system call on the
 * pools' files; the main thread hands files out.  They never wait for each
 * other: a pool's state word says who owns its file (IDLE: nobody, BUSY:
 * the filler is in a system call on it, TAKEN: the main thread is taking
 * it), and a hand-out that finds the filler busy waits, off the loop, for
 * it to finish its page (at most POOL_WAIT_MS) before saying "none ready".
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <linux/memfd.h>

#include <event2/event.h>
#include <numaif.h>

#include "hpzerod.h"
#include "bucket.h"

#define POOL_POLL_MS		50	/* the host's counts, at rest */
#define POOL_HOST_NS		5000000ULL /* counts this old are read again */
#define POOL_BATCH		8	/* pages between reads of the counts */
#define POOL_BACKOFF_NS		1000000000ULL /* after a failed allocation */
#define POOL_WAIT_MS		20	/* a hand-out waits for a busy filler */
#define POOL_WAITERS_MAX	64
#define POOL_UID_WINDOW_NS	60000000000ULL	/* [pool] uid_bytes per this */
#define POOL_UIDS_MAX		1024

enum {
	POOL_IDLE,		/* nobody is using the file */
	POOL_BUSY,		/* the filler is in a system call on it */
	POOL_TAKEN,		/* the main thread is taking it */
};

/* The page sizes a pool may have, in the order of struct conf's arrays. */
static const struct {
	uint64_t	 size;
	const char	*human;
	const char	*dir;		/* under /sys/kernel/mm/hugepages */
} pool_sizes[POOL_NSIZES] = {
	{ 2ULL << 20, "2 MiB", "hugepages-2048kB" },
	{ 1ULL << 30, "1 GiB", "hugepages-1048576kB" },
};

/* One page size on one node. */
struct pool {
	int			 psi;		/* index in pool_sizes */
	uint64_t		 page_size;
	int			 node;
	_Atomic uint64_t	 target;	/* pages wanted */
	atomic_int		 state;		/* POOL_IDLE, _BUSY, _TAKEN */
	atomic_int		 want;		/* a hand-out waits for IDLE */

	/* Whoever moved state from IDLE owns these. */
	int			 fd;		/* -1: no file yet */
	uint64_t		 pages;		/* allocated: [0, pages) */

	/* The filler's own. */
	int			 fd_free;	/* host counts, sysfs */
	int			 fd_resv;
	int			 fd_node;	/* this node's free, or -1 */
	uint64_t		 avail;		/* free - reserved, last read */
	uint64_t		 node_free;
	uint64_t		 host_at;	/* ns of the read */
	int			 since_host;	/* pages since */
	uint64_t		 backoff;	/* ns: no allocation before */
	int			 failed;	/* said so in the log */

	/* Read by status. */
	_Atomic uint64_t	 ready;		/* pages, as the filler left it */
	_Atomic uint64_t	 host_avail;
	atomic_uint_fast64_t	 filled;
	atomic_uint_fast64_t	 fill_ns;
	atomic_uint_fast64_t	 yielded;
	atomic_uint_fast64_t	 handouts;
	atomic_uint_fast64_t	 handout_pages;
	atomic_uint_fast64_t	 misses;
	atomic_uint_fast64_t	 refused;
};

/* A hand-out waiting for a busy filler (main thread only). */
struct pool_waiter {
	uint64_t		 client;	/* id: the client may be gone */
	uint32_t		 seq;
	struct pool		*pool;
	uint64_t		 deadline;	/* ns */
	char			 name[HPZ_POOL_NAME];
};

/* What one uid may still take (main thread only). */
struct pool_uid {
	uid_t			 uid;
	double			 tokens;	/* bytes; < 0: in debt */
	uint64_t		 last;		/* ns of the last refill */
};

static struct pool	*pool_all;	/* POOL_NSIZES x pool_nnodes */
static int		 pool_nnodes;
static int		 pool_npools;
static pthread_t	*pool_threads;
static int		 pool_nthreads;
static atomic_int	 pool_on;
static atomic_int	 pool_stopping;
static _Atomic uint64_t	 pool_reserve[POOL_NSIZES];	/* pages */
static struct bucket	*pool_bucket;
static uint64_t		 pool_uid_bytes;
static uint64_t		 pool_next_id = 1;
static pthread_mutex_t	 pool_nap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	 pool_nap_cond;
static int		 pool_kick_fd = -1;
static struct event	*pool_kick_ev;
static struct event	*pool_timer_ev;
static struct pool_waiter pool_waiters[POOL_WAITERS_MAX];
static int		 pool_nwaiters;
static struct pool_uid	 pool_uids[POOL_UIDS_MAX];
static int		 pool_nuids;

/*
 * What a pool should do next, from the host's counts: free and unreserved
 * pages (avail), free pages on the pool's node, the reserve, what it holds
 * and what it wants.  *n pages for POOL_FILL, POOL_YIELD and POOL_SHRINK.
 */
enum pool_action
pool_decide(int enabled, uint64_t avail, uint64_t node_free,
    uint64_t reserve, uint64_t pages, uint64_t target, uint64_t *n)
{
	*n = 0;
	if (!enabled)
		target = 0;
	if (pages > target) {
		*n = pages - target;
		return (POOL_SHRINK);
	}
	if (avail < reserve && pages > 0) {
		*n = reserve - avail < pages ? reserve - avail : pages;
		return (POOL_YIELD);
	}
	if (pages < target && avail > reserve && node_free > 0) {
		*n = 1;
		return (POOL_FILL);
	}
	return (POOL_NONE);
}

/* A uid's tokens after dt ns: cap bytes come back every window. */
double
pool_uid_refill(double tokens, uint64_t cap, uint64_t dt)
{
	tokens += (double)cap * ((double)dt / (double)POOL_UID_WINDOW_NS);
	return (tokens > (double)cap ? (double)cap : tokens);
}

/* The pool of page-size index psi on node, or NULL. */
static struct pool *
pool_get(int psi, int node)
{
	if (pool_all == NULL || psi < 0 || psi >= POOL_NSIZES || node < 0 ||
	    node >= pool_nnodes)
		return (NULL);
	return (&pool_all[psi * pool_nnodes + node]);
}

static int
pool_size_index(uint64_t page_size)
{
	int	i;

	for (i = 0; i < POOL_NSIZES; i++)
		if (pool_sizes[i].size == page_size)
			return (i);
	return (-1);
}

static uint64_t
pool_read_count(int fd)
{
	char	buf[32];
	ssize_t	n;

	if (fd < 0 || (n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return (0);
	buf[n] = '\0';
	return (strtoull(buf, NULL, 10));
}

/* The host's counts for p, again (filler). */
static void
pool_host(struct pool *p, uint64_t now)
{
	uint64_t	free, resv;

	free = pool_read_count(p->fd_free);
	resv = pool_read_count(p->fd_resv);
	p->avail = free > resv ? free - resv : 0;
	p->node_free = p->fd_node >= 0 ? pool_read_count(p->fd_node) : free;
	p->host_at = now;
	p->since_host = 0;
	atomic_store(&p->host_avail, p->avail);
}

/* Wake the main thread: a hand-out may be waiting. */
static void
pool_kick_main(void)
{
	uint64_t	one = 1;

	if (pool_kick_fd >= 0)
		(void)!write(pool_kick_fd, &one, sizeof(one));
}

/* Wake the fillers: a pool was taken or the settings changed. */
static void
pool_kick_fillers(void)
{
	/* Without the lock: a kick lost in a race costs one poll interval. */
	pthread_cond_broadcast(&pool_nap_cond);
}

static int
pool_claim(struct pool *p)
{
	int	idle = POOL_IDLE;

	return (atomic_compare_exchange_strong(&p->state, &idle, POOL_BUSY));
}

static void
pool_release(struct pool *p)
{
	atomic_store(&p->host_avail, p->avail);
	atomic_store(&p->ready, p->pages);
	atomic_store(&p->state, POOL_IDLE);
	if (atomic_exchange(&p->want, 0))
		pool_kick_main();
}

/* A new file for p, sealable (the program may seal it), never sealed here. */
static int
pool_memfd(const struct pool *p)
{
	unsigned int	shift = (unsigned int)__builtin_ctzll(p->page_size);

	return (memfd_create("hpz-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING |
	    MFD_HUGETLB | (shift << MFD_HUGE_SHIFT)));
}

/* Allocate one more page in p (claimed). */
static void
pool_fill(struct pool *p, uint64_t now)
{
	uint64_t	t0, t1;

	if (p->fd < 0 && (p->fd = pool_memfd(p)) == -1) {
		if (!p->failed)
			log_warn("pool: %s pages, node %d: memfd_create",
			    pool_sizes[p->psi].human, p->node);
		p->failed = 1;
		p->backoff = now + POOL_BACKOFF_NS;
		return;
	}
	t0 = stats_now_ns();
	/* No FALLOC_FL_KEEP_SIZE: the file's size is what is ready. */
	if (fallocate(p->fd, 0, (off_t)(p->pages * p->page_size),
	    (off_t)p->page_size) == -1) {
		/* ENOSPC: the pages went elsewhere, or a cgroup limit. */
		if (!p->failed)
			log_info("pool: %s pages, node %d: cannot allocate "
			    "page %llu: %s; trying again later",
			    pool_sizes[p->psi].human, p->node,
			    (unsigned long long)p->pages, strerror(errno));
		p->failed = 1;
		p->backoff = now + POOL_BACKOFF_NS;
		return;
	}
	t1 = stats_now_ns();
	p->failed = 0;
	p->pages++;
	p->avail = p->avail > 0 ? p->avail - 1 : 0;
	p->node_free = p->node_free > 0 ? p->node_free - 1 : 0;
	p->since_host++;
	atomic_fetch_add(&p->filled, 1);
	atomic_fetch_add(&p->fill_ns, t1 - t0);
}

/* Give n pages of p back, from the end of its file (claimed). */
static void
pool_cut(struct pool *p, uint64_t n, int yield)
{
	if (n > p->pages)
		n = p->pages;
	if (n == 0 || p->fd < 0)
		return;
	if (ftruncate(p->fd, (off_t)((p->pages - n) * p->page_size)) == -1) {
		log_warn("pool: %s pages, node %d: ftruncate",
		    pool_sizes[p->psi].human, p->node);
		return;
	}
	p->pages -= n;
	p->avail += n;
	p->node_free += n;
	if (yield) {
		atomic_fetch_add(&p->yielded, n);
		log_debug("pool: %s pages, node %d: %llu given back, the host "
		    "had %llu free (reserve %llu)", pool_sizes[p->psi].human,
		    p->node, (unsigned long long)n,
		    (unsigned long long)(p->avail - n),
		    (unsigned long long)atomic_load(&pool_reserve[p->psi]));
	}
}

/* One step of work on p; 1 if it did some (filler). */
static int
pool_step(struct pool *p)
{
	enum pool_action	 act;
	struct timespec		 ts;
	uint64_t		 now = stats_now_ns(), n, wait;

	if (now - p->host_at > POOL_HOST_NS || p->since_host >= POOL_BATCH)
		pool_host(p, now);
	/* Unclaimed, the file is not ours to look at: its level is. */
	act = pool_decide(atomic_load(&pool_on), p->avail, p->node_free,
	    atomic_load(&pool_reserve[p->psi]), atomic_load(&p->ready),
	    atomic_load(&p->target), &n);
	if (act == POOL_NONE || (act == POOL_FILL && now < p->backoff))
		return (0);
	if (act == POOL_FILL &&
	    (wait = bucket_take(pool_bucket, p->page_size, now)) > 0) {
		/* The budget: wait before claiming, never while holding it. */
		ts.tv_sec = (time_t)(wait / 1000000000ULL);
		ts.tv_nsec = (long)(wait % 1000000000ULL);
		nanosleep(&ts, NULL);
	}
	if (!pool_claim(p))
		return (0);	/* being taken: look again */
	/* The main thread may have taken the file: decide on what is left. */
	act = pool_decide(atomic_load(&pool_on), p->avail, p->node_free,
	    atomic_load(&pool_reserve[p->psi]), p->pages,
	    atomic_load(&p->target), &n);
	switch (act) {
	case POOL_FILL:
		pool_fill(p, now);
		break;
	case POOL_YIELD:
	case POOL_SHRINK:
		pool_cut(p, n, act == POOL_YIELD);
		break;
	case POOL_NONE:
		break;
	}
	pool_release(p);
	return (act != POOL_NONE);
}

/* Fillers not napping right now (cost.c counts them as ours). */
static atomic_int	 pool_nbusy;

int
pool_busy(void)
{
	return (atomic_load(&pool_nbusy));
}

static void
pool_nap(int ms)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	atomic_fetch_sub(&pool_nbusy, 1);
	pthread_mutex_lock(&pool_nap_lock);
	if (!atomic_load(&pool_stopping))
		pthread_cond_timedwait(&pool_nap_cond, &pool_nap_lock, &ts);
	pthread_mutex_unlock(&pool_nap_lock);
	atomic_fetch_add(&pool_nbusy, 1);
}

/* A node's filler: its pages come from that node, zeroed on its CPUs. */
static void *
pool_main(void *arg)
{
	struct sched_param	 sp;
	cpu_set_t		 set;
	unsigned long		 mask[TOPO_NODES_MAX / (8 * sizeof(long)) + 1];
	char			 name[16];
	int			 node = (int)(intptr_t)arg, i, did, cpus = 0;

	snprintf(name, sizeof(name), "hpz-pool-%d", node);
	pthread_setname_np(pthread_self(), name);
	memset(&sp, 0, sizeof(sp));
	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
		log_warnx("pool %d: cannot use SCHED_IDLE", node);
	if (pool_nnodes > 1) {
		CPU_ZERO(&set);
		for (i = 0; i < topo.ncpus && i < TOPO_CPUS_MAX; i++)
			if (topo.cpu_online[i] && topo.cpu_node[i] == node) {
				CPU_SET(i, &set);
				cpus++;
			}
		if (cpus > 0)
			pthread_setaffinity_np(pthread_self(), sizeof(set),
			    &set);
		memset(mask, 0, sizeof(mask));
		mask[node / (8 * sizeof(long))] |= 1UL << (node %
		    (8 * sizeof(long)));
		if (set_mempolicy(MPOL_BIND, mask, TOPO_NODES_MAX + 1) == -1)
			log_warn("pool %d: set_mempolicy", node);
	}
	atomic_fetch_add(&pool_nbusy, 1);
	while (!atomic_load(&pool_stopping)) {
		did = 0;
		for (i = 0; i < POOL_NSIZES; i++) {
			struct pool	*p = pool_get(i, node);

			if (p != NULL && p->page_size != 0)
				did |= pool_step(p);
		}
		if (!did)
			pool_nap(POOL_POLL_MS);
	}
	atomic_fetch_sub(&pool_nbusy, 1);
	return (NULL);
}

/* Send an error reply for a pool request; -1 if the client cannot take it. */
static int
pool_refuse(struct client *c, uint32_t seq, int error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
pool_refuse(struct client *c, uint32_t seq, int error, const char *fmt, ...)
{
	struct hpz_msg_reply	rep;
	va_list			ap;

	proto_init(&rep, HPZ_MSG_REPLY, sizeof(rep), seq);
	rep.error = error;
	va_start(ap, fmt);
	vsnprintf(rep.text, sizeof(rep.text), fmt, ap);
	va_end(ap);
	log_debug("client %llu (pid %d): no pool file: %s",
	    (unsigned long long)c->id, (int)c->pid, rep.text);
	if (proto_send(c->fd, &rep, sizeof(rep), NULL, 0) != sizeof(rep))
		return (-1);
	return (0);
}

/*
 * Take p's file if nobody uses it: 1 (*fd, *pages), 0 if the filler is
 * busy with it, -1 if it holds nothing (main thread).
 */
static int
pool_grab(struct pool *p, int *fd, uint64_t *pages)
{
	int	idle = POOL_IDLE;

	if (!atomic_compare_exchange_strong(&p->state, &idle, POOL_TAKEN))
		return (0);
	if (p->pages == 0) {
		atomic_store(&p->state, POOL_IDLE);
		return (-1);
	}
	*fd = p->fd;
	*pages = p->pages;
	p->fd = -1;
	p->pages = 0;
	atomic_store(&p->ready, 0);
	atomic_store(&p->state, POOL_IDLE);
	pool_kick_fillers();
	return (1);
}

static struct pool_uid *
pool_uid(uid_t uid, uint64_t now)
{
	struct pool_uid	*u;
	int		 i;

	for (i = 0; i < pool_nuids; i++) {
		u = &pool_uids[i];
		if (u->uid != uid)
			continue;
		u->tokens = pool_uid_refill(u->tokens, pool_uid_bytes,
		    now - u->last);
		u->last = now;
		return (u);
	}
	/* Forget the uids whose share is whole again. */
	for (i = 0; i < pool_nuids; ) {
		u = &pool_uids[i];
		if (pool_uid_refill(u->tokens, pool_uid_bytes, now - u->last) >=
		    (double)pool_uid_bytes)
			pool_uids[i] = pool_uids[--pool_nuids];
		else
			i++;
	}
	if (pool_nuids == POOL_UIDS_MAX)
		return (NULL);
	u = &pool_uids[pool_nuids++];
	u->uid = uid;
	u->tokens = (double)pool_uid_bytes;
	u->last = now;
	return (u);
}

/* Hand p's file (fd, pages) to client c; our fd is closed either way. */
static int
pool_hand(struct client *c, uint32_t seq, struct pool *p, int fd,
    uint64_t pages, const char *name)
{
	struct hpz_msg_pool_file	 rep;
	struct pool_uid			*u;
	uint64_t			 id = pool_next_id++;
	ssize_t				 n;

	proto_init(&rep, HPZ_MSG_POOL_FILE, sizeof(rep), seq);
	rep.size = pages * p->page_size;
	rep.page_size = p->page_size;
	rep.node = pool_nnodes > 1 ? p->node : -1;
	rep.id = id;
	n = proto_send(c->fd, &rep, sizeof(rep), &fd, 1);
	/* Ours no more, whatever happened: it must never be handed again. */
	close(fd);
	atomic_fetch_add(&p->handouts, 1);
	atomic_fetch_add(&p->handout_pages, pages);
	if (pool_uid_bytes > 0 && (u = pool_uid(c->uid, stats_now_ns())) !=
	    NULL)
		u->tokens -= (double)rep.size;
	log_info("pool: file %llu, %llu x %s pages (node %d), to client %llu "
	    "(pid %d uid %u)%s%s%s", (unsigned long long)id,
	    (unsigned long long)pages, pool_sizes[p->psi].human, p->node,
	    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
	    *name != '\0' ? " for '" : "", name, *name != '\0' ? "'" : "");
	return (n == (ssize_t)sizeof(rep) ? 0 : -1);
}

/* The pool a request should take from: the wanted node first, else the
 * allowed one with most pages ready. */
static struct pool *
pool_pick(int psi, uint64_t nodes, int node)
{
	struct pool	*p, *best = NULL;
	int		 i;

	if ((p = pool_get(psi, node)) != NULL && atomic_load(&p->ready) > 0 &&
	    (nodes == 0 || (node < 64 && (nodes & (1ULL << node)))))
		return (p);
	for (i = 0; i < pool_nnodes && i < HPZ_POOL_NODES; i++) {
		if (nodes != 0 && (nodes & (1ULL << i)) == 0)
			continue;
		p = pool_get(psi, i);
		if (atomic_load(&p->ready) > 0 && (best == NULL ||
		    atomic_load(&p->ready) > atomic_load(&best->ready)))
			best = p;
	}
	return (best);
}

static void
pool_arm_timer(void)
{
	struct timeval	tv = { 0, POOL_WAIT_MS * 1000 / 4 };

	if (pool_timer_ev != NULL && pool_nwaiters > 0 &&
	    !evtimer_pending(pool_timer_ev, NULL))
		evtimer_add(pool_timer_ev, &tv);
}

static struct client *
pool_client(uint64_t id)
{
	struct client	*c;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->id == id && !c->orphan && c->fd >= 0)
			return (c);
	return (NULL);
}

/* Serve the hand-outs that waited for a busy filler (main thread). */
static void
pool_serve_waiters(void)
{
	struct pool_waiter	*w;
	struct client		*c;
	uint64_t		 now = stats_now_ns(), pages = 0;
	int			 i, r, fd = -1;

	for (i = 0; i < pool_nwaiters; ) {
		w = &pool_waiters[i];
		if ((c = pool_client(w->client)) == NULL)
			goto drop;
		r = pool_grab(w->pool, &fd, &pages);
		if (r == 1)
			(void)pool_hand(c, w->seq, w->pool, fd, pages, w->name);
		else if (r == -1 || now >= w->deadline) {
			atomic_fetch_add(&w->pool->misses, 1);
			(void)pool_refuse(c, w->seq, -EAGAIN, "no %s pool pages "
			    "ready%s", pool_sizes[w->pool->psi].human, r == 0 ?
			    " (the pool was busy allocating)" : "");
		} else {
			atomic_store(&w->pool->want, 1);
			i++;
			continue;
		}
drop:
		pool_waiters[i] = pool_waiters[--pool_nwaiters];
	}
	pool_arm_timer();
}

static void
pool_kick_cb(int fd, short events, void *arg)
{
	uint64_t	v;

	(void)!read(fd, &v, sizeof(v));
	pool_serve_waiters();
}

static void
pool_timer_cb(int fd, short events, void *arg)
{
	pool_serve_waiters();
}

/*
 * HPZ_MSG_POOL_TAKE: a file for the client, at once or (the filler being
 * in the middle of a page) within POOL_WAIT_MS; or a reply saying why not.
 * -1 when the client cannot take a reply.
 */
int
pool_take(struct client *c, const struct hpz_msg *m)
{
	const struct hpz_msg_pool_take	*t = &m->u.pool_take;
	struct pool_waiter		*w;
	struct pool_uid			*u;
	struct pool			*p;
	uint64_t			 pages = 0, need;
	int				 psi, r, fd = -1;

	psi = pool_size_index(t->page_size);
	if (psi < 0 || pool_get(psi, 0) == NULL ||
	    pool_get(psi, 0)->page_size == 0)
		return (pool_refuse(c, t->hdr.seq, -ENOENT, "no pool of "
		    "%llu-byte pages here", (unsigned long long)t->page_size));
	if (!atomic_load(&pool_on))
		return (pool_refuse(c, t->hdr.seq, -ENOENT, "the pool is off "
		    "([pool] enable in hpzerod.conf)"));
	if ((p = pool_pick(psi, t->nodes, t->node)) == NULL) {
		if ((p = pool_get(psi, t->node >= 0 ? t->node : 0)) != NULL)
			atomic_fetch_add(&p->misses, 1);
		return (pool_refuse(c, t->hdr.seq, -EAGAIN, "no %s pool pages "
		    "ready", pool_sizes[psi].human));
	}
	/* The file as it stands must fit in what the uid may still take. */
	need = atomic_load(&p->ready) * p->page_size;
	if (need > pool_uid_bytes)
		need = pool_uid_bytes;
	if (pool_uid_bytes > 0 && (u = pool_uid(c->uid, stats_now_ns())) !=
	    NULL && u->tokens < (double)need) {
		atomic_fetch_add(&p->refused, 1);
		return (pool_refuse(c, t->hdr.seq, -EDQUOT, "uid %u took its "
		    "share of the pool ([pool] uid_bytes, %llu bytes a minute)",
		    (unsigned)c->uid, (unsigned long long)pool_uid_bytes));
	}
	if ((r = pool_grab(p, &fd, &pages)) == 0) {
		/* Ask the filler to stop after its page, then look again. */
		atomic_store(&p->want, 1);
		r = pool_grab(p, &fd, &pages);
	}
	if (r == 1)
		return (pool_hand(c, t->hdr.seq, p, fd, pages, t->name));
	if (r == -1 || pool_nwaiters == POOL_WAITERS_MAX) {
		atomic_fetch_add(&p->misses, 1);
		return (pool_refuse(c, t->hdr.seq, -EAGAIN, "no %s pool pages "
		    "ready", pool_sizes[psi].human));
	}
	w = &pool_waiters[pool_nwaiters++];
	w->client = c->id;
	w->seq = t->hdr.seq;
	w->pool = p;
	w->deadline = stats_now_ns() + POOL_WAIT_MS * 1000000ULL;
	snprintf(w->name, sizeof(w->name), "%s", t->name);
	pool_arm_timer();
	return (0);
}

/* HPZ_MSG_POOL_STATUS: the pools from index first on. */
int
pool_status(struct client *c, const struct hpz_msg *m)
{
	struct hpz_msg_pool_status_reply	 rep;
	struct hpz_msg_pool_info		*e;
	struct pool				*p;
	uint32_t				 i;

	proto_init(&rep, HPZ_MSG_POOL_STATUS_REPLY, sizeof(rep),
	    m->u.hdr.seq);
	for (i = m->u.pool_status.first; i < (uint32_t)pool_npools; i++) {
		p = &pool_all[i];
		if (p->page_size == 0)
			continue;
		if (rep.count == HPZ_POOLS_PER_REPLY) {
			rep.more = 1;
			break;
		}
		e = &rep.p[rep.count++];
		e->page_size = p->page_size;
		e->node = p->node;
		e->enabled = (uint32_t)atomic_load(&pool_on);
		e->target_pages = atomic_load(&p->target);
		e->ready_pages = atomic_load(&p->ready);
		e->reserve_pages = atomic_load(&pool_reserve[p->psi]);
		e->host_avail_pages = atomic_load(&p->host_avail);
		e->filled_pages = atomic_load(&p->filled);
		e->fill_ns = atomic_load(&p->fill_ns);
		e->yielded_pages = atomic_load(&p->yielded);
		e->handouts = atomic_load(&p->handouts);
		e->handout_pages = atomic_load(&p->handout_pages);
		e->misses = atomic_load(&p->misses);
		e->refused = atomic_load(&p->refused);
	}
	if (proto_send(c->fd, &rep, sizeof(rep), NULL, 0) != sizeof(rep))
		return (-1);
	return (0);
}

/* Pages ready in every pool, for the STATUS= line. */
uint64_t
pool_ready_bytes(void)
{
	uint64_t	n = 0;
	int		i;

	for (i = 0; i < pool_npools; i++)
		n += atomic_load(&pool_all[i].ready) * pool_all[i].page_size;
	return (n);
}

/* Settings that SIGHUP may change: all of [pool]. */
void
pool_configure(const struct conf *c)
{
	struct pool	*p;
	double		 gbs;
	int		 i;

	atomic_store(&pool_on, c->pool);
	for (i = 0; i < POOL_NSIZES; i++)
		atomic_store(&pool_reserve[i], c->pool_reserve[i] /
		    pool_sizes[i].size);
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		if (p->page_size != 0)
			atomic_store(&p->target, c->pool_size[p->psi][p->node] /
			    p->page_size);
	}
	/* Within the background budget too, when one is set. */
	gbs = c->pool_gbs;
	if (c->background_gbs > 0 && (gbs == 0 || c->background_gbs < gbs))
		gbs = c->background_gbs;
	if (pool_bucket != NULL)
		bucket_set(pool_bucket, gbs);
	pool_uid_bytes = c->pool_uid_bytes;
	pool_nuids = 0;
	pool_kick_fillers();
}

/* A count of the host's: a file of the page size's sysfs directory, of
 * one node (node >= 0) or of the whole machine. */
static int
pool_open_count(int node, const char *dir, const char *name)
{
	char	path[256];

	if (node >= 0)
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/"
		    "hugepages/%s/%s", node, dir, name);
	else
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s/%s",
		    dir, name);
	return (open(path, O_RDONLY | O_CLOEXEC));
}

/*
 * Make the pools and start a filler a node (before we serve): 0, or with
 * nothing left running and what failed logged, a negative errno.
 */
int
pool_start(const struct conf *c)
{
	struct pool	*p;
	pthread_condattr_t ca;
	char		 path[128];
	int		 i, node, error;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool_nap_cond, &ca);
	pthread_condattr_destroy(&ca);
	pool_nnodes = topo.nnodes > 0 ? topo.nnodes : 1;
	if (pool_nnodes > TOPO_NODES_MAX)
		pool_nnodes = TOPO_NODES_MAX;
	pool_npools = POOL_NSIZES * pool_nnodes;
	if ((pool_all = calloc((size_t)pool_npools, sizeof(*pool_all))) ==
	    NULL || (pool_bucket = bucket_new(0)) == NULL) {
		log_warn("pool: %d pools", pool_npools);
		pool_npools = 0;
		error = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		p->psi = i / pool_nnodes;
		p->node = i % pool_nnodes;
		p->fd = p->fd_free = p->fd_resv = p->fd_node = -1;
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s",
		    pool_sizes[p->psi].dir);
		if (access(path, F_OK) != 0)
			continue;	/* no such pages here: no pool */
		p->page_size = pool_sizes[p->psi].size;
		p->fd_free = pool_open_count(-1, pool_sizes[p->psi].dir,
		    "free_hugepages");
		p->fd_resv = pool_open_count(-1, pool_sizes[p->psi].dir,
		    "resv_hugepages");
		if (pool_nnodes > 1)
			p->fd_node = pool_open_count(p->node,
			    pool_sizes[p->psi].dir, "free_hugepages");
	}
	pool_configure(c);

	if ((pool_kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		error = -errno;
		log_warn("pool: eventfd");
		goto fail;
	}
	pool_kick_ev = event_new(hpzd_base, pool_kick_fd, EV_READ | EV_PERSIST,
	    pool_kick_cb, NULL);
	pool_timer_ev = evtimer_new(hpzd_base, pool_timer_cb, NULL);
	if (pool_kick_ev == NULL || pool_timer_ev == NULL ||
	    event_add(pool_kick_ev, NULL) == -1) {
		log_warnx("pool: cannot make its events");
		error = -ENOMEM;
		goto fail;
	}

	if ((pool_threads = calloc((size_t)pool_nnodes,
	    sizeof(*pool_threads))) == NULL) {
		log_warn("pool: %d threads", pool_nnodes);
		error = -ENOMEM;
		goto fail;
	}
	for (node = 0; node < pool_nnodes; node++) {
		if ((error = pthread_create(&pool_threads[node], NULL,
		    pool_main, (void *)(intptr_t)node)) != 0) {
			log_warnx("pool: node %d: pthread_create: %s", node,
			    strerror(error));
			error = -error;
			goto fail;
		}
		pool_nthreads++;
	}
	for (i = 0; i < POOL_NSIZES; i++)
		if ((p = pool_get(i, 0)) != NULL && p->page_size != 0)
			log_info("pool: %s pages: %s, up to %llu a node, keeping "
			    "%llu free for others", pool_sizes[i].human,
			    c->pool ? "on" : "off",
			    (unsigned long long)atomic_load(&p->target),
			    (unsigned long long)atomic_load(&pool_reserve[i]));
	return (0);
fail:
	pool_stop();
	return (error);
}

/* Stop the fillers; the files we still hold go, and their pages with them. */
void
pool_stop(void)
{
	struct pool	*p;
	int		 i;

	atomic_store(&pool_stopping, 1);
	pthread_mutex_lock(&pool_nap_lock);
	pthread_cond_broadcast(&pool_nap_cond);
	pthread_mutex_unlock(&pool_nap_lock);
	for (i = 0; i < pool_nthreads; i++)
		pthread_join(pool_threads[i], NULL);
	free(pool_threads);
	pool_threads = NULL;
	pool_nthreads = 0;
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		if (p->fd >= 0)
			close(p->fd);
		if (p->fd_free >= 0)
			close(p->fd_free);
		if (p->fd_resv >= 0)
			close(p->fd_resv);
		if (p->fd_node >= 0)
			close(p->fd_node);
	}
	free(pool_all);
	pool_all = NULL;
	pool_npools = 0;
	pool_nwaiters = 0;
	if (pool_kick_ev != NULL)
		event_free(pool_kick_ev);
	if (pool_timer_ev != NULL)
		event_free(pool_timer_ev);
	pool_kick_ev = pool_timer_ev = NULL;
	if (pool_kick_fd >= 0)
		close(pool_kick_fd);
	pool_kick_fd = -1;
	bucket_free(pool_bucket);
	pool_bucket = NULL;
	pthread_cond_destroy(&pool_nap_cond);
	atomic_store(&pool_stopping, 0);
}
