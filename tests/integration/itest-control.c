/*
 * itest-control.c - the control plane never waits on a client.  Each
 * hostile client runs in its own process beside an honest one (register,
 * fault, verify zero, write, reset, verify, unregister, in a loop), against
 * the daemon run.sh started: the honest client's rounds must keep being
 * answered within a generous liveness bound, every byte it reads must be
 * zero, and the daemon must still be the same process.  The attacks: a
 * client holding its own state memfd's server lock and registering it
 * again and again; a TCP socket with SO_LINGER and a full send queue
 * passed as a backing fd, as an extra fd, and left in flight in a
 * connection that gets dropped; a sparse 1 TiB region of 4 KiB pages
 * followed by a flood of status requests.  Also: limits as status shows
 * them, and a region moved whole with mremap, then reset, unregistered and
 * taken across a daemon restart.  Latencies are printed, not asserted.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/un.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-protocol.h"
#include "hpz-state.h"

/* An honest round that takes this long is stalled, not slow. */
#define CTL_BOUND_MS	5000
/* How long each attack runs beside the honest client. */
#define CTL_ATTACK_MS	4000
#define CTL_ROUNDS_MAX	100000

/* One round of the honest client, as it reports it. */
struct ctl_round {
	int	status;		/* 0 a round, 1 finished, -1 failed */
	double	reg_ms;		/* hpz_register */
	double	fault_ms;	/* first touch of the region */
	double	reset_ms;	/* hpz_reset */
	char	why[160];
};

struct ctl_figures {
	int	rounds;
	double	reg[CTL_ROUNDS_MAX / 100];
	double	fault_max, reset_max, round_max;
	int	nreg;
};

/* The daemon run.sh started is alive and still the same process. */
static void
ctl_daemon_same(void)
{
	const char	*p = getenv("HPZD_PID");
	char		 path[64], buf[512], *q;
	FILE		*f;

	if (p == NULL)
		return;
	cr_assert_eq(kill(atoi(p), 0), 0, "the daemon (pid %s) is gone", p);
	snprintf(path, sizeof(path), "/proc/%s/stat", p);
	cr_assert_not_null(f = fopen(path, "r"));
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_not_null(q = strrchr(buf, ')'));
	cr_assert(q[2] != 'Z' && q[2] != 'X', "the daemon (pid %s) died", p);
}

/* ---- the honest client -------------------------------------------------- */

static void
ctl_report(int fd, const struct ctl_round *r)
{
	if (write(fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(4);
}

static int
ctl_fail(int fd, struct ctl_round *r, const char *what)
{
	r->status = -1;
	snprintf(r->why, sizeof(r->why), "%s: %s", what, hpz_last_error());
	ctl_report(fd, r);
	return (1);
}

/* Flags the honest client registers with (HPZ_DISCARD for some tests). */
static unsigned int	ctl_honest_flags;

/* Rounds for ms milliseconds, each reported on fd. */
static int
ctl_honest(int fd, double ms)
{
	struct ctl_round	 rep;
	struct hpz_region	 r;
	double			 t0, t, end = itest_now_us() / 1e3 + ms;
	size_t			 first;
	int			 i;

	do {
		memset(&rep, 0, sizeof(rep));
		if (hpz_region_create(&r, 64 * 4096, HPZ_PAGE_SHMEM) != 0)
			return (ctl_fail(fd, &rep, "create"));
		r.flags |= ctl_honest_flags;
		t0 = itest_now_us() / 1e3;
		if (hpz_register(&r) != 0)
			return (ctl_fail(fd, &rep, "register"));
		t = itest_now_us() / 1e3;
		rep.reg_ms = t - t0;
		(void)*(volatile char *)r.addr;
		rep.fault_ms = itest_now_us() / 1e3 - t;
		if (itest_count_nonzero(r.addr, r.len, &first) != 0) {
			rep.status = -1;
			snprintf(rep.why, sizeof(rep.why), "fresh region: "
			    "stale byte at %zu", first);
			ctl_report(fd, &rep);
			return (1);
		}
		for (i = 0; i < 64; i++)
			((char *)r.addr)[i * 4096 + 7] = (char)(i + 1);
		t = itest_now_us() / 1e3;
		if (hpz_reset(&r) != 0)
			return (ctl_fail(fd, &rep, "reset"));
		rep.reset_ms = itest_now_us() / 1e3 - t;
		if (itest_count_nonzero(r.addr, r.len, &first) != 0) {
			rep.status = -1;
			snprintf(rep.why, sizeof(rep.why), "after reset: stale "
			    "byte at %zu", first);
			ctl_report(fd, &rep);
			return (1);
		}
		if (hpz_unregister(&r) != 0)
			return (ctl_fail(fd, &rep, "unregister"));
		hpz_region_destroy(&r);
		ctl_report(fd, &rep);
	} while (itest_now_us() / 1e3 < end);
	rep.status = 1;
	ctl_report(fd, &rep);
	return (0);
}

static pid_t
ctl_honest_start(int *rfd)
{
	int	p[2];
	pid_t	pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		_exit(ctl_honest(p[1], CTL_ATTACK_MS));
	}
	close(p[1]);
	*rfd = p[0];
	return (pid);
}

static int
ctl_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

/*
 * Collect the honest client's rounds: each must come within the bound.
 * On a stall the client (and the attacker) are killed and the test fails.
 */
static void
ctl_honest_wait(pid_t honest, int rfd, pid_t attacker, const char *attack,
    struct ctl_figures *fg)
{
	struct pollfd		pfd = { .fd = rfd, .events = POLLIN };
	struct ctl_round	rep;
	double			t0 = itest_now_us() / 1e3, t, last = t0;
	int			status, bound = CTL_BOUND_MS * itest_wait_scale();

	memset(fg, 0, sizeof(*fg));
	for (;;) {
		if (poll(&pfd, 1, bound) != 1) {
			kill(honest, SIGKILL);
			kill(attacker, SIGKILL);
			cr_assert_fail("%s: the honest client got no answer for "
			    "%d ms (%d rounds done before)", attack, bound,
			    fg->rounds);
		}
		if (read(rfd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
			kill(attacker, SIGKILL);
			cr_assert_fail("%s: the honest client died", attack);
		}
		if (rep.status < 0) {
			kill(attacker, SIGKILL);
			cr_assert_fail("%s: honest client: %s", attack, rep.why);
		}
		if (rep.status == 1)
			break;
		t = itest_now_us() / 1e3;
		if (t - last > fg->round_max)
			fg->round_max = t - last;
		last = t;
		if (fg->nreg < (int)(sizeof(fg->reg) / sizeof(fg->reg[0])))
			fg->reg[fg->nreg++] = rep.reg_ms;
		if (rep.fault_ms > fg->fault_max)
			fg->fault_max = rep.fault_ms;
		if (rep.reset_ms > fg->reset_max)
			fg->reset_max = rep.reset_ms;
		fg->rounds++;
	}
	cr_assert_eq(waitpid(honest, &status, 0), honest);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(rfd);
	cr_assert_gt(fg->rounds, 0, "%s: no honest round finished", attack);
	qsort(fg->reg, (size_t)fg->nreg, sizeof(fg->reg[0]), ctl_cmp);
	printf("%s: honest client: %d rounds in %.1f s; register p50 %.2f ms, "
	    "max %.2f ms; first fault max %.2f ms; reset max %.2f ms; longest "
	    "round %.1f ms\n", attack, fg->rounds, (itest_now_us() / 1e3 - t0) / 1e3,
	    fg->reg[fg->nreg / 2], fg->reg[fg->nreg - 1], fg->fault_max,
	    fg->reset_max, fg->round_max);
	fflush(stdout);
}

/* ---- attackers ----------------------------------------------------------- */

/* What an attacker tells the parent: its first reply, and how many came. */
struct ctl_verdict {
	int	error;
	int	replies;
	char	text[HPZ_REPLY_TEXT];
};

struct ctl_shm {
	int	fd;
	void	*addr;
	size_t	len;
	int	uffd;
	uint64_t features, ioctls;
};

static void
ctl_shm_make(struct ctl_shm *m, size_t len)
{
	m->len = len;
	m->fd = memfd_create("itest-ctl", MFD_CLOEXEC);
	cr_assert_geq(m->fd, 0);
	cr_assert_eq(ftruncate(m->fd, (off_t)len), 0);
	m->addr = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, m->fd, 0);
	cr_assert_neq(m->addr, MAP_FAILED);
	m->uffd = itest_make_uffd(m->addr, len, &m->features, &m->ioctls);
}

static void
ctl_reg_msg(struct hpz_msg_register *reg, const struct ctl_shm *m,
    uint32_t seq)
{
	proto_init(reg, HPZ_MSG_REGISTER, sizeof(*reg), seq);
	reg->addr = (uintptr_t)m->addr;
	reg->len = m->len;
	reg->offset = 0;
	reg->page_size = 4096;
	reg->uffd_features = m->features;
	reg->uffd_ioctls = m->ioctls;
}

/* One reply on sock (an attacker's), or -1 after a minute or on EOF. */
static int
ctl_attacker_reply(int sock, struct hpz_msg *m)
{
	struct pollfd	pfd = { .fd = sock, .events = POLLIN };

	if (poll(&pfd, 1, 60000) != 1 || proto_recv(sock, m) <= 0)
		return (-1);
	return (0);
}

static void
ctl_verdict(int fd, const struct hpz_msg *m, int replies)
{
	struct ctl_verdict	v;

	memset(&v, 0, sizeof(v));
	v.error = m->u.reply.error;
	v.replies = replies;
	snprintf(v.text, sizeof(v.text), "%s", m->u.reply.text);
	(void)write(fd, &v, sizeof(v));
}

/*
 * The lock holder: an OFD write lock on byte 0 of its own state memfd,
 * through an open file description of its own, then the same register
 * again and again, 32 at a time, as fast as the replies come.
 */
static void
ctl_attack_lock(int wfd)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct ctl_shm		shm;
	struct flock		fl;
	char			path[64];
	int			sock, sfd, lfd, fds[3], i, n = 0;

	ctl_shm_make(&shm, 16 * 4096);
	sfd = itest_state_memfd(16);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", sfd);
	if ((lfd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		_exit(5);
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_len = 1;
	if (fcntl(lfd, F_OFD_SETLK, &fl) == -1)
		_exit(6);
	sock = itest_raw_connect();
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = sfd;
	(void)write(wfd, "r", 1);
	for (;;) {
		for (i = 0; i < 32; i++) {
			ctl_reg_msg(&reg, &shm, (uint32_t)i);
			if (proto_send(sock, &reg, sizeof(reg), fds, 3) !=
			    (ssize_t)sizeof(reg))
				_exit(7);
		}
		for (i = 0; i < 32; i++) {
			if (ctl_attacker_reply(sock, &m) != 0)
				_exit(8);
			if (n++ == 0)
				ctl_verdict(wfd, &m, n);
			proto_close_fds(&m);
		}
	}
}

/* A TCP listener on the loopback whose accepted peers never read. */
static int
ctl_listener(struct sockaddr_in *a)
{
	socklen_t	al = sizeof(*a);
	int		l, small = 4096;

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l == -1 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small,
	    sizeof(small)) == -1 || bind(l, (struct sockaddr *)a,
	    sizeof(*a)) == -1 || listen(l, 64) == -1 ||
	    getsockname(l, (struct sockaddr *)a, &al) == -1)
		_exit(10);
	return (l);
}

/*
 * A TCP socket whose close() lingers: SO_LINGER for an hour and a full
 * send queue to a peer (accepted and kept by the caller) that never reads.
 */
static int
ctl_linger_socket(const struct sockaddr_in *a)
{
	struct linger	lg = { 1, 3600 };
	char		buf[65536];
	int		small = 4096, c, fl;

	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c == -1 || setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small,
	    sizeof(small)) == -1 || connect(c, (const struct sockaddr *)a,
	    sizeof(*a)) == -1)
		_exit(12);
	fl = fcntl(c, F_GETFL);
	fcntl(c, F_SETFL, fl | O_NONBLOCK);
	memset(buf, 0x42, sizeof(buf));
	while (write(c, buf, sizeof(buf)) > 0)
		;
	fcntl(c, F_SETFL, fl);
	if (setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == -1)
		_exit(14);
	return (c);
}

enum ctl_linger_how {
	CTL_AS_BACKING,		/* the backing fd of a register */
	CTL_AS_EXTRA,		/* a fourth fd with a register */
	CTL_IN_FLIGHT,		/* queued behind a message that drops us */
};

/*
 * Pass lingering sockets so that the daemon holds the last reference: a
 * child makes each one, sends it and exits (an exiting process's close
 * does not linger), while the peers stay open, unread, here; our death
 * resets them.
 */
static void
ctl_attack_linger(int wfd, enum ctl_linger_how how)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct ctl_shm		shm;
	struct sockaddr_in	a;
	char			junk[64];
	int			listener, peers[256], npeers = 0, sock;
	int			fds[4], n = 0, status;
	pid_t			pid;

	ctl_shm_make(&shm, 16 * 4096);
	listener = ctl_listener(&a);
	memset(junk, 0xa5, sizeof(junk));
	(void)write(wfd, "r", 1);
	while (npeers < 256) {
		sock = itest_raw_connect();
		if ((pid = fork()) == -1)
			_exit(15);
		if (pid == 0) {
			fds[3] = ctl_linger_socket(&a);
			fds[0] = shm.uffd;
			fds[1] = how == CTL_AS_BACKING ? fds[3] : shm.fd;
			fds[2] = itest_state_memfd(16);
			ctl_reg_msg(&reg, &shm, 1);
			if (how == CTL_IN_FLIGHT)
				(void)proto_send(sock, junk, sizeof(junk),
				    NULL, 0);
			(void)proto_send(sock, &reg, sizeof(reg), fds,
			    how == CTL_AS_BACKING ? 3 : 4);
			_exit(0);
		}
		if ((peers[npeers++] = accept(listener, NULL, NULL)) == -1)
			_exit(13);
		(void)waitpid(pid, &status, 0);
		if (ctl_attacker_reply(sock, &m) == 0) {
			if (n++ == 0)
				ctl_verdict(wfd, &m, n);
			proto_close_fds(&m);
		}
		close(sock);
	}
	pause();
	_exit(0);
}

/*
 * A sparse 1 TiB shmem region of 4 KiB pages (2^28 pages: it costs us
 * nothing), registered through libhpz, then status requests as fast as
 * the daemon answers, 64 at a time.
 */
