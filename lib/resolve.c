/*
 * resolve.c - one page-resolve transaction (see resolve.h): claim, decide
 * with state_fault_action, populate or clear, mark cleared, map with the
 * EEXIST and EFAULT rules, release.  Built into hpzerod and libhpz.
 *
 * Locking: the table's lock guards the holds, the waiters and every store
 * to a shared state byte made by a claim, a mark, a release or a reset, so
 * that a reset can never slip between a holder's decision and its release.
 * Nothing slow runs under it: the populate, clear and map operations run
 * unlocked, on pages the transaction holds.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "resolve.h"

/* State bytes resolve_drop reads under the lock at most in one go. */
#define RESOLVE_DROP_SCAN	65536

void
resolve_table_init(struct resolve_table *t, _Atomic uint8_t *state,
    uint64_t npages, uint64_t garbage)
{
	pthread_mutex_init(&t->lock, NULL);
	TAILQ_INIT(&t->holds);
	TAILQ_INIT(&t->waiters);
	t->state = state;
	t->npages = npages;
	t->nreset = 0;
	atomic_init(&t->nwaiting, 0);
	atomic_init(&t->garbage, (int_fast64_t)garbage);
	atomic_init(&t->tampered, 0);
}

void
resolve_table_destroy(struct resolve_table *t)
{
	pthread_mutex_destroy(&t->lock);
}

void
resolve_begin(struct resolve *rs, struct resolve_table *t,
    const struct resolve_ops *ops, void *arg, enum fault_kind kind,
    int flags)
{
	rs->t = t;
	rs->ops = ops;
	rs->arg = arg;
	rs->kind = kind;
	rs->flags = flags;
	rs->hold.lo = 0;
	rs->hold.n = 0;
	rs->hold.reset = 0;
	rs->hold.perpage = 1;
	rs->hold.idle = (flags & RESOLVE_IDLE) != 0;
	rs->hold.boosted = 0;
	rs->hold.owner = pthread_self();
	rs->action = ACTION_MAP;
	rs->error = 0;
	rs->tampered = 0;
	rs->resets_done = 0;
	rs->garbage_gone = 0;
	TAILQ_INIT(&rs->woken);
}

/* The hold covering idx (lock held), or NULL. */
static struct resolve_hold *
resolve_holder(struct resolve_table *t, uint64_t idx)
{
	struct resolve_hold	*h;

	TAILQ_FOREACH(h, &t->holds, entry)
		if (idx - h->lo < h->n)
			return (h);
	return (NULL);
}

/*
 * A fault waits for a page a background thread holds at SCHED_IDLE: let
 * that thread run like any other until it lets go, or a busy machine could
 * starve it, and the fault with it.  Best effort (needs CAP_SYS_NICE
 * where the thread's nice value is not allowed); lock held.
 */
static void
resolve_boost(struct resolve_hold *h)
{
	struct sched_param	sp;

	if (!h->idle || h->boosted)
		return;
	memset(&sp, 0, sizeof(sp));
	if (pthread_setschedparam(h->owner, SCHED_OTHER, &sp) == 0)
		h->boosted = 1;
}

/*
 * Take page idx into our hold (lock held; adjacent to it or the first):
 * its byte, read once, is our copy; the byte says BUSY from now on, for a
 * crash to find.  A BUSY bit already there was set by no thread of ours.
 */
static void
resolve_take(struct resolve *rs, uint64_t idx, uint64_t off)
{
	struct resolve_table	*t = rs->t;
	struct resolve_hold	*h = &rs->hold;
	uint8_t			 old;
	size_t			 k;

	old = atomic_load_explicit(&t->state[idx], memory_order_acquire);
	if (h->n == 0) {
		h->lo = idx;
		h->n = 1;
		TAILQ_INSERT_TAIL(&t->holds, h, entry);
		k = 0;
	} else if (idx == h->lo + h->n)
		k = h->n++;
	else {
		memmove(rs->was + 1, rs->was, h->n * sizeof(rs->was[0]));
		memmove(rs->off + 1, rs->off, h->n * sizeof(rs->off[0]));
		memmove(h->rst + 1, h->rst, h->n * sizeof(h->rst[0]));
		h->lo--;
		h->n++;
		k = 0;
	}
	h->rst[k] = 0;
	rs->was[k] = old & PAGE_STATE_MASK;
	rs->off[k] = off;
	atomic_store_explicit(&t->state[idx],
	    (uint8_t)((old & PAGE_STATE_MASK) | PAGE_BUSY),
	    memory_order_release);
	if (old & PAGE_BUSY) {
		rs->tampered++;
		atomic_fetch_add(&t->tampered, 1);
	}
}

