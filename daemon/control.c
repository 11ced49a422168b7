/*
 * control.c - the listening socket and client sessions: accept, check the
 * peer, read and validate requests, dispatch, reply.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/magic.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "hpz.h"
#include "hpz-protocol.h"
#include "hpz-state.h"

#include "bucket.h"
#include "cctx.h"
#include "conf.h"
#include "control.h"
#include "fdstore.h"
#include "globals.h"
#include "intercept.h"
#include "log.h"
#include "pool.h"
#include "prep.h"
#include "reap.h"
#include "region-check.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "status.h"

/* Requests handled per wakeup before other clients get a turn. */
#define CONTROL_BATCH	32
/*
 * A client is not read while its context has this many calls queued
 * (closes of the fds its messages bring, mostly: one stuck on a FUSE
 * server of its own holds the rest, each an fd of ours), and read again
 * once it is down to half.  One message brings at most 253 more.
 */
#define CONTROL_BACKLOG	256

struct clients		 control_clients = TAILQ_HEAD_INITIALIZER(control_clients);
static struct event	*control_ev;
/* [limits] in force; 0: unlimited (region_pages lives in region.c). */
static int		 control_uid_clients;
static int		 control_uid_regions;
static uint64_t		 control_uid_bytes;
static uint64_t		 control_uid_state_bytes;
static int		 control_fd = -1;
static uint64_t		 control_next_id = 1;
static size_t		 control_count;

static void	control_drop(struct client *, const char *);
static int	control_probe(struct client *, struct hpz_msg *);

size_t
control_nclients(void)
{
	return (control_count);
}

/* The limits, from the settings (0: unlimited). */
void
control_limits(const struct conf *c)
{
	control_uid_clients = c->uid_clients;
	control_uid_regions = c->uid_regions;
	control_uid_bytes = c->uid_bytes;
	control_uid_state_bytes = c->uid_state_bytes;
	region_limits(c->region_pages);
	cctx_limits(c->uid_stuck_contexts);
}

/*
 * SIGHUP's settings (main thread): each module takes its own, and here
 * they reach what the control plane holds: every client's background
 * budget, every region's garbage when scrubbing comes back on, every
 * region's interception under a new [policy].
 */
void
control_reload(const struct conf *c)
{
	struct client	*cl;
	struct region	*r;
	int		 scrub_on;

	scrub_on = scrub_configure(c);
	TAILQ_FOREACH(cl, &control_clients, entry)
		if (cl->budget != NULL)
			bucket_set(cl->budget, c->client_gbs);
	/* Garbage left while scrubbing was off: go over it now. */
	if (scrub_on)
		TAILQ_FOREACH(r, &region_all, all)
			scrub_add(r, 0);
	control_limits(c);
	pool_configure(c);
	intercept_configure(c);
	TAILQ_FOREACH(r, &region_all, all)
		intercept_reconfigure(r);
}

/*
 * What one uid holds: connections, regions, bytes registered, bytes of
 * page state (each client keeps its sums, region.c).  Regions taken back
 * from the fd store count once, with the orphan that holds them until
 * their process registers them again.
 */
void
control_uid_usage(uid_t uid, int *clients, int *regions, uint64_t *bytes,
    uint64_t *state_bytes)
{
	struct client	*c;

	*clients = *regions = 0;
	*bytes = *state_bytes = 0;
	TAILQ_FOREACH(c, &control_clients, entry) {
		if (c->uid != uid)
			continue;
		if (!c->orphan)		/* not a connection */
			(*clients)++;
		*regions += (int)c->nregions;
		*bytes += c->bytes;
		*state_bytes += c->state_bytes;
	}
}

/* The limits in force and what uid holds, for a status reply. */
void
control_fill_limits(struct hpz_msg_status_reply *s, uid_t uid)
{
	uint64_t	bytes, sbytes;
	int		nc, nr;

	s->limit_uid_clients = (uint64_t)control_uid_clients;
	s->limit_uid_regions = (uint64_t)control_uid_regions;
	s->limit_uid_bytes = control_uid_bytes;
	s->limit_uid_state_bytes = control_uid_state_bytes;
	s->limit_region_pages = region_limit_pages();
	s->limit_conn_regions = HPZD_REGIONS_PER_CLIENT;
	control_uid_usage(uid, &nc, &nr, &bytes, &sbytes);
	s->uid_clients = (uint64_t)nc;
	s->uid_regions = (uint64_t)nr;
	s->uid_bytes = bytes;
	s->uid_state_bytes = sbytes;
}

