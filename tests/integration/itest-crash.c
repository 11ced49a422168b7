/*
 * itest-crash.c - libhpz when hpzerod dies.  Each test runs its own daemon
 * on a private socket and a client (libhpz) in a forked child, kills the
 * daemon under the child while it touches pages, and checks that the child
 * never hangs, never reads a stale byte and never loses data: with a daemon
 * coming back (libhpz registers again), without one (libhpz serves its own
 * faults, then hands back), after a clean exit, and with pages a dead server
 * left busy.  The longest time a touch was blocked is printed, not asserted.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-state.h"

#define CR_PAGE		(2 * MiB)
#define CR_NPAGES	16
/* Generous: a client that needs this long is hung. */
#define CR_BOUND_MS	30000

enum cr_scenario {
	CR_KILL_RESTART,	/* SIGKILL, new daemon after 200 ms */
	CR_KILL_FALLBACK,	/* SIGKILL, libhpz serves, then hands back */
	CR_TERM_RESTART,	/* SIGTERM, new daemon */
	CR_BUSY_RESTART,	/* busy bytes left, new daemon resolves them */
	CR_BUSY_FALLBACK,	/* busy bytes left, libhpz resolves them */
};

struct cr {
	char		 dir[64];
	char		 sock[128];
	char		 log[128];
	pid_t		 daemon;
	pid_t		 child;
	int		 to_child;
	int		 from_child;
	int		 c_in;		/* the child's ends */
	int		 c_out;
	uint64_t	 t0;
};

struct cr_report {
	int		 ok;
	int		 touches;
	double		 blocked_ms;	/* longest single touch */
	int		 unregister;	/* what hpz_unregister returned */
	char		 why[256];
};

static void
cr_daemon_start(struct cr *c)
{
	const char	*path = itest_daemon_path();
	int		 i, fd;

	unlink(c->sock);
	c->daemon = itest_fork_dying();
	cr_assert_geq(c->daemon, 0);
	if (c->daemon == 0) {
		fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0)
			dup2(fd, 2);
		/*
		 * Never step aside: the garbage the scenarios forge busy
		 * stays garbage, its range trapped, as a server dying
		 * while it holds garbage leaves it.
		 */
		execl(path, "hpzerod", "--socket", c->sock, "--workers", "2",
		    "--pool", "off", "--step-aside", "never", (char *)NULL);
		_exit(121);
	}
	for (i = 0; i < 3000 * itest_wait_scale() && access(c->sock, F_OK) != 0; i++)
		usleep(10 * 1000);
	cr_assert_eq(access(c->sock, F_OK), 0, "hpzerod did not come up");
}

static void
cr_daemon_stop(struct cr *c, int sig)
{
	int	status;

	if (c->daemon <= 0)
		return;
	kill(c->daemon, sig);
	cr_assert_eq(waitpid(c->daemon, &status, 0), c->daemon);
	if (sig == SIGTERM)
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "hpzerod exit status 0x%x on SIGTERM", status);
	c->daemon = -1;
}

/* One message from the child, or fail the test (and kill it) past bound. */
static void
cr_from_child(struct cr *c, void *buf, size_t len)
{
	struct pollfd	pfd = { .fd = c->from_child, .events = POLLIN };
	uint64_t	left;
	ssize_t		n;

	left = c->t0 + CR_BOUND_MS > itest_now_ms() ?
	    c->t0 + CR_BOUND_MS - itest_now_ms() : 0;
	if (poll(&pfd, 1, (int)left) != 1) {
		kill(c->child, SIGKILL);
		cr_assert_fail("the client hung: nothing from it in %d ms",
		    CR_BOUND_MS);
	}
	n = read(c->from_child, buf, len);
	cr_assert_eq(n, (ssize_t)len, "the client died (read %zd)", n);
}

/* A one-byte step from the child; a failure report instead fails the test. */
static void
cr_step(struct cr *c, char want)
{
	struct cr_report	rep;
	char			what;

	cr_from_child(c, &what, 1);
	if (what == want)
		return;
	rep.ok = what;
	cr_from_child(c, (char *)&rep + 1, sizeof(rep) - 1);
	cr_assert_fail("client: %s", rep.why);
}

