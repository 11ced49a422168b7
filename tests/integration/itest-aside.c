/*
 * itest-aside.c - what a client's pages are worth to the daemon: a step
 * aside never costs the client a page it had (issue 19, item 3), and what
 * the daemon allocates in the background on a client's behalf leaves the
 * host's huge page reserve to others and does not refill a shmem client
 * without end (item 6).  Each test runs a daemon of its own: run.sh's runs
 * with --step-aside never and leaves no reserve.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB	(21U << 26)
#endif

#define AS_PAGE		(2 * MiB)
#define AS_PAGES	64
/* Generous liveness bound for the daemon's background work (seconds). */
#define AS_BOUND_S	30

/* A daemon of the test's own. */
struct ad {
	char	dir[64];
	char	sock[128];
	char	conf[128];
	char	log[128];
	pid_t	pid;
};

static pid_t	ad_pid = -1;	/* killed by ad_fini if the test fails */
static pid_t	ad_hog = -1;

static void
ad_fini(void)
{
	if (ad_hog > 0) {
		kill(ad_hog, SIGKILL);
		waitpid(ad_hog, NULL, 0);
		ad_hog = -1;
	}
	if (ad_pid > 0) {
		kill(ad_pid, SIGKILL);
		waitpid(ad_pid, NULL, 0);
		ad_pid = -1;
	}
}

TestSuite(aside, .fini = ad_fini);

static void
ad_start(struct ad *d, const char *conf)
{
	FILE	*f;
	int	 i;

	strcpy(d->dir, "/tmp/hpz-aside.XXXXXX");
	cr_assert_not_null(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/hpzerod.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/hpzerod.log", d->dir);
	cr_assert_not_null(f = fopen(d->conf, "w"));
	fputs(conf, f);
	fclose(f);
	d->pid = itest_fork_dying();
	cr_assert_geq(d->pid, 0);
	if (d->pid == 0) {
		int	fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int	null = open("/dev/null", O_RDWR);

		if (fd >= 0)
			dup2(fd, 2);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execl(itest_daemon_path(), "hpzerod", "--config", d->conf,
		    "--socket", d->sock, "--workers", "2", "--pool", "off",
		    "--step-aside", "always", "--debug", (char *)NULL);
		_exit(121);
	}
	ad_pid = d->pid;
	for (i = 0; i < 3000 * itest_wait_scale() &&
	    access(d->sock, F_OK) != 0; i++)
		usleep(10 * 1000);
	cr_assert_eq(access(d->sock, F_OK), 0, "hpzerod did not come up");
	setenv("HPZ_SOCKET", d->sock, 1);
}

/* The daemon still the same process, then a clean stop. */
static void
ad_stop(struct ad *d)
{
	int	status;

	cr_assert_eq(waitpid(d->pid, &status, WNOHANG), 0,
	    "hpzerod died during the test (status 0x%x)", status);
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
	ad_pid = -1;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "hpzerod exit status 0x%x", status);
	unlink(d->sock);
	unlink(d->conf);
	unlink(d->log);
	rmdir(d->dir);
}

/* free_hugepages less resv_hugepages of 2 MiB pages. */
static long
ad_avail(void)
{
	const char	*name[2] = { "free_hugepages", "resv_hugepages" };
	char		 path[128];
	FILE		*f;
	long		 v[2] = { -1, -1 };
	int		 i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/"
		    "hugepages-2048kB/%s", name[i]);
		if ((f = fopen(path, "r")) == NULL)
			return (-1);
		if (fscanf(f, "%ld", &v[i]) != 1)
			v[i] = -1;
		fclose(f);
	}
	return (v[0] < 0 || v[1] < 0 ? -1 : v[0] - v[1]);
}

/* A client's memfd of its own, mapped (flags: MAP_NORESERVE or 0). */
static void
ad_region(struct hpz_region *r, size_t len, int huge, int mflags,
    unsigned int rflags)
{
	memset(r, 0, sizeof(*r));
	r->fd = memfd_create("hpz-aside", MFD_CLOEXEC | (huge ?
	    MFD_HUGETLB | MFD_HUGE_2MB : 0));
	cr_assert_geq(r->fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(r->fd, (off_t)len), 0);
	r->addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | mflags,
	    r->fd, 0);
	cr_assert_neq(r->addr, MAP_FAILED, "mmap: %s", strerror(errno));
	r->len = len;
	r->flags = rflags;
	itest_register(r);
}

static void
ad_region_free(struct hpz_region *r)
{
	cr_assert_eq(hpz_unregister(r), 0, "hpz_unregister: %s",
	    hpz_last_error());
	munmap(r->addr, r->len);
	close(r->fd);
}

/*
 * Another program: maps every free huge page it can (MAP_POPULATE), says
 * how many on the pipe, and holds them until killed.
 */
