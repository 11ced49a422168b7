/*
 * hpz-demo.c - the quick-start demo: first touch of huge-page memory served
 * by the kernel, by hpzerod, and by hpzerod after hpz_reset, side by side,
 * with every byte read back and checked for zero.
 *
 * Each run maps SIZE bytes, lets THREADS threads read one byte of every
 * 4 KiB in order (each thread a contiguous share of the pages, as a guest
 * first touching its memory does) and times that from the barrier that
 * starts them to the last join.  Figures are medians over RUNS runs, each
 * beside the kernel's figure from the same run.
 */
#include <errno.h>
#include <math.h>	/* isnan, NAN: macros, no libm */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "hpz.h"
#include "size.h"
#include "clock.h"
#include "uffd-compat.h"
#include "cli.h"

#define DEMO_EXIT_FAIL		CLI_EXIT_FAIL
#define DEMO_EXIT_SKIP		77	/* automake's "skipped" */

#define DEMO_SUBPAGE		4096UL	/* the touch reads one byte of each */
#define DEMO_PATTERN		0xa5	/* what a recycled region held */
#define DEMO_DEFAULT_SIZE	(512UL << 20)
#define DEMO_MAX_THREADS	1024
#define DEMO_MAX_RUNS		1000

/* What one invocation measures. */
struct demo {
	size_t		 size;		/* bytes a run maps */
	size_t		 page;		/* backing page size */
	unsigned int	 pageflag;	/* HPZ_PAGE_* for hpz_region_create */
	const char	*pagename;	/* for messages */
	int		 threads;
	int		 runs;
	const char	*socket;	/* where libhpz looks, for messages */
	unsigned long long verified;	/* bytes read back zero so far */
};

/* One touching thread: its share of the mapping. */
struct demo_thread {
	pthread_t		 tid;
	pthread_barrier_t	*barrier;
	const unsigned char	*base;
	size_t			 len;
	uint64_t		 start, end;	/* its own clock */
	unsigned long		 sink;	/* keeps the reads from vanishing */
};

/* A page size -p names. */
struct demo_page {
	const char	*name;		/* on the command line */
	size_t		 size;
	unsigned int	 flag;		/* HPZ_PAGE_* */
	const char	*human;		/* for messages */
};

static const struct demo_page demo_pages[] = {
	{ "2m",		2UL << 20,	HPZ_PAGE_2M,	"2 MiB" },
	{ "1g",		1UL << 30,	HPZ_PAGE_1G,	"1 GiB" },
	{ "shmem",	DEMO_SUBPAGE,	HPZ_PAGE_SHMEM,	"4 KiB shmem" },
};
#define DEMO_NPAGES	(sizeof demo_pages / sizeof demo_pages[0])

/* The rows of the summary. */
enum {
	DEMO_KERNEL,
	DEMO_FRESH,
	DEMO_RECYCLED,
	DEMO_POOL,
	DEMO_NROWS
};

static const char *const demo_rows[DEMO_NROWS] = {
	"kernel first touch",
	"hpzerod fresh",
	"hpzerod recycled (after hpz_reset)",
	"hpzerod pool (pre-zeroed file)",
};

#define DEMO_POOL_WAIT_MS	1000	/* for the pool to hold the region */

/* Where the read bytes end up, so the compiler must do the reads. */
static unsigned long	demo_sink;

static void	demo_usage(FILE *);
#define demo_usage_error(...)	cli_usage_error(demo_usage, __VA_ARGS__)
static void	demo_set_page(struct demo *, const struct demo_page *);
static int	demo_pool(const struct demo *);
static void	*demo_thread_main(void *);
static double	demo_touch(const struct demo *, void *, size_t);
static double	demo_gbs(size_t, double);
static const char *demo_fmt_gbs(double, double, char *, size_t);
static int	demo_verify(struct demo *, const void *, const char *, int);
static void	*demo_kernel_map(const struct demo *, size_t);
static int	demo_kernel_run(const struct demo *, size_t, double *);
static void	demo_hpz_error(const struct demo *, const char *, int);
static int	demo_hpz_run(struct demo *, int, double *, double *,
		    double *);
static void	demo_summary(const struct demo *, double *[DEMO_NROWS]);

