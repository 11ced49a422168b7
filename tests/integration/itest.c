/*
 * itest.c - integration tests: real client calls against the real daemon
 * that run.sh started.  Every test forks (criterion), so each gets a fresh
 * libhpz connection.
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
static void *
itest_alias(const struct hpz_region *r)
{
	void	*p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED,
	    r->fd, r->offset);

	cr_assert_neq(p, MAP_FAILED, "alias mmap: %s", strerror(errno));
	return (p);
}

/* --- basic service ------------------------------------------------------ */

/*
 * A fresh region holds no garbage: its faults are the kernel's (it zeroes
 * a fresh page anyway; a round trip through us would only add to it).
 * The daemon registers it and leaves its faults alone.
 */
static void
itest_fresh_left_to_kernel(unsigned int page, size_t len)
{
	struct hpz_region	r;
	struct hpz_status	before, after;

	itest_create(&r, len, page);
	before = itest_status();
	itest_register(&r);
	itest_assert_zero(&r, "first read");
	after = itest_status();
	cr_assert_eq(after.registers - before.registers, 1);
	cr_assert_eq(after.faults - before.faults, 0,
	    "the daemon served %llu faults of a fresh region: they are the "
	    "kernel's", after.faults - before.faults);
	cr_assert_geq(after.intercept_off - before.intercept_off, 1,
	    "the region was never left to the kernel");
	hpz_region_destroy(&r);
}

Test(serve, fresh_2m_region_reads_zero)
{
	itest_fresh_left_to_kernel(HPZ_PAGE_2M, 32 * MiB);
}

Test(serve, fresh_shmem_region_reads_zero)
{
	itest_fresh_left_to_kernel(HPZ_PAGE_SHMEM, 8 * MiB);
}

Test(serve, one_gib_page_region)
{
	struct hpz_region	r;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, GiB, HPZ_PAGE_1G);
	memset(r.addr, 0x77, 4096);	/* present before registration */
	itest_register(&r);
	cr_assert_eq(madvise(r.addr, r.len, MADV_DONTNEED), 0);
	p = r.addr;
	cr_assert_eq(itest_count_not(p, 4096, 0x77, &first), 0,
	    "1 GiB page lost its data at %zu", first);
	memset(p, 0xee, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "%s", hpz_last_error());
	itest_assert_zero(&r, "1 GiB page after reset");
	hpz_region_destroy(&r);
}

Test(serve, writes_after_fault_stick)
{
	struct hpz_region	r;
	unsigned char		*p;
	size_t			 i, first;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	p = r.addr;
	for (i = 0; i < r.len; i += 4096)
		p[i] = (unsigned char)(i >> 12);
	/* Zap our mapping: the pages hold data, the daemon maps them as is. */
	cr_assert_eq(madvise(r.addr, r.len, MADV_DONTNEED), 0);
	for (i = 0; i < r.len; i += 4096)
		cr_assert_eq(p[i], (unsigned char)(i >> 12),
		    "data page zeroed at %zu", i);
	(void)first;
	hpz_region_destroy(&r);
}

Test(serve, data_before_registration_kept)
{
	struct hpz_region	 r;
	unsigned char		*alias;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	/* Data written through another mapping: the region never saw it. */
	alias = itest_alias(&r);
	memset(alias, 0x3c, 8 * MiB);
	itest_register(&r);
	cr_assert_eq(itest_count_not(r.addr, 8 * MiB, 0x3c, &first), 0,
	    "data lost at offset %zu", first);
	cr_assert_eq(itest_count_nonzero((char *)r.addr + 8 * MiB, 8 * MiB,
	    &first), 0, "fresh half not zero at %zu", first);
	munmap(alias, r.len);
	hpz_region_destroy(&r);
}

/*
 * Garbage in the first garbage bytes of a len region of page (written
 * through an alias, or through the very mapping we register, which maps
 * it): registered with HPZ_DISCARD, all of it reads zero.
 */