static void
cr_to_child(struct cr *c, char what)
{
	cr_assert_eq(write(c->to_child, &what, 1), 1);
}

/* The region info of the child's region in the daemon, within 10 s. */
static int
cr_listed(struct cr *c, struct hpz_region_info *out)
{
	struct hpz_region_info	info[16];
	size_t			n, i;
	int			tries;

	for (tries = 0; tries < 1000; tries++) {
		if (hpz_list_regions(info, 16, &n) == 0)
			for (i = 0; i < n && i < 16; i++)
				if ((pid_t)info[i].pid == c->child) {
					*out = info[i];
					return (1);
				}
		usleep(10 * 1000);
	}
	return (0);
}

/* ---- the client, in the child ------------------------------------------ */

static int
cr_child_in(struct cr *c)
{
	char	what;

	if (read(c->c_in, &what, 1) != 1)
		_exit(3);
	return (what);
}

static void
cr_child_out(struct cr *c, const void *buf, size_t len)
{
	if (write(c->c_out, buf, len) != (ssize_t)len)
		_exit(4);
}

/* What page i must hold: data pages have a byte of their own. */
static int
cr_want(enum cr_scenario s, int i, int *reset_by_us)
{
	if (s == CR_BUSY_RESTART || s == CR_BUSY_FALLBACK)
		return (i == 1 ? 0x11 : 0);
	if (i == 1 && *reset_by_us)
		return (0);
	return ((i & 1) ? 0x10 + i : 0);
}

/* Touch a page, time the touch, check every byte of it. */
static int
cr_touch(struct cr_report *rep, unsigned char *p, int want, int i)
{
	size_t	first;
	double	t;

	t = itest_now_us();
	(void)*(volatile unsigned char *)(p + 4096 * (size_t)(i % 7));
	t = (itest_now_us() - t) / 1000.0;
	if (t > rep->blocked_ms)
		rep->blocked_ms = t;
	rep->touches++;
	if (itest_count_not(p, CR_PAGE, (unsigned char)want, &first) != 0) {
		snprintf(rep->why, sizeof(rep->why), "page %d: byte %zu is "
		    "0x%02x, want 0x%02x (%s)", i, first, p[first], want,
		    want == 0 ? "stale byte exposed" : "data lost");
		return (0);
	}
	return (1);
}

/* The page-state memfd libhpz made for our region. */
static int
cr_find_state(void)
{
	char	path[64], link[256];
	ssize_t	n;
	int	fd;

	for (fd = 3; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		if (strstr(link, "memfd:hpz-state") != NULL)
			return (fd);
	}
	return (-1);
}

/* Is the server lock of the state memfd free (no daemon, no fallback)? */
static int
cr_lock_free(int sfd)
{
	struct flock	fl;
	char		path[64];
	int		fd, free_;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", sfd);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		return (0);
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_len = 1;
	free_ = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
	close(fd);
	return (free_);
}

/*
 * Leave bytes as a server killed in the middle would: page 0 (garbage)
 * half cleared, page 1 (data) cleared and mapped, page 2 (data) reset
 * while busy, page 3 (garbage) reset while busy.  Stale bytes go into the
 * file of pages 0 and 3 first (background clearing may have zeroed them).
 */
