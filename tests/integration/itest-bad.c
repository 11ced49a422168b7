/*
 * itest-bad.c - hostile and broken clients speaking the raw protocol: each
 * gets an error (or is dropped) and the daemon keeps serving the others.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-protocol.h"

/* Wait for one reply; returns its length, 0 on EOF. */
static ssize_t
bad_recv(int fd, struct hpz_msg *m)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };
	ssize_t		n;

	cr_assert_eq(poll(&pfd, 1, 5000), 1, "no answer from the daemon");
	n = proto_recv(fd, m);
	cr_assert_geq(n, 0, "recv: %s", strerror(errno));
	return (n);
}

/* Expect an error reply with this status, then (if dropped) EOF. */
static void
bad_expect(int fd, int error, int dropped)
{
	struct hpz_msg	m;
	char		why[128];

	cr_assert_gt(bad_recv(fd, &m), 0, "connection closed without reply");
	cr_assert_eq(proto_validate(&m, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(m.u.hdr.type, HPZ_MSG_REPLY);
	cr_assert_eq(m.u.reply.error, error, "got %d (%s)", m.u.reply.error,
	    m.u.reply.text);
	cr_assert_neq(m.u.reply.text[0], '\0', "error without a reason");
	if (dropped)
		cr_assert_eq(bad_recv(fd, &m), 0, "connection not dropped");
}

/* The daemon still answers a well-behaved client. */
static void
bad_daemon_alive(void)
{
	struct hpz_status	st;

	cr_assert_eq(hpz_status(&st), 0, "daemon stopped answering");
}

static void
bad_send_raw(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	cr_assert_eq(proto_send(fd, buf, len, fds, nfds), (ssize_t)len,
	    "send: %s", strerror(errno));
}

Test(bad, garbage_bytes)
{
	char	junk[100];
	int	fd = itest_raw_connect(), i;

	for (i = 0; i < (int)sizeof(junk); i++)
		junk[i] = (char)(i * 37 + 11);
	bad_send_raw(fd, junk, sizeof(junk), NULL, 0);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);
	bad_daemon_alive();
}

Test(bad, oversized_message)
{
	char	big[HPZ_MSG_MAX + 200];
	int	fd = itest_raw_connect();

	memset(big, 0, sizeof(big));
	proto_init(big, HPZ_MSG_STATUS, sizeof(struct hpz_msg_header), 1);
	bad_send_raw(fd, big, sizeof(big), NULL, 0);
	bad_expect(fd, -EMSGSIZE, 1);
	close(fd);
	bad_daemon_alive();
}

Test(bad, short_message)
{
	uint32_t	magic = HPZ_MAGIC;
	int		fd = itest_raw_connect();

	bad_send_raw(fd, &magic, sizeof(magic), NULL, 0);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);
	bad_daemon_alive();
}

Test(bad, wrong_protocol_version)
{
	struct hpz_msg_header	h;
	int			fd = itest_raw_connect();

	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 7);
	h.version = HPZ_PROTOCOL_VERSION + 1;
	bad_send_raw(fd, &h, sizeof(h), NULL, 0);
	bad_expect(fd, -EPROTONOSUPPORT, 1);
	close(fd);
}

Test(bad, unknown_type_and_reply_type)
{
	struct hpz_msg_header	h;
	struct hpz_msg_reply	rep;
	int			fd;

	fd = itest_raw_connect();
	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 1);
	h.type = 999;
	bad_send_raw(fd, &h, sizeof(h), NULL, 0);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);

	fd = itest_raw_connect();
	proto_init(&rep, HPZ_MSG_REPLY, sizeof(rep), 2);
	bad_send_raw(fd, &rep, sizeof(rep), NULL, 0);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);
	bad_daemon_alive();
}

Test(bad, length_mismatch)
{
	struct hpz_msg_range	rg;
	int			fd = itest_raw_connect();

	proto_init(&rg, HPZ_MSG_RESET, sizeof(rg), 3);
	rg.hdr.len = sizeof(rg) + 8;
	bad_send_raw(fd, &rg, sizeof(rg), NULL, 0);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);
}