static void
ctl_attack_huge(int wfd)
{
	struct hpz_msg_header	h;
	struct hpz_msg		m;
	struct hpz_region	r;
	struct ctl_verdict	v;
	int			sock, i, error;

	memset(&r, 0, sizeof(r));
	r.len = 1ULL << 40;
	r.fd = memfd_create("itest-ctl-huge", MFD_CLOEXEC);
	if (r.fd == -1 || ftruncate(r.fd, (off_t)r.len) == -1)
		_exit(20);
	r.addr = mmap(NULL, r.len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, r.fd, 0);
	if (r.addr == MAP_FAILED)
		_exit(21);
	(void)write(wfd, "r", 1);
	error = hpz_register(&r);
	memset(&v, 0, sizeof(v));
	v.error = error;
	v.replies = 1;
	snprintf(v.text, sizeof(v.text), "%s", hpz_last_error());
	(void)write(wfd, &v, sizeof(v));
	sock = itest_raw_connect();
	for (;;) {
		for (i = 0; i < 64; i++) {
			proto_init(&h, HPZ_MSG_STATUS, sizeof(h), (uint32_t)i);
			if (proto_send(sock, &h, sizeof(h), NULL, 0) !=
			    (ssize_t)sizeof(h))
				_exit(22);
		}
		for (i = 0; i < 64; i++)
			if (ctl_attacker_reply(sock, &m) != 0)
				_exit(23);
	}
}

/* Run attack in a child; returns once it says it is set up. */
static pid_t
ctl_attacker_start(void (*attack)(int), int *rfd)
{
	int	p[2];
	char	c;
	pid_t	pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		attack(p[1]);
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 1, "the attacker did not set up");
	*rfd = p[0];
	return (pid);
}

/* The attacker's first verdict, if it sent one by now. */
static int
ctl_attacker_verdict(int rfd, struct ctl_verdict *v, int wait_ms)
{
	struct pollfd	pfd = { .fd = rfd, .events = POLLIN };

	memset(v, 0, sizeof(*v));
	if (poll(&pfd, 1, wait_ms) != 1)
		return (0);
	return (read(rfd, v, sizeof(*v)) == (ssize_t)sizeof(*v));
}

static void
ctl_attacker_stop(pid_t pid, int rfd)
{
	int	status;

	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(rfd);
}

/* Every fd the attacker passed is closed, within 10 s. */
static void
ctl_closed_all(const char *name)
{
#if HPZ_PROTOCOL_VERSION >= 5
	struct hpz_status	st;
	int			i;

	for (i = 0; i < 1000; i++) {
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		if (st.fds_closing == 0)
			return;
		usleep(10 * 1000);
	}
	cr_assert_fail("%s: %llu passed fds still not closed after 10 s",
	    name, st.fds_closing);
#else
	(void)name;
#endif
}

/*
 * An honest client beside attack; the attacker's verdict in *v.  With
 * quiet, the attacker has stopped sending by then: every fd it passed
 * must be closed while it still lives (its sockets' peers still unread).
 */
static void
ctl_beside(void (*attack)(int), const char *name, struct ctl_verdict *v,
    int quiet)
{
	struct ctl_figures	fg;
	pid_t			attacker, honest;
	int			arfd, hrfd, got;

	ctl_daemon_same();
	attacker = ctl_attacker_start(attack, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, v, 1000);
	if (quiet)
		ctl_closed_all(name);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
	ctl_closed_all(name);
	cr_assert(got, "%s: the attacker had no answer", name);
	printf("%s: the attacker's first answer: %d (%s)\n", name, v->error,
	    v->text);
	fflush(stdout);
}

static void
ctl_attack_backing(int wfd)
{
	ctl_attack_linger(wfd, CTL_AS_BACKING);
}

static void
ctl_attack_extra(int wfd)
{
	ctl_attack_linger(wfd, CTL_AS_EXTRA);
}

static void
ctl_attack_in_flight(int wfd)
{
	ctl_attack_linger(wfd, CTL_IN_FLIGHT);
}

/* No attack: the same rounds, for the figures beside the attacks'. */
static void
ctl_attack_none(int wfd)
{
	(void)write(wfd, "r", 1);
	(void)write(wfd, &(struct ctl_verdict){ .replies = 0 },
	    sizeof(struct ctl_verdict));
	pause();
}

/* ---- the tests ---------------------------------------------------------- */

Test(control, honest_client_alone, .timeout = 120)
{
	struct ctl_verdict	v;

	ctl_beside(ctl_attack_none, "no attack", &v, 1);
}

/*
 * The honest client beside attack (ctl_beside); the attacker's first
 * answer must be want, and its reason hold reason (NULL: any).
 */
static void
ctl_refused(void (*attack)(int), const char *name, int quiet, int want,
    const char *reason)
{
	struct ctl_verdict	v;

	ctl_beside(attack, name, &v, quiet);
	cr_assert_eq(v.error, want, "%s: got %d, wanted %d (%s)", name,
	    v.error, want, v.text);
	if (reason != NULL)
		cr_assert_not_null(strstr(v.text, reason), "%s: the reason "
		    "does not say \"%s\": %s", name, reason, v.text);
}

Test(control, lock_holder_registering_again_and_again, .timeout = 120)
{
	/* Refused without waiting for the lock. */
	ctl_refused(ctl_attack_lock, "lock holder", 0, -EBUSY,
	    "without waiting");
}

Test(control, lingering_socket_as_backing_fd, .timeout = 120)
{
	ctl_refused(ctl_attack_backing, "lingering socket as backing fd", 1,
	    -EINVAL, NULL);
}

Test(control, lingering_socket_as_extra_fd, .timeout = 120)
{
	ctl_refused(ctl_attack_extra, "lingering socket as extra fd", 1,
	    -EBADMSG, NULL);
}

Test(control, lingering_socket_in_flight_when_dropped, .timeout = 120)
{
	ctl_refused(ctl_attack_in_flight, "lingering socket in flight", 1,
	    -EBADMSG, NULL);
}

Test(control, huge_sparse_region_then_status_flood, .timeout = 120)
{
	/* The reason names the setting. */
	ctl_refused(ctl_attack_huge, "1 TiB of 4 KiB pages, status flood", 0,
	    -EDQUOT, "[limits] region_pages");
}

