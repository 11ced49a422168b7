/*
 * control.c - a client's requests: validate and dispatch each message, and
 * the flows behind them (register with its checks on the client's
 * context, unregister, reset, status, policy, scrub) and their replies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/magic.h>

#include "hpz.h"
#include "hpz-protocol.h"

#include "cctx.h"
#include "control-client.h"
#include "control-limits.h"
#include "control-pool.h"
#include "control.h"
#include "fdstore.h"
#include "intercept.h"
#include "log.h"
#include "prep.h"
#include "reap.h"
#include "region-check.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "status.h"

/* Send a reply; a client that cannot take it is dropped by the caller. */
static int
control_reply(struct client *c, uint32_t seq, int error, uint64_t id,
    const char *text)
{
	return (control_send_reply(c->fd, seq, error, id, text));
}

/* Say no to a request, in the log and to the client. */
static int
control_refuse(struct client *c, uint32_t seq, int error, const char *what,
    const char *why)
{
	atomic_fetch_add(&stats.requests_rejected, 1);
	log_warnx("client %llu (pid %d uid %u): %s refused: %s",
	    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid, what,
	    why);
	return (control_reply(c, seq, error, 0, why));
}

/* What a register's reply says (enum control_answer). */
static const char *const control_answer_text[] = {
	[CONTROL_REGISTERED] = "registered",
	[CONTROL_REGISTERED_AGAIN] = "registered again",
};

static void
control_region_answer(struct client *c, uint32_t seq, uint64_t id,
    enum control_answer answer)
{
	if (control_reply(c, seq, 0, id, control_answer_text[answer]) == -1)
		c->broken = 1;
	control_resume(c);
}

/* The switch control_region_ready waited for is done: the answer. */
static void
control_region_switched(struct region *r)
{
	struct client	*c = control_find(r->reply.answer_cid);

	if (c != NULL)
		control_region_answer(c, r->reply.answer_seq, r->id,
		    (enum control_answer)r->reply.answer);
}

/*
 * A region is ready to serve (prep.c, main thread; at once for one that
 * needed nothing): start it and send the reply its register waits for.
 * A reply that cannot be sent marks the client broken: it is dropped by
 * the caller (inline) or by its next read.
 */
static void
control_region_armed(struct region *r, int error, void *arg)
{
	(void)arg;
	if (error == -ECANCELED)
		return;		/* it went meanwhile: its teardown frees it */
	r->arm_failed = error != 0;
	control_region_ready(r);
}

void
control_region_ready(struct region *r)
{
	struct client	*c = r->reply.waiter, *owner = r->client;
	uint32_t	 seq = r->reply.waiter_seq;
	enum control_answer answer =
	    (enum control_answer)r->reply.waiter_answer;
	uint64_t	 id = r->id;
	int		 armfail;

	/*
	 * Garbage: its faults must be ours before it is served, whatever
	 * mode a dead server left the range in (the fd store keeps the uffd
	 * and its registration).  The registration takes the client's
	 * mmap_lock: it is made on the client's context, and we come back.
	 */
	if (r->garbage_found > 0 && !r->armed) {
		r->armed = 1;
		atomic_store(&r->intercepting, 0);
		if (intercept_arm(r, control_region_armed, NULL) == 1)
			return;
	}
	r->reply.waiter = NULL;
	if ((armfail = r->arm_failed) || region_start(r) == -1) {
		log_warnx("region %llu: %s: let go", (unsigned long long)id,
		    armfail ? "cannot have its faults (UFFDIO_REGISTER)" :
		    "cannot watch its uffd");
		region_destroy(r);
		if (c == NULL) {
			control_orphan_check(owner);
			return;
		}
		atomic_fetch_add(&stats.requests_rejected, 1);
		if (control_reply(c, seq, armfail ? -EFAULT : -ENOMEM, 0,
		    armfail ? "cannot trap the region's faults on its uffd "
		    "(UFFDIO_REGISTER failed)" : "cannot watch the uffd") == -1)
			c->broken = 1;
		control_resume(c);
		return;
	}
	if (r->recovered > 0)
		log_info("region %llu: %llu pages a dead server left busy were "
		    "resolved", (unsigned long long)id,
		    (unsigned long long)r->recovered);
	if (c == NULL) {
		log_info("region %llu of pid %d taken back from systemd's fd "
		    "store: 0x%llx +%llu MiB, %llu garbage pages, waiters "
		    "woken", (unsigned long long)id, (int)r->pid,
		    (unsigned long long)region_addr(r),
		    (unsigned long long)(r->len >> 20),
		    (unsigned long long)r->garbage_found);
		return;
	}
	if (fdstore_enabled() && !r->stored) {
		r->pidfd = fdstore_pidfd(c->pid);
		fdstore_remember(r);
	}
	if (answer == CONTROL_REGISTERED) {
		atomic_fetch_add(&stats.registers, 1);
		log_info("client %llu (pid %d): region %llu registered: 0x%llx "
		    "+%llu MiB, %llu KiB pages, %s%s",
		    (unsigned long long)c->id, (int)c->pid,
		    (unsigned long long)id, (unsigned long long)region_addr(r),
		    (unsigned long long)(r->len >> 20),
		    (unsigned long long)(r->page_size >> 10),
		    r->fs_magic == HUGETLBFS_MAGIC ? "hugetlbfs" : "shmem",
		    r->adopted ? ", state adopted" :
		    (r->flags & HPZ_DISCARD) ? ", discard" : "");
	} else
		log_info("client %llu (pid %d): region %llu is its again",
		    (unsigned long long)c->id, (int)c->pid,
		    (unsigned long long)id);
	if (r->switching) {
		/*
		 * Its faults are on their way to the kernel (no garbage):
		 * the answer waits for that, so that the client's first
		 * touches are the kernel's, as without us.
		 */
		r->reply.answer_cid = c->id;
		r->reply.answer_seq = seq;
		r->reply.answer = answer;
		r->switched_cb = control_region_switched;
		control_pause(c);
		return;
	}
	control_region_answer(c, seq, id, answer);
}

