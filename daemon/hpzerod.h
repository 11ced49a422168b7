/*
 * hpzerod.h - private declarations of the hpzerod daemon, grouped by file.
 */
#ifndef HPZEROD_H
#define HPZEROD_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <linux/magic.h>

#include "hpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"
#include "resolve.h"
#include "clear.h"
#include "cost.h"
#include "cctx.h"

struct event;
struct event_base;

#define HPZD_WORKERS_MAX	256
#define HPZD_REGIONS_PER_CLIENT	1024
#define HPZD_CLIENTS_MAX	1024


struct client;
struct bucket;
struct ufork;
struct region_reset;
TAILQ_HEAD(uforks, ufork);
TAILQ_HEAD(region_resets, region_reset);
#define REGION_MOVED_MAX	4
/* Children's uffds a region out of memory keeps until its release. */
#define UFFD_LOST_FORKS		4

/*
 * A job for the prep thread (prep.c).  Its owner keeps it (in a region, a
 * stored region being let go, a static): submitting one takes no memory,
 * so nothing a job does falls back to the loop for want of it.
 */
enum prep_where {
	PREP_QUEUED,
	PREP_RUNNING,
	PREP_FINISHED,		/* on the done list, for the loop */
};
struct prep_job {
	TAILQ_ENTRY(prep_job)	 entry;
	void			(*work)(struct prep_job *);
	void			(*done)(struct prep_job *);
	void			*arg;
	atomic_int		 cancel;
	enum prep_where		 where;
};

struct region {
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

	atomic_int		 inflight;	/* queued, parked or running work */
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;		/* inflight fell */
	struct resolve_table	 rt;		/* who holds which page (resolve.c) */
	struct region_resets	 resets;	/* resets whose reply waits */
	struct event		*reset_ev;	/* the next slice of a reset */
	atomic_uint_fast64_t	 tamper_log_ns;	/* last warning of tampering */

	int			 node;		/* client's preferred node or -1 */
	pid_t			 pid;		/* client, for THREAD_ID lookups */
	int			 polled;	/* in the workers' poll list */

	/* Background work (scrub.c); guarded by scrub_lock. */
	TAILQ_ENTRY(region)	 bg;		/* in scrub_queue */
	int			 queued;	/* in scrub_queue */
	int			 priority;
	uint64_t		 cursor;	/* next page to scrub or populate */
	uint64_t		 ahead_start;	/* the read-ahead window */
	uint64_t		 ahead_lo;	/* next page of it to hand out */
	uint64_t		 ahead_hi;	/* exclusive */
	uint64_t		 ahead_last;	/* last missing fault's page */
	uint64_t		 ahead_pages;	/* current read-ahead window */
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

	/* Non-cooperative uffd events (uffd.c). */
	pthread_mutex_t		 evlock;	/* held reading its uffds */
	struct uforks		 forks;		/* children's uffds */
	atomic_int		 gone;		/* unmapped or torn: release */
	uint64_t		 moved[REGION_MOVED_MAX][2]; /* pieces moved
						   away: addr, len */
	int			 nmoved;
	int			 lost[UFFD_LOST_FORKS]; /* children's uffds
						   we had no memory for */
	int			 nlost;
	atomic_uint_fast64_t	 stray_page;	/* last fault outside it */
	atomic_int		 stray_n;	/* times in a row */