/*
 * May uid register one more region of len bytes and npages pages?  0, or
 * -EDQUOT with the limit and its setting in why.
 */
static int
control_check_quota(struct client *c, uint64_t len, uint64_t npages,
    char *why, size_t whylen)
{
	uint64_t	bytes, sbytes, need = HPZ_STATE_SIZE(npages);
	int		nc, nr;

	control_uid_usage(c->uid, &nc, &nr, &bytes, &sbytes);
	if (control_uid_regions > 0 && nr >= control_uid_regions) {
		snprintf(why, whylen, "uid %u has %d regions, the most it may "
		    "have ([limits] regions in hpzerod.conf)",
		    (unsigned)c->uid, nr);
		return (-EDQUOT);
	}
	if (control_uid_bytes > 0 && (bytes > control_uid_bytes ||
	    len > control_uid_bytes - bytes)) {
		snprintf(why, whylen, "uid %u would have %llu bytes "
		    "registered, over the limit of %llu ([limits] bytes in "
		    "hpzerod.conf)",
		    (unsigned)c->uid, (unsigned long long)(bytes + len),
		    (unsigned long long)control_uid_bytes);
		return (-EDQUOT);
	}
	if (control_uid_state_bytes > 0 && (sbytes > control_uid_state_bytes ||
	    need > control_uid_state_bytes - sbytes)) {
		snprintf(why, whylen, "uid %u would have %llu bytes of page "
		    "state (a byte a page), over the limit of %llu "
		    "([limits] state_bytes in hpzerod.conf)", (unsigned)c->uid,
		    (unsigned long long)(sbytes + need),
		    (unsigned long long)control_uid_state_bytes);
		return (-EDQUOT);
	}
	return (0);
}

/* Create the socket directory and bind a fresh SOCK_SEQPACKET socket. */
static int
control_bind(const char *path)
{
	struct sockaddr_un	 sun;
	char			 dir[sizeof(sun.sun_path)];
	char			 tmp[sizeof(sun.sun_path)];
	int			 fd, probe;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_warnx("socket path too long: %s", path);
		return (-1);
	}
	strcpy(sun.sun_path, path);
	strcpy(dir, path);
	if (mkdir(dirname(dir), 0755) == -1 && errno != EEXIST) {
		log_warn("mkdir %s", dir);
		return (-1);
	}

	/* A live daemon on the path: refuse; a stale socket: replace. */
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe != -1 && connect(probe, (struct sockaddr *)&sun,
	    sizeof(sun)) == 0) {
		close(probe);
		log_warnx("%s: another hpzerod is already listening", path);
		return (-1);
	}
	if (probe != -1)
		close(probe);
	if (unlink(path) == -1 && errno != ENOENT) {
		log_warn("unlink %s", path);
		return (-1);
	}

	/*
	 * Bind and listen under a temporary name, then rename: the path
	 * appears only once it accepts, so no client sees ECONNREFUSED.
	 */
	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp)) {
		log_warnx("socket path too long: %s", path);
		return (-1);
	}
	unlink(tmp);
	strcpy(sun.sun_path, tmp);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		log_warn("socket");
		return (-1);
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		log_warn("bind %s", tmp);
		close(fd);
		return (-1);
	}
	if (chmod(tmp, 0660) == -1)
		log_warn("chmod %s", tmp);
	if (listen(fd, 128) == -1 || rename(tmp, path) == -1) {
		log_warn("listen on %s", path);
		unlink(tmp);
		close(fd);
		return (-1);
	}
	return (fd);
}

/*
 * The socket systemd passed us, or our own bound to path.  Descriptors
 * systemd kept for us in its fd store come along; they are taken back by
 * control_retake() once the daemon can serve.
 */
static int	  control_stored_n;
static int	 *control_stored_fds;
static char	**control_stored_names;

