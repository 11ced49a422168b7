/*
 * proto.c - encode, send, receive and validate hpzerod protocol messages.
 * Built into both libhpz and hpzerod: one definition of what is valid.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "hpz.h"
#include "hpz-protocol.h"

/*
 * Control space for every fd one message can carry (the kernel's
 * SCM_MAX_FD): fds that do not fit are dropped by the kernel in our
 * recvmsg, and their release (which a sender can make block: a lingering
 * socket, a FUSE file) would then run on the receiving thread.
 */
#define PROTO_CMSG_FDS	253
/* Ranges on the wire are in the kernel's base pages, as uffd's are. */
#define PROTO_RANGE_ALIGN	4096ULL
/* The smallest page a region or pool file may have: the base page. */
#define PROTO_PAGE_MIN		4096ULL
/* Errors a reply may carry: -1 to -PROTO_ERRNO_MAX (the kernel's MAX_ERRNO). */
#define PROTO_ERRNO_MAX		4095
/*
 * Fds one message sends at most: a register carries HPZ_REGISTER_NFDS,
 * a pool file one; the control buffer is sized for this many.
 */
#define PROTO_SEND_FDS		8

/* Who closes the fds we do not keep: the daemon's reaper, or close(). */
static void	(*proto_closer)(int) = NULL;

void
proto_set_closer(void (*closer)(int fd))
{
	proto_closer = closer;
}

static void
proto_close(int fd)
{
	if (proto_closer != NULL)
		proto_closer(fd);
	else
		close(fd);
}

static int	proto_fail(char *, size_t, int, const char *, ...)
		    __attribute__((format(printf, 4, 5)));

/* Fill in a header for a message of type and len. */
void
proto_init(void *msg, uint16_t type, size_t len, uint32_t seq)
{
	struct hpz_msg_header	*hdr = msg;

	memset(msg, 0, len);
	hdr->magic = HPZ_MAGIC;
	hdr->version = HPZ_PROTOCOL_VERSION;
	hdr->type = type;
	hdr->len = (uint32_t)len;
	hdr->seq = seq;
}

/* Each message type: its one valid size and its name. */
static const struct proto_type {
	uint16_t	 type;
	size_t		 size;
	const char	*name;
} proto_types[] = {
	{ HPZ_MSG_REGISTER, sizeof(struct hpz_msg_register), "register" },
	{ HPZ_MSG_UNREGISTER, sizeof(struct hpz_msg_range), "unregister" },
	{ HPZ_MSG_RESET, sizeof(struct hpz_msg_range), "reset" },
	{ HPZ_MSG_STATUS, sizeof(struct hpz_msg_header), "status" },
	{ HPZ_MSG_REGIONS, sizeof(struct hpz_msg_regions), "regions" },
	{ HPZ_MSG_POLICY, sizeof(struct hpz_msg_policy), "policy" },
	{ HPZ_MSG_SCRUB, sizeof(struct hpz_msg_range), "scrub" },
	{ HPZ_MSG_REGIONS_REPLY, sizeof(struct hpz_msg_regions_reply),
	    "regions-reply" },
	{ HPZ_MSG_REPLY, sizeof(struct hpz_msg_reply), "reply" },
	{ HPZ_MSG_STATUS_REPLY, sizeof(struct hpz_msg_status_reply),
	    "status-reply" },
	{ HPZ_MSG_POOL_TAKE, sizeof(struct hpz_msg_pool_take), "pool-take" },
	{ HPZ_MSG_POOL_STATUS, sizeof(struct hpz_msg_pool_status),
	    "pool-status" },
	{ HPZ_MSG_RESERVE, sizeof(struct hpz_msg_reserve), "reserve" },
	{ HPZ_MSG_POOL_FILE, sizeof(struct hpz_msg_pool_file), "pool-file" },
	{ HPZ_MSG_POOL_STATUS_REPLY, sizeof(struct hpz_msg_pool_status_reply),
	    "pool-status-reply" },
};

static const struct proto_type *
proto_type(uint16_t type)
{
	size_t	i;

	for (i = 0; i < sizeof(proto_types) / sizeof(proto_types[0]); i++)
		if (proto_types[i].type == type)
			return (&proto_types[i]);
	return (NULL);
}

/* The one valid size of each message type, 0 for an unknown type. */
size_t
proto_size(uint16_t type)
{
	const struct proto_type	*t = proto_type(type);

	return (t != NULL ? t->size : 0);
}

const char *
proto_type_name(uint16_t type)
{
	const struct proto_type	*t = proto_type(type);

	return (t != NULL ? t->name : "unknown");
}