static long
ad_hog_start(void)
{
	long	got = 0;
	int	p[2];

	cr_assert_eq(pipe(p), 0);
	ad_hog = fork();
	cr_assert_geq(ad_hog, 0);
	if (ad_hog == 0) {
		long	n;

		close(p[0]);
		for (;;) {
			n = ad_avail();
			if (n <= 0)
				break;
			if (mmap(NULL, (size_t)n * AS_PAGE, PROT_READ |
			    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
			    MAP_HUGETLB | MAP_POPULATE, -1, 0) == MAP_FAILED) {
				/* Someone took some meanwhile: one at a time. */
				if (mmap(NULL, AS_PAGE, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
				    MAP_POPULATE, -1, 0) == MAP_FAILED)
					break;
				n = 1;
			}
			got += n;
		}
		if (write(p[1], &got, sizeof(got)) != sizeof(got))
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	cr_assert_eq(read(p[0], &got, sizeof(got)), (ssize_t)sizeof(got),
	    "the page hog died");
	close(p[0]);
	return (got);
}

static void
ad_hog_stop(void)
{
	kill(ad_hog, SIGKILL);
	waitpid(ad_hog, NULL, 0);
	ad_hog = -1;
}

/* What the toucher reports: the victim's memory, shared by CLONE_VM. */
struct ad_touch {
	const unsigned char	*p;
	size_t			 len;
	atomic_long		 page;		/* the page it touches now */
	atomic_long		 nonzero;	/* first byte not zero, or -1 */
};

static int
ad_touch_main(void *arg)
{
	struct ad_touch	*t = arg;
	size_t		 i;

	for (i = 0; i < t->len; i++) {
		if (i % AS_PAGE == 0)
			atomic_store(&t->page, (long)(i / AS_PAGE));
		if (t->p[i] != 0) {
			atomic_store(&t->nonzero, (long)i);
			return (2);
		}
	}
	return (0);
}

/*
 * Read every byte of [p, p+len) in a process of its own sharing our
 * address space (a signal kills it, not the test): its wait status.
 */
static int
ad_touch(struct ad_touch *t, const void *p, size_t len)
{
	size_t		 stack = 256 * 1024;
	char		*st;
	pid_t		 pid;
	int		 status = 0, i;

	t->p = p;
	t->len = len;
	atomic_store(&t->page, -1);
	atomic_store(&t->nonzero, -1);
	st = mmap(NULL, stack, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(st, MAP_FAILED);
	pid = clone(ad_touch_main, st + stack, CLONE_VM | SIGCHLD, t);
	cr_assert_geq(pid, 0, "clone: %s", strerror(errno));
	for (i = 0; i < AS_BOUND_S * 100 * itest_wait_scale(); i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(10 * 1000);
	}
	if (i == AS_BOUND_S * 100 * itest_wait_scale()) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		cr_assert_fail("the toucher is stuck at page %ld after %d s",
		    atomic_load(&t->page), AS_BOUND_S);
	}
	munmap(st, stack);
	return (status);
}

/*
 * Item 3: the victim writes 64 x 2 MiB of its own memfd, resets it and
 * touches one page under --step-aside always; then another program maps
 * every free huge page.  The victim's next touches must never get SIGBUS
 * and must read zero: no punch may have given its pages away.
 */
Test(aside, aside_keeps_the_clients_pages, .timeout = 180)
{
	struct hpz_region	r;
	struct ad_touch		t;
	struct ad		d;
	size_t			first;
	long			hog;
	int			status;

	itest_need_pages(2048, AS_PAGES + 8);
	ad_start(&d, "[background]\nscrub = off\n");
	ad_region(&r, AS_PAGES * AS_PAGE, 1, 0, HPZ_NO_SCRUB);
	memset(r.addr, 0xa5, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "hpz_reset: %s", hpz_last_error());
	/* One touch: the garbage fault where the daemon may step aside. */
	cr_assert_eq(itest_count_nonzero(r.addr, AS_PAGE, &first), 0,
	    "the first page reads non-zero at byte %zu", first);
	hog = ad_hog_start();
	cr_log_info("the other program holds %ld free huge pages", hog);
	status = ad_touch(&t, r.addr, r.len);
	ad_hog_stop();
	cr_assert_not(WIFSIGNALED(status),
	    "the victim got %s touching page %ld of %d of its own region "
	    "(the other program took %ld free pages)",
	    strsignal(WTERMSIG(status)), atomic_load(&t.page), AS_PAGES, hog);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the victim's region reads non-zero at byte %ld (status 0x%x)",
	    atomic_load(&t.nonzero), status);
	ad_region_free(&r);
	ad_stop(&d);
}

/*
 * Item 6: with a reserve set, a sparse HPZ_AHEAD_EAGER region on a
 * MAP_NORESERVE mapping (its holes reserve nothing) is populated only down
 * to the reserve: the host's free, unreserved pages never fall below it.
 */
