/*
 * prep.h - a request's work that grows with the pages, off the loop (prep.c).
 */
#ifndef HPZD_PREP_H
#define HPZD_PREP_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

struct region;

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

/* What is left to do before a new region serves (prep.c). */
enum prep_kind {
	PREP_NONE,		/* nothing: a fresh state, not HPZ_DISCARD */
	PREP_FILL,		/* a fresh HPZ_DISCARD state: all garbage */
	PREP_ADOPT,		/* an adopted state: resolve busy, count */
};

int		 prep_start(void);
void		 prep_stop(void);
int		 prep_region(struct region *, void (*ready)(struct region *));
void		 prep_region_cancel(struct region *);
int		 prep_job(struct prep_job *, void (*work)(struct prep_job *),
		    void (*done)(struct prep_job *), void *arg);
int		 prep_cancelled(const struct prep_job *);
void		*prep_arg(const struct prep_job *);
int		 prep_state_extent(int sfd, uint64_t npages, uint64_t from,
		    uint64_t *lo, uint64_t *hi);

#endif /* HPZD_PREP_H */