/* F_SEAL_GROW is required: a state memfd that may grow is refused. */
Test(control, state_memfd_must_be_sealed_against_growing)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct ctl_shm		shm;
	int			sock, fds[3];

	ctl_shm_make(&shm, 16 * 4096);
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = memfd_create("itest-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_geq(fds[2], 0);
	cr_assert_eq(ftruncate(fds[2], (off_t)HPZ_STATE_SIZE(16)), 0);
	cr_assert_eq(fcntl(fds[2], F_ADD_SEALS, F_SEAL_SHRINK), 0);
	sock = itest_raw_connect();
	ctl_reg_msg(&reg, &shm, 3);
	cr_assert_eq(proto_send(sock, &reg, sizeof(reg), fds, 3),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(ctl_attacker_reply(sock, &m), 0);
	cr_assert_eq(m.u.reply.error, -EINVAL, "got %d (%s)", m.u.reply.error,
	    m.u.reply.text);
	cr_assert_not_null(strstr(m.u.reply.text, "growing"), "%s",
	    m.u.reply.text);
	/* Sealed both ways, the same register goes through. */
	close(fds[2]);
	fds[2] = itest_state_memfd(16);
	ctl_reg_msg(&reg, &shm, 4);
	cr_assert_eq(proto_send(sock, &reg, sizeof(reg), fds, 3),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(ctl_attacker_reply(sock, &m), 0);
	cr_assert_eq(m.u.reply.error, 0, "%s", m.u.reply.text);
	close(sock);
	close(fds[2]);
	close(shm.uffd);
}

/*
 * A fresh state memfd is checked for being all zero without reading it:
 * reading its holes through a shared mapping would allocate every page
 * of it, in the daemon's name (4 MiB for this 16 GiB region of 4 KiB
 * pages, 256 MiB for a 1 TiB one).
 */
Test(control, register_reads_no_state_holes)
{
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	struct ctl_shm		shm;
	struct stat		st;
	uint64_t		npages = 4ULL << 20;
	int			sock, fds[3];

	ctl_shm_make(&shm, npages * 4096);
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = itest_state_memfd(npages);
	sock = itest_raw_connect();
	ctl_reg_msg(&reg, &shm, 5);
	cr_assert_eq(proto_send(sock, &reg, sizeof(reg), fds, 3),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(ctl_attacker_reply(sock, &m), 0);
	cr_assert_eq(m.u.reply.error, 0, "%s", m.u.reply.text);
	cr_assert_eq(fstat(fds[2], &st), 0);
	cr_assert_leq((uint64_t)st.st_blocks * 512, 64 * 1024,
	    "registering allocated %llu KiB of its %llu KiB page state",
	    (unsigned long long)st.st_blocks / 2,
	    (unsigned long long)(npages >> 10));
	close(sock);
	close(fds[2]);
	close(shm.uffd);
}

#if HPZ_PROTOCOL_VERSION >= 5
/* Status shows the limits in force and this uid's use of them. */
Test(control, status_shows_limits_and_use)
{
	struct hpz_status	a, b;
	struct hpz_region	r;
	char			cmd[600], line[256];
	FILE			*f;
	int			found = 0;

	cr_assert_eq(hpz_status(&a), 0, "%s", hpz_last_error());
	cr_assert_gt(a.limit_region_pages, 0, "no default region_pages");
	cr_assert_gt(a.limit_uid_state_bytes, 0, "no default state_bytes");
	cr_assert_eq(a.limit_conn_regions, 1024);
	cr_assert_lt(a.limit_region_pages, 1ULL << 28,
	    "the default admits a 1 TiB region of 4 KiB pages");
	cr_assert_eq(hpz_region_create(&r, 256 * 4096, HPZ_PAGE_SHMEM), 0);
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(hpz_status(&b), 0);
	cr_assert_eq(b.uid_regions, a.uid_regions + 1);
	cr_assert_eq(b.uid_bytes, a.uid_bytes + 256 * 4096);
	cr_assert_eq(b.uid_state_bytes, a.uid_state_bytes +
	    HPZ_STATE_SIZE(256));
	snprintf(cmd, sizeof(cmd), "%s/client/hpzctl status",
	    getenv("HPZ_BUILDDIR"));
	cr_assert_not_null(f = popen(cmd, "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "limits, a region:") != NULL &&
		    strstr(line, "pages a region") != NULL)
			found = 1;
	pclose(f);
	cr_assert(found, "hpzctl status shows no limits");
	hpz_region_destroy(&r);
}
#endif

/* ---- mremap of a whole region, and a daemon restart ---------------------- */

struct ctl_daemon {
	char	dir[64];
	char	sock[128];
	char	log[128];
	char	conf[128];	/* settings file, "" for none */
	pid_t	pid;
};

static void
ctl_daemon_start(struct ctl_daemon *d)
{
	int	i, fd;

	unlink(d->sock);
	d->pid = fork();
	cr_assert_geq(d->pid, 0);
	if (d->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0)
			dup2(fd, 2);
		if (d->conf[0] != '\0')
			execl(itest_daemon_path(), "hpzerod", "--socket",
			    d->sock, "--workers", "2", "--pool", "off", "--config", d->conf,
			    (char *)NULL);
		else
			execl(itest_daemon_path(), "hpzerod", "--socket",
			    d->sock, "--workers", "2", "--pool", "off", (char *)NULL);
		_exit(121);
	}
	/*
	 * A liveness bound: the start-up measures its clear kernels and
	 * costs, which under ASan on a loaded machine took over 5 s.
	 */
	for (i = 0; i < 3000 * itest_wait_scale() &&
	    access(d->sock, F_OK) != 0; i++)
		usleep(10 * 1000);
	cr_assert_eq(access(d->sock, F_OK), 0, "hpzerod did not come up in "
	    "%d s", 30 * itest_wait_scale());
}

static void
ctl_daemon_kill(struct ctl_daemon *d, int sig)
{
	int	status;

	kill(d->pid, sig);
	cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
	d->pid = -1;
}

static void
ctl_fill(void *p, size_t len, int v)
{
	memset(p, v, len);
}

Test(control, mremap_whole_region_then_reset_unregister_restart,
    .timeout = 120)
{
	struct ctl_daemon	 d;
	struct hpz_region	 r;
	void			*to, *from;
	size_t			 len = 256 * 4096, first;
	int			 error;

	memset(&d, 0, sizeof(d));
	strcpy(d.dir, "/tmp/hpz-mv.XXXXXX");
	cr_assert_not_null(mkdtemp(d.dir));
	snprintf(d.sock, sizeof(d.sock), "%s/hpzerod.sock", d.dir);
	snprintf(d.log, sizeof(d.log), "%s/hpzerod.log", d.dir);
	/* Only a daemon may serve: a fallback would hide a failed restore. */
	setenv("HPZ_FALLBACK_MS", "600000", 1);
	setenv("HPZ_SOCKET", d.sock, 1);
	ctl_daemon_start(&d);

	cr_assert_eq(hpz_region_create(&r, len, HPZ_PAGE_SHMEM), 0);
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	ctl_fill(r.addr, len, 0x5c);
	/* Somewhere else, whole. */
	to = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(to, MAP_FAILED);
	from = r.addr;
	r.addr = mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	cr_assert_eq(r.addr, to, "mremap: %s", strerror(errno));
	cr_assert_eq(((unsigned char *)r.addr)[len - 1], 0x5c);

	error = hpz_reset(&r);
	cr_assert_eq(error, 0, "reset after the move: %d (%s)", error,
	    hpz_last_error());
	cr_assert_eq(itest_count_nonzero(r.addr, len, &first), 0,
	    "after the reset: stale byte at %zu", first);
	ctl_fill(r.addr, len, 0x6d);

	/* The daemon dies and another comes: libhpz registers it again. */
	ctl_daemon_kill(&d, SIGKILL);
	ctl_daemon_start(&d);
	error = hpz_reset(&r);
	cr_assert_eq(error, 0, "reset after the restart: %d (%s)", error,
	    hpz_last_error());
	cr_assert_eq(itest_count_nonzero(r.addr, len, &first), 0,
	    "after the restart and reset: stale byte at %zu", first);
	ctl_fill(r.addr, len, 0x7e);
	error = hpz_unregister(&r);
	cr_assert_eq(error, 0, "unregister after the move: %d (%s)", error,
	    hpz_last_error());
	cr_assert_eq(itest_count_not(r.addr, len, 0x7e, &first), 0,
	    "data lost at %zu after unregister", first);
	hpz_region_destroy(&r);
	ctl_daemon_kill(&d, SIGTERM);
	unlink(d.log);
	unlink(d.sock);
	rmdir(d.dir);
}

#if HPZ_PROTOCOL_VERSION >= 5
static void
ctl_conf_write(const char *path, const char *text)
{
	FILE	*f;

	cr_assert_not_null(f = fopen(path, "w"));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* A daemon of the test's own in a fresh directory, with settings conf. */
static void
ctl_daemon_own(struct ctl_daemon *d, const char *conf)
{
	memset(d, 0, sizeof(*d));
	strcpy(d->dir, "/tmp/hpz-ctl.XXXXXX");
	cr_assert_not_null(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/hpzerod.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/hpzerod.log", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/hpzerod.conf", d->dir);
	ctl_conf_write(d->conf, conf);
	setenv("HPZ_SOCKET", d->sock, 1);
	ctl_daemon_start(d);
}

/* Stop it (SIGTERM) and remove its directory. */
static void
ctl_daemon_own_end(struct ctl_daemon *d)
{
	ctl_daemon_kill(d, SIGTERM);
	unlink(d->conf);
	unlink(d->log);
	unlink(d->sock);
	rmdir(d->dir);
}

/* [limits] region_pages and state_bytes, read again on SIGHUP. */
Test(control, region_limits_reloaded_on_sighup, .timeout = 60)
{
	struct ctl_daemon	d;
	struct hpz_status	st;
	struct hpz_region	r;
	int			error, i;

	ctl_daemon_own(&d, "[limits]\nregion_pages = 16\n");
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	cr_assert_eq(st.limit_region_pages, 16);

	cr_assert_eq(hpz_region_create(&r, 32 * 4096, HPZ_PAGE_SHMEM), 0);
	error = hpz_register(&r);
	cr_assert_eq(error, -EDQUOT, "32 pages over 16: %d (%s)", error,
	    hpz_last_error());
	cr_assert_not_null(strstr(hpz_last_error(), "[limits] region_pages"),
	    "%s", hpz_last_error());

	ctl_conf_write(d.conf, "[limits]\nregion_pages = 64\n"
	    "state_bytes = 4200\n");
	kill(d.pid, SIGHUP);
	for (i = 0; i < 200; i++) {
		cr_assert_eq(hpz_status(&st), 0);
		if (st.limit_region_pages == 64)
			break;
		usleep(10 * 1000);
	}
	cr_assert_eq(st.limit_region_pages, 64, "SIGHUP not applied");
	cr_assert_eq(st.limit_uid_state_bytes, 4200);
	/* 32 pages fit now; their state (4096 + 32) fits 4200, twice not. */
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(hpz_status(&st), 0);
	cr_assert_eq(st.uid_state_bytes, 4096 + 32);
	{
		struct hpz_region	r2;

		cr_assert_eq(hpz_region_create(&r2, 32 * 4096,
		    HPZ_PAGE_SHMEM), 0);
		error = hpz_register(&r2);
		cr_assert_eq(error, -EDQUOT, "second region: %d (%s)", error,
		    hpz_last_error());
		cr_assert_not_null(strstr(hpz_last_error(),
		    "[limits] state_bytes"), "%s", hpz_last_error());
		hpz_region_destroy(&r2);
	}
	hpz_region_destroy(&r);
	ctl_daemon_own_end(&d);
}
#endif

/* ---- a client holding a kernel lock of its own --------------------------- */

/* How long the inode-lock holder holds (from its set-up). */
#define CTL_HOLD_MS	(CTL_ATTACK_MS + 2000)

struct ctl_hold {
	int	fd;		/* the region's backing memfd */
	void	*buf;		/* on an uffd of its own, never served */
	int	uffd;
};

/*
 * shmem's write takes the file's inode lock, then copies from the
 * buffer: the copy faults on the unserved uffd and waits, lock held.
 */
static void *
ctl_hold_write(void *arg)
{
	struct ctl_hold	*h = arg;

	(void)pwrite(h->fd, h->buf, 4096, 0);
	return (NULL);
}

/* Let go after CTL_HOLD_MS: the uffd's close wakes the fault. */
static void *
ctl_hold_release(void *arg)
{
	struct ctl_hold	*h = arg;

	usleep(CTL_HOLD_MS * 1000);
	close(h->uffd);
	return (NULL);
}

/*
 * The inode-lock holder: a 64 MiB HPZ_DISCARD | HPZ_NO_SCRUB shmem region
 * of its own with data in it (garbage the teardown must punch), a thread
 * writing into its backing memfd from a buffer on its own unserved uffd,
 * and hpz_unregister: the teardown's punch waits on the inode lock.  Its
 * verdict is the unregister's answer, once it lets go.
 */
static void
ctl_attack_inode_lock(int wfd)
{
	struct uffdio_api	 api = { .api = UFFD_API };
	struct uffdio_register	 reg;
	struct ctl_verdict	 v;
	struct hpz_region	 r;
	struct ctl_hold		 h;
	pthread_t		 tw, tr;
	int			 rc;

	if (hpz_region_create(&r, 64ULL << 20, HPZ_PAGE_SHMEM) != 0)
		_exit(5);
	memset(r.addr, 0x5a, 1 << 20);
	/*
	 * Holes on release: its teardown punches, which waits on the inode
	 * lock (a clear in place goes through the mapping and does not).
	 */
	r.flags = HPZ_DISCARD | HPZ_NO_SCRUB | HPZ_RELEASE_HOLES;
	if (hpz_register(&r) != 0)
		_exit(6);
	h.fd = r.fd;
	h.buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (h.buf == MAP_FAILED || h.uffd < 0 ||
	    ioctl(h.uffd, UFFDIO_API, &api) == -1)
		_exit(7);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)h.buf;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(h.uffd, UFFDIO_REGISTER, &reg) == -1)
		_exit(8);
	if (pthread_create(&tw, NULL, ctl_hold_write, &h) != 0 ||
	    pthread_create(&tr, NULL, ctl_hold_release, &h) != 0)
		_exit(9);
	usleep(200 * 1000);	/* the write is in, the lock held */
	(void)write(wfd, "r", 1);
	rc = hpz_unregister(&r);
	memset(&v, 0, sizeof(v));
	v.error = rc;
	v.replies = 1;
	snprintf(v.text, sizeof(v.text), "%s", rc == 0 ? "unregistered" :
	    hpz_last_error());
	(void)write(wfd, &v, sizeof(v));
	pause();
}

/*
 * The honest client's rounds go on while another client holds its own
 * memfd's inode lock over its unregister (on d1e12d7 the event loop sat
 * in D state in the punch: the honest client got no answer); status shows
 * the holder's stuck context meanwhile, and its unregister is answered
 * once it lets go.
 */
Test(control, inode_lock_held_over_unregister, .timeout = 120)
{
	const char		*name = "inode lock held over unregister";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got;

	ctl_daemon_same();
	attacker = ctl_attacker_start(ctl_attack_inode_lock, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
#if HPZ_PROTOCOL_VERSION >= 7
	{
		struct hpz_status	st;

		/* Still held (CTL_HOLD_MS): its context is stuck, and shown. */
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		printf("%s: status: %llu contexts, %llu stuck, the longest pid "
		    "%lld for %llu ms in %s\n", name, st.contexts,
		    st.contexts_stuck, (long long)st.context_stuck_pid,
		    st.context_stuck_ms, st.context_stuck_what);
		cr_expect_geq(st.contexts_stuck, 1, "%s: no stuck context "
		    "shown while the attacker held its lock", name);
		cr_expect_eq((pid_t)st.context_stuck_pid, attacker, "%s: the "
		    "stuck context shown is pid %lld, not the attacker's %d",
		    name, (long long)st.context_stuck_pid, (int)attacker);
	}
#endif
	got = ctl_attacker_verdict(arfd, &v, CTL_HOLD_MS + 10000);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
	cr_assert(got, "%s: the attacker's unregister got no answer after it "
	    "let go of its lock", name);
	cr_assert_eq(v.error, 0, "%s: the attacker's unregister: %d (%s)",
	    name, v.error, v.text);
	printf("%s: the attacker's unregister, once it let go: %s\n", name,
	    v.text);
	fflush(stdout);
}

/* ---- stray fds of a file on the client's own FUSE mount ------------------ */

#define CTL_FUSE_CONNS	200	/* connections the attacker makes */
#define CTL_FUSE_FDS	253	/* fds on each one's message (the most) */
#define CTL_FUSE_HELD	1024	/* more of them held by the daemon: wedged */

struct ctl_fuse {
	char	dir[64];
	char	file[96];
	pid_t	pid;
	int	mnt_id;		/* the mount's, as /proc/PID/fdinfo says */
};

static struct ctl_fuse	ctl_fu;

/* The mount id of fd in process pid (its fdinfo), or -1. */
static int
ctl_mnt_id(pid_t pid, int fd)
{
	char	path[64], line[128];
	FILE	*f;
	int	id = -1;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "mnt_id: %d", &id) == 1)
			break;
	fclose(f);
	return (id);
}

/*
 * The id of the mount at dir (/proc/self/mountinfo), or -1.  Nothing of
 * the test's opens a file there: a close would wait on the server, and
 * so would the exit of every process forked with it open.
 */
static int
ctl_mount_id(const char *dir)
{
	char	line[1024], at[512];
	FILE	*f;
	int	id, found = -1;

	if ((f = fopen("/proc/self/mountinfo", "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%d %*d %*s %*s %511s", &id, at) == 2 &&
		    strcmp(at, dir) == 0)
			found = id;
	fclose(f);
	return (found);
}

/* How many fds process pid holds on mount mnt_id. */
static int
ctl_fds_on_mount(pid_t pid, int mnt_id)
{
	char		 path[64];
	struct dirent	*e;
	DIR		*d;
	int		 n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	cr_assert_not_null(d = opendir(path), "%s: %s", path, strerror(errno));
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' &&
		    ctl_mnt_id(pid, atoi(e->d_name)) == mnt_id)
			n++;
	closedir(d);
	return (n);
}

/*
 * tests/integration/fuse-mute MODE on a fresh directory; skips the test
 * when this machine cannot mount FUSE (its exit status 77).
 */
static void
ctl_fuse_start(struct ctl_fuse *fu, const char *mode)
{
	char	 bin[512], buf[64];
	FILE	*out;
	int	 p[2], status;

	memset(fu, 0, sizeof(*fu));
	snprintf(fu->dir, sizeof(fu->dir), "/tmp/hpz-itest-fuse.XXXXXX");
	cr_assert_not_null(mkdtemp(fu->dir));
	snprintf(fu->file, sizeof(fu->file), "%s/file", fu->dir);
	snprintf(bin, sizeof(bin), "%s/tests/integration/fuse-mute",
	    getenv("HPZ_BUILDDIR"));
	cr_assert_eq(pipe(p), 0);
	fu->pid = fork();
	cr_assert_geq(fu->pid, 0);
	if (fu->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(bin, bin, mode, fu->dir, (char *)NULL);
		_exit(2);
	}
	close(p[1]);
	out = fdopen(p[0], "r");
	if (fgets(buf, sizeof(buf), out) == NULL ||
	    strncmp(buf, "ready ", 6) != 0) {
		fclose(out);
		cr_assert_eq(waitpid(fu->pid, &status, 0), fu->pid);
		rmdir(fu->dir);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			cr_skip_test("no FUSE here (fuse-mute: no /dev/fuse or "
			    "no right to mount)");
		cr_assert_fail("fuse-mute %s %s did not start", mode, fu->dir);
	}
	fclose(out);
	fu->mnt_id = ctl_mount_id(fu->dir);
	cr_assert_geq(fu->mnt_id, 0, "%s not in /proc/self/mountinfo",
	    fu->dir);
}

/* The server goes: every request waiting on it fails. */
static void
ctl_fuse_stop(struct ctl_fuse *fu)
{
	int	status;

	if (fu->pid <= 0)
		return;
	kill(fu->pid, SIGTERM);
	(void)waitpid(fu->pid, &status, 0);
	fu->pid = 0;
	(void)umount2(fu->dir, MNT_DETACH);
	rmdir(fu->dir);
}

/* The shared daemon's socket and its directory, open to another uid. */
struct ctl_sockmode {
	char	dir[512];
	mode_t	dir_mode, sock_mode;
};

static void
ctl_socket_for_all(struct ctl_sockmode *so)
{
	const char	*sock = getenv("HPZ_SOCKET");
	struct stat	 st;
	char		*slash;

	cr_assert_not_null(sock);
	snprintf(so->dir, sizeof(so->dir), "%s", sock);
	cr_assert_not_null(slash = strrchr(so->dir, '/'));
	*slash = '\0';
	cr_assert_eq(stat(so->dir, &st), 0, "%s: %s", so->dir, strerror(errno));
	so->dir_mode = st.st_mode & 07777;
	cr_assert_eq(stat(sock, &st), 0, "%s: %s", sock, strerror(errno));
	so->sock_mode = st.st_mode & 07777;
	cr_assert_eq(chmod(so->dir, so->dir_mode | 0711), 0);
	cr_assert_eq(chmod(sock, 0666), 0);
}

static void
ctl_socket_restore(const struct ctl_sockmode *so)
{
	(void)chmod(getenv("HPZ_SOCKET"), so->sock_mode);
	(void)chmod(so->dir, so->dir_mode);
}

/*
 * CTL_FUSE_CONNS connections, each with a message carrying CTL_FUSE_FDS
 * fds of a file on a FUSE mount whose server never answers FLUSH (the
 * message itself is junk: it is refused and the connection dropped).
 * Every close of those fds in the daemon waits for ever.
 */
static void
ctl_attack_fuse_fds(int wfd)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * CTL_FUSE_FDS)];
	}			 cm;
	struct sockaddr_un	 sun;
	struct ctl_verdict	 v;
	struct msghdr		 mh;
	struct iovec		 iov;
	struct cmsghdr		*c;
	char			 junk[64];
	int			 fds[CTL_FUSE_FDS], i, sock, fd, sent = 0;

	if ((fd = open(ctl_fu.file, O_RDONLY | O_CLOEXEC)) == -1)
		_exit(30);
	/*
	 * Another tenant: a uid's connections count against its own
	 * [limits] clients, which this attacker fills (the honest client is
	 * root). The fds were opened as root; the daemon's closes still wait.
	 */
	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(31);
	for (i = 0; i < CTL_FUSE_FDS; i++)
		fds[i] = fd;	/* each arrives as an fd of its own */
	memset(junk, 0xa5, sizeof(junk));
	itest_sun(&sun, getenv("HPZ_SOCKET"));
	(void)write(wfd, "r", 1);
	for (i = 0; i < CTL_FUSE_CONNS; i++) {
		sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, 0);
		if (sock == -1 || connect(sock, (struct sockaddr *)&sun,
		    sizeof(sun)) == -1)
			break;	/* not accepting: that is a finding too */
		memset(&mh, 0, sizeof(mh));
		memset(&cm, 0, sizeof(cm));
		iov.iov_base = junk;
		iov.iov_len = sizeof(junk);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(fds));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(c), fds, sizeof(fds));
		if (sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == -1)
			break;
		sent++;
		/* sock stays open: what the daemon has not read stays queued */
	}
	memset(&v, 0, sizeof(v));
	v.replies = sent;
	snprintf(v.text, sizeof(v.text), "%d messages of %d fds sent", sent,
	    CTL_FUSE_FDS);
	(void)write(wfd, &v, sizeof(v));
	pause();	/* our own close of fd would hang: we die instead */
}