/* How to call us; on stdout for -h, on stderr after a mistake. */
static void
demo_usage(FILE *f)
{
	fprintf(f,
	    "usage: hpz-demo [-h] [-s socket] [-S size] [-t threads]\n"
	    "                [-p 2m|1g|shmem] [-r runs]\n"
	    "  -s socket   hpzerod's socket (default $HPZ_SOCKET,\n"
	    "              then %s)\n"
	    "  -S size     bytes to map per run, with K, M, G or T"
	    " (default 512M, 1G for -p 1g)\n"
	    "  -t threads  threads touching the memory (default 2)\n"
	    "  -p page     2m, 1g (hugetlb) or shmem (default 2m)\n"
	    "  -r runs     runs to take the median of (default 3)\n"
	    "exit status: 0 all zero, 1 failure, 2 usage,"
	    " 77 not enough huge pages (skipped)\n", HPZ_SOCKET_DEFAULT);
}

/* Serve the demo from pages of pg's size. */
static void
demo_set_page(struct demo *d, const struct demo_page *pg)
{
	d->page = pg->size;
	d->pageflag = pg->flag;
	d->pagename = pg->human;
}

/* Room in the hugetlb pool for hpzerod's region and the kernel's? */
static int
demo_pool(const struct demo *d)
{
	char			 path[128], line[64];
	static const char *const names[2] = {
		"free_hugepages", "resv_hugepages"
	};
	unsigned long long	 v[2], need, avail;
	FILE			*f;
	int			 i;

	if (d->pageflag == HPZ_PAGE_SHMEM)
		return (0);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path,
		    "/sys/kernel/mm/hugepages/hugepages-%zukB/%s",
		    d->page / 1024, names[i]);
		if ((f = fopen(path, "r")) == NULL) {
			printf("hpz-demo: skipped: no %s huge pages here"
			    " (%s: %s)\n", d->pagename, path, strerror(errno));
			return (DEMO_EXIT_SKIP);
		}
		if (fgets(line, sizeof line, f) == NULL ||
		    sscanf(line, "%llu", &v[i]) != 1) {
			fclose(f);
			fprintf(stderr, "hpz-demo: cannot read %s\n", path);
			return (DEMO_EXIT_FAIL);
		}
		fclose(f);
	}
	/* Reserved pages are counted free but already promised. */
	avail = v[0] > v[1] ? v[0] - v[1] : 0;
	need = 2 * (d->size / d->page);
	if (avail < need) {
		printf("hpz-demo: skipped: need %llu free %s huge pages"
		    " (%llu for the hpzerod region, %llu for the kernel"
		    " reference), %llu available\n", need, d->pagename,
		    need / 2, need / 2, avail);
		if (d->pageflag == HPZ_PAGE_2M)
			printf("hpz-demo: reserve them with: echo %llu >"
			    " /proc/sys/vm/nr_hugepages\n", need);
		else
			printf("hpz-demo: reserve them with: echo %llu > %s\n",
			    need, "/sys/kernel/mm/hugepages/"
			    "hugepages-1048576kB/nr_hugepages");
		return (DEMO_EXIT_SKIP);
	}
	return (0);
}

/* Wait for the start, then read one byte of every 4 KiB of our share. */
static void *
demo_thread_main(void *arg)
{
	struct demo_thread		*t = arg;
	const volatile unsigned char	*p = t->base;
	unsigned long			 sum = 0;
	size_t				 off;

	pthread_barrier_wait(t->barrier);
	t->start = clock_now_ns();
	for (off = 0; off < t->len; off += DEMO_SUBPAGE)
		sum += p[off];
	t->end = clock_now_ns();
	t->sink = sum;
	return (NULL);
}

/*
 * Touch [addr, addr + len) with all threads; seconds from the first
 * thread's start to the last one's end, each read on the touching thread:
 * the thread that releases the barrier may run only after the others are
 * done, and a clock read there made a touch look free ("359833 GB/s").
 * Threads are made before the clock starts: creating one takes the mmap
 * lock, which the faults want too.
 */