static void
itest_discard_reads_zero(size_t len, unsigned int page, size_t garbage,
    int alias, unsigned char v, const char *what)
{
	struct hpz_region	 r;
	unsigned char		*p = NULL;

	itest_create(&r, len, page);
	if (alias)
		p = itest_alias(&r);
	memset(alias ? p : r.addr, v, garbage);
	r.flags = HPZ_DISCARD;
	itest_register(&r);
	itest_assert_zero(&r, what);
	if (alias)
		munmap(p, r.len);
	hpz_region_destroy(&r);
}

Test(serve, discard_region_reads_zero)
{
	/* Garbage in part of the file. */
	itest_discard_reads_zero(16 * MiB, HPZ_PAGE_2M, 10 * MiB, 1, 0xd1,
	    "discard region");
}

Test(serve, discard_hides_garbage_already_mapped)
{
	itest_discard_reads_zero(16 * MiB, HPZ_PAGE_2M, 16 * MiB, 0, 0xd2,
	    "discard region that was mapped");
}

Test(serve, discard_shmem_region_reads_zero)
{
	itest_discard_reads_zero(4 * MiB, HPZ_PAGE_SHMEM, 4 * MiB, 1, 0x99,
	    "discard shmem region");
}

Test(serve, reset_after_pattern_reads_zero)
{
	struct hpz_region	r;
	struct hpz_status	before, after;
	int			round;

	itest_create(&r, 32 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	for (round = 0; round < 3; round++) {
		memset(r.addr, 0xa5 + round, r.len);
		before = itest_status();
		cr_assert_eq(hpz_reset(&r), 0, "reset: %s", hpz_last_error());
		itest_assert_zero(&r, "after reset");
		after = itest_status();
		/* By the fault path or ahead of it, in the background. */
		cr_assert_geq(after.pages_cleared + after.bg_pages_cleared -
		    before.pages_cleared - before.bg_pages_cleared, 16,
		    "daemon cleared %llu pages", after.pages_cleared +
		    after.bg_pages_cleared - before.pages_cleared -
		    before.bg_pages_cleared);
	}
	hpz_region_destroy(&r);
}

Test(serve, reset_shmem_reads_zero)
{
	struct hpz_region	r;

	itest_create(&r, 4 * MiB, HPZ_PAGE_SHMEM);
	itest_register(&r);
	memset(r.addr, 0x5e, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "reset: %s", hpz_last_error());
	itest_assert_zero(&r, "shmem after reset");
	hpz_region_destroy(&r);
}

Test(serve, reset_hides_writes_through_alias)
{
	struct hpz_region	 r;
	unsigned char		*alias;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	alias = itest_alias(&r);
	memset(alias, 0x42, r.len);	/* stale bytes the region never read */
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	munmap(alias, r.len);
	hpz_region_destroy(&r);
}

Test(serve, reset_subrange_only)
{
	struct hpz_region	 r, mid;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x17, r.len);
	mid = r;
	mid.addr = (char *)r.addr + 4 * MiB;
	mid.len = 8 * MiB;
	cr_assert_eq(hpz_reset(&mid), 0, "%s", hpz_last_error());
	p = r.addr;
	cr_assert_eq(itest_count_not(p, 4 * MiB, 0x17, &first), 0);
	cr_assert_eq(itest_count_nonzero(p + 4 * MiB, 8 * MiB, &first), 0,
	    "reset range not zero at %zu", first);
	cr_assert_eq(itest_count_not(p + 12 * MiB, 4 * MiB, 0x17, &first), 0,
	    "page outside the reset lost data at %zu", first);
	hpz_region_destroy(&r);
}

Test(serve, reset_keeps_pages_allocated)
{
	struct hpz_region	r;
	struct stat		before, after;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x01, r.len);
	/* hugetlbfs counts the file's allocated pages in st_blocks. */
	cr_assert_eq(fstat(r.fd, &before), 0);
	cr_assert_eq((size_t)before.st_blocks * 512, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	cr_assert_eq(fstat(r.fd, &after), 0);
	cr_assert_eq(after.st_blocks, before.st_blocks,
	    "file blocks went %lld -> %lld: pages were given back",
	    (long long)before.st_blocks, (long long)after.st_blocks);
	hpz_region_destroy(&r);
}