Test(bad, unexpected_fds_are_closed)
{
	struct hpz_msg_header	h;
	int			fd, before, after, fds[3], i;

	before = itest_daemon_fds();
	if (before < 0)
		cr_skip_test("HPZD_PID not set: cannot count daemon fds");
	fd = itest_raw_connect();
	for (i = 0; i < 3; i++)
		fds[i] = memfd_create("junk", MFD_CLOEXEC);
	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 4);
	bad_send_raw(fd, &h, sizeof(h), fds, 3);
	bad_expect(fd, -EBADMSG, 1);
	close(fd);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	for (i = 0; i < 50; i++) {
		if ((after = itest_daemon_fds()) == before)
			break;
		usleep(20 * 1000);
	}
	cr_assert_eq(after, before, "daemon fds %d -> %d", before, after);
}

Test(bad, hundreds_of_fds)
{
	struct hpz_msg_register	reg;
	int			fd, before, after, i, j, many[200];

	before = itest_daemon_fds();
	if (before < 0)
		cr_skip_test("HPZD_PID not set: cannot count daemon fds");
	for (i = 0; i < 200; i++)
		many[i] = memfd_create("junk", MFD_CLOEXEC);
	fd = itest_raw_connect();
	proto_init(&reg, HPZ_MSG_REGISTER, sizeof(reg), 5);
	/* proto_send caps at 8: build the flood by sending in batches. */
	for (j = 0; j < 200; j += 8)
		(void)proto_send(fd, &reg, sizeof(reg), many + j, 8);
	close(fd);
	for (i = 0; i < 200; i++)
		close(many[i]);
	for (i = 0; i < 100; i++) {
		if ((after = itest_daemon_fds()) == before)
			break;
		usleep(20 * 1000);
	}
	cr_assert_eq(after, before, "daemon fds %d -> %d", before, after);
	bad_daemon_alive();
}

/* A register request for a real mapping, with chosen fds. */
static void
bad_register(int sock, struct hpz_region *r, int uffd, int fd,
    uint64_t page, uint64_t features, uint64_t ioctls, int error)
{
	struct hpz_msg_register	reg;
	int			fds[3] = { uffd, fd, itest_state_memfd(r->len /
				    page) };

	proto_init(&reg, HPZ_MSG_REGISTER, sizeof(reg), 9);
	reg.addr = (uintptr_t)r->addr;
	reg.len = r->len;
	reg.offset = 0;
	reg.page_size = page;
	reg.uffd_features = features;
	reg.uffd_ioctls = ioctls;
	bad_send_raw(sock, &reg, sizeof(reg), fds, 3);
	close(fds[2]);
	bad_expect(sock, error, 0);
}

Test(bad, register_with_bad_fds_keeps_connection)
{
	struct hpz_region	r;
	struct hpz_msg_header	h;
	struct hpz_msg		m;
	uint64_t		feat, ioc;
	char			path[] = "/tmp/hpz-bad-XXXXXX";
	int			sock, uffd, efd, ro, reg_fd;

	itest_need_pages(2048, 2);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB, HPZ_PAGE_2M), 0);
	uffd = itest_make_uffd(r.addr, r.len, &feat, &ioc);
	sock = itest_raw_connect();

	/* Not a userfaultfd. */
	efd = memfd_create("notuffd", MFD_CLOEXEC);
	bad_register(sock, &r, efd, r.fd, 2 * MiB, feat, ioc, -EINVAL);
	/* Backing fd not read-write. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", r.fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(ro, 0);
	bad_register(sock, &r, uffd, ro, 2 * MiB, feat, ioc, -EINVAL);
	/* Backing file on a regular filesystem. */
	strcpy(path, "/tmp/hpz-bad-XXXXXX");
	reg_fd = mkstemp(path);
	unlink(path);
	cr_assert_eq(ftruncate(reg_fd, 2 * MiB), 0);
	bad_register(sock, &r, uffd, reg_fd, 2 * MiB, feat, ioc, -EINVAL);
	/* Page size that is not the file's. */
	bad_register(sock, &r, uffd, r.fd, 4096, feat, ioc, -EINVAL);
	/* A uffd without minor-fault support claimed. */
	bad_register(sock, &r, uffd, r.fd, 2 * MiB, 0, ioc, -ENOTSUP);

	/* Still connected: a status request is answered. */
	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 10);
	bad_send_raw(sock, &h, sizeof(h), NULL, 0);
	cr_assert_gt(bad_recv(sock, &m), 0);
	cr_assert_eq(m.u.hdr.type, HPZ_MSG_STATUS_REPLY);
	cr_assert_eq(m.u.hdr.seq, 10);

	/* And the same fds, described properly, register. */
	bad_register(sock, &r, uffd, r.fd, 2 * MiB, feat, ioc, 0);
	close(sock);
	close(efd);
	close(ro);
	close(reg_fd);
	close(uffd);
	hpz_region_destroy(&r);
}

