/*
 * prep-thread.h - the prep thread's jobs (prep-thread.c).
 */
#ifndef HPZD_PREP_THREAD_H
#define HPZD_PREP_THREAD_H

#include <stdatomic.h>
#include <sys/queue.h>

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

int		 prep_start(void);
void		 prep_stop(void);
int		 prep_submit(struct prep_job *, void (*work)(struct prep_job *),
		    void (*done)(struct prep_job *), void *arg);
void		 prep_cancel(struct prep_job *);
int		 prep_job(struct prep_job *, void (*work)(struct prep_job *),
		    void (*done)(struct prep_job *), void *arg);
int		 prep_cancelled(const struct prep_job *);
void		*prep_arg(const struct prep_job *);

#endif /* HPZD_PREP_THREAD_H */
