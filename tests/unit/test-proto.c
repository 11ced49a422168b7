/*
 * test-proto.c - unit tests of the wire protocol: encoding, the validator's
 * verdict on every malformed message, and fd passing over a real socket.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "hpz.h"
#include "hpz-protocol.h"

#define MiB		(1024ULL * 1024)
#define PAGE_2M		(2 * MiB)

static const uint16_t proto_types[] = {
	HPZ_MSG_REGISTER, HPZ_MSG_UNREGISTER, HPZ_MSG_RESET, HPZ_MSG_STATUS,
	HPZ_MSG_REGIONS, HPZ_MSG_POLICY, HPZ_MSG_SCRUB, HPZ_MSG_REPLY,
	HPZ_MSG_STATUS_REPLY,
	HPZ_MSG_REGIONS_REPLY, HPZ_MSG_POOL_TAKE, HPZ_MSG_POOL_STATUS,
	HPZ_MSG_POOL_FILE, HPZ_MSG_POOL_STATUS_REPLY, HPZ_MSG_RESERVE,
};
#define NTYPES	(sizeof(proto_types) / sizeof(proto_types[0]))

/* --- helpers ------------------------------------------------------------ */

/* A register request that passes validation, on 2 MiB pages. */
/* The register make_register makes. */
#define REG_ADDR	0x7f0000000000ULL
#define REG_LEN		(64 * MiB)
#define REG_OFFSET	(2 * MiB)

static void
make_register(struct hpz_msg_register *r)
{
	proto_init(r, HPZ_MSG_REGISTER, sizeof(*r), 7);
	r->addr = REG_ADDR;
	r->len = REG_LEN;
	r->offset = REG_OFFSET;
	r->page_size = PAGE_2M;
	r->uffd_features = 0xff;
	r->uffd_ioctls = 0xff;
	r->flags = HPZ_DISCARD;
}

/* A received message of any type that passes validation. */
static void
make_valid(struct hpz_msg *m, uint16_t type)
{
	size_t	len = proto_size(type);

	memset(m, 0, sizeof(*m));
	m->fds[0] = m->fds[1] = m->fds[2] = -1;
	if (type == HPZ_MSG_REGISTER) {
		make_register(&m->u.reg);
		m->nfds = HPZ_REGISTER_NFDS;
	} else
		proto_init(m->u.bytes, type, len, 7);
	if (type == HPZ_MSG_POOL_TAKE) {
		m->u.pool_take.len = 64 * MiB;
		m->u.pool_take.page_size = PAGE_2M;
		m->u.pool_take.node = -1;
		strcpy(m->u.pool_take.name, "memory-backend-memfd");
	}
	if (type == HPZ_MSG_RESERVE) {
		m->u.reserve.len = 6 * 1024 * MiB;
		m->u.reserve.page_size = PAGE_2M;
		m->u.reserve.hold_ms = 60000;
	}
	if (type == HPZ_MSG_POOL_FILE) {
		m->u.pool_file.size = 512 * MiB;
		m->u.pool_file.page_size = PAGE_2M;
		m->u.pool_file.node = -1;
		m->nfds = 1;
	}
	if (type == HPZ_MSG_UNREGISTER || type == HPZ_MSG_RESET ||
	    type == HPZ_MSG_SCRUB) {
		m->u.range.addr = 0x7f0000000000ULL;
		m->u.range.len = 4096;
	}
	if (type == HPZ_MSG_POLICY) {
		m->u.policy.addr = 0x7f0000000000ULL;
		m->u.policy.len = 2 * MiB;
		m->u.policy.priority = HPZ_PRIO_DEFAULT;
	}
	if (type == HPZ_MSG_REPLY)
		strcpy(m->u.reply.text, "fine");
	if (type == HPZ_MSG_STATUS_REPLY) {
		strcpy(m->u.status.version, HPZ_VERSION);
		strcpy(m->u.status.clear_kernel, "avx512-nt");
		strcpy(m->u.status.hot_kernel, "rep-stosb");
	}
	m->len = len;
}

/* Validate m: it must fail with want and give a reason. */
static void
expect_reject(const struct hpz_msg *m, int want, const char *what)
{
	char	why[256];
	int	error;

	memset(why, 0, sizeof(why));
	error = proto_validate(m, why, sizeof(why));
	cr_expect_eq(error, want, "%s: proto_validate returned %d (%s), "
	    "expected %d", what, error, why, want);
	cr_expect_neq(why[0], '\0', "%s: rejected without a reason", what);
}

static void
expect_valid(const struct hpz_msg *m, const char *what)
{
	char	why[256];
	int	error;

	why[0] = '\0';
	error = proto_validate(m, why, sizeof(why));
	cr_expect_eq(error, 0, "%s: rejected with %d: %s", what, error, why);
}

static int
count_fds(void)
{
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	d = opendir("/proc/self/fd");
	cr_assert_not_null(d, "opendir /proc/self/fd: %s", strerror(errno));
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return (n);
}

static int
fd_is_open(int fd)
{
	return (fcntl(fd, F_GETFD) != -1);
}

static void
seqpacket_pair(int sv[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
	    0, "socketpair: %s", strerror(errno));
}

/*
 * One field of a valid message of type set to value: proto_validate's
 * verdict must be want (0: accepted), with a reason when it refuses.
 */
struct field_case {
	const char	*test;		/* which Test() checks it */
	uint16_t	 type;
	size_t		 off, size;	/* in struct hpz_msg */
	uint64_t	 value;
	int		 want;
	const char	*what;
};

#define FIELD(test, t, member, v, w, what) { (test), (t),		\
	offsetof(struct hpz_msg, u.member),				\
	sizeof(((struct hpz_msg *)0)->u.member), (uint64_t)(v), (w), (what) }