static int
cr_child_set_busy(struct cr_report *rep, const struct hpz_region *r)
{
	unsigned char		*alias;

	struct hpz_state_header	*h;
	_Atomic uint8_t		*st;
	void			*m;
	int			 sfd;

	if ((sfd = cr_find_state()) < 0) {
		snprintf(rep->why, sizeof(rep->why), "no page-state memfd");
		return (0);
	}
	m = mmap(NULL, HPZ_STATE_SIZE(CR_NPAGES), PROT_READ | PROT_WRITE,
	    MAP_SHARED, sfd, 0);
	if (m == MAP_FAILED) {
		snprintf(rep->why, sizeof(rep->why), "mmap state: %s",
		    strerror(errno));
		return (0);
	}
	h = m;
	st = (_Atomic uint8_t *)((char *)m + HPZ_STATE_PAGES_OFF);
	if (h->magic != HPZ_STATE_MAGIC || !cr_lock_free(sfd) ||
	    (atomic_load(&st[1]) & PAGE_STATE_MASK) != PAGE_MAPPED) {
		snprintf(rep->why, sizeof(rep->why), "state not as expected: "
		    "magic %x lock %s page0 %x page1 %x", h->magic,
		    cr_lock_free(sfd) ? "free" : "held", atomic_load(&st[0]),
		    atomic_load(&st[1]));
		munmap(m, HPZ_STATE_SIZE(CR_NPAGES));
		return (0);
	}
	alias = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
	    0);
	if (alias == MAP_FAILED) {
		snprintf(rep->why, sizeof(rep->why), "mmap alias: %s",
		    strerror(errno));
		munmap(m, HPZ_STATE_SIZE(CR_NPAGES));
		return (0);
	}
	memset(alias + CR_PAGE / 2, 0x5a, CR_PAGE / 2);
	memset(alias + 3 * CR_PAGE, 0x5a, CR_PAGE);
	munmap(alias, r->len);
	atomic_store(&st[0], PAGE_BUSY | PAGE_GARBAGE);
	atomic_store(&st[1], PAGE_BUSY | PAGE_ZEROED);
	atomic_store(&st[2], PAGE_BUSY | PAGE_RESET | PAGE_ZEROED);
	atomic_store(&st[3], PAGE_BUSY | PAGE_RESET | PAGE_GARBAGE);
	munmap(m, HPZ_STATE_SIZE(CR_NPAGES));
	return (1);
}

static void
cr_child(struct cr *c, enum cr_scenario s)
{
	struct cr_report	 rep;
	struct hpz_region	 r;
	unsigned char		*p;
	int			 i, npages, busy, reset1 = 0, half;

	memset(&rep, 0, sizeof(rep));
	rep.ok = 1;
	busy = s == CR_BUSY_RESTART || s == CR_BUSY_FALLBACK;
	npages = CR_NPAGES;
	/*
	 * The busy bytes forged below stand for a server that died holding
	 * garbage, which it only ever holds with the range's faults trapped:
	 * no scrub, so that garbage is left and the range stays trapped.
	 */
	if (hpz_region_create(&r, (size_t)npages * CR_PAGE, HPZ_PAGE_2M |
	    (busy ? HPZ_NO_SCRUB : 0)) != 0 ||
	    hpz_register(&r) != 0) {
		snprintf(rep.why, sizeof(rep.why), "register: %s",
		    hpz_last_error());
		goto fail;
	}
	p = r.addr;
	/* Old bytes everywhere, all garbage, then data on some pages. */
	memset(p, 0x5a, r.len);
	if (hpz_reset(&r) != 0) {
		snprintf(rep.why, sizeof(rep.why), "reset: %s",
		    hpz_last_error());
		goto fail;
	}
	for (i = 0; i < npages; i++) {
		if (busy ? (i == 1 || i == 2) : (i & 1)) {
			memset(p + (size_t)i * CR_PAGE, 0x10 + i, CR_PAGE);
			/* Out of our page tables: its next touch faults. */
			madvise(p + (size_t)i * CR_PAGE, CR_PAGE, MADV_DONTNEED);
		}
	}
	cr_child_out(c, "R", 1);

	if (busy) {
		if (cr_child_in(c) != 'K')	/* the daemon is dead */
			_exit(5);
		if (!cr_child_set_busy(&rep, &r))
			goto fail;
		cr_child_out(c, "S", 1);
		if (s == CR_BUSY_RESTART && cr_child_in(c) != 'G')
			_exit(5);
		for (i = 0; i < npages; i++)
			if (!cr_touch(&rep, p + (size_t)i * CR_PAGE,
			    cr_want(s, i, &reset1), i))
				goto fail;
		goto done;
	}

	half = s == CR_KILL_FALLBACK ? 10 : npages;
	for (i = 0; i < half; i++) {
		if (!cr_touch(&rep, p + (size_t)i * CR_PAGE,
		    cr_want(s, i, &reset1), i))
			goto fail;
		usleep(30 * 1000);
	}
	if (s == CR_KILL_FALLBACK) {
		/* No daemon: a reset is done by libhpz, and holds. */
		if (hpz_reset(&(struct hpz_region){ .addr = p + CR_PAGE,
		    .len = CR_PAGE, .fd = r.fd }) != 0) {
			snprintf(rep.why, sizeof(rep.why), "reset without "
			    "daemon: %s", hpz_last_error());
			goto fail;
		}
		reset1 = 1;
		if (!cr_touch(&rep, p + CR_PAGE, 0, 1))
			goto fail;
		cr_child_out(c, "P", 1);
		if (cr_child_in(c) != 'G')	/* a daemon is back */
			_exit(5);
		for (i = half; i < npages; i++)
			if (!cr_touch(&rep, p + (size_t)i * CR_PAGE,
			    cr_want(s, i, &reset1), i))
				goto fail;
	}
done:
	/* Everything once more, now that it is all mapped. */
	for (i = 0; i < npages; i++)
		if (!cr_touch(&rep, p + (size_t)i * CR_PAGE,
		    cr_want(s, i, &reset1), i))
			goto fail;
	cr_child_out(c, &rep, sizeof(rep));
	(void)cr_child_in(c);		/* the parent has looked */
	rep.unregister = hpz_unregister(&r);
	if (rep.unregister != 0)
		snprintf(rep.why, sizeof(rep.why), "unregister: %s",
		    hpz_last_error());
	cr_child_out(c, &rep, sizeof(rep));
	_exit(0);
fail:
	rep.ok = 0;
	cr_child_out(c, &rep, sizeof(rep));
	_exit(1);
}