int
control_listen(const char *path, int *from_systemd)
{
	char	**names = NULL;
	uint64_t  id;
	int	  n, i, fd = -1;

	*from_systemd = 0;
	n = sd_listen_fds_with_names(1, &names);
	if (n < 0) {
		log_warnx("sd_listen_fds: %s", strerror(-n));
		return (-1);
	}
	if (n > 0 && (control_stored_fds = calloc((size_t)n,
	    sizeof(int))) == NULL) {
		log_warn("the %d fds systemd passed", n);
		return (-1);
	}
	for (i = 0; i < n; i++) {
		control_stored_fds[i] = SD_LISTEN_FDS_START + i;
		if (names != NULL && names[i] != NULL &&
		    fdstore_parse_name(names[i], &id) >= 0)
			continue;
		/* Not a stored region: it must be our one listening socket. */
		if (fd != -1) {
			log_warnx("systemd passed more than one socket");
			return (-1);
		}
		fd = SD_LISTEN_FDS_START + i;
		control_stored_fds[i] = -1;
	}
	control_stored_n = n;
	control_stored_names = names;
	if (fd != -1) {
		if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
			log_warnx("the socket systemd passed is not a listening "
			    "SOCK_SEQPACKET UNIX socket");
			return (-1);
		}
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1 ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC) == -1) {
			log_warn("fcntl");
			return (-1);
		}
		*from_systemd = 1;
		return (fd);
	}
	return (control_bind(path));
}

/*
 * A region systemd's fd store kept for process pid, registered again
 * without a socket: its orphan client holds it until the process
 * connects again or exits.
 */
static void
control_adopt(uint64_t id, pid_t pid, const struct hpz_msg_register *m,
    int *fds)
{
	struct client	*c;
	struct region	*r;
	char		 why[HPZ_REPLY_TEXT];
	int		 error;

	if ((c = control_orphan(pid)) == NULL) {
		fdstore_release(id, fds, "cannot watch its client");
		return;
	}
	error = region_create(c, m, fds[0], fds[1], fds[2], &r, why,
	    sizeof(why));
	if (error != 0) {
		control_orphan_check(c);
		fdstore_release(id, fds, why);
		return;
	}
	r->pidfd = fds[3];
	region_set_id(r, id);
	r->stored = 1;
	/* Busy pages and garbage are looked at after READY=1 (prep.c). */
	(void)prep_region(r, control_region_ready);
}

/* Take back the regions systemd's fd store kept (see fdstore.c). */
void
control_retake(void)
{
	int	i;

	for (i = 0; i < control_stored_n; i++)
		if (control_stored_fds[i] >= 0)
			fcntl(control_stored_fds[i], F_SETFD, FD_CLOEXEC);
	/* Ids the stored regions keep are never handed to new ones. */
	if (control_stored_n > 0)
		region_reserve_ids(fdstore_max_id(control_stored_n,
		    control_stored_fds, control_stored_names));
	fdstore_retake(control_stored_n, control_stored_fds,
	    control_stored_names, control_adopt);
	for (i = 0; control_stored_names != NULL && i < control_stored_n; i++)
		free(control_stored_names[i]);
	free(control_stored_names);
	free(control_stored_fds);
	control_stored_names = NULL;
	control_stored_fds = NULL;
	control_stored_n = 0;
}

/* A reply on socket fd: 0, or -1 if it could not be sent. */
static int
control_send_reply(int fd, uint32_t seq, int error, uint64_t id,
    const char *text)
{
	struct hpz_msg_reply	rep;

	proto_init(&rep, HPZ_MSG_REPLY, sizeof(rep), seq);
	rep.error = error;
	rep.region_id = id;
	snprintf(rep.text, sizeof(rep.text), "%s", text != NULL ? text : "");
	if (proto_send(fd, &rep, sizeof(rep), NULL, 0) != sizeof(rep))
		return (-1);
	return (0);
}

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

/* Stop reading a client until the reply it waits for is sent. */
static void
control_pause(struct client *c)
{
	if (c->paused || c->orphan)
		return;
	if (c->ev != NULL)
		event_del(c->ev);
	c->paused = 1;
}

/* Read it again (and at once: requests may be queued). */
static void
control_resume(struct client *c)
{
	if (!c->paused)
		return;
	c->paused = 0;
	c->backlog = 0;
	if (c->ev == NULL)
		return;		/* not watched (the fuzzer's sessions) */
	if (event_add(c->ev, NULL) == -1) {
		log_warnx("client %llu: cannot watch its socket",
		    (unsigned long long)c->id);
		c->broken = 1;
	}
	event_active(c->ev, EV_READ, 0);
}