static const struct field_case field_cases[] = {
	FIELD("reserved", HPZ_MSG_REGISTER, reg.reserved, 1, -EINVAL,
	    "reserved 1"),
	FIELD("reserved", HPZ_MSG_REGISTER, reg.reserved, 0x80000000u,
	    -EINVAL, "reserved high bit"),
	FIELD("reserved", HPZ_MSG_REGISTER, reg.flags, HPZ_REGION_FLAGS << 1,
	    -EINVAL, "unknown flag"),
	FIELD("reserved", HPZ_MSG_REGISTER, reg.flags,
	    HPZ_DISCARD | 0x80000000u, -EINVAL, "discard plus unknown flag"),
	/* Page-kind bits are for hpz_region_create, not the wire. */
	FIELD("reserved", HPZ_MSG_REGISTER, reg.flags, HPZ_PAGE_SHMEM,
	    -EINVAL, "HPZ_PAGE_SHMEM on the wire"),
	FIELD("reserved", HPZ_MSG_REGISTER, reg.flags, 0, 0, "no flags"),

	/* 4 KiB aligned, so only the page size check can catch these. */
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.addr, REG_ADDR + 4096,
	    -EINVAL, "addr not 2 MiB aligned"),
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.len, REG_LEN + 4096, -EINVAL,
	    "len not 2 MiB aligned"),
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.offset, REG_OFFSET + 4096,
	    -EINVAL, "offset not 2 MiB aligned"),
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.addr, REG_ADDR + 1, -EINVAL,
	    "addr odd"),
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.len, REG_LEN - 1, -EINVAL,
	    "len odd"),
	FIELD("unaligned", HPZ_MSG_REGISTER, reg.offset, 512, -EINVAL,
	    "offset 512"),

	FIELD("policy", HPZ_MSG_POLICY, policy.priority, HPZ_PRIO_MAX, 0,
	    "policy, top priority"),
	FIELD("policy", HPZ_MSG_POLICY, policy.priority, HPZ_PRIO_MAX + 1,
	    -EINVAL, "policy, priority over the top"),
	FIELD("policy", HPZ_MSG_POLICY, policy.priority, -1, -EINVAL,
	    "policy, priority -1"),
	FIELD("policy", HPZ_MSG_POLICY, policy.flags, 0x8000, -EINVAL,
	    "policy, unknown flag"),
	FIELD("policy", HPZ_MSG_POLICY, policy.len, 0, -EINVAL,
	    "policy, empty range"),

	FIELD("regions", HPZ_MSG_REGIONS_REPLY, regions_reply.count,
	    HPZ_REGIONS_PER_REPLY + 1, -EBADMSG,
	    "regions reply, count over a reply's"),
	FIELD("regions", HPZ_MSG_REGIONS_REPLY, regions_reply.more, 2,
	    -EBADMSG, "regions reply, more is 2"),

	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.len, 0, 0,
	    "pool take of an unknown length"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.reserved, 1, -EINVAL,
	    "pool take, reserved set"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.page_size, 3 * MiB,
	    -EINVAL, "pool take, page size not a power of two"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.page_size, 0, -EINVAL,
	    "pool take, page size 0"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.len, 3 * MiB, -EINVAL,
	    "pool take, length not whole pages"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.len, 1ULL << 63, -EINVAL,
	    "pool take, length past INT64_MAX"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.node, -2, -EINVAL,
	    "pool take, node -2"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.node, HPZ_POOL_NODES,
	    -EINVAL, "pool take, node past the mask"),
	FIELD("take", HPZ_MSG_POOL_TAKE, pool_take.node, HPZ_POOL_NODES - 1,
	    0, "pool take, last node"),

	FIELD("file", HPZ_MSG_POOL_FILE, pool_file.size, 3 * MiB, -EBADMSG,
	    "pool file, size not whole pages"),
	FIELD("file", HPZ_MSG_POOL_FILE, pool_file.page_size, 4095, -EBADMSG,
	    "pool file, page size"),
	FIELD("file", HPZ_MSG_POOL_FILE, pool_file.reserved, 9, -EBADMSG,
	    "pool file, reserved set"),
	FIELD("file", HPZ_MSG_POOL_STATUS, pool_status.reserved, 1, -EINVAL,
	    "pool status, reserved set"),
	FIELD("file", HPZ_MSG_POOL_STATUS_REPLY, pool_status_reply.count,
	    HPZ_POOLS_PER_REPLY + 1, -EBADMSG, "pool status reply, count"),
	FIELD("file", HPZ_MSG_POOL_STATUS_REPLY, pool_status_reply.more, 2,
	    -EBADMSG, "pool status reply, more"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.reserved, 1, -EINVAL,
	    "reserve, reserved set"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.len, 0, -EINVAL,
	    "reserve, no length"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.len, 3 * MiB, -EINVAL,
	    "reserve, length not whole pages"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.len, 1ULL << 63, -EINVAL,
	    "reserve, length past INT64_MAX"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.page_size, 4095, -EINVAL,
	    "reserve, page size"),
	FIELD("file", HPZ_MSG_RESERVE, reserve.hold_ms, 0, 0,
	    "reserve, the daemon's default hold"),
};

/* Every case of field_cases that test checks. */
static void
expect_fields(const char *test)
{
	const struct field_case	*fc;
	struct hpz_msg		 m;
	size_t			 i;
	int			 n = 0;

	for (i = 0; i < sizeof(field_cases) / sizeof(field_cases[0]); i++) {
		fc = &field_cases[i];
		if (strcmp(fc->test, test) != 0)
			continue;
		n++;
		cr_assert_leq(fc->size, sizeof(fc->value), "%s", fc->what);
		make_valid(&m, fc->type);
		/* Little-endian: the low bytes of value fill the field. */
		memcpy((char *)&m + fc->off, &fc->value, fc->size);
		if (fc->want == 0)
			expect_valid(&m, fc->what);
		else
			expect_reject(&m, fc->want, fc->what);
	}
	cr_assert_gt(n, 0, "no field cases for %s", test);
}