Test(serve, unregister_keeps_data_drops_garbage)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	p = r.addr;
	memset(p, 0xab, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	memset(p, 0xcd, 2 * MiB);	/* page 0: data again */
	cr_assert_eq(hpz_unregister(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(itest_count_not(p, 2 * MiB, 0xcd, &first), 0,
	    "mapped data lost at %zu", first);
	cr_assert_eq(itest_count_nonzero(p + 2 * MiB, r.len - 2 * MiB,
	    &first), 0, "stale garbage visible after unregister at %zu",
	    first);
	/* Unregistered: a second unregister says so. */
	cr_assert_eq(hpz_unregister(&r), -ENXIO);
	hpz_region_destroy(&r);
}

Test(serve, destroy_releases_region)
{
	struct hpz_region	r;
	struct hpz_status	base, mid, after;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	base = itest_status();
	itest_register(&r);
	mid = itest_status();
	cr_assert_eq(mid.regions, base.regions + 1);
	cr_assert_eq(mid.bytes_registered, base.bytes_registered + r.len);
	hpz_region_destroy(&r);
	after = itest_status();
	cr_assert_eq(after.regions, base.regions);
	cr_assert_null(r.addr);
}

Test(serve, random_order_touches)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 n, i, j, t, *order, first;

	itest_create(&r, 64 * MiB, HPZ_PAGE_2M);
	r.flags = HPZ_DISCARD;
	itest_register(&r);
	p = r.addr;
	n = r.len / 4096;
	order = malloc(n * sizeof(*order));
	cr_assert_not_null(order);
	for (i = 0; i < n; i++)
		order[i] = i;
	srand(12345);
	for (i = n - 1; i > 0; i--) {
		j = (size_t)rand() % (i + 1);
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		cr_assert_eq(p[order[i] * 4096 + 4095], 0);
		p[order[i] * 4096] = (unsigned char)(order[i] | 1);
	}
	for (i = 0; i < n; i++) {
		cr_assert_eq(p[i * 4096], (unsigned char)(i | 1));
		cr_assert_eq(itest_count_nonzero(p + i * 4096 + 8, 4096 - 8,
		    &first), 0);
	}
	free(order);
	hpz_region_destroy(&r);
}

/* --- concurrency ---------------------------------------------------------- */

struct same_page {
	pthread_barrier_t	*barrier;
	volatile unsigned char	*byte;
	unsigned char		 seen;
};

static void *
same_page_main(void *arg)
{
	struct same_page	*sp = arg;

	pthread_barrier_wait(sp->barrier);
	sp->seen = *sp->byte;
	return (NULL);
}

static void
itest_same_page(unsigned int flags, int reset)
{
	struct hpz_region	r;
	pthread_barrier_t	barrier;
	pthread_t		t[8];
	struct same_page	sp[8];
	int			i, round;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	r.flags = flags;
	itest_register(&r);
	for (round = 0; round < 4; round++) {
		if (reset) {
			memset(r.addr, 0xff, r.len);
			cr_assert_eq(hpz_reset(&r), 0);
		}
		pthread_barrier_init(&barrier, NULL, 8);
		for (i = 0; i < 8; i++) {
			sp[i].barrier = &barrier;
			sp[i].byte = (unsigned char *)r.addr +
			    (size_t)round * 2 * MiB + (size_t)i * 4096 * 7;
			sp[i].seen = 0xee;
			pthread_create(&t[i], NULL, same_page_main, &sp[i]);
		}
		for (i = 0; i < 8; i++) {
			pthread_join(t[i], NULL);
			cr_assert_eq(sp[i].seen, 0, "thread %d read 0x%02x", i,
			    sp[i].seen);
		}
		pthread_barrier_destroy(&barrier);
	}
	itest_assert_zero(&r, "after concurrent faults");
	hpz_region_destroy(&r);
}

Test(concurrency, threads_fault_same_fresh_page)
{
	itest_same_page(0, 0);
}

Test(concurrency, threads_fault_same_garbage_page)
{
	itest_same_page(HPZ_DISCARD, 1);
}

/* One client process: its own region, touched, checked, reset, checked. */
static int
itest_child_cycle(size_t len)
{
	struct hpz_region	r;
	size_t			first;
	int			round;

	if (hpz_region_create(&r, len, HPZ_PAGE_2M) != 0)
		return (3);
	if (hpz_register(&r) != 0)
		return (4);
	for (round = 0; round < 3; round++) {
		if (itest_count_nonzero(r.addr, r.len, &first) != 0)
			return (5);
		memset(r.addr, 0x80 | round, r.len);
		if (hpz_reset(&r) != 0)
			return (6);
	}
	if (itest_count_nonzero(r.addr, r.len, &first) != 0)
		return (7);
	hpz_region_destroy(&r);
	return (0);
}

Test(concurrency, several_processes_at_once)
{
	pid_t	pid[4];
	int	i, status;

	itest_need_pages(2048, 4 * 16);
	for (i = 0; i < 4; i++) {
		pid[i] = fork();
		cr_assert_geq(pid[i], 0);
		if (pid[i] == 0)
			_exit(itest_child_cycle(32 * MiB));
	}
	for (i = 0; i < 4; i++) {
		cr_assert_eq(waitpid(pid[i], &status, 0), pid[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "client process %d failed with status 0x%x", i, status);
	}
}

Test(concurrency, killed_client_releases_its_state)
{
	struct hpz_status	base, st;
	struct hpz_region	r;
	pid_t			pid;
	int			pfd[2], i, status;
	char			c;

	itest_need_pages(2048, 64);
	base = itest_status();
	cr_assert_eq(pipe(pfd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		if (hpz_region_create(&r, 128 * MiB, HPZ_PAGE_2M) != 0 ||
		    hpz_register(&r) != 0)
			_exit(3);
		if (write(pfd[1], "r", 1) != 1)
			_exit(4);
		for (;;) {	/* fault until killed */
			memset(r.addr, 0x66, r.len);
			hpz_reset(&r);
		}
	}
	close(pfd[1]);
	cr_assert_eq(read(pfd[0], &c, 1), 1, "child did not register");
	usleep(200 * 1000);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status));
	for (i = 0; i < 100; i++) {
		st = itest_status();
		if (st.regions == base.regions && st.clients == base.clients + 1)
			break;
		usleep(50 * 1000);
	}
	cr_assert_eq(st.regions, base.regions,
	    "daemon still holds %llu regions (had %llu)", st.regions,
	    base.regions);
	cr_assert_eq(st.bytes_registered, base.bytes_registered);
	close(pfd[0]);
	/* And the daemon still serves. */
	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	itest_assert_zero(&r, "after a client was killed");
	hpz_region_destroy(&r);
}

Test(concurrency, forked_child_does_not_inherit_region)
{
	struct hpz_region	r;
	pid_t			pid;
	int			status;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		unsigned char	vec;

		/* MADV_DONTFORK: the range is not mapped here at all. */
		if (mincore(r.addr, 4096, &vec) == -1 && errno == ENOMEM)
			_exit(0);
		_exit(1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child could reach the registered range (status 0x%x)", status);
	itest_assert_zero(&r, "parent");
	hpz_region_destroy(&r);
}

/* --- library errors ------------------------------------------------------- */

Test(errors, no_daemon)
{
	struct hpz_region	r;
	int			error;

	setenv("HPZ_SOCKET", "/nonexistent/hpzerod.sock", 1);
	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	error = hpz_register(&r);
	cr_assert(error == -ENOENT || error == -ECONNREFUSED, "got %d", error);
	cr_assert_not_null(strstr(hpz_strerror(error), "not running"));
	/* Nothing left registered: the page is served by the kernel. */
	*(volatile char *)r.addr = 1;
	hpz_region_destroy(&r);
}

Test(errors, private_anonymous_memory_rejected)
{
	struct hpz_region	 r;
	void			*p;

	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = -1;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "private anonymous"),
	    "%s", hpz_last_error());
	munmap(p, 2 * MiB);
}