static double
demo_touch(const struct demo *d, void *addr, size_t len)
{
	struct demo_thread	*t;
	pthread_barrier_t	 barrier;
	size_t			 pages = len / d->page, first, last;
	uint64_t		 t0, t1;
	int			 i;

	t = cli_alloc((size_t)d->threads * sizeof *t);
	cli_barrier_init(&barrier, (unsigned int)d->threads + 1);
	for (i = 0; i < d->threads; i++) {
		first = pages * (size_t)i / (size_t)d->threads;
		last = pages * (size_t)(i + 1) / (size_t)d->threads;
		t[i].barrier = &barrier;
		t[i].base = (const unsigned char *)addr + first * d->page;
		t[i].len = (last - first) * d->page;
		cli_thread_start(&t[i].tid, demo_thread_main, &t[i], i);
	}

	pthread_barrier_wait(&barrier);
	for (i = 0; i < d->threads; i++)
		pthread_join(t[i].tid, NULL);
	t0 = t[0].start;
	t1 = t[0].end;
	for (i = 1; i < d->threads; i++) {
		t0 = t[i].start < t0 ? t[i].start : t0;
		t1 = t[i].end > t1 ? t[i].end : t1;
	}

	for (i = 0; i < d->threads; i++)
		demo_sink += t[i].sink;
	pthread_barrier_destroy(&barrier);
	free(t);
	return ((double)(t1 - t0) / 1e9);
}

/*
 * GB/s of a touch of len bytes in s seconds; INFINITY when it took less
 * than twice what the clock can tell (clock_resolution_ns): such a figure
 * is the timer's, not the memory's, and is printed as such.
 */
static double
demo_gbs(size_t len, double s)
{
	if (s * 1e9 < 2.0 * (double)clock_resolution_ns())
		return (INFINITY);
	return ((double)len / s / 1e9);
}

/*
 * A GB/s figure beside the kernel's k for a line of text: "12.34 GB/s
 * (1.23x)", or that the clock could not time it.
 */
static const char *
demo_fmt_gbs(double v, double k, char *buf, size_t len)
{
	if (isinf(v))
		snprintf(buf, len, "below the clock's resolution");
	else if (k > 0 && isfinite(k))
		snprintf(buf, len, "%.2f GB/s (%.2fx)", v, v / k);
	else
		snprintf(buf, len, "%.2f GB/s", v);
	return (buf);
}

/* Every byte of the region must read zero: say where one is not. */
static int
demo_verify(struct demo *d, const void *addr, const char *what, int run)
{
	size_t		 bad, first;
	unsigned int	 firstval;

	if ((bad = cli_nonzero(addr, d->size, &first, &firstval)) != 0) {
		fprintf(stderr, "hpz-demo: %s, run %d: %zu of %zu bytes are not"
		    " zero; the first at offset %zu (0x%zx) reads 0x%02x\n",
		    what, run, bad, d->size, first, first, firstval);
		fprintf(stderr, "hpz-demo: verified: %llu bytes read back"
		    " zero before this, %zu mismatches\n", d->verified, bad);
		return (-1);
	}
	d->verified += d->size;
	return (0);
}

/*
 * The kernel's reference mapping, served by its own first-touch faults:
 * a shared memfd of our pages, what a VMM maps without hpzerod.
 */
static void *
demo_kernel_map(const struct demo *d, size_t len)
{
	if (d->pageflag == HPZ_PAGE_SHMEM)
		return (cli_kernel_map(len, 0));
	return (cli_kernel_map(len, d->pageflag == HPZ_PAGE_1G ?
	    MFD_HUGE_1GB : MFD_HUGE_2MB));
}

/* One kernel first-touch run of len bytes; GB/s in *gbs. */
static int
demo_kernel_run(const struct demo *d, size_t len, double *gbs)
{
	void	*p;
	double	 s;

	if ((p = demo_kernel_map(d, len)) == NULL) {
		if (errno == ENOMEM) {
			printf("hpz-demo: skipped: the %s huge page pool ran"
			    " out (used by someone else?)\n", d->pagename);
			return (DEMO_EXIT_SKIP);
		}
		fprintf(stderr, "hpz-demo: mmap of the kernel reference: %s\n",
		    strerror(errno));
		return (DEMO_EXIT_FAIL);
	}
	s = demo_touch(d, p, len);
	if (munmap(p, len) == -1) {
		fprintf(stderr, "hpz-demo: munmap: %s\n", strerror(errno));
		return (DEMO_EXIT_FAIL);
	}
	*gbs = demo_gbs(len, s);
	return (0);
}

/*
 * A libhpz call failed: say why, in the daemon's words when it has some.
 * ENOENT means "no socket" only from a call that connects first.
 */