static struct client	*control_find(uint64_t);

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
	struct client	*c = control_find(r->answer_cid);

	if (c != NULL)
		control_region_answer(c, r->answer_seq, r->id,
		    (enum control_answer)r->answer);
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
	struct client	*c = r->waiter, *owner = r->client;
	uint32_t	 seq = r->waiter_seq;
	enum control_answer answer = (enum control_answer)r->waiter_answer;
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
	r->waiter = NULL;
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
		r->answer_cid = c->id;
		r->answer_seq = seq;
		r->answer = answer;
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
	r->waiter = c;
	r->waiter_seq = seq;
	r->waiter_answer = answer;
	/* Prepared, its faults being trapped: control_region_armed wakes us. */
	if (r->prep != NULL || r->arming) {
		control_pause(c);	/* already preparing: it wakes us */
		return (0);
	}
	if (prep_region(r, control_region_ready) == 1)
		control_pause(c);
	return (c->broken ? -1 : 0);
}

static int
control_register(struct client *c, struct hpz_msg *m)
{
	struct region	*r;
	char		 why[HPZ_REPLY_TEXT];
	uint64_t	 npages;
	int		 error;

	/*
	 * A client back after our restart brings the state memfd of a region
	 * we already took back from the fd store: hand it that region.  It is
	 * counted against the limits already, with the orphan that held it.
	 */
	if ((r = region_find_state(m->fds[2])) != NULL) {
		if (r->pid != c->pid || r->client->uid != c->uid ||
		    region_addr(r) != m->u.reg.addr ||
		    r->len != m->u.reg.len || r->waiter != NULL) {
			proto_close_fds(m);
			return (control_refuse(c, m->u.hdr.seq, -EBUSY,
			    "register", "that page state belongs to another "
			    "region"));
		}
		proto_close_fds(m);
		/*
		 * A reset in flight answers the connection that sent it, which
		 * may be gone by the time it completes: the region moves only
		 * once its resets are answered.  (The arm of a region taken
		 * back with garbage, before it serves, answers whoever waits
		 * then: r->waiter, set by control_await.)
		 */
		if (r->client != c && (!TAILQ_EMPTY(&r->resets) ||
		    (r->arming && r->started)))
			return (control_refuse(c, m->u.hdr.seq, -EBUSY,
			    "register", "that region has a reset in progress "
			    "on another connection: register again once it "
			    "is answered"));
		if (r->client != c) {
			struct client	*from = r->client;

			region_move(r, c);
			control_orphan_check(from);
		}
		return (control_await(c, r, m->u.hdr.seq,
		    CONTROL_REGISTERED_AGAIN));
	}

	npages = m->u.reg.len / m->u.reg.page_size;
	if ((error = region_check_pages(npages, m->u.reg.page_size, why,
	    sizeof(why))) != 0 || (error = control_check_quota(c,
	    m->u.reg.len, npages, why, sizeof(why))) != 0 ||
	    (error = cctx_uid_refused(c->uid, why, sizeof(why))) != 0) {
		proto_close_fds(m);
		return (control_refuse(c, m->u.hdr.seq, error, "register",
		    why));
	}
	return (control_probe(c, m));
}

/*
 * A register's checks and set-up, on the client's context: every call on
 * what it passed (its files, its memfd, its /proc maps) may wait on a
 * lock the client holds.  The client is not read meanwhile, so its
 * replies stay in order; the loop serves everyone else.
 */
struct control_probe {
	struct cctx_job			 job;
	uint64_t			 cid;
	uint32_t			 seq;
	pid_t				 pid;
	struct hpz_msg_register		 m;
	int				 fds[3];
	struct region			*r;
	int				 error;
	char				 why[HPZ_REPLY_TEXT];
};

static void
control_probe_work(struct cctx_job *j)
{
	struct control_probe	*p = j->arg;
	int			 i;

	p->error = region_probe(p->pid, &p->m, p->fds[0], p->fds[1],
	    p->fds[2], &p->r, p->why, sizeof(p->why));
	if (p->error != 0)
		for (i = 0; i < 3; i++)
			reap_close_here(p->fds[i]);	/* here: it may block */
}

/* The client a job was for, if it is still connected. */
static struct client *
control_find(uint64_t id)
{
	struct client	*c;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->id == id)
			return (c);
	return (NULL);
}

/* The connected client of id, if any: no orphan (pool.c's waiters). */
static struct client *
control_connected(uint64_t id)
{
	struct client	*c;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->id == id && !c->orphan && c->fd >= 0)
			return (c);
	return (NULL);
}