Test(errors, regular_file_rejected)
{
	struct hpz_region	 r;
	char			 path[] = "/tmp/hpz-itest-XXXXXX";
	void			*p;
	int			 fd;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(fd, 2 * MiB), 0);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = fd;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "hugetlbfs and shmem"),
	    "%s", hpz_last_error());
	munmap(p, 2 * MiB);
	close(fd);
}

Test(errors, misaligned_region_rejected)
{
	struct hpz_region	r, bad;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	bad = r;
	bad.addr = (char *)r.addr + 4096;
	bad.len = 2 * MiB;
	cr_assert_eq(hpz_register(&bad), -EINVAL);
	bad = r;
	bad.len = 3 * MiB;
	cr_assert_eq(hpz_register(&bad), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "multiple"));
	hpz_region_destroy(&r);
}

Test(errors, region_past_end_of_file_rejected)
{
	struct hpz_region	 r;
	struct hpz_status	 before, after;
	void			*p;
	int			 fd;

	fd = memfd_create("itest", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 1 * MiB), 0);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = fd;
	before = itest_status();
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "past the end"), "%s",
	    hpz_last_error());
	after = itest_status();
	cr_assert_eq(after.regions, before.regions);
	cr_assert_eq(after.requests_rejected, before.requests_rejected + 1);
	munmap(p, 2 * MiB);
	close(fd);
}

