/*
 * hpz-bench.c - benchmark hpzerod against the kernel's own first touch.
 *
 * A case is a page size (2 MiB, 1 GiB), a mode ("recycled": a registered
 * region written with a pattern, then hpz_reset; "fresh": a region just
 * registered) and a number of touching threads.  Each run of a case first
 * times the kernel on anonymous MAP_HUGETLB memory of the same size, then
 * hpzerod, so every hpzerod figure has a kernel figure from the same run
 * beside it; the table shows the median and min-max over the runs.
 *
 * A touch: each thread takes a contiguous share of the region; for each
 * huge page of its share it times the first access (in the middle of the
 * page: that access is the fault), then the read of the 64 cache lines of
 * the subpage that faulted, then reads one byte of every 4 KiB.  Every
 * byte hpzerod served is read back and must be zero.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <math.h>	/* isnan, isfinite, NAN: macros, no libm */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/utsname.h>

#include <json.h>

#include "hpz.h"
#include "hpzerod.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT		26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB		(21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB		(30 << MAP_HUGE_SHIFT)
#endif

#define BENCH_EXIT_FAIL		1
#define BENCH_EXIT_USAGE	2

#define BENCH_SUBPAGE		4096UL
#define BENCH_LINE		64UL
#define BENCH_SKEW		1234UL	/* the fault: this far past mid-page */
#define BENCH_PATTERN		0xa5	/* what a recycled region held */
#define BENCH_RUNS		5
#define BENCH_MAX_RUNS		1000
#define BENCH_MAX_THREADS	256
#define BENCH_MAX_LIST		16
#define BENCH_NT_BYTES		(256UL << 20)
#define BENCH_NT_PASSES		7
#define BENCH_POOL_WAIT_MS	2000	/* for pages the last run gave back */

/* A page size the benchmark knows. */
struct bench_page {
	const char	*name;		/* "2m", on the command line */
	const char	*human;		/* "2 MiB" */
	size_t		 size;
	unsigned int	 hpzflag;	/* for hpz_region_create */
	int		 mapflag;	/* for the kernel's mmap */
	const char	*unit;		/* fault latencies are printed in */
	double		 unit_us;	/* microseconds per unit */
};

static const struct bench_page bench_pages[] = {
	{ "2m", "2 MiB", 2UL << 20, HPZ_PAGE_2M, MAP_HUGE_2MB, "us", 1.0 },
	{ "1g", "1 GiB", 1UL << 30, HPZ_PAGE_1G, MAP_HUGE_1GB, "ms", 1000.0 },
};
#define BENCH_NPAGES	(sizeof bench_pages / sizeof bench_pages[0])

static const char *const bench_modes[] = { "recycled", "fresh" };
#define BENCH_NMODES	(sizeof bench_modes / sizeof bench_modes[0])

/* The figures of one touch; latencies in microseconds, reads in ns. */
enum {
	FIG_GBS,
	FIG_FAULT_P50,
	FIG_FAULT_P99,
	FIG_FAULT_MAX,
	FIG_READ_P50,
	FIG_READ_P99,
	BENCH_NFIGS
};

static const struct {
	const char	*json;
	const char	*label;
	int		 fault;		/* printed in the page's fault unit */
	int		 multi;		/* only with more than one sample */
} bench_figs[BENCH_NFIGS] = {
	{ "touch_gbs",			"touch GB/s",		0, 0 },
	{ "fault_p50_us",		"fault p50",		1, 0 },
	{ "fault_p99_us",		"fault p99",		1, 1 },
	{ "fault_max_us",		"fault max",		1, 1 },
	{ "read_after_fault_p50_ns",	"read-after-fault p50",	0, 0 },
	{ "read_after_fault_p99_ns",	"read-after-fault p99",	0, 1 },
};

enum {
	SIDE_KERNEL,
	SIDE_HPZ,
	SIDE_RATIO,		/* hpzerod / kernel of the same run */
	BENCH_NSIDES
};
static const char *const bench_sides[BENCH_NSIDES] = {
	"kernel", "hpzerod", "ratio"
};

/* One case and what its runs measured. */
struct bench_case {
	const struct bench_page	*page;
	int			 mode;		/* index in bench_modes */
	int			 threads;
	size_t			 size;
	size_t			 samples;	/* faults timed a run */
	int			 skipped;
	char			 why[192];
	int			 done;		/* runs completed */
	double			*fig[BENCH_NFIGS][BENCH_NSIDES];
	double			*reset_ms;
	struct hpz_status	 before, after;
};

/* The command line, and what the whole invocation found. */
struct bench {
	const char		*socket;
	size_t			 size;
	int			 size_set;
	int			 runs;
	int			 threads[BENCH_MAX_LIST];
	int			 nthreads;
	const struct bench_page	*pages[BENCH_NPAGES];
	int			 npages;
	int			 modes[BENCH_NMODES];
	int			 nmodes;
	int			 json;
	unsigned long long	 verified;	/* bytes read back zero */
	int			 warmed[BENCH_NPAGES];
	struct bench_case	*cases;
	int			 ncases;
	struct hpz_status	 status;	/* at start */
	int			 nt_ok;		/* bulk kernel measured */
	char			 nt_why[256];
	int			 nt_bulk;	/* clear_bulk_kernel's kind */
	int			 nt_have[CLEAR_NKINDS];
	double			 nt[CLEAR_NKINDS][BENCH_NT_PASSES];
	double			 clock_ns;	/* one clock_gettime call */
};

/* One touching thread and its share [lo, hi) of the region. */
struct bench_thread {
	pthread_t		 tid;
	pthread_barrier_t	*barrier;
	unsigned char		*base;
	size_t			 lo, hi, page;
	double			*fault_ns;	/* per huge page of the share */
	double			*read_ns;
	unsigned long		 sink;
};

/* Where read bytes end up, so the compiler must do the reads. */
static unsigned long	bench_sink;