/*
 * Claim the first page of a transaction (off: where in it the fault is).
 * RESOLVE_CLAIMED, its state copied and the action decided; RESOLVE_HELD
 * when another transaction of ours holds it: then park, if not NULL, is
 * queued and comes back in that transaction's rs->woken when it lets go,
 * so that nobody sleeps on a page.
 */
int
resolve_claim(struct resolve *rs, uint64_t idx, uint64_t off,
    struct resolve_waiter *park)
{
	struct resolve_table	*t = rs->t;
	struct resolve_hold	*h;

	if (idx >= t->npages || rs->hold.n != 0)
		return (-EINVAL);
	pthread_mutex_lock(&t->lock);
	if ((h = resolve_holder(t, idx)) != NULL) {
		if (park != NULL) {
			park->idx = idx;
			TAILQ_INSERT_TAIL(&t->waiters, park, entry);
			atomic_fetch_add(&t->nwaiting, 1);
			resolve_boost(h);
		}
		pthread_mutex_unlock(&t->lock);
		return (RESOLVE_HELD);
	}
	resolve_take(rs, idx, off);
	pthread_mutex_unlock(&t->lock);
	rs->action = state_fault_action(rs->was[0], rs->kind);
	return (RESOLVE_CLAIMED);
}

/*
 * Add the page next to the run held (coalescing) if nobody holds it and
 * its state asks for the same action.  1 if it is ours now.  Never waits.
 */
int
resolve_extend(struct resolve *rs, uint64_t idx, uint64_t off)
{
	struct resolve_table	*t = rs->t;
	struct resolve_hold	*h = &rs->hold;
	uint8_t			 s;
	int			 took = 0;

	if (h->n == 0 || h->n >= RESOLVE_BATCH_MAX || idx >= t->npages ||
	    (idx != h->lo + h->n && idx + 1 != h->lo))
		return (0);
	pthread_mutex_lock(&t->lock);
	s = atomic_load_explicit(&t->state[idx], memory_order_acquire);
	if (resolve_holder(t, idx) == NULL &&
	    state_fault_action(s, rs->kind) == rs->action) {
		resolve_take(rs, idx, off);
		took = 1;
	}
	pthread_mutex_unlock(&t->lock);
	return (took);
}

/* Is page idx in the run this transaction holds? */
int
resolve_holds_page(struct resolve *rs, uint64_t idx)
{
	return (idx - rs->hold.lo < rs->hold.n);
}

/* Pages [k, n) of the run end with result res. */
static void
resolve_rest(struct resolve *rs, size_t k, enum resolve_result res, int error)
{
	for (; k < rs->hold.n; k++)
		rs->result[k] = res;
	if (res == RESOLVE_FAILED || res == RESOLVE_LOST)
		rs->error = error;
}

/*
 * Cleared before mapped, said under the lock so that a reset meanwhile
 * keeps its mark: a server dying from here on leaves the page counted as
 * data (state_recovered), or as garbage if a reset came.
 */
static void
resolve_mark_cleared(struct resolve *rs)
{
	struct resolve_table	*t = rs->t;
	struct resolve_hold	*h = &rs->hold;
	size_t			 k;

	pthread_mutex_lock(&t->lock);
	for (k = 0; k < h->n; k++) {
		atomic_store_explicit(&t->state[h->lo + k], (uint8_t)
		    (PAGE_ZEROED | PAGE_BUSY | (h->rst[k] ? PAGE_RESET : 0)),
		    memory_order_release);
		rs->now[k] = PAGE_ZEROED;
	}
	pthread_mutex_unlock(&t->lock);
}

/*
 * Map the run, page by page where the kernel stops: a page mapped already
 * (EEXIST) is woken and the rest mapped after it; a page missing from the
 * file (EFAULT: punched since) is allocated once more, which the kernel
 * zeroes, and mapped.  A page that was garbage when claimed and turns out
 * mapped already stays garbage: the client still maps it from before its
 * reset (the reset's zap is on its way), and whatever it writes through
 * that mapping until then must not count as data.
 */