/*
 * Hand the reply of a register to control_region_ready, once the region
 * is ready: now, or after prep.c (the client is not read meanwhile, so
 * its replies stay in order).  -1 if the client is to be dropped.
 */
static int
control_await(struct client *c, struct region *r, uint32_t seq,
    enum control_answer answer)
{
	if (r->started) {
		log_info("client %llu (pid %d): region %llu is its again",
		    (unsigned long long)c->id, (int)c->pid,
		    (unsigned long long)r->id);
		return (control_reply(c, seq, 0, r->id,
		    control_answer_text[answer]));
	}
	r->reply.waiter = c;
	r->reply.waiter_seq = seq;
	r->reply.waiter_answer = answer;
	/* Prepared, its faults being trapped: control_region_armed wakes us. */
	if (r->prep != NULL || r->arming) {
		control_pause(c);	/* already preparing: it wakes us */
		return (0);
	}
	if (prep_region(r, control_region_ready) == 1)
		control_pause(c);
	return (c->broken ? -1 : 0);
}

/*
 * A register's checks and set-up, on the client's context: every call on
 * what it passed (its files, its memfd, its /proc maps) may wait on a
 * lock the client holds, even the fstat that tells whether its page state
 * is a region we hold already (a FUSE file's getattr waits on its
 * server).  Two jobs: that fstat, then (a new region) region_probe.  The
 * client is not read meanwhile, so its replies stay in order; the loop
 * serves everyone else.
 */
struct control_probe {
	struct cctx_job			 job;
	uint64_t			 cid;
	uint32_t			 seq;
	pid_t				 pid;
	uid_t				 uid;
	int				 phase;	/* 0: fstat, 1: probe */
	struct hpz_msg_register		 m;
	int				 fds[3];
	dev_t				 sdev;
	ino_t				 sino;
	struct region			*r;
	int				 error;
	char				 why[HPZ_REPLY_TEXT];
};

static void
control_probe_work(struct cctx_job *j)
{
	struct control_probe	*p = j->arg;
	struct stat		 st;
	int			 i;

	if (p->phase == 0) {
		/* Which state memfd is it?  Nothing else is decided here. */
		if (fstat(p->fds[2], &st) == 0) {
			p->sdev = st.st_dev;
			p->sino = st.st_ino;
		} else
			p->sdev = p->sino = 0;
		return;
	}
	p->error = region_probe(p->pid, &p->m, p->fds[0], p->fds[1],
	    p->fds[2], &p->r, p->why, sizeof(p->why));
	if (p->error != 0)
		for (i = 0; i < 3; i++)
			reap_close_here(p->fds[i]);	/* here: it may block */
}

static void	control_probe_done(struct cctx_job *);

