/*
 * control-socket.c - the listening socket: bind it (or take systemd's, with
 * the regions its fd store kept), accept and check each peer, read its
 * requests in batches, and end every session at shutdown.
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

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "hpz-protocol.h"

#include "bucket.h"
#include "cctx.h"
#include "control-client.h"
#include "control-limits.h"
#include "control-orphan.h"
#include "control-pool.h"
#include "control-socket.h"
#include "control.h"
#include "fdstore.h"
#include "globals.h"
#include "log.h"
#include "pool.h"
#include "reap.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"

/* Requests handled per wakeup before other clients get a turn. */
#define CONTROL_BATCH	32

static struct event	*control_ev;
static int		 control_fd = -1;

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
 * that is there), then it is closed on its uid's closer, nothing its
 * messages carry taken (requests
 * with fds may already be queued in it: reap_refused).
 */
static void
control_accept_refuse(int fd, uid_t uid, int error, const char *why)
{
	(void)control_send_reply(fd, 0, error, 0, why);
	reap_refused(fd, uid);
}

static void
control_accept_cb(int lfd, short events, void *arg)
{
	struct client	*c;
	struct ucred	 cred;
	socklen_t	 len = sizeof(cred);
	char		 why[HPZ_REPLY_TEXT];
	int		 fd, error;

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
	 * A refused connection may already hold requests with fds: it is
	 * closed on a closer of its uid's, nothing it carries taken
	 * (reap_refused).
	 */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("SO_PEERCRED");
		reap_refused(fd, (uid_t)-1);
		return;
	}
	if (control_count >= HPZD_CLIENTS_MAX) {
		log_warnx("pid %d uid %u: too many clients, refused",
		    (int)cred.pid, (unsigned)cred.uid);
		control_accept_refuse(fd, cred.uid, -EUSERS, "too many connections to "
		    "hpzerod, from all uids");
		return;
	}
	if (control_check_clients(cred.pid, cred.uid, why, sizeof(why)) != 0) {
		control_accept_refuse(fd, cred.uid, -EDQUOT, why);
		return;
	}
	/*
	 * A uid whose client contexts are stuck, or all at work: a new
	 * process would bring its passed fds to a context with no thread.
	 */
	if ((error = cctx_may_connect(cred.pid, cred.uid, why,
	    sizeof(why))) != 0) {
		log_warnx("pid %d uid %u: refused: %s", (int)cred.pid,
		    (unsigned)cred.uid, why);
		control_accept_refuse(fd, cred.uid, error, why);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		log_warn("calloc");
		reap_refused(fd, cred.uid);
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
	c->ev = c->ctx == NULL ? NULL : event_new(hpzd_base, fd,
	    EV_READ | EV_PERSIST, control_read_cb, c);
	if (c->ev == NULL || event_add(c->ev, NULL) == -1) {
		log_warnx("cannot watch client socket");
		if (c->ev != NULL)
			event_free(c->ev);
		bucket_free(c->budget);
		cctx_put(c->ctx);
		reap_refused(fd, cred.uid);
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