static void
demo_hpz_error(const struct demo *d, const char *call, int err)
{
	const char	*why = hpz_last_error();
	int		 e = err < 0 ? -err : err;

	if (e == ECONNREFUSED || (e == ENOENT &&
	    (strcmp(call, "hpz_status") == 0 ||
	    strcmp(call, "hpz_register") == 0))) {
		fprintf(stderr, "hpz-demo: hpzerod is not running at %s (%s);"
		    " start it with: hpzerod --socket %s\n", d->socket,
		    strerror(e), d->socket);
		return;
	}
	if (why != NULL && *why != '\0')
		fprintf(stderr, "hpz-demo: %s: %s: %s\n", call,
		    hpz_strerror(err), why);
	else
		fprintf(stderr, "hpz-demo: %s: %s\n", call, hpz_strerror(err));
}

/*
 * One hpzerod run: a fresh region touched, verified, filled with a
 * pattern, hpz_reset, touched and verified again.  Only touches are timed.
 */
static int
demo_hpz_run(struct demo *d, int run, double *fresh, double *recycled,
    double *reset_ms)
{
	struct hpz_region	 reg;
	uint64_t		 t0, t1;
	double			 s;
	int			 error, rc = DEMO_EXIT_FAIL;
	int			 created = 0, registered = 0;

	memset(&reg, 0, sizeof reg);
	/* Fresh memory: a memfd of our own, not a file of the pool. */
	if ((error = hpz_region_create(&reg, d->size, d->pageflag |
	    HPZ_NO_POOL)) != 0) {
		if (error == -ENOMEM || error == ENOMEM) {
			printf("hpz-demo: skipped: no room for a %s region in"
			    " the %s huge page pool\n", "hpzerod",
			    d->pagename);
			rc = DEMO_EXIT_SKIP;
		} else
			demo_hpz_error(d, "hpz_region_create", error);
		goto out;
	}
	created = 1;
	if ((error = hpz_register(&reg)) != 0) {
		demo_hpz_error(d, "hpz_register", error);
		goto out;
	}
	registered = 1;

	s = demo_touch(d, reg.addr, d->size);
	*fresh = demo_gbs(d->size, s);
	if (demo_verify(d, reg.addr, "hpzerod fresh", run) != 0)
		goto out;

	memset(reg.addr, DEMO_PATTERN, d->size);
	t0 = clock_now_ns();
	error = hpz_reset(&reg);
	t1 = clock_now_ns();
	if (error != 0) {
		demo_hpz_error(d, "hpz_reset", error);
		goto out;
	}
	*reset_ms = (double)(t1 - t0) / 1e6;

	s = demo_touch(d, reg.addr, d->size);
	*recycled = demo_gbs(d->size, s);
	if (demo_verify(d, reg.addr, "hpzerod recycled", run) != 0)
		goto out;
	rc = 0;
out:
	if (registered && (error = hpz_unregister(&reg)) != 0) {
		demo_hpz_error(d, "hpz_unregister", error);
		rc = DEMO_EXIT_FAIL;
	}
	if (created)
		hpz_region_destroy(&reg);
	return (rc);
}

/* Pool pages of our page size ready, and handed out so far; -1: none. */
static int
demo_pool_level(const struct demo *d, unsigned long long *ready,
    unsigned long long *handed)
{
	struct hpz_pool_info	 info[64];
	size_t			 n, i;
	int			 found = 0;

	*ready = *handed = 0;
	if (hpz_pool_status(info, 64, &n) != 0)
		return (-1);
	for (i = 0; i < n && i < 64; i++) {
		if (info[i].page_size != d->page || !info[i].enabled)
			continue;
		*ready += info[i].ready_pages;
		*handed += info[i].handout_pages;
		found = 1;
	}
	return (found ? 0 : -1);
}

/*
 * The pool's run: once the pool holds the region (a second at most),
 * hpz_region_create takes a file of it, touched unregistered.  *gbs NAN
 * when no pool file came.
 */
