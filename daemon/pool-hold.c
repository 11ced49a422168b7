/*
 * pool-hold.c - huge pages made free for the host (HPZ_MSG_RESERVE,
 * `hpzctl reserve`): a program that does not use hpzerod (a plain guest)
 * needs the kernel to find its pages free, and the default pool holds every
 * free page above [pool] reserve_2m.  A request for N pages of a size sets
 * a hold on the pools of that size: they give pages back at once (cut on
 * the main thread, our own files), and their fillers keep the host's free
 * count at N, less what others have taken since, or more (pool_step reads
 * the hold as a larger reserve) until others have taken N pages (the guest
 * mapped them) or the hold's bound passes.  The answer comes once the host has them free, or says why
 * not.
 *
 * Bounds: a hold lasts at most POOL_HOLD_MAX_MS, is never more than what
 * the host and the pool hold together, and two requests add up (two guests
 * starting side by side), each to its own bound; a client cannot hold the
 * pool off for longer than it keeps asking, and only root and group hpz
 * reach the socket.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "hpz-protocol.h"

#include "globals.h"
#include "log.h"
#include "pool-fill.h"
#include "pool-hold.h"
#include "pool.h"
#include "region.h"
#include "stats.h"

#define POOL_HOLD_DEFAULT_MS	60000	/* hold_ms 0 */
#define POOL_HOLD_MAX_MS	600000
#define POOL_HOLD_WAIT_NS	5000000000ULL	/* for pages in flight */
#define POOL_HOLD_TICK_US	10000
#define POOL_HOLD_WAITERS	16

/* A request answered once the pages in flight land (main thread). */
struct pool_hold_waiter {
	uint64_t	 client;
	uint32_t	 seq;
	int		 psi;
	uint64_t	 want;		/* pages free for the host */
	uint64_t	 deadline;	/* ns */
};

static struct pool_hold_waiter	 hold_waiters[POOL_HOLD_WAITERS];
static int			 hold_nwaiters;
static struct event		*hold_timer;

