/*
 * pool.c - the pre-zeroed pool, the hand-out side: a client that asks
 * (HPZ_MSG_POOL_TAKE) for N bytes gets one file of N bytes rounded up to
 * the page, cut to measure from the pool's files (pool-fill.h), or, when
 * the pool holds less, the largest it has; the rest stays for others.
 * The kernel zeroed every page as it allocated it, so a client that
 * touches a pool file takes a page-cache hit, not the zeroing.
 *
 * Rules: a file goes to one client, once, and never comes back (we close
 * our fd and unmap it as it leaves; nothing of it is stored anywhere, so a
 * restarted daemon starts with no pool); pages come from the node the
 * client's policy asks for; one uid takes at most its share within a
 * window ([pool] uid_share or uid_bytes, a token bucket), so a client
 * looping on POOL_TAKE cannot keep the pool empty for the others.
 *
 * The main thread never waits on a filler: a file with a page in flight
 * is marked as being taken (the fillers claim no more of it) and handed
 * out from the event loop when its last page lands, or refused after a
 * deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <event2/event.h>

#include "hpz-protocol.h"

#include "bucket.h"
#include "conf.h"
#include "globals.h"
#include "log.h"
#include "pool-fill.h"
#include "pool.h"
#include "region.h"
#include "stats.h"
#include "topo.h"

#define POOL_WAIT_MS		20	/* a hand-out waits for a page... */
#define POOL_WAIT_1G_MS		1000	/* ... or a 1 GiB page, in flight */
#define POOL_WAITERS_MAX	64
#define POOL_UID_WINDOW_NS	60000000000ULL	/* a uid's share per this */
#define POOL_UIDS_MAX		1024

/* A hand-out waiting for a file's pages in flight (main thread only). */
struct pool_waiter {
	uint64_t		 client;	/* id: the client may be gone */
	uint32_t		 seq;
	struct pool		*pool;
	int			 file;		/* index in pool->files */
	uint64_t		 want;		/* pages */
	uint64_t		 deadline;	/* ns */
	char			 name[HPZ_POOL_NAME];
};

/* What one uid may still take of one page size (main thread only). */
struct pool_uid {
	uid_t			 uid;
	int			 psi;
	double			 tokens;	/* bytes; < 0: in debt */
	uint64_t		 last;		/* ns of the last refill */
};

static struct pool	*pool_all;	/* POOL_NSIZES x pool_nnodes */
static int		 pool_nnodes;
static int		 pool_npools;
static struct bucket	*pool_bucket;
static uint64_t		 pool_uid_bytes;
static int		 pool_uid_share;
static uint64_t		 pool_quiet_ns = POOL_QUIET_NS;	/* [pool] quiet_ms */
static uint64_t		 pool_short_ns = POOL_SHORT_NS;	/* short_hold_ms */
static uint64_t		 pool_next_id = 1;
static int		 pool_kick_fd = -1;
static struct event	*pool_kick_ev;
static struct event	*pool_timer_ev;
static struct pool_waiter pool_waiters[POOL_WAITERS_MAX];
static int		 pool_nwaiters;
static struct pool_uid	 pool_uids[POOL_UIDS_MAX];
static int		 pool_nuids;
static struct client	*(*pool_find_client)(uint64_t);
static void		(*pool_send_answer)(struct client *, uint32_t,
			    struct pool_answer *);

/* A uid's tokens after dt ns: cap bytes come back every window. */
double
pool_uid_refill(double tokens, uint64_t cap, uint64_t dt)
{
	tokens += (double)cap * ((double)dt / (double)POOL_UID_WINDOW_NS);
	return (tokens > (double)cap ? (double)cap : tokens);
}

/* The pool of page-size index psi on node, or NULL. */
struct pool *
pool_get(int psi, int node)
{
	if (pool_all == NULL || psi < 0 || psi >= POOL_NSIZES || node < 0 ||
	    node >= pool_nnodes)
		return (NULL);
	return (&pool_all[psi * pool_nnodes + node]);
}

/* Nodes with a pool of each page size. */
int
pool_nodes(void)
{
	return (pool_all != NULL ? pool_nnodes : 0);
}

/* The index in pool_sizes of a page size, or -1. */
int
pool_size_index(uint64_t page_size)
{
	int	i;

	for (i = 0; i < POOL_NSIZES; i++)
		if (pool_sizes[i].size == page_size)
			return (i);
	return (-1);
}

