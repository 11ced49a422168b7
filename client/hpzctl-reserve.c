/*
 * hpzctl-reserve.c - hpzctl reserve: ask hpzerod to make huge pages free
 * for a program that does not use it (a plain guest), and show the holds
 * that keep the pool off them in hpzctl status.  Both speak the wire
 * protocol themselves (HPZ_MSG_RESERVE, HPZ_MSG_POOL_STATUS): libhpz's
 * struct hpz_pool_info has no room for a hold, and the request is no
 * business of a VMM's.
 *
 *	hpzctl reserve SIZE [--page 2m|1g] [--timeout S]
 *
 * Exit 0 once the host has SIZE free; 3 when it cannot have them (not
 * enough even with the pool given back); 1 on any other failure (no
 * daemon, refused); 2 for a bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "hpz.h"
#include "hpz-protocol.h"
#include "size.h"
#include "cli.h"
#include "hpzctl.h"

#define HPZCTL_RESERVE_NOMEM	3
#define HPZCTL_HOLD_MAX_S	600	/* the daemon caps it there too */
#define HPZCTL_ANSWER_MS	30000

/* A connection to the daemon, or -1 with errno. */
static int
hpzctl_dial(void)
{
	struct sockaddr_un	 sun;
	const char		*path = cli_socket();
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return (-1);
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1)
		return (-1);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		int	saved = errno;

		close(fd);
		errno = saved;
		return (-1);
	}
	return (fd);
}

/* Send req and read its answer of type want (or a reply): 0 or -errno. */
static int
hpzctl_call(int fd, const void *req, size_t len, struct hpz_msg *m,
    uint16_t want)
{
	char	why[HPZ_REPLY_TEXT];
	int	error;

	struct pollfd	pfd = { .fd = fd, .events = POLLIN };
	ssize_t		n;

	if (proto_send(fd, req, len, NULL, 0) != (ssize_t)len)
		return (-errno);
	/* proto_recv does not wait; the daemon answers within seconds. */
	do {
		if ((n = poll(&pfd, 1, HPZCTL_ANSWER_MS)) == 0)
			return (-ETIMEDOUT);
	} while (n == -1 && errno == EINTR);
	if (n == -1)
		return (-errno);
	if ((n = proto_recv(fd, m)) <= 0)
		return (n == 0 ? -EPIPE : -errno);
	if ((error = proto_validate(m, why, sizeof(why))) != 0) {
		proto_close_fds(m);
		fprintf(stderr, "hpzctl: a bad answer from hpzerod: %s\n",
		    why);
		return (error);
	}
	if (m->u.hdr.type != want && m->u.hdr.type != HPZ_MSG_REPLY)
		return (-EBADMSG);
	return (0);
}

/* --page: 2m or 1g (or any size the daemon knows), in bytes. */
static uint64_t
hpzctl_page_arg(const char *arg)
{
	uint64_t	v;

	if (size_parse(arg, &v) != 0 || !proto_page_size_ok(v) ||
	    v < (2ULL << 20))
		hpzctl_usage_error("reserve: bad page size '%s' (2m or 1g)",
		    arg);
	return (v);
}

int
hpzctl_reserve(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "page",	required_argument,	NULL,	'p' },
		{ "timeout",	required_argument,	NULL,	't' },
		{ NULL,		0,			NULL,	0 }
	};
	struct hpz_msg_reserve	 req;
	struct hpz_msg		 m;
	uint64_t		 size, page = 2ULL << 20;
	char			 b1[32], b2[32];
	int			 ch, fd, error, secs = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, ":p:t:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'p':
			page = hpzctl_page_arg(optarg);
			break;
		case 't':
			secs = cli_int_arg(hpzctl_usage, 't', optarg, 1,
			    HPZCTL_HOLD_MAX_S, "seconds");
			break;
		default:
			hpzctl_bad_option("reserve: ", ch, argv);
		}
	}
	if (argc - optind != 1)
		hpzctl_usage_error("reserve: one SIZE, such as 6G");
	if (size_parse(argv[optind], &size) != 0 || size == 0)
		hpzctl_usage_error("reserve: bad size '%s'", argv[optind]);
	/* Whole pages: a guest maps its memory rounded up to them. */
	if (size % page != 0)
		size += page - size % page;
	if (size > INT64_MAX)
		hpzctl_usage_error("reserve: size '%s' too large", argv[optind]);
	size_format(SIZE_FMT_EXACT, size, b1, sizeof b1);
	size_format(SIZE_FMT_EXACT, page, b2, sizeof b2);

	if ((fd = hpzctl_dial()) == -1) {
		fprintf(stderr, "hpzctl: cannot reach hpzerod at %s: %s\n",
		    cli_socket(), strerror(errno));
		return (1);
	}
	proto_init(&req, HPZ_MSG_RESERVE, sizeof(req), 1);
	req.len = size;
	req.page_size = page;
	req.hold_ms = (uint32_t)secs * 1000;
	error = hpzctl_call(fd, &req, sizeof(req), &m, HPZ_MSG_REPLY);
	close(fd);
	if (error != 0) {
		fprintf(stderr, "hpzctl: reserve %s of %s pages: %s\n", b1, b2,
		    strerror(-error));
		return (1);
	}
	if (m.u.reply.error != 0) {
		fprintf(stderr, "hpzctl: reserve %s of %s pages: %s\n", b1, b2,
		    m.u.reply.text[0] != '\0' ? m.u.reply.text :
		    strerror(-m.u.reply.error));
		return (m.u.reply.error == -ENOMEM ? HPZCTL_RESERVE_NOMEM : 1);
	}
	printf("%s of %s pages free for the host (%s); the pool keeps off "
	    "them until they are taken, or for %d s\n", b1, b2,
	    m.u.reply.text, secs > 0 ? secs : 60);
	return (fflush(stdout) == 0 ? 0 : 1);
}

/* hpzctl status: the pools' holds for the host, one line each. */
void
hpzctl_hold_status(void)
{
	struct hpz_msg_pool_status	 req;
	struct hpz_msg			 m;
	const struct hpz_msg_pool_info	*e;
	char				 b1[32];
	uint32_t			 first = 0, i;
	int				 fd, any = 0;

	if ((fd = hpzctl_dial()) == -1)
		return;
	do {
		proto_init(&req, HPZ_MSG_POOL_STATUS, sizeof(req), 2);
		req.first = first;
		if (hpzctl_call(fd, &req, sizeof(req), &m,
		    HPZ_MSG_POOL_STATUS_REPLY) != 0 ||
		    m.u.hdr.type != HPZ_MSG_POOL_STATUS_REPLY)
			break;
		for (i = 0; i < m.u.pool_status_reply.count; i++) {
			e = &m.u.pool_status_reply.p[i];
			/* The same hold on every node: its first only. */
			if (e->hold_pages == 0 || e->node > 0)
				continue;
			size_format(SIZE_FMT_EXACT, e->page_size, b1,
			    sizeof b1);
			printf("  %-18s %llu %s pages kept free for the host "
			    "(hpzctl reserve by uid %u), %.1f s left or "
			    "until taken\n", any ? "" : "reserve hold:",
			    (unsigned long long)e->hold_pages, b1,
			    e->hold_uid, (double)e->hold_ms / 1000.0);
			any = 1;
		}
		first += m.u.pool_status_reply.count;
	} while (m.u.pool_status_reply.more && m.u.pool_status_reply.count > 0);
	close(fd);
	if (!any)
		printf("  %-18s none\n", "reserve hold:");
}