/* A page size a region or pool file may have: a power of two >= 4 KiB. */
int
proto_page_size_ok(uint64_t page_size)
{
	return (page_size >= PROTO_PAGE_MIN &&
	    (page_size & (page_size - 1)) == 0);
}

static int
proto_fail(char *why, size_t whylen, int error, const char *fmt, ...)
{
	va_list	ap;

	if (why != NULL && whylen > 0) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return (error);
}

static int
proto_terminated(const char *s, size_t size)
{
	return (memchr(s, '\0', size) != NULL);
}

/* A range is non-empty, 4 KiB aligned and does not wrap. */
static int
proto_range_ok(uint64_t addr, uint64_t len)
{
	if (len == 0 || addr % PROTO_RANGE_ALIGN != 0 ||
	    len % PROTO_RANGE_ALIGN != 0)
		return (0);
	return (addr + len > addr);
}

/* A pool request: a huge page size, whole pages, a node that can be named. */
static int
proto_pool_take_ok(const struct hpz_msg_pool_take *t, char *why,
    size_t whylen)
{
	if (t->reserved != 0)
		return (proto_fail(why, whylen, -EINVAL,
		    "reserved field is not zero"));
	if (!proto_page_size_ok(t->page_size))
		return (proto_fail(why, whylen, -EINVAL,
		    "page size %llu is not a power of two >= 4096",
		    (unsigned long long)t->page_size));
	if (t->len % t->page_size != 0 || t->len > INT64_MAX)
		return (proto_fail(why, whylen, -EINVAL,
		    "length %llu is not a multiple of the page size %llu",
		    (unsigned long long)t->len,
		    (unsigned long long)t->page_size));
	if (t->node < -1 || t->node >= HPZ_POOL_NODES)
		return (proto_fail(why, whylen, -EINVAL,
		    "node %d is not -1 to %d", t->node, HPZ_POOL_NODES - 1));
	if (!proto_terminated(t->name, sizeof(t->name)))
		return (proto_fail(why, whylen, -EINVAL,
		    "name is not terminated"));
	return (0);
}

/*
 * Check a received message completely: framing, exact length, fd count,
 * reserved fields and field ranges.  0 if valid, else a negative errno with
 * the reason in why.
 */