/* A socket pair, and a pipe whose ends are the fds a message carries. */
struct link {
	int	sv[2];
	int	p[2];
};

static void
link_open(struct link *l)
{
	seqpacket_pair(l->sv);
	cr_assert_eq(pipe2(l->p, O_CLOEXEC), 0);
}

static void
link_close(struct link *l)
{
	close(l->p[0]);
	close(l->p[1]);
	close(l->sv[0]);
	close(l->sv[1]);
}

/*
 * A register carrying n fds (the pipe's ends in turn), sent with
 * proto_send, or for more than it allows with a sendmsg of our own.
 */
static void
link_send_register(struct link *l, struct hpz_msg_register *reg, int n)
{
	struct msghdr	 mh;
	struct iovec	 iov;
	struct cmsghdr	*c;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 253)];
	}		 cm;
	int		 fds[253], i;

	cr_assert_leq(n, 253);
	for (i = 0; i < n; i++)
		fds[i] = l->p[i % 2];
	make_register(reg);
	if (n <= 8) {
		cr_assert_eq(proto_send(l->sv[0], reg, sizeof(*reg), fds, n),
		    (ssize_t)sizeof(*reg));
		return;
	}
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = reg;
	iov.iov_len = sizeof(*reg);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	cr_assert_eq(sendmsg(l->sv[0], &mh, 0), (ssize_t)sizeof(*reg),
	    "sendmsg: %s", strerror(errno));
}

/* --- encoding ----------------------------------------------------------- */

Test(proto, init_fills_header_and_zeroes_body)
{
	struct hpz_msg_register	r;
	const unsigned char	*p = (const unsigned char *)&r;
	size_t			 i;

	memset(&r, 0xa5, sizeof(r));
	proto_init(&r, HPZ_MSG_REGISTER, sizeof(r), 0xdeadbeef);
	cr_assert_eq(r.hdr.magic, HPZ_MAGIC);
	cr_assert_eq(r.hdr.version, HPZ_PROTOCOL_VERSION);
	cr_assert_eq(r.hdr.type, HPZ_MSG_REGISTER);
	cr_assert_eq(r.hdr.len, sizeof(r));
	cr_assert_eq(r.hdr.seq, 0xdeadbeef);
	for (i = sizeof(r.hdr); i < sizeof(r); i++)
		cr_assert_eq(p[i], 0, "byte %zu not cleared", i);
}

Test(proto, size_of_each_type)
{
	cr_expect_eq(proto_size(HPZ_MSG_REGISTER),
	    sizeof(struct hpz_msg_register));
	cr_expect_eq(proto_size(HPZ_MSG_UNREGISTER),
	    sizeof(struct hpz_msg_range));
	cr_expect_eq(proto_size(HPZ_MSG_RESET), sizeof(struct hpz_msg_range));
	cr_expect_eq(proto_size(HPZ_MSG_STATUS),
	    sizeof(struct hpz_msg_header));
	cr_expect_eq(proto_size(HPZ_MSG_REPLY), sizeof(struct hpz_msg_reply));
	cr_expect_eq(proto_size(HPZ_MSG_STATUS_REPLY),
	    sizeof(struct hpz_msg_status_reply));
	cr_expect_eq(proto_size(HPZ_MSG_POOL_TAKE),
	    sizeof(struct hpz_msg_pool_take));
	cr_expect_eq(proto_size(HPZ_MSG_POOL_STATUS),
	    sizeof(struct hpz_msg_pool_status));
	cr_expect_eq(proto_size(HPZ_MSG_POOL_FILE),
	    sizeof(struct hpz_msg_pool_file));
	cr_expect_eq(proto_size(HPZ_MSG_POOL_STATUS_REPLY),
	    sizeof(struct hpz_msg_pool_status_reply));
	cr_expect_eq(proto_size(HPZ_MSG_RESERVE),
	    sizeof(struct hpz_msg_reserve));
	cr_expect_eq(proto_size(0), 0);
	cr_expect_eq(proto_size(11), 0);
	cr_expect_eq(proto_size(63), 0);
	cr_expect_eq(proto_size(69), 0);
	cr_expect_eq(proto_size(UINT16_MAX), 0);
}

Test(proto, type_names)
{
	cr_expect_str_eq(proto_type_name(HPZ_MSG_REGISTER), "register");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_UNREGISTER), "unregister");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_RESET), "reset");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_STATUS), "status");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_REPLY), "reply");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_STATUS_REPLY),
	    "status-reply");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_POOL_TAKE), "pool-take");
	cr_expect_str_eq(proto_type_name(HPZ_MSG_POOL_FILE), "pool-file");
	cr_expect_str_eq(proto_type_name(0), "unknown");
	cr_expect_str_eq(proto_type_name(69), "unknown");
	cr_expect_str_eq(proto_type_name(UINT16_MAX), "unknown");
}

/* --- framing ------------------------------------------------------------ */

Test(proto, valid_message_of_each_type)
{
	struct hpz_msg	m;
	size_t		i;

	for (i = 0; i < NTYPES; i++) {
		make_valid(&m, proto_types[i]);
		expect_valid(&m, proto_type_name(proto_types[i]));
		/* The reason buffer is optional. */
		cr_expect_eq(proto_validate(&m, NULL, 0), 0);
	}
}