static void	bench_usage(FILE *);
static void	bench_usage_error(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	bench_progress(const struct bench_case *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	*bench_alloc(size_t);
static uint64_t	bench_now(void);
static const char *bench_human(size_t, char *, size_t);
static int	bench_parse_size(const char *, size_t *);
static int	bench_parse_lists(struct bench *, int, const char *);
static int	bench_pool(const struct bench_page *, unsigned long long *);
static void	bench_share(size_t, size_t, int, int, size_t *, size_t *);
static size_t	bench_pieces(size_t, size_t, size_t);
static void	*bench_thread_main(void *);
static double	bench_touch(void *, size_t, size_t, int, double *, double *);
static int	bench_cmp(const void *, const void *);
static double	bench_pct(double *, size_t, double);
static void	bench_stats(const double *, int, double *, double *, double *);
static void	bench_figures(double, size_t, double *, double *, size_t,
		    double *);
static void	*bench_kernel_map(const struct bench_page *, size_t);
static int	bench_verify(struct bench *, const struct bench_case *,
		    const unsigned char *, int);
static void	bench_hpz_error(const struct bench *, const char *, int);
static int	bench_skip(struct bench_case *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static int	bench_wait_pool(struct bench_case *, unsigned long long);
static int	bench_kernel_run(struct bench_case *, int, double *,
		    double *);
static int	bench_hpz_run(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_warm(struct bench *, struct bench_case *);
static int	bench_case_run(struct bench *, struct bench_case *);
static double	bench_clear_pass(const struct clear_kernel *,
		    unsigned char *);
static void	bench_nt(struct bench *);
static double	bench_clock(void);
static void	bench_fmt(double, char *, size_t);
static void	bench_cell(const double *, int, int, double, char *, size_t);
static void	bench_print_case(const struct bench_case *);
static void	bench_print(const struct bench *);
static double	bench_nt_ratio(const struct bench *, double *, double *);
static void	bench_cpu(char *, size_t);
static int	bench_json(const struct bench *);

/* How to call us; on stdout for -h, on stderr after a mistake. */
static void
bench_usage(FILE *f)
{
	fprintf(f,
	    "usage: hpz-bench [-h] [--json] [-s socket] [-S size] [-r runs]\n"
	    "                 [-t threads,...] [-p 2m,1g] [-m recycled,fresh]\n"
	    "  -s socket   hpzerod's socket (default $HPZ_SOCKET,\n"
	    "              then %s)\n"
	    "  -S size     region size with K, M, G or T (default 1G; for 1g\n"
	    "              pages rounded up to whole pages)\n"
	    "  -r runs     runs a case (default %d)\n"
	    "  -t list     touching threads (default 1,2)\n"
	    "  -p list     page sizes (default 2m,1g)\n"
	    "  -m list     modes (default recycled,fresh)\n"
	    "  --json      one JSON object on stdout instead of the table\n"
	    "exit status: 0 done (cases may be skipped), 1 failure or a"
	    " non-zero byte, 2 usage\n", HPZ_SOCKET_DEFAULT, BENCH_RUNS);
}

/* A bad command line: say what is wrong, show the usage, exit 2. */
static void
bench_usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("hpz-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	bench_usage(stderr);
	exit(BENCH_EXIT_USAGE);
}

/* A progress line on stderr, so that stdout holds only the results. */
static void
bench_progress(const struct bench_case *c, const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "case %s %s t=%d: ", c->page->name,
	    bench_modes[c->mode], c->threads);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Zeroed memory, or exit: nothing useful is left to do without it. */
static void *
bench_alloc(size_t len)
{
	void	*p;

	if ((p = calloc(1, len == 0 ? 1 : len)) == NULL) {
		fprintf(stderr, "hpz-bench: out of memory\n");
		exit(BENCH_EXIT_FAIL);
	}
	return (p);
}

/* Monotonic nanoseconds; wall-clock jumps must not enter a figure. */
static uint64_t
bench_now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
}

/* Sizes in the units people pick them in: 1 GiB, 256 MiB. */
static const char *
bench_human(size_t n, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	size_t		 u = 0;

	while (n >= 1024 && n % 1024 == 0 &&
	    u < sizeof units / sizeof units[0] - 1) {
		n /= 1024;
		u++;
	}
	snprintf(buf, len, "%zu %s", n, units[u]);
	return (buf);
}

/* Parse 512M, 1G, 4096; 0 on success, -1 on garbage or overflow. */
static int
bench_parse_size(const char *s, size_t *out)
{
	unsigned long long	 v;
	unsigned int		 shift = 0;
	char			*end;

	if (*s < '0' || *s > '9')
		return (-1);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return (-1);
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	case 't': case 'T':
		shift = 40;
		break;
	default:
		return (-1);
	}
	if (*end != '\0' && end[1] != '\0')
		return (-1);
	/* The warm-up maps twice the size, rounded up to 1 GiB pages. */
	if (v == 0 || v > ((SIZE_MAX / 8) >> shift))
		return (-1);
	*out = (size_t)v << shift;
	return (0);
}

/* -t, -p or -m: a comma-separated list, no empty item, no repeat. */
static int
bench_parse_lists(struct bench *b, int opt, const char *arg)
{
	char		 item[32];
	const char	*s = arg, *comma;
	char		*end;
	size_t		 len, i;
	long		 v;
	int		 n = 0, j;

	do {
		comma = strchr(s, ',');
		len = comma != NULL ? (size_t)(comma - s) : strlen(s);
		if (len == 0 || len >= sizeof item)
			return (-1);
		memcpy(item, s, len);
		item[len] = '\0';
		s += len + (comma != NULL);
		if (n == BENCH_MAX_LIST)
			return (-1);
		switch (opt) {
		case 't':
			errno = 0;
			v = strtol(item, &end, 10);
			if (errno != 0 || *end != '\0' || v < 1 ||
			    v > BENCH_MAX_THREADS)
				return (-1);
			for (j = 0; j < n; j++)
				if (b->threads[j] == (int)v)
					return (-1);
			b->threads[n++] = (int)v;
			break;
		case 'p':
			for (i = 0; i < BENCH_NPAGES; i++)
				if (strcmp(item, bench_pages[i].name) == 0)
					break;
			if (i == BENCH_NPAGES || n == (int)BENCH_NPAGES)
				return (-1);
			for (j = 0; j < n; j++)
				if (b->pages[j] == &bench_pages[i])
					return (-1);
			b->pages[n++] = &bench_pages[i];
			break;
		default:
			for (i = 0; i < BENCH_NMODES; i++)
				if (strcmp(item, bench_modes[i]) == 0)
					break;
			if (i == BENCH_NMODES || n == (int)BENCH_NMODES)
				return (-1);
			for (j = 0; j < n; j++)
				if (b->modes[j] == (int)i)
					return (-1);
			b->modes[n++] = (int)i;
			break;
		}
	} while (comma != NULL);
	if (opt == 't')
		b->nthreads = n;
	else if (opt == 'p')
		b->npages = n;
	else
		b->nmodes = n;
	return (0);
}

/* Free pages of a size nobody has reserved yet; -1 if there is no pool. */
static int
bench_pool(const struct bench_page *pg, unsigned long long *avail)
{
	static const char *const names[2] = {
		"free_hugepages", "resv_hugepages"
	};
	unsigned long long	 v[2];
	char			 path[128];
	FILE			*f;
	int			 i, ok;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path,
		    "/sys/kernel/mm/hugepages/hugepages-%zukB/%s",
		    pg->size / 1024, names[i]);
		if ((f = fopen(path, "r")) == NULL)
			return (-1);
		ok = fscanf(f, "%llu", &v[i]) == 1;
		fclose(f);
		if (!ok)
			return (-1);
	}
	/* Reserved pages are counted free but already promised. */
	*avail = v[0] > v[1] ? v[0] - v[1] : 0;
	return (0);
}

/*
 * Thread i's share of a region: whole huge pages when there are enough to
 * go round, else 4 KiB subpages (two threads on one 1 GiB page both fault
 * on it, as two vCPUs touching it would).
 */