/*
 * A client floods the daemon with fds of a file on its own FUSE mount
 * whose server never answers FLUSH (on d1e12d7 their closes wedged the
 * reaper and then the loop; the daemon ran out of fds).  The honest
 * client's rounds go on, the daemon holds a bounded number of the
 * attacker's fds (the rest wait in the attacker's sockets), its stuck
 * context is shown, and once the server goes every one is closed.
 */
/*
 * The attacker is another uid (65534): its connections, dropped but not yet
 * closed while their fds' closes hang, count against its uid's [limits]
 * clients (64), which it fills.  As root, like the honest client, it shut
 * the honest one out whenever its connections came first (under ASan and
 * in distcheck): a uid's quota is shared by its processes, by design.
 */
Test(control, fuse_stray_fds_whose_close_never_returns, .timeout = 180)
{
	const char		*name = "FUSE stray fds, FLUSH never answered";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	pid_t			 attacker, honest, daemon = itest_daemon_pid();
	struct ctl_sockmode	 so;
	int			 arfd, hrfd, got, held, i, wait;

	ctl_fuse_start(&ctl_fu, "noflush");
	ctl_daemon_same();
	ctl_socket_for_all(&so);
	attacker = ctl_attacker_start(ctl_attack_fuse_fds, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 1000);
	held = ctl_fds_on_mount(daemon, ctl_fu.mnt_id);
	printf("%s: the attacker: %s; the daemon holds %d of them\n", name,
	    got ? v.text : "no word", held);
	fflush(stdout);
	cr_expect(got, "%s: the attacker did not finish sending", name);
	cr_expect_leq(held, CTL_FUSE_HELD, "%s: the daemon holds %d of the "
	    "attacker's fds (%d sent): it reads a client whose closes are "
	    "stuck", name, held, v.replies * CTL_FUSE_FDS);
#if HPZ_PROTOCOL_VERSION >= 7
	{
		struct hpz_status	st;

		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		printf("%s: status: %llu contexts, %llu stuck, the longest pid "
		    "%lld for %llu ms in %s; %llu fds closing\n", name,
		    st.contexts, st.contexts_stuck,
		    (long long)st.context_stuck_pid, st.context_stuck_ms,
		    st.context_stuck_what, st.fds_closing);
		cr_expect_geq(st.contexts_stuck, 1, "%s: no stuck context "
		    "shown", name);
		cr_expect_eq((pid_t)st.context_stuck_pid, attacker, "%s: the "
		    "stuck context shown is pid %lld, not the attacker's %d",
		    name, (long long)st.context_stuck_pid, (int)attacker);
	}
#endif
	/* The server goes: every close waiting on it returns. */
	ctl_fuse_stop(&ctl_fu);
	wait = 30 * 10 * itest_wait_scale();
	for (i = 0; i < wait &&
	    (held = ctl_fds_on_mount(daemon, ctl_fu.mnt_id)) > 0; i++)
		usleep(100 * 1000);
	ctl_attacker_stop(attacker, arfd);
	ctl_socket_restore(&so);
	ctl_daemon_same();
	cr_assert_eq(held, 0, "%s: the daemon still holds %d fds on the "
	    "mount %d s after its server went", name, held, wait / 10);
	ctl_closed_all(name);
}

/* ---- a register whose page state fd's fstat never returns -------------- */

/*
 * A register whose third fd (the page state) is a file on a FUSE mount
 * that answers nothing once the file is open (mute-after-open, mounted
 * allow_other): its fstat, once the attributes the open brought expire
 * (1 s), waits for ever.  On 32aedb7 the daemon made that fstat on its
 * event loop (region_find_state) and every client stalled.
 */
static void
ctl_attack_fuse_state(int wfd)
{
	struct hpz_msg_register	reg;
	struct ctl_shm		shm;
	int			sock, fds[3], fd;

	if ((fd = open(ctl_fu.file, O_RDWR | O_CLOEXEC)) == -1)
		_exit(30);
	ctl_shm_make(&shm, 16 * 4096);
	usleep(1500 * 1000);	/* the open's attributes expire */
	sock = itest_raw_connect();
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = fd;
	ctl_reg_msg(&reg, &shm, 1);
	if (proto_send(sock, &reg, sizeof(reg), fds, 3) !=
	    (ssize_t)sizeof(reg))
		_exit(31);
	(void)write(wfd, "r", 1);
	pause();	/* our own close of fd would hang: we die instead */
}

Test(control, register_with_a_state_fd_whose_fstat_never_returns,
    .timeout = 180)
{
	const char		*name = "state fd on a mute FUSE mount";
	struct ctl_figures	 fg;
	pid_t			 attacker, honest, daemon = itest_daemon_pid();
	int			 arfd, hrfd, held = -1, i, wait;

	ctl_fuse_start(&ctl_fu, "mute-after-open");
	ctl_daemon_same();
	attacker = ctl_attacker_start(ctl_attack_fuse_state, &arfd);
	usleep(200 * 1000);	/* its register reaches the daemon */
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	ctl_daemon_same();
	/* The server goes: the fstat fails, the fds are closed. */
	ctl_fuse_stop(&ctl_fu);
	wait = 30 * 10 * itest_wait_scale();
	for (i = 0; i < wait &&
	    (held = ctl_fds_on_mount(daemon, ctl_fu.mnt_id)) > 0; i++)
		usleep(100 * 1000);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
	cr_assert_eq(held, 0, "%s: the daemon still holds %d fds on the "
	    "mount %d s after its server went", name, held, wait / 10);
	ctl_closed_all(name);
}

/* ---- many short-lived processes, each a stuck close ---------------------- */

#define CTL_SHORT_PROCS	150	/* processes, each one STATUS with a FUSE fd */

/* The threads process pid runs now (/proc/PID/status). */
static int
ctl_threads(pid_t pid)
{
	char	path[64], line[128];
	FILE	*f;
	int	n = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return (n);
}

/*
 * CTL_SHORT_PROCS processes of uid 65534, one after the other, each with a
 * connection of its own and one STATUS carrying an fd of the FUSE file
 * whose FLUSH is never answered, gone as soon as it has its answer (or
 * its refusal).  Each leaves a context whose close never returns.
 */
static void
ctl_attack_short_lived(int wfd)
{
	struct hpz_msg_header	h;
	struct hpz_msg		m;
	struct ctl_verdict	v;
	int			fd, sock, i, status, refused = 0, p[2];
	pid_t			pid;
	char			c;

	if ((fd = open(ctl_fu.file, O_RDONLY | O_CLOEXEC)) == -1)
		_exit(30);
	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(31);
	if (pipe(p) != 0)
		_exit(33);
	(void)write(wfd, "r", 1);
	for (i = 0; i < CTL_SHORT_PROCS; i++) {
		if ((pid = fork()) == -1)
			_exit(32);
		if (pid == 0) {
			/*
			 * Its connection goes, the process stays: its own
			 * close of fd (at exit too) would send FLUSH and wait
			 * for ever.  It dies with the attacker, once the
			 * server is gone.
			 */
			struct sockaddr_un	sun;

			prctl(PR_SET_PDEATHSIG, SIGKILL);

			c = '?';
			itest_sun(&sun, getenv("HPZ_SOCKET"));
			sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
			if (sock >= 0 && connect(sock, (struct sockaddr *)&sun,
			    sizeof(sun)) == 0) {
				proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 1);
				(void)proto_send(sock, &h, sizeof(h), &fd, 1);
				if (ctl_attacker_reply(sock, &m) == 0)
					c = m.u.hdr.type == HPZ_MSG_REPLY ?
					    'n' : 'y';
			}
			if (sock >= 0)
				close(sock);
			(void)write(p[1], &c, 1);
			pause();
			_exit(1);
		}
		if (read(p[0], &c, 1) == 1 && c == 'n')
			refused++;
	}
	(void)status;
	memset(&v, 0, sizeof(v));
	v.replies = refused;
	snprintf(v.text, sizeof(v.text), "%d processes, %d refused",
	    CTL_SHORT_PROCS, refused);
	(void)write(wfd, &v, sizeof(v));
	pause();	/* our own close of fd would hang: we die instead */
}

/*
 * On 32aedb7 every such process left a daemon thread stuck for good (a
 * context keyed by its pid, the close of its fd queued on it, counted by
 * no limit).  Now a uid's contexts at work are bounded ([limits]
 * contexts, 32 by default) and so are the daemon's threads; the honest
 * client (root) is served all along.
 */
Test(control, short_lived_processes_leave_no_unbounded_threads,
    .timeout = 180)
{
	const char		*name = "short-lived processes, a stuck close each";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	struct ctl_sockmode	 so;
	pid_t			 attacker, honest, daemon = itest_daemon_pid();
	int			 arfd, hrfd, got, before, after, held, i, wait;

	ctl_fuse_start(&ctl_fu, "noflush");
	ctl_daemon_same();
	before = ctl_threads(daemon);
	ctl_socket_for_all(&so);
	attacker = ctl_attacker_start(ctl_attack_short_lived, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 60000);
	after = ctl_threads(daemon);
	printf("%s: the attacker: %s; daemon threads %d before, %d after\n",
	    name, got ? v.text : "no word", before, after);
	fflush(stdout);
	ctl_fuse_stop(&ctl_fu);
	wait = 30 * 10 * itest_wait_scale();
	for (i = 0; i < wait &&
	    (held = ctl_fds_on_mount(daemon, ctl_fu.mnt_id)) > 0; i++)
		usleep(100 * 1000);
	ctl_attacker_stop(attacker, arfd);
	ctl_socket_restore(&so);
	ctl_daemon_same();
	cr_expect(got, "%s: the attacker did not finish", name);
	cr_assert_leq(after, before + 32 + 2, "%s: the daemon runs %d threads, "
	    "%d before the attack: its contexts are not bounded", name, after,
	    before);
	cr_assert_eq(held, 0, "%s: the daemon still holds %d fds on the "
	    "mount %d s after its server went", name, held, wait / 10);
}

/*
 * Status shows the pid of another user's stuck context to root and that
 * user only: a uid that can connect learns nothing of other tenants'
 * processes (issue 31 item 7).
 */
#if HPZ_PROTOCOL_VERSION >= 7
Test(control, status_hides_other_users_stuck_pids, .timeout = 180)
{
	struct hpz_status	 st;
	struct ctl_verdict	 v;
	struct ctl_sockmode	 so;
	pid_t			 attacker, pid;
	int			 arfd, i, status, p[2];
	long long		 seen = -1;

	ctl_fuse_start(&ctl_fu, "noflush");
	ctl_socket_for_all(&so);
	attacker = ctl_attacker_start(ctl_attack_short_lived, &arfd);
	for (i = 0; i < 100; i++) {
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		if (st.contexts_stuck >= 1)
			break;
		usleep(100 * 1000);
	}
	cr_assert_geq(st.contexts_stuck, 1, "no stuck context in 10 s");
	cr_expect_neq(st.context_stuck_pid, 0, "root does not see the pid");
	cr_assert_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		struct hpz_status	o;

		close(p[0]);
		if (setgid(65533) != 0 || setuid(65533) != 0)
			_exit(1);
		if (hpz_status(&o) != 0)
			_exit(2);
		(void)write(p[1], &o.context_stuck_pid, sizeof(long long));
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &seen, sizeof(seen)), (ssize_t)sizeof(seen));
	close(p[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	(void)ctl_attacker_verdict(arfd, &v, 60000);
	ctl_fuse_stop(&ctl_fu);
	ctl_attacker_stop(attacker, arfd);
	ctl_socket_restore(&so);
	cr_assert_eq(seen, 0, "uid 65533 sees pid %lld of uid 65534's stuck "
	    "context", seen);
}
#endif

/*
 * The daemon cannot make a thread at all (its own pids cgroup, pids.max
 * at what it runs): a register, whose checks must run on a thread of
 * its client's context, is refused with a reason, never run on the loop
 * (on 32aedb7: "cannot start its context ... runs on the event loop"),
 * and status is answered all along.
 */
Test(control, no_thread_for_a_context_refuses_never_runs_on_the_loop,
    .timeout = 120)
{
	struct ctl_daemon	 d;
	struct hpz_status	 st;
	struct hpz_region	 r;
	char			 cg[128], path[192], buf[64], line[512];
	char			 why[256];
	FILE			*f;
	int			 fd, error, n, onloop = 0;

	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/pids/hpz-itest.%d",
	    (int)getpid());
	if (access("/sys/fs/cgroup/pids", F_OK) != 0 || mkdir(cg, 0755) != 0) {
		snprintf(cg, sizeof(cg), "/sys/fs/cgroup/hpz-itest.%d",
		    (int)getpid());
		if (mkdir(cg, 0755) != 0)
			cr_skip_test("no pids cgroup to make here");
	}
	ctl_daemon_own(&d, "");
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	cr_assert_geq(fd = open(path, O_WRONLY), 0, "%s", path);
	n = snprintf(buf, sizeof(buf), "%d\n", (int)d.pid);
	cr_assert_eq(write(fd, buf, (size_t)n), n, "move the daemon: %s",
	    strerror(errno));
	close(fd);
	snprintf(path, sizeof(path), "%s/pids.max", cg);
	cr_assert_geq(fd = open(path, O_WRONLY), 0, "%s", path);
	n = snprintf(buf, sizeof(buf), "%d\n", ctl_threads(d.pid));
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	close(fd);

	cr_assert_eq(hpz_region_create(&r, 16 * 4096, HPZ_PAGE_SHMEM), 0);
	error = hpz_register(&r);
	snprintf(why, sizeof(why), "%s", hpz_last_error());
	printf("no thread: register: %d (%s)\n", error, why);
	fflush(stdout);
	cr_assert_eq(hpz_status(&st), 0, "status: %s", hpz_last_error());
	if ((f = fopen(d.log, "r")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if (strstr(line, "runs on the event loop") != NULL)
				onloop++;
		fclose(f);
	}
	hpz_region_destroy(&r);
	/* Threads again, then the daemon goes. */
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		(void)write(fd, "max\n", 4);
		close(fd);
	}
	ctl_daemon_own_end(&d);
	(void)rmdir(cg);
	cr_expect_eq(onloop, 0, "the daemon ran %d jobs of a client on its "
	    "event loop", onloop);
	cr_assert_neq(error, 0, "the register went through with no thread "
	    "for its context: its checks ran on the event loop");
	cr_assert_not_null(strstr(why, "thread"), "the refusal does not say "
	    "why: %s", why);
}