static void
control_probe_done(struct cctx_job *j)
{
	struct control_probe	*p = j->arg;
	struct client		*c = control_find(p->cid);
	struct cctx		*x = j->ctx;
	int			 error = p->error;

	if (c == NULL || c->broken) {
		if (error == 0)
			region_discard(x, p->r);
		if (c != NULL)
			control_resume(c);	/* its read drops it */
		goto out;
	}
	if (error == 0 && (error = control_check_quota(c, p->r->len,
	    p->r->npages, p->why, sizeof(p->why))) == 0)
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

static int
control_probe(struct client *c, struct hpz_msg *m)
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
	p->m = m->u.reg;
	memcpy(p->fds, m->fds, sizeof(p->fds));
	m->nfds = 0;	/* the job's now */
	if (c->ctx != NULL)
		cctx_hold(c->ctx);
	control_pause(c);
	(void)cctx_submit(c->ctx, &p->job, control_probe_work,
	    control_probe_done, p, "a register's checks (fstat, its /proc "
	    "maps, lseek SEEK_DATA on its page state)");
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
	status_fill(&s, control_nclients());
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
	}
	fatalx("control_dispatch: validated type %u", m->u.hdr.type);
}

/*
 * Fds a message brings that we do not keep are closed on the sending
 * client's context: a close can wait (a file on the client's own FUSE
 * mount sends FLUSH to a server that may never answer), and on the
 * reaper's one thread that wait was every client's.
 */
static struct client	*control_current;

/* x's queue is down to half: its clients stopped for it are read again. */
static void
control_backlog_drained(struct cctx *x)
{
	struct client	*c;

	if (cctx_pending(x) > CONTROL_BACKLOG / 2)
		return;
	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->backlog && c->ctx == x) {
			log_info("client %llu (pid %d): the calls queued on "
			    "its context drained: read again",
			    (unsigned long long)c->id, (int)c->pid);
			control_resume(c);
		}
}

struct control_close {
	struct cctx_job	job;
	uint64_t	cid;
	int		fd;
};

static void
control_close_work(struct cctx_job *j)
{
	struct control_close	*k = j->arg;

	reap_close_here(k->fd);
}

static void
control_close_done(struct cctx_job *j)
{
	struct cctx	*x = j->ctx;

	reap_away_add(-1);
	free(j->arg);
	control_backlog_drained(x);
	cctx_put(x);
}

static void
control_close_fd(int fd)
{
	struct client		*c = control_current;
	struct control_close	*k;

	if (c == NULL || c->ctx == NULL ||
	    (k = calloc(1, sizeof(*k))) == NULL) {
		reap_close(fd);
		return;
	}
	k->fd = fd;
	k->cid = c->id;
	cctx_hold(c->ctx);
	reap_away_add(1);
	(void)cctx_submit(c->ctx, &k->job, control_close_work,
	    control_close_done, k, "close of a descriptor it passed");
}

static void
control_read(struct client *c, int fd)
{
	struct hpz_msg	 m;
	ssize_t		 n;
	int		 i;

	for (i = 0; i < CONTROL_BATCH && !c->paused; i++) {
		if (c->ctx != NULL &&
		    (n = cctx_pending(c->ctx)) >= CONTROL_BACKLOG) {
			log_warnx("client %llu (pid %d uid %u): %zd calls on "
			    "what it owns queued on its context (the first "
			    "stuck in the kernel?): not read until they drain",
			    (unsigned long long)c->id, (int)c->pid,
			    (unsigned)c->uid, n);
			control_pause(c);
			c->backlog = 1;
			return;
		}
		n = proto_recv(fd, &m);
		if (n == -1) {
			if (errno == EAGAIN)
				return;
			control_drop(c, strerror(errno));
			return;
		}
		if (n == 0) {
			control_drop(c, NULL);
			return;
		}
		if (control_message(c, &m) == -1) {
			proto_close_fds(&m);
			control_drop(c, "protocol error");
			return;
		}
	}
}

static void
control_read_cb(int fd, short events, void *arg)
{
	struct client	*c = arg;

	(void)events;
	if (c->broken) {
		control_drop(c, "it did not take a reply");
		return;
	}
	control_current = c;
	control_read(c, fd);
	control_current = NULL;
}

static void
control_conn_work(struct cctx_job *j)
{
	struct control_close	*k = j->arg;

	reap_close_conn_here(k->fd);
}