static void	hold_answer(struct pool_answer *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static void
hold_answer(struct pool_answer *a, int error, const char *fmt, ...)
{
	va_list	ap;

	memset(a, 0, sizeof(*a));
	a->fd = -1;
	a->error = error;
	va_start(ap, fmt);
	vsnprintf(a->text, sizeof(a->text), fmt, ap);
	va_end(ap);
}

/*
 * The host's free, unreserved pages of psi now, less those our fillers are
 * touching (they may not show as taken yet); *held: what the pools hold.
 */
static uint64_t
hold_host_free(int psi, uint64_t *held)
{
	struct pool	*p;
	uint64_t	 fr, rs, flight = 0;
	int		 node;

	*held = 0;
	for (node = 0; node < pool_nodes(); node++) {
		if ((p = pool_get(psi, node)) == NULL || p->page_size == 0)
			continue;
		pthread_mutex_lock(&p->lock);
		*held += pool_held(p);
		flight += (uint64_t)p->nflight;
		pthread_mutex_unlock(&p->lock);
	}
	pool_host_level(pool_get(psi, 0), NULL, NULL, &fr, &rs);
	fr = fr > rs ? fr - rs : 0;
	return (fr > flight ? fr - flight : 0);
}

/*
 * Give back pages of psi's pools until the host has want free or nothing
 * idle is left to cut: the host's free count after.
 */
static uint64_t
hold_cut(int psi, uint64_t want)
{
	struct pool	*p;
	uint64_t	 avail, held;
	int		 node, cuts;

	avail = hold_host_free(psi, &held);
	for (node = 0; node < pool_nodes() && avail < want; node++) {
		if ((p = pool_get(psi, node)) == NULL || p->page_size == 0)
			continue;
		for (cuts = 0; cuts < POOL_FILES && avail < want; cuts++) {
			pthread_mutex_lock(&p->lock);
			/* Unlocks; 0: nothing idle to cut. */
			if (pool_cut(p, want - avail, 1) == 0)
				break;
			avail = hold_host_free(psi, &held);
		}
	}
	return (avail);
}

/* What p holds for the host now, for status. */
static void
pool_hold_info(struct pool *p, uint64_t *pages, uint64_t *ms, uint32_t *uid)
{
	uint64_t	now = stats_now_ns();

	pthread_mutex_lock(&p->lock);
	if ((*pages = pool_hold_left(p, now)) > 0) {
		*ms = (p->hold_until - now) / 1000000ULL + 1;
		*uid = (uint32_t)p->hold_uid;
	} else
		*ms = *uid = 0;
	pthread_mutex_unlock(&p->lock);
}

/* Each pool of a status reply (pool_status_fill's): its hold. */
void
pool_hold_status_fill(struct hpz_msg_pool_status_reply *rep)
{
	struct hpz_msg_pool_info	*e;
	struct pool		*p;
	uint32_t		 i;

	for (i = 0; i < rep->count; i++) {
		e = &rep->p[i];
		p = pool_get(pool_size_index(e->page_size), (int)e->node);
		if (p != NULL)
			pool_hold_info(p, &e->hold_pages, &e->hold_ms,
			    &e->hold_uid);
	}
}

/*
 * Set (or add to) the hold of psi's pools: want pages more, until
 * ms from now at least.  The pages it holds now, in all.
 */
static uint64_t
hold_set(int psi, uint64_t want, uint64_t ms, uid_t uid, uint64_t room)
{
	struct pool	*p;
	uint64_t	 now = stats_now_ns(), fr, rs, left, total = want;
	int64_t		 low, taken;
	int		 node;

	pool_host_level(pool_get(psi, 0), &low, NULL, &fr, &rs);
	for (node = 0; node < pool_nodes(); node++) {
		if ((p = pool_get(psi, node)) == NULL || p->page_size == 0)
			continue;
		pthread_mutex_lock(&p->lock);
		/* What others have not taken yet of an earlier one. */
		taken = p->hold_mark - low;
		left = p->hold > 0 && now < p->hold_until ? (taken <= 0 ?
		    p->hold : (uint64_t)taken >= p->hold ? 0 : p->hold -
		    (uint64_t)taken) : 0;
		/* Both where they fit, else the new one alone. */
		total = left + want <= room ? left + want : want;
		if (total == want || p->hold_until < now + ms * 1000000ULL)
			p->hold_until = now + ms * 1000000ULL;
		p->hold = total;
		p->hold_mark = low;
		p->hold_uid = uid;
		pthread_mutex_unlock(&p->lock);
	}
	pool_fill_kick();
	return (total);
}

/* Answer the requests whose pages were in flight (timer, main thread). */
static void
hold_tick(int fd, short events, void *arg)
{
	struct pool_hold_waiter	*w;
	struct pool_answer	 a;
	struct timeval		 tv = { 0, POOL_HOLD_TICK_US };
	uint64_t		 now = stats_now_ns(), avail, held;
	int			 i;

	for (i = 0; i < hold_nwaiters; ) {
		w = &hold_waiters[i];
		avail = hold_cut(w->psi, w->want);
		if (avail < w->want && now < w->deadline) {
			i++;
			continue;
		}
		if (avail >= w->want)
			hold_answer(&a, 0, "the host has %llu %s pages free",
			    (unsigned long long)avail,
			    pool_sizes[w->psi].human);
		else {
			(void)hold_host_free(w->psi, &held);
			hold_answer(&a, -EAGAIN, "the pool could not give "
			    "its pages back in time: the host has %llu %s "
			    "pages free, %llu asked, the pool holds %llu",
			    (unsigned long long)avail,
			    pool_sizes[w->psi].human,
			    (unsigned long long)w->want,
			    (unsigned long long)held);
		}
		(void)pool_answer_to(w->client, w->seq, &a);
		hold_waiters[i] = hold_waiters[--hold_nwaiters];
	}
	if (hold_nwaiters > 0)
		evtimer_add(hold_timer, &tv);
}

/*
 * HPZ_MSG_RESERVE: 1 answered now (*a), 0 the answer goes out once the
 * pages in flight land (pool_answer_to).
 */
int
pool_hold_ask(struct client *c, const struct hpz_msg *m,
    struct pool_answer *a)
{
	const struct hpz_msg_reserve	*r = &m->u.reserve;
	struct pool_hold_waiter		*w;
	struct timeval			 tv = { 0, POOL_HOLD_TICK_US };
	uint64_t			 want, ms, avail, held, total;
	int				 psi;

	psi = pool_size_index(r->page_size);
	if (psi < 0 || pool_get(psi, 0) == NULL ||
	    pool_get(psi, 0)->page_size == 0) {
		hold_answer(a, -ENOENT, "no %llu-byte huge pages on this host",
		    (unsigned long long)r->page_size);
		return (1);
	}
	want = r->len / r->page_size;
	ms = r->hold_ms == 0 ? POOL_HOLD_DEFAULT_MS : r->hold_ms;
	if (ms > POOL_HOLD_MAX_MS)
		ms = POOL_HOLD_MAX_MS;
	avail = hold_host_free(psi, &held);
	if (avail + held < want) {
		hold_answer(a, -ENOMEM, "not enough %s pages: the host has "
		    "%llu free and the pool %llu, %llu asked",
		    pool_sizes[psi].human, (unsigned long long)avail,
		    (unsigned long long)held, (unsigned long long)want);
		log_info("client %llu (pid %d uid %u): reserve %llu %s pages: "
		    "%s", (unsigned long long)c->id, (int)c->pid,
		    (unsigned)c->uid, (unsigned long long)want,
		    pool_sizes[psi].human, a->text);
		return (1);
	}
	total = hold_set(psi, want, ms, c->uid, avail + held);
	avail = hold_cut(psi, total);
	log_info("client %llu (pid %d uid %u): reserve %llu %s pages for "
	    "%llu ms: the pools hold %llu free for the host, %llu free now",
	    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
	    (unsigned long long)want, pool_sizes[psi].human,
	    (unsigned long long)ms, (unsigned long long)total,
	    (unsigned long long)avail);
	if (avail >= total) {
		hold_answer(a, 0, "the host has %llu %s pages free",
		    (unsigned long long)avail, pool_sizes[psi].human);
		return (1);
	}
	if (hold_timer == NULL && (hold_timer = evtimer_new(hpzd_base,
	    hold_tick, NULL)) == NULL) {
		hold_answer(a, -ENOMEM, "out of memory");
		return (1);
	}
	if (hold_nwaiters == POOL_HOLD_WAITERS) {
		hold_answer(a, -EBUSY, "too many reserve requests waiting");
		return (1);
	}
	w = &hold_waiters[hold_nwaiters++];
	w->client = c->id;
	w->seq = r->hdr.seq;
	w->psi = psi;
	w->want = total;
	w->deadline = stats_now_ns() + POOL_HOLD_WAIT_NS;
	if (!evtimer_pending(hold_timer, NULL))
		evtimer_add(hold_timer, &tv);
	return (0);
}

/* The daemon stops: no more ticks. */
void
pool_hold_stop(void)
{
	if (hold_timer != NULL)
		event_free(hold_timer);
	hold_timer = NULL;
	hold_nwaiters = 0;
}