/* ---- a client holding its own mmap_lock over its resets ------------------ */

/*
 * Read-only anonymous memory populated in one call: the zero page, no RAM,
 * holding the mmap_lock for reading all along.  How long a GiB takes
 * differs tenfold and more between machines (0.15 s on one VM, far more on
 * a nested one): a fixed 64 GiB held the lock past the tests' 120 s wait
 * there, and only 2 s on a fast one (too short for a reset to be seen
 * stuck before it ended), so the length is measured to hold it about
 * CTL_POPULATE_SECS.  Mostly the huge zero page: little page table.
 */
#define CTL_POPULATE_SECS	5.0
#define CTL_POPULATE_PROBE	(1ULL << 30)
#define CTL_POPULATE_MIN	(2ULL << 30)
#define CTL_POPULATE_MAX	(256ULL << 30)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif

static uint64_t		 ctl_populate_bytes;

/* Bytes whose populate holds the lock about CTL_POPULATE_SECS here. */
static uint64_t
ctl_populate_len(void)
{
	double	 t0, secs, len;
	void	*p;

	if (ctl_populate_bytes != 0)
		return (ctl_populate_bytes);
	p = mmap(NULL, CTL_POPULATE_PROBE, PROT_READ,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return (CTL_POPULATE_MIN);
	t0 = itest_now_us();
	(void)madvise(p, CTL_POPULATE_PROBE, MADV_POPULATE_READ);
	secs = (itest_now_us() - t0) / 1e6;
	munmap(p, CTL_POPULATE_PROBE);
	len = secs > 0 ? CTL_POPULATE_SECS / secs * CTL_POPULATE_PROBE :
	    CTL_POPULATE_MAX;
	ctl_populate_bytes = len > CTL_POPULATE_MAX ? CTL_POPULATE_MAX :
	    len < CTL_POPULATE_MIN ? CTL_POPULATE_MIN :
	    (uint64_t)len & ~((1ULL << 30) - 1);
	printf("populate: %.2f s a GiB here: %llu GiB hold the lock about "
	    "%.0f s\n", secs, (unsigned long long)(ctl_populate_bytes >> 30),
	    CTL_POPULATE_SECS);
	fflush(stdout);
	return (ctl_populate_bytes);
}

struct ctl_populate {
	void		*addr;
	uint64_t	 len;
	atomic_int	 done;
	double		 secs;
};

/* Map p's memory, ctl_populate_len() bytes: 0 or -1. */
static int
ctl_populate_map(struct ctl_populate *p)
{
	memset(p, 0, sizeof(*p));
	p->len = ctl_populate_len();
	p->addr = mmap(NULL, p->len, PROT_READ,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return (p->addr == MAP_FAILED ? -1 : 0);
}

static void *
ctl_populate(void *arg)
{
	struct ctl_populate	*p = arg;
	double			 t0 = itest_now_us();

	(void)madvise(p->addr, p->len, MADV_POPULATE_READ);
	p->secs = (itest_now_us() - t0) / 1e6;
	atomic_store(&p->done, 1);
	return (NULL);
}

/*
 * One thread populates ctl_populate_len() of read-only memory (its mmap_lock
 * held for reading for seconds) while another resets the client's region
 * again and again: each reset of a region whose faults went back to the
 * kernel registers its range on the uffd again, which needs that lock for
 * writing.
 */
static void
ctl_attack_mmap_lock(int wfd)
{
	struct ctl_populate	 p;
	struct ctl_verdict	 v;
	struct hpz_region	 r;
	pthread_t		 t;
	double			 t0, worst = 0, d;
	int			 rc = 0, n = 0;

	if (hpz_region_create(&r, 64 * 4096, HPZ_PAGE_SHMEM) != 0)
		_exit(5);
	if (hpz_register(&r) != 0)
		_exit(6);
	if (ctl_populate_map(&p) != 0)
		_exit(7);
	memset(r.addr, 0x5a, r.len);
	if (pthread_create(&t, NULL, ctl_populate, &p) != 0)
		_exit(8);
	usleep(100 * 1000);	/* the populate is in, the lock held */
	(void)write(wfd, "r", 1);
	while (!atomic_load(&p.done) && rc == 0) {
		memset(r.addr, 0x5a, r.len);
		t0 = itest_now_us();
		rc = hpz_reset(&r);
		d = (itest_now_us() - t0) / 1e3;
		if (d > worst)
			worst = d;
		n++;
		usleep(20 * 1000);	/* its faults may go back to the kernel */
	}
	pthread_join(t, NULL);
	memset(&v, 0, sizeof(v));
	v.error = rc;
	v.replies = n;
	snprintf(v.text, sizeof(v.text), "%d resets during a %.1f s populate, "
	    "the longest %.0f ms%s%s", n, p.secs, worst, rc == 0 ? "" : ": ",
	    rc == 0 ? "" : hpz_last_error());
	(void)write(wfd, &v, sizeof(v));
	pause();
}

/*
 * The honest client's rounds go on while another client holds its own
 * mmap_lock (a long populate) over its resets (on d1e12d7 the loop's
 * UFFDIO_REGISTER waited for the lock: honest rounds took up to 3 s).
 */
Test(control, mmap_lock_held_over_resets, .timeout = 180)
{
	const char		*name = "mmap_lock held over resets";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got;

	ctl_daemon_same();
	attacker = ctl_attacker_start(ctl_attack_mmap_lock, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 120 * 1000);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
	cr_assert(got, "%s: the attacker's resets did not end", name);
	cr_assert_eq(v.error, 0, "%s: the attacker's reset: %d (%s)", name,
	    v.error, v.text);
	printf("%s: the attacker: %s\n", name, v.text);
	fflush(stdout);
}

/* ---- a process that holds its own mmap_lock, beside discard registers ----- */

#define CTL_WALK_LEN	(8ULL << 30)	/* read-only zero-page entries */
#define CTL_WALKERS	64

static char		*ctl_walk;
static atomic_uint	 ctl_walk_prot;
static atomic_int	 ctl_walk_go;

/*
 * mprotect over the whole populated mapping: the mmap_lock held for
 * writing while 2 million entries are walked (about 0.12 s here); with
 * 64 of these queued, a reader that comes waits for every one before it,
 * seconds in all.  (It was 48 GiB and 32 walkers: populating that took 60
 * s of the test's 180 on a loaded machine, and CI's distcheck ran out.)
 */
static void *
ctl_walker(void *arg)
{
	(void)arg;
	while (!atomic_load(&ctl_walk_go))
		usleep(1000);
	for (;;)
		mprotect(ctl_walk, CTL_WALK_LEN, (atomic_fetch_xor(
		    &ctl_walk_prot, 1) & 1) ? PROT_READ : PROT_NONE);
	return (NULL);
}

/*
 * Not a client at all: a process of the same uid whose mmap_lock is held
 * for writing nearly all the time.  Anyone who reads its /proc/PID/maps
 * waits for it.
 */
static void
ctl_attack_maps_lock(int wfd)
{
	pthread_t	th;
	int		i;

	ctl_walk = mmap(NULL, CTL_WALK_LEN, PROT_READ, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ctl_walk == MAP_FAILED)
		_exit(5);
	madvise(ctl_walk, CTL_WALK_LEN, MADV_NOHUGEPAGE);
	if (madvise(ctl_walk, CTL_WALK_LEN, MADV_POPULATE_READ) != 0)
		_exit(6);
	/*
	 * Every walker made before any walks: a thread's stack is an mmap,
	 * which queues behind the walkers already at it, so making them one
	 * by one among the others took minutes (the test ran out of its 180
	 * s in CI's distcheck).
	 */
	for (i = 0; i < CTL_WALKERS; i++)
		if (pthread_create(&th, NULL, ctl_walker, NULL) != 0)
			_exit(7);
	atomic_store(&ctl_walk_go, 1);
	usleep(300 * 1000);	/* the walkers queue up */
	(void)write(wfd, "r", 1);
	for (;;)
		pause();
}

/*
 * hpz_register(HPZ_DISCARD) looks whether another process maps the same
 * range of the file (its garbage would be readable there) by reading
 * every process's /proc/PID/maps, and such a read waits for that
 * process's mmap_lock.  Another process of the same uid, client or not,
 * that keeps its lock held must not hold up an honest client's discard
 * registers: each look is bounded, and a process whose map cannot be
 * read in time is passed over.  On a8c2c0d the honest client's register
 * waited as long as the other held its lock.
 */
Test(control, discard_register_beside_a_process_holding_its_mmap_lock,
    .timeout = 180)
{
	const char		*name = "discard register beside a held "
				    "mmap_lock";
	struct ctl_figures	 fg;
	pid_t			 attacker, honest;
	int			 arfd, hrfd;

	ctl_daemon_same();
	attacker = ctl_attacker_start(ctl_attack_maps_lock, &arfd);
	ctl_honest_flags = HPZ_DISCARD;
	honest = ctl_honest_start(&hrfd);
	ctl_honest_flags = 0;
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
}

/*
 * A uid with [limits] stuck_contexts contexts stuck at once is refused new
 * work with a reason that names the setting, and served again once they
 * let go.  Its own daemon, stuck_contexts = 1; the inode-lock holder above
 * is the stuck one, this process (the same uid) the one refused.
 */
#if HPZ_PROTOCOL_VERSION >= 7
Test(control, uid_with_too_many_stuck_contexts_is_refused, .timeout = 120)
{
	struct ctl_daemon	d;
	struct ctl_verdict	v;
	struct hpz_status	st;
	struct hpz_region	r;
	pid_t			attacker;
	int			arfd, error, i, got;

	ctl_daemon_own(&d, "[limits]\nstuck_contexts = 1\n");
	attacker = ctl_attacker_start(ctl_attack_inode_lock, &arfd);
	for (i = 0; i < 100; i++) {
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		if (st.contexts_stuck >= 1)
			break;
		usleep(100 * 1000);
	}
	cr_assert_geq(st.contexts_stuck, 1, "the holder's context was not "
	    "found stuck in 10 s");
	cr_assert_eq(hpz_region_create(&r, 16 * 4096, HPZ_PAGE_SHMEM), 0);
	error = hpz_register(&r);
	printf("stuck contexts: a register of the same uid while one is "
	    "stuck: %d (%s)\n", error, hpz_last_error());
	fflush(stdout);
	cr_expect_eq(error, -EBUSY, "register while the uid's one context "
	    "is stuck: %d (%s)", error, hpz_last_error());
	cr_expect_not_null(strstr(hpz_last_error(), "stuck_contexts"), "%s",
	    hpz_last_error());
	/* It lets go (CTL_HOLD_MS): the same register goes through. */
	got = ctl_attacker_verdict(arfd, &v, CTL_HOLD_MS + 10000);
	cr_expect(got, "the holder's unregister got no answer");
	for (i = 0; i < 100; i++) {
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		if (st.contexts_stuck == 0)
			break;
		usleep(100 * 1000);
	}
	error = hpz_register(&r);
	cr_expect_eq(error, 0, "register once the holder let go: %d (%s)",
	    error, hpz_last_error());
	hpz_region_destroy(&r);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_own_end(&d);
}
#endif

/* ---- a region moved while its reset is pending -------------------------- */

/*
 * Connection A registers a region and sends a reset of it while this
 * process holds its own mmap_lock (a long populate, as above): the reset
 * waits for its faults to be trapped again (UFFDIO_REGISTER, on our
 * context).  Connection B of the same process registers the same fds at
 * once, which would move the region to B; then A goes.  The move must wait
 * for the reset: B is refused (EBUSY) or, its register waiting on the same
 * process's context behind the reset, answered once the reset is; the
 * reset's answer never goes to a freed connection or to anyone else's
 * socket (on d1e12d7 it did: a use after free).  C, a connection made after A went, gets only its own
 * answers, also once the reset is through.
 */
Test(control, region_moved_while_its_reset_is_pending, .timeout = 180)
{
	struct hpz_msg_register	 reg;
	struct hpz_msg_range	 rg;
	struct hpz_msg_header	 h;
	struct hpz_msg		 m;
	struct ctl_shm		 shm;
	struct ctl_populate	 p;
	struct pollfd		 pfd;
	struct hpz_status	 st;
	pthread_t		 t;
	int			 a, b, cc, i, fds[3];

	ctl_daemon_same();
	ctl_shm_make(&shm, 64 * 4096);
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = itest_state_memfd(64);
	a = itest_raw_connect();
	b = itest_raw_connect();
	ctl_reg_msg(&reg, &shm, 1);
	cr_assert_eq(proto_send(a, &reg, sizeof(reg), fds, 3),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(ctl_attacker_reply(a, &m), 0, "A's register: no answer");
	cr_assert_eq(m.u.reply.error, 0, "A's register: %d (%s)",
	    m.u.reply.error, m.u.reply.text);
	memset(shm.addr, 0x5a, shm.len);

	/* Our mmap_lock, held for reading for seconds. */
	cr_assert_eq(ctl_populate_map(&p), 0);
	cr_assert_eq(pthread_create(&t, NULL, ctl_populate, &p), 0);
	usleep(100 * 1000);

	proto_init(&rg, HPZ_MSG_RESET, sizeof(rg), 2);
	rg.addr = (uintptr_t)shm.addr;
	rg.len = shm.len;
	cr_assert_eq(proto_send(a, &rg, sizeof(rg), NULL, 0),
	    (ssize_t)sizeof(rg));
	/*
	 * The reset is in once our context is seen stuck on our lock: a
	 * fixed nap was not enough on a loaded machine (the daemon took B's
	 * register first, and B was rightly served).
	 */
	for (i = 0; i < 100; i++) {
		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		if (st.contexts_stuck >= 1)
			break;
		cr_assert(!atomic_load(&p.done), "the populate ended (%.1f s) "
		    "before the reset was seen waiting on it", p.secs);
		usleep(100 * 1000);
	}
	cr_assert_geq(st.contexts_stuck, 1, "A's reset was not seen waiting "
	    "on our mmap_lock in 10 s");
	ctl_reg_msg(&reg, &shm, 3);
	cr_assert_eq(proto_send(b, &reg, sizeof(reg), fds, 3),
	    (ssize_t)sizeof(reg));
	cr_assert_eq(ctl_attacker_reply(b, &m), 0, "B's register: no answer");
	cr_assert_eq(m.u.hdr.seq, 3, "B got an answer to seq %u", m.u.hdr.seq);
	printf("region moved while its reset is pending: B's register: %d "
	    "(%s)\n", m.u.reply.error, m.u.reply.text);
	fflush(stdout);
	/*
	 * Refused while the reset pends, or (a register's fstat now waits
	 * on the same process's context, behind the stuck reset) answered
	 * only once the reset was: never moved under a pending reset.  The
	 * populate's end is seen a moment after the lock is let go.
	 */
	if (m.u.reply.error == 0) {
		for (i = 0; i < 100 && !atomic_load(&p.done); i++)
			usleep(10 * 1000);
		cr_expect(atomic_load(&p.done), "B's register was answered "
		    "while A's reset still waited on our lock: the region "
		    "moved under a pending reset");
	} else
		cr_expect_eq(m.u.reply.error, -EBUSY, "B's register of a "
		    "region whose reset is pending on A: %d (%s)",
		    m.u.reply.error, m.u.reply.text);
	close(a);	/* its reset pending, or answered */

	cc = itest_raw_connect();
	proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 77);
	cr_assert_eq(proto_send(cc, &h, sizeof(h), NULL, 0),
	    (ssize_t)sizeof(h));
	cr_assert_eq(ctl_attacker_reply(cc, &m), 0, "C: no answer");
	cr_assert_eq(m.u.hdr.type, HPZ_MSG_STATUS_REPLY, "C, which asked for "
	    "status, got a message of type %u (seq %u): someone else's "
	    "answer", m.u.hdr.type, m.u.hdr.seq);
	cr_assert_eq(m.u.hdr.seq, 77);
	/* The lock let go, the reset goes through: nothing more for C. */
	pthread_join(t, NULL);
	pfd.fd = cc;
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (poll(&pfd, 1, 2000) == 1 && proto_recv(cc, &m) > 0)
		cr_assert_fail("C got a message it did not ask for, type %u "
		    "seq %u error %d (%s): A's answer, after A went",
		    m.u.hdr.type, m.u.hdr.seq, m.u.reply.error,
		    m.u.reply.text);
	printf("region moved while its reset is pending: the populate held "
	    "the lock %.1f s; C got only its own answer\n", p.secs);
	fflush(stdout);
	close(cc);
	close(b);
	ctl_daemon_same();
	munmap(p.addr, p.len);
	close(fds[2]);
	close(shm.uffd);
	close(shm.fd);
	munmap(shm.addr, shm.len);
}

/* ---- a discard register while the client holds its mmap_lock ------------ */

/*
 * The client's own uffd registration made (by hand, as libhpz would), then
 * its mmap_lock held for reading for seconds (a long populate), then a
 * register of the range with HPZ_DISCARD: all of it garbage, so the
 * daemon must trap its faults first (UFFDIO_REGISTER, which needs that
 * lock for writing).  The answer waits for the populate; only this client
 * waits with it.
 */
static void
ctl_attack_discard_locked(int wfd)
{
	struct hpz_msg_register	 reg;
	struct hpz_msg		 m;
	struct ctl_populate	 p;
	struct ctl_verdict	 v;
	struct ctl_shm		 shm;
	pthread_t		 t;
	double			 t0;
	char			*buf;
	int			 sock, fds[3];

	ctl_shm_make(&shm, 64 * 4096);
	/* Written through the file: the mapping faults on our own uffd. */
	if ((buf = malloc(shm.len)) == NULL)
		_exit(6);
	memset(buf, 0x5a, shm.len);
	if (pwrite(shm.fd, buf, shm.len, 0) != (ssize_t)shm.len)
		_exit(6);
	free(buf);
	fds[0] = shm.uffd;
	fds[1] = shm.fd;
	fds[2] = itest_state_memfd(64);
	sock = itest_raw_connect();
	if (ctl_populate_map(&p) != 0 ||
	    pthread_create(&t, NULL, ctl_populate, &p) != 0)
		_exit(7);
	usleep(100 * 1000);	/* the populate is in, the lock held */
	(void)write(wfd, "r", 1);
	ctl_reg_msg(&reg, &shm, 1);
	reg.flags = HPZ_DISCARD;
	t0 = itest_now_us();
	memset(&v, 0, sizeof(v));
	if (proto_send(sock, &reg, sizeof(reg), fds, 3) != sizeof(reg) ||
	    ctl_attacker_reply(sock, &m) != 0) {
		v.error = -EIO;
		snprintf(v.text, sizeof(v.text), "no answer to the register");
	} else {
		v.error = m.u.reply.error;
		snprintf(v.text, sizeof(v.text), "answered after %.0f ms "
		    "(%.120s)", (itest_now_us() - t0) / 1e3, m.u.reply.text);
	}
	pthread_join(t, NULL);
	v.replies = 1;
	(void)write(wfd, &v, sizeof(v));
	pause();
}

Test(control, discard_register_under_the_clients_mmap_lock, .timeout = 180)
{
	const char		*name = "discard register under its mmap_lock";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got;

	ctl_daemon_same();
	attacker = ctl_attacker_start(ctl_attack_discard_locked, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 120 * 1000);
	ctl_attacker_stop(attacker, arfd);
	ctl_daemon_same();
	cr_assert(got, "%s: the attacker's register did not end", name);
	cr_assert_eq(v.error, 0, "%s: the attacker's register: %d (%s)", name,
	    v.error, v.text);
	printf("%s: the attacker's register %s\n", name, v.text);
	fflush(stdout);
}

/* ---- a step aside's punch while the client holds its inode lock --------- */

struct ctl_toucher {
	struct hpz_region	*r;
	atomic_int		 done;
	size_t			 nonzero;
};

/* Reads the whole region: its garbage faults, served or not. */
static void *
ctl_touch(void *arg)
{
	struct ctl_toucher	*t = arg;
	size_t			 first;

	t->nonzero = itest_count_nonzero(t->r->addr, t->r->len, &first);
	atomic_store(&t->done, 1);
	return (NULL);
}

/*
 * A shmem region of its own, HPZ_NO_SCRUB, written and reset (all of it
 * garbage), then its memfd's inode lock held (ctl_hold_write) and the
 * region read: under step_aside = always the first garbage fault makes
 * the region step aside, and its punch needs that lock.  The verdict: the
 * region read back, once the holder lets go (CTL_HOLD_MS).
 */
static void
ctl_attack_aside_inode_lock(int wfd)
{
	struct uffdio_api	 api = { .api = UFFD_API };
	struct uffdio_register	 reg;
	struct ctl_toucher	 tt;
	struct ctl_verdict	 v;
	struct hpz_region	 r;
	struct ctl_hold		 h;
	pthread_t		 tw, tr, tc;
	size_t			 first;

	if (hpz_region_create(&r, 16ULL << 20, HPZ_PAGE_SHMEM) != 0)
		_exit(5);
	r.flags = HPZ_NO_SCRUB;
	if (hpz_register(&r) != 0)
		_exit(6);
	memset(r.addr, 0x5a, r.len);
	if (hpz_reset(&r) != 0)
		_exit(6);
	h.fd = r.fd;
	h.buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (h.buf == MAP_FAILED || h.uffd < 0 ||
	    ioctl(h.uffd, UFFDIO_API, &api) == -1)
		_exit(7);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)h.buf;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(h.uffd, UFFDIO_REGISTER, &reg) == -1)
		_exit(8);
	if (pthread_create(&tw, NULL, ctl_hold_write, &h) != 0 ||
	    pthread_create(&tr, NULL, ctl_hold_release, &h) != 0)
		_exit(9);
	usleep(200 * 1000);	/* the write is in, the lock held */
	memset(&tt, 0, sizeof(tt));
	tt.r = &r;
	if (pthread_create(&tc, NULL, ctl_touch, &tt) != 0)
		_exit(9);
	usleep(100 * 1000);	/* the first fault is in */
	(void)write(wfd, "r", 1);
	pthread_join(tc, NULL);
	pthread_join(tw, NULL);
	memset(&v, 0, sizeof(v));
	v.replies = 1;
	/* The write of 4096 bytes came in last, over page 0. */
	tt.nonzero = itest_count_nonzero((char *)r.addr + 4096, r.len - 4096,
	    &first);
	v.error = tt.nonzero == 0 ? 0 : -EIO;
	snprintf(v.text, sizeof(v.text), "read back: %zu bytes not zero "
	    "after page 0", tt.nonzero);
	(void)write(wfd, &v, sizeof(v));
	pause();
}