Test(errors, overlap_in_same_process_rejected)
{
	struct hpz_region	r, half;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	cr_assert_eq(hpz_register(&r), -EBUSY);
	half = r;
	half.addr = (char *)r.addr + 4 * MiB;
	half.len = 4 * MiB;
	half.offset = 4 * MiB;
	cr_assert_eq(hpz_register(&half), -EBUSY);
	hpz_region_destroy(&r);
}

Test(errors, same_file_range_twice_rejected)
{
	struct hpz_region	 r, alias;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	/* Another mapping of the same file pages: two states for one page. */
	alias = r;
	alias.addr = itest_alias(&r);
	cr_assert_eq(hpz_register(&alias), -EBUSY, "%s", hpz_last_error());
	cr_assert_not_null(strstr(hpz_last_error(), "overlaps"));
	munmap(alias.addr, alias.len);
	hpz_region_destroy(&r);
}

Test(errors, unknown_region_calls)
{
	struct hpz_region	r;

	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	cr_assert_eq(hpz_unregister(&r), -ENXIO);
	cr_assert_eq(hpz_reset(&r), -ENXIO);
	hpz_region_destroy(&r);
}

Test(errors, region_create_bad_arguments)
{
	struct hpz_region	r;

	cr_assert_eq(hpz_region_create(&r, 3 * MiB, HPZ_PAGE_2M), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 0, HPZ_PAGE_2M), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB, 0x4000), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB,
	    HPZ_PAGE_1G | HPZ_PAGE_SHMEM), -EINVAL);
	cr_assert_eq(hpz_region_create(NULL, 2 * MiB, 0), -EINVAL);
	cr_assert_eq(hpz_register(NULL), -EINVAL);
}

Test(errors, unknown_region_flags_rejected)
{
	struct hpz_region	r;

	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	r.flags = 0x8000;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	r.flags = 0;
	hpz_region_destroy(&r);
}

/* --- hpzctl --------------------------------------------------------------- */