/* Queue p's next phase on x (a refusal comes to control_probe_done). */
static void
control_probe_submit(struct cctx *x, struct control_probe *p)
{
	(void)cctx_submit_request(x, &p->job, control_probe_work,
	    control_probe_done, p, p->phase == 0 ? "a register's fstat of "
	    "its page state fd" : "a register's checks (fstat, its /proc "
	    "maps, lseek SEEK_DATA on its page state)");
}

/* Close what p still holds on x (main thread): each on the context. */
static void
control_probe_close(struct cctx *x, struct control_probe *p)
{
	int	i;

	for (i = 0; i < 3; i++)
		if (p->fds[i] >= 0) {
			control_close_on_ctx(x, p->fds[i], "close of a "
			    "descriptor it passed");
			p->fds[i] = -1;
		}
}

/*
 * The fstat is back (main thread): a client back after our restart brings
 * the state memfd of a region we already took back from the fd store, and
 * is handed that region (counted against the limits already, with the
 * orphan that held it); else the checks of a new region, then its probe.
 * 1: the probe is queued (p is the job's); 0: answered here, read the
 * client again; 2: the answer comes later and resumes it; -1: drop it.
 */
static int
control_probe_found(struct client *c, struct cctx *x, struct control_probe *p)
{
	struct region	*r;
	char		 why[HPZ_REPLY_TEXT];
	uint64_t	 npages;
	int		 error, started;

	if ((p->sdev != 0 || p->sino != 0) &&
	    (r = region_find_state_id(p->sdev, p->sino)) != NULL) {
		control_probe_close(x, p);
		if (r->pid != c->pid || r->client->uid != c->uid ||
		    region_addr(r) != p->m.addr ||
		    r->len != p->m.len || r->reply.waiter != NULL)
			return (control_refuse(c, p->seq, -EBUSY,
			    "register", "that page state belongs to another "
			    "region") == -1 ? -1 : 0);
		/*
		 * A reset in flight answers the connection that sent it, which
		 * may be gone by the time it completes: the region moves only
		 * once its resets are answered.  (The arm of a region taken
		 * back with garbage, before it serves, answers whoever waits
		 * then: r->reply.waiter, set by control_await.)
		 */
		if (r->client != c && (!TAILQ_EMPTY(&r->resets) ||
		    (r->arming && r->started)))
			return (control_refuse(c, p->seq, -EBUSY,
			    "register", "that region has a reset in progress "
			    "on another connection: register again once it "
			    "is answered") == -1 ? -1 : 0);
		if (r->client != c) {
			struct client	*from = r->client;

			region_move(r, c);
			control_orphan_check(from);
		}
		/* Answered now (0: read it again) or once it is ready (2). */
		started = r->started;
		if (control_await(c, r, p->seq, CONTROL_REGISTERED_AGAIN) == -1)
			return (-1);
		return (started ? 0 : 2);
	}
	npages = p->m.len / p->m.page_size;
	if ((error = region_check_pages(npages, p->m.page_size, why,
	    sizeof(why))) != 0 || (error = control_check_quota(c,
	    npages, why, sizeof(why))) != 0 ||
	    (error = cctx_uid_refused(c->uid, why, sizeof(why))) != 0 ||
	    (error = control_map_take(c, x, p->m.len, why,
	    sizeof(why))) != 0) {
		control_probe_close(x, p);
		return (control_refuse(c, p->seq, error, "register", why) ==
		    -1 ? -1 : 0);
	}
	p->phase = 1;
	control_probe_submit(x, p);
	return (1);
}