Test(aside, eager_leaves_the_reserve, .timeout = 180)
{
	struct hpz_status	st0, st;
	struct hpz_region	r;
	struct ad		d;
	char			conf[256];
	long			avail, reserve, low, a;
	int			i;

	itest_need_pages(2048, 24);
	avail = ad_avail();
	cr_assert_geq(avail, 24);
	/* Eight pages above the reserve: the region wants 64. */
	reserve = avail - 8;
	snprintf(conf, sizeof(conf), "[pool]\nreserve_2m = %ldM\n",
	    reserve * 2);
	ad_start(&d, conf);
	st = st0 = itest_status();
	low = ad_avail();
	ad_region(&r, AS_PAGES * AS_PAGE, 1, MAP_NORESERVE, HPZ_AHEAD_EAGER);
	/* Until every page was populated or left (a liveness bound). */
	for (i = 0; i < AS_BOUND_S * 100 * itest_wait_scale(); i++) {
		if ((a = ad_avail()) < low)
			low = a;
		st = itest_status();
		if (st.bg_pages_populated + st.bg_pages_spared -
		    st0.bg_pages_populated - st0.bg_pages_spared >= AS_PAGES)
			break;
		usleep(10 * 1000);
	}
	if ((a = ad_avail()) < low)
		low = a;
	cr_log_info("eager: %llu pages populated, %llu left; host free %ld, "
	    "reserve %ld, lowest %ld", (unsigned long long)
	    (st.bg_pages_populated - st0.bg_pages_populated),
	    (unsigned long long)(st.bg_pages_spared - st0.bg_pages_spared),
	    a, reserve, low);
	cr_assert_geq(low, reserve, "the daemon's eager population took the "
	    "host to %ld free, unreserved 2 MiB pages, below the reserve of "
	    "%ld (%llu pages populated)", low, reserve,
	    (unsigned long long)(st.bg_pages_populated -
	    st0.bg_pages_populated));
	cr_assert_gt(st.bg_pages_populated - st0.bg_pages_populated, 0,
	    "nothing populated above the reserve");
	/* The client's own touches still get their pages. */
	memset(r.addr, 1, AS_PAGE);
	ad_region_free(&r);
	ad_stop(&d);
}

/* Pages the file holds: st_blocks is in 512-byte units. */
static uint64_t
ad_file_pages(int fd)
{
	struct stat	sb;

	cr_assert_eq(fstat(fd, &sb), 0);
	return ((uint64_t)sb.st_blocks * 512 / 4096);
}

/*
 * Item 6: a shmem region registered HPZ_DISCARD, written, reset and
 * punched again and again.  The scrub, let loose on its garbage after each
 * punch, must not fill the holes (they read zero) in the daemon's memory:
 * its refills are bounded (none for a clear, hpzerod.conf(5)).
 */
Test(aside, shmem_punched_is_not_refilled, .timeout = 180)
{
	struct hpz_status	st0, st;
	struct hpz_region	r;
	struct ad		d;
	uint64_t		npages = 16 * MiB / 4096, held;
	int			round, i;

	ad_start(&d, "");
	memset(&r, 0, sizeof(r));
	r.fd = memfd_create("hpz-aside", MFD_CLOEXEC);
	cr_assert_geq(r.fd, 0);
	r.len = npages * 4096;
	cr_assert_eq(ftruncate(r.fd, (off_t)r.len), 0);
	r.addr = mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd,
	    0);
	cr_assert_neq(r.addr, MAP_FAILED);
	memset(r.addr, 0x5a, r.len);
	r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
	itest_register(&r);
	for (round = 0; round < 3; round++) {
		if (round > 0) {
			cr_assert_eq(hpz_set_policy(&r, HPZ_NO_SCRUB, 0), 0);
			memset(r.addr, 0x5a, r.len);
			cr_assert_eq(hpz_reset(&r), 0, "hpz_reset: %s",
			    hpz_last_error());
		}
		/* The client's own punch: every garbage page a hole. */
		cr_assert_eq(fallocate(r.fd, FALLOC_FL_PUNCH_HOLE |
		    FALLOC_FL_KEEP_SIZE, 0, (off_t)r.len), 0);
		cr_assert_eq(ad_file_pages(r.fd), 0);
		st = st0 = itest_status();
		/* Now the scrub: it goes over every page of the region. */
		cr_assert_eq(hpz_set_policy(&r, 0, 0), 0);
		for (i = 0; i < AS_BOUND_S * 100 * itest_wait_scale(); i++) {
			held = ad_file_pages(r.fd);
			cr_assert_eq(held, 0, "round %d: the scrub refilled %llu "
			    "of the %llu pages the client punched, in the "
			    "daemon's memory", round,
			    (unsigned long long)held,
			    (unsigned long long)npages);
			st = itest_status();
			if (st.bg_pages_spared - st0.bg_pages_spared >= npages)
				break;
			usleep(10 * 1000);
		}
		cr_assert_geq(st.bg_pages_spared - st0.bg_pages_spared, npages,
		    "round %d: the scrub went over %llu of %llu pages in "
		    "%d s", round, (unsigned long long)(st.bg_pages_spared -
		    st0.bg_pages_spared), (unsigned long long)npages,
		    AS_BOUND_S);
		cr_assert_eq(ad_file_pages(r.fd), 0);
	}
	/* Every byte reads zero, from the client's own faults. */
	itest_assert_zero(&r, "after the rounds");
	ad_region_free(&r);
	ad_stop(&d);
}
