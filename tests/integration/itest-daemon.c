/*
 * itest-daemon.c - the daemon as systemd and a user see it: socket
 * activation, sd_notify, graceful exit that leaves no client hanging or
 * exposed, command-line errors, and the demo client.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-protocol.h"

struct sd {
	char	dir[64];
	char	sock[128];
	char	notify[128];
	int	nfd;		/* our end of NOTIFY_SOCKET */
	pid_t	pid;
};

static int
sd_bind(int type, const char *path, int listening)
{
	struct sockaddr_un	sun;
	int			fd;

	itest_sun(&sun, path);
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0,
	    "bind %s: %s", path, strerror(errno));
	if (listening)
		cr_assert_eq(listen(fd, 16), 0);
	return (fd);
}

/* Start hpzerod the way systemd does: socket on fd 3, NOTIFY_SOCKET set. */
static void
sd_start(struct sd *s)
{
	char	pidbuf[32];
	int	lfd;

	strcpy(s->dir, "/tmp/hpz-sd.XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	snprintf(s->sock, sizeof(s->sock), "%s/hpzerod.sock", s->dir);
	snprintf(s->notify, sizeof(s->notify), "%s/notify", s->dir);
	lfd = sd_bind(SOCK_SEQPACKET, s->sock, 1);
	s->nfd = sd_bind(SOCK_DGRAM, s->notify, 0);
	s->pid = itest_fork_dying();
	cr_assert_geq(s->pid, 0);
	if (s->pid == 0) {
		if (dup2(lfd, 3) != 3)
			_exit(120);
		snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
		setenv("LISTEN_PID", pidbuf, 1);
		setenv("LISTEN_FDS", "1", 1);
		setenv("NOTIFY_SOCKET", s->notify, 1);
		execl(itest_daemon_path(), "hpzerod", "--workers", "2",
		    "--socket", "/nonexistent/not-used.sock", "--pool", "off",
		    (char *)NULL);
		_exit(121);
	}
	close(lfd);
	setenv("HPZ_SOCKET", s->sock, 1);
}

/* Wait for a notify datagram that contains what; its text in buf. */
static int
sd_wait(struct sd *s, const char *what, char *buf, size_t len)
{
	struct pollfd	pfd = { .fd = s->nfd, .events = POLLIN };
	ssize_t		n;

	while (poll(&pfd, 1, 5000) == 1) {
		n = recv(s->nfd, buf, len - 1, 0);
		if (n <= 0)
			break;
		buf[n] = '\0';
		if (strstr(buf, what) != NULL)
			return (1);
	}
	return (0);
}

static void
sd_cleanup(struct sd *s)
{
	char	path[160];

	close(s->nfd);
	unlink(s->notify);
	unlink(s->sock);
	snprintf(path, sizeof(path), "%s", s->dir);
	rmdir(path);
}

Test(daemon, socket_activation_and_notify)
{
	struct sd		s;
	struct hpz_status	st;
	char			buf[512];
	int			status;

	sd_start(&s);
	cr_assert(sd_wait(&s, "READY=1", buf, sizeof(buf)),
	    "no READY=1 from hpzerod");
	cr_assert_eq(hpz_status(&st), 0, "%s", hpz_last_error());
	cr_assert_eq(st.workers, 2);
	cr_assert(sd_wait(&s, "STATUS=", buf, sizeof(buf)) ||
	    strstr(buf, "STATUS=") != NULL, "no STATUS= line");
	kill(s.pid, SIGTERM);
	cr_assert(sd_wait(&s, "STOPPING=1", buf, sizeof(buf)));
	cr_assert_eq(waitpid(s.pid, &status, 0), s.pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "hpzerod exit status 0x%x", status);
	sd_cleanup(&s);
}

Test(daemon, graceful_exit_leaves_client_served_and_clean)
{
	struct sd		 s;
	struct hpz_region	 r;
	unsigned char		*p;
	char			 buf[512];
	size_t			 first;
	int			 status, error;

	itest_need_pages(2048, 8);
	sd_start(&s);
	cr_assert(sd_wait(&s, "READY=1", buf, sizeof(buf)));
	cr_assert_eq(hpz_region_create(&r, 8 * MiB, HPZ_PAGE_2M), 0);
	error = hpz_register(&r);
	cr_assert_eq(error, 0, "%s", hpz_last_error());
	p = r.addr;
	memset(p, 0x4b, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	memset(p, 0x2d, 2 * MiB);	/* page 0 holds data again */

	kill(s.pid, SIGTERM);
	cr_assert_eq(waitpid(s.pid, &status, 0), s.pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/*
	 * No daemon now.  The kernel serves the range: the data page as it
	 * is, the garbage pages dropped (zero), and no thread hangs.
	 */
	cr_assert_eq(itest_count_not(p, 2 * MiB, 0x2d, &first), 0,
	    "data lost at %zu", first);
	cr_assert_eq(itest_count_nonzero(p + 2 * MiB, r.len - 2 * MiB,
	    &first), 0, "stale byte exposed at %zu after the daemon left",
	    first + 2 * MiB);
	hpz_region_destroy(&r);
	sd_cleanup(&s);
}

/* Pages of garbage the keep tests write, reset and read back. */
#define KEEP_PAGES	48

static sigjmp_buf		 keep_jb;
static volatile sig_atomic_t	 keep_armed;

static void
keep_sigbus(int sig)
{
	(void)sig;
	if (keep_armed) {
		keep_armed = 0;
		siglongjmp(keep_jb, 1);
	}
	_exit(123);
}

/*
 * A hog: another process takes every free 2 MiB huge page of the host
 * (touched, so they are its own), says how many on fd, and holds them
 * until killed.
 */
static pid_t
keep_hog(int *got)
{
	int	fds[2];
	long	n, i, free_pages;
	char	*p;
	pid_t	pid;

	cr_assert_eq(pipe(fds), 0);
	free_pages = itest_free_pages(2048);
	pid = itest_fork_dying();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		n = 0;
		/* More than are free: every one we can have is taken. */
		p = mmap(NULL, (size_t)(free_pages + 16) * 2 * MiB,
		    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		    MAP_HUGETLB | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED)
			for (i = 0; i < free_pages + 16; i++)
				if (madvise(p + i * 2 * MiB, 2 * MiB,
				    MADV_POPULATE_WRITE) == 0)
					n++;
		if (write(fds[1], &n, sizeof(n)) != (ssize_t)sizeof(n))
			_exit(1);
		pause();
		_exit(0);
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], &n, sizeof(n)), (ssize_t)sizeof(n));
	close(fds[0]);
	*got = (int)n;
	return (pid);
}