/* ---- the tests ----------------------------------------------------------- */

static void
cr_setup(struct cr *c, enum cr_scenario s, const char *fallback_ms)
{
	int	a[2], b[2];

	itest_need_pages(2048, CR_NPAGES + 2);
	memset(c, 0, sizeof(*c));
	strcpy(c->dir, "/tmp/hpz-crash.XXXXXX");
	cr_assert_not_null(mkdtemp(c->dir));
	snprintf(c->sock, sizeof(c->sock), "%s/s.sock", c->dir);
	snprintf(c->log, sizeof(c->log), "%s/hpzerod.log", c->dir);
	cr_daemon_start(c);
	/* Our own requests (listing regions) go to this daemon too. */
	setenv("HPZ_SOCKET", c->sock, 1);
	cr_assert_eq(pipe2(a, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(b, O_CLOEXEC), 0);
	c->t0 = itest_now_ms();
	c->child = fork();
	cr_assert_geq(c->child, 0);
	if (c->child == 0) {
		close(a[1]);
		close(b[0]);
		c->c_in = a[0];
		c->c_out = b[1];
		setenv("HPZ_FALLBACK_MS", fallback_ms, 1);
		cr_child(c, s);
		_exit(2);
	}
	close(a[0]);
	close(b[1]);
	c->to_child = a[1];
	c->from_child = b[0];
}

/* The child's last word (its unregister), its exit, the daemon's exit. */
static void
cr_finish(struct cr *c, const char *name, const struct cr_report *rep)
{
	struct cr_report	last;
	int			status;

	fprintf(stderr, "crash %s: client blocked at most %.1f ms over %d "
	    "touches\n", name, rep->blocked_ms, rep->touches);
	cr_to_child(c, 'E');
	cr_from_child(c, &last, sizeof(last));
	cr_assert_eq(last.unregister, 0, "%s", last.why);
	cr_assert_eq(waitpid(c->child, &status, 0), c->child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "client exit status 0x%x", status);
	if (c->daemon > 0)
		cr_daemon_stop(c, SIGTERM);
	unlink(c->sock);
	unlink(c->log);
	rmdir(c->dir);
}

static void
cr_check(const struct cr_report *rep)
{
	cr_assert(rep->ok, "client: %s", rep->why);
}

Test(crash, sigkill_then_restart)
{
	struct cr		c;
	struct cr_report	rep;
	struct hpz_region_info	info;

	cr_setup(&c, CR_KILL_RESTART, "300");
	cr_step(&c, 'R');
	usleep(100 * 1000);		/* a few pages touched */
	cr_daemon_stop(&c, SIGKILL);
	usleep(200 * 1000);
	cr_daemon_start(&c);
	cr_from_child(&c, &rep, sizeof(rep));
	cr_check(&rep);
	cr_assert(cr_listed(&c, &info), "the new daemon never got the "
	    "region back");
	cr_assert_eq(info.len, CR_NPAGES * CR_PAGE);
	cr_finish(&c, "sigkill_then_restart", &rep);
}

Test(crash, sigkill_fallback_then_hand_back)
{
	struct cr		c;
	struct cr_report	rep;
	struct hpz_region_info	info;

	uint64_t		faults;

	cr_setup(&c, CR_KILL_FALLBACK, "300");
	cr_step(&c, 'R');
	usleep(100 * 1000);
	cr_daemon_stop(&c, SIGKILL);
	/* The child touches on, served by libhpz alone. */
	cr_step(&c, 'P');
	cr_daemon_start(&c);
	cr_assert(cr_listed(&c, &info), "libhpz never handed the region "
	    "back to the new daemon");
	faults = info.faults;
	cr_to_child(&c, 'G');
	cr_from_child(&c, &rep, sizeof(rep));
	cr_check(&rep);
	cr_assert(cr_listed(&c, &info));
	/*
	 * Pages 10-15 were first touched after the hand-back; fresh pages
	 * are the kernel's: the new daemon took the region back and left
	 * its faults alone.
	 */
	cr_assert_eq(info.faults, faults, "the new daemon served %llu faults "
	    "of fresh pages", (unsigned long long)(info.faults - faults));
	cr_finish(&c, "sigkill_fallback_then_hand_back", &rep);
}

Test(crash, sigterm_then_restart)
{
	struct cr		c;
	struct cr_report	rep;
	struct hpz_region_info	info;

	cr_setup(&c, CR_TERM_RESTART, "5000");
	cr_step(&c, 'R');
	usleep(100 * 1000);
	cr_daemon_stop(&c, SIGTERM);
	usleep(200 * 1000);
	cr_daemon_start(&c);
	cr_from_child(&c, &rep, sizeof(rep));
	cr_check(&rep);
	cr_assert(cr_listed(&c, &info), "the region was not registered "
	    "again");
	cr_finish(&c, "sigterm_then_restart", &rep);
}

Test(crash, busy_pages_resolved_by_new_daemon)
{
	struct cr		c;
	struct cr_report	rep;
	struct hpz_region_info	info;

	/* No fallback here: only the new daemon may take the lock. */
	cr_setup(&c, CR_BUSY_RESTART, "60000");
	cr_step(&c, 'R');
	cr_daemon_stop(&c, SIGKILL);
	cr_to_child(&c, 'K');
	cr_step(&c, 'S');
	cr_daemon_start(&c);
	cr_assert(cr_listed(&c, &info), "the new daemon never got the "
	    "region back");
	cr_to_child(&c, 'G');
	cr_from_child(&c, &rep, sizeof(rep));
	cr_check(&rep);
	cr_finish(&c, "busy_pages_resolved_by_new_daemon", &rep);
}

Test(crash, busy_pages_resolved_by_fallback)
{
	struct cr		c;
	struct cr_report	rep;

	cr_setup(&c, CR_BUSY_FALLBACK, "1500");
	cr_step(&c, 'R');
	cr_daemon_stop(&c, SIGKILL);
	cr_to_child(&c, 'K');
	cr_step(&c, 'S');
	/* No daemon ever again: libhpz serves, and unregisters alone. */
	cr_from_child(&c, &rep, sizeof(rep));
	cr_check(&rep);
	cr_finish(&c, "busy_pages_resolved_by_fallback", &rep);
}