static void
bench_share(size_t size, size_t page, int threads, int i, size_t *lo,
    size_t *hi)
{
	size_t	 unit, n;

	unit = size / page >= (size_t)threads ? page : BENCH_SUBPAGE;
	n = size / unit;
	*lo = n * (size_t)i / (size_t)threads * unit;
	*hi = n * (size_t)(i + 1) / (size_t)threads * unit;
}

/* Huge pages that [lo, hi) reaches into: the faults its thread times. */
static size_t
bench_pieces(size_t lo, size_t hi, size_t page)
{
	if (hi <= lo)
		return (0);
	return ((hi - 1) / page - lo / page + 1);
}

/*
 * Wait for the start, then for each huge page of our share: time the
 * first access (the fault), time reading the 64 lines of the subpage that
 * faulted, then read one byte of every 4 KiB of the page.
 */
static void *
bench_thread_main(void *arg)
{
	struct bench_thread		*t = arg;
	const volatile unsigned char	*b = t->base;
	const volatile uint64_t		*line;
	unsigned long			 sum = 0;
	uint64_t			 t0, t1, t2;
	size_t				 pg, lo, hi, off, fault, k = 0, i;

	pthread_barrier_wait(t->barrier);
	for (pg = t->lo - t->lo % t->page; pg < t->hi; pg += t->page) {
		lo = pg > t->lo ? pg : t->lo;
		hi = pg + t->page < t->hi ? pg + t->page : t->hi;
		/* Mid-page: the faulting subpage is not the page's first. */
		fault = lo + (hi - lo) / 2 + BENCH_SKEW;
		if (fault >= hi)
			fault = lo + (hi - lo) / 2;
		t0 = bench_now();
		sum += b[fault];
		t1 = bench_now();
		line = (const volatile uint64_t *)(const volatile void *)
		    (b + (fault & ~(BENCH_SUBPAGE - 1)));
		for (i = 0; i < BENCH_SUBPAGE / BENCH_LINE; i++)
			sum += line[i * (BENCH_LINE / sizeof *line)];
		t2 = bench_now();
		t->fault_ns[k] = (double)(t1 - t0);
		t->read_ns[k] = (double)(t2 - t1);
		k++;
		for (off = lo; off < hi; off += BENCH_SUBPAGE)
			sum += b[off];
	}
	t->sink = sum;
	return (NULL);
}

/*
 * Touch [addr, addr + size) with all threads; seconds from the barrier
 * that releases them to the last join.  Threads are made before the clock
 * starts: creating one takes the mmap lock, which the faults want too.
 * fault_ns and read_ns get one entry per (thread, huge page) piece.
 */
static double
bench_touch(void *addr, size_t size, size_t page, int threads,
    double *fault_ns, double *read_ns)
{
	struct bench_thread	*t;
	pthread_barrier_t	 barrier;
	uint64_t		 t0, t1;
	size_t			 k = 0;
	char			 name[16];
	int			 i, error;

	t = bench_alloc((size_t)threads * sizeof *t);
	error = pthread_barrier_init(&barrier, NULL,
	    (unsigned int)threads + 1);
	if (error != 0) {
		fprintf(stderr, "hpz-bench: pthread_barrier_init: %s\n",
		    strerror(error));
		exit(BENCH_EXIT_FAIL);
	}
	for (i = 0; i < threads; i++) {
		t[i].barrier = &barrier;
		t[i].base = addr;
		t[i].page = page;
		bench_share(size, page, threads, i, &t[i].lo, &t[i].hi);
		t[i].fault_ns = fault_ns + k;
		t[i].read_ns = read_ns + k;
		k += bench_pieces(t[i].lo, t[i].hi, page);
		error = pthread_create(&t[i].tid, NULL, bench_thread_main,
		    &t[i]);
		if (error != 0) {
			/* The others wait on the barrier forever: leave. */
			fprintf(stderr, "hpz-bench: pthread_create: %s\n",
			    strerror(error));
			exit(BENCH_EXIT_FAIL);
		}
		/* i < BENCH_MAX_THREADS: the modulo only quiets -Wformat. */
		snprintf(name, sizeof name, "hpz-bench-%d", i % 1000);
		pthread_setname_np(t[i].tid, name);
	}

	pthread_barrier_wait(&barrier);
	t0 = bench_now();
	for (i = 0; i < threads; i++)
		pthread_join(t[i].tid, NULL);
	t1 = bench_now();

	for (i = 0; i < threads; i++)
		bench_sink += t[i].sink;
	pthread_barrier_destroy(&barrier);
	free(t);
	return ((double)(t1 - t0) / 1e9);
}

/* qsort order for doubles. */
static int
bench_cmp(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Nearest-rank percentile p (0-1] of v[0..n), which it sorts. */
static double
bench_pct(double *v, size_t n, double p)
{
	size_t	 rank;

	qsort(v, n, sizeof *v, bench_cmp);
	rank = (size_t)(p * (double)n);
	if ((double)rank < p * (double)n)
		rank++;
	if (rank < 1)
		rank = 1;
	return (v[(rank > n ? n : rank) - 1]);
}

/* Median, min and max of n figures; v is left as it is. */
static void
bench_stats(const double *v, int n, double *med, double *min, double *max)
{
	double	*s;

	if (n == 0) {
		*med = *min = *max = NAN;
		return;
	}
	s = bench_alloc((size_t)n * sizeof *s);
	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, bench_cmp);
	*min = s[0];
	*max = s[n - 1];
	*med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
	free(s);
}

/* The figures of one touch, into out[BENCH_NFIGS]. */
static void
bench_figures(double secs, size_t size, double *fault_ns, double *read_ns,
    size_t n, double *out)
{
	out[FIG_GBS] = (double)size / secs / 1e9;
	out[FIG_FAULT_P50] = bench_pct(fault_ns, n, 0.50) / 1e3;
	out[FIG_FAULT_P99] = bench_pct(fault_ns, n, 0.99) / 1e3;
	out[FIG_FAULT_MAX] = bench_pct(fault_ns, n, 1.0) / 1e3;
	out[FIG_READ_P50] = bench_pct(read_ns, n, 0.50);
	out[FIG_READ_P99] = bench_pct(read_ns, n, 0.99);
}

/* The kernel's reference: fresh anonymous huge pages, its own faults. */
static void *
bench_kernel_map(const struct bench_page *pg, size_t len)
{
	void	*p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_HUGETLB | pg->mapflag, -1, 0);
	return (p == MAP_FAILED ? NULL : p);
}

/*
 * Every byte must read zero: OR a 4 KiB block a word at a time, and only
 * look at the bytes of a block that is not all zero.
 */