/*
 * Read every page of the region: pages lost to SIGBUS, and pages of
 * [0, garbage) that are not all zero (stale bytes shown).
 */
static void
keep_read(const struct hpz_region *r, size_t garbage, int *sigbus,
    int *stale, size_t *first_stale)
{
	struct sigaction	 sa, old;
	const unsigned char	*p = r->addr;
	volatile size_t		 i;
	size_t			 first;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = keep_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	*sigbus = *stale = 0;
	*first_stale = (size_t)-1;
	for (i = 0; i < r->len / (2 * MiB); i++) {
		if (sigsetjmp(keep_jb, 1) != 0) {
			(*sigbus)++;
			continue;
		}
		keep_armed = 1;
		if (i < garbage && itest_count_nonzero(p + i * 2 * MiB,
		    2 * MiB, &first) != 0) {
			if (*stale == 0)
				*first_stale = i * 2 * MiB + first;
			(*stale)++;
		} else if (i >= garbage)
			(void)*(volatile const unsigned char *)(p + i * 2 * MiB);
		keep_armed = 0;
	}
	sigaction(SIGBUS, &old, NULL);
}

/*
 * The client's garbage pages (written, then reset) are still its own once
 * the daemon lets go of the region, by a graceful exit (how) or the
 * client's own hpz_unregister: another process taking every free huge
 * page cannot take them, and they read zero.
 */
