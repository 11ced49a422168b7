/*
 * resolve.h - the life of a page fault, in one place: claim the pages,
 * decide from their state (state_fault_action), populate or clear them,
 * say they are cleared, map them, release them.  hpzerod's fault workers
 * (uffd.c), its background scrub and premap (scrub.c) and libhpz's own
 * fallback (serve.c) all resolve pages through resolve_run(); what differs
 * between them (how to clear, populate, map, wake) is a table of
 * operations, and whether a caller may wait is whether it parks.
 *
 * The state bytes live in a memfd the client can write at any time, so
 * they are input, never a lock: each byte is read once, under the table's
 * lock, into the transaction's own copy, and every decision is made on the
 * copy.  Which pages the server's threads hold is this private table's
 * business; the BUSY bit in the shared byte is only the record a crash
 * leaves behind (state_recover).  A BUSY bit no transaction of ours set is
 * counted as tampering and otherwise ignored: the page is served as its
 * state says.  Whatever a client writes there, the worst it gets is wrong
 * bytes in its own region.
 */
#ifndef HPZ_RESOLVE_H
#define HPZ_RESOLVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hpz-state.h"

/* Pages one transaction holds at most (a coalesced batch). */
#define RESOLVE_BATCH_MAX	64

/* A fault waiting for a page another transaction holds. */
struct resolve_waiter {
	TAILQ_ENTRY(resolve_waiter) entry;
	uint64_t		 idx;
};
TAILQ_HEAD(resolve_waiters, resolve_waiter);

/* The run of pages one transaction holds. */
struct resolve_hold {
	TAILQ_ENTRY(resolve_hold) entry;
	uint64_t		 lo;		/* first page */
	uint64_t		 n;		/* pages held; 0: none */
	int			 reset;		/* a reset came: its reply waits */
	int			 perpage;	/* rst[] says which pages it
						   reset (else: all of them) */
	uint8_t			 rst[RESOLVE_BATCH_MAX]; /* page lo+k reset:
						   garbage after */
	int			 idle;		/* holder runs at SCHED_IDLE */
	int			 boosted;	/* raised for a waiter */
	pthread_t		 owner;
};
TAILQ_HEAD(resolve_holds, resolve_hold);

/*
 * One region's private record: who holds which pages, which faults wait
 * for them, and what the server believes of the pages (a count, so that
 * nobody has to walk the shared bytes to know it).
 */
struct resolve_table {
	pthread_mutex_t		 lock;
	struct resolve_holds	 holds;
	struct resolve_waiters	 waiters;
	_Atomic uint8_t		*state;		/* npages shared bytes */
	uint64_t		 npages;	/* our copy, never the header's */
	int			 nreset;	/* holds a reset is waiting for */
	atomic_int		 nwaiting;	/* faults parked */
	atomic_int_fast64_t	 garbage;	/* pages we believe garbage */
	atomic_uint_fast64_t	 tampered;	/* BUSY bits nobody of ours set */
};

struct resolve;

/*
 * What differs between the callers.  Each returns 0 or a negative errno;
 * rs->arg is theirs.
 */
struct resolve_ops {
	/* Allocate pages [idx, idx+n) of the file; the kernel zeroes new
	 * ones and leaves existing ones be. */
	int	(*populate)(struct resolve *, uint64_t idx, uint64_t n);
	/* Write zeros over pages [lo, lo+n), the faulting neighbourhoods
	 * (rs->off) last.  -EFAULT: the file refused the write (SIGBUS,
	 * caught); -EINTR: given up for a waiting fault, nothing promised. */
	int	(*clear)(struct resolve *, uint64_t lo, uint64_t n);
	/* Map [idx, idx+n) into the client; *done pages went before the one
	 * that failed.  -EEXIST: that page is mapped already; -EFAULT: it is
	 * not in the file; -EAGAIN: the client's mm is changing, later. */
	int	(*map)(struct resolve *, uint64_t idx, uint64_t n,
		    uint64_t *done);
	/* Wake the threads waiting on [idx, idx+n). */
	void	(*wake)(struct resolve *, uint64_t idx, uint64_t n);
	/* Map this page at all (NULL: always)?  was: as claimed; cleared:
	 * by this transaction. */
	int	(*want_map)(struct resolve *, uint8_t was, int cleared);
};

/* What became of one page of a transaction. */
enum resolve_result {
	RESOLVE_DONE,		/* mapped, or mapped already and woken */
	RESOLVE_READY,		/* not to be mapped: as far as it goes */
	RESOLVE_SKIPPED,	/* nothing done (no clear wanted, given up) */
	RESOLVE_RETRY,		/* the mm was changing: try again later */
	RESOLVE_FAILED,		/* cannot be served: rs->error */
	RESOLVE_LOST,		/* the file refused our write: drop the region */
};

/* Flags of a transaction. */
#define RESOLVE_NOCLEAR	0x01	/* leave garbage as it is */
#define RESOLVE_IDLE	0x02	/* the caller runs at SCHED_IDLE */

/* One transaction: a run of pages, claimed, resolved, released. */
struct resolve {
	struct resolve_table	*t;
	const struct resolve_ops *ops;
	void			*arg;
	enum fault_kind		 kind;
	int			 flags;
	struct resolve_hold	 hold;
	enum page_action	 action;	/* from the first page claimed */
	uint8_t			 was[RESOLVE_BATCH_MAX];	/* as claimed */
	uint8_t			 now[RESOLVE_BATCH_MAX];	/* to release */
	uint64_t		 off[RESOLVE_BATCH_MAX];	/* fault offsets */
	enum resolve_result	 result[RESOLVE_BATCH_MAX];
	int			 error;		/* RESOLVE_FAILED, _LOST */
	int			 tampered;	/* BUSY bits found unclaimed */
	int			 resets_done;	/* no hold left for a reset */
	int			 garbage_gone;	/* we cleared the last garbage
						   page the table counted */
	struct resolve_waiters	 woken;		/* parked on our pages */
};

/* Claim results. */
#define RESOLVE_CLAIMED	0
#define RESOLVE_HELD	1	/* another transaction holds it */

void		 resolve_table_init(struct resolve_table *,
		    _Atomic uint8_t *state, uint64_t npages, uint64_t garbage);
void		 resolve_table_destroy(struct resolve_table *);
void		 resolve_begin(struct resolve *, struct resolve_table *,
		    const struct resolve_ops *, void *arg, enum fault_kind,
		    int flags);
int		 resolve_claim(struct resolve *, uint64_t idx, uint64_t off,
		    struct resolve_waiter *park);
int		 resolve_extend(struct resolve *, uint64_t idx, uint64_t off);
void		 resolve_run(struct resolve *);
int		 resolve_holds_page(struct resolve *, uint64_t idx);
uint64_t	 resolve_reset(struct resolve_table *, uint64_t first,
		    uint64_t n);
int		 resolve_resets_pending(struct resolve_table *);
uint64_t	 resolve_garbage(struct resolve_table *);
void		 resolve_forget_garbage(struct resolve_table *, uint64_t n);
int		 resolve_drop(struct resolve_table *, uint64_t from,
		    uint64_t to, uint64_t run,
		    int (*punch)(void *, uint64_t first, uint64_t n),
		    void *arg, struct resolve_waiters *woken,
		    int *resets_done, uint64_t *dropped, uint64_t *held);
void		 resolve_park(struct resolve_table *, struct resolve_waiter *);
void		 resolve_cancel_waiters(struct resolve_table *,
		    struct resolve_waiters *out);
const char	*resolve_result_name(enum resolve_result);

#endif /* HPZ_RESOLVE_H */