static int
bench_verify(struct bench *b, const struct bench_case *c,
    const unsigned char *base, int run)
{
	const uint64_t	*w;
	uint64_t	 acc;
	size_t		 off, j, bad = 0, first = 0;
	unsigned int	 firstval = 0;

	for (off = 0; off < c->size; off += BENCH_SUBPAGE) {
		w = (const uint64_t *)(const void *)(base + off);
		acc = 0;
		for (j = 0; j < BENCH_SUBPAGE / sizeof *w; j++)
			acc |= w[j];
		if (acc == 0)
			continue;
		for (j = 0; j < BENCH_SUBPAGE; j++) {
			if (base[off + j] == 0)
				continue;
			if (bad++ == 0) {
				first = off + j;
				firstval = base[off + j];
			}
		}
	}
	if (bad != 0) {
		fprintf(stderr, "hpz-bench: case %s %s t=%d, run %d: %zu of"
		    " %zu bytes served by hpzerod are not zero; the first at"
		    " offset %zu (0x%zx, huge page %zu) reads 0x%02x\n",
		    c->page->name, bench_modes[c->mode], c->threads, run, bad,
		    c->size, first, first, first / c->page->size, firstval);
		return (-1);
	}
	b->verified += c->size;
	return (0);
}

/*
 * A libhpz call failed: say why, in the daemon's words when it has some.
 * ENOENT means "no socket" only from a call that connects first.
 */
static void
bench_hpz_error(const struct bench *b, const char *call, int err)
{
	const char	*why = hpz_last_error();
	int		 e = err < 0 ? -err : err;

	if (e == ECONNREFUSED || (e == ENOENT &&
	    (strcmp(call, "hpz_status") == 0 ||
	    strcmp(call, "hpz_register") == 0)))
		fprintf(stderr, "hpz-bench: %s: %s (socket %s; start the"
		    " daemon with: hpzerod --socket %s)\n", call,
		    hpz_strerror(err), b->socket, b->socket);
	else
		fprintf(stderr, "hpz-bench: %s: %s: %s\n", call,
		    hpz_strerror(err), why != NULL && *why != '\0' ? why :
		    "(no detail)");
}

/* Mark the case skipped; always returns 0, since skipping is no failure. */
static int
bench_skip(struct bench_case *c, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->skipped = 1;
	bench_progress(c, "skipped: %s", c->why);
	return (0);
}

/*
 * Enough free pages for a run?  The last run's pages may take a moment to
 * come back (the daemon closes its side of a region after us): wait a bit.
 * 1 when there are, 0 when the case is now skipped.
 */
static int
bench_wait_pool(struct bench_case *c, unsigned long long need)
{
	unsigned long long	 avail = 0;
	struct timespec		 ts = { 0, 10 * 1000 * 1000 };
	uint64_t		 t0 = bench_now();
	int			 waited = 0;

	for (;;) {
		if (bench_pool(c->page, &avail) != 0) {
			bench_skip(c, "no %s huge page pool on this machine",
			    c->page->human);
			return (0);
		}
		if (avail >= need)
			break;
		if (bench_now() - t0 > BENCH_POOL_WAIT_MS * 1000000ULL) {
			bench_skip(c, "needs %llu free %s pages, have %llu",
			    need, c->page->human, avail);
			return (0);
		}
		waited = 1;
		nanosleep(&ts, NULL);
	}
	if (waited)
		bench_progress(c, "waited %.0f ms for %llu free pages",
		    (double)(bench_now() - t0) / 1e6, need);
	return (1);
}