static void
keep_after(int unregister)
{
	struct sd		 s;
	struct hpz_region	 r;
	char			 buf[512];
	size_t			 first;
	int			 status, error, got, sigbus, stale;
	pid_t			 hog;

	itest_need_pages(2048, KEEP_PAGES + 8);
	sd_start(&s);
	cr_assert(sd_wait(&s, "READY=1", buf, sizeof(buf)));
	cr_assert_eq(hpz_region_create(&r, KEEP_PAGES * 2 * MiB,
	    HPZ_PAGE_2M), 0);
	/* No scrub: every page is still garbage when the daemon lets go. */
	r.flags |= HPZ_NO_SCRUB;
	error = hpz_register(&r);
	cr_assert_eq(error, 0, "%s", hpz_last_error());
	memset(r.addr, 0x5a, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	if (unregister)
		cr_assert_eq(hpz_unregister(&r), 0, "%s", hpz_last_error());
	else {
		kill(s.pid, SIGTERM);
		cr_assert_eq(waitpid(s.pid, &status, 0), s.pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	hog = keep_hog(&got);
	keep_read(&r, KEEP_PAGES, &sigbus, &stale, &first);
	itest_kill(hog);
	if (unregister) {
		kill(s.pid, SIGTERM);
		cr_assert_eq(waitpid(s.pid, &status, 0), s.pid);
	}
	cr_assert_eq(sigbus, 0, "after %s, another process took %d free "
	    "huge pages: SIGBUS on %d of the client's %d pages",
	    unregister ? "hpz_unregister" : "a graceful exit", got, sigbus,
	    KEEP_PAGES);
	cr_assert_eq(stale, 0, "after %s: %d garbage pages show stale "
	    "bytes (the first at %zu)", unregister ? "hpz_unregister" :
	    "a graceful exit", stale, first);
	hpz_region_destroy(&r);
	sd_cleanup(&s);
}

Test(daemon, graceful_exit_keeps_garbage_pages)
{
	keep_after(0);
}

Test(daemon, unregister_keeps_garbage_pages)
{
	keep_after(1);
}

/*
 * A garbage page its client punched, touched while the host has no free
 * huge page: the kernel answers such a touch with SIGBUS (no page to be
 * had), and so must the daemon.  On 51c4258 its populate met EFAULT, took
 * it for a page punched again while it mapped, and woke the thread to
 * fault again, for ever: the client hung, the daemon spun.
 */
struct nopage_touch {
	const char	*p;
	int		 done;		/* 1 read, 2 SIGBUS */
};

static void *
nopage_touch_main(void *arg)
{
	struct nopage_touch	*t = arg;
	struct sigaction	 sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = keep_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(keep_jb, 1) != 0) {
		__atomic_store_n(&t->done, 2, __ATOMIC_RELEASE);
		return (NULL);
	}
	keep_armed = 1;
	(void)*(volatile const char *)t->p;
	keep_armed = 0;
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return (NULL);
}

Test(daemon, garbage_hole_with_no_free_page_is_sigbus_not_a_hang,
    .timeout = 120)
{
	struct nopage_touch	 t;
	struct hpz_region	 r;
	pthread_t		 th;
	int			 got, i, bound = 300 * itest_wait_scale();
	pid_t			 hog;

	itest_need_pages(2048, 8 + 8);
	cr_assert_eq(hpz_region_create(&r, 8 * 2 * MiB, HPZ_PAGE_2M), 0);
	r.flags |= HPZ_NO_SCRUB;	/* the page stays garbage */
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	memset(r.addr, 0x5a, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(fallocate(r.fd, FALLOC_FL_PUNCH_HOLE |
	    FALLOC_FL_KEEP_SIZE, 0, 2 * MiB), 0, "punch: %s", strerror(errno));
	hog = keep_hog(&got);
	t.p = (const char *)r.addr + 100;
	t.done = 0;
	cr_assert_eq(pthread_create(&th, NULL, nopage_touch_main, &t), 0);
	for (i = 0; i < bound && __atomic_load_n(&t.done, __ATOMIC_ACQUIRE) ==
	    0; i++)
		usleep(100 * 1000);
	itest_kill(hog);
	printf("no free huge page (the hog took %d): the touch of a punched "
	    "garbage page %s\n", got, t.done == 2 ? "met SIGBUS" :
	    t.done == 1 ? "read" : "never returned");
	fflush(stdout);
	/* A touch that never returns leaves the thread behind: we exit. */
	cr_assert_neq(t.done, 0, "the touch of a punched garbage page with no "
	    "free huge page did not return in %d s (the kernel answers "
	    "SIGBUS)", bound / 10);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(t.done, 2, "the touch read a page no one could have "
	    "allocated");
	hpz_region_destroy(&r);
}

Test(daemon, refuses_second_daemon_on_live_socket)
{
	const char	*pid = getenv("HPZD_PID");
	const char	*argv[] = { itest_daemon_path(), "--socket",
	    getenv("HPZ_SOCKET"), NULL };
	int		 status;

	/*
	 * With the suite's daemon gone the socket is stale: a second one
	 * would take it and serve on.  Say so rather than wait for it.
	 */
	if (pid != NULL)
		cr_assert_eq(kill(atoi(pid), 0), 0, "the suite's hpzerod "
		    "(pid %s) is gone: no live socket to refuse on", pid);
	status = itest_run_bounded(argv, 1, ITEST_RUN_TIMEOUT_S);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	    "second hpzerod status 0x%x", status);
	/* The first one is untouched. */
	itest_status();
}

Test(daemon, bad_command_line)
{
	const char	*workers0[] = { itest_daemon_path(), "--workers", "0",
	    NULL };
	const char	*unknown[] = { itest_daemon_path(), "--no-such-option",
	    NULL };
	char		 cmd[1024];
	int		 status;

	status = itest_run_bounded(workers0, 1, ITEST_RUN_TIMEOUT_S);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	status = itest_run_bounded(unknown, 1, ITEST_RUN_TIMEOUT_S);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	snprintf(cmd, sizeof(cmd), "%s --version | grep -q '^hpzerod '",
	    itest_daemon_path());
	status = system(cmd);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(daemon, demo_client_verifies_zeroes)
{
	const char	*dir = getenv("HPZ_BUILDDIR");
	char		 cmd[1024];
	int		 status;

	snprintf(cmd, sizeof(cmd), "%s/client/hpz-demo -s %s -S 32M -t 2 "
	    "-r 1 >/dev/null", dir, getenv("HPZ_SOCKET"));
	status = system(cmd);
	cr_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		cr_skip_test("hpz-demo: not enough huge pages");
	cr_assert_eq(WEXITSTATUS(status), 0, "hpz-demo exit %d",
	    WEXITSTATUS(status));
}

/* Start hpzerod with a settings file on a socket of its own. */
static pid_t
conf_start(const char *conf, const char *sock)
{
	pid_t	pid;
	int	i;

	unlink(sock);
	pid = itest_fork_dying();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int	null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execl(itest_daemon_path(), "hpzerod", "--config", conf, "--socket",
		    sock, "--pool", "off", (char *)NULL);
		_exit(121);
	}
	for (i = 0; i < 3000 * itest_wait_scale() && access(sock, F_OK) != 0; i++)
		usleep(10 * 1000);
	cr_assert_eq(access(sock, F_OK), 0, "hpzerod did not come up");
	setenv("HPZ_SOCKET", sock, 1);
	return (pid);
}

static void
conf_write(const char *path, const char *text)
{
	FILE	*f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* A daemon of a test's own, started with a settings file. */
struct conf_daemon {
	char	dir[32];
	char	conf[128];
	char	sock[128];
	pid_t	pid;
};

/* Write text to a fresh settings file and start a daemon with it. */
static void
conf_up(struct conf_daemon *d, const char *text)
{
	strcpy(d->dir, "/tmp/hpz-conf.XXXXXX");
	cr_assert_not_null(mkdtemp(d->dir));
	snprintf(d->conf, sizeof(d->conf), "%s/hpzerod.conf", d->dir);
	snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
	conf_write(d->conf, text);
	d->pid = conf_start(d->conf, d->sock);
}

/* SIGTERM: a clean exit, 0; then its files go. */
static void
conf_down(struct conf_daemon *d)
{
	int	status;

	kill(d->pid, SIGTERM);
	cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "hpzerod status 0x%x on SIGTERM", status);
	unlink(d->conf);
	rmdir(d->dir);
}

Test(daemon, settings_file_and_sighup_reload)
{
	struct conf_daemon	d;
	struct hpz_status	st;
	int			i;

	conf_up(&d, "[background]\ngbs = 1.5\nclient_gbs = 0.5\n");
	st = itest_status();
	cr_assert_float_eq(st.bg_budget_gbs, 1.5, 0.001);
	cr_assert_float_eq(st.bg_client_budget_gbs, 0.5, 0.001);

	conf_write(d.conf, "[background]\ngbs = 3\n");
	kill(d.pid, SIGHUP);
	for (i = 0; i < 200; i++) {
		st = itest_status();
		if (st.bg_budget_gbs > 2.9)
			break;
		usleep(10 * 1000);
	}
	cr_assert_float_eq(st.bg_budget_gbs, 3.0, 0.001, "SIGHUP not applied");
	cr_assert_float_eq(st.bg_client_budget_gbs, 0.0, 0.001);

	/* A broken file on SIGHUP: the daemon keeps its settings. */
	conf_write(d.conf, "[background]\ngbs = lots\n");
	kill(d.pid, SIGHUP);
	usleep(100 * 1000);
	st = itest_status();
	cr_assert_float_eq(st.bg_budget_gbs, 3.0, 0.001);
	conf_down(&d);
}

Test(daemon, bad_settings_file_refused_at_start)
{
	char	dir[] = "/tmp/hpz-conf.XXXXXX", conf[128], cmd[1024];
	int	status;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/hpzerod.conf", dir);
	conf_write(conf, "[workers]\nroute = sideways\n");
	snprintf(cmd, sizeof(cmd), "%s --config %s --socket %s/x.sock 2>&1 | "
	    "grep -q 'hpzerod.conf:2: route must be'", itest_daemon_path(), conf,
	    dir);
	status = system(cmd);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "no line-numbered reason for a bad settings file");
	snprintf(cmd, sizeof(cmd), "%s --config %s/missing.conf --socket "
	    "%s/x.sock 2>/dev/null", itest_daemon_path(), dir, dir);
	status = system(cmd);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	unlink(conf);
	rmdir(dir);
}

Test(daemon, background_budget_throttles_scrub)
{
	struct conf_daemon	 d;
	struct hpz_status	 st;
	struct hpz_region	 r;
	unsigned char		*alias;
	size_t			 first;

	itest_need_pages(2048, 16);
	/* 50 MB/s: 32 MiB of garbage takes well over half a second. */
	conf_up(&d, "[background]\ngbs = 0.05\n");
	cr_assert_eq(hpz_region_create(&r, 32 * MiB, HPZ_PAGE_2M), 0);
	alias = mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
	cr_assert_neq(alias, MAP_FAILED);
	memset(alias, 0x6d, r.len);
	r.flags = HPZ_DISCARD;
	cr_assert_eq(hpz_register(&r), 0, "%s", hpz_last_error());
	usleep(200 * 1000);
	st = itest_status();
	cr_assert_gt(st.bg_throttle_ns, 0, "the budget never held work back");
	cr_assert_gt(st.bg_pages_pending, 0,
	    "32 MiB scrubbed in 200 ms under a 50 MB/s budget");
	/* Faults do not wait for the budget: they clear on their own. */
	cr_assert_eq(itest_count_nonzero(r.addr, r.len, &first), 0,
	    "stale byte at %zu", first);
	hpz_region_destroy(&r);
	munmap(alias, 32 * MiB);
	conf_down(&d);
}

Test(daemon, per_uid_limits)
{
	struct conf_daemon	 d;
	struct hpz_region	 a, b;
	struct hpz_msg		 m;
	int			 error, s1, s2, s3;
	char			 c;

	itest_need_pages(2048, 4);
	conf_up(&d, "[limits]\nregions = 1\nclients = 3\n");
	cr_assert_eq(hpz_region_create(&a, 2 * MiB, HPZ_PAGE_2M), 0);
	cr_assert_eq(hpz_region_create(&b, 2 * MiB, HPZ_PAGE_2M), 0);
	cr_assert_eq(hpz_register(&a), 0, "%s", hpz_last_error());
	error = hpz_register(&b);
	cr_assert_eq(error, -EDQUOT, "second region: %d (%s)", error,
	    hpz_last_error());
	cr_assert_not_null(strstr(hpz_last_error(), "limit"));
	/*
	 * Our library's connection plus two more: the third is told why
	 * (one reply, sequence 0, before any request), then closed.
	 */
	s1 = itest_raw_connect();
	s2 = itest_raw_connect();
	s3 = itest_raw_connect();
	cr_assert_eq(poll(&(struct pollfd){ .fd = s3, .events = POLLIN }, 1,
	    10000 * itest_wait_scale()), 1, "a connection over the limit: no "
	    "word in 10 s");
	cr_assert_gt(proto_recv(s3, &m), 0, "a connection over the limit was "
	    "closed without a word");
	cr_assert_eq(m.u.hdr.type, HPZ_MSG_REPLY);
	cr_assert_eq(m.u.hdr.seq, 0);
	cr_assert_eq(m.u.reply.error, -EDQUOT, "%d (%.*s)", m.u.reply.error,
	    (int)sizeof(m.u.reply.text), m.u.reply.text);
	cr_assert_eq(recv(s3, &c, 1, 0), 0, "a connection over the limit "
	    "was kept");
	close(s1);
	close(s2);
	close(s3);
	/* And the first region is still served. */
	cr_assert_eq(itest_count_nonzero(a.addr, a.len, &(size_t){ 0 }), 0);
	hpz_region_destroy(&a);
	hpz_region_destroy(&b);
	conf_down(&d);
}