static int
itest_run(const char *args, char *out, size_t outlen)
{
	const char	*dir = getenv("HPZ_BUILDDIR");
	char		 cmd[1024];
	FILE		*f;
	size_t		 n;
	int		 status;

	cr_assert_not_null(dir, "HPZ_BUILDDIR is not set");
	snprintf(cmd, sizeof(cmd), "%s/client/hpzctl %s 2>&1", dir, args);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	status = pclose(f);
	return (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

Test(hpzctl, status_answers)
{
	char	out[4096];

	cr_assert_eq(itest_run("status", out, sizeof(out)), 0, "%s", out);
	cr_assert_not_null(strstr(out, "faults"), "%s", out);
	cr_assert_not_null(strstr(out, HPZ_VERSION), "%s", out);
}

Test(hpzctl, status_without_daemon_fails)
{
	char	out[4096];

	cr_assert_eq(itest_run("-s /nonexistent/x.sock status", out,
	    sizeof(out)), 1, "%s", out);
}

Test(hpzctl, stats_json)
{
	char	out[8192];

	cr_assert_eq(itest_run("stats --json", out, sizeof(out)), 0, "%s", out);
	cr_assert_not_null(strstr(out, "\"faults\""), "%s", out);
	cr_assert_not_null(strstr(out, "\"bytes_registered\""), "%s", out);
	cr_assert_eq(out[0], '{', "%s", out);
}

/* --- clearing engine ------------------------------------------------------ */

struct adjacent {
	pthread_barrier_t	*barrier;
	unsigned char		*base;
	size_t			 stride;	/* bytes between this thread's pages */
	size_t			 first;
	size_t			 count;
	size_t			 page;
	size_t			 bad;
};

/* Touch every stride-th page from first, mid-page, and check it reads 0. */
static void *
adjacent_main(void *arg)
{
	struct adjacent	*a = arg;
	size_t		 i, off, first;

	pthread_barrier_wait(a->barrier);
	for (i = 0; i < a->count; i++) {
		off = (a->first + i * a->stride) * a->page;
		if (a->base[off + a->page / 2 + 123] != 0)
			a->bad++;
		a->bad += itest_count_nonzero(a->base + off, a->page, &first);
	}
	return (NULL);
}

/* Many threads faulting neighbouring garbage pages at once: coalescing. */
static void
itest_adjacent(unsigned int pageflag, size_t len, int nthreads)
{
	struct hpz_region	 r;
	struct adjacent		 a[8];
	pthread_barrier_t	 barrier;
	pthread_t		 t[8];
	size_t			 page, npages, bad = 0;
	int			 i, round;

	itest_create(&r, len, pageflag);
	page = (size_t)hpz_page_size(r.fd);
	npages = len / page;
	itest_register(&r);
	for (round = 0; round < 3; round++) {
		memset(r.addr, 0xc3, r.len);
		cr_assert_eq(hpz_reset(&r), 0);
		pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
		for (i = 0; i < nthreads; i++) {
			a[i].barrier = &barrier;
			a[i].base = r.addr;
			a[i].stride = (size_t)nthreads;
			a[i].first = (size_t)i;
			a[i].count = npages / (size_t)nthreads;
			a[i].page = page;
			a[i].bad = 0;
			pthread_create(&t[i], NULL, adjacent_main, &a[i]);
		}
		for (i = 0; i < nthreads; i++) {
			pthread_join(t[i], NULL);
			bad += a[i].bad;
		}
		pthread_barrier_destroy(&barrier);
		cr_assert_eq(bad, 0, "round %d: %zu stale words", round, bad);
	}
	itest_assert_zero(&r, "after interleaved faults");
	hpz_region_destroy(&r);
}

Test(engine, interleaved_threads_on_garbage_2m_pages)
{
	itest_adjacent(HPZ_PAGE_2M, 32 * MiB, 8);
}

Test(engine, interleaved_threads_on_garbage_shmem_pages)
{
	itest_adjacent(HPZ_PAGE_SHMEM, 8 * MiB, 4);
}

Test(engine, neighbourhood_of_fault_is_zero_at_page_edges)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 offs[] = { 0, 4095, 4096, MiB, 2 * MiB - 1 };
	size_t			 i, first;

	itest_create(&r, 2 * MiB * 5, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x7e, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	p = r.addr;
	/* First touch of each page at a different subpage, then all of it. */
	for (i = 0; i < 5; i++)
		cr_assert_eq(p[i * 2 * MiB + offs[i]], 0,
		    "faulting byte of page %zu", i);
	cr_assert_eq(itest_count_nonzero(p, r.len, &first), 0,
	    "stale byte at %zu", first);
	hpz_region_destroy(&r);
}

Test(engine, list_regions_reports_ours)
{
	struct hpz_region	 r;
	struct hpz_region_info	 info[64];
	struct hpz_status	 before;
	size_t			 n, i;
	int			 found = 0;

	/* No scrub: every page's garbage waits for its fault. */
	itest_create(&r, 8 * MiB, HPZ_PAGE_2M | HPZ_NO_SCRUB);
	itest_register(&r);
	memset(r.addr, 1, r.len);
	before = itest_status();
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	(void)itest_status_faults(&before, 4);
	cr_assert_eq(hpz_list_regions(info, 64, &n), 0, "%s",
	    hpz_last_error());
	for (i = 0; i < n && i < 64; i++) {
		if (info[i].addr != (uintptr_t)r.addr)
			continue;
		found = 1;
		cr_assert_eq(info[i].len, r.len);
		cr_assert_eq(info[i].page_size, 2 * MiB);
		cr_assert_eq(info[i].pid, getpid());
		cr_assert_geq(info[i].pages_cleared + info[i].bg_pages_cleared,
		    4);
		cr_assert_geq(info[i].faults, 4);
	}
	cr_assert(found, "our region is not in the list of %zu", n);
	hpz_region_destroy(&r);
}

Test(engine, status_names_the_clear_kernels)
{
	struct hpz_status	st;
	unsigned long long	total = 0;
	int			i, tries;

	/* Counters settle once no fault is being accounted. */
	for (tries = 0; tries < 100; tries++) {
		st = itest_status();
		for (total = 0, i = 0; i < HPZ_LATENCY_BUCKETS; i++)
			total += st.latency_hist[i];
		if (total == st.faults)
			break;
		usleep(10 * 1000);
	}
	cr_assert_neq(st.clear_kernel[0], '\0');
	cr_assert_neq(st.hot_kernel[0], '\0');
	cr_assert_gt(st.extent_max, 0);
	cr_assert_eq(total, st.faults, "histogram holds %llu of %llu faults",
	    total, st.faults);
}

/* --- hpzctl top and prometheus -------------------------------------------- */

#include <regex.h>

/* Blocks of hpzctl top output, one starting at each "hpzerod " line. */
static int
itest_count_blocks(const char *out)
{
	const char	*p;
	int		 n = 0;

	for (p = out; (p = strstr(p, "hpzerod ")) != NULL; p++)
		if (p == out || p[-1] == '\n')
			n++;
	return (n);
}

Test(hpzctl, top_prints_count_blocks)
{
	static char	out[65536];

	cr_assert_eq(itest_run("top -n 2 -i 0.2", out, sizeof(out)), 0, "%s",
	    out);
	cr_assert_eq(itest_count_blocks(out), 2, "%s", out);
	cr_assert_not_null(strstr(out, "faults/s"), "%s", out);
	cr_assert_not_null(strstr(out, "\n\nhpzerod "), "no blank line between "
	    "blocks: %s", out);
	cr_assert_null(strstr(out, "\033["), "escapes on a pipe: %s", out);
}

Test(hpzctl, stats_watch_is_top)
{
	static char	out[65536];

	cr_assert_eq(itest_run("stats -w 0.1 -n 3", out, sizeof(out)), 0,
	    "%s", out);
	cr_assert_eq(itest_count_blocks(out), 3, "%s", out);
}

Test(hpzctl, prometheus_format)
{
	static char		 out[1 << 20];
	struct hpz_region	 r;
	regex_t			 re;
	char			*line, *save, *v, want[128];
	struct hpz_status	 st;
	unsigned long long	 prev = 0, cur, inf = 0, count = 0, total;
	int			 nbuckets = 0, have_inf = 0, have_count = 0;
	int			 i, b;

	/* A region of ours with some faults, so it has lines of its own. */
	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 1, r.len);
	/* The histogram is updated after the fault is served: wait for it. */
	for (i = 0; i < 200; i++) {
		st = itest_status();
		for (total = 0, b = 0; b < HPZ_LATENCY_BUCKETS; b++)
			total += st.latency_hist[b];
		if (total > 0)
			break;
		usleep(10 * 1000);
	}

	cr_assert_eq(itest_run("prometheus", out, sizeof(out)), 0, "%s", out);
	snprintf(want, sizeof(want), "pid=\"%d\"", (int)getpid());
	cr_assert_not_null(strstr(out, want), "our region is missing: %s",
	    out);
	cr_assert_not_null(strstr(out,
	    "# TYPE hpzerod_fault_latency_seconds histogram\n"), "%s", out);
	cr_assert_not_null(strstr(out, "hpzerod_faults_total{kind=\"minor\"}"),
	    "%s", out);
	cr_assert_not_null(strstr(out, "\nhpzerod_info{version=\"" HPZ_VERSION
	    "\""), "%s", out);
	cr_assert_eq(regcomp(&re, "^[a-z_]+(\\{[^}]*\\})? [0-9.eE+-]+$",
	    REG_EXTENDED | REG_NOSUB), 0);
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#') {
			cr_assert(strncmp(line, "# HELP ", 7) == 0 ||
			    strncmp(line, "# TYPE ", 7) == 0, "%s", line);
			continue;
		}
		cr_assert_eq(regexec(&re, line, 0, NULL, 0), 0,
		    "bad line: '%s'", line);
		v = strrchr(line, ' ') + 1;
		cur = strtoull(v, NULL, 10);
		if (strncmp(line, "hpzerod_fault_latency_seconds_bucket{",
		    37) == 0) {
			cr_assert_geq(cur, prev, "buckets go down at '%s'",
			    line);
			prev = cur;
			nbuckets++;
			if (strstr(line, "le=\"+Inf\"") != NULL) {
				inf = cur;
				have_inf = 1;
			}
		} else if (strncmp(line,
		    "hpzerod_fault_latency_seconds_count ", 36) == 0) {
			count = cur;
			have_count = 1;
		}
	}
	regfree(&re);
	cr_assert(have_inf, "no +Inf bucket");
	cr_assert(have_count, "no _count");
	cr_assert_gt(nbuckets, 2);
	cr_assert_eq(inf, count, "+Inf bucket %llu, _count %llu", inf, count);
	cr_assert_gt(count, 0, "the faults above are not counted");
	hpz_region_destroy(&r);
}