Test(proto, short_message)
{
	static const size_t	lens[] = { 0, 1, 15 };
	struct hpz_msg		m;
	size_t			i;
	char			what[32], why[128];

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		make_valid(&m, HPZ_MSG_STATUS);
		m.len = lens[i];
		snprintf(what, sizeof(what), "%zu bytes", lens[i]);
		expect_reject(&m, -EBADMSG, what);
		/* Caught before any header field is read. */
		proto_validate(&m, why, sizeof(why));
		cr_expect_not_null(strstr(why, "short"), "%s: %s", what, why);
	}
	/* Without a reason buffer, the verdict is the same. */
	cr_expect_eq(proto_validate(&m, NULL, 0), -EBADMSG);
}

Test(proto, oversized_message)
{
	struct hpz_msg	m;

	make_valid(&m, HPZ_MSG_STATUS);
	m.len = HPZ_MSG_MAX + 1;
	m.u.hdr.len = HPZ_MSG_MAX + 1;
	expect_reject(&m, -EMSGSIZE, "HPZ_MSG_MAX + 1 bytes");
}

Test(proto, bad_magic)
{
	struct hpz_msg	m;
	size_t		i;

	for (i = 0; i < NTYPES; i++) {
		make_valid(&m, proto_types[i]);
		m.u.hdr.magic = HPZ_MAGIC ^ 0x01000000u;
		expect_reject(&m, -EBADMSG, proto_type_name(proto_types[i]));
	}
	make_valid(&m, HPZ_MSG_STATUS);
	m.u.hdr.magic = __builtin_bswap32(HPZ_MAGIC);	/* other endianness */
	expect_reject(&m, -EBADMSG, "byte-swapped magic");
}

Test(proto, wrong_version)
{
	struct hpz_msg	m;

	make_valid(&m, HPZ_MSG_STATUS);
	m.u.hdr.version = HPZ_PROTOCOL_VERSION + 1;
	expect_reject(&m, -EPROTONOSUPPORT, "next version");
	m.u.hdr.version = 0;
	expect_reject(&m, -EPROTONOSUPPORT, "version 0");
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.hdr.version = UINT16_MAX;
	expect_reject(&m, -EPROTONOSUPPORT, "register, version 65535");
}

Test(proto, unknown_type)
{
	static const uint16_t	types[] = { 0, 8, 63, 67, UINT16_MAX };
	struct hpz_msg		m;
	size_t			i;
	char			what[32];

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		make_valid(&m, HPZ_MSG_STATUS);
		m.u.hdr.type = types[i];
		snprintf(what, sizeof(what), "type %u", types[i]);
		expect_reject(&m, -EBADMSG, what);
	}
}