static void
resolve_map(struct resolve *rs)
{
	struct resolve_hold	*h = &rs->hold;
	uint64_t		 done;
	size_t			 k = 0, j;
	int			 error, refilled = 0;

	while (k < h->n) {
		done = 0;
		error = rs->ops->map(rs, h->lo + k, h->n - k, &done);
		if (error == 0)
			done = h->n - k;
		else if (done > h->n - k)
			done = h->n - k;
		for (j = k; j < k + done; j++) {
			rs->now[j] = PAGE_MAPPED;
			rs->result[j] = RESOLVE_DONE;
		}
		k += done;
		if (error == 0 || k >= h->n)
			return;
		if (error == -EEXIST) {
			rs->now[k] = rs->was[k] == PAGE_GARBAGE ?
			    PAGE_GARBAGE : PAGE_MAPPED;
			rs->result[k] = RESOLVE_DONE;
			rs->ops->wake(rs, h->lo + k, 1);
			k++;
			continue;
		}
		if (error == -EFAULT && !refilled) {
			refilled = 1;
			if ((error = rs->ops->populate(rs, h->lo + k,
			    h->n - k)) == 0)
				continue;
		}
		resolve_rest(rs, k, error == -EAGAIN ? RESOLVE_RETRY :
		    RESOLVE_FAILED, error);
		return;
	}
}

/*
 * Give the run back: each page's new state (garbage whatever happened if
 * a reset came meanwhile), our count of garbage pages, the reset waiting
 * for us, the faults parked on our pages (to rs->woken).
 */
static void
resolve_release(struct resolve *rs)
{
	struct resolve_table	*t = rs->t;
	struct resolve_hold	*h = &rs->hold;
	struct resolve_waiter	*w, *next;
	struct sched_param	 sp;
	uint8_t			 final;
	size_t			 k;
	int			 boosted;

	pthread_mutex_lock(&t->lock);
	for (k = 0; k < h->n; k++) {
		/*
		 * Only the pages a reset named: the others of the run are
		 * mapped in the client, which goes on writing them (a reset
		 * zaps only its own range).
		 */
		final = h->rst[k] ? PAGE_GARBAGE : rs->now[k];
		atomic_store_explicit(&t->state[h->lo + k], final,
		    memory_order_release);
		if (rs->was[k] == PAGE_GARBAGE && final != PAGE_GARBAGE) {
			if (atomic_fetch_sub(&t->garbage, 1) == 1)
				rs->garbage_gone = 1;
		} else if (rs->was[k] != PAGE_GARBAGE && final == PAGE_GARBAGE)
			atomic_fetch_add(&t->garbage, 1);
	}
	TAILQ_REMOVE(&t->holds, h, entry);
	if (h->reset && --t->nreset == 0)
		rs->resets_done = 1;
	if (atomic_load(&t->nwaiting) != 0) {
		for (w = TAILQ_FIRST(&t->waiters); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->idx - h->lo >= h->n)
				continue;
			TAILQ_REMOVE(&t->waiters, w, entry);
			TAILQ_INSERT_TAIL(&rs->woken, w, entry);
			atomic_fetch_sub(&t->nwaiting, 1);
		}
	}
	boosted = h->boosted;
	pthread_mutex_unlock(&t->lock);
	if (boosted) {
		memset(&sp, 0, sizeof(sp));
		(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	}
}

/*
 * Resolve the run claimed: the action its first page's state asked for,
 * then the map (unless want_map says no), then release.  rs->result says
 * what became of each page; rs->woken holds the faults to queue again.
 */
void
resolve_run(struct resolve *rs)
{
	const struct resolve_ops	*ops = rs->ops;
	struct resolve_hold		*h = &rs->hold;
	size_t				 k;
	int				 error = 0, cleared = 0;

	if (h->n == 0)
		return;
	for (k = 0; k < h->n; k++) {
		rs->now[k] = rs->was[k];
		rs->result[k] = RESOLVE_SKIPPED;
	}
	switch (rs->action) {
	case ACTION_POPULATE:
		if ((error = ops->populate(rs, h->lo, h->n)) != 0) {
			resolve_rest(rs, 0, RESOLVE_FAILED, error);
			goto release;
		}
		break;
	case ACTION_CLEAR:
		if (rs->flags & RESOLVE_NOCLEAR)
			goto release;
		/* Garbage the file may lack: allocate, then clear anyway. */
		if (rs->kind == FAULT_MISSING &&
		    (error = ops->populate(rs, h->lo, h->n)) != 0) {
			resolve_rest(rs, 0, RESOLVE_FAILED, error);
			goto release;
		}
		if ((error = ops->clear(rs, h->lo, h->n)) != 0) {
			/* Given up, or refused: still garbage. */
			if (error != -EINTR)
				resolve_rest(rs, 0, RESOLVE_LOST, error);
			goto release;
		}
		cleared = 1;
		break;
	case ACTION_MAP:
		break;
	}
	if (rs->action != ACTION_MAP)
		resolve_mark_cleared(rs);
	if (ops->want_map != NULL && !ops->want_map(rs, rs->was[0], cleared)) {
		resolve_rest(rs, 0, RESOLVE_READY, 0);
		goto release;
	}
	resolve_map(rs);
release:
	resolve_release(rs);
}

