/*
 * control-client.c - a client of the control socket below its requests:
 * the list of clients, finding one, pausing and resuming its reads, a
 * reply on its socket, the closes made on its context, and its drop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "hpz-protocol.h"

#include "bucket.h"
#include "cctx.h"
#include "control-client.h"
#include "log.h"
#include "prep.h"
#include "reap.h"
#include "region-life.h"
#include "region.h"
#include "stats.h"

struct clients		 control_clients = TAILQ_HEAD_INITIALIZER(control_clients);
uint64_t		 control_next_id = 1;
size_t			 control_count;

size_t
control_nclients(void)
{
	return (control_count);
}

/* A reply on socket fd: 0, or -1 if it could not be sent. */
int
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

/* Stop reading a client until the reply it waits for is sent. */
void
control_pause(struct client *c)
{
	if (c->paused || c->orphan)
		return;
	if (c->ev != NULL)
		event_del(c->ev);
	c->paused = 1;
}

/* Read it again (and at once: requests may be queued). */
void
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

/* The client a job was for, if it is still connected. */
struct client *
control_find(uint64_t id)
{
	struct client	*c;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->id == id)
			return (c);
	return (NULL);
}

/* The connected client of id, if any: no orphan (pool.c's waiters). */
struct client *
control_connected(uint64_t id)
{
	struct client	*c;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->id == id && !c->orphan && c->fd >= 0)
			return (c);
	return (NULL);
}

/*
 * Fds a message brings that we do not keep are closed on the sending
 * client's context: a close can wait (a file on the client's own FUSE
 * mount sends FLUSH to a server that may never answer), and on the
 * reaper's one thread that wait was every client's.
 */
struct client	*control_current;

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
	int		conn;	/* its connection: fds may be in flight in it */
};

static void
control_close_work(struct cctx_job *j)
{
	struct control_close	*k = j->arg;

	if (k->conn)
		reap_close_conn_here(k->fd);
	else
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

/*
 * Close fd on c's context (the close may wait on what c controls: a FUSE
 * server's FLUSH, its inode lock), or through the reaper at once when c
 * has none or there is no memory for the job.
 */
static void
control_close_ctx(struct cctx *x, uint64_t cid, int fd, int conn,
    const char *what)
{
	struct control_close	*k;

	if (x == NULL || (k = calloc(1, sizeof(*k))) == NULL) {
		if (conn)
			reap_close_conn(fd);
		else
			reap_close(fd);
		return;
	}
	k->fd = fd;
	k->cid = cid;
	k->conn = conn;
	cctx_hold(x);
	reap_away_add(1);
	(void)cctx_submit(x, &k->job, control_close_work,
	    control_close_done, k, what);
}

static void
control_close_on(struct client *c, int fd, int conn, const char *what)
{
	control_close_ctx(c != NULL ? c->ctx : NULL, c != NULL ? c->id : 0,
	    fd, conn, what);
}

/* Close fd, passed by a client of context x, on x (main thread). */
void
control_close_on_ctx(struct cctx *x, int fd, const char *what)
{
	control_close_ctx(x, 0, fd, 0, what);
}

void
control_close_fd(int fd)
{
	control_close_on(control_current, fd, 0,
	    "close of a descriptor it passed");
}

static void
control_close_conn(struct client *c)
{
	control_close_on(c, c->fd, 1,
	    "close of its connection (fds still in flight in it)");
}

/* End a session and release everything it had. */
void
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

/* An orphan left without regions is not needed any more. */
void
control_orphan_check(struct client *c)
{
	if (c->orphan && c->nregions == 0)
		control_drop(c, NULL);
}