/* The header's len disagrees with what arrived, which is the right size. */
Test(proto, header_len_differs_from_received)
{
	struct hpz_msg	m;
	size_t		i;
	char		what[64];

	for (i = 0; i < NTYPES; i++) {
		make_valid(&m, proto_types[i]);
		m.u.hdr.len = (uint32_t)m.len + 1;
		snprintf(what, sizeof(what), "%s, header +1",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
		m.u.hdr.len = (uint32_t)m.len - 1;
		snprintf(what, sizeof(what), "%s, header -1",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
		m.u.hdr.len = 0;
		snprintf(what, sizeof(what), "%s, header 0",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
	}
}

/* Header and packet agree, but not with the type's size. */
Test(proto, received_len_differs_from_type_size)
{
	struct hpz_msg	m;
	size_t		i, want;
	char		what[64];

	for (i = 0; i < NTYPES; i++) {
		want = proto_size(proto_types[i]);
		make_valid(&m, proto_types[i]);
		m.len = want + 1;
		m.u.hdr.len = (uint32_t)m.len;
		snprintf(what, sizeof(what), "%s, one byte more",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);

		make_valid(&m, proto_types[i]);
		m.len = want - 1;
		m.u.hdr.len = (uint32_t)m.len;
		snprintf(what, sizeof(what), "%s, one byte less",
		    proto_type_name(proto_types[i]));
		/* A 15-byte status is short before it is the wrong size. */
		expect_reject(&m, -EBADMSG, what);

		/* A byte arrived beyond the header's len. */
		make_valid(&m, proto_types[i]);
		m.len = want + 1;
		snprintf(what, sizeof(what), "%s, trailing byte",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
	}
}

Test(proto, wrong_fd_count)
{
	struct hpz_msg	m;
	size_t		i;
	char		what[64];

	make_valid(&m, HPZ_MSG_REGISTER);
	m.nfds = 0;
	expect_reject(&m, -EBADMSG, "register with 0 fds");
	m.nfds = 1;
	expect_reject(&m, -EBADMSG, "register with 1 fd");
	m.nfds = 2;
	expect_reject(&m, -EBADMSG, "register with 2 fds");
	m.nfds = 4;
	expect_reject(&m, -EBADMSG, "register with 4 fds");
	m.nfds = 3 + 64;	/* what a truncated control message reads as */
	expect_reject(&m, -EBADMSG, "register with 67 fds");

	make_valid(&m, HPZ_MSG_POOL_FILE);
	m.nfds = 0;
	expect_reject(&m, -EBADMSG, "pool file without its fd");
	m.nfds = 2;
	expect_reject(&m, -EBADMSG, "pool file with 2 fds");

	for (i = 1; i < NTYPES; i++) {
		if (proto_types[i] == HPZ_MSG_POOL_FILE)
			continue;
		make_valid(&m, proto_types[i]);
		m.nfds = 1;
		snprintf(what, sizeof(what), "%s with 1 fd",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
		m.nfds = 2;
		snprintf(what, sizeof(what), "%s with 2 fds",
		    proto_type_name(proto_types[i]));
		expect_reject(&m, -EBADMSG, what);
	}
}

/* --- register fields ---------------------------------------------------- */

Test(proto, register_reserved_and_flags)
{
	expect_fields("reserved");
}

Test(proto, register_page_size)
{
	static const uint64_t	bad[] = { 0, 1, 2048, 4095, 3 * 4096,
				    4096 + 2048, PAGE_2M + 4096,
				    UINT64_MAX, 1ULL << 63 | 4096 };
	static const uint64_t	good[] = { 4096, 65536, PAGE_2M,
				    1024 * MiB };
	struct hpz_msg		m;
	size_t			i;
	char			what[64];

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make_valid(&m, HPZ_MSG_REGISTER);
		m.u.reg.page_size = bad[i];
		snprintf(what, sizeof(what), "page size %llu",
		    (unsigned long long)bad[i]);
		expect_reject(&m, -EINVAL, what);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		make_valid(&m, HPZ_MSG_REGISTER);
		m.u.reg.page_size = good[i];
		m.u.reg.addr = 0x7f0000000000ULL;	/* 1 GiB aligned */
		m.u.reg.len = good[i] * 2;
		m.u.reg.offset = good[i];
		snprintf(what, sizeof(what), "page size %llu",
		    (unsigned long long)good[i]);
		expect_valid(&m, what);
	}
}

Test(proto, register_unaligned)
{
	expect_fields("unaligned");
}

Test(proto, register_empty_and_wrapping)
{
	struct hpz_msg	m;

	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.len = 0;
	expect_reject(&m, -EINVAL, "len 0");

	/* Ends exactly at 2^64: addr + len wraps to 0. */
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.addr = 0 - PAGE_2M;
	m.u.reg.len = PAGE_2M;
	expect_reject(&m, -EINVAL, "range ending at 2^64");
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.addr = 0 - PAGE_2M;
	m.u.reg.len = 2 * PAGE_2M;
	expect_reject(&m, -EINVAL, "range wrapping past 2^64");

	/* The last page below 2^64 that does not reach it is fine. */
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.addr = 0 - 2 * PAGE_2M;
	m.u.reg.len = PAGE_2M;
	expect_valid(&m, "range ending one page below 2^64");
}

Test(proto, register_offset_overflow)
{
	struct hpz_msg	m;
	uint64_t	top = (uint64_t)INT64_MAX & ~(PAGE_2M - 1);

	/* The largest file offset an off_t can end at is accepted. */
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.offset = top - PAGE_2M;
	m.u.reg.len = PAGE_2M;
	expect_valid(&m, "offset + len just below 2^63");

	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.offset = top;
	m.u.reg.len = PAGE_2M;
	expect_reject(&m, -EINVAL, "offset + len == 2^63");
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.offset = top;
	m.u.reg.len = 64 * MiB;
	expect_reject(&m, -EINVAL, "offset + len past 2^63");
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.offset = 0 - PAGE_2M;
	m.u.reg.len = 4 * PAGE_2M;
	expect_reject(&m, -EINVAL, "offset + len past 2^64");
}

/*
 * offset + len must fit an off_t even when len alone does not: the check
 * "offset > INT64_MAX - len" is done in uint64_t and wraps for len > 2^63.
 */
Test(proto, register_offset_overflow_huge_len)
{
	struct hpz_msg	m;

	/* addr 0: addr + len does not wrap, only offset + len is wrong. */
	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.addr = 0;
	m.u.reg.len = 1ULL << 63;
	m.u.reg.offset = 0;
	expect_reject(&m, -EINVAL, "offset 0 + len 2^63 (past INT64_MAX)");

	make_valid(&m, HPZ_MSG_REGISTER);
	m.u.reg.addr = 0;
	m.u.reg.len = 0xc000000000000000ULL;
	m.u.reg.offset = 0x4000000000000000ULL;
	expect_reject(&m, -EINVAL, "offset 2^62 + len 3*2^62 (wraps to 0)");
}

/* --- range, reply and status-reply fields ------------------------------- */

Test(proto, range_fields)
{
	static const uint16_t	types[] = { HPZ_MSG_UNREGISTER, HPZ_MSG_RESET };
	struct hpz_msg		m;
	size_t			i;

	for (i = 0; i < 2; i++) {
		cr_log_info("%s", proto_type_name(types[i]));
		make_valid(&m, types[i]);
		m.u.range.len = 0;
		expect_reject(&m, -EINVAL, "len 0");
		make_valid(&m, types[i]);
		m.u.range.addr += 2048;
		expect_reject(&m, -EINVAL, "addr not 4 KiB aligned");
		make_valid(&m, types[i]);
		m.u.range.len = 4096 + 1;
		expect_reject(&m, -EINVAL, "len not 4 KiB aligned");
		make_valid(&m, types[i]);
		m.u.range.addr = 0 - 4096ULL;
		m.u.range.len = 4096;
		expect_reject(&m, -EINVAL, "range ending at 2^64");
		make_valid(&m, types[i]);
		m.u.range.addr = 0 - 4096ULL;
		m.u.range.len = 2 * 4096;
		expect_reject(&m, -EINVAL, "range wrapping past 2^64");

		/* Only 4 KiB alignment is known without the region. */
		make_valid(&m, types[i]);
		m.u.range.addr = 0 - 2 * 4096ULL;
		m.u.range.len = 4096;
		expect_valid(&m, "last page below 2^64");
		m.u.range.addr = 4096;
		m.u.range.len = 0 - 2 * 4096ULL;
		expect_valid(&m, "huge range ending below 2^64");
	}
}

Test(proto, reply_fields)
{
	struct hpz_msg	m;

	make_valid(&m, HPZ_MSG_REPLY);
	m.u.reply.error = 1;
	expect_reject(&m, -EBADMSG, "error 1");
	m.u.reply.error = INT32_MAX;
	expect_reject(&m, -EBADMSG, "error INT32_MAX");
	m.u.reply.error = -4096;
	expect_reject(&m, -EBADMSG, "error -4096");
	m.u.reply.error = INT32_MIN;
	expect_reject(&m, -EBADMSG, "error INT32_MIN");
	m.u.reply.error = -4095;
	expect_valid(&m, "error -4095");
	m.u.reply.error = -EINVAL;
	expect_valid(&m, "error -EINVAL");

	make_valid(&m, HPZ_MSG_REPLY);
	m.u.reply.reserved = 1;
	expect_reject(&m, -EBADMSG, "reserved 1");

	make_valid(&m, HPZ_MSG_REPLY);
	memset(m.u.reply.text, 'x', sizeof(m.u.reply.text));
	expect_reject(&m, -EBADMSG, "text without NUL");
	m.u.reply.text[sizeof(m.u.reply.text) - 1] = '\0';
	expect_valid(&m, "text filling the field, NUL last");
}

Test(proto, status_reply_version)
{
	struct hpz_msg	m;

	make_valid(&m, HPZ_MSG_STATUS_REPLY);
	memset(m.u.status.version, 'v', sizeof(m.u.status.version));
	expect_reject(&m, -EBADMSG, "version without NUL");
	m.u.status.version[sizeof(m.u.status.version) - 1] = '\0';
	expect_valid(&m, "version filling the field, NUL last");
	memset(m.u.status.version, 0, sizeof(m.u.status.version));
	expect_valid(&m, "empty version");
}

/* --- over a socket ------------------------------------------------------ */

Test(proto, roundtrip_register_with_fds)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct stat		st_mem, st_pipe, st;
	struct stat		st_state;
	int			sv[2], p[2], fds[3], mfd, sfd;
	ssize_t			n;

	seqpacket_pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	mfd = memfd_create("test-proto", MFD_CLOEXEC);
	cr_assert_geq(mfd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(mfd, 8192), 0);
	sfd = memfd_create("test-proto-state", MFD_CLOEXEC);
	cr_assert_geq(sfd, 0, "memfd_create: %s", strerror(errno));
	fds[0] = p[0];
	fds[1] = mfd;
	fds[2] = sfd;

	make_register(&reg);
	n = proto_send(sv[0], &reg, sizeof(reg), fds, 3);
	cr_assert_eq(n, (ssize_t)sizeof(reg), "proto_send: %zd (%s)", n,
	    strerror(errno));
	n = proto_recv(sv[1], &m);
	cr_assert_eq(n, (ssize_t)sizeof(reg), "proto_recv: %zd (%s)", n,
	    strerror(errno));
	cr_assert_eq(m.len, sizeof(reg));
	cr_assert_arr_eq(m.u.bytes, &reg, sizeof(reg));
	cr_assert_eq(m.nfds, 3);
	expect_valid(&m, "received register");

	/* New descriptors for the same files, in the order sent. */
	cr_assert_neq(m.fds[0], p[0]);
	cr_assert_neq(m.fds[1], mfd);
	cr_assert_neq(m.fds[0], m.fds[1]);
	cr_assert_eq(fstat(p[0], &st_pipe), 0);
	cr_assert_eq(fstat(mfd, &st_mem), 0);
	cr_assert_eq(fstat(m.fds[0], &st), 0);
	cr_assert_eq(st.st_ino, st_pipe.st_ino);
	cr_assert(S_ISFIFO(st.st_mode));
	cr_assert_eq(fstat(m.fds[1], &st), 0);
	cr_assert_eq(st.st_ino, st_mem.st_ino);
	cr_assert_eq(st.st_size, 8192);
	cr_assert_eq(fstat(sfd, &st_state), 0);
	cr_assert_eq(fstat(m.fds[2], &st), 0);
	cr_assert_eq(st.st_ino, st_state.st_ino);
	/* Received close-on-exec. */
	cr_assert(fcntl(m.fds[0], F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(m.fds[1], F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(m.fds[2], F_GETFD) & FD_CLOEXEC);

	proto_close_fds(&m);
	close(p[0]);
	close(p[1]);
	close(mfd);
	close(sfd);
	close(sv[0]);
	close(sv[1]);
}

Test(proto, roundtrip_without_fds)
{
	struct hpz_msg_range	req;
	struct hpz_msg		m;
	int			sv[2];

	seqpacket_pair(sv);
	proto_init(&req, HPZ_MSG_RESET, sizeof(req), 42);
	req.addr = 0x10000;
	req.len = 0x20000;
	cr_assert_eq(proto_send(sv[0], &req, sizeof(req), NULL, 0),
	    (ssize_t)sizeof(req));
	cr_assert_eq(proto_recv(sv[1], &m), (ssize_t)sizeof(req));
	cr_assert_eq(m.nfds, 0);
	cr_assert_eq(m.u.hdr.seq, 42);
	cr_assert_eq(m.u.range.addr, 0x10000);
	cr_assert_eq(m.u.range.len, 0x20000);
	expect_valid(&m, "received reset");
	close(sv[0]);
	close(sv[1]);
}

Test(proto, excess_fds_are_closed)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct link		l;
	int			before, after;

	link_open(&l);
	link_send_register(&l, &reg, 5);

	before = count_fds();
	cr_assert_eq(proto_recv(l.sv[1], &m), (ssize_t)sizeof(reg));
	cr_assert_eq(m.nfds, 5, "all fds counted");
	cr_assert_eq(count_fds(), before + 3, "only three fds kept");
	cr_assert(fd_is_open(m.fds[0]));
	cr_assert(fd_is_open(m.fds[1]));
	cr_assert(fd_is_open(m.fds[2]));
	expect_reject(&m, -EBADMSG, "register with 5 fds");
	proto_close_fds(&m);
	after = count_fds();
	cr_assert_eq(after, before, "fd count grew from %d to %d", before,
	    after);
	link_close(&l);
}

/* What the closer hook was handed, in order. */
static int	closer_fds[300];
static int	closer_n;

static void
closer_record(int fd)
{
	if (closer_n < (int)(sizeof(closer_fds) / sizeof(closer_fds[0])))
		closer_fds[closer_n++] = fd;
	close(fd);
}

/* The daemon's reaper gets every fd it does not keep, none of them closed. */
Test(proto, closer_gets_what_is_not_kept)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct link		l;
	int			kept[3], before, i;

	link_open(&l);
	link_send_register(&l, &reg, 5);
	closer_n = 0;
	proto_set_closer(closer_record);
	before = count_fds();
	cr_assert_eq(proto_recv(l.sv[1], &m), (ssize_t)sizeof(reg));
	cr_assert_eq(closer_n, 2, "the two extra fds, not %d", closer_n);
	cr_assert_eq(count_fds(), before + 3);
	for (i = 0; i < 3; i++)
		kept[i] = m.fds[i];
	proto_close_fds(&m);
	cr_assert_eq(closer_n, 5, "kept fds not handed over: %d", closer_n);
	for (i = 0; i < 3; i++)
		cr_assert_eq(closer_fds[2 + i], kept[i]);
	cr_assert_eq(count_fds(), before);
	proto_set_closer(NULL);
	link_close(&l);
}

/*
 * A message with as many fds as the kernel lets one carry (SCM_MAX_FD,
 * 253): all are received, so that none is dropped by the kernel inside
 * recvmsg (where its release would run on the receiving thread), and all
 * but the three kept go to the closer.
 */
Test(proto, every_fd_of_a_full_message_is_received)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct link		l;
	int			before;

	link_open(&l);
	link_send_register(&l, &reg, 253);
	closer_n = 0;
	proto_set_closer(closer_record);
	before = count_fds();
	cr_assert_eq(proto_recv(l.sv[1], &m), (ssize_t)sizeof(reg));
	cr_assert_eq(m.nfds, 253, "%d fds counted, 253 sent", m.nfds);
	cr_assert_eq(closer_n, 250, "%d handed to the closer", closer_n);
	expect_reject(&m, -EBADMSG, "register with 253 fds");
	proto_close_fds(&m);
	cr_assert_eq(count_fds(), before);
	proto_set_closer(NULL);
	link_close(&l);
}

Test(proto, close_fds_closes_kept)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct link		l;
	int			kept[2];

	link_open(&l);
	link_send_register(&l, &reg, 2);
	cr_assert_eq(proto_recv(l.sv[1], &m), (ssize_t)sizeof(reg));
	cr_assert_eq(m.nfds, 2);
	kept[0] = m.fds[0];
	kept[1] = m.fds[1];
	proto_close_fds(&m);
	cr_assert_eq(fcntl(kept[0], F_GETFD), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(fcntl(kept[1], F_GETFD), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(m.nfds, 0);
	cr_assert_eq(m.fds[0], -1);
	cr_assert_eq(m.fds[1], -1);
	/* The originals are untouched. */
	cr_assert(fd_is_open(l.p[0]));
	cr_assert(fd_is_open(l.p[1]));
	/* A second call has nothing left to close. */
	proto_close_fds(&m);
	cr_assert(fd_is_open(l.p[0]));
	link_close(&l);
}

Test(proto, oversized_packet)
{
	unsigned char	buf[HPZ_MSG_MAX + 100];
	struct hpz_msg	m;
	char		why[128];
	int		sv[2];

	seqpacket_pair(sv);
	proto_init(buf, HPZ_MSG_STATUS, sizeof(buf), 1);
	cr_assert_eq(proto_send(sv[0], buf, sizeof(buf), NULL, 0),
	    (ssize_t)sizeof(buf));
	cr_assert_eq(proto_recv(sv[1], &m), HPZ_MSG_MAX + 1);
	cr_assert_eq(m.len, HPZ_MSG_MAX + 1);
	cr_assert_eq(proto_validate(&m, why, sizeof(why)), -EMSGSIZE);
	cr_assert_neq(why[0], '\0');
	close(sv[0]);
	close(sv[1]);
}

Test(proto, recv_eof_and_empty)
{
	struct hpz_msg	m;
	int		sv[2];

	seqpacket_pair(sv);
	/* Nothing queued: the daemon's loop must see EAGAIN, not block. */
	cr_assert_eq(proto_recv(sv[1], &m), -1);
	cr_assert_eq(errno, EAGAIN);
	close(sv[0]);
	cr_assert_eq(proto_recv(sv[1], &m), 0);
	cr_assert_eq(m.nfds, 0);
	close(sv[1]);
}

Test(proto, send_fd_count_limits)
{
	struct hpz_msg_header	hdr;
	int			sv[2], fds[9], i;

	seqpacket_pair(sv);
	for (i = 0; i < 9; i++)
		fds[i] = sv[0];
	proto_init(&hdr, HPZ_MSG_STATUS, sizeof(hdr), 1);
	errno = 0;
	cr_assert_eq(proto_send(sv[0], &hdr, sizeof(hdr), fds, 9), -1);
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_eq(proto_send(sv[0], &hdr, sizeof(hdr), fds, -1), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(proto_send(sv[0], &hdr, sizeof(hdr), fds, 8),
	    (ssize_t)sizeof(hdr));
	close(sv[0]);
	close(sv[1]);
}

/*
 * The daemon reuses one struct hpz_msg for a batch of reads and hands the
 * fds of a good register to the region (nfds = 0, fds[] left as they were).
 * When the kernel cannot install a later message's fds (the daemon at its
 * fd limit), recvmsg sets MSG_CTRUNC with none stored; proto_recv marks
 * the message fds_lost (validated as EMFILE, not as a sender of too many),
 * and proto_close_fds must not close the stale fds[] of the earlier
 * message: they belong to a live region.
 */
Test(proto, truncated_fds_leave_earlier_fds_alone)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct rlimit		old, low;
	int			sv[2], a[2], b[2], first[2], fd;
	ssize_t			n;
	int			rlerr;

	seqpacket_pair(sv);
	cr_assert_eq(pipe2(a, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(b, O_CLOEXEC), 0);
	make_register(&reg);

	cr_assert_eq(proto_send(sv[0], &reg, sizeof(reg), a, 2),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(proto_recv(sv[1], &m), (ssize_t)sizeof(reg));
	cr_assert_eq(m.nfds, 2);
	first[0] = m.fds[0];
	first[1] = m.fds[1];
	m.nfds = 0;		/* as control_register: the region owns them */

	cr_assert_eq(proto_send(sv[0], &reg, sizeof(reg), b, 2),
	    (ssize_t)sizeof(reg));
	/* Every fd number below the lowest free one is taken: cap there. */
	fd = dup(sv[1]);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)fd;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	n = proto_recv(sv[1], &m);
	rlerr = setrlimit(RLIMIT_NOFILE, &old);
	cr_assert_eq(rlerr, 0);
	cr_assert_eq(n, (ssize_t)sizeof(reg));
	/* Our table full, not a sender of too many: said as such. */
	cr_assert(m.fds_lost, "truncation not noticed");
	cr_assert_eq(m.nfds, 0, "%d fds seen with no fd free", m.nfds);
	cr_assert_eq(proto_validate(&m, NULL, 0), -EMFILE);

	proto_close_fds(&m);
	cr_expect(fd_is_open(first[0]), "proto_close_fds closed fd %d, "
	    "received with the previous message, not this one", first[0]);
	cr_expect(fd_is_open(first[1]), "proto_close_fds closed fd %d, "
	    "received with the previous message, not this one", first[1]);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	close(sv[0]);
	close(sv[1]);
}

Test(proto, policy_fields)
{
	struct hpz_msg		m;

	make_valid(&m, HPZ_MSG_POLICY);
	expect_valid(&m, "policy as made");
	expect_fields("policy");
}

Test(proto, regions_reply_count)
{
	struct hpz_msg		m;

	make_valid(&m, HPZ_MSG_REGIONS_REPLY);
	expect_valid(&m, "regions reply as made");
	expect_fields("regions");
}

Test(proto, status_reply_kernel_names_terminated)
{
	struct hpz_msg	m;
	char		why[128];

	make_valid(&m, HPZ_MSG_STATUS_REPLY);
	memset(m.u.status.clear_kernel, 'x', sizeof(m.u.status.clear_kernel));
	cr_assert_eq(proto_validate(&m, why, sizeof(why)), -EBADMSG);
	make_valid(&m, HPZ_MSG_STATUS_REPLY);
	memset(m.u.status.hot_kernel, 'x', sizeof(m.u.status.hot_kernel));
	cr_assert_eq(proto_validate(&m, why, sizeof(why)), -EBADMSG);
}

Test(proto, empty_message_with_fds_closes_them)
{
	struct hpz_msg	m;
	int		sv[2], fds[2], before;
	char		c = 0;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
	    0);
	before = count_fds();
	fds[0] = memfd_create("a", MFD_CLOEXEC);
	fds[1] = memfd_create("b", MFD_CLOEXEC);
	/* A zero-length packet may still carry descriptors. */
	cr_assert_eq(proto_send(sv[0], &c, 0, fds, 2), 0);
	close(fds[0]);
	close(fds[1]);
	cr_assert_eq(proto_recv(sv[1], &m), 0);
	cr_assert_eq(m.nfds, 0);
	cr_assert_eq(count_fds(), before, "received fds were kept");
	close(sv[0]);
	close(sv[1]);
}

/* --- the pool ------------------------------------------------------------ */

Test(proto, pool_take_fields)
{
	struct hpz_msg		m;

	expect_fields("take");
	make_valid(&m, HPZ_MSG_POOL_TAKE);
	memset(m.u.pool_take.name, 'x', sizeof(m.u.pool_take.name));
	expect_reject(&m, -EINVAL, "pool take, name not terminated");
}

Test(proto, pool_file_and_status_fields)
{
	expect_fields("file");
}

/*
 * A register sent with more fds than it wants, some lost at our fd limit:
 * still a sender of too many (EBADMSG: the client is dropped), not our
 * table's fault (EMFILE would keep a client that can send it again).
 */
Test(proto, too_many_fds_lost_at_our_limit_is_still_a_bad_message)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct rlimit		old, low;
	int			sv[2], p[2], q[2], five[5], fd;
	ssize_t			n;
	int			rlerr;

	seqpacket_pair(sv);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(q, O_CLOEXEC), 0);
	five[0] = p[0];
	five[1] = p[1];
	five[2] = q[0];
	five[3] = q[1];
	five[4] = p[0];
	make_register(&reg);
	cr_assert_eq(proto_send(sv[0], &reg, sizeof(reg), five, 5),
	    (ssize_t)sizeof(reg));
	/* Room for three below the limit (the lowest free numbers). */
	fd = dup(sv[1]);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)fd + HPZ_REGISTER_NFDS;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	n = proto_recv(sv[1], &m);
	rlerr = setrlimit(RLIMIT_NOFILE, &old);
	cr_assert_eq(rlerr, 0);
	cr_assert_eq(n, (ssize_t)sizeof(reg));
	cr_assert(m.fds_lost, "truncation not noticed");
	cr_assert_eq(m.nfds, HPZ_REGISTER_NFDS, "%d fds seen", m.nfds);
	cr_assert_eq(proto_validate(&m, NULL, 0), -EBADMSG);
	proto_close_fds(&m);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
	close(sv[0]);
	close(sv[1]);
}