/*
 * Declare pages [first, first+n) garbage.  A page a transaction holds is
 * marked in its hold (its release makes it garbage) and in the shared byte
 * (for a crash).  Returns how many holds were newly marked: while
 * resolve_resets_pending() is not 0, a map of the old contents may still
 * be on its way, and the reset's caller must not be told it is done.
 */
uint64_t
resolve_reset(struct resolve_table *t, uint64_t first, uint64_t n)
{
	struct resolve_hold	*h;
	uint64_t		 i, flagged = 0;
	uint8_t			 old;
	int			 held = 0;

	if (first >= t->npages)
		return (0);
	if (n > t->npages - first)
		n = t->npages - first;
	pthread_mutex_lock(&t->lock);
	TAILQ_FOREACH(h, &t->holds, entry) {
		if (h->lo >= first + n || first >= h->lo + h->n)
			continue;
		held = 1;
		if (!h->reset) {
			h->reset = 1;
			t->nreset++;
			flagged++;
		}
		if (h->perpage)
			for (i = h->lo > first ? h->lo : first;
			    i < h->lo + h->n && i < first + n; i++)
				h->rst[i - h->lo] = 1;
	}
	for (i = first; i < first + n; i++) {
		if (held && resolve_holder(t, i) != NULL) {
			atomic_store_explicit(&t->state[i], PAGE_GARBAGE |
			    PAGE_BUSY | PAGE_RESET, memory_order_release);
			continue;
		}
		old = atomic_load_explicit(&t->state[i], memory_order_acquire);
		if ((old & PAGE_STATE_MASK) != PAGE_GARBAGE)
			atomic_fetch_add(&t->garbage, 1);
		atomic_store_explicit(&t->state[i], PAGE_GARBAGE,
		    memory_order_release);
	}
	pthread_mutex_unlock(&t->lock);
	return (flagged);
}

/* Holds a reset still waits for. */
int
resolve_resets_pending(struct resolve_table *t)
{
	int	n;

	pthread_mutex_lock(&t->lock);
	n = t->nreset;
	pthread_mutex_unlock(&t->lock);
	return (n);
}

/*
 * Garbage pages as we see them: our own count, kept as we go (the shared
 * bytes are never walked for it).  A client that writes its bytes behind
 * our back skews it for its own region only; it is kept in [0, npages].
 */
uint64_t
resolve_garbage(struct resolve_table *t)
{
	int_fast64_t	g = atomic_load(&t->garbage);

	if (g < 0)
		return (0);
	return ((uint64_t)g > t->npages ? t->npages : (uint64_t)g);
}

/* n garbage pages left the file (dropped on release). */
void
resolve_forget_garbage(struct resolve_table *t, uint64_t n)
{
	atomic_fetch_sub(&t->garbage, (int_fast64_t)n);
}

/*
 * Let the kernel zero garbage instead of us: drop pages [from, to) that
 * are garbage and held by nobody from the file, in runs of at most run
 * pages, each held while punch(arg, first, n) makes holes of it and
 * marked kept only after (a hole reads zero; a crash meanwhile leaves it
 * garbage, its byte still says so).  A reset during the punch wins: the
 * run stays garbage.  Faults parked on the runs go to woken.  0, or the
 * punch's error (the walk stops there, the run stays garbage).
 */