/* One kernel reference touch; its figures into out.  -1: case skipped. */
static int
bench_kernel_run(struct bench_case *c, int run, double *out,
    double *scratch)
{
	void	*p;
	double	 s;

	if ((p = bench_kernel_map(c->page, c->size)) == NULL) {
		if (errno == ENOMEM) {
			bench_skip(c, "the %s pool ran out in run %d (used"
			    " by someone else?)", c->page->human, run);
			return (-1);
		}
		fprintf(stderr, "hpz-bench: mmap of the kernel reference: %s\n",
		    strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	s = bench_touch(p, c->size, c->page->size, c->threads, scratch,
	    scratch + c->samples);
	if (munmap(p, c->size) == -1) {
		fprintf(stderr, "hpz-bench: munmap: %s\n", strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    out);
	return (0);
}

/*
 * One hpzerod touch: a new region (recycled: written with a pattern and
 * hpz_reset), touched, read back.  0 done, -1 case skipped, else the exit
 * status.  Only the touch and the reset are timed.
 */
static int
bench_hpz_run(struct bench *b, struct bench_case *c, int run, double *out,
    double *scratch)
{
	struct hpz_region	 reg;
	uint64_t		 t0;
	double			 s;
	int			 error, rc = BENCH_EXIT_FAIL;
	int			 created = 0, registered = 0;

	memset(&reg, 0, sizeof reg);
	if ((error = hpz_region_create(&reg, c->size, c->page->hpzflag)) !=
	    0) {
		if (error == -ENOMEM) {
			bench_skip(c, "no room for the hpzerod region in the"
			    " %s pool in run %d", c->page->human, run);
			rc = -1;
		} else
			bench_hpz_error(b, "hpz_region_create", error);
		goto out;
	}
	created = 1;
	if ((error = hpz_register(&reg)) != 0) {
		bench_hpz_error(b, "hpz_register", error);
		goto out;
	}
	registered = 1;
	if (c->mode == 0) {
		memset(reg.addr, BENCH_PATTERN, c->size);
		t0 = bench_now();
		if ((error = hpz_reset(&reg)) != 0) {
			bench_hpz_error(b, "hpz_reset", error);
			goto out;
		}
		c->reset_ms[run - 1] = (double)(bench_now() - t0) / 1e6;
	}
	s = bench_touch(reg.addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    out);
	if (bench_verify(b, c, reg.addr, run) != 0)
		goto out;
	rc = 0;
out:
	if (registered && (error = hpz_unregister(&reg)) != 0) {
		bench_hpz_error(b, "hpz_unregister", error);
		rc = BENCH_EXIT_FAIL;
	}
	if (created)
		hpz_region_destroy(&reg);
	return (rc);
}

/*
 * This VM backs RAM lazily and the very first touch of a page is very
 * slow: once per page size, touch twice the region (the kernel's and
 * hpzerod's pages) with the kernel, untimed.
 */
static int
bench_warm(struct bench *b, struct bench_case *c)
{
	size_t		 i = (size_t)(c->page - bench_pages), len, n;
	double		*scratch;
	void		*p;
	char		 h[32];

	if (b->warmed[i])
		return (0);
	len = 2 * c->size;
	bench_progress(c, "warming %s of %s pages with the kernel",
	    bench_human(len, h, sizeof h), c->page->human);
	if ((p = bench_kernel_map(c->page, len)) == NULL) {
		if (errno == ENOMEM)
			return (bench_skip(c, "the %s pool ran out during"
			    " the warm-up", c->page->human));
		fprintf(stderr, "hpz-bench: mmap for the warm-up: %s\n",
		    strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	n = len / c->page->size + (size_t)c->threads;
	scratch = bench_alloc(2 * n * sizeof *scratch);
	bench_touch(p, len, c->page->size, c->threads, scratch, scratch + n);
	free(scratch);
	if (munmap(p, len) == -1) {
		fprintf(stderr, "hpz-bench: munmap: %s\n", strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	b->warmed[i] = 1;
	return (0);
}

/* All runs of one case.  0 done or skipped, else the exit status. */
static int
bench_case_run(struct bench *b, struct bench_case *c)
{
	unsigned long long	 need, avail;
	double			 k[BENCH_NFIGS], h[BENCH_NFIGS], *scratch;
	int			 run, f, rc, error;

	need = 2 * (c->size / c->page->size);
	if (bench_pool(c->page, &avail) != 0)
		return (bench_skip(c, "no %s huge page pool on this machine",
		    c->page->human));
	if (avail < need)
		return (bench_skip(c, "needs %llu free %s pages, have %llu",
		    need, c->page->human, avail));
	if (bench_warm(b, c) != 0 || c->skipped)
		return (0);
	if ((error = hpz_status(&c->before)) != 0) {
		bench_hpz_error(b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}

	scratch = bench_alloc(2 * c->samples * sizeof *scratch);
	for (run = 1; run <= b->runs; run++) {
		if (!bench_wait_pool(c, need))
			break;
		if (bench_kernel_run(c, run, k, scratch) != 0)
			break;
		rc = bench_hpz_run(b, c, run, h, scratch);
		if (rc == -1)
			break;
		if (rc != 0) {
			free(scratch);
			return (rc);
		}
		for (f = 0; f < BENCH_NFIGS; f++) {
			c->fig[f][SIDE_KERNEL][run - 1] = k[f];
			c->fig[f][SIDE_HPZ][run - 1] = h[f];
			c->fig[f][SIDE_RATIO][run - 1] = h[f] / k[f];
		}
		c->done = run;
		bench_progress(c, "run %d/%d: kernel %.2f GB/s, hpzerod %.2f"
		    " GB/s (%.2fx), fault p50 %.1f vs %.1f %s", run, b->runs,
		    k[FIG_GBS], h[FIG_GBS], h[FIG_GBS] / k[FIG_GBS],
		    k[FIG_FAULT_P50] / c->page->unit_us,
		    h[FIG_FAULT_P50] / c->page->unit_us, c->page->unit);
	}
	free(scratch);
	if ((error = hpz_status(&c->after)) != 0) {
		bench_hpz_error(b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}
	return (0);
}

/* One timed pass of a clear kernel over the buffer, in GB/s. */
static double
bench_clear_pass(const struct clear_kernel *k, unsigned char *p)
{
	uint64_t	 t0;

	t0 = bench_now();
	k->fn(p, BENCH_NT_BYTES);
	clear_fence();
	return ((double)BENCH_NT_BYTES / ((double)(bench_now() - t0) / 1e9) /
	    1e9);
}

/*
 * The machine's single-core clear bandwidth over a warm buffer, with the
 * bulk kernel clear_init() picks (as the daemon does, non-temporal where
 * the CPU has it): the ceiling for one worker clearing recycled pages.
 * The other kernels the CPU supports are measured too, for the record.
 */
static void
bench_nt(struct bench *b)
{
	const struct clear_kernel	*k;
	unsigned char			*p;
	int				 kind, i;

	if (clear_init(NULL, NULL, b->nt_why, sizeof b->nt_why) != 0)
		return;
	b->nt_bulk = (int)clear_bulk_kernel->kind;
	p = mmap(NULL, BENCH_NT_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(b->nt_why, sizeof b->nt_why, "mmap: %s",
		    strerror(errno));
		return;
	}
	/* A hint only: with transparent huge pages off it changes nothing. */
	(void)madvise(p, BENCH_NT_BYTES, MADV_HUGEPAGE);
	for (kind = 0; kind < CLEAR_NKINDS; kind++) {
		if (!clear_supported((enum clear_kind)kind) ||
		    (k = clear_kernel((enum clear_kind)kind)) == NULL)
			continue;
		/* Warm (the first pass also backs the buffer), then check. */
		memset(p, 1, BENCH_NT_BYTES);
		bench_clear_pass(k, p);
		if (p[0] != 0 || p[BENCH_NT_BYTES / 2 + BENCH_SKEW] != 0 ||
		    p[BENCH_NT_BYTES - 1] != 0) {
			fprintf(stderr, "hpz-bench: clear kernel %s left"
			    " non-zero bytes; not measured\n", k->name);
			continue;
		}
		for (i = 0; i < BENCH_NT_PASSES; i++)
			b->nt[kind][i] = bench_clear_pass(k, p);
		b->nt_have[kind] = 1;
	}
	munmap(p, BENCH_NT_BYTES);
	if (b->nt_have[b->nt_bulk])
		b->nt_ok = 1;
	else
		snprintf(b->nt_why, sizeof b->nt_why, "the bulk kernel %s"
		    " failed its check", clear_bulk_kernel->name);
}

/* What one clock_gettime costs: it is inside every latency figure. */
static double
bench_clock(void)
{
	double		 d[1001];
	uint64_t	 t0, t1;
	size_t		 i;

	t0 = bench_now();
	for (i = 0; i < sizeof d / sizeof d[0]; i++) {
		t1 = bench_now();
		d[i] = (double)(t1 - t0);
		t0 = t1;
	}
	return (bench_pct(d, sizeof d / sizeof d[0], 0.5));
}

/* A figure with three significant digits or so. */
static void
bench_fmt(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else if (v >= 100 || v <= -100)
		snprintf(buf, len, "%.0f", v);
	else if (v >= 10 || v <= -10)
		snprintf(buf, len, "%.1f", v);
	else if (v >= 1 || v <= -1)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%.3f", v);
}

/* "median (min-max)" of n run figures, each divided by div. */
static void
bench_cell(const double *v, int n, int ratio, double div, char *buf,
    size_t len)
{
	double	 med, min, max;
	char	 a[24], lo[24], hi[24];

	bench_stats(v, n, &med, &min, &max);
	if (ratio) {
		snprintf(a, sizeof a, "%.2f", med);
		snprintf(lo, sizeof lo, "%.2f", min);
		snprintf(hi, sizeof hi, "%.2f", max);
	} else {
		bench_fmt(med / div, a, sizeof a);
		bench_fmt(min / div, lo, sizeof lo);
		bench_fmt(max / div, hi, sizeof hi);
	}
	snprintf(buf, len, "%s (%s-%s)", a, lo, hi);
}

/* One case's block of the table. */
static void
bench_print_case(const struct bench_case *c)
{
	char		 sz[32], label[48], cell[BENCH_NSIDES][96];
	double		 div;
	int		 f, s;

	printf("\n%s %s t=%d: %s region, %zu fault%s timed a run",
	    c->page->name, bench_modes[c->mode], c->threads,
	    bench_human(c->size, sz, sizeof sz), c->samples,
	    c->samples == 1 ? "" : "s");
	if (c->skipped && c->done == 0) {
		printf("\n  skipped: %s\n", c->why);
		return;
	}
	printf(", %d run%s\n", c->done, c->done == 1 ? "" : "s");
	if (c->skipped)
		printf("  (the remaining runs were skipped: %s)\n", c->why);
	printf("  %-24s %-20s %-20s %s\n", "", "kernel", "hpzerod",
	    "hpzerod/kernel");
	for (f = 0; f < BENCH_NFIGS; f++) {
		if (bench_figs[f].multi && c->samples == 1)
			continue;
		div = bench_figs[f].fault ? c->page->unit_us : 1.0;
		if (c->samples == 1 && f == FIG_FAULT_P50)
			snprintf(label, sizeof label, "fault stall %s",
			    c->page->unit);
		else if (c->samples == 1 && f == FIG_READ_P50)
			snprintf(label, sizeof label, "read-after-fault ns");
		else if (f == FIG_GBS)
			snprintf(label, sizeof label, "%s",
			    bench_figs[f].label);
		else
			snprintf(label, sizeof label, "%s %s",
			    bench_figs[f].label, bench_figs[f].fault ?
			    c->page->unit : "ns");
		for (s = 0; s < BENCH_NSIDES; s++)
			bench_cell(c->fig[f][s], c->done, s == SIDE_RATIO, div,
			    cell[s], sizeof cell[s]);
		printf("  %-24s %-20s %-20s %s\n", label, cell[SIDE_KERNEL],
		    cell[SIDE_HPZ], cell[SIDE_RATIO]);
	}
	if (c->mode == 0) {
		bench_cell(c->reset_ms, c->done, 0, 1.0, cell[0],
		    sizeof cell[0]);
		printf("  %-24s %-20s %s\n", "hpz_reset ms (untimed)", "",
		    cell[0]);
	}
	printf("  daemon: %llu faults (%llu missing, %llu minor, %llu"
	    " shared), pages: %llu cleared,\n  %llu populated, %llu punched;"
	    " %llu MiB cleared in bulk, %llu KiB hot\n",
	    c->after.faults - c->before.faults,
	    c->after.faults_missing - c->before.faults_missing,
	    c->after.faults_minor - c->before.faults_minor,
	    c->after.faults_shared - c->before.faults_shared,
	    c->after.pages_cleared - c->before.pages_cleared,
	    c->after.pages_populated - c->before.pages_populated,
	    c->after.pages_punched - c->before.pages_punched,
	    (c->after.bulk_bytes - c->before.bulk_bytes) >> 20,
	    (c->after.hot_bytes - c->before.hot_bytes) >> 10);
}

/*
 * recycled 2 MiB, 1 thread, hpzerod GB/s over the single-core clear
 * bandwidth (both medians); NAN when either is missing.
 */
static double
bench_nt_ratio(const struct bench *b, double *gbs, double *nt)
{
	double	 lo, hi;
	int	 i;

	*gbs = *nt = NAN;
	if (!b->nt_ok)
		return (NAN);
	bench_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, nt, &lo, &hi);
	for (i = 0; i < b->ncases; i++) {
		if (b->cases[i].page == &bench_pages[0] &&
		    b->cases[i].mode == 0 && b->cases[i].threads == 1 &&
		    b->cases[i].done > 0)
			bench_stats(b->cases[i].fig[FIG_GBS][SIDE_HPZ],
			    b->cases[i].done, gbs, &lo, &hi);
	}
	return (*gbs / *nt);
}

/* The table, for people. */
static void
bench_print(const struct bench *b)
{
	const struct clear_kernel *k;
	double	 med, lo, hi, gbs, nt, ratio;
	char	 cpu[128];
	int	 i;

	bench_cpu(cpu, sizeof cpu);
	printf("hpz-bench %s: hpzerod %s at %s, %d run%s a case\n",
	    HPZ_VERSION, b->status.version, b->socket, b->runs,
	    b->runs == 1 ? "" : "s");
	printf("machine: %s, %ld CPUs online; clock_gettime %.0f ns a call"
	    " (inside every latency)\n", cpu, sysconf(_SC_NPROCESSORS_ONLN),
	    b->clock_ns);
	printf("hpzerod: %llu workers, bulk kernel %s (%.1f GB/s by its own"
	    " start-up measure),\n  hot kernel %s over %llu KiB around the"
	    " fault\n", b->status.workers, b->status.clear_kernel,
	    b->status.clear_gbs, b->status.hot_kernel,
	    b->status.hot_size / 1024);
	if (b->nt_ok) {
		k = clear_kernel((enum clear_kind)b->nt_bulk);
		bench_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo,
		    &hi);
		printf("single-core clear bandwidth, warm %zu MiB buffer,"
		    " median of %d passes:\n  %s %.1f GB/s (clear_init's bulk"
		    " kernel%s; best %.1f)\n  others:",
		    BENCH_NT_BYTES >> 20, BENCH_NT_PASSES, k->name, med,
		    k->nontemporal ? ", non-temporal" : "", hi);
		for (i = 0; i < CLEAR_NKINDS; i++) {
			if (!b->nt_have[i] || i == b->nt_bulk)
				continue;
			bench_stats(b->nt[i], BENCH_NT_PASSES, &med, &lo, &hi);
			printf(" %s %.1f",
			    clear_kernel((enum clear_kind)i)->name, med);
		}
		printf(" GB/s\n");
	} else
		printf("single-core clear bandwidth: not measured (%s)\n",
		    b->nt_why);
	printf("\nEach cell: median (min-max) over the runs.  kernel: first"
	    " touch of fresh\nanonymous MAP_HUGETLB memory of the same size,"
	    " by the same threads, in the\nsame run.  hpzerod/kernel: the"
	    " ratio within each run; above 1 is better\nfor GB/s, below 1 is"
	    " better for latencies.  Latencies: each huge page's\nfirst access"
	    " (the fault, mid-page); read-after-fault: reading the 64"
	    " lines\nof the faulting 4 KiB right after it.\n");
	for (i = 0; i < b->ncases; i++)
		bench_print_case(&b->cases[i]);
	ratio = bench_nt_ratio(b, &gbs, &nt);
	printf("\n");
	if (!isnan(ratio))
		printf("recycled 2m t=1: hpzerod %.2f GB/s = %.2fx the"
		    " single-core clear bandwidth (%s, %.1f GB/s)\n", gbs,
		    ratio, clear_kernel((enum clear_kind)b->nt_bulk)->name, nt);
	printf("verified: %llu bytes served by hpzerod read back zero\n",
	    b->verified);
}

/* The CPU's model name, for the record. */
static void
bench_cpu(char *buf, size_t len)
{
	char	 line[256], *v;
	FILE	*f;

	snprintf(buf, len, "unknown CPU");
	if ((f = fopen("/proc/cpuinfo", "r")) == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "model name", 10) != 0 ||
		    (v = strchr(line, ':')) == NULL)
			continue;
		v += strspn(v, ": \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(buf, len, "%s", v);
		break;
	}
	fclose(f);
}

/* json-c helpers: add a value, or fail the whole object. */
#define JADD(o, k, v) do {						\
	struct json_object *jv_ = (v);					\
	if (jv_ == NULL || json_object_object_add((o), (k), jv_) != 0) { \
		json_object_put(jv_);					\
		goto nomem;						\
	}								\
} while (0)
#define JPUSH(a, v) do {						\
	struct json_object *jv_ = (v);					\
	if (jv_ == NULL || json_object_array_add((a), jv_) != 0) {	\
		json_object_put(jv_);					\
		goto nomem;						\
	}								\
} while (0)

static struct json_object *bench_jtake(struct json_object **);
static struct json_object *bench_jnum(double);
static int	bench_jadd_num(struct json_object *, const char *, double);
static int	bench_jpush_num(struct json_object *, double);
static struct json_object *bench_jseries(const double *, int);

/* Hand an object over to its parent: the caller's pointer forgets it. */
static struct json_object *
bench_jtake(struct json_object **p)
{
	struct json_object	*o = *p;

	*p = NULL;
	return (o);
}

/* A double with six significant digits; null for a missing figure. */
static struct json_object *
bench_jnum(double v)
{
	char	 s[32];

	if (!isfinite(v))
		return (json_object_new_null());
	snprintf(s, sizeof s, "%.6g", v);
	return (json_object_new_double_s(v, s));
}

/* Add a number, or null for a missing figure (json-c's null is NULL). */
static int
bench_jadd_num(struct json_object *o, const char *key, double v)
{
	struct json_object	*n = NULL;

	if (isfinite(v) && (n = bench_jnum(v)) == NULL)
		return (-1);
	if (json_object_object_add(o, key, n) != 0) {
		json_object_put(n);
		return (-1);
	}
	return (0);
}

/* Append a number, or null for a missing figure. */
static int
bench_jpush_num(struct json_object *a, double v)
{
	struct json_object	*n = NULL;

	if (isfinite(v) && (n = bench_jnum(v)) == NULL)
		return (-1);
	if (json_object_array_add(a, n) != 0) {
		json_object_put(n);
		return (-1);
	}
	return (0);
}

/* {"runs": [...], "median": m, "min": a, "max": b} */
static struct json_object *
bench_jseries(const double *v, int n)
{
	struct json_object	*o, *a = NULL;
	double			 med, min, max;
	int			 i;

	if ((o = json_object_new_object()) == NULL)
		return (NULL);
	if ((a = json_object_new_array()) == NULL)
		goto nomem;
	for (i = 0; i < n; i++)
		if (bench_jpush_num(a, v[i]) != 0)
			goto nomem;
	JADD(o, "runs", bench_jtake(&a));
	bench_stats(v, n, &med, &min, &max);
	if (bench_jadd_num(o, "median", med) != 0 ||
	    bench_jadd_num(o, "min", min) != 0 ||
	    bench_jadd_num(o, "max", max) != 0)
		goto nomem;
	return (o);
nomem:
	json_object_put(a);
	json_object_put(o);
	return (NULL);
}

/* Everything as one JSON object, for scripts. */
static int
bench_json(const struct bench *b)
{
	struct json_object	*root, *o = NULL, *cases = NULL, *c = NULL;
	struct json_object	*figs = NULL, *fig = NULL;
	const struct bench_case	*bc;
	const struct clear_kernel *k;
	struct utsname		 un;
	double			 med, lo, hi, gbs, nt;
	const char		*text;
	char			 cpu[128];
	int			 i, f, s, rc = BENCH_EXIT_FAIL;

	if ((root = json_object_new_object()) == NULL)
		goto nomem;
	JADD(root, "hpz_bench_version", json_object_new_string(HPZ_VERSION));
	JADD(root, "daemon_version",
	    json_object_new_string(b->status.version));
	JADD(root, "socket", json_object_new_string(b->socket));
	JADD(root, "runs", json_object_new_int(b->runs));

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	bench_cpu(cpu, sizeof cpu);
	JADD(o, "cpu", json_object_new_string(cpu));
	JADD(o, "cpus_online",
	    json_object_new_int64(sysconf(_SC_NPROCESSORS_ONLN)));
	if (uname(&un) == 0) {
		JADD(o, "kernel", json_object_new_string(un.release));
		JADD(o, "arch", json_object_new_string(un.machine));
	}
	if (bench_jadd_num(o, "clock_gettime_ns", b->clock_ns) != 0)
		goto nomem;
	JADD(root, "machine", o);

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	JADD(o, "version", json_object_new_string(b->status.version));
	JADD(o, "workers", json_object_new_int64((int64_t)b->status.workers));
	JADD(o, "clear_kernel", json_object_new_string(
	    b->status.clear_kernel));
	if (bench_jadd_num(o, "clear_gbs_at_start", b->status.clear_gbs) != 0)
		goto nomem;
	JADD(o, "hot_kernel", json_object_new_string(b->status.hot_kernel));
	JADD(o, "hot_size", json_object_new_int64((int64_t)
	    b->status.hot_size));
	JADD(root, "daemon", o);

	if ((o = json_object_new_object()) == NULL)
		goto nomem;
	JADD(o, "buffer_bytes", json_object_new_int64(BENCH_NT_BYTES));
	JADD(o, "passes", json_object_new_int(BENCH_NT_PASSES));
	if (b->nt_ok) {
		JADD(o, "bulk_kernel", json_object_new_string(clear_kernel(
		    (enum clear_kind)b->nt_bulk)->name));
		bench_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo,
		    &hi);
		if (bench_jadd_num(o, "bulk_median_gbs", med) != 0 ||
		    bench_jadd_num(o, "bulk_best_gbs", hi) != 0)
			goto nomem;
	} else
		JADD(o, "error", json_object_new_string(b->nt_why));
	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (!b->nt_have[i])
			continue;
		k = clear_kernel((enum clear_kind)i);
		if ((fig = json_object_new_object()) == NULL)
			goto nomem;
		JADD(fig, "nontemporal", json_object_new_boolean(
		    k->nontemporal));
		JADD(fig, "gbs", bench_jseries(b->nt[i], BENCH_NT_PASSES));
		JADD(o, k->name, bench_jtake(&fig));
	}
	JADD(root, "clear_bandwidth_1core", o);

	if ((cases = json_object_new_array()) == NULL)
		goto nomem;
	for (i = 0; i < b->ncases; i++) {
		bc = &b->cases[i];
		if ((c = json_object_new_object()) == NULL)
			goto nomem;
		JADD(c, "page", json_object_new_string(bc->page->name));
		JADD(c, "page_bytes", json_object_new_int64(
		    (int64_t)bc->page->size));
		JADD(c, "mode", json_object_new_string(bench_modes[bc->mode]));
		JADD(c, "threads", json_object_new_int(bc->threads));
		JADD(c, "region_bytes", json_object_new_int64(
		    (int64_t)bc->size));
		JADD(c, "faults_timed_per_run", json_object_new_int64(
		    (int64_t)bc->samples));
		JADD(c, "runs_done", json_object_new_int(bc->done));
		JADD(c, "skipped", json_object_new_boolean(bc->skipped));
		if (bc->skipped)
			JADD(c, "skip_reason", json_object_new_string(bc->why));
		if (bc->done > 0) {
			if ((figs = json_object_new_object()) == NULL)
				goto nomem;
			for (f = 0; f < BENCH_NFIGS; f++) {
				if ((fig = json_object_new_object()) == NULL)
					goto nomem;
				for (s = 0; s < BENCH_NSIDES; s++)
					JADD(fig, bench_sides[s],
					    bench_jseries(bc->fig[f][s],
					    bc->done));
				JADD(figs, bench_figs[f].json,
				    bench_jtake(&fig));
			}
			JADD(c, "figures", bench_jtake(&figs));
			if (bc->mode == 0)
				JADD(c, "reset_ms", bench_jseries(bc->reset_ms,
				    bc->done));
			if ((o = json_object_new_object()) == NULL)
				goto nomem;
#define BENCH_DELTA(name) JADD(o, #name, json_object_new_int64(		\
			    (int64_t)(bc->after.name - bc->before.name)))
			BENCH_DELTA(faults);
			BENCH_DELTA(faults_missing);
			BENCH_DELTA(faults_minor);
			BENCH_DELTA(faults_shared);
			BENCH_DELTA(pages_cleared);
			BENCH_DELTA(bytes_cleared);
			BENCH_DELTA(pages_populated);
			BENCH_DELTA(pages_punched);
			BENCH_DELTA(resets);
			BENCH_DELTA(bulk_bytes);
			BENCH_DELTA(hot_bytes);
			BENCH_DELTA(faults_coalesced);
			BENCH_DELTA(jobs_split);
			BENCH_DELTA(faults_polled);
#undef BENCH_DELTA
			JADD(c, "daemon_delta", o);
		}
		JPUSH(cases, bench_jtake(&c));
	}
	JADD(root, "cases", bench_jtake(&cases));
	if (bench_jadd_num(root, "recycled_2m_t1_over_clear_bandwidth",
	    bench_nt_ratio(b, &gbs, &nt)) != 0)
		goto nomem;
	JADD(root, "verified_bytes",
	    json_object_new_int64((int64_t)b->verified));

	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
	    JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text == NULL)
		goto nomem;
	printf("%s\n", text);
	rc = fflush(stdout) == 0 ? 0 : BENCH_EXIT_FAIL;
	goto out;