int
proto_validate(const struct hpz_msg *msg, char *why, size_t whylen)
{
	const struct hpz_msg_header	*hdr = &msg->u.hdr;
	const struct hpz_msg_register	*reg = &msg->u.reg;
	const struct hpz_msg_reply	*rep = &msg->u.reply;
	size_t				 want;
	int				 wantfds, error;

	if (msg->len > HPZ_MSG_MAX)
		return (proto_fail(why, whylen, -EMSGSIZE,
		    "oversized message (more than %d bytes)", HPZ_MSG_MAX));
	if (msg->len < sizeof(*hdr))
		return (proto_fail(why, whylen, -EBADMSG,
		    "short message (%zu bytes)", msg->len));
	if (hdr->magic != HPZ_MAGIC)
		return (proto_fail(why, whylen, -EBADMSG,
		    "bad magic 0x%08x", hdr->magic));
	if (hdr->version != HPZ_PROTOCOL_VERSION)
		return (proto_fail(why, whylen, -EPROTONOSUPPORT,
		    "protocol version %u, expected %u", hdr->version,
		    HPZ_PROTOCOL_VERSION));
	want = proto_size(hdr->type);
	if (want == 0)
		return (proto_fail(why, whylen, -EBADMSG,
		    "unknown message type %u", hdr->type));
	if (hdr->len != msg->len || msg->len != want)
		return (proto_fail(why, whylen, -EBADMSG,
		    "%s message is %zu bytes (header says %u), expected %zu",
		    proto_type_name(hdr->type), msg->len, hdr->len, want));
	wantfds = hdr->type == HPZ_MSG_REGISTER ? HPZ_REGISTER_NFDS :
	    hdr->type == HPZ_MSG_POOL_FILE ? 1 : 0;
	/*
	 * Fewer arrived than the message wants: the receiver's fd table.
	 * As many or more arrived and some were still lost: a sender of
	 * too many, whatever our table holds (not a reason to keep it).
	 */
	if (msg->fds_lost && msg->nfds >= wantfds)
		return (proto_fail(why, whylen, -EBADMSG,
		    "%s message carries more than %d fds, expected %d",
		    proto_type_name(hdr->type), msg->nfds, wantfds));
	if (msg->fds_lost)
		return (proto_fail(why, whylen, -EMFILE,
		    "%s message: %d of its fds arrived, the receiver is out of "
		    "file descriptors (RLIMIT_NOFILE)",
		    proto_type_name(hdr->type), msg->nfds));
	if (msg->nfds != wantfds)
		return (proto_fail(why, whylen, -EBADMSG,
		    "%s message carries %d fds, expected %d",
		    proto_type_name(hdr->type), msg->nfds, wantfds));

	switch (hdr->type) {
	case HPZ_MSG_REGISTER:
		if (reg->reserved != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "reserved field is not zero"));
		if ((reg->flags & ~HPZ_REGION_FLAGS) != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "unknown region flags 0x%x", reg->flags));
		if (!proto_page_size_ok(reg->page_size))
			return (proto_fail(why, whylen, -EINVAL,
			    "page size %llu is not a power of two >= 4096",
			    (unsigned long long)reg->page_size));
		if (!proto_range_ok(reg->addr, reg->len))
			return (proto_fail(why, whylen, -EINVAL,
			    "bad range addr 0x%llx len %llu",
			    (unsigned long long)reg->addr,
			    (unsigned long long)reg->len));
		if ((reg->addr | reg->len | reg->offset) &
		    (reg->page_size - 1))
			return (proto_fail(why, whylen, -EINVAL,
			    "addr, len and offset must be multiples of the "
			    "page size %llu",
			    (unsigned long long)reg->page_size));
		if (reg->len > INT64_MAX || reg->offset > INT64_MAX - reg->len)
			return (proto_fail(why, whylen, -EINVAL,
			    "offset + len overflows"));
		break;
	case HPZ_MSG_UNREGISTER:
	case HPZ_MSG_RESET:
	case HPZ_MSG_SCRUB:
		if (!proto_range_ok(msg->u.range.addr, msg->u.range.len))
			return (proto_fail(why, whylen, -EINVAL,
			    "bad range addr 0x%llx len %llu",
			    (unsigned long long)msg->u.range.addr,
			    (unsigned long long)msg->u.range.len));
		break;
	case HPZ_MSG_POLICY:
		if (!proto_range_ok(msg->u.policy.addr, msg->u.policy.len))
			return (proto_fail(why, whylen, -EINVAL,
			    "bad range addr 0x%llx len %llu",
			    (unsigned long long)msg->u.policy.addr,
			    (unsigned long long)msg->u.policy.len));
		if ((msg->u.policy.flags & ~HPZ_REGION_FLAGS) != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "unknown region flags 0x%x", msg->u.policy.flags));
		if (msg->u.policy.priority < HPZ_PRIO_MIN ||
		    msg->u.policy.priority > HPZ_PRIO_MAX)
			return (proto_fail(why, whylen, -EINVAL,
			    "priority %d is not %d to %d",
			    msg->u.policy.priority, HPZ_PRIO_MIN,
			    HPZ_PRIO_MAX));
		break;
	case HPZ_MSG_REPLY:
		if (rep->reserved != 0 || rep->error > 0 ||
		    rep->error < -PROTO_ERRNO_MAX)
			return (proto_fail(why, whylen, -EBADMSG,
			    "bad reply status %d", rep->error));
		if (!proto_terminated(rep->text, sizeof(rep->text)))
			return (proto_fail(why, whylen, -EBADMSG,
			    "reply text is not terminated"));
		break;
	case HPZ_MSG_STATUS_REPLY:
		if (!proto_terminated(msg->u.status.version,
		    sizeof(msg->u.status.version)) ||
		    !proto_terminated(msg->u.status.clear_kernel,
		    sizeof(msg->u.status.clear_kernel)) ||
		    !proto_terminated(msg->u.status.hot_kernel,
		    sizeof(msg->u.status.hot_kernel)))
			return (proto_fail(why, whylen, -EBADMSG,
			    "a status string is not terminated"));
		break;
	case HPZ_MSG_POOL_TAKE:
		if ((error = proto_pool_take_ok(&msg->u.pool_take, why,
		    whylen)) != 0)
			return (error);
		break;
	case HPZ_MSG_POOL_STATUS:
		if (msg->u.pool_status.reserved != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "reserved field is not zero"));
		break;
	case HPZ_MSG_RESERVE:
		if (msg->u.reserve.reserved != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "reserved field is not zero"));
		if (!proto_page_size_ok(msg->u.reserve.page_size))
			return (proto_fail(why, whylen, -EINVAL,
			    "page size %llu is not a power of two >= 4096",
			    (unsigned long long)msg->u.reserve.page_size));
		if (msg->u.reserve.len == 0 || msg->u.reserve.len >
		    INT64_MAX || msg->u.reserve.len %
		    msg->u.reserve.page_size != 0)
			return (proto_fail(why, whylen, -EINVAL,
			    "length %llu is not a whole number of %llu-byte "
			    "pages", (unsigned long long)msg->u.reserve.len,
			    (unsigned long long)msg->u.reserve.page_size));
		break;
	case HPZ_MSG_POOL_FILE:
		if (msg->u.pool_file.reserved != 0 ||
		    !proto_page_size_ok(msg->u.pool_file.page_size) ||
		    msg->u.pool_file.size % msg->u.pool_file.page_size != 0 ||
		    msg->u.pool_file.size > INT64_MAX)
			return (proto_fail(why, whylen, -EBADMSG,
			    "bad pool file (size %llu, page size %llu)",
			    (unsigned long long)msg->u.pool_file.size,
			    (unsigned long long)msg->u.pool_file.page_size));
		break;
	case HPZ_MSG_POOL_STATUS_REPLY:
		if (msg->u.pool_status_reply.count > HPZ_POOLS_PER_REPLY ||
		    msg->u.pool_status_reply.more > 1)
			return (proto_fail(why, whylen, -EBADMSG,
			    "bad pool status reply (count %u, more %u)",
			    msg->u.pool_status_reply.count,
			    msg->u.pool_status_reply.more));
		break;
	case HPZ_MSG_REGIONS_REPLY:
		if (msg->u.regions_reply.count > HPZ_REGIONS_PER_REPLY ||
		    msg->u.regions_reply.more > 1)
			return (proto_fail(why, whylen, -EBADMSG,
			    "bad regions reply (count %u, more %u)",
			    msg->u.regions_reply.count,
			    msg->u.regions_reply.more));
		break;
	}
	return (0);
}