/*
 * A worker decides a region steps aside (step_aside = always here), but
 * the punch of its garbage takes the file's inode lock, which the client
 * holds: the punch is made on the client's context (on main before this,
 * a worker sat in the punch, and every client whose faults hash to it
 * waited).  The honest client's rounds go on, status shows the holder's
 * stuck context, and its region reads zero once it lets go.
 */
#if HPZ_PROTOCOL_VERSION >= 7
Test(control, step_aside_punch_under_the_clients_inode_lock, .timeout = 120)
{
	const char		*name = "step-aside punch under its inode lock";
	struct ctl_figures	 fg;
	struct ctl_daemon	 d;
	struct ctl_verdict	 v;
	struct hpz_status	 st;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got;

	ctl_daemon_own(&d, "[policy]\nstep_aside = always\n");
	attacker = ctl_attacker_start(ctl_attack_aside_inode_lock, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	printf("%s: status: %llu contexts, %llu stuck, the longest pid %lld "
	    "for %llu ms in %s; %llu steps aside\n", name, st.contexts,
	    st.contexts_stuck, (long long)st.context_stuck_pid,
	    st.context_stuck_ms, st.context_stuck_what,
	    (unsigned long long)st.steps_aside);
	fflush(stdout);
	cr_expect_eq((pid_t)st.context_stuck_pid, attacker, "%s: the stuck "
	    "context shown is pid %lld, not the attacker's %d", name,
	    (long long)st.context_stuck_pid, (int)attacker);
	got = ctl_attacker_verdict(arfd, &v, CTL_HOLD_MS + 10000);
	ctl_attacker_stop(attacker, arfd);
	cr_expect_eq(kill(d.pid, 0), 0, "%s: the daemon died", name);
	ctl_daemon_own_end(&d);
	cr_assert(got, "%s: the attacker's read did not end after it let go",
	    name);
	cr_assert_eq(v.error, 0, "%s: the attacker's region: %s", name,
	    v.text);
	printf("%s: the attacker's region, once it let go: %s\n", name,
	    v.text);
	fflush(stdout);
}
#endif

/* ---- a teardown on a sealed, sparse file -------------------------------- */

/*
 * A sparse 1 GiB shmem region with 64 KiB of data, registered HPZ_DISCARD |
 * HPZ_NO_SCRUB (every page garbage), then sealed F_SEAL_FUTURE_WRITE (a
 * punch fails with EPERM, our mapping from before the seal still writes)
 * and unregistered.  The garbage is cleared in place through that mapping
 * (it reads zero, and stays in the file), and no hole is allocated: the
 * daemon's mapping is guarded against filling them (on d1e12d7 the loop
 * wrote zeros over every garbage page, O(pages), allocating them all in
 * the daemon's name; until the clear in place, the garbage stayed as it
 * was, the client's own stale bytes).
 */
Test(control, sealed_file_teardown_clears_in_place_allocates_nothing,
    .timeout = 120)
{
	struct hpz_region	 r;
	struct stat		 before, after;
	size_t			 len = 1ULL << 30, data = 64 << 10, first;
	void			*p;
	int			 fd, error;

	ctl_daemon_same();
	fd = memfd_create("itest-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
	    fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(p, 0x3c, data);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = len;
	r.fd = fd;
	r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0,
	    "F_SEAL_FUTURE_WRITE: %s", strerror(errno));
	cr_assert_eq(fstat(fd, &before), 0);
	error = hpz_unregister(&r);
	cr_assert_eq(fstat(fd, &after), 0);
	printf("sealed teardown: unregister %d; the file's blocks %lld before, "
	    "%lld after (%zu bytes of data)\n", error,
	    (long long)before.st_blocks, (long long)after.st_blocks, data);
	fflush(stdout);
	cr_expect_eq(error, 0, "unregister: %s", hpz_last_error());
	cr_expect_eq(after.st_blocks, before.st_blocks, "the teardown "
	    "allocated %lld blocks of the sealed file",
	    (long long)(after.st_blocks - before.st_blocks));
	/* Garbage the client declared: zeros now, where it was. */
	cr_expect_eq(itest_count_nonzero(p, data, &first), 0, "stale byte at "
	    "%zu after the teardown", first);
	munmap(p, len);
	close(fd);
	ctl_daemon_same();
}

/* ---- a connection refused as it is accepted ------------------------------ */

/*
 * A uid at its [limits] clients (1 here, its own daemon): its next
 * process's register is refused with EDQUOT and a reason that names the
 * setting, not taken for a daemon that went away (before, libhpz got the
 * connection closed, waited for a daemon to come back and said "hpzerod
 * closed the connection").
 */
Test(control, connection_over_the_uid_limit_is_told_why, .timeout = 120)
{
	struct ctl_daemon	d;
	struct hpz_region	r;
	pid_t			holder;
	int			p[2], error;
	char			c;

	ctl_daemon_own(&d, "[limits]\nclients = 1\n");
	cr_assert_eq(pipe(p), 0);
	holder = fork();
	cr_assert_geq(holder, 0);
	if (holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (hpz_region_create(&r, 16 * 4096, HPZ_PAGE_SHMEM) != 0 ||
		    hpz_register(&r) != 0)
			_exit(2);
		(void)write(p[1], "r", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &c, 1), 1, "the holder did not register");
	cr_assert_eq(hpz_region_create(&r, 16 * 4096, HPZ_PAGE_SHMEM), 0);
	error = hpz_register(&r);
	printf("over the uid's connections: register %d (%s)\n", error,
	    hpz_last_error());
	fflush(stdout);
	cr_expect_eq(error, -EDQUOT, "register over [limits] clients: %d (%s)",
	    error, hpz_last_error());
	cr_expect_not_null(strstr(hpz_last_error(), "[limits] clients"),
	    "the reason does not name the setting: %s", hpz_last_error());
	hpz_region_destroy(&r);
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	close(p[0]);
	ctl_daemon_own_end(&d);
}

/* The start of d's log, as a string. */
static void
ctl_log_read(const struct ctl_daemon *d, char *buf, size_t size)
{
	ssize_t	n;
	int	fd;

	cr_assert_geq(fd = open(d->log, O_RDONLY), 0);
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
}

/* Open fds of process pid, and the highest number among them. */
static int
ctl_fd_count(pid_t pid, int *maxfd)
{
	char		 path[64];
	DIR		*dir;
	struct dirent	*e;
	int		 n = 0, fd;

	*maxfd = -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	cr_assert_not_null(dir = opendir(path));
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		fd = atoi(e->d_name);
		n++;
		if (fd > *maxfd)
			*maxfd = fd;
	}
	closedir(dir);
	return (n);
}