static void
control_probe_done(struct cctx_job *j)
{
	struct control_probe	*p = j->arg;
	struct client		*c = control_find(p->cid);
	struct cctx		*x = j->ctx;
	int			 error = p->error, rc;

	if (cctx_job_error(j) != 0) {
		/* Refused before it ran (a limit, no thread): say why. */
		if (p->phase == 1) {
			p->error = error = cctx_job_error(j);
			control_map_give(x, p->m.len);	/* never mapped */
		}
		snprintf(p->why, sizeof(p->why), "%s", cctx_job_why(j));
		control_probe_close(x, p);
		if (c == NULL || c->broken) {
			if (c != NULL)
				control_resume(c);
			goto out;
		}
		if (control_refuse(c, p->seq, cctx_job_error(j), "register",
		    p->why) == -1)
			c->broken = 1;
		control_resume(c);
		goto out;
	}
	if (p->phase == 0) {
		if (c == NULL || c->broken) {
			control_probe_close(x, p);
			if (c != NULL)
				control_resume(c);	/* its read drops it */
			goto out;
		}
		rc = control_probe_found(c, x, p);
		if (rc == 1)
			return;		/* the probe's now: x is held */
		if (rc == -1)
			c->broken = 1;
		if (rc != 2)
			control_resume(c);
		goto out;
	}
	/* A failed probe has let go of its mapping already. */
	if (error != 0)
		control_map_give(x, p->m.len);
	if (c == NULL || c->broken) {
		if (error == 0)
			region_discard(x, p->r);
		if (c != NULL)
			control_resume(c);	/* its read drops it */
		goto out;
	}
	if (error == 0 && (error = control_check_quota(c, p->r->npages,
	    p->why, sizeof(p->why))) == 0)
		error = region_attach(c, p->r, p->why, sizeof(p->why));
	if (error != 0) {
		if (p->error == 0)
			region_discard(x, p->r);
		if (control_refuse(c, p->seq, error, "register", p->why) == -1)
			c->broken = 1;
		control_resume(c);
		goto out;
	}
	/* Still paused: the answer resumes it, now or after prep. */
	if (control_await(c, p->r, p->seq, CONTROL_REGISTERED) == -1) {
		c->broken = 1;
		control_resume(c);
	}
out:
	cctx_put(x);
	free(p);
}

/*
 * A register: nothing of what it passed is touched here (the loop); the
 * client is paused until its answer, made after its context's jobs.
 */
static int
control_register(struct client *c, struct hpz_msg *m)
{
	struct control_probe	*p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		proto_close_fds(m);
		return (control_refuse(c, m->u.hdr.seq, -ENOMEM, "register",
		    "out of memory"));
	}
	p->cid = c->id;
	p->seq = m->u.hdr.seq;
	p->pid = c->pid;
	p->uid = c->uid;
	p->m = m->u.reg;
	memcpy(p->fds, m->fds, sizeof(p->fds));
	m->nfds = 0;	/* the job's now */
	if (c->ctx != NULL)
		cctx_hold(c->ctx);
	control_pause(c);
	control_probe_submit(c->ctx, p);
	return (c->broken ? -1 : 0);
}

/* An unregister's answer, once the region's teardown is done. */
struct control_unreg {
	uint64_t	cid;
	uint32_t	seq;
	uint64_t	id;
};

static void
control_unregister_done(void *arg)
{
	struct control_unreg	*u = arg;
	struct client		*c = control_find(u->cid);

	if (c != NULL) {
		atomic_fetch_add(&stats.unregisters, 1);
		log_info("client %llu: region %llu unregistered",
		    (unsigned long long)c->id, (unsigned long long)u->id);
		if (control_reply(c, u->seq, 0, u->id, "unregistered") == -1)
			c->broken = 1;
		control_resume(c);
	}
	free(u);
}

static int
control_unregister(struct client *c, struct hpz_msg *m)
{
	struct control_unreg	*u;
	struct region		*r;
	char			 why[HPZ_REPLY_TEXT];
	int			 error;

	r = region_find(c, m->u.range.addr, m->u.range.len, 1);
	if (r == NULL)
		return (control_refuse(c, m->u.hdr.seq, -ENXIO, "unregister",
		    "no region registered by this connection at that range"));
	if ((error = cctx_uid_refused(c->uid, why, sizeof(why))) != 0)
		return (control_refuse(c, m->u.hdr.seq, error, "unregister",
		    why));
	if ((u = calloc(1, sizeof(*u))) == NULL)
		return (control_refuse(c, m->u.hdr.seq, -ENOMEM, "unregister",
		    "out of memory"));
	u->cid = c->id;
	u->seq = m->u.hdr.seq;
	u->id = r->id;
	/*
	 * The answer waits for the teardown (the range is the kernel's once
	 * it is sent), on the client's context: the client is not read
	 * meanwhile, everyone else is.
	 */
	control_pause(c);
	region_destroy_then(r, control_unregister_done, u);
	return (c->broken ? -1 : 0);
}

/* A reset's answer, held until no thread of ours holds a page of it. */
struct control_reset_reply {
	struct client	*c;
	uint32_t	 seq;
	uint64_t	 id;
};