static int
demo_pool_run(struct demo *d, int run, double *gbs)
{
	struct hpz_region	 reg;
	unsigned long long	 ready, h0, h1;
	struct timespec		 ts = { 0, 10 * 1000 * 1000 };
	uint64_t		 deadline;
	double			 s;
	int			 error, rc = DEMO_EXIT_FAIL;

	*gbs = NAN;
	deadline = clock_now_ns() + DEMO_POOL_WAIT_MS * 1000000ULL;
	while (demo_pool_level(d, &ready, &h0) == 0 &&
	    ready * d->page < d->size && clock_now_ns() < deadline)
		nanosleep(&ts, NULL);
	if (demo_pool_level(d, &ready, &h0) != 0 || ready == 0)
		return (0);
	memset(&reg, 0, sizeof reg);
	if ((error = hpz_region_create(&reg, d->size, d->pageflag)) != 0) {
		demo_hpz_error(d, "hpz_region_create", error);
		return (DEMO_EXIT_FAIL);
	}
	if (demo_pool_level(d, &ready, &h1) != 0 || h1 == h0) {
		hpz_region_destroy(&reg);
		return (0);
	}
	s = demo_touch(d, reg.addr, d->size);
	*gbs = demo_gbs(d->size, s);
	if (demo_verify(d, reg.addr, "hpzerod pool", run) == 0)
		rc = 0;
	hpz_region_destroy(&reg);
	return (rc);
}

/* The table: each row's median beside the kernel's, and as a ratio. */
static void
demo_summary(const struct demo *d, double *gbs[DEMO_NROWS])
{
	double	 med[DEMO_NROWS], min, max;
	char	 range[48];
	int	 r, i, below;

	printf("\n%-36s %11s %15s %10s\n", "first touch, median of runs",
	    "GB/s", "min - max", "vs kernel");
	for (r = 0; r < DEMO_NROWS; r++) {
		if (r == DEMO_POOL && isnan(gbs[r][0])) {
			printf("%-36s %11s %15s %10s\n", demo_rows[r], "-",
			    "no pool file", "");
			continue;
		}
		/* Runs the clock could not time are left out, and said. */
		for (i = below = 0; i < d->runs; i++)
			below += isinf(gbs[r][i]) != 0;
		cli_stats(gbs[r], d->runs, &med[r], &min, &max);
		if (isnan(med[r])) {
			printf("%-36s %11s %15s %10s\n", demo_rows[r], "-",
			    "below the clock", "");
			continue;
		}
		snprintf(range, sizeof range, "%.2f - %.2f", min, max);
		printf("%-36s %11.2f %15s %9.2fx", demo_rows[r], med[r],
		    range, med[DEMO_KERNEL] > 0 ? med[r] / med[DEMO_KERNEL] :
		    0.0);
		if (below > 0)
			printf(" (%d run%s below the clock's resolution left"
			    " out)", below, below == 1 ? "" : "s");
		printf("\n");
	}
	printf("\nverified: %llu bytes read back zero, 0 mismatches\n",
	    d->verified);
}