/*
 * The daemon's fd table full as a register's three fds arrive: the client
 * is told so (EMFILE, a reason naming the daemon's RLIMIT_NOFILE) and its
 * connection stays; once the daemon has fds again, the same register on
 * the same connection works.  Before, the kernel's MSG_CTRUNC was read as
 * a sender of too many fds: "register message carries 253 fds, expected
 * 3", EBADMSG, and the honest client was dropped as a bad one.
 */
Test(control, register_while_the_daemon_is_out_of_fds_is_told_why,
    .timeout = 120)
{
	struct ctl_daemon	d;
	struct hpz_region	r;
	struct hpz_status	st;
	struct rlimit		lim, old;
	char			logtext[8192];
	int			error, n, maxfd, i;

	ctl_daemon_own(&d, "");
	/* Our connection first (libhpz keeps it), then the daemon at rest. */
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	cr_assert_eq(hpz_region_create(&r, 16 * 4096, HPZ_PAGE_SHMEM), 0);
	for (i = 0, n = -1; i < 50; i++) {
		int	m = ctl_fd_count(d.pid, &maxfd);

		if (m == n)
			break;
		n = m;
		usleep(20 * 1000);
	}
	/* One free slot below the limit: the first of the three fds only. */
	cr_assert_lt(maxfd, n + 1, "the daemon's fds have gaps (%d open, "
	    "highest %d): cannot leave it exactly one slot", n, maxfd);
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old), 0);
	lim.rlim_cur = (rlim_t)n + 1;
	lim.rlim_max = old.rlim_max;
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &lim, NULL), 0);
	error = hpz_register(&r);
	printf("register with the daemon out of fds: %d (%s)\n", error,
	    hpz_last_error());
	fflush(stdout);
	cr_expect_eq(error, -EMFILE, "register: %d (%s)", error,
	    hpz_last_error());
	cr_expect_not_null(strstr(hpz_last_error(), "out of file descriptors"),
	    "the reason does not say so: %s", hpz_last_error());
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0);
	error = hpz_register(&r);
	cr_expect_eq(error, 0, "register once the daemon has fds again: %d "
	    "(%s)", error, hpz_last_error());
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	ctl_log_read(&d, logtext, sizeof(logtext));
	cr_expect_null(strstr(logtext, "dropped:"),
	    "the honest client was dropped: %s", logtext);
	if (error == 0)
		cr_expect_eq(hpz_unregister(&r), 0, "%s", hpz_last_error());
	hpz_region_destroy(&r);
	ctl_daemon_own_end(&d);
}

/* Lines of d's whole log that hold needle. */
static int
ctl_log_count(const struct ctl_daemon *d, const char *needle)
{
	char	line[1024];
	FILE	*f;
	int	n = 0;

	cr_assert_not_null(f = fopen(d->log, "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	fclose(f);
	return (n);
}

/*
 * With its fd table full the daemon cannot accept a waiting connection,
 * and the listening socket stays readable: it must stop listening and say
 * so once, not spin on the socket (on d1e12d7 the loop went round and
 * round, logging each time); once fds free up it accepts the connection
 * that waited.
 */
Test(control, accept_out_of_fds_stops_and_says_so_once, .timeout = 120)
{
	struct ctl_daemon	d;
	struct hpz_status	st;
	struct rlimit		lim, old;
	uint64_t		t0;
	int			fd, said, again;

	ctl_daemon_own(&d, "[pool]\nenable = no\n");
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	/* No free slot at all: every fd it opens now fails, EMFILE. */
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old), 0);
	lim.rlim_cur = 3;
	lim.rlim_max = old.rlim_max;
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &lim, NULL), 0);
	fd = itest_raw_connect();	/* waits in the listen queue */
	usleep(1000 * 1000);
	said = ctl_log_count(&d, "accept");
	cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0);
	printf("accept out of fds: %d log lines on accept in 1 s\n", said);
	fflush(stdout);
	cr_expect_eq(said, 1, "%d log lines on accept in 1 s with the fd table "
	    "full: it spins on the listening socket", said);
	cr_expect_eq(ctl_log_count(&d, "not accepting connections until"), 1,
	    "it did not say that it stopped accepting");
	/* Fds again: the waiting connection is accepted, and said so. */
	t0 = itest_now_ms();
	while ((again = ctl_log_count(&d, "accepting connections again")) ==
	    0 && itest_now_ms() - t0 < 5000ULL * itest_wait_scale())
		usleep(50 * 1000);
	cr_expect_eq(again, 1, "the connection that waited was not accepted "
	    "once the daemon had fds again");
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	close(fd);
	ctl_daemon_own_end(&d);
}

/* ---- address space: what the daemon maps of its clients' files --------- */

/*
 * Every region is mapped whole in the daemon (MAP_NORESERVE): sparse
 * hugetlb files of terabytes cost a client nothing and the daemon its
 * address space.  On cef46ec one uid filled 127.9 TiB of it in seconds and
 * every other client's register then failed (ENOMEM).  [limits] bytes (a
 * uid's share, a quarter of map_bytes) and map_bytes (all uids, half the
 * address space) bound it, and a region's bytes stay charged until the
 * daemon has really unmapped it.
 */
#define CTL_SPACE_UFFDS	48

struct ctl_space {
	int		uffds[CTL_SPACE_UFFDS];
	int		socks[CTL_SPACE_UFFDS];	/* a connection a region */
	int		n;		/* regions registered */
	uint64_t	total;		/* their bytes */
	int		error;		/* the last refusal */
	char		text[HPZ_REPLY_TEXT];
};

/* A uffd for hugetlb ranges, made as root (another uid may not). */
static int
ctl_space_uffd(void)
{
	struct uffdio_api	api;
	int			fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd == -1)
		_exit(40);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_MISSING_HUGETLBFS |
	    UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_EXACT_ADDRESS;
	if (ioctl(fd, UFFDIO_API, &api) == -1)
		_exit(41);
	return (fd);
}

/* As root: uffds for the regions to come, then become uid 65534. */
static void
ctl_space_prepare(struct ctl_space *s)
{
	int	i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < CTL_SPACE_UFFDS; i++)
		s->uffds[i] = ctl_space_uffd();
	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(42);
}

/*
 * One sparse hugetlb region of len bytes registered on sock with uffd:
 * the daemon's answer (0 or -errno, its text in s), or 1 if this process
 * cannot map it itself.  Our own mapping goes once it is answered (the
 * daemon keeps its own: that is the point).
 */
static int
ctl_space_register(struct ctl_space *s, int sock, int uffd, uint64_t len,
    uint32_t seq)
{
	struct uffdio_register	ur;
	struct hpz_msg_register	reg;
	struct hpz_msg		m;
	void			*a;
	int			fds[3], fd, sfd;

	if ((fd = memfd_create("itest-space", MFD_CLOEXEC | MFD_HUGETLB)) ==
	    -1 || ftruncate(fd, (off_t)len) == -1)
		_exit(43);
	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_NORESERVE, fd, 0);
	if (a == MAP_FAILED) {
		close(fd);
		return (1);
	}
	memset(&ur, 0, sizeof(ur));
	ur.range.start = (uintptr_t)a;
	ur.range.len = len;
	ur.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR;
	if (ioctl(uffd, UFFDIO_REGISTER, &ur) == -1)
		_exit(44);
	sfd = memfd_create("itest-space-state", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING);
	if (sfd == -1 || ftruncate(sfd, (off_t)HPZ_STATE_SIZE(len >> 21)) ==
	    -1 || fcntl(sfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == -1)
		_exit(45);
	proto_init(&reg, HPZ_MSG_REGISTER, sizeof(reg), seq);
	reg.addr = (uintptr_t)a;
	reg.len = len;
	reg.offset = 0;
	reg.page_size = 2 * 1024 * 1024;
	reg.uffd_features = UFFD_FEATURE_MISSING_HUGETLBFS |
	    UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_EXACT_ADDRESS;
	reg.uffd_ioctls = ur.ioctls;
	fds[0] = uffd;
	fds[1] = fd;
	fds[2] = sfd;
	if (proto_send(sock, &reg, sizeof(reg), fds, 3) !=
	    (ssize_t)sizeof(reg) || ctl_attacker_reply(sock, &m) != 0)
		_exit(46);
	munmap(a, len);
	close(fd);
	close(sfd);
	s->error = m.u.reply.error;
	snprintf(s->text, sizeof(s->text), "%s", m.u.reply.text);
	return (m.u.reply.error);
}

/*
 * Register sparse regions of 8 TiB, then halves of that whenever refused
 * (or our own address space is full), down to 1 GiB: as much of the
 * daemon's address space as it lets this uid have.  A connection a region:
 * ours is unmapped once answered, and the next lands at the same address,
 * which one connection may not register twice.
 */
static void
ctl_space_fill(struct ctl_space *s)
{
	uint64_t	len = 8ULL << 40;
	int		rc, sock;

	while (len >= (1ULL << 30) && s->n < CTL_SPACE_UFFDS) {
		sock = itest_raw_connect();
		rc = ctl_space_register(s, sock, s->uffds[s->n], len,
		    (uint32_t)(100 + s->n));
		if (rc == 0) {
			s->socks[s->n] = sock;
			s->total += len;
			s->n++;
			continue;
		}
		close(sock);
		if (rc == 1 || rc == -EDQUOT || rc == -ENOMEM)
			len /= 2;
		else
			break;
	}
}

static void
ctl_space_verdict(int wfd, const struct ctl_space *s)
{
	struct ctl_verdict	v;

	memset(&v, 0, sizeof(v));
	v.error = s->error;
	v.replies = s->n;
	snprintf(v.text, sizeof(v.text), "%d regions, %llu GiB; the last "
	    "refusal: %.*s", s->n, (unsigned long long)(s->total >> 30),
	    (int)sizeof(v.text) - 48, s->text);
	(void)write(wfd, &v, sizeof(v));
}

static void
ctl_attack_space(int wfd)
{
	struct ctl_space	s;

	ctl_space_prepare(&s);
	ctl_space_fill(&s);
	(void)write(wfd, "r", 1);
	ctl_space_verdict(wfd, &s);
	pause();
}

/* The daemon's address space (VmSize), in GiB. */
static uint64_t
ctl_daemon_vm_gib(void)
{
	const char	*p = getenv("HPZD_PID");
	char		 path[64], line[256];
	unsigned long long kib = 0;
	FILE		*f;

	cr_assert_not_null(p);
	snprintf(path, sizeof(path), "/proc/%s/status", p);
	cr_assert_not_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return ((uint64_t)kib >> 20);
}

/* The daemon's address space is back within 1 GiB of base (a bound). */
static void
ctl_daemon_vm_back(const char *name, uint64_t base)
{
	uint64_t	now = 0;
	int		i;

	for (i = 0; i < 300 * itest_wait_scale(); i++) {
		if ((now = ctl_daemon_vm_gib()) <= base + 1)
			return;
		usleep(100 * 1000);
	}
	cr_assert_fail("%s: the daemon maps %llu GiB 30 s after the attacker "
	    "went, %llu GiB before it came", name, (unsigned long long)now,
	    (unsigned long long)base);
}

/*
 * Another uid fills what it can of the daemon's address space beside the
 * honest client: it is refused at its uid's share ([limits] bytes), the
 * honest client's registers keep being answered, and the daemon's
 * mappings go once the attacker does.
 */
Test(control, address_space_of_one_uid_is_bounded, .timeout = 180)
{
	const char		*name = "sparse hugetlb regions, 8 TiB and halves";
	struct ctl_sockmode	 so;
	struct ctl_verdict	 v;
	uint64_t		 base = ctl_daemon_vm_gib();

	itest_need_pages(2048, 16);
	ctl_socket_for_all(&so);
	ctl_beside(ctl_attack_space, name, &v, 1);
	ctl_socket_restore(&so);
	printf("%s: the daemon mapped %llu GiB before\n", name,
	    (unsigned long long)base);
	fflush(stdout);
	cr_assert_eq(v.error, -EDQUOT, "%s: %d (%s)", name, v.error, v.text);
	cr_assert_not_null(strstr(v.text, "[limits] bytes"), "%s: %s", name,
	    v.text);
	ctl_daemon_vm_back(name, base);
}

/*
 * A uid's bytes are its own until the daemon has unmapped them: process A
 * of uid 65534 fills its share, then gets its connection dropped with a
 * descriptor whose close never returns (a FUSE server that never answers
 * FLUSH), so its regions' teardowns wait behind that close on its context
 * and the daemon keeps their mappings.  Process B of the same uid is
 * refused meanwhile; once the server goes, the mappings go and B's
 * register is answered.  (On cef46ec a region's bytes were given back as
 * its teardown was queued: B got them again while A's were still mapped.)
 */
static void
ctl_attack_space_then_stuck(int wfd)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	}			 cm;
	struct ctl_space	 s;
	struct msghdr		 mh;
	struct iovec		 iov;
	struct cmsghdr		*c;
	char			 junk[64];
	int			 sock, fd, i;

	if ((fd = open(ctl_fu.file, O_RDONLY | O_CLOEXEC)) == -1)
		_exit(30);
	ctl_space_prepare(&s);
	ctl_space_fill(&s);
	if (s.n == 0)
		_exit(32);
	sock = s.socks[0];
	/*
	 * Junk with the FUSE fd on the first connection: dropped, its close
	 * stuck on our context; the others' teardowns queue behind it.
	 */
	memset(junk, 0xa5, sizeof(junk));
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = junk;
	iov.iov_len = sizeof(junk);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) == -1)
		_exit(31);
	usleep(200 * 1000);
	for (i = 1; i < s.n; i++)
		close(s.socks[i]);
	(void)write(wfd, "r", 1);
	ctl_space_verdict(wfd, &s);
	pause();	/* our own close of fd would hang: we die instead */
}

/* Process B: one 1 GiB region as uid 65534; its answer as exit status. */
static int
ctl_space_one(void)
{
	struct ctl_space	s;
	pid_t			pid;
	int			status, rc;

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		memset(&s, 0, sizeof(s));
		s.uffds[0] = ctl_space_uffd();
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(42);
		rc = ctl_space_register(&s, itest_raw_connect(), s.uffds[0],
		    1ULL << 30, 1);
		printf("uid 65534, another process: 1 GiB: %d (%s)\n", rc,
		    s.text);
		fflush(stdout);
		_exit(rc == 0 ? 0 : rc == -EDQUOT &&
		    strstr(s.text, "[limits] bytes") != NULL ? 1 : 2);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "process B: 0x%x", status);
	return (WEXITSTATUS(status));
}

