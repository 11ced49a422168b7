/*
 * itest.c - the integration tests' harness: the helpers of itest.h that
 * every itest-*.c uses against the real daemon that run.sh started.  The
 * tests are in itest-SUITE.c, one file a criterion suite; each test forks
 * (criterion), so each gets a fresh libhpz connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-state.h"

/* --- helpers ------------------------------------------------------------ */

long
itest_free_pages(unsigned long page_kib)
{
	char	 path[128];
	FILE	*f;
	long	 n = -1;

	snprintf(path, sizeof(path),
	    "/sys/kernel/mm/hugepages/hugepages-%lukB/free_hugepages",
	    page_kib);
	if ((f = fopen(path, "r")) == NULL)
		return (-1);
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return (n);
}

/* Skip the test when the pool cannot give n pages right now. */
void
itest_need_pages(unsigned long page_kib, long n)
{
	char	 dir[128], name[32];
	long	 have = itest_free_pages(page_kib);

	if (have >= n)
		return;
	if (page_kib >= 1048576)
		snprintf(name, sizeof(name), "%lu GiB", page_kib / 1048576);
	else if (page_kib >= 1024)
		snprintf(name, sizeof(name), "%lu MiB", page_kib / 1024);
	else
		snprintf(name, sizeof(name), "%lu KiB", page_kib);
	snprintf(dir, sizeof(dir), "/sys/kernel/mm/hugepages/hugepages-%lukB",
	    page_kib);
	if (access(dir, F_OK) != 0)
		cr_skip_test("the kernel has no %s huge pages (no "
		    "hugepages-%lukB in sysfs)", name, page_kib);
	if (have < 0)
		cr_skip_test("needs %ld free %s huge pages; cannot read "
		    "%s/free_hugepages", n, name, dir);
	cr_skip_test("needs %ld free %s huge pages, %ld free", n, name, have);
}

void
itest_create(struct hpz_region *r, size_t len, unsigned int flags)
{
	int	error;

	if ((flags & HPZ_PAGE_MASK) == HPZ_PAGE_2M)
		itest_need_pages(2048, (long)(len / (2 * MiB)));
	else if ((flags & HPZ_PAGE_MASK) == HPZ_PAGE_1G)
		itest_need_pages(1048576, (long)(len / GiB));
	error = hpz_region_create(r, len, flags);
	cr_assert_eq(error, 0, "hpz_region_create: %s (%s)",
	    hpz_strerror(error), hpz_last_error());
}

size_t
itest_count_not(const void *p, size_t len, unsigned char v, size_t *first)
{
	const unsigned char	*b = p;
	size_t			 i, n = 0;

	*first = (size_t)-1;
	for (i = 0; i < len; i++) {
		if (b[i] != v) {
			if (n++ == 0)
				*first = i;
		}
	}
	return (n);
}

size_t
itest_count_nonzero(const void *p, size_t len, size_t *first)
{
	const uint64_t	*w = p;
	size_t		 i, n = 0;

	*first = (size_t)-1;
	for (i = 0; i < len / 8; i++) {
		if (w[i] != 0) {
			if (n++ == 0)
				*first = i * 8;
		}
	}
	return (n);
}

void
itest_touch_read(const void *p, size_t len, size_t step)
{
	const volatile unsigned char	*b = p;
	size_t				 i;

	for (i = 0; i < len; i += step)
		(void)b[i];
}

/*
 * The daemon counts a fault once the client is already running again, so
 * a count read right after the touch may lag by the last fault or two.
 */
struct hpz_status
itest_status_faults(const struct hpz_status *before, unsigned long long n)
{
	struct hpz_status	st;
	int			i;

	for (i = 0; i < 200; i++) {
		st = itest_status();
		if (st.faults - before->faults >= n)
			break;
		usleep(10 * 1000);
	}
	return (st);
}

struct hpz_status
itest_status(void)
{
	struct hpz_status	st;
	int			error;

	error = hpz_status(&st);
	cr_assert_eq(error, 0, "hpz_status: %s", hpz_strerror(error));
	return (st);
}

/* The hpzerod binary of the build under test. */
const char *
itest_daemon_path(void)
{
	static char	 path[512];
	const char	*dir = getenv("HPZ_BUILDDIR");

	cr_assert_not_null(dir, "HPZ_BUILDDIR is not set");
	snprintf(path, sizeof(path), "%s/daemon/hpzerod", dir);
	return (path);
}

/*
 * fork() for a child that will exec a daemon for the test: the child dies
 * with the test (a failed assertion ends the test's process, and a daemon
 * left behind kept the suite waiting on it instead of failing).
 */
pid_t
itest_fork_dying(void)
{
	pid_t	parent = getpid(), pid;

	if ((pid = fork()) == 0 &&
	    (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent))
		_exit(122);
	return (pid);
}

