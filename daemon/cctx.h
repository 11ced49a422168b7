/*
 * cctx.h - client contexts: where the system calls on what one client
 * owns (its files, its page state, its address space through its uffd,
 * its /proc entry, the fds it passes) are made, so that a client holding
 * a kernel lock of its own makes only its own requests wait.
 *
 * A context is a thread of one client process (pid), made on demand and
 * let go when nothing holds it and nothing is queued.  Jobs run on it in
 * the order they came; each job's done callback runs on the main thread,
 * in the same order.  A job that runs longer than CCTX_STUCK_MS makes its
 * context stuck: said once in the log, shown by hpzctl status, and a uid
 * with [limits] stuck_contexts stuck contexts is refused new work.
 *
 * Depends on: the event loop (hpzd_base), log.c, stats.  Nothing above.
 */
#ifndef HPZD_CCTX_H
#define HPZD_CCTX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

/* A job longer than this (ms) makes its context stuck. */
#define CCTX_STUCK_MS	1000

struct cctx;

struct cctx_job {
	TAILQ_ENTRY(cctx_job)	 entry;
	void			(*work)(struct cctx_job *);
	void			(*done)(struct cctx_job *);
	void			*arg;
	const char		*what;		/* for the stuck report */
	struct cctx		*ctx;
	atomic_int		 cancel;
	int			 error;		/* refused: it never ran */
	char			 why[160];	/* the refusal, for the client */
};

int		 cctx_start(void);
/* cctx_stop waits this long (ms) for the contexts' queued work. */
#define CCTX_STOP_MS		2000
void		 cctx_stop(int wait_ms);
void		 cctx_limits(int stuck_max, int uid_max, int threads_max);
int		 cctx_threads_limit(void);
int		 cctx_threads_derived(void);
struct cctx	*cctx_get(pid_t pid, uid_t uid);
void		 cctx_hold(struct cctx *);
void		 cctx_put(struct cctx *);
pid_t		 cctx_pid(const struct cctx *);
void		 cctx_mapped_add(struct cctx *, int64_t);
uint64_t	 cctx_mapped(uid_t, int all);
void		 cctx_thread_figures(uint64_t *, uint64_t *, uint64_t *);
int		 cctx_submit(struct cctx *, struct cctx_job *,
		    void (*)(struct cctx_job *), void (*)(struct cctx_job *),
		    void *, const char *);
int		 cctx_submit_request(struct cctx *, struct cctx_job *,
		    void (*)(struct cctx_job *), void (*)(struct cctx_job *),
		    void *, const char *);
void		 cctx_cancel(struct cctx_job *);
int		 cctx_cancelled(const struct cctx_job *);
int		 cctx_job_error(const struct cctx_job *);
const char	*cctx_job_why(const struct cctx_job *);
int		 cctx_busy(const struct cctx *);
int		 cctx_pending(const struct cctx *);
int		 cctx_uid_refused(uid_t, char *, size_t);
int		 cctx_may_connect(pid_t, uid_t, char *, size_t);

/* What hpzctl status shows (main thread). */
struct cctx_report {
	uint64_t	contexts;	/* with a thread now */
	uint64_t	busy;		/* with work (or a thread) now */
	uint64_t	stuck;		/* of them, stuck */
	uint64_t	longest_ms;	/* the longest stuck job so far */
	int32_t		longest_pid;
	uid_t		longest_uid;
	char		longest_what[64];
};
void		 cctx_report(struct cctx_report *);

#endif /* HPZD_CCTX_H */