Test(hpzctl, prometheus_to_file)
{
	char		 out[4096], big[1 << 16];
	FILE		*f;
	size_t		 n;
	const char	*path = "/tmp/hpzctl-itest.prom";

	unlink(path);
	unlink("/tmp/hpzctl-itest.prom.tmp");
	cr_assert_eq(itest_run("prometheus -o /tmp/hpzctl-itest.prom", out,
	    sizeof(out)), 0, "%s", out);
	cr_assert_eq(out[0], '\0', "output on stdout: %s", out);
	cr_assert_eq(access(path, F_OK), 0, "%s was not made", path);
	cr_assert_neq(access("/tmp/hpzctl-itest.prom.tmp", F_OK), 0,
	    "the .tmp file was left behind");
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(big, 1, sizeof(big) - 1, f);
	big[n] = '\0';
	fclose(f);
	cr_assert_not_null(strstr(big,
	    "hpzerod_fault_latency_seconds_bucket{le=\"+Inf\"}"), "%s", big);
	unlink(path);
}

Test(hpzctl, new_commands_bad_arguments)
{
	static const char *const bad[] = {
		"top -i abc", "top -i 0", "top -n 0", "top -n -1", "top -x",
		"top extra", "top -i", "stats -w 1 --json", "stats -n 2",
		"stats -w nan", "prometheus extra", "prometheus -o",
		"prometheus -q",
	};
	char		 out[4096];
	size_t		 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(itest_run(bad[i], out, sizeof(out)), 2,
		    "'%s': %s", bad[i], out);
}

Test(hpzctl, top_without_daemon_fails)
{
	char	out[4096];

	cr_assert_eq(itest_run("-s /nonexistent/x.sock top -n 1 -i 0.1", out,
	    sizeof(out)), 1, "%s", out);
	cr_assert_eq(itest_run("-s /nonexistent/x.sock prometheus", out,
	    sizeof(out)), 1, "%s", out);
}