/* A fresh page-state memfd for npages pages, sealed as libhpz makes it. */
int
itest_state_memfd(uint64_t npages)
{
	int	fd;

	fd = memfd_create("itest-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)HPZ_STATE_SIZE(npages)), 0);
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	return (fd);
}

struct itest_check {
	const unsigned char	*p;
	size_t			 len;
	unsigned char		 v;
	size_t			 bad, first;
};

static void *
itest_check_main(void *arg)
{
	struct itest_check	*c = arg;

	c->bad = itest_count_not(c->p, c->len, c->v, &c->first);
	return (NULL);
}

/*
 * [p, p+len) reads v, checked in a thread that must finish in bound_s
 * seconds: a fault nobody serves fails the test instead of hanging it.
 */
void
itest_expect_bytes(const void *p, size_t len, unsigned char v, int bound_s,
    const char *what)
{
	struct itest_check	c = { p, len, v, 0, 0 };
	struct timespec		ts;
	pthread_t		t;

	cr_assert_eq(pthread_create(&t, NULL, itest_check_main, &c), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += bound_s;
	if (pthread_timedjoin_np(t, NULL, &ts) != 0)
		cr_assert_fail("%s: reading hung (a fault nobody served)",
		    what);
	cr_assert_eq(c.bad, 0, "%s: %zu bytes not 0x%02x, first at %zu",
	    what, c.bad, v, c.first);
}

/* In a child run before criterion starts: say why it failed; 1. */
int
itest_child_fail(const char *fmt, ...)
{
	va_list	ap;

	fputs("child: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return (1);
}

/* In such a child: every byte of [p, p+len) is v, or say which is not. */
int
itest_child_check(const void *p, size_t len, unsigned char v,
    const char *what)
{
	size_t	first, n;

	n = itest_count_not(p, len, v, &first);
	if (n != 0)
		return (itest_child_fail("%s: %zu bytes are not 0x%02x, first "
		    "at offset %zu (0x%02x)", what, n, v, first,
		    ((const unsigned char *)p)[first]));
	return (0);
}

/* This binary's path, for a child that runs it again. */
void
itest_self(char *buf, size_t size)
{
	ssize_t	n = readlink("/proc/self/exe", buf, size - 1);

	cr_assert_gt(n, 0, "readlink /proc/self/exe: %s", strerror(errno));
	buf[n] = '\0';
}

/*
 * In a child about to run the build's hpz-run: its preload library and
 * libhpz from the build, and ASan told that the preload library comes
 * before its runtime (--enable-asan).
 */
void
itest_hpzrun_env(const char *dir)
{
	char		 v[PATH_MAX * 2];
	const char	*old;

	snprintf(v, sizeof(v), "%s/client/.libs/libhpz-preload.so", dir);
	setenv("HPZ_PRELOAD", v, 1);
	old = getenv("LD_LIBRARY_PATH");
	snprintf(v, sizeof(v), "%s/lib/.libs%s%s", dir,
	    old != NULL ? ":" : "", old != NULL ? old : "");
	setenv("LD_LIBRARY_PATH", v, 1);
	old = getenv("ASAN_OPTIONS");
	snprintf(v, sizeof(v), "%s%sverify_asan_link_order=0",
	    old != NULL ? old : "", old != NULL ? ":" : "");
	setenv("ASAN_OPTIONS", v, 1);
}

/*
 * What pid writes to fd until it closes it, in o (what does not fit is
 * read and dropped), then its status.  Still running after timeout_s
 * seconds: killed, and the test fails with what it printed.
 */
void
itest_collect(struct itest_out *o, int fd, pid_t pid, int timeout_s,
    const char *what)
{
	struct pollfd	pfd;
	char		drop[4096];
	time_t		deadline;
	ssize_t		n;
	int		killed = 0;

	o->len = 0;
	deadline = time(NULL) + timeout_s;
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (time(NULL) > deadline && !killed) {
			kill(pid, SIGKILL);
			killed = 1;
		}
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if (o->len < sizeof(o->text) - 1)
			n = read(fd, o->text + o->len,
			    sizeof(o->text) - 1 - o->len);
		else
			n = read(fd, drop, sizeof(drop));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (o->len < sizeof(o->text) - 1)
			o->len += (size_t)n;
	}
	o->text[o->len] = '\0';
	close(fd);
	cr_assert_eq(waitpid(pid, &o->status, 0), pid);
	cr_assert(!killed, "%s ran over %d s; output:\n%s", what, timeout_s,
	    o->text);
}

/* sun: the AF_UNIX address of path. */
void
itest_sun(struct sockaddr_un *sun, const char *path)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	snprintf(sun->sun_path, sizeof(sun->sun_path), "%s", path);
}

uint64_t
itest_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

double
itest_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3);
}

