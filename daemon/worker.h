/*
 * worker.h - the fault workers and their queues (worker.c).
 */
#ifndef HPZD_WORKER_H
#define HPZD_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hpz-state.h"
#include "resolve.h"
#include "clear.h"
#include "conf.h"

struct region;
struct ufork;
struct topo;
struct worker;

/* A clear too big for one worker: extents taken by several (clear.h). */
#define JOB_EXTENTS_MAX		CLEAR_JOB_EXTENTS_MAX

enum work_type {
	WORK_FAULT,		/* resolve a fault */
	WORK_ASSIST,		/* take extents of a shared job */
};

/*
 * One fault (or a share of a job), from the uffd reader to a worker, which
 * calls run with it; a stuck worker hands it on through requeue (NULL: to
 * any other worker).  What it holds is theirs: the worker reads none of
 * it but region, as a key, and mm.
 */
struct work {
	TAILQ_ENTRY(work)	 entry;
	void			(*run)(struct worker *, struct work *);
	void			(*requeue)(struct work *);
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
	uint32_t		 owner;		/* its client's uid, WORKER_NO_OWNER */
};
TAILQ_HEAD(workq, work);

/* The work item whose park a resolve waiter is (resolve.c hands those). */
static inline struct work *
worker_parked(struct resolve_waiter *pw)
{
	return ((struct work *)(void *)((char *)pw -
	    offsetof(struct work, park)));
}

extern struct worker_config	 worker_config;

/* A work item's owner when its client is unknown: never held to a cap. */
#define WORKER_NO_OWNER		UINT32_MAX
/*
 * Workers one uid's clients may hold stuck in their kernel locks at once:
 * past that, that uid's faults wait on its own stuck workers, not on the
 * free ones every other uid needs (worker_owner_home).
 */
#define WORKER_OWNER_SLOW_MAX	2

uint64_t	 worker_extent_max(const struct worker_config *);
int		 worker_start(const struct worker_config *);
void		 worker_stop(void);
int		 worker_count(void);
int		 worker_route(const struct topo *, const int *worker_cpu,
		    int nworkers, int fault_cpu, int page_node, uint64_t hash);
int		 worker_owner_home(const uint32_t *slow_owner,
		    const int *avoided, int n, uint32_t owner, uint64_t key,
		    int max);
void		 worker_submit(struct work *, int fault_cpu, int page_node,
		    uint64_t hash);
void		 worker_push(struct worker *, struct work *);
size_t		 worker_take(struct worker *, int (*match)(struct work *,
		    void *), void *arg, struct work **out, size_t max);
int		 worker_assist(struct clear_job *, struct region *, int node,
		    struct worker *self, int awake_only,
		    void (*run)(struct worker *, struct work *));
void		 worker_defer(struct work *, uint64_t delay_ns);
void		 worker_cancel(struct region *, struct workq *out);
int		 worker_spinning(const struct worker *self);
int		 worker_poll_add(int (*read)(void *, struct worker *), void *arg,
		    int fd, int node);
void		 worker_poll_remove(void *arg);
int		 worker_id(const struct worker *);
void		 worker_push_polled(struct worker *, struct work *);
void		 worker_ioctl_enter(uintptr_t mm, uint64_t region, int pid,
		    uint32_t owner);
void		 worker_ioctl_leave(void);
void		 worker_bg_slot(const char *name);
int		 worker_mm_slow(uintptr_t mm);

#endif /* HPZD_WORKER_H */
