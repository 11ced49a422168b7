/*
 * region.h - the object every layer reads: a registered range (struct
 * region) and the client that owns it (struct client), and the page-level
 * helpers of region-page.c.  Its lifecycle is region.c's (region-life.h),
 * its validation region-check.c's (region-check.h).
 */
#ifndef HPZD_REGION_H
#define HPZD_REGION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "hpz-protocol.h"
#include "resolve.h"
#include "cost.h"
#include "cctx.h"
#include "control-state.h"
#include "prep-thread.h"
#include "scrub.h"
#include "uffd.h"

struct event;
struct bucket;
struct client;
struct region_reset;
TAILQ_HEAD(region_resets, region_reset);

struct region {
	/*
	 * Identity and geometry: set by the register (region-check.c,
	 * region.c) before the region is on any list, read by every layer.
	 * Changed after only by region.c (client and id when the region
	 * moves to another connection, flags on a reset) and by the uffd
	 * events' remap (addr, through region_set_addr).
	 */
	TAILQ_ENTRY(region)	 entry;		/* client's list */
	TAILQ_ENTRY(region)	 all;		/* every region */
	struct client		*client;
	uint64_t		 id;

	uint64_t		 addr;		/* in the client: region_addr() */
	uint64_t		 len;
	uint64_t		 offset;	/* in the file */
	uint64_t		 page_size;
	uint64_t		 npages;
	uint32_t		 flags;		/* HPZ_REGION_FLAGS */
	uint64_t		 features;	/* uffd features agreed */
	long			 fs_magic;
	dev_t			 dev;
	ino_t			 ino;

	/*
	 * Its descriptors and our mappings of its files: set by the register,
	 * let go by the teardown (region.c) on its client's context.
	 */
	int			 uffd;
	int			 fd;
	int			 sfd;		/* page-state memfd */
	dev_t			 sdev;		/* its inode, to know it again */
	ino_t			 sino;
	int			 lockfd;	/* holds its server lock */
	void			*smap;		/* our mapping of it */
	size_t			 smaplen;
	int			 adopted;	/* state from an earlier server */
	uint64_t		 recovered;	/* busy pages it left */
	int			 stored;	/* fds in systemd's fd store */
	int			 pidfd;		/* the client, for the store */
	void			*map;		/* our mapping of the range */
	_Atomic uint8_t		*state;		/* npages entries, in smap */
	struct event		*ev;

	/* Lifetime: work in flight, resets, who holds which page. */
	atomic_int		 inflight;	/* queued, parked or running work */
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;		/* inflight fell */
	struct resolve_table	 rt;		/* who holds which page (resolve.c) */
	struct region_resets	 resets;	/* resets whose reply waits */
	struct event		*reset_ev;	/* the next slice of a reset */
	atomic_uint_fast64_t	 tamper_log_ns;	/* last warning of tampering */

	/* Its client, for routing its work (worker.c). */
	int			 node;		/* client's preferred node or -1 */
	pid_t			 pid;		/* client, for THREAD_ID lookups */
	uint32_t		 owner;		/* its client's uid, for the workers'
						   cap (worker.h), or UINT32_MAX */
	int			 polled;	/* in the workers' poll list */

	/* Background work: scrub.c's slice (scrub.h), and its priority. */
	struct scrub_slice	 scrub;
	int			 priority;
	atomic_int		 dying;		/* being destroyed: stop */
	atomic_uint_fast64_t	 bg_cleared;
	atomic_uint_fast64_t	 faults;
	atomic_uint_fast64_t	 cleared;
	atomic_uint_fast64_t	 populated;
	atomic_uint_fast64_t	 bg_filled;	/* shmem holes the scrub filled */
	int			 bg_resv;	/* holes reserved 1, not -1 (hostmem_lock) */
	struct cost_seen	 seen;		/* its garbage faults (cost.c) */
	atomic_uint_fast64_t	 fault_ns_total;
	atomic_uint_fast64_t	 fault_ns_max;

	/* Non-cooperative uffd events: uffd.c's slice (uffd.h). */
	struct uffd_slice	 events;
	atomic_int		 gone;		/* unmapped or torn: release */
	atomic_uint_fast64_t	 stray_page;	/* last fault outside it */
	atomic_int		 stray_n;	/* times in a row */
	atomic_uint_fast64_t	 nopage_since;	/* ns: holes unfillable since
						   (0: a page was to be had) */