static void
control_close_conn(struct client *c)
{
	struct control_close	*k;

	if (c->ctx == NULL || (k = calloc(1, sizeof(*k))) == NULL) {
		reap_close_conn(c->fd);
		return;
	}
	k->fd = c->fd;
	k->cid = c->id;
	cctx_hold(c->ctx);
	reap_away_add(1);
	(void)cctx_submit(c->ctx, &k->job, control_conn_work,
	    control_close_done, k, "close of its connection (fds still in "
	    "flight in it)");
}

/* End a session and release everything it had. */
static void
control_drop(struct client *c, const char *why)
{
	struct region	*r;

	if (why != NULL) {
		atomic_fetch_add(&stats.clients_dropped, 1);
		log_warnx("client %llu (pid %d uid %u): dropped: %s",
		    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
		    why);
	} else
		log_debug("client %llu: gone", (unsigned long long)c->id);
	while ((r = TAILQ_FIRST(&c->regions)) != NULL) {
		prep_region_cancel(r);
		region_destroy(r);
	}
	TAILQ_REMOVE(&control_clients, c, entry);
	if (!c->orphan)
		control_count--;
	bucket_free(c->budget);
	if (c->ev != NULL)
		event_free(c->ev);
	/*
	 * Its queue may still hold fds in flight: their release may block,
	 * so it is drained and closed on its context (the reaper if none).
	 */
	if (c->fd >= 0)
		control_close_conn(c);
	if (c->pidfd >= 0)
		close(c->pidfd);
	cctx_put(c->ctx);
	free(c);
}

/* An orphan's process exited: its regions go. */
static void
control_orphan_cb(int fd, short events, void *arg)
{
	struct client	*c = arg;

	log_info("pid %d exited while its regions waited for it",
	    (int)c->pid);
	control_drop(c, NULL);
}

/*
 * The holder of regions taken back from the fd store for process pid,
 * until it connects again (and registers them again) or exits.
 */
struct client *
control_orphan(pid_t pid)
{
	struct client	*c;
	char		 path[64];
	struct stat	 st;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->orphan && c->pid == pid)
			return (c);
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) == -1 || (c = calloc(1, sizeof(*c))) == NULL)
		return (NULL);
	c->id = control_next_id++;
	c->fd = -1;
	c->orphan = 1;
	c->pid = pid;
	c->uid = st.st_uid;
	c->gid = st.st_gid;
	c->budget = bucket_new(scrub_budget_gbs(1));
	TAILQ_INIT(&c->regions);
	c->pidfd = fdstore_pidfd(pid);
	c->ctx = cctx_get(c->pid, c->uid);
	c->ev = c->pidfd < 0 ? NULL : event_new(hpzd_base, c->pidfd,
	    EV_READ | EV_PERSIST, control_orphan_cb, c);
	if (c->ev == NULL || event_add(c->ev, NULL) == -1) {
		if (c->ev != NULL)
			event_free(c->ev);
		if (c->pidfd >= 0)
			close(c->pidfd);
		bucket_free(c->budget);
		cctx_put(c->ctx);
		free(c);
		return (NULL);
	}
	TAILQ_INSERT_TAIL(&control_clients, c, entry);
	return (c);
}

/* An orphan left without regions is not needed any more. */
void
control_orphan_check(struct client *c)
{
	if (c->orphan && c->nregions == 0)
		control_drop(c, NULL);
}

/*
 * Out of descriptors (or memory) for a new connection: the listening
 * socket stays readable, and accepting again at once would spin.  Stop
 * listening and look again in a while; say so once until it works again.
 */
#define CONTROL_ACCEPT_RETRY_MS	250
static int		 control_accept_paused;
static struct event	*control_accept_timer;

static void
control_accept_resume_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	(void)arg;
	if (control_ev != NULL && event_add(control_ev, NULL) == -1)
		log_warnx("cannot listen again: no new client can connect");
}

static void
control_accept_pause(int error)
{
	struct timeval	tv = { 0, CONTROL_ACCEPT_RETRY_MS * 1000 };

	if (!control_accept_paused)
		log_warnx("accept: %s: not accepting connections until "
		    "descriptors free up (looking again every %d ms)",
		    strerror(error), CONTROL_ACCEPT_RETRY_MS);
	control_accept_paused = 1;
	if (control_accept_timer == NULL &&
	    (control_accept_timer = evtimer_new(hpzd_base,
	    control_accept_resume_cb, NULL)) == NULL)
		return;		/* no memory for a timer: keep listening */
	event_del(control_ev);
	evtimer_add(control_accept_timer, &tv);
}