/* Wake the main thread: a file a hand-out waits for is ready (filler). */
static void
pool_kick_main(void)
{
	uint64_t	one = 1;

	if (pool_kick_fd >= 0)
		(void)!write(pool_kick_fd, &one, sizeof(one));
}

/* A pool request refused: the error and why, for c's reply. */
static void
pool_refuse(struct client *c, struct pool_answer *a, int error,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
pool_refuse(struct client *c, struct pool_answer *a, int error,
    const char *fmt, ...)
{
	va_list	ap;

	memset(a, 0, sizeof(*a));
	a->fd = -1;
	a->error = error;
	va_start(ap, fmt);
	vsnprintf(a->text, sizeof(a->text), fmt, ap);
	va_end(ap);
	log_debug("client %llu (pid %d): no pool file: %s",
	    (unsigned long long)c->id, (int)c->pid, a->text);
}

/*
 * Bytes of psi's pages one uid may take within a window, 0: no limit.
 * By default (uid_share = 100) the host's huge pages of that size: a uid
 * may empty a full pool once, then gets the pool's refill at a window's
 * pace while the rest of the refill waits for the others.
 */
static uint64_t
pool_uid_cap(int psi)
{
	struct pool	*p;
	uint64_t	 total = 0, cap;

	if (pool_uid_bytes > 0)
		return (pool_uid_bytes);
	if (pool_uid_share == 0 || (p = pool_get(psi, 0)) == NULL)
		return (0);
	pthread_mutex_lock(&p->lock);
	total = p->host_total;
	pthread_mutex_unlock(&p->lock);
	cap = total * pool_sizes[psi].size / 100 * (uint64_t)pool_uid_share;
	return (cap > pool_sizes[psi].size ? cap : pool_sizes[psi].size);
}

static struct pool_uid *
pool_uid(uid_t uid, int psi, uint64_t cap, uint64_t now)
{
	struct pool_uid	*u;
	int		 i;

	for (i = 0; i < pool_nuids; i++) {
		u = &pool_uids[i];
		if (u->uid != uid || u->psi != psi)
			continue;
		u->tokens = pool_uid_refill(u->tokens, cap, now - u->last);
		u->last = now;
		return (u);
	}
	/* Forget the uids whose share is whole again. */
	for (i = 0; i < pool_nuids; ) {
		u = &pool_uids[i];
		if (pool_uid_refill(u->tokens, cap, now - u->last) >=
		    (double)cap)
			pool_uids[i] = pool_uids[--pool_nuids];
		else
			i++;
	}
	if (pool_nuids == POOL_UIDS_MAX)
		return (NULL);
	u = &pool_uids[pool_nuids++];
	u->uid = uid;
	u->psi = psi;
	u->tokens = (double)cap;
	u->last = now;
	return (u);
}

/*
 * Take file k of p, idle, out of the pool, cut to want pages: its fd
 * (ours to send and close) and *pages.  Lock held on entry, not on return.
 */
static int
pool_detach(struct pool *p, int k, uint64_t want, uint64_t *pages)
{
	struct pool_file	f = p->files[k];
	uint64_t		n = pool_file_ready(&f), cut = 0;

	p->files[k].fd = -1;
	p->files[k].map = NULL;
	if (n > want) {
		cut = n - want;
		n = want;
	}
	/*
	 * A guest starts on it: no refill beside it (POOL_QUIET_NS) until
	 * its pages are back, counted from the host's free pages after the
	 * cut below frees the rest of the file; armed before the fillers
	 * are woken.
	 */
	if (n * p->page_size >= POOL_QUIET_MIN && pool_quiet_ns > 0) {
		p->quiet_until = stats_now_ns() + pool_quiet_ns;
		p->quiet_avail = p->avail + cut + n;
	}
	pool_recount(p);
	pthread_mutex_unlock(&p->lock);
	/* Our own file and mapping: no client's lock behind these calls. */
	munmap(f.map, f.maplen);
	f.map = NULL;
	pool_took_begin(p->psi, cut);
	if ((uint64_t)f.cap != n && ftruncate(f.fd, (off_t)(n *
	    p->page_size)) == -1) {
		log_warn("pool: %s pages, node %d: cutting a file to %llu "
		    "pages", pool_sizes[p->psi].human, p->node,
		    (unsigned long long)n);
		close(f.fd);
		pool_took_end(p->psi, cut, n + cut);
		return (-1);
	}
	pool_took_end(p->psi, cut, cut);
	if (cut > 0)
		atomic_fetch_add(&p->cut, cut);
	pool_fill_kick();
	*pages = n;
	return (f.fd);
}

/*
 * A hand-out of got pages to a client that wants more: the kernel must
 * find the rest free, so the pools of that size give back what the host
 * lacks at once (our own files: no client's lock behind it), and hold
 * back from refilling it (owed) until others have taken as many pages
 * from the host, or its taker has exited, or for [pool] short_hold_ms
 * (POOL_SHORT_NS).
 */
static void
pool_short(int psi, uint64_t rest, pid_t taker)
{
	struct pool	*p;
	uint64_t	 now = stats_now_ns(), reserve, need, n, fr, rs;
	int64_t		 low;
	int		 node, k, pidfd;

	reserve = atomic_load(&pool_reserve[psi]);
	if ((p = pool_get(psi, 0)) == NULL)
		return;
	/* Before its program can have the fd: it has reserved nothing. */
	pool_host_level(p, &low, NULL, &fr, &rs);
	/* The host's count, not a node's: one need for every node. */
	pthread_mutex_lock(&p->lock);
	need = reserve + rest > p->avail ? reserve + rest - p->avail : 0;
	pthread_mutex_unlock(&p->lock);
	for (node = 0; node < pool_nnodes; node++) {
		if ((p = pool_get(psi, node)) == NULL || p->page_size == 0)
			continue;
		/* Its exit ends the hold: one pidfd for each node's. */
		pidfd = taker > 0 && pool_short_ns > 0 ?
		    (int)syscall(SYS_pidfd_open, taker, 0) : -1;
		pthread_mutex_lock(&p->lock);
		pool_owed_end(p);
		p->owed = pool_short_ns > 0 ? rest : 0;
		p->owed_until = now + pool_short_ns;
		p->owed_mark = low;
		p->owed_pidfd = pidfd;
		for (k = 0; k < POOL_FILES && need > 0; k++) {
			struct pool_file	*f = &p->files[k], gone;

			if (f->fd < 0 || f->inflight > 0 || f->busy ||
			    f->taking)
				continue;
			gone = *f;
			n = f->next;
			f->fd = -1;
			f->map = NULL;
			p->avail += n;
			p->node_free += n;
			atomic_fetch_add(&p->yielded, n);
			need = need > n ? need - n : 0;
			pool_took_begin(psi, n);
			pthread_mutex_unlock(&p->lock);
			pool_file_drop(&gone);
			pool_took_end(psi, n, n);
			pthread_mutex_lock(&p->lock);
		}
		pool_recount(p);
		pthread_mutex_unlock(&p->lock);
	}
}

/*
 * Hand fd (pages of p) to client c: it is the answer's, which the sender
 * closes once sent, whatever happened (it must never be handed again).
 */
static void
pool_hand(struct client *c, struct pool_answer *a, struct pool *p, int fd,
    uint64_t pages, uint64_t want, const char *name)
{
	struct pool_uid			*u;
	uint64_t			 id = pool_next_id++, cap;

	memset(a, 0, sizeof(*a));
	a->fd = fd;
	a->size = pages * p->page_size;
	a->page_size = p->page_size;
	a->node = pool_nnodes > 1 ? p->node : -1;
	a->id = id;
	atomic_fetch_add(&p->handouts, 1);
	atomic_fetch_add(&p->handout_pages, pages);
	if ((cap = pool_uid_cap(p->psi)) > 0 && (u = pool_uid(c->uid, p->psi,
	    cap, stats_now_ns())) != NULL)
		u->tokens -= (double)a->size;
	log_info("pool: file %llu, %llu x %s pages (node %d), to client %llu "
	    "(pid %d uid %u)%s%s%s", (unsigned long long)id,
	    (unsigned long long)pages, pool_sizes[p->psi].human, p->node,
	    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
	    *name != '\0' ? " for '" : "", name, *name != '\0' ? "'" : "");
	if (want != UINT64_MAX && pages < want)
		pool_short(p->psi, want - pages, c->pid);
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

/* The connected client of an id, or NULL (the control plane's lookup). */
static struct client *
pool_client(uint64_t id)
{
	return (pool_find_client != NULL ? pool_find_client(id) : NULL);
}

/*
 * How a waiting hand-out finds its client again, and how its answer is
 * sent (the control plane's, set by control-socket.c).
 */
void
pool_on_client(struct client *(*find)(uint64_t id),
    void (*answer)(struct client *, uint32_t seq, struct pool_answer *))
{
	pool_find_client = find;
	pool_send_answer = answer;
}

/* Send a for request seq of client id, if it is still connected: 0 or -1. */
int
pool_answer_to(uint64_t id, uint32_t seq, struct pool_answer *a)
{
	struct client	*c;

	if ((c = pool_client(id)) == NULL || pool_send_answer == NULL)
		return (-1);
	pool_send_answer(c, seq, a);
	return (0);
}

/*
 * A file of p for want pages, now (1, *fd and *pages), after its pages in
 * flight land (0: *k is the file to wait for, marked), or none ready (-1).
 */
static int
pool_try(struct pool *p, uint64_t want, int *k, int *fd, uint64_t *pages)
{
	struct pool_file	*f;

	pthread_mutex_lock(&p->lock);
	if ((*k = pool_pick_file(p->files, POOL_FILES, want)) < 0) {
		pthread_mutex_unlock(&p->lock);
		return (-1);
	}
	f = &p->files[*k];
	if (f->inflight > 0 || f->busy) {
		f->taking = 1;
		pthread_mutex_unlock(&p->lock);
		return (0);
	}
	*fd = pool_detach(p, *k, want, pages);
	return (*fd >= 0 ? 1 : -1);
}

/* Serve the hand-outs that waited for pages in flight (main thread). */
static void
pool_serve_waiters(void)
{
	struct pool_waiter	*w;
	struct pool_file	*f;
	struct client		*c;
	struct pool_answer	 a;
	uint64_t		 now = stats_now_ns(), pages = 0;
	int			 i, r, k, fd = -1, ready;

	for (i = 0; i < pool_nwaiters; ) {
		w = &pool_waiters[i];
		c = pool_client(w->client);
		pthread_mutex_lock(&w->pool->lock);
		f = &w->pool->files[w->file];
		ready = f->fd >= 0 && f->inflight == 0 && !f->busy;
		if (c == NULL || ready || now >= w->deadline) {
			f->taking = 0;
			pthread_mutex_unlock(&w->pool->lock);
		} else {
			pthread_mutex_unlock(&w->pool->lock);
			i++;
			continue;
		}
		if (c == NULL)
			goto drop;
		/* Ready, or past the deadline: whatever is idle now. */
		if ((r = pool_try(w->pool, w->want, &k, &fd, &pages)) == 1)
			pool_hand(c, &a, w->pool, fd, pages, w->want, w->name);
		else {
			if (r == 0) {
				pthread_mutex_lock(&w->pool->lock);
				w->pool->files[k].taking = 0;
				pthread_mutex_unlock(&w->pool->lock);
			}
			atomic_fetch_add(&w->pool->misses, 1);
			pool_refuse(c, &a, -EAGAIN, "no %s pool pages "
			    "ready%s", pool_sizes[w->pool->psi].human, r == 0 ?
			    " (the pool was busy allocating)" : "");
		}
		pool_send_answer(c, w->seq, &a);
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
 * HPZ_MSG_POOL_TAKE: a file of len bytes rounded up to the page (len 0:
 * the largest file there is), at once or (its last pages in flight) when
 * they land; or why not.  1: answered now (*a); 0: the answer goes to
 * pool_send_answer once its pages land or its wait is over.
 */
int
pool_try_take(struct client *c, const struct hpz_msg *m,
    struct pool_answer *a)
{
	const struct hpz_msg_pool_take	*t = &m->u.pool_take;
	struct pool_waiter		*w;
	struct pool_uid			*u;
	struct pool			*p;
	uint64_t			 pages = 0, want, cap, ps, left, need;
	int				 psi, r = -1, k = -1, fd = -1;

	psi = pool_size_index(t->page_size);
	if (psi < 0 || pool_get(psi, 0) == NULL ||
	    pool_get(psi, 0)->page_size == 0) {
		pool_refuse(c, a, -ENOENT, "no pool of %llu-byte pages here",
		    (unsigned long long)t->page_size);
		return (1);
	}
	if (!atomic_load(&pool_on)) {
		pool_refuse(c, a, -ENOENT, "the pool is off ([pool] enable "
		    "in hpzerod.conf)");
		return (1);
	}
	ps = pool_sizes[psi].size;
	want = t->len == 0 ? UINT64_MAX : t->len / ps + (t->len % ps != 0);
	/* No more than what the uid may still take. */
	if ((cap = pool_uid_cap(psi)) > 0 && (u = pool_uid(c->uid, psi, cap,
	    stats_now_ns())) != NULL) {
		/*
		 * Whole requests only: a share that covers part of one is
		 * refused, not served by cutting a file for it.  (len 0: what
		 * the pool holds; a request above the whole share: the share.)
		 */
		left = u->tokens > 0 ? (uint64_t)u->tokens / ps : 0;
		need = want != UINT64_MAX ? want : 0;
		if (need == 0)
			for (k = 0; k < pool_nnodes; k++)
				if ((p = pool_get(psi, k)) != NULL &&
				    atomic_load(&p->ready) > need)
					need = atomic_load(&p->ready);
		if (need > cap / ps)
			need = cap / ps;
		if (left == 0 || left < need) {
			if ((p = pool_get(psi, t->node >= 0 ? t->node : 0)) !=
			    NULL)
				atomic_fetch_add(&p->refused, 1);
			pool_refuse(c, a, -EDQUOT, "uid %u took its share of "
			    "the pool ([pool] uid_share, uid_bytes: %llu "
			    "bytes a minute)", (unsigned)c->uid,
			    (unsigned long long)cap);
			return (1);
		}
		if (want > left)
			want = left;
	}
	if ((p = pool_pick(psi, t->nodes, t->node)) == NULL ||
	    (r = pool_try(p, want, &k, &fd, &pages)) == -1 ||
	    (r == 0 && pool_nwaiters == POOL_WAITERS_MAX)) {
		if (p != NULL && r == 0) {
			pthread_mutex_lock(&p->lock);
			p->files[k].taking = 0;
			pthread_mutex_unlock(&p->lock);
		}
		if (p != NULL || (p = pool_get(psi, t->node >= 0 ? t->node :
		    0)) != NULL)
			atomic_fetch_add(&p->misses, 1);
		pool_refuse(c, a, -EAGAIN, "no %s pool pages ready",
		    pool_sizes[psi].human);
		return (1);
	}
	if (r == 1) {
		pool_hand(c, a, p, fd, pages, want, t->name);
		return (1);
	}
	w = &pool_waiters[pool_nwaiters++];
	w->client = c->id;
	w->seq = t->hdr.seq;
	w->pool = p;
	w->file = k;
	w->want = want;
	w->deadline = stats_now_ns() + (psi == 0 ? POOL_WAIT_MS :
	    POOL_WAIT_1G_MS) * 1000000ULL;
	snprintf(w->name, sizeof(w->name), "%s", t->name);
	pool_arm_timer();
	return (0);
}

/* HPZ_MSG_POOL_STATUS: the pools from index first on, into rep. */
void
pool_status_fill(struct hpz_msg_pool_status_reply *rep, uint32_t first)
{
	struct hpz_msg_pool_info		*e;
	struct pool				*p;
	uint64_t				 target, reserve, room;
	uint32_t				 i;

	for (i = first; i < (uint32_t)pool_npools; i++) {
		p = &pool_all[i];
		if (p->page_size == 0)
			continue;
		if (rep->count == HPZ_POOLS_PER_REPLY) {
			rep->more = 1;
			break;
		}
		e = &rep->p[rep->count++];
		e->page_size = p->page_size;
		e->node = p->node;
		e->enabled = (uint32_t)atomic_load(&pool_on);
		e->ready_pages = atomic_load(&p->ready);
		e->reserve_pages = atomic_load(&pool_reserve[p->psi]);
		e->host_avail_pages = atomic_load(&p->host_avail);
		/* "all": what it may hold with the host as it stands. */
		target = atomic_load(&p->target);
		reserve = e->reserve_pages;
		room = e->ready_pages + (e->host_avail_pages > reserve ?
		    e->host_avail_pages - reserve : 0);
		e->target_pages = target < room ? target : room;
		e->filled_pages = atomic_load(&p->filled);
		e->fill_ns = atomic_load(&p->fill_ns);
		e->yielded_pages = atomic_load(&p->yielded);
		e->handouts = atomic_load(&p->handouts);
		e->handout_pages = atomic_load(&p->handout_pages);
		e->misses = atomic_load(&p->misses);
		e->refused = atomic_load(&p->refused);
	}
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
	uint64_t	 v;
	double		 gbs;
	int		 i;

	atomic_store(&pool_on, c->pool);
	for (i = 0; i < POOL_NSIZES; i++)
		atomic_store(&pool_reserve[i], c->pool_reserve[i] /
		    pool_sizes[i].size);
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		v = c->pool_size[p->psi][p->node];
		if (p->page_size != 0)
			atomic_store(&p->target, v == UINT64_MAX ? v :
			    v / p->page_size);
	}
	/* Within the background budget too, when one is set. */
	gbs = c->pool_gbs;
	if (c->background_gbs > 0 && (gbs == 0 || c->background_gbs < gbs))
		gbs = c->background_gbs;
	if (pool_bucket != NULL)
		bucket_set(pool_bucket, gbs);
	pool_uid_bytes = c->pool_uid_bytes;
	pool_uid_share = c->pool_uid_share;
	pool_quiet_ns = (uint64_t)c->pool_quiet_ms * 1000000ULL;
	pool_short_ns = (uint64_t)c->pool_short_hold_ms * 1000000ULL;
	pool_fill_budget = pool_bucket;
	pool_nuids = 0;
	pool_fill_kick();
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
 * Make the pools and start the fillers (before we serve): 0, or with
 * nothing left running and what failed logged, a negative errno.
 */
int
pool_start(const struct conf *c)
{
	struct pool	*p;
	char		 path[128];
	int		 i, k, error;

	pool_nnodes = topo.nnodes > 0 ? topo.nnodes : 1;
	if (pool_nnodes > TOPO_NODES_MAX)
		pool_nnodes = TOPO_NODES_MAX;
	pool_npools = POOL_NSIZES * pool_nnodes;
	if ((pool_all = calloc((size_t)pool_npools, sizeof(*pool_all))) ==
	    NULL || (pool_bucket = bucket_new(0)) == NULL) {
		log_warn("pool: %d pools", pool_npools);
		free(pool_all);
		pool_all = NULL;
		pool_npools = 0;
		return (-ENOMEM);
	}
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		p->psi = i / pool_nnodes;
		p->node = i % pool_nnodes;
		pthread_mutex_init(&p->lock, NULL);
		for (k = 0; k < POOL_FILES; k++)
			p->files[k].fd = -1;
		p->fd_free = p->fd_resv = p->fd_nr = p->fd_node = -1;
		p->owed_pidfd = -1;
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/%s",
		    pool_sizes[p->psi].dir);
		if (access(path, F_OK) != 0)
			continue;	/* no such pages here: no pool */
		p->page_size = pool_sizes[p->psi].size;
		p->fd_free = pool_open_count(-1, pool_sizes[p->psi].dir,
		    "free_hugepages");
		p->fd_resv = pool_open_count(-1, pool_sizes[p->psi].dir,
		    "resv_hugepages");
		p->fd_nr = pool_open_count(-1, pool_sizes[p->psi].dir,
		    "nr_hugepages");
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
	if ((error = pool_fill_start(pool_all, pool_nnodes, pool_kick_main)) !=
	    0)
		goto fail;
	for (i = 0; i < POOL_NSIZES; i++) {
		char	size[32];

		if ((p = pool_get(i, 0)) == NULL || p->page_size == 0)
			continue;
		if (c->pool_size[i][0] == UINT64_MAX)
			snprintf(size, sizeof(size), "every free page");
		else
			snprintf(size, sizeof(size), "up to %llu a node",
			    (unsigned long long)atomic_load(&p->target));
		log_info("pool: %s pages: %s, %s, keeping %llu free for "
		    "others", pool_sizes[i].human, c->pool ? "on" : "off",
		    size, (unsigned long long)atomic_load(&pool_reserve[i]));
	}
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
	int		 i, k;

	pool_fill_stop();
	for (i = 0; i < pool_npools; i++) {
		p = &pool_all[i];
		for (k = 0; k < POOL_FILES; k++)
			pool_file_drop(&p->files[k]);
		pool_owed_end(p);
		if (p->fd_free >= 0)
			close(p->fd_free);
		if (p->fd_resv >= 0)
			close(p->fd_resv);
		if (p->fd_nr >= 0)
			close(p->fd_nr);
		if (p->fd_node >= 0)
			close(p->fd_node);
		pthread_mutex_destroy(&p->lock);
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
}