int
main(int argc, char **argv)
{
	struct demo		 d;
	struct hpz_status	 before, after;
	double			*gbs[DEMO_NROWS], reset_ms = 0, warm, k;
	char			 sz[32], h[32], fk[40], ff[40], fr[40], fp[40];
	size_t			 p;
	int			 ch, r, i, rc, size_set = 0;
	int			 error;

	cli_prog = "hpz-demo";
	memset(&d, 0, sizeof d);
	d.size = DEMO_DEFAULT_SIZE;
	demo_set_page(&d, &demo_pages[0]);
	d.threads = 2;
	d.runs = 3;

	opterr = 0;	/* our own words, not getopt's */
	while ((ch = getopt(argc, argv, ":hs:S:t:p:r:")) != -1) {
		switch (ch) {
		case 'h':
			demo_usage(stdout);
			return (0);
		case 's':
			cli_socket_option(demo_usage, optarg);
			break;
		case 'S':
			/* The warm-up maps more than the size: far from overflow. */
			d.size = cli_size_arg(demo_usage, ch, optarg,
			    SIZE_MAX / 4);
			size_set = 1;
			break;
		case 't':
			d.threads = cli_int_arg(demo_usage, ch, optarg, 1,
			    DEMO_MAX_THREADS, "threads");
			break;
		case 'p':
			/* 2m and 1g are sizes, in either case; shmem a word. */
			for (p = 0; p < DEMO_NPAGES; p++)
				if ((demo_pages[p].flag == HPZ_PAGE_SHMEM ?
				    strcmp : strcasecmp)(optarg,
				    demo_pages[p].name) == 0)
					break;
			if (p == DEMO_NPAGES)
				demo_usage_error("-p: want 2m, 1g or shmem,"
				    " not '%s'", optarg);
			demo_set_page(&d, &demo_pages[p]);
			break;
		case 'r':
			d.runs = cli_int_arg(demo_usage, ch, optarg, 1,
			    DEMO_MAX_RUNS, "runs");
			break;
		default:
			cli_bad_option(demo_usage, "", ch, argv);
		}
	}
	cli_no_more_args(demo_usage, "", optind, argc, argv);
	if (!size_set && d.size < d.page)
		d.size = d.page;
	if (d.size % d.page != 0)
		demo_usage_error("-S: %s is not a multiple of the %s page",
		    size_format(SIZE_FMT_ROUND, d.size, sz, sizeof sz), d.pagename);
	d.socket = cli_socket();

	printf("hpz-demo %s: %s of %s pages, %d thread%s, %d run%s,"
	    " hpzerod at %s\n", HPZ_VERSION,
	    size_format(SIZE_FMT_ROUND, d.size, sz, sizeof sz), d.pagename, d.threads,
	    d.threads == 1 ? "" : "s", d.runs, d.runs == 1 ? "" : "s",
	    d.socket);

	/* Is the daemon there at all, before we spend time warming up? */
	memset(&before, 0, sizeof before);
	if ((error = hpz_status(&before)) != 0) {
		demo_hpz_error(&d, "hpz_status", error);
		return (DEMO_EXIT_FAIL);
	}
	if ((rc = demo_pool(&d)) != 0)
		return (rc);

	for (r = 0; r < DEMO_NROWS; r++)
		gbs[r] = cli_alloc((size_t)d.runs * sizeof *gbs[r]);

	/*
	 * This VM backs RAM lazily and the very first touch of a page is
	 * very slow: touch all the pages the runs will use once, untimed.
	 */
	printf("warming memory: %s with the kernel (not reported)\n",
	    size_format(SIZE_FMT_ROUND, 2 * d.size, h, sizeof h));
	fflush(stdout);
	if ((rc = demo_kernel_run(&d, 2 * d.size, &warm)) != 0)
		goto out;

	for (i = 0; i < d.runs; i++) {
		if ((rc = demo_kernel_run(&d, d.size,
		    &gbs[DEMO_KERNEL][i])) != 0)
			goto out;
		if ((rc = demo_hpz_run(&d, i + 1, &gbs[DEMO_FRESH][i],
		    &gbs[DEMO_RECYCLED][i], &reset_ms)) != 0)
			goto out;
		if ((rc = demo_pool_run(&d, i + 1, &gbs[DEMO_POOL][i])) != 0)
			goto out;
		/* Every run, or the row says none. */
		if (i > 0 && isnan(gbs[DEMO_POOL][i]) !=
		    isnan(gbs[DEMO_POOL][0]))
			gbs[DEMO_POOL][0] = NAN;
		k = gbs[DEMO_KERNEL][i];
		printf("run %d/%d: kernel %s, hpzerod fresh %s, recycled %s\n",
		    i + 1, d.runs, demo_fmt_gbs(k, NAN, fk, sizeof fk),
		    demo_fmt_gbs(gbs[DEMO_FRESH][i], k, ff, sizeof ff),
		    demo_fmt_gbs(gbs[DEMO_RECYCLED][i], k, fr, sizeof fr));
		if (!isnan(gbs[DEMO_POOL][i]))
			printf("  pool file: %s\n", demo_fmt_gbs(
			    gbs[DEMO_POOL][i], k, fp, sizeof fp));
		if (i == 0)
			printf("  hpz_reset of %s took %.3f ms (not timed"
			    " above)\n", sz, reset_ms);
		fflush(stdout);
	}
	demo_summary(&d, gbs);

	memset(&after, 0, sizeof after);
	if (hpz_status(&after) == 0) {
		printf("hpzerod during the demo: faults %llu (missing %llu,"
		    " minor %llu), pages cleared %llu, resets %llu\n",
		    after.faults - before.faults,
		    after.faults_missing - before.faults_missing,
		    after.faults_minor - before.faults_minor,
		    after.pages_cleared - before.pages_cleared,
		    after.resets - before.resets);
	}
	rc = 0;
out:
	for (r = 0; r < DEMO_NROWS; r++)
		free(gbs[r]);
	return (rc);
}