/*
 * A connection refused as it is accepted: one reply says why (sequence 0,
 * before any request: libhpz reports it instead of waiting for a daemon
 * that is there), then the reaper closes it (requests with fds may already
 * be queued in it; closing it releases them).
 */
static void
control_accept_refuse(int fd, int error, const char *why)
{
	(void)control_send_reply(fd, 0, error, 0, why);
	reap_close_conn(fd);
}

static void
control_accept_cb(int lfd, short events, void *arg)
{
	struct client	*c;
	struct ucred	 cred;
	socklen_t	 len = sizeof(cred);
	int		 fd;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			control_accept_pause(errno);
			return;
		}
		if (errno != EAGAIN && errno != EINTR &&
		    errno != ECONNABORTED)
			log_warn("accept");
		return;
	}
	if (control_accept_paused) {
		control_accept_paused = 0;
		log_info("accepting connections again");
	}
	/*
	 * A refused connection may already hold requests with fds: closing
	 * it releases them, so the reaper closes it.
	 */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("SO_PEERCRED");
		reap_close_conn(fd);
		return;
	}
	if (control_count >= HPZD_CLIENTS_MAX) {
		log_warnx("pid %d uid %u: too many clients, refused",
		    (int)cred.pid, (unsigned)cred.uid);
		control_accept_refuse(fd, -EUSERS, "too many connections to "
		    "hpzerod, from all uids");
		return;
	}
	if (control_uid_clients > 0) {
		char		why[HPZ_REPLY_TEXT];
		int		nc, nr;
		uint64_t	nb, ns;

		control_uid_usage(cred.uid, &nc, &nr, &nb, &ns);
		if (nc >= control_uid_clients) {
			log_warnx("pid %d uid %u: uid has %d connections, the "
			    "most allowed ([limits] clients in hpzerod.conf); "
			    "refused", (int)cred.pid, (unsigned)cred.uid, nc);
			snprintf(why, sizeof(why), "uid %u has %d connections "
			    "to hpzerod, the most allowed ([limits] clients in "
			    "hpzerod.conf)", (unsigned)cred.uid, nc);
			control_accept_refuse(fd, -EDQUOT, why);
			return;
		}
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		log_warn("calloc");
		reap_close_conn(fd);
		return;
	}
	c->id = control_next_id++;
	c->fd = fd;
	c->pidfd = -1;
	c->pid = cred.pid;
	c->uid = cred.uid;
	c->gid = cred.gid;
	c->budget = bucket_new(scrub_budget_gbs(1));
	c->ctx = cctx_get(c->pid, c->uid);
	TAILQ_INIT(&c->regions);
	c->ev = event_new(hpzd_base, fd, EV_READ | EV_PERSIST, control_read_cb,
	    c);
	if (c->ev == NULL || event_add(c->ev, NULL) == -1) {
		log_warnx("cannot watch client socket");
		if (c->ev != NULL)
			event_free(c->ev);
		bucket_free(c->budget);
		cctx_put(c->ctx);
		reap_close_conn(fd);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&control_clients, c, entry);
	control_count++;
	log_debug("client %llu: pid %d uid %u gid %u connected",
	    (unsigned long long)c->id, (int)c->pid, (unsigned)c->uid,
	    (unsigned)c->gid);
}

int
control_init(int listen_fd)
{
	/* Fds a message brings and we do not keep go to the reaper. */
	proto_set_closer(control_close_fd);
	/* A region let go may leave an orphan client with nothing. */
	region_on_release(control_orphan_check);
	/* A pool hand-out that waited for pages finds its client. */
	pool_on_client(control_connected, control_pool_answer);
	control_fd = listen_fd;
	control_ev = event_new(hpzd_base, listen_fd, EV_READ | EV_PERSIST,
	    control_accept_cb, NULL);
	if (control_ev == NULL || event_add(control_ev, NULL) == -1)
		return (-1);
	return (0);
}

/* Stop accepting and end every session (their regions are released). */
void
control_shutdown(void)
{
	struct client	*c;

	if (control_accept_timer != NULL) {
		event_free(control_accept_timer);
		control_accept_timer = NULL;
	}
	if (control_ev != NULL) {
		event_free(control_ev);
		control_ev = NULL;
	}
	while ((c = TAILQ_FIRST(&control_clients)) != NULL)
		control_drop(c, NULL);
	if (control_fd != -1)
		close(control_fd);
	control_fd = -1;
}