/* Send one message with optional fds.  Returns bytes sent or -1. */
ssize_t
proto_send(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * PROTO_SEND_FDS)];
	}		 cm;
	struct cmsghdr	*c;
	ssize_t		 n;

	if (nfds < 0 || nfds > PROTO_SEND_FDS) {
		errno = EINVAL;
		return (-1);
	}
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = (void *)msg;
	iov.iov_len = len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	return (n);
}

/*
 * Receive one message.  Keeps at most HPZ_REGISTER_NFDS fds (close-on-exec)
 * and closes any others at once, but counts them all in nfds so validation
 * rejects the message.  A message longer than HPZ_MSG_MAX gets len
 * HPZ_MSG_MAX + 1.  Returns the length, 0 on end of file, -1 on error.
 */
ssize_t
proto_recv(int sock, struct hpz_msg *msg)
{
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * PROTO_CMSG_FDS)];
	}		 cm;
	struct cmsghdr	*c;
	ssize_t		 n;
	size_t		 i, count;
	int		 fd;

	memset(&mh, 0, sizeof(mh));
	msg->len = 0;
	msg->nfds = 0;
	msg->fds_lost = 0;
	for (i = 0; i < HPZ_REGISTER_NFDS; i++)
		msg->fds[i] = -1;	/* never close a stale number */
	iov.iov_base = msg->u.bytes;
	iov.iov_len = sizeof(msg->u.bytes);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return (-1);

	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < count; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (msg->nfds < HPZ_REGISTER_NFDS)
				msg->fds[msg->nfds] = fd;
			else
				proto_close(fd);
			msg->nfds++;
		}
	}
	/*
	 * Truncated with room left in our buffer: the kernel could not
	 * install the rest here (our fd table is full: EMFILE), not a
	 * sender with too many.  Truncated with the buffer full: the sender
	 * sent more than we could see.
	 */
	if ((mh.msg_flags & MSG_CTRUNC) && msg->nfds < PROTO_CMSG_FDS)
		msg->fds_lost = 1;
	else if (mh.msg_flags & MSG_CTRUNC)
		msg->nfds += PROTO_CMSG_FDS;	/* more than we could see */
	if (n == 0) {
		/* End of file, or an empty message: either way no fds kept. */
		proto_close_fds(msg);
		return (0);
	}
	msg->len = (size_t)n;
	if ((mh.msg_flags & MSG_TRUNC) || msg->len > HPZ_MSG_MAX)
		msg->len = HPZ_MSG_MAX + 1;
	return ((ssize_t)msg->len);
}

/* Close whatever fds a received message still holds. */
void
proto_close_fds(struct hpz_msg *msg)
{
	int	i, kept;

	kept = msg->nfds < HPZ_REGISTER_NFDS ? msg->nfds : HPZ_REGISTER_NFDS;
	for (i = 0; i < kept; i++) {
		if (msg->fds[i] >= 0)
			proto_close(msg->fds[i]);
		msg->fds[i] = -1;
	}
	msg->nfds = 0;
}