Test(control, address_space_charged_until_unmapped, .timeout = 180)
{
	const char		*name = "a uid's share while its teardowns wait";
	struct ctl_sockmode	 so;
	struct ctl_verdict	 v;
	pid_t			 attacker;
	uint64_t		 base = ctl_daemon_vm_gib(), held;
	int			 arfd, got, b;

	ctl_fuse_start(&ctl_fu, "noflush");
	ctl_socket_for_all(&so);
	attacker = ctl_attacker_start(ctl_attack_space_then_stuck, &arfd);
	got = ctl_attacker_verdict(arfd, &v, 1000);
	cr_assert(got, "%s: the attacker had no answer", name);
	printf("%s: %s\n", name, v.text);
	fflush(stdout);
	cr_expect_eq(v.error, -EDQUOT, "%s: %d (%s)", name, v.error, v.text);
	usleep(500 * 1000);	/* its drop reached the daemon */
	held = ctl_daemon_vm_gib();
	b = ctl_space_one();
	printf("%s: the daemon maps %llu GiB (%llu before); process B: %s\n",
	    name, (unsigned long long)held, (unsigned long long)base,
	    b == 0 ? "registered" : b == 1 ? "refused, [limits] bytes" :
	    "other");
	fflush(stdout);
	cr_expect_gt(held, base + 1024, "%s: the dropped connection's "
	    "regions are no longer mapped (%llu GiB): nothing waited", name,
	    (unsigned long long)held);
	cr_expect_eq(b, 1, "%s: another process of the uid got address space "
	    "its first process's regions still hold", name);
	/* The server goes: the closes, then the teardowns, run. */
	ctl_fuse_stop(&ctl_fu);
	ctl_daemon_vm_back(name, base);
	cr_expect_eq(ctl_space_one(), 0, "%s: once unmapped, the uid's share "
	    "was not given back", name);
	ctl_attacker_stop(attacker, arfd);
	ctl_socket_restore(&so);
	ctl_daemon_same();
	ctl_closed_all(name);
}

/* ---- refused connections with a stuck close queued in them --------------- */

#define CTL_REFUSED_HOLD	64	/* [limits] clients: the uid's connections */
#define CTL_REFUSED_CONNS	300	/* refused ones, each with a FUSE fd queued */
#define CTL_REFUSED_FD		800	/* the attacker's FUSE fd, above its sockets */

/* One message on sock with n copies of fd; 0 or -1. */
static int
ctl_send_fds(int sock, int fd, int n)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	}		 cm;
	struct msghdr	 mh;
	struct iovec	 iov;
	struct cmsghdr	*c;
	char		 junk[16];
	int		 i;

	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	memset(junk, 0x5a, sizeof(junk));
	iov.iov_base = junk;
	iov.iov_len = sizeof(junk);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	for (i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(fd));
	return (sendmsg(sock, &mh, MSG_NOSIGNAL) == -1 ? -1 : 0);
}

/*
 * Uid 65534 fills its [limits] clients with idle connections (each
 * answered once: accepted), then makes CTL_REFUSED_CONNS more, each with
 * a message carrying an fd of the FUSE file whose FLUSH is never answered
 * sent before the daemon accepts it: each is refused at accept, with that
 * fd still queued in it.
 */
static void
ctl_attack_refused(int wfd)
{
	struct hpz_msg_header	 h;
	struct sockaddr_un	 sun;
	struct ctl_verdict	 v;
	struct hpz_msg		 m;
	char			 taken[CTL_REFUSED_FD];
	int			 socks[CTL_REFUSED_HOLD + CTL_REFUSED_CONNS];
	int			 fd, sock, i, held = 0, refused = 0, sent = 0;
	int			 nsocks = 0;

	/*
	 * The FUSE fd above every socket: an exit closes in fd order, and
	 * this close waits on the server; the sockets are closed first.
	 */
	for (i = 3; i < CTL_REFUSED_FD; i++)
		taken[i] = fcntl(i, F_GETFD) != -1 || dup2(1, i) == -1;
	if ((fd = open(ctl_fu.file, O_RDONLY | O_CLOEXEC)) != CTL_REFUSED_FD)
		_exit(30);
	for (i = 3; i < CTL_REFUSED_FD; i++)
		if (!taken[i])
			close(i);
	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(31);
	itest_sun(&sun, getenv("HPZ_SOCKET"));
	for (i = 0; i < CTL_REFUSED_HOLD; i++) {
		sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (sock == -1 || connect(sock, (struct sockaddr *)&sun,
		    sizeof(sun)) == -1)
			_exit(32);
		socks[nsocks++] = sock;
		proto_init(&h, HPZ_MSG_STATUS, sizeof(h), 1);
		if (proto_send(sock, &h, sizeof(h), NULL, 0) == -1 ||
		    ctl_attacker_reply(sock, &m) != 0)
			_exit(33);
		if (m.u.hdr.type != HPZ_MSG_REPLY)
			held++;		/* a status: accepted and kept */
	}
	(void)write(wfd, "r", 1);
	for (i = 0; i < CTL_REFUSED_CONNS; i++) {
		sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (sock == -1 || connect(sock, (struct sockaddr *)&sun,
		    sizeof(sun)) == -1)
			break;	/* not accepting: that is a finding too */
		/* Refused before it came, it is not taken (EPIPE). */
		if (ctl_send_fds(sock, fd, 1) == 0)
			sent++;
		if (ctl_attacker_reply(sock, &m) == 0 &&
		    m.u.hdr.type == HPZ_MSG_REPLY && m.u.reply.error != 0)
			refused++;
		socks[nsocks++] = sock;
	}
	/*
	 * Closed here, before the exit: an exit's close of fd waits on the
	 * server, and the sockets' releases would wait behind it.  What the
	 * daemon has not read stays queued in its own ends.
	 */
	while (nsocks > 0)
		close(socks[--nsocks]);
	memset(&v, 0, sizeof(v));
	v.replies = refused;
	v.error = sent;
	snprintf(v.text, sizeof(v.text), "%d connections held, %d sent an "
	    "fd, %d refused", held, sent, refused);
	(void)write(wfd, &v, sizeof(v));
	pause();	/* our own close of fd would hang: we die instead */
}

/*
 * A connection refused at accept with an fd of a FUSE file queued in it
 * (its server never answers FLUSH).  On cef46ec the one reaper thread
 * received that fd and closed it, waiting for ever, and every later
 * refused connection stayed a descriptor of the daemon's.  Now a refused
 * connection's queue is never received: the daemon's descriptors come
 * back to where they were once the attacker is gone, the FUSE server
 * still mute, and the honest client is served all along.
 */
Test(control, refused_connections_with_a_stuck_close_queued, .timeout = 180)
{
	const char		*name = "refused connections, FUSE fd queued";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	struct ctl_sockmode	 so;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got, before, during, after, i, wait;

	ctl_fuse_start(&ctl_fu, "noflush");
	ctl_daemon_same();
	before = itest_daemon_fds();
	ctl_socket_for_all(&so);
	attacker = ctl_attacker_start(ctl_attack_refused, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 60000);
	during = after = itest_daemon_fds();
	/*
	 * Killed, its sockets closed already; its exit waits in the close of
	 * its own FUSE fd until the server goes.  The server is still mute.
	 */
	kill(attacker, SIGKILL);
	wait = 10 * 10 * itest_wait_scale();
	for (i = 0; i < wait && (after = itest_daemon_fds()) > before + 2; i++)
		usleep(100 * 1000);
	printf("%s: the attacker: %s; daemon fds %d before, %d with the "
	    "attacker, %d once it is gone\n", name, got ? v.text : "no word",
	    before, during, after);
	fflush(stdout);
	ctl_fuse_stop(&ctl_fu);
	ctl_attacker_stop(attacker, arfd);
	ctl_socket_restore(&so);
	ctl_daemon_same();
	cr_expect(got, "%s: the attacker did not finish", name);
	/* Each reads why (closed with data unread, it would read ECONNRESET). */
	cr_expect_eq(v.replies, CTL_REFUSED_CONNS, "%s: %d of %d refused "
	    "connections read their refusal", name, v.replies,
	    CTL_REFUSED_CONNS);
	cr_expect_gt(v.error, 0, "%s: no fd was queued in a refused "
	    "connection: the test tested nothing", name);
	cr_assert_leq(after, before + 2, "%s: the daemon holds %d descriptors "
	    "%d s after the attacker went, %d before it came: refused "
	    "connections are its burden", name, after, wait / 10, before);
}

/* ---- children forked with the region and gone at once ------------------- */

#define CTL_FORKS	300	/* children the attacker forks, one by one */

/*
 * A client with fork events (root: CAP_SYS_PTRACE) registers a region
 * without MADV_DONTFORK and forks CTL_FORKS children one after the other,
 * each gone at once without touching the region; it stays, registered.
 */
static void
ctl_attack_forks(int wfd)
{
	struct hpz_region	 r;
	struct ctl_verdict	 v;
	size_t			 first;
	pid_t			 pid;
	int			 i, status, done = 0;

	if (hpz_region_create(&r, 64 * 4096, HPZ_PAGE_SHMEM) != 0 ||
	    hpz_register(&r) != 0)
		_exit(30);
	if (madvise(r.addr, r.len, MADV_DOFORK) != 0)
		_exit(31);
	(void)write(wfd, "r", 1);
	for (i = 0; i < CTL_FORKS; i++) {
		if ((pid = fork()) == -1)
			break;
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &status, 0) == pid)
			done++;
	}
	memset(&v, 0, sizeof(v));
	v.replies = done;
	v.error = itest_count_nonzero(r.addr, r.len, &first) != 0;
	snprintf(v.text, sizeof(v.text), "%d children forked and gone%s",
	    done, v.error ? "; its region has a stale byte" : "");
	(void)write(wfd, &v, sizeof(v));
	pause();
}

/*
 * On cef46ec each child's uffd stayed in the daemon until the region went
 * (its exit was watched only from its first fault): 300 children, 300
 * descriptors.  Now a child found gone is let go on its client's
 * context, and a region holds at most [limits] forks children at once:
 * with the children gone the daemon holds the region's own descriptors,
 * and once the client goes, what it held before.
 */
Test(control, forked_children_gone_leave_no_descriptors, .timeout = 180)
{
	const char		*name = "children forked and gone";
	struct ctl_figures	 fg;
	struct ctl_verdict	 v;
	pid_t			 attacker, honest;
	int			 arfd, hrfd, got, before, during, gone, i, wait;

	ctl_daemon_same();
	before = itest_daemon_fds();
	attacker = ctl_attacker_start(ctl_attack_forks, &arfd);
	honest = ctl_honest_start(&hrfd);
	ctl_honest_wait(honest, hrfd, attacker, name, &fg);
	got = ctl_attacker_verdict(arfd, &v, 60000);
	/*
	 * The client stays: its connection, its pidfd, its region's uffd,
	 * file and state; none of its children's.
	 */
	wait = 10 * 10 * itest_wait_scale();
	during = itest_daemon_fds();
	for (i = 0; i < wait && (during = itest_daemon_fds()) > before + 5;
	    i++)
		usleep(100 * 1000);
	ctl_attacker_stop(attacker, arfd);
	gone = itest_daemon_fds();
	for (i = 0; i < wait && (gone = itest_daemon_fds()) > before + 2; i++)
		usleep(100 * 1000);
	printf("%s: the client: %s; daemon fds %d before, %d with its "
	    "children gone, %d once it is gone too\n", name,
	    got ? v.text : "no word", before, during, gone);
	fflush(stdout);
	ctl_daemon_same();
	cr_assert(got, "%s: the client did not finish forking", name);
	cr_expect_eq(v.error, 0, "%s: %s", name, v.text);
	cr_expect_eq(v.replies, CTL_FORKS, "%s: %s", name, v.text);
	cr_assert_leq(during, before + 5, "%s: the daemon holds %d descriptors "
	    "%d s after the client's %d children went, %d before the client "
	    "came: a gone child's uffd is kept", name, during, wait / 10,
	    v.replies, before);
	cr_assert_leq(gone, before + 2, "%s: the daemon holds %d descriptors "
	    "after the client went, %d before", name, gone, before);
}

/* Descriptors process pid holds. */
static int
ctl_fds(pid_t pid)
{
	char		 path[64];
	struct dirent	*e;
	DIR		*d;
	int		 n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return (-1);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return (n);
}

/*
 * A region with more children alive at once than [limits] forks (4 here)
 * is released, as when the daemon has no memory for a child: the daemon
 * holds none of its descriptors then, the children's included, while the
 * client and every child live on.
 */
Test(control, forked_children_past_the_limit_release_the_region,
    .timeout = 120)
{
	struct ctl_daemon	 d;
	struct hpz_region	 r;
	pid_t			 kids[8];
	int			 before, after, i, n, said = 0, status;

	ctl_daemon_own(&d, "[limits]\nforks = 4\n[pool]\nenable = no\n");
#if HPZ_PROTOCOL_VERSION >= 9
	{
		struct hpz_status	st;

		cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
		cr_assert_eq(st.limit_region_forks, 4, "status shows [limits] "
		    "forks %llu", st.limit_region_forks);
	}
#endif
	before = ctl_fds(d.pid);
	cr_assert_eq(hpz_region_create(&r, 64 * 4096, HPZ_PAGE_SHMEM), 0);
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(madvise(r.addr, r.len, MADV_DOFORK), 0);
	memset(r.addr, 0x5a, 4096);
	for (n = 0; n < 8; n++) {
		kids[n] = fork();
		cr_assert_geq(kids[n], 0);
		if (kids[n] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			pause();
			_exit(0);
		}
	}
	for (i = 0; i < 100 * itest_wait_scale() && (said = ctl_log_count(&d,
	    "[limits] forks")) == 0; i++)
		usleep(100 * 1000);
	/* Released: its fds and its children's closed; the client's own
	   connection (and its pidfd) stay. */
	for (i = 0; i < 100 * itest_wait_scale() &&
	    (after = ctl_fds(d.pid)) > before + 2; i++)
		usleep(100 * 1000);
	after = ctl_fds(d.pid);
	printf("forks past the limit: said %d times; daemon fds %d before the "
	    "client, %d with 8 children alive\n", said, before, after);
	fflush(stdout);
	for (i = 0; i < n; i++) {
		kill(kids[i], SIGKILL);
		(void)waitpid(kids[i], &status, 0);
	}
	/* The kernel's pages now: what the client wrote, then zeros. */
	itest_expect_bytes(r.addr, 4096, 0x5a, 30, "the client's data");
	hpz_region_destroy(&r);
	ctl_daemon_own_end(&d);
	cr_expect_geq(said, 1, "the region was not released past [limits] "
	    "forks");
	cr_assert_leq(after, before + 2, "the daemon holds %d descriptors with "
	    "8 children alive and [limits] forks = 4 (%d before the client)",
	    after, before);
}