nomem:
	fprintf(stderr, "hpz-bench: cannot build JSON: out of memory\n");
out:
	json_object_put(fig);
	json_object_put(figs);
	json_object_put(c);
	json_object_put(cases);
	json_object_put(root);
	return (rc);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,	NULL, 'j' },
		{ "help",	no_argument,	NULL, 'h' },
		{ NULL,		0,		NULL, 0 }
	};
	struct bench		 b;
	struct bench_case	*c;
	int			 ch, i, j, k, f, s, rc = 0, error;
	long			 v;
	char			*end;

	memset(&b, 0, sizeof b);
	b.runs = BENCH_RUNS;
	b.size = 1UL << 30;
	opterr = 0;	/* our own words, not getopt's */
	while ((ch = getopt_long(argc, argv, ":hs:S:r:t:p:m:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'h':
			bench_usage(stdout);
			return (0);
		case 'j':
			b.json = 1;
			break;
		case 's':
			if (*optarg == '\0')
				bench_usage_error("-s: empty socket path");
			/* libhpz reads the socket from here. */
			if (setenv("HPZ_SOCKET", optarg, 1) != 0) {
				fprintf(stderr, "hpz-bench: setenv: %s\n",
				    strerror(errno));
				return (BENCH_EXIT_FAIL);
			}
			break;
		case 'S':
			if (bench_parse_size(optarg, &b.size) != 0)
				bench_usage_error("-S: bad size '%s'", optarg);
			b.size_set = 1;
			break;
		case 'r':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    v < 1 || v > BENCH_MAX_RUNS)
				bench_usage_error("-r: want 1 to %d runs, not"
				    " '%s'", BENCH_MAX_RUNS, optarg);
			b.runs = (int)v;
			break;
		case 't':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-t: want up to %d distinct"
				    " thread counts from 1 to %d, comma"
				    " separated, not '%s'", BENCH_MAX_LIST,
				    BENCH_MAX_THREADS, optarg);
			break;
		case 'p':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-p: want 2m, 1g or both,"
				    " comma separated, not '%s'", optarg);
			break;
		case 'm':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-m: want recycled, fresh or"
				    " both, comma separated, not '%s'", optarg);
			break;
		case ':':
			bench_usage_error("%s needs an argument",
			    argv[optind - 1]);
		default:
			if (optopt != 0)
				bench_usage_error("unknown option -%c", optopt);
			bench_usage_error("unknown option %s",
			    argv[optind - 1]);
		}
	}
	if (optind != argc)
		bench_usage_error("unexpected argument '%s'", argv[optind]);
	if (b.nthreads == 0)
		bench_parse_lists(&b, 't', "1,2");
	if (b.npages == 0)
		bench_parse_lists(&b, 'p', "2m,1g");
	if (b.nmodes == 0)
		bench_parse_lists(&b, 'm', "recycled,fresh");
	if (b.size % bench_pages[0].size != 0)
		bench_usage_error("-S: %zu is not a multiple of 2 MiB", b.size);
	b.socket = getenv("HPZ_SOCKET");
	if (b.socket == NULL || *b.socket == '\0')
		b.socket = HPZ_SOCKET_DEFAULT;

	/* Is the daemon there at all, before we spend time measuring? */
	if ((error = hpz_status(&b.status)) != 0) {
		bench_hpz_error(&b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}
	fprintf(stderr, "hpz-bench: measuring the single-core clear"
	    " bandwidth\n");
	bench_nt(&b);
	b.clock_ns = bench_clock();

	b.ncases = b.npages * b.nmodes * b.nthreads;
	b.cases = bench_alloc((size_t)b.ncases * sizeof *b.cases);
	c = b.cases;
	for (i = 0; i < b.npages; i++) {
		for (j = 0; j < b.nmodes; j++) {
			for (k = 0; k < b.nthreads; k++, c++) {
				c->page = b.pages[i];
				c->mode = b.modes[j];
				c->threads = b.threads[k];
				/* 1 GiB pages: whole pages, at least one. */
				c->size = (b.size + c->page->size - 1) /
				    c->page->size * c->page->size;
				for (s = 0; s < c->threads; s++) {
					size_t lo, hi;

					bench_share(c->size, c->page->size,
					    c->threads, s, &lo, &hi);
					c->samples += bench_pieces(lo, hi,
					    c->page->size);
				}
				for (f = 0; f < BENCH_NFIGS; f++)
					for (s = 0; s < BENCH_NSIDES; s++)
						c->fig[f][s] = bench_alloc(
						    (size_t)b.runs *
						    sizeof(double));
				c->reset_ms = bench_alloc((size_t)b.runs *
				    sizeof(double));
			}
		}
	}

	for (i = 0; i < b.ncases && rc == 0; i++)
		rc = bench_case_run(&b, &b.cases[i]);
	if (rc == 0)
		rc = b.json ? bench_json(&b) : (bench_print(&b), 0);
	if (rc == 0 && fflush(stdout) != 0)
		rc = BENCH_EXIT_FAIL;

	for (i = 0; i < b.ncases; i++) {
		for (f = 0; f < BENCH_NFIGS; f++)
			for (s = 0; s < BENCH_NSIDES; s++)
				free(b.cases[i].fig[f][s]);
		free(b.cases[i].reset_ms);
	}
	free(b.cases);
	return (rc);
}