/* $HPZ_WAIT_SCALE (run.sh sets it under valgrind): liveness bounds grow. */
int
itest_wait_scale(void)
{
	const char	*s = getenv("HPZ_WAIT_SCALE");
	int		 v = s != NULL ? atoi(s) : 1;

	return (v >= 1 ? v : 1);
}

/*
 * Run argv (argv[0] a path), stderr to /dev/null when quiet, and return
 * its wait status.  One still running after timeout_s seconds (times the
 * wait scale) is killed and the test fails naming it: a command that
 * should exit at once must not hang the suite when it does not.
 */
int
itest_run_bounded(const char *const argv[], int quiet, int timeout_s)
{
	uint64_t	deadline;
	pid_t		pid, w;
	int		status, null;

	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (quiet && (null = open("/dev/null", O_WRONLY)) != -1)
			dup2(null, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = itest_now_ms() +
	    (uint64_t)timeout_s * 1000 * (uint64_t)itest_wait_scale();
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 &&
	    itest_now_ms() < deadline)
		usleep(20 * 1000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		cr_assert_fail("%s %s: still running after %d s, killed",
		    argv[0], argv[1] != NULL ? argv[1] : "", timeout_s *
		    itest_wait_scale());
	}
	cr_assert_eq(w, pid, "waitpid %s: %s", argv[0], strerror(errno));
	return (status);
}

int
itest_raw_connect(void)
{
	struct sockaddr_un	 sun;
	const char		*path = getenv("HPZ_SOCKET");
	int			 fd;

	cr_assert_not_null(path, "HPZ_SOCKET is not set (run via run.sh)");
	itest_sun(&sun, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0,
	    "connect %s: %s", path, strerror(errno));
	return (fd);
}

/* run.sh's daemon ($HPZD_PID). */
pid_t
itest_daemon_pid(void)
{
	const char	*s = getenv("HPZD_PID");

	cr_assert_not_null(s, "HPZD_PID is not set (run through run.sh)");
	return ((pid_t)atoi(s));
}

/* A process's start time (field 22 of its stat): a new process differs. */
unsigned long long
itest_daemon_start(pid_t pid)
{
	char			 path[64], buf[1024], *p;
	unsigned long long	 start = 0;
	FILE			*f;
	int			 field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (0);
	if (fgets(buf, sizeof(buf), f) != NULL &&
	    (p = strrchr(buf, ')')) != NULL) {
		for (field = 2; *p != '\0' && field < 22; p++)
			if (*p == ' ')
				field++;
		start = strtoull(p, NULL, 10);
	}
	fclose(f);
	return (start);
}

/* Kill a child of the test and reap it. */
void
itest_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Open fds of the daemon, from /proc; -1 if unknown. */
int
itest_daemon_fds(void)
{
	const char	*pid = getenv("HPZD_PID");
	char		 path[64];
	DIR		*d;
	struct dirent	*e;
	int		 n = 0;

	if (pid == NULL)
		return (-1);
	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	if ((d = opendir(path)) == NULL)
		return (-1);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return (n);
}

/* A userfaultfd set up like libhpz does, for raw protocol tests. */
int
itest_make_uffd(void *addr, size_t len, uint64_t *features, uint64_t *ioctls)
{
	struct uffdio_api	api;
	struct uffdio_register	reg;
	int			fd;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	cr_assert_geq(fd, 0, "userfaultfd: %s", strerror(errno));
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_MISSING_HUGETLBFS |
	    UFFD_FEATURE_MINOR_HUGETLBFS | UFFD_FEATURE_MINOR_SHMEM |
	    UFFD_FEATURE_EXACT_ADDRESS;
	cr_assert_eq(ioctl(fd, UFFDIO_API, &api), 0, "UFFDIO_API: %s",
	    strerror(errno));
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)addr;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR;
	cr_assert_eq(ioctl(fd, UFFDIO_REGISTER, &reg), 0,
	    "UFFDIO_REGISTER: %s", strerror(errno));
	*features = api.features;
	*ioctls = reg.ioctls;
	return (fd);
}

void
itest_register(struct hpz_region *r)
{
	int	error = hpz_register(r);

	cr_assert_eq(error, 0, "hpz_register: %s (%s)", hpz_strerror(error),
	    hpz_last_error());
}

void
itest_assert_zero(const struct hpz_region *r, const char *when)
{
	size_t	first, n;

	n = itest_count_nonzero(r->addr, r->len, &first);
	cr_assert_eq(n, 0, "%s: %zu non-zero words, first at offset %zu",
	    when, n, first);
}

/* A second mapping of the same file, never registered: the "other side". */
void *
itest_alias(const struct hpz_region *r)
{
	void	*p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED,
	    r->fd, r->offset);

	cr_assert_neq(p, MAP_FAILED, "alias mmap: %s", strerror(errno));
	return (p);
}