/*
 * The held answer of a reset (from the loop).  A client that cannot take
 * it is dropped when its socket says so; a region gone first (the client
 * dropped, or the region released) means no answer.
 */
static void
control_reset_done(void *arg, int error)
{
	struct control_reset_reply	*p = arg;

	if (error == 0) {
		atomic_fetch_add(&stats.resets, 1);
		if (control_reply(p->c, p->seq, 0, p->id, "reset") == -1)
			log_debug("client %llu: reset answer not sent",
			    (unsigned long long)p->c->id);
	}
	free(p);
}

/*
 * Go on with a reset whose region's faults are ours (main thread): mark,
 * then answer now or once the pages our threads hold are let go.
 */
static int
control_reset_go(struct client *c, struct region *r,
    struct control_reset_reply *p, uint64_t addr, uint64_t len)
{
	uint32_t	seq = p->seq;
	int		error;

	log_debug("client %llu: region %llu reset 0x%llx +%llu",
	    (unsigned long long)c->id, (unsigned long long)r->id,
	    (unsigned long long)addr, (unsigned long long)len);
	error = region_reset(r, addr, len, control_reset_done, p);
	if (error == 1)
		return (0);	/* answered by control_reset_done */
	free(p);
	if (error == -EINVAL)
		return (control_refuse(c, seq, error, "reset",
		    "range is not aligned to the region's pages"));
	if (error == -ENOMEM)
		return (control_refuse(c, seq, error, "reset",
		    "the daemon is out of memory: nothing was reset"));
	if (error != 0)
		return (control_refuse(c, seq, error, "reset",
		    "cannot trap the range's faults again (UFFDIO_REGISTER "
		    "failed: is it still mapped?): nothing was reset"));
	atomic_fetch_add(&stats.resets, 1);
	return (control_reply(c, seq, 0, r->id, "reset"));
}

/* A reset waiting for its region's faults to be trapped again. */
struct control_reset_arm {
	struct control_reset_reply	*p;
	uint64_t			 cid;
	uint64_t			 addr;
	uint64_t			 len;
};

static void
control_reset_armed(struct region *r, int error, void *arg)
{
	struct control_reset_arm	*a = arg;
	struct client			*c = control_find(a->cid);
	int				 rc;

	if (c == NULL || r->client != c) {
		free(a->p);
		free(a);
		return;
	}
	if (error != 0) {
		rc = control_refuse(c, a->p->seq, error == -ECANCELED ?
		    -ENXIO : -EFAULT, "reset", error == -ECANCELED ?
		    "the region went before its faults were trapped again" :
		    "cannot trap the range's faults again (UFFDIO_REGISTER "
		    "failed: is it still mapped?): nothing was reset");
		free(a->p);
	} else
		rc = control_reset_go(c, r, a->p, a->addr, a->len);
	free(a);
	if (rc == -1)
		c->broken = 1;
	control_resume(c);
}

static int
control_reset(struct client *c, struct hpz_msg *m)
{
	struct control_reset_reply	*p;
	struct control_reset_arm	*a;
	struct region			*r;
	char				 why[HPZ_REPLY_TEXT];
	int				 error;

	r = region_find(c, m->u.range.addr, m->u.range.len, 0);
	if (r == NULL)
		return (control_refuse(c, m->u.hdr.seq, -ENXIO, "reset",
		    "range is not inside a region registered by this "
		    "connection"));
	if (r->arming)
		return (control_refuse(c, m->u.hdr.seq, -EBUSY, "reset",
		    "another reset of this region waits for its faults to be "
		    "trapped again (from another connection)"));
	if ((error = cctx_uid_refused(c->uid, why, sizeof(why))) != 0)
		return (control_refuse(c, m->u.hdr.seq, error, "reset", why));
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (a = calloc(1, sizeof(*a))) == NULL) {
		free(p);
		return (control_refuse(c, m->u.hdr.seq, -ENOMEM, "reset",
		    "out of memory"));
	}
	p->c = c;
	p->seq = m->u.hdr.seq;
	p->id = r->id;
	a->p = p;
	a->cid = c->id;
	a->addr = m->u.range.addr;
	a->len = m->u.range.len;
	/*
	 * Faults must come to us before anything is garbage: where they go to
	 * the kernel now, trapping them again is a UFFDIO_REGISTER on the
	 * client's memory map, made on its context while the client waits.
	 */
	control_pause(c);
	if (intercept_arm(r, control_reset_armed, a) == 1)
		return (c->broken ? -1 : 0);
	free(a);
	error = control_reset_go(c, r, p, m->u.range.addr, m->u.range.len);
	control_resume(c);
	return (error);
}

