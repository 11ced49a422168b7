/*
 * pool-fill.h - the pool's pages and the threads that allocate them
 * (pool-fill.c), shared with the hand-out side (pool.c).
 *
 * A pool is one page size on one NUMA node.  It holds up to POOL_FILES
 * memfds of our own, each a run of allocated, zero pages from offset 0: a
 * few small ones (1, 2, 4 ... pages, at most 1/64 of the pool) for
 * small requests, and one that grows to everything else, for the big
 * guest.  One file at a time grows; every filler of the node (one per CPU
 * of the node, SCHED_IDLE, bound to that CPU and to the node's memory)
 * allocates its pages in parallel by touching them through one mapping of
 * ours (a hugetlb fault is served under the VMA's lock, the page's fault
 * mutex: faults on different pages of one file run side by side, where
 * fallocate holds the file's inode lock for the whole call).
 *
 * Locking: pool->lock guards the files and the host's counts.  It is held
 * for bookkeeping only, never across a system call, so the main thread
 * never waits on a filler that the scheduler starves (SCHED_IDLE).
 */
#ifndef HPZD_POOL_FILL_H
#define HPZD_POOL_FILL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define POOL_FILES		16
#define POOL_SMALL_SHARE	64	/* small files: 1/64 of the pool */
/*
 * After a hand-out of a guest's memory (POOL_QUIET_MIN bytes or more) its
 * taker starts on what it took, touching it in its first seconds: the
 * fillers allocate nothing meanwhile, since zeroing at the memory's
 * bandwidth beside it slows that start, unless as many pages as it took
 * come back to the host (a guest that exited).  Small hand-outs arm no
 * quiet: a uid looping on small takes must not stop the refill, and its
 * big takes end with its share ([pool] uid_share).
 */
#define POOL_QUIET_NS		2000000000ULL	/* [pool] quiet_ms */
#define POOL_QUIET_MIN		(64ULL << 20)
/*
 * A hand-out short of what its program asked for: the kernel must find
 * the rest free as the program maps the whole, so the pools hold that
 * many pages off their refill until others have taken as many (its mmap
 * reserved them) or the program that took it has exited, at most this
 * long (a program that never maps, or one we cannot watch).
 */
#define POOL_SHORT_NS		5000000000ULL	/* [pool] short_hold_ms */

struct pool_file {
	int			 fd;		/* -1: an empty slot */
	unsigned char		*map;		/* ours, MAP_NORESERVE */
	size_t			 maplen;
	uint64_t		 cap;		/* pages it may grow to (its size) */
	uint64_t		 next;		/* pages [0, next) claimed */
	uint64_t		 done;		/* of them, allocated */
	uint64_t		 bad;		/* first page that failed, or cap */
	int			 inflight;	/* fillers touching it now */
	int			 small;		/* one of the 1, 2, 4 ... files */
	int			 full;		/* grows no more */
	int			 busy;		/* a filler cuts it (no lock held) */
	int			 taking;	/* a hand-out waits for it */
};

struct pool {
	int			 psi;		/* index in pool_sizes */
	uint64_t		 page_size;
	int			 node;
	pthread_mutex_t		 lock;
	_Atomic uint64_t	 target;	/* pages wanted; UINT64_MAX: all */

	/* Under lock. */
	struct pool_file	 files[POOL_FILES];
	int			 creating;	/* a filler makes a file */
	int			 reading;	/* a filler reads the counts */
	uint64_t		 avail;		/* host free - reserved, last read */
	uint64_t		 node_free;
	uint64_t		 host_total;	/* nr_hugepages */
	uint64_t		 host_at;	/* ns of the read */
	uint64_t		 owed;		/* pages a short hand-out needs */
	uint64_t		 owed_until;	/* ns */
	int64_t			 owed_mark;	/* level at the hand-out (low) */
	int			 owed_pidfd;	/* its taker's, or -1 */
	uint64_t		 hold;		/* pages kept free for the host
						   (pool-hold.c), 0: none */
	uint64_t		 hold_until;	/* ns */
	int64_t			 hold_mark;	/* level as it was set (low) */
	uid_t			 hold_uid;	/* who asked last */
	int64_t			 level;		/* pool_host_level (high) */
	uint64_t		 backoff;	/* ns: no allocation before */
	uint64_t		 quiet_until;	/* ns: a taker starts (pool_hand) */
	uint64_t		 quiet_avail;	/* avail once as many pages as it
						   took come back */
	int			 failed;	/* said so in the log */
	int			 nflight;	/* pages being touched */
	uint64_t		 busy_since;	/* ns: nflight went 0 -> 1 */

	int			 fd_free;	/* host counts, sysfs */
	int			 fd_resv;
	int			 fd_nr;
	int			 fd_node;	/* this node's free, or -1 */

	/* Read by status. */
	_Atomic uint64_t	 ready;		/* pages in its files */
	_Atomic uint64_t	 host_avail;
	atomic_uint_fast64_t	 filled;
	atomic_uint_fast64_t	 fill_ns;	/* wall time with a page in flight */
	atomic_uint_fast64_t	 yielded;
	atomic_uint_fast64_t	 cut;		/* cut off a file to measure */
	atomic_uint_fast64_t	 handouts;
	atomic_uint_fast64_t	 handout_pages;
	atomic_uint_fast64_t	 misses;
	atomic_uint_fast64_t	 refused;
};

/* The page sizes a pool may have, in the order of struct conf's arrays. */
struct pool_size {
	uint64_t	 size;
	const char	*human;
	const char	*dir;		/* under /sys/kernel/mm/hugepages */
};
extern const struct pool_size	 pool_sizes[];

/* pool-fill.c */
extern _Atomic uint64_t	 pool_reserve[];	/* pages, by page size */
extern atomic_int	 pool_on;
extern struct bucket	*pool_fill_budget;	/* [pool] gbs */
uint64_t	 pool_file_ready(const struct pool_file *);
uint64_t	 pool_held(const struct pool *);
void		 pool_host_level(const struct pool *, int64_t *, int64_t *,
		    uint64_t *, uint64_t *);
void		 pool_took_begin(int, uint64_t);
void		 pool_owed_end(struct pool *);
uint64_t	 pool_hold_left(struct pool *, uint64_t now);
int		 pool_cut(struct pool *, uint64_t n, int yield);
void		 pool_took_end(int, uint64_t, uint64_t);
void		 pool_recount(struct pool *);
uint64_t	 pool_layout_cap(const struct pool_file *, int nfiles,
		    uint64_t room, uint64_t host_total, int *small);
int		 pool_pick_file(const struct pool_file *, int nfiles,
		    uint64_t want);
int		 pool_fill_start(struct pool *, int nnodes, void (*kick)(void));
void		 pool_fill_stop(void);
void		 pool_fill_kick(void);
void		 pool_file_drop(struct pool_file *);

#endif /* HPZD_POOL_FILL_H */