	/* Before it serves (prep.c), and the register's reply (control.c). */
	int			 prep_kind;	/* PREP_*: work left */
	struct prep_job		*prep;		/* queued, running or NULL */
	struct prep_job		 prep_slot;	/* what prep points to */
	int			 fresh;		/* new state: no magic yet */
	int			 started;	/* region_start() done */
	uint64_t		 garbage_found;	/* garbage at register */
	struct client		*waiter;	/* r->client waiting for the
						   reply to seq, or NULL */
	uint32_t		 waiter_seq;
	const char		*waiter_text;	/* the reply's text */

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
	uint64_t		 answer_cid;
	uint32_t		 answer_seq;
	const char		*answer_text;
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

/* What is left to do before a new region serves (prep.c). */
enum prep_kind {
	PREP_NONE,		/* nothing: a fresh state, not HPZ_DISCARD */
	PREP_FILL,		/* a fresh HPZ_DISCARD state: all garbage */
	PREP_ADOPT,		/* an adopted state: resolve busy, count */
};

/* A forked child's uffd for a region (UFFD_EVENT_FORK). */
struct ufork {
	TAILQ_ENTRY(ufork)	 entry;		/* region's forks, evlock */
	struct region		*region;
	int			 uffd;
	_Atomic uint64_t	 addr;		/* the range in the child */
	struct event		*ev;		/* main thread only */
	struct event		*pidev;		/* the child's exit */
	int			 pidfd;
	atomic_uint		 tid;		/* a thread of the child */
	atomic_int		 dead;		/* its range is gone: release */
	atomic_int		 refs;		/* the list, queued faults */
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
						   is full (control.c) */
	struct cctx		*ctx;		/* its process's (cctx.c) */
};
TAILQ_HEAD(clients, client);

/* What register learned about a backing file. */
struct backing {
	long			 fs_magic;
	uint64_t		 page_size;
	uint64_t		 size;
	dev_t			 dev;
	ino_t			 ino;
};

/* plan.c: the extent planner, pure arithmetic. */
#define PLAN_EXTENT_MIN		(256ULL << 10)
#define PLAN_EXTENT_MAX		(64ULL << 20)
#define PLAN_HOT_DEFAULT	(64ULL << 10)	/* the fault +- 32 KiB */
struct plan_extent {
	uint64_t	off;
	uint64_t	len;
};
uint64_t	 plan_extent_max(uint64_t llc_share);
void		 plan_window(uint64_t page_size, uint64_t fault_off,
		    uint64_t hot, uint64_t *start, uint64_t *len);
size_t		 plan_split(uint64_t len, uint64_t wstart, uint64_t wlen,
		    uint64_t max, struct plan_extent *out, size_t nout);
void		 plan_sort_by_distance(struct plan_extent *, size_t,
		    uint64_t wstart, uint64_t wend);
void		 plan_coalesce(const uint64_t *idx, size_t n, uint64_t first,
		    uint64_t max_pages, uint64_t *lo, uint64_t *hi);

/* topo.c: CPUs, nodes and the last-level cache. */
#define TOPO_CPUS_MAX		1024
#define TOPO_NODES_MAX		64
struct topo {
	int		 ncpus;			/* CPU ids 0 .. ncpus-1 */
	int		 cpu_online[TOPO_CPUS_MAX];
	int		 cpu_node[TOPO_CPUS_MAX];
	int		 nnodes;		/* node ids 0 .. nnodes-1 */
	uint64_t	 llc_size;		/* bytes */
	int		 llc_sharing;		/* CPUs sharing one LLC */
	uint64_t	 llc_share;		/* llc_size / llc_sharing */
};
extern struct topo	 topo;
ssize_t		 topo_read_file(const char *path, char *buf, size_t len);
int		 topo_parse_list(const char *list, int *set, int max);
int		 topo_read_llc(const char *root, int cpu, uint64_t *size,
		    int *sharing);
int		 topo_init(struct topo *, const char *root);
int		 topo_online(void);

/* A clear too big for one worker: extents taken by several (clear.h). */
#define JOB_EXTENTS_MAX		CLEAR_JOB_EXTENTS_MAX

enum work_type {
	WORK_FAULT,		/* resolve a fault */
	WORK_ASSIST,		/* take extents of a shared job */
};

/* One fault (or a share of a job), from the uffd reader to a worker. */
struct work {
	TAILQ_ENTRY(work)	 entry;
	enum work_type		 type;
	struct region		*region;
	uint64_t		 addr;		/* exact fault address */
	enum fault_kind		 kind;
	uint32_t		 tid;
	uint64_t		 t_read;	/* ns, when read from the uffd */
	struct clear_job	*job;		/* WORK_ASSIST */
	struct ufork		*fork;		/* from a child's uffd, or NULL */
	struct resolve_waiter	 park;		/* waiting for a page (resolve.c) */
	uint64_t		 due;		/* deferred: ns when it runs again */
	uint64_t		 backoff;	/* deferred: ns it waited last */
	uintptr_t		 mm;		/* whose address space, or 0 */
};
TAILQ_HEAD(workq, work);

enum worker_route_mode {
	ROUTE_READER,		/* the CPU the fault was read on */
	ROUTE_THREAD,		/* the faulting thread's last CPU (THREAD_ID) */
	ROUTE_HASH,		/* by page, ignoring CPUs */
};

struct worker_config {
	int			 nworkers;
	int			 spin_us;	/* most a worker spins for work */
	enum worker_route_mode	 route;
	uint64_t		 hot_size;	/* neighbourhood cleared last */
	uint64_t		 extent_max;	/* 0: from the LLC share */
	int			 split;		/* share a page with spinning
						   workers */
};
extern struct worker_config	 worker_config;

/*
 * Counters; relaxed atomics, read by status.  The D lines of hpz-counters.h
 * (stats_fill copies them into the reply as they are), then what only the
 * daemon sees.
 */
#define STATS_HIST_BUCKETS	32	/* bucket i: [2^i, 2^(i+1)) ns */
#define STATS_FIELD(name, kind, unit, prom, label, help) \
	atomic_uint_fast64_t	name;
#define STATS_NONE(name, kind, unit, prom, label, help)
struct stats {
	HPZ_COUNTERS_ALL(STATS_FIELD, STATS_NONE)
	atomic_uint_fast64_t	hist[STATS_HIST_BUCKETS];
	atomic_uint_fast64_t	faults_stray;	/* outside their region */
	atomic_uint_fast64_t	faults_inflight; /* read, not yet answered */
};

/* globals.c: set up by hpzerod.c */
extern struct event_base	*hpzd_base;
int		 hpzd_thread_start(pthread_t *, void *(*)(void *),
		    const char *name);
extern uint64_t			 hpzd_start_ns;

/* log.c */
void		 log_init(int debug);
void		 log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void		 fatal(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
void		 fatalx(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));

/* region.c */
extern struct regions	 region_all;
int		 region_check_range(uint64_t addr, uint64_t len, uint64_t offset,
		    uint64_t page_size, const struct backing *b, char *why,
		    size_t whylen);
int		 region_check_backing(int fd, struct backing *b, char *why,
		    size_t whylen);
int		 region_check_uffd(int fd, char *why, size_t whylen);
int		 region_overlaps(uint64_t a_start, uint64_t a_len,
		    uint64_t b_start, uint64_t b_len);
struct region	*region_conflict(const struct regions *all,
		    const struct client *c, uint64_t addr, uint64_t len,
		    dev_t dev, ino_t ino, uint64_t offset);
int		 region_check_state(int sfd, uint64_t npages, char *why,
		    size_t whylen);
int		 region_create(struct client *, const struct hpz_msg_register *,
		    int uffd, int fd, int sfd, struct region **, char *why,
		    size_t whylen);
int		 region_start(struct region *);
int		 region_check_pages(uint64_t npages, uint64_t page_size,
		    char *why, size_t whylen);
void		 region_limits(uint64_t max_pages);
uint64_t	 region_limit_pages(void);
struct region	*region_find_state(int sfd);
void		 region_set_id(struct region *, uint64_t id);
void		 region_reserve_ids(uint64_t max);
void		 region_move(struct region *, struct client *);
void		 region_destroy(struct region *);
void		 region_destroy_then(struct region *, void (*)(void *),
		    void *);
int		 region_probe(pid_t, const struct hpz_msg_register *, int,
		    int, int, struct region **, char *, size_t);
int		 region_attach(struct client *, struct region *, char *,
		    size_t);
void		 region_free_probed(struct region *);
void		 region_discard(struct cctx *, struct region *);
struct region	*region_find(struct client *, uint64_t addr, uint64_t len,
		    int exact);
int		 region_reset(struct region *, uint64_t addr, uint64_t len,
		    void (*done)(void *, int), void *arg);
void		 region_reset_work(struct region *);
void		 region_resolve_init(struct region *);
uint64_t	 region_addr(const struct region *);
void		 region_set_addr(struct region *, uint64_t addr);
uint64_t	 region_page_index(const struct region *, uint64_t addr);
void		 region_work_done(struct region *);
void		 region_set_policy(struct region *, uint32_t flags, int prio);
int		 region_populate(struct region *, uint64_t idx, uint64_t n);
int		 region_populate_spare(struct region *, uint64_t idx);
int		 region_check_mapping(pid_t pid, uint64_t addr, uint64_t len,
		    dev_t dev, ino_t ino, uint64_t offset, char *why,
		    size_t whylen);
int		 region_check_maps_line(const char *line, uint64_t *start,
		    uint64_t *end, uint64_t *off, unsigned int *major,
		    unsigned int *minor, unsigned long *ino, int *shared_rw);
int		 region_client_node(pid_t pid, uint64_t addr);
int		 region_page_node(const struct region *, uint64_t idx);

/* uffd.c */
struct worker;
void		 uffd_read_cb(int fd, short events, void *arg);
int		 uffd_read(struct region *, struct worker *self);
void		 uffd_handle(struct worker *, struct work *);
void		 uffd_assist(struct work *);
void		 uffd_work_cancel(struct work *);
int		 uffd_premap(struct region *, uint64_t addr, uint64_t len,
		    uint64_t *done);
void		 uffd_kick(void);
void		 uffd_region_gone(struct region *, const char *why);
void		 uffd_region_refused(struct region *, const char *why);
void		 uffd_tampered(struct region *, int n);
void		 uffd_init(void);
void		 uffd_region_init(struct region *);
void		 uffd_forks_release(struct region *);
void		 uffd_forks_unwatch(struct region *);
int		 uffd_wake(struct region *, uint64_t addr, uint64_t len);
int		 uffd_unregister(struct region *);
int		 uffd_thread_cpu(pid_t pid, uint32_t tid);

/* worker.c */
uint64_t	 worker_extent_max(const struct worker_config *);
int		 worker_start(const struct worker_config *);
void		 worker_stop(void);
int		 worker_count(void);
int		 worker_route(const struct topo *, const int *worker_cpu,
		    int nworkers, int fault_cpu, int page_node, uint64_t hash);
void		 worker_submit(struct work *, int fault_cpu, int page_node);
void		 worker_push(struct worker *, struct work *);
size_t		 worker_take(struct worker *, int (*match)(struct work *,
		    void *), void *arg, struct work **out, size_t max);
int		 worker_assist(struct clear_job *, struct region *,
		    uint64_t idx, struct worker *self, int awake_only);
void		 worker_defer(struct work *, uint64_t delay_ns);
void		 worker_cancel(struct region *, struct workq *out);
void		 worker_requeue(struct work *);
int		 worker_spinning(const struct worker *self);
int		 worker_awake(void);
void		 worker_poll_add(struct region *);
void		 worker_poll_remove(struct region *);
int		 worker_id(const struct worker *);
void		 worker_push_polled(struct worker *, struct work *);
void		 worker_ioctl_enter(uintptr_t mm, uint64_t region, int pid);
void		 worker_ioctl_leave(void);
void		 worker_bg_slot(const char *name);
int		 worker_mm_slow(uintptr_t mm);

/* clear.c: see clear.h. */

/* pool.c, pool-fill.c: huge pages allocated ahead, files cut to measure. */
#define POOL_NSIZES	2	/* 2 MiB, 1 GiB: struct conf's arrays */
enum pool_action {
	POOL_NONE,
	POOL_FILL,		/* allocate a page */
	POOL_YIELD,		/* give pages back: the host is short */
	POOL_SHRINK,		/* give pages back: over the size set */
};
struct conf;
enum pool_action pool_decide(int enabled, uint64_t avail, uint64_t node_free,
		    uint64_t reserve, uint64_t pages, uint64_t target,
		    uint64_t *n);
double		 pool_uid_refill(double tokens, uint64_t cap, uint64_t dt);
int		 pool_start(const struct conf *);
void		 pool_stop(void);
void		 pool_configure(const struct conf *);
int		 pool_take(struct client *, const struct hpz_msg *);
int		 pool_status(struct client *, const struct hpz_msg *);
uint64_t	 pool_ready_bytes(void);
int		 pool_busy(void);

/* cost.c: what a fault costs here, and whether the daemon pays. */
struct cost {
	uint64_t	 rt_ns;		/* uffd round trip, the page cached */
	int		 huge;		/* rt_ns measured on a 2 MiB page */
	uint64_t	 kzero_ns;	/* the kernel zeroing a 2 MiB page */
	uint64_t	 ktouch_ns;	/* its first touch: fault + zeroing */
	uint64_t	 clear_ns;	/* our bulk clear of a 2 MiB page */
	int		 measured;	/* rt_ns and ktouch_ns both known */
};
void		 cost_measure(void);
void		 cost_get(struct cost *);
void		 cost_text(char *, size_t);
double		 cost_fault_gain(const struct cost *, uint64_t page_size);
int		 cost_keep(const struct cost *, uint64_t page_size, int scrub,
		    int demand, int ncpus, int queued, int nworkers,
		    uint64_t observed_ns);
int		 cost_demand(void);
void		 cost_observe(struct region *, uint64_t ns);
long long	 cost_host_avail(uint64_t page_size);

/* intercept.c: faults trapped only while a region holds garbage. */
enum { INTERCEPT_AUTO, INTERCEPT_ALWAYS };	/* [policy] intercept */
enum { ASIDE_AUTO, ASIDE_NEVER, ASIDE_ALWAYS };	/* [policy] step_aside */
struct conf;
void		 intercept_configure(const struct conf *);
const char	*intercept_policy_name(int which);
int		 intercept_register(int uffd, uint64_t addr, uint64_t len,
		    int faults);
void		 intercept_init(struct region *);
int		 intercept_on(struct region *);
void		 intercept_check(struct region *);
int		 intercept_arm(struct region *,
		    void (*)(struct region *, int, void *), void *);
void		 intercept_fault(struct region *);
void		 intercept_aside_start(struct region *);

/*
 * conf.c: the settings, from one table: the command line's values, the
 * defaults and the log; conf-file.c: hpzerod.conf (INI, read with libinih).
 */
struct conf {
	char		 socket[108];		/* [daemon] socket */
	int		 workers;		/* [daemon] workers, 0: CPUs */
	char		 clear_kernel[16];	/* [clear] kernel, "": auto */
	char		 hot_kernel[16];	/* [clear] hot_kernel */
	uint64_t	 hot_size;		/* [clear] hot_size */
	uint64_t	 extent;		/* [clear] extent, 0: LLC share */
	int		 spin_us;		/* [workers] spin_us */
	int		 route;			/* [workers] route */
	int		 split;			/* [workers] split */
	/* [background]: re-read on SIGHUP. */
	int		 scrub;			/* scrub = yes|no */
	int		 scrub_threads;		/* threads, 0: one per CPU */
	double		 background_gbs;	/* gbs, 0: unlimited */
	double		 client_gbs;		/* client_gbs, 0: unlimited */
	uint64_t	 ahead_min;		/* ahead_min */
	uint64_t	 ahead_max;		/* ahead_max */
	/* [limits], per uid; 0: unlimited.  Re-read on SIGHUP. */
	int		 uid_clients;		/* clients */
	int		 uid_regions;		/* regions */
	uint64_t	 uid_bytes;		/* bytes */
	uint64_t	 uid_state_bytes;	/* state_bytes */
	uint64_t	 region_pages;		/* region_pages, a region */
	int		 uid_stuck_contexts;	/* stuck_contexts */
	/* [pool]: re-read on SIGHUP. */
	int		 pool;			/* enable */
	uint64_t	 pool_size[POOL_NSIZES][TOPO_NODES_MAX]; /* size_2m,
						   size_1g: bytes a node */
	uint64_t	 pool_reserve[POOL_NSIZES];	/* reserve_2m, _1g */
	double		 pool_gbs;		/* gbs, 0: unlimited */
	uint64_t	 pool_uid_bytes;	/* uid_bytes a minute, 0: uid_share */
	int		 pool_uid_share;	/* % of the host's pages, 0: none */
	/* [policy]: re-read on SIGHUP. */
	int		 intercept;		/* intercept = auto|always */
	int		 step_aside;		/* step_aside = auto|never|always */
};
/*
 * One key of the settings: its place in hpzerod.conf, its option, its type,
 * range and default, and its field in struct conf.  conf.c's table of them
 * drives the file, the command line, the range checks and the log.
 */
enum conf_type {
	CONF_PATH,		/* char[], 1 .. size-1 bytes */
	CONF_INT,		/* int, min .. max */
	CONF_BYTES,		/* uint64_t, a size from min to max */
	CONF_PAGES,		/* uint64_t, a count of pages, K/M/G allowed */
	CONF_EXTENT,		/* uint64_t, "auto" (0) or min .. max */
	CONF_BOOL,		/* int, 0 or 1 */
	CONF_GBS,		/* double, min .. max GB/s */
	CONF_KERNEL,		/* char[], a clear kernel or "auto" ("") */
	CONF_HOT_KERNEL,	/* char[], an ordinary-store kernel or "auto" */
	CONF_WORD,		/* int, the index of one of words */
	CONF_POOL_SIZE,		/* uint64_t[TOPO_NODES_MAX]: "SIZE" for every
				   node, or "NODE:SIZE,..."; whole pages of
				   min bytes */
};
#define CONF_RELOAD	0x1	/* SIGHUP applies it while running */
#define CONF_UNLIMITED	0x2	/* 0 is no limit */
#define CONF_OPT_NOZERO	0x4	/* the option refuses 0 */
struct conf_key {
	const char	*section;
	const char	*name;		/* in hpzerod.conf */
	const char	*option;	/* --option, NULL: the file only */
	int		 letter;	/* -x for it too, 0: none */
	enum conf_type	 type;
	size_t		 off;		/* of the field in struct conf */
	size_t		 size;		/* of the field */
	uint64_t	 min;
	uint64_t	 max;
	const char *const *words;	/* CONF_WORD: value i is words[i] */
	const char	*def;		/* the default, as the file writes it */
	const char	*arg;		/* the option's argument, for --help */
	const char	*help;		/* what it does, for --help */
	int		 flags;		/* CONF_RELOAD, ... */
};
const struct conf_key *conf_key_at(size_t);
const struct conf_key *conf_key_find(const char *section, const char *name);
void		 conf_defaults(struct conf *);
int		 conf_set(struct conf *, const struct conf_key *,
		    const char *value, int option, char *why, size_t whylen);
void		 conf_format(const struct conf *, const struct conf_key *,
		    char *buf, size_t len);
void		 conf_expect(const struct conf_key *, int option, char *buf,
		    size_t len);
int		 conf_same(const struct conf *, const struct conf *,
		    const struct conf_key *);
int		 conf_restart_diff(const struct conf *, const struct conf *,
		    char *names, size_t len);
void		 conf_reload(struct conf *, const struct conf *);
const char	*conf_text(const struct conf *, const char *section,
		    int reload_only, char *buf, size_t len);
void		 conf_worker(const struct conf *, int nworkers,
		    struct worker_config *);
int		 conf_load(const char *path, struct conf *, char *why,
		    size_t whylen);
int		 conf_parse_bytes(const char *, uint64_t *);

/* scrub.c: background work at SCHED_IDLE: scrub, allocate ahead, premap. */
int		 scrub_start(const struct conf *);
void		 scrub_stop(void);
void		 scrub_configure(const struct conf *);
void		 scrub_add(struct region *, uint64_t from);
void		 scrub_remove(struct region *);
void		 scrub_fault(struct region *, uint64_t idx, enum fault_kind);
uint64_t	 scrub_pending_pages(void);
uint64_t	 scrub_region_pending(const struct region *);
double		 scrub_budget_gbs(int client);
int		 scrub_busy(void);
int		 scrub_region_enabled(const struct region *);

/* reap.c: closing the descriptors clients passed, off the loop. */
int		 reap_start(void);
void		 reap_stop(void);
void		 reap_block_signal(void);
void		 reap_close(int fd);
void		 reap_defuse(int);
void		 reap_close_here(int fd);
void		 reap_close_conn_here(int fd);
void		 reap_away_add(int n);
void		 reap_close_conn(int fd);
uint64_t	 reap_pending(void);
uint64_t	 reap_slow_count(void);

/* prep.c: a request's work that grows with the pages, off the loop. */
int		 prep_start(void);
void		 prep_stop(void);
int		 prep_region(struct region *);
void		 prep_region_cancel(struct region *);
int		 prep_job(struct prep_job *, void (*work)(struct prep_job *),
		    void (*done)(struct prep_job *), void *arg);
int		 prep_cancelled(const struct prep_job *);
void		*prep_arg(const struct prep_job *);
int		 prep_state_extent(int sfd, uint64_t npages, uint64_t from,
		    uint64_t *lo, uint64_t *hi);

/* control.c */
extern struct clients	 control_clients;
int		 control_listen(const char *path, int *from_systemd);
void		 control_retake(void);
struct client	*control_orphan(pid_t);
void		 control_orphan_check(struct client *);
int		 control_init(int listen_fd);
void		 control_shutdown(void);
size_t		 control_nclients(void);
int		 control_message(struct client *, struct hpz_msg *);
void		 control_limits(const struct conf *);
void		 control_uid_usage(uid_t, int *clients, int *regions,
		    uint64_t *bytes, uint64_t *state_bytes);
void		 control_region_ready(struct region *);
void		 control_fill_limits(struct hpz_msg_status_reply *, uid_t);

/* fdstore.c: regions kept in systemd's fd store across a crash. */
#define FDSTORE_KINDS	4	/* uffd, backing file, state memfd, pidfd */
void		 fdstore_init(int enable);
int		 fdstore_enabled(void);
int		 fdstore_pidfd(pid_t);
void		 fdstore_remember(struct region *);
void		 fdstore_forget(struct region *);
int		 fdstore_parse_name(const char *, uint64_t *id);
void		 fdstore_retake(int n, const int *fds, char **names);

/* stats.c */
extern struct stats	 stats;
uint64_t	 stats_now_ns(void);
void		 stats_fault_latency(uint64_t ns);
int		 stats_bucket(uint64_t ns);
void		 stats_fill(struct hpz_msg_status_reply *);
void		 stats_regions(struct hpz_msg_regions_reply *, uint64_t after_id,
		    uid_t uid);
void		 stats_summary(char *buf, size_t len);

#endif /* HPZEROD_H */