static int
control_status(struct client *c, struct hpz_msg *m)
{
	struct hpz_msg_status_reply	s;

	proto_init(&s, HPZ_MSG_STATUS_REPLY, sizeof(s), m->u.hdr.seq);
	status_fill(&s, control_nclients(), c->uid);
	control_fill_limits(&s, c->uid);
	if (proto_send(c->fd, &s, sizeof(s), NULL, 0) != sizeof(s))
		return (-1);
	return (0);
}

/* After a reset and the client's zap: start the background work. */
static int
control_scrub(struct client *c, struct hpz_msg *m)
{
	struct region	*r;

	r = region_find(c, m->u.range.addr, m->u.range.len, 0);
	if (r == NULL)
		return (control_refuse(c, m->u.hdr.seq, -ENXIO, "scrub",
		    "range is not inside a region registered by this "
		    "connection"));
	scrub_add(r, region_page_index(r, m->u.range.addr));
	return (control_reply(c, m->u.hdr.seq, 0, r->id, "scrubbing"));
}

static int
control_policy(struct client *c, struct hpz_msg *m)
{
	struct region	*r;

	r = region_find(c, m->u.policy.addr, m->u.policy.len, 1);
	if (r == NULL)
		return (control_refuse(c, m->u.hdr.seq, -ENXIO, "policy",
		    "no region registered by this connection at that range"));
	region_set_policy(r, m->u.policy.flags, m->u.policy.priority);
	log_debug("client %llu: region %llu policy 0x%x priority %d",
	    (unsigned long long)c->id, (unsigned long long)r->id,
	    m->u.policy.flags, m->u.policy.priority);
	return (control_reply(c, m->u.hdr.seq, 0, r->id, "policy set"));
}

static int
control_regions(struct client *c, struct hpz_msg *m)
{
	struct hpz_msg_regions_reply	rep;

	proto_init(&rep, HPZ_MSG_REGIONS_REPLY, sizeof(rep), m->u.hdr.seq);
	status_regions(&rep, m->u.regions.after_id, c->uid);
	if (proto_send(c->fd, &rep, sizeof(rep), NULL, 0) != sizeof(rep))
		return (-1);
	return (0);
}

/*
 * One received message.  A message that breaks the framing rules gets an
 * error reply and the client is dropped (-1); a request refused for what
 * it asks keeps the connection.
 */
int
control_message(struct client *c, struct hpz_msg *m)
{
	char	why[HPZ_REPLY_TEXT];
	int	error;
	uint32_t seq;

	error = proto_validate(m, why, sizeof(why));
	if (error == 0 && m->u.hdr.type >= HPZ_MSG_REPLY) {
		error = -EBADMSG;
		snprintf(why, sizeof(why), "%s is not a request",
		    proto_type_name(m->u.hdr.type));
	}
	if (error != 0) {
		proto_close_fds(m);
		seq = m->len >= sizeof(m->u.hdr) ? m->u.hdr.seq : 0;
		/*
		 * Well framed, bad fields; or our own fd table full as its
		 * fds came (not the client's doing: it may ask again).
		 */
		if (error == -EINVAL || error == -EMFILE)
			return (control_refuse(c, seq, error, "request", why));
		control_refuse(c, seq, error, "message", why);
		return (-1);
	}
	switch (m->u.hdr.type) {
	case HPZ_MSG_REGISTER:
		return (control_register(c, m));
	case HPZ_MSG_UNREGISTER:
		return (control_unregister(c, m));
	case HPZ_MSG_RESET:
		return (control_reset(c, m));
	case HPZ_MSG_STATUS:
		return (control_status(c, m));
	case HPZ_MSG_REGIONS:
		return (control_regions(c, m));
	case HPZ_MSG_POLICY:
		return (control_policy(c, m));
	case HPZ_MSG_SCRUB:
		return (control_scrub(c, m));
	case HPZ_MSG_POOL_TAKE:
		return (control_pool_take(c, m));
	case HPZ_MSG_POOL_STATUS:
		return (control_pool_status(c, m));
	case HPZ_MSG_RESERVE:
		return (control_pool_reserve(c, m));
	}
	fatalx("control_dispatch: validated type %u", m->u.hdr.type);
}
