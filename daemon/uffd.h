/*
 * uffd.h - a region's userfaultfd: its reader, its events and children,
 * and the ioctls fault.c maps and wakes with (uffd.c).
 */
#ifndef HPZD_UFFD_H
#define HPZD_UFFD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

struct event;
struct region;
struct work;
struct worker;

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
TAILQ_HEAD(uforks, ufork);

/* A child process of the client, watched for its exit (a pidfd). */
struct uffd_kid {
	pid_t			 pid;
	int			 pidfd;
	struct event		*ev;
	struct region		*region;
};

#define REGION_MOVED_MAX	4
/* [limits] forks: a region's children served at once, by default. */
#define UFFD_FORKS_DEFAULT	64
/* Sweeps again after a fork while a child is alive and not watched. */
#define UFFD_RESWEEP		3
/* Then one every this long (ms), as long as one still is. */
#define UFFD_RESWEEP_MS		250
/* Children's uffds a region out of memory keeps until its release. */
#define UFFD_LOST_FORKS		4

/*
 * The uffd reader's part of a region (struct region's events): evlock is
 * held reading any of its uffds, and guards the children's list.
 */
struct uffd_slice {
	pthread_mutex_t		 evlock;	/* held reading its uffds */
	struct uforks		 forks;		/* children's uffds */
	uint64_t		 moved[REGION_MOVED_MAX][2]; /* pieces moved
						   away: addr, len */
	int			 nmoved;
	int			 unregistered;	/* its range, at teardown */
	int			 lost[UFFD_LOST_FORKS]; /* children's uffds
						   we had no memory for */
	int			 nlost;
	atomic_int		 sweep;		/* a child came: look for
						   dead ones (uffd_sweep) */
	int			 sweeping;	/* a sweep queued; main */
	atomic_int		 resweep;	/* sweeps left to find a
						   child not yet listed */
	struct uffd_kid		*kids;		/* the client's children
						   watched for exit; main */
	int			 nkids;
	struct event		*later;		/* a look again while a child
						   lives unwatched; main */
};

void		 uffd_read_cb(int fd, short events, void *arg);
int		 uffd_read(struct region *, struct worker *self);
void		 uffd_requeue(struct work *);
void		 uffd_poll_start(struct region *);
void		 uffd_poll_stop(struct region *);
int		 uffd_premap(struct region *, uint64_t addr, uint64_t len,
		    uint64_t *done);
void		 uffd_region_gone(struct region *, const char *why);
void		 uffd_region_refused(struct region *, const char *why);
void		 uffd_tampered(struct region *, int n);
void		 uffd_tend(struct region *);
void		 uffd_region_init(struct region *);
void		 uffd_limits(int forks);
int		 uffd_forks_limit(void);
void		 uffd_forks_release(struct region *);
void		 uffd_forks_unwatch(struct region *);
int		 uffd_wake(struct region *, uint64_t addr, uint64_t len);
int		 uffd_unregister(struct region *);
int		 uffd_thread_cpu(pid_t pid, uint32_t tid);
void		 uffd_hooks(void (*run)(struct worker *, struct work *),
		    void (*released)(struct region *));
/* For fault.c: the uffd of a region or child, and its ioctls. */
uint64_t	 uffd_base(const struct region *, const struct ufork *);
uintptr_t	 uffd_mm(const struct region *, const struct ufork *);
int		 uffd_fd(const struct region *, const struct ufork *);
int		 uffd_map(struct worker *, struct region *, struct ufork *,
		    uint64_t addr, uint64_t len, int tries, uint64_t *done);
void		 uffd_work_free(struct work *);

#endif /* HPZD_UFFD_H */