Test(bad, reset_of_another_connections_region)
{
	struct hpz_region	r;
	struct hpz_msg_range	rg;
	int			sock, error;

	itest_need_pages(2048, 2);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB, HPZ_PAGE_2M), 0);
	error = hpz_register(&r);
	cr_assert_eq(error, 0, "%s", hpz_last_error());
	memset(r.addr, 0x5a, r.len);
	/* Another connection names our range: it is not its region. */
	sock = itest_raw_connect();
	proto_init(&rg, HPZ_MSG_RESET, sizeof(rg), 11);
	rg.addr = (uintptr_t)r.addr;
	rg.len = r.len;
	bad_send_raw(sock, &rg, sizeof(rg), NULL, 0);
	bad_expect(sock, -ENXIO, 0);
	proto_init(&rg, HPZ_MSG_UNREGISTER, sizeof(rg), 12);
	rg.addr = (uintptr_t)r.addr;
	rg.len = r.len;
	bad_send_raw(sock, &rg, sizeof(rg), NULL, 0);
	bad_expect(sock, -ENXIO, 0);
	close(sock);
	cr_assert_eq(madvise(r.addr, r.len, MADV_DONTNEED), 0);
	cr_assert_eq(((unsigned char *)r.addr)[12345], 0x5a,
	    "another connection's request touched our data");
	hpz_region_destroy(&r);
}

Test(bad, bad_client_does_not_disturb_others)
{
	struct hpz_region	r;
	size_t			first;
	char			junk[64];
	int			sock, i;

	itest_need_pages(2048, 8);
	cr_assert_eq(hpz_region_create(&r, 8 * MiB, HPZ_PAGE_2M), 0);
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	memset(r.addr, 0x33, r.len);
	for (i = 0; i < 20; i++) {
		sock = itest_raw_connect();
		memset(junk, i, sizeof(junk));
		(void)proto_send(sock, junk, sizeof(junk), NULL, 0);
		close(sock);
	}
	cr_assert_eq(hpz_reset(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(itest_count_nonzero(r.addr, r.len, &first), 0);
	hpz_region_destroy(&r);
}

Test(bad, flood_of_requests_without_reading)
{
	struct hpz_msg_header	h;
	int			sock, i;

	sock = itest_raw_connect();
	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 1);
	fcntl(sock, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 5000; i++)
		if (proto_send(sock, &h, sizeof(h), NULL, 0) == -1)
			break;
	close(sock);
	bad_daemon_alive();
}

Test(bad, mapping_that_is_not_the_clients_own)
{
	struct hpz_region	 r, other, far;
	uint64_t		 feat, ioc;
	int			 sock, uffd;

	itest_need_pages(2048, 4);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB, HPZ_PAGE_2M), 0);
	cr_assert_eq(hpz_region_create(&other, 2 * MiB, HPZ_PAGE_2M), 0);
	uffd = itest_make_uffd(r.addr, r.len, &feat, &ioc);
	sock = itest_raw_connect();
	/* The uffd covers r, but the file passed backs another mapping. */
	bad_register(sock, &r, uffd, other.fd, 2 * MiB, feat, ioc, -EINVAL);
	/* A range of ours that maps nothing at all. */
	far = r;
	far.addr = (char *)r.addr + 64 * MiB;
	bad_register(sock, &far, uffd, r.fd, 2 * MiB, feat, ioc, -EINVAL);
	/* The real thing is accepted. */
	bad_register(sock, &r, uffd, r.fd, 2 * MiB, feat, ioc, 0);
	close(sock);
	close(uffd);
	hpz_region_destroy(&other);
	hpz_region_destroy(&r);
}
