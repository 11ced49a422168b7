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

#include "hpz.h"
#include "hpz-protocol.h"

struct event;
struct event_base;

#define HPZD_WORKERS_MAX	256
#define HPZD_REGIONS_PER_CLIENT	1024
#define HPZD_CLIENTS_MAX	1024

/* Filesystem magics (linux/magic.h), kept here so tests can fake them. */
#define HPZD_HUGETLBFS_MAGIC	0x958458f6L
#define HPZD_TMPFS_MAGIC	0x01021994L

/*
 * Per-page state.  The low bits say what the page holds; nothing but
 * state_fault_action() decides to write zeros, and only for PAGE_GARBAGE.
 */
enum page_state {
	PAGE_KEEP = 0,		/* never seen: whatever the file holds is data */
	PAGE_GARBAGE = 1,	/* declared garbage: clear before mapping */
	PAGE_ZEROED = 2,	/* cleared by us, not mapped yet */
	PAGE_MAPPED = 3,	/* mapped into the client: client data */
};
#define PAGE_STATE_MASK		0x0f
#define PAGE_RESET		0x40	/* reset while busy: garbage when done */
#define PAGE_BUSY		0x80	/* a worker owns the page */

enum fault_kind {
	FAULT_MISSING,		/* no page in the file */
	FAULT_MINOR,		/* page in the file, not mapped */
};

enum page_action {
	ACTION_POPULATE,	/* allocate (kernel zeroes it), then map */
	ACTION_CLEAR,		/* write zeros, then map */
	ACTION_MAP,		/* map as it is */
};

struct client;

struct region {
	TAILQ_ENTRY(region)	 entry;		/* client's list */
	TAILQ_ENTRY(region)	 all;		/* every region */
	struct client		*client;
	uint64_t		 id;

	uint64_t		 addr;		/* in the client */
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
	void			*map;		/* our mapping of the range */
	_Atomic uint8_t		*state;		/* npages entries */
	struct event		*ev;

	atomic_int		 inflight;	/* queued or running work */
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;		/* a page left BUSY, inflight fell */
	int			 dead;		/* client gone: stop mapping */

	atomic_uint_fast64_t	 faults;
	atomic_uint_fast64_t	 cleared;
};
TAILQ_HEAD(regions, region);

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

/* One fault, from the uffd reader to a worker. */
struct work {
	TAILQ_ENTRY(work)	 entry;
	struct region		*region;
	uint64_t		 addr;		/* exact fault address */
	enum fault_kind		 kind;
	uint32_t		 tid;
	uint64_t		 t_read;	/* ns, when read from the uffd */
};

/* Counters; relaxed atomics, read by status. */
struct stats {
	atomic_uint_fast64_t	faults;
	atomic_uint_fast64_t	faults_missing;
	atomic_uint_fast64_t	faults_minor;
	atomic_uint_fast64_t	faults_shared;
	atomic_uint_fast64_t	pages_cleared;
	atomic_uint_fast64_t	bytes_cleared;
	atomic_uint_fast64_t	pages_populated;
	atomic_uint_fast64_t	pages_punched;
	atomic_uint_fast64_t	resets;
	atomic_uint_fast64_t	registers;
	atomic_uint_fast64_t	unregisters;
	atomic_uint_fast64_t	requests_rejected;
	atomic_uint_fast64_t	clients_dropped;
	atomic_uint_fast64_t	fault_ns_total;
	atomic_uint_fast64_t	fault_ns_max;
};

/* hpzerod.c */
extern struct event_base	*hpzd_base;
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

/* state.c: the per-page state machine, pure functions. */
enum page_action state_fault_action(uint8_t state, enum fault_kind kind);
int		 state_claim(_Atomic uint8_t *page, uint8_t *was);
uint8_t		 state_release(_Atomic uint8_t *page, uint8_t newstate);
void		 state_reset(_Atomic uint8_t *page);
int		 state_needs_punch(uint8_t state);
const char	*state_name(uint8_t state);

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
int		 region_create(struct client *, const struct hpz_msg_register *,
		    int uffd, int fd, struct region **, char *why,
		    size_t whylen);
void		 region_destroy(struct region *);
struct region	*region_find(struct client *, uint64_t addr, uint64_t len,
		    int exact);
int		 region_reset(struct region *, uint64_t addr, uint64_t len);
uint64_t	 region_page_index(const struct region *, uint64_t addr);
void		 region_wait_page(struct region *, uint64_t idx);
void		 region_work_done(struct region *);

/* uffd.c */
void		 uffd_read_cb(int fd, short events, void *arg);
void		 uffd_handle(struct work *);
int		 uffd_continue(struct region *, uint64_t addr, uint64_t len);
int		 uffd_wake(struct region *, uint64_t addr, uint64_t len);
int		 uffd_unregister(struct region *);

/* worker.c */
int		 worker_start(int nworkers);
void		 worker_stop(void);
int		 worker_count(void);
void		 worker_submit(struct work *);

/* clear.c */
void		 clear_range(void *p, size_t len);

/* control.c */
extern struct clients	 control_clients;
int		 control_listen(const char *path, int *from_systemd);
int		 control_init(int listen_fd);
void		 control_shutdown(void);
size_t		 control_nclients(void);

/* stats.c */
extern struct stats	 stats;
uint64_t	 stats_now_ns(void);
void		 stats_fault_latency(uint64_t ns);
void		 stats_fill(struct hpz_msg_status_reply *);
void		 stats_summary(char *buf, size_t len);

#endif /* HPZEROD_H */