	/*
	 * Before it serves (prep.c), and the register's reply: control.c's
	 * slice (control-state.h).
	 */
	int			 prep_kind;	/* PREP_*: work left */
	struct prep_job		*prep;		/* queued, running or NULL */
	struct prep_job		 prep_slot;	/* what prep points to */
	void			(*prep_ready)(struct region *); /* then */
	int			 fresh;		/* new state: no magic yet */
	int			 started;	/* region_start() done */
	uint64_t		 garbage_found;	/* garbage at register */
	struct control_slice	 reply;		/* control.c's slice */

	/* Faults trapped only while it holds garbage (intercept.c). */
	atomic_int		 intercepting;	/* MISSING | MINOR registered */
	int			 idle_refused;	/* the kernel would not let the
						   faults go: they stay ours */
	atomic_int		 aside;		/* ASIDE_*: stepping aside */

	/*
	 * Its client process's context (cctx.c), where the calls on what
	 * the client owns are made: the page-state walk, the switches of
	 * its uffd registration, its teardown.
	 */
	struct cctx		*ctx;
	struct cctx_job		 ctx_prep;	/* prep's walk */
	struct cctx_job		 ctx_switch;	/* faults to the kernel */
	struct cctx_job		 ctx_arm;	/* faults to us again */
	struct cctx_job		 ctx_end;	/* the teardown */
	struct cctx_job		 ctx_aside;	/* a step aside's punches */
	int			 aside_queued;	/* ctx_aside in flight */
	int			 switching;	/* ctx_switch in flight */
	int			 switch_error;
	int			 armed;		/* registered for its garbage */
	int			 arm_failed;
	/* Called once ctx_switch is done (a register's answer waits). */
	void			(*switched_cb)(struct region *);
	int			 arming;	/* ctx_arm in flight */
	int			 arm_error;
	void			(*arm_cb)(struct region *, int, void *);
	void			*arm_arg;
	int			 ending;	/* destroyed: teardown queued */
	int			 attached;	/* on the lists once */
	void			(*then)(void *); /* after the teardown */
	void			*then_arg;
};
TAILQ_HEAD(regions, region);

/* r->aside: where a region stands in stepping aside from its garbage. */
enum {
	ASIDE_NONE,		/* serving its garbage faults */
	ASIDE_WANTED,		/* a worker decided: the loop queues the drop */
	ASIDE_DROPPING,		/* dropping garbage for the kernel to zero */
	ASIDE_REFUSED,		/* the file would not punch: ours to clear */
};

struct client {
	TAILQ_ENTRY(client)	 entry;
	uint64_t		 id;
	int			 fd;
	pid_t			 pid;
	uid_t			 uid;
	gid_t			 gid;
	struct event		*ev;
	struct regions		 regions;
	size_t			 nregions;
	uint64_t		 bytes;		/* of its regions */
	uint64_t		 state_bytes;	/* their page state */
	struct bucket		*budget;	/* background GB/s (scrub.c) */
	int			 orphan;	/* regions back from the fd
						   store, no connection yet */
	int			 pidfd;		/* orphan: exits when it does */
	int			 paused;	/* not read: a reply waits */
	int			 broken;	/* a reply failed: drop it */
	int			 backlog;	/* paused: its context's queue
						   is full (control-client.h) */
	struct cctx		*ctx;		/* its process's (cctx.c) */
};
TAILQ_HEAD(clients, client);

/* region-page.c: where it lies, its pages, the work on it. */
int		 region_overlaps(uint64_t a_start, uint64_t a_len,
		    uint64_t b_start, uint64_t b_len);
uint64_t	 region_addr(const struct region *);
void		 region_set_addr(struct region *, uint64_t addr);
uint64_t	 region_page_index(const struct region *, uint64_t addr);
void		 region_work_done(struct region *);
int		 region_populate(struct region *, uint64_t idx, uint64_t n);
int		 region_populate_spare(struct region *, uint64_t idx);
int		 region_client_node(pid_t pid, uint64_t addr);
int		 region_page_node(const struct region *, uint64_t idx);

#endif /* HPZD_REGION_H */
