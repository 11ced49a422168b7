/*
 * conn.c - libhpz's connection to hpzerod: the socket, a request and its
 * validated reply, the reason a call failed (lib_fail, hpz_last_error),
 * and what a forked child must not share of it.  It calls no other file
 * of libhpz: whoever watches the connection (guard.c) is told of each
 * connect and drop through lib_conn_watch.  The regions are registry.c's,
 * the calls client.c's; what happens while hpzerod is away is in guard.c
 * (reconnecting) and serve.c (serving faults ourselves).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "libhpz.h"
#include "hpz-protocol.h"

#define LIB_REPLY_TIMEOUT_MS	60000

/* The connection and its requests; before lib_rlock when both are held. */
pthread_mutex_t		 lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int		 lib_sock = -1;
/* Told of each new connection (a copy to watch) and drop (lib_lock held). */
static void		(*lib_conn_up)(int);
static void		(*lib_conn_down)(void);
static uint32_t		 lib_seq;		/* never 0: a refusal's */
static int		 lib_refused;		/* the last call's connection
						   was refused at accept */
static __thread char	 lib_error[HPZ_REPLY_TEXT + 64];

static const char	*lib_socket_path(void);

/* Record this thread's reason for a failure; returns error. */
int
lib_fail(int error, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(lib_error, sizeof(lib_error), fmt, ap);
	va_end(ap);
	return (error);
}

const char *
hpz_last_error(void)
{
	return (lib_error);
}

/* A child must not share the parent's connection (in its atfork). */
void
lib_conn_fork_child(void)
{
	pthread_mutex_init(&lib_lock, NULL);
	if (lib_sock != -1)
		close(lib_sock);
	lib_sock = -1;
}

/* Who is told of each connect (up, with the socket) and drop (down). */
void
lib_conn_watch(void (*up)(int), void (*down)(void))
{
	lib_conn_up = up;
	lib_conn_down = down;
}

static const char *
lib_socket_path(void)
{
	const char	*p = getenv("HPZ_SOCKET");

	return (p != NULL && *p != '\0' ? p : HPZ_SOCKET_DEFAULT);
}

/* A new connection to hpzerod: its fd, or a negative errno (lib_fail). */
int
lib_dial(void)
{
	struct sockaddr_un	 sun;
	const char		*path = lib_socket_path();
	int			 fd, error;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return (lib_fail(-ENAMETOOLONG, "socket path too long: %s",
		    path));
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return (lib_fail(-errno, "socket: %s", strerror(errno)));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		error = -errno;
		close(fd);
		return (lib_fail(error, "cannot connect to hpzerod at %s: %s",
		    path, strerror(-error)));
	}
	return (fd);
}

/* Connect if we are not connected (lock held). */
int
lib_connect(void)
{
	int	fd;

	if (lib_sock != -1)
		return (0);
	if ((fd = lib_dial()) < 0)
		return (fd);
	lib_sock = fd;
	if (lib_conn_up != NULL)
		lib_conn_up(fd);
	return (0);
}

/* Drop the connection (lock held); shutdown tells the guard's copy too. */
void
lib_disconnect(void)
{
	if (lib_sock != -1) {
		shutdown(lib_sock, SHUT_RDWR);
		close(lib_sock);
		if (lib_conn_down != NULL)
			lib_conn_down();
	}
	lib_sock = -1;
}

/*
 * Sequence 0, before any answer: the daemon refused the connection as it
 * accepted it (a limit), and closes it.  Not a daemon that went away: the
 * caller gets the reason, at once.
 */
static int
lib_refusal(struct hpz_msg *reply)
{
	char	why[128];

	return (proto_validate(reply, why, sizeof(why)) == 0 &&
	    reply->u.hdr.seq == 0 && reply->u.hdr.type == HPZ_MSG_REPLY &&
	    reply->u.reply.error < 0);
}

static int
lib_refused_fail(const struct hpz_msg *reply)
{
	lib_refused = 1;
	return (lib_fail(reply->u.reply.error, "hpzerod refused the "
	    "connection: %.*s", (int)sizeof(reply->u.reply.text),
	    reply->u.reply.text));
}

/*
 * Send req (its seq set) on sock and wait up to timeout_ms for its reply,
 * validated: of type want, or a plain reply (the daemon's status).  0, or
 * a negative errno (lib_fail) when the connection is no good any more.
 */
int
lib_exchange(int sock, void *req, size_t len, const int *fds, int nfds,
    struct hpz_msg *reply, uint16_t want, int timeout_ms)
{
	struct hpz_msg_header	*hdr = req;
	struct pollfd		 pfd = { .fd = sock, .events = POLLIN };
	char			 why[128] = "";
	ssize_t			 n;
	int			 error;

	if (proto_send(sock, req, len, fds, nfds) != (ssize_t)len) {
		error = -errno;
		/*
		 * A daemon that refused the connection as it accepted it may
		 * have closed it before this request went out: its reason
		 * waits unread.  Only what is there now is read: a peer that
		 * shut down reading alone must not hold us.
		 */
		if ((error == -EPIPE || error == -ECONNRESET) &&
		    poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) &&
		    proto_recv(sock, reply) > 0) {
			if (lib_refusal(reply))
				return (lib_refused_fail(reply));
			proto_close_fds(reply);
		}
		return (lib_fail(error, "cannot send to hpzerod: %s",
		    strerror(-error)));
	}
	for (;;) {
		n = poll(&pfd, 1, timeout_ms);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return (lib_fail(-ETIMEDOUT, "no reply from hpzerod"));
		n = proto_recv(sock, reply);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		break;
	}
	if (n <= 0) {
		error = n == 0 ? -ECONNRESET : -errno;
		return (lib_fail(error, "hpzerod closed the connection"));
	}
	if (lib_refusal(reply))
		return (lib_refused_fail(reply));
	if (proto_validate(reply, why, sizeof(why)) != 0 ||
	    reply->u.hdr.seq != hdr->seq ||
	    (reply->u.hdr.type != want && reply->u.hdr.type != HPZ_MSG_REPLY)) {
		proto_close_fds(reply);
		return (lib_fail(-EPROTO, "bad reply from hpzerod: %s",
		    why[0] != '\0' ? why : "unexpected type or sequence"));
	}
	return (0);
}

/*
 * Send a request and wait for its reply (lock held).  The reply is
 * validated; the daemon's status is returned with its text as the error.
 */
int
lib_call(void *req, size_t len, const int *fds, int nfds,
    struct hpz_msg *reply, uint16_t want)
{
	struct hpz_msg_header	*hdr = req;
	int			 error;

	if ((error = lib_connect()) != 0)
		return (error);
	if (++lib_seq == 0)
		lib_seq = 1;
	hdr->seq = lib_seq;
	if ((error = lib_exchange(lib_sock, req, len, fds, nfds, reply, want,
	    LIB_REPLY_TIMEOUT_MS)) != 0) {
		lib_disconnect();
		return (error);
	}
	if (reply->u.hdr.type == HPZ_MSG_REPLY && reply->u.reply.error != 0)
		return (lib_fail(reply->u.reply.error, "hpzerod: %s",
		    reply->u.reply.text));
	if (reply->u.hdr.type != want)
		return (lib_fail(-EPROTO, "hpzerod sent a %s, expected a %s",
		    proto_type_name(reply->u.hdr.type),
		    proto_type_name(want)));
	return (0);
}

/*
 * Was the last call's connection refused as it was accepted (a limit)?
 * Said once: the flag is cleared.
 */
int
lib_conn_refused(void)
{
	int	refused = lib_refused;

	lib_refused = 0;
	return (refused);
}