int
resolve_drop(struct resolve_table *t, uint64_t from, uint64_t to,
    uint64_t run, int (*punch)(void *, uint64_t, uint64_t), void *arg,
    struct resolve_waiters *woken, int *resets_done, uint64_t *dropped,
    uint64_t *held)
{
	struct resolve_hold	 h;
	struct resolve_waiter	*w, *next;
	uint64_t		 i = from, k, end, limit;
	uint8_t			 s, final;
	int			 error = 0;

	*dropped = *held = 0;
	if (to > t->npages)
		to = t->npages;
	while (i < to && error == 0) {
		pthread_mutex_lock(&t->lock);
		/* The next garbage page nobody of ours holds, a slice at most. */
		limit = to - i > RESOLVE_DROP_SCAN ? i + RESOLVE_DROP_SCAN : to;
		for (; i < limit; i++) {
			s = atomic_load_explicit(&t->state[i],
			    memory_order_acquire);
			if ((s & PAGE_STATE_MASK) != PAGE_GARBAGE)
				continue;
			if (resolve_holder(t, i) == NULL)
				break;
			(*held)++;
		}
		for (end = i; end < to && end - i < run; end++) {
			s = atomic_load_explicit(&t->state[end],
			    memory_order_acquire);
			if ((s & PAGE_STATE_MASK) != PAGE_GARBAGE ||
			    resolve_holder(t, end) != NULL)
				break;
		}
		if (end == i) {
			pthread_mutex_unlock(&t->lock);
			continue;	/* nothing in this slice */
		}
		h.lo = i;
		h.n = end - i;
		h.reset = 0;
		h.perpage = 0;		/* a reset keeps the whole run */
		h.idle = 0;
		h.boosted = 0;
		h.owner = pthread_self();
		TAILQ_INSERT_TAIL(&t->holds, &h, entry);
		for (k = i; k < end; k++)
			atomic_store_explicit(&t->state[k], PAGE_GARBAGE |
			    PAGE_BUSY, memory_order_release);
		pthread_mutex_unlock(&t->lock);

		error = punch(arg, i, end - i);

		pthread_mutex_lock(&t->lock);
		final = h.reset || error != 0 ? PAGE_GARBAGE : PAGE_KEEP;
		for (k = i; k < end; k++)
			atomic_store_explicit(&t->state[k], final,
			    memory_order_release);
		if (final == PAGE_KEEP) {
			atomic_fetch_sub(&t->garbage, (int_fast64_t)(end - i));
			*dropped += end - i;
		}
		TAILQ_REMOVE(&t->holds, &h, entry);
		if (h.reset && --t->nreset == 0)
			*resets_done = 1;
		if (atomic_load(&t->nwaiting) != 0) {
			for (w = TAILQ_FIRST(&t->waiters); w != NULL;
			    w = next) {
				next = TAILQ_NEXT(w, entry);
				if (w->idx < i || w->idx >= end)
					continue;
				TAILQ_REMOVE(&t->waiters, w, entry);
				TAILQ_INSERT_TAIL(woken, w, entry);
				atomic_fetch_sub(&t->nwaiting, 1);
			}
		}
		pthread_mutex_unlock(&t->lock);
		i = end;
	}
	return (error);
}

/* Park a fault that nothing will release (its region is going). */
void
resolve_park(struct resolve_table *t, struct resolve_waiter *w)
{
	pthread_mutex_lock(&t->lock);
	w->idx = UINT64_MAX;
	TAILQ_INSERT_TAIL(&t->waiters, w, entry);
	atomic_fetch_add(&t->nwaiting, 1);
	pthread_mutex_unlock(&t->lock);
}

/* Take every parked fault (the region is going). */
void
resolve_cancel_waiters(struct resolve_table *t, struct resolve_waiters *out)
{
	struct resolve_waiter	*w;

	pthread_mutex_lock(&t->lock);
	while ((w = TAILQ_FIRST(&t->waiters)) != NULL) {
		TAILQ_REMOVE(&t->waiters, w, entry);
		TAILQ_INSERT_TAIL(out, w, entry);
	}
	atomic_store(&t->nwaiting, 0);
	pthread_mutex_unlock(&t->lock);
}

const char *
resolve_result_name(enum resolve_result r)
{
	switch (r) {
	case RESOLVE_DONE:
		return ("done");
	case RESOLVE_READY:
		return ("ready");
	case RESOLVE_SKIPPED:
		return ("skipped");
	case RESOLVE_RETRY:
		return ("retry");
	case RESOLVE_FAILED:
		return ("failed");
	case RESOLVE_LOST:
		return ("lost");
	}
	return ("?");
}
