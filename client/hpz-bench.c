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
 *
 * The other modes measure the daemon's background work (daemon/scrub.c):
 * "idle-recycled" and "idle-premap" leave the region idle after hpz_reset
 * while polling hpz_status, to see how fast the SCHED_IDLE scrubbers clear
 * it (and, with HPZ_PREMAP, map it) before the touch; "idle-fresh-eager"
 * and "idle-fresh-eager-premap" do the same for a fresh region populated
 * by HPZ_AHEAD_EAGER; "onfault-ahead" touches a fresh HPZ_AHEAD_ONFAULT
 * region at once; "busy-recycled" touches a recycled region while the
 * scrubbers clear a second one, beside the same touch without it.
 *
 * The pool modes measure hpzerod's pre-zeroed pool (daemon/pool.c): after
 * an idle pause (until the pool holds the region, at most a second or -I),
 * hpz_region_create takes a pool file; "pool" touches it unregistered (a
 * page-cache hit a page, no zeroing), "pool-premap" has hpz_region_create
 * map the pool's pages (HPZ_PREMAP), "pool-register" registers it with
 * default flags first (each first touch a minor fault through the daemon).
 */
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
#include "size.h"
#include "clock.h"
#include "uffd-compat.h"
#include "clear.h"

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

/* What the daemon does in the background, and what we measure of it. */
enum {
	BG_NONE,		/* the first two modes: nothing printed */
	BG_CLEAR,		/* scrubbers clear garbage pages */
	BG_POPULATE,		/* scrubbers allocate pages: the kernel zeroes */
};

/* A mode: how the hpzerod region is set up before it is touched. */
struct bench_mode {
	const char	*name;		/* on the command line */
	unsigned int	 flags;		/* hpz_region.flags at hpz_register */
	int		 recycle;	/* write a pattern, then hpz_reset */
	int		 idle;		/* idle for T before the touch */
	int		 busy;		/* a second region scrubbed meanwhile */
	int		 bg;		/* BG_*: the background work to rate */
	const char	*what;		/* for the table */
};

static const struct bench_mode bench_modes[] = {
	{ "recycled",		HPZ_NO_SCRUB,		1, 0, 0, BG_NONE,
	    "HPZ_NO_SCRUB: every garbage page cleared by its fault" },
	{ "fresh",		0,			0, 0, 0, BG_NONE,
	    NULL },
	{ "fresh-discard",	HPZ_DISCARD | HPZ_NO_SCRUB, 0, 0, 0, BG_NONE,
	    "fresh, HPZ_DISCARD|HPZ_NO_SCRUB: each first touch allocates and"
	    " clears" },
	{ "idle-recycled",	0,			1, 1, 0, BG_CLEAR,
	    "written, hpz_reset, idle while the scrubbers clear it, touched" },
	{ "idle-premap",	HPZ_PREMAP,		1, 1, 0, BG_CLEAR,
	    "HPZ_PREMAP; written, hpz_reset, idle while the scrubbers clear"
	    " and map it, touched" },
	{ "idle-fresh-eager",	HPZ_AHEAD_EAGER,	0, 1, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_EAGER; idle while it is allocated, touched" },
	{ "idle-fresh-eager-premap", HPZ_AHEAD_EAGER | HPZ_PREMAP,
						0, 1, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_EAGER|HPZ_PREMAP; idle while it is allocated"
	    " and mapped, touched" },
	{ "onfault-ahead",	HPZ_AHEAD_ONFAULT,	0, 0, 0, BG_POPULATE,
	    "fresh, HPZ_AHEAD_ONFAULT; touched at once" },
	{ "busy-recycled",	0,			1, 0, 1, BG_CLEAR,
	    "written, hpz_reset and touched right after a second region's"
	    " hpz_reset (busy), beside the same touch alone (quiet)" },
	{ "pool",		0,			0, 0, 0, BG_NONE,
	    "hpz_region_create after an idle pause: a file of the pool,"
	    " touched unregistered" },
	{ "pool-premap",	HPZ_PREMAP,		0, 0, 0, BG_NONE,
	    "the same, HPZ_PREMAP: hpz_region_create maps the pool's pages" },
	{ "pool-register",	0,			0, 0, 0, BG_NONE,
	    "the same, registered with default flags before the touch" },
};
#define BENCH_NMODES	(sizeof bench_modes / sizeof bench_modes[0])
#define BENCH_MODE_RECYCLED	0	/* index of "recycled" */

#define BENCH_IDLE_MIN_MS	50	/* default idle time, at least */
#define BENCH_IDLE_MAX_MS	600000	/* -I */
#define BENCH_IDLE_GBS		10.0	/* for T when nothing was measured */
#define BENCH_POLL_MIN_NS	100000ULL	/* hpz_status while idle: */
#define BENCH_POLL_MAX_NS	1000000ULL	/* 1/20 of the expected time */

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

/*
 * Figures of the background work, hpzerod's side only, one a run; NAN
 * where a run has none (work not done within the idle time).  Which modes
 * have which: bench_x_applies().
 */
enum {
	X_IDLE_MS,		/* the idle time T */
	X_DONE_MS,		/* background work done: pending 0, all
				   populated; from hpz_reset or hpz_register */
	X_PREMAP_MS,		/* every page premapped */
	X_BG_GBS,		/* bytes cleared (populated) / time to done */
	X_BG_1CORE,		/* X_BG_GBS / the single-core clear bandwidth */
	X_SCRUB_GBS,		/* bg_bytes_cleared / bg_ns: one scrubber */
	X_BG_CLEARED,		/* pages the scrubbers cleared */
	X_BG_POPULATED,		/* pages allocated ahead */
	X_BG_PREMAPPED,		/* pages mapped before the touch */
	X_TOUCH_FAULTS,		/* faults the daemon resolved in the touch */
	X_TOUCH_MISSING,	/* of which on pages not allocated yet */
	X_TOUCH_BG_CLEARED,	/* pages scrubbed during the (busy) touch */
	X_PENDING_AFTER,	/* garbage pages left right after the touch */
	X_CREATE_MS,		/* pool: hpz_region_create */
	X_POOL_PAGES,		/* pool: pages that came from the pool */
	X_CREATE_TOUCH_GBS,	/* pool: size / (create + touch) */
	BENCH_NX
};

enum {
	XF_FIG,			/* a figure, bench_fmt */
	XF_RATIO,		/* a ratio, two decimals */
	XF_COUNT,		/* a count, no decimals */
};

static const struct {
	const char	*json;
	const char	*label;
	int		 format;	/* XF_* */
} bench_x[BENCH_NX] = {
	{ "idle_ms",			"idle ms",		XF_FIG },
	{ "bg_done_ms",			"bg done ms",		XF_FIG },
	{ "premap_done_ms",		"all premapped ms",	XF_FIG },
	{ "bg_gbs",			"bg GB/s",		XF_FIG },
	{ "bg_over_1core",		"bg / 1-core clear",	XF_RATIO },
	{ "scrubber_gbs_while_clearing", "scrubber GB/s clearing",	XF_FIG },
	{ "bg_pages_cleared",		"bg pages cleared",	XF_COUNT },
	{ "bg_pages_populated",		"bg pages populated",	XF_COUNT },
	{ "bg_pages_premapped",		"bg pages premapped",	XF_COUNT },
	{ "touch_faults",		"faults in the touch",	XF_COUNT },
	{ "touch_faults_missing",	"  of which missing",	XF_COUNT },
	{ "touch_bg_pages_cleared",	"bg pages cleared in it", XF_COUNT },
	{ "pending_after_touch",	"pending after touch",	XF_COUNT },
	{ "create_ms",			"hpz_region_create ms",	XF_FIG },
	{ "pool_pages",			"pages from the pool",	XF_COUNT },
	{ "create_touch_gbs",		"create+touch GB/s",	XF_FIG },
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
	double			 idle_ms;	/* T, for idle modes */
	uint64_t		 poll_ns;	/* hpz_status while idle */
	double			*x[BENCH_NX];	/* bench_x figures, a run */
	double			*quiet[BENCH_NFIGS][2];	/* busy: quiet,
							   busy/quiet */
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
	double			 idle_ms;	/* -I, or < 0 */
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
	uint64_t		 start, end;	/* its own clock */
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
static int	bench_x_applies(const struct bench_mode *, int);
static int	bench_has_bg(const struct bench *);
static double	bench_nt_median(const struct bench *);
static double	bench_idle_time(const struct bench *,
		    const struct bench_case *);
static uint64_t	bench_poll_time(const struct bench *,
		    const struct bench_case *);
static void	bench_sleep_until(uint64_t);
static int	bench_st(const struct bench *, struct hpz_status *);
static int	bench_idle(struct bench *, struct bench_case *, uint64_t,
		    const struct hpz_status *, double *, double *,
		    struct hpz_status *, struct hpz_status *);
static double	bench_rate(double, double);
static int	bench_region_new(struct bench *, struct bench_case *, int,
		    struct hpz_region *, unsigned int, int *, int *);
static int	bench_region_end(struct bench *, struct hpz_region *, int,
		    int);
static int	bench_mode_pool(const struct bench_mode *);
static int	bench_pool_level(const struct bench_page *,
		    unsigned long long *, unsigned long long *);
static int	bench_hpz_pool_run(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_hpz_busy_run(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_warm(struct bench *, struct bench_case *);
static int	bench_case_run(struct bench *, struct bench_case *);
static double	bench_clear_pass(const struct clear_kernel *,
		    unsigned char *);
static void	bench_nt(struct bench *);
static double	bench_clock(void);
static void	bench_fmt(double, char *, size_t);
static void	bench_cell(const double *, int, int, double, char *, size_t);
static void	bench_wrap(const char *, int, int);
static void	bench_print_case(const struct bench *,
		    const struct bench_case *);
static void	bench_print_bg(const struct bench *,
		    const struct bench_case *);
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
	    "                 [-t threads,...] [-p 2m,1g] [-m mode,...|all]\n"
	    "                 [-I ms]\n"
	    "  -s socket   hpzerod's socket (default $HPZ_SOCKET,\n"
	    "              then %s)\n"
	    "  -S size     region size with K, M, G or T (default 1G; for 1g\n"
	    "              pages rounded up to whole pages)\n"
	    "  -r runs     runs a case (default %d)\n"
	    "  -t list     touching threads (default 1,2)\n"
	    "  -p list     page sizes (default 2m,1g)\n"
	    "  -m list     modes (default recycled,fresh), or all:\n"
	    "              recycled, fresh, fresh-discard, idle-recycled,\n"
	    "              idle-premap, idle-fresh-eager,\n"
	    "              idle-fresh-eager-premap, onfault-ahead,\n"
	    "              busy-recycled, pool, pool-premap, pool-register\n"
	    "  -I ms       idle time of the idle-* modes (default: twice the\n"
	    "              region at the single-core clear bandwidth, at\n"
	    "              least %d ms); the most the pool modes wait for\n"
	    "              the pool (default 1000 ms)\n"
	    "  --json      one JSON object on stdout instead of the table\n"
	    "exit status: 0 done (cases may be skipped), 1 failure or a"
	    " non-zero byte, 2 usage\n", HPZ_SOCKET_DEFAULT, BENCH_RUNS,
	    BENCH_IDLE_MIN_MS);
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
	    bench_modes[c->mode].name, c->threads);
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
			if (strcmp(item, "all") == 0 && n == 0 &&
			    comma == NULL) {
				for (i = 0; i < BENCH_NMODES; i++)
					b->modes[n++] = (int)i;
				break;
			}
			for (i = 0; i < BENCH_NMODES; i++)
				if (strcmp(item, bench_modes[i].name) == 0)
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
	t->start = clock_now_ns();
	for (pg = t->lo - t->lo % t->page; pg < t->hi; pg += t->page) {
		lo = pg > t->lo ? pg : t->lo;
		hi = pg + t->page < t->hi ? pg + t->page : t->hi;
		/* Mid-page: the faulting subpage is not the page's first. */
		fault = lo + (hi - lo) / 2 + BENCH_SKEW;
		if (fault >= hi)
			fault = lo + (hi - lo) / 2;
		t0 = clock_now_ns();
		sum += b[fault];
		t1 = clock_now_ns();
		line = (const volatile uint64_t *)(const volatile void *)
		    (b + (fault & ~(BENCH_SUBPAGE - 1)));
		for (i = 0; i < BENCH_SUBPAGE / BENCH_LINE; i++)
			sum += line[i * (BENCH_LINE / sizeof *line)];
		t2 = clock_now_ns();
		t->fault_ns[k] = (double)(t1 - t0);
		t->read_ns[k] = (double)(t2 - t1);
		k++;
		for (off = lo; off < hi; off += BENCH_SUBPAGE)
			sum += b[off];
	}
	t->end = clock_now_ns();
	t->sink = sum;
	return (NULL);
}

/*
 * Touch [addr, addr + size) with all threads; seconds from the first
 * thread's start (right after the barrier that releases them) to the last
 * one's end, each read on the touching thread itself: the thread that
 * releases the barrier may be preempted by the one it wakes (on its own
 * CPU), and a touch that takes no fault never gives the CPU back.  Threads
 * are made before the clock starts: creating one takes the mmap lock,
 * which the faults want too.  fault_ns and read_ns get one entry per
 * (thread, huge page) piece.
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
	for (i = 0; i < threads; i++)
		pthread_join(t[i].tid, NULL);
	t0 = t[0].start;
	t1 = t[0].end;
	for (i = 1; i < threads; i++) {
		t0 = t[i].start < t0 ? t[i].start : t0;
		t1 = t[i].end > t1 ? t[i].end : t1;
	}

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

/*
 * Median, min and max of the n figures that are finite (a run without a
 * figure holds NAN); NAN when there are none.  v is left as it is.
 */
static void
bench_stats(const double *v, int n, double *med, double *min, double *max)
{
	double	*s;
	int	 i, k = 0;

	s = bench_alloc((size_t)(n > 0 ? n : 1) * sizeof *s);
	for (i = 0; i < n; i++)
		if (isfinite(v[i]))
			s[k++] = v[i];
	n = k;
	if (n == 0) {
		*med = *min = *max = NAN;
		free(s);
		return;
	}
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
		    c->page->name, bench_modes[c->mode].name, c->threads,
		    run, bad,
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
	uint64_t		 t0 = clock_now_ns();
	int			 waited = 0;

	for (;;) {
		if (bench_pool(c->page, &avail) != 0) {
			bench_skip(c, "no %s huge page pool on this machine",
			    c->page->human);
			return (0);
		}
		if (avail >= need)
			break;
		if (clock_now_ns() - t0 > BENCH_POOL_WAIT_MS * 1000000ULL) {
			bench_skip(c, "needs %llu free %s pages, have %llu",
			    need, c->page->human, avail);
			return (0);
		}
		waited = 1;
		nanosleep(&ts, NULL);
	}
	if (waited)
		bench_progress(c, "waited %.0f ms for %llu free pages",
		    (double)(clock_now_ns() - t0) / 1e6, need);
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

/* Is m one of the pool modes? */
static int
bench_mode_pool(const struct bench_mode *m)
{
	return (strncmp(m->name, "pool", 4) == 0);
}

/* Which bench_x figures a mode has. */
static int
bench_x_applies(const struct bench_mode *m, int x)
{
	if (bench_mode_pool(m))
		return (x == X_IDLE_MS || x == X_CREATE_MS ||
		    x == X_POOL_PAGES || x == X_CREATE_TOUCH_GBS ||
		    x == X_TOUCH_FAULTS);
	if (m->bg == BG_NONE)
		return (0);
	switch (x) {
	case X_IDLE_MS:
	case X_DONE_MS:
		return (m->idle);
	case X_PREMAP_MS:
		return (m->idle && (m->flags & HPZ_PREMAP) != 0);
	case X_BG_GBS:
	case X_BG_1CORE:
	case X_TOUCH_FAULTS:
		return (1);
	case X_SCRUB_GBS:
	case X_BG_CLEARED:
		return (m->bg == BG_CLEAR);
	case X_BG_POPULATED:
	case X_TOUCH_MISSING:
		return (m->bg == BG_POPULATE);
	case X_BG_PREMAPPED:
		return ((m->flags & HPZ_PREMAP) != 0);
	case X_TOUCH_BG_CLEARED:
	case X_PENDING_AFTER:
		return (m->busy);
	}
	return (0);
}

/* Does any case measure background work? */
static int
bench_has_bg(const struct bench *b)
{
	int	 i;

	for (i = 0; i < b->ncases; i++)
		if (bench_modes[b->cases[i].mode].bg != BG_NONE)
			return (1);
	return (0);
}

/* The single-core clear bandwidth (GB/s, median of the passes) or NAN. */
static double
bench_nt_median(const struct bench *b)
{
	double	 med, lo, hi;

	if (!b->nt_ok)
		return (NAN);
	bench_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo, &hi);
	return (med);
}

/*
 * The idle time T of a case, in ms: -I, else twice the time one core
 * takes to clear the region (the daemon's own start-up figure when we
 * could not measure it), at least BENCH_IDLE_MIN_MS.
 */
static double
bench_idle_time(const struct bench *b, const struct bench_case *c)
{
	double	 gbs, ms;

	if (b->idle_ms >= 0)
		return (b->idle_ms);
	gbs = bench_nt_median(b);
	if (!(gbs > 0))
		gbs = b->status.clear_gbs > 0 ? b->status.clear_gbs :
		    BENCH_IDLE_GBS;
	ms = 2.0 * (double)c->size / (gbs * 1e9) * 1e3;
	return (ms < BENCH_IDLE_MIN_MS ? BENCH_IDLE_MIN_MS : ms);
}

/*
 * How often to ask hpz_status while idle: a twentieth of the time one
 * core takes to clear the region, within BENCH_POLL_MIN_NS and _MAX_NS.
 * Each ask wakes the daemon's main thread, which preempts a scrubber.
 */
static uint64_t
bench_poll_time(const struct bench *b, const struct bench_case *c)
{
	double	 gbs, ns;

	gbs = bench_nt_median(b);
	if (!(gbs > 0))
		gbs = b->status.clear_gbs > 0 ? b->status.clear_gbs :
		    BENCH_IDLE_GBS;
	ns = (double)c->size / gbs / 20.0;
	if (ns < (double)BENCH_POLL_MIN_NS)
		return (BENCH_POLL_MIN_NS);
	if (ns > (double)BENCH_POLL_MAX_NS)
		return (BENCH_POLL_MAX_NS);
	return ((uint64_t)ns / 1000 * 1000);
}

/* Sleep until the monotonic clock reads ns. */
static void
bench_sleep_until(uint64_t ns)
{
	struct timespec	 ts;

	ts.tv_sec = (time_t)(ns / 1000000000ULL);
	ts.tv_nsec = (long)(ns % 1000000000ULL);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	    EINTR)
		;
}

/* hpz_status, saying why it failed: 0, or -1. */
static int
bench_st(const struct bench *b, struct hpz_status *st)
{
	int	 error;

	if ((error = hpz_status(st)) != 0) {
		bench_hpz_error(b, "hpz_status", error);
		return (-1);
	}
	return (0);
}

/* GB/s of bytes in ms; NAN without a time. */
static double
bench_rate(double bytes, double ms)
{
	return (ms > 0 ? bytes / (ms / 1e3) / 1e9 : NAN);
}

/*
 * Leave the region idle until T after t0 (just before hpz_reset or
 * hpz_register), asking hpz_status every c->poll_ns while work is left:
 * when no garbage page is pending (BG_CLEAR) or the whole region has been
 * allocated (BG_POPULATE), and, with HPZ_PREMAP, when every page has been
 * mapped.  The counters are global: this daemon must serve nobody else.
 * done_ms and premap_ms are NAN when T ran out first; at_done is the
 * status that saw the work done (else the last in T), end the one at T.
 */
static int
bench_idle(struct bench *b, struct bench_case *c, uint64_t t0,
    const struct hpz_status *s0, double *done_ms, double *premap_ms,
    struct hpz_status *at_done, struct hpz_status *end)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	struct hpz_status	 st;
	unsigned long long	 npages = c->size / c->page->size;
	uint64_t		 deadline, next, now;
	int			 want_done = 1, want_premap, done;

	want_premap = (m->flags & HPZ_PREMAP) != 0;
	*done_ms = *premap_ms = NAN;
	*at_done = *s0;
	deadline = t0 + (uint64_t)(c->idle_ms * 1e6);
	next = t0;
	while (want_done || want_premap) {
		next += c->poll_ns;
		if (next >= deadline)
			break;
		bench_sleep_until(next);
		if (bench_st(b, &st) != 0)
			return (-1);
		now = clock_now_ns();
		if (want_done) {
			*at_done = st;
			if (m->bg == BG_CLEAR)
				done = st.bg_pages_pending == 0;
			else
				done = st.bg_pages_populated -
				    s0->bg_pages_populated >= npages;
			if (done) {
				*done_ms = (double)(now - t0) / 1e6;
				want_done = 0;
			}
		}
		if (want_premap && st.bg_pages_premapped -
		    s0->bg_pages_premapped >= npages) {
			*premap_ms = (double)(now - t0) / 1e6;
			want_premap = 0;
		}
		/* The clock may have passed the next poll: skip it. */
		if (now > next + c->poll_ns)
			next = now;
	}
	bench_sleep_until(deadline);
	if (bench_st(b, end) != 0)
		return (-1);
	if (want_done)
		*at_done = *end;
	return (0);
}

/*
 * Create a region of the case's size for run and register it with flags.
 * 0 done, -1 case skipped, else the exit status; *created, *registered
 * say what to undo.
 */
static int
bench_region_new(struct bench *b, struct bench_case *c, int run,
    struct hpz_region *reg, unsigned int flags, int *created,
    int *registered)
{
	int	 error;

	memset(reg, 0, sizeof *reg);
	/* Fresh memory, as these modes mean: the pool has modes of its own. */
	if ((error = hpz_region_create(reg, c->size, c->page->hpzflag |
	    HPZ_NO_POOL)) != 0) {
		if (error == -ENOMEM) {
			bench_skip(c, "no room for the hpzerod region in the"
			    " %s pool in run %d", c->page->human, run);
			return (-1);
		}
		bench_hpz_error(b, "hpz_region_create", error);
		return (BENCH_EXIT_FAIL);
	}
	*created = 1;
	reg->flags = flags;
	if ((error = hpz_register(reg)) != 0) {
		bench_hpz_error(b, "hpz_register", error);
		return (BENCH_EXIT_FAIL);
	}
	*registered = 1;
	return (0);
}

/* Undo bench_region_new; rc, or the exit status if unregistering fails. */
static int
bench_region_end(struct bench *b, struct hpz_region *reg, int created,
    int registered)
{
	int	 error, rc = 0;

	if (registered && (error = hpz_unregister(reg)) != 0) {
		bench_hpz_error(b, "hpz_unregister", error);
		rc = BENCH_EXIT_FAIL;
	}
	if (created)
		hpz_region_destroy(reg);
	return (rc);
}

/*
 * One hpzerod touch: a new region registered with the mode's flags
 * (recycled: written with a pattern and hpz_reset; idle: left alone for T
 * first), touched, read back.  0 done, -1 case skipped, else the exit
 * status.  Only the touch and the reset are timed; the background figures
 * of the run go into c->x[][run - 1].
 */
static int
bench_hpz_run(struct bench *b, struct bench_case *c, int run, double *out,
    double *scratch)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	struct hpz_region	 reg;
	struct hpz_status	 s0, sd, se, sb, sa, sv;
	uint64_t		 t0 = 0;
	double			 s, done_ms = NAN, premap_ms = NAN, ms, v;
	double			 x[BENCH_NX];
	int			 error, rc, i, bg = m->bg != BG_NONE;
	int			 created = 0, registered = 0;

	if (m->busy)
		return (bench_hpz_busy_run(b, c, run, out, scratch));
	if (bench_mode_pool(m))
		return (bench_hpz_pool_run(b, c, run, out, scratch));
	for (i = 0; i < BENCH_NX; i++)
		x[i] = NAN;
	memset(&s0, 0, sizeof s0);
	/* A fresh idle region's background work starts at registration. */
	if (bg && !m->recycle) {
		if (bench_st(b, &s0) != 0)
			return (BENCH_EXIT_FAIL);
		t0 = clock_now_ns();
	}
	rc = bench_region_new(b, c, run, &reg, m->flags, &created,
	    &registered);
	if (rc != 0)
		goto out;
	rc = BENCH_EXIT_FAIL;
	if (m->recycle) {
		memset(reg.addr, BENCH_PATTERN, c->size);
		if (bg && bench_st(b, &s0) != 0)
			goto out;
		t0 = clock_now_ns();
		if ((error = hpz_reset(&reg)) != 0) {
			bench_hpz_error(b, "hpz_reset", error);
			goto out;
		}
		c->reset_ms[run - 1] = (double)(clock_now_ns() - t0) / 1e6;
	}
	if (m->idle) {
		if (bench_idle(b, c, t0, &s0, &done_ms, &premap_ms, &sd,
		    &se) != 0)
			goto out;
		x[X_IDLE_MS] = c->idle_ms;
		x[X_DONE_MS] = done_ms;
		x[X_PREMAP_MS] = premap_ms;
		ms = isnan(done_ms) ? c->idle_ms : done_ms;
		if (m->bg == BG_CLEAR)
			v = (double)(sd.bg_bytes_cleared - s0.bg_bytes_cleared);
		else
			v = (double)(sd.bg_pages_populated -
			    s0.bg_pages_populated) * (double)c->page->size;
		x[X_BG_GBS] = bench_rate(v, ms);
	}
	if (bg && bench_st(b, &sb) != 0)
		goto out;
	s = bench_touch(reg.addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	if (bg && bench_st(b, &sa) != 0)
		goto out;
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    out);
	if (bench_verify(b, c, reg.addr, run) != 0)
		goto out;
	rc = 0;
	if (!bg)
		goto out;
	/* After the read-back, so that the fault counters have settled. */
	if (bench_st(b, &sv) != 0) {
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	if (!m->idle) {
		/* onfault-ahead: allocated ahead while the client touched. */
		v = (double)(sa.bg_pages_populated - sb.bg_pages_populated) *
		    (double)c->page->size;
		x[X_BG_GBS] = bench_rate(v, s * 1e3);
	}
	x[X_BG_1CORE] = x[X_BG_GBS] / bench_nt_median(b);
	if (sv.bg_ns != s0.bg_ns)
		x[X_SCRUB_GBS] = (double)(sv.bg_bytes_cleared -
		    s0.bg_bytes_cleared) / (double)(sv.bg_ns - s0.bg_ns);
	x[X_BG_CLEARED] = (double)(sv.bg_pages_cleared - s0.bg_pages_cleared);
	x[X_BG_POPULATED] = (double)(sv.bg_pages_populated -
	    s0.bg_pages_populated);
	x[X_BG_PREMAPPED] = (double)(sv.bg_pages_premapped -
	    s0.bg_pages_premapped);
	x[X_TOUCH_FAULTS] = (double)(sv.faults - sb.faults);
	x[X_TOUCH_MISSING] = (double)(sv.faults_missing - sb.faults_missing);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
out:
	error = bench_region_end(b, &reg, created, registered);
	return (error != 0 ? error : rc);
}

#define BENCH_POOL_WAIT_DEFAULT_MS	1000

/* Pages ready in the daemon's pools of pg's size, and handed out so far. */
static int
bench_pool_level(const struct bench_page *pg, unsigned long long *ready,
    unsigned long long *handed)
{
	struct hpz_pool_info	 info[64];
	size_t			 n, i;

	*ready = *handed = 0;
	if (hpz_pool_status(info, 64, &n) != 0)
		return (-1);
	for (i = 0; i < n && i < 64; i++) {
		if (info[i].page_size != pg->size)
			continue;
		*ready += info[i].ready_pages;
		*handed += info[i].handout_pages;
	}
	return (0);
}

/*
 * A pool mode: wait (untimed) until the pool holds the region's pages, at
 * most -I ms or a second; then hpz_region_create (timed apart), register
 * for pool-register, touch, read back.  0, -1 case skipped, else the exit
 * status.
 */
static int
bench_hpz_pool_run(struct bench *b, struct bench_case *c, int run,
    double *out, double *scratch)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	struct hpz_region	 reg;
	struct hpz_status	 sb, sv;
	unsigned long long	 ready = 0, h0, h1, r1, want;
	struct timespec		 ts = { 0, 5 * 1000 * 1000 };
	uint64_t		 t0, t1, deadline;
	double			 s, x[BENCH_NX], wait_ms;
	int			 i, error, rc = BENCH_EXIT_FAIL, created = 0;
	int			 registered = 0;

	for (i = 0; i < BENCH_NX; i++)
		x[i] = NAN;
	want = c->size / c->page->size;
	wait_ms = b->idle_ms >= 0 ? b->idle_ms : BENCH_POOL_WAIT_DEFAULT_MS;
	t0 = clock_now_ns();
	deadline = t0 + (uint64_t)(wait_ms * 1e6);
	for (;;) {
		if (bench_pool_level(c->page, &ready, &h0) != 0) {
			bench_skip(c, "hpzerod has no pool (hpz_pool_status:"
			    " %s)", hpz_last_error());
			return (-1);
		}
		if (ready >= want || clock_now_ns() >= deadline)
			break;
		nanosleep(&ts, NULL);
	}
	x[X_IDLE_MS] = (double)(clock_now_ns() - t0) / 1e6;
	if (bench_st(b, &sb) != 0)
		return (BENCH_EXIT_FAIL);
	memset(&reg, 0, sizeof reg);
	t0 = clock_now_ns();
	error = hpz_region_create(&reg, c->size, c->page->hpzflag |
	    (m->flags & HPZ_PREMAP));
	t1 = clock_now_ns();
	if (error != 0) {
		if (error == -ENOMEM) {
			bench_skip(c, "no room for the region in the %s pool"
			    " in run %d", c->page->human, run);
			return (-1);
		}
		bench_hpz_error(b, "hpz_region_create", error);
		return (BENCH_EXIT_FAIL);
	}
	created = 1;
	x[X_CREATE_MS] = (double)(t1 - t0) / 1e6;
	if (bench_pool_level(c->page, &r1, &h1) == 0)
		x[X_POOL_PAGES] = (double)(h1 - h0);
	if (strcmp(m->name, "pool-register") == 0) {
		reg.flags = 0;
		if ((error = hpz_register(&reg)) != 0) {
			bench_hpz_error(b, "hpz_register", error);
			goto out;
		}
		registered = 1;
	}
	s = bench_touch(reg.addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    out);
	x[X_CREATE_TOUCH_GBS] = (double)c->size / (s + (double)(t1 - t0) /
	    1e9) / 1e9;
	if (bench_verify(b, c, reg.addr, run) != 0)
		goto out;
	if (bench_st(b, &sv) != 0)
		goto out;
	x[X_TOUCH_FAULTS] = (double)(sv.faults - sb.faults);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
	rc = 0;
out:
	error = bench_region_end(b, &reg, created, registered);
	return (error != 0 ? error : rc);
}

/*
 * busy-recycled: two regions, A and B.  A is recycled and touched alone
 * (quiet: the plain recycled touch), then written again; B is reset, so
 * that the scrubbers have a region's worth of work, and at once A is reset
 * and touched (busy).  out gets the busy figures, c->quiet the quiet ones
 * and the busy/quiet ratios.
 */
static int
bench_hpz_busy_run(struct bench *b, struct bench_case *c, int run,
    double *out, double *scratch)
{
	struct hpz_region	 reg[2];	/* A, B */
	struct hpz_status	 s0, sa, sv;
	double			 q[BENCH_NFIGS], x[BENCH_NX], s;
	uint64_t		 t0, t1;
	int			 created[2] = { 0, 0 }, registered[2] = { 0, 0 };
	int			 error, rc, i, f;

	for (i = 0; i < BENCH_NX; i++)
		x[i] = NAN;
	memset(reg, 0, sizeof reg);
	for (i = 0; i < 2; i++)
		/* A is cleared by its faults, B by the scrubbers. */
		if ((rc = bench_region_new(b, c, run, &reg[i],
		    i == 0 ? HPZ_NO_SCRUB : bench_modes[c->mode].flags,
		    &created[i], &registered[i])) != 0)
			goto out;
	rc = BENCH_EXIT_FAIL;
	memset(reg[1].addr, BENCH_PATTERN, c->size);

	/* Quiet: nothing but A's own recycling. */
	memset(reg[0].addr, BENCH_PATTERN, c->size);
	t0 = clock_now_ns();
	if ((error = hpz_reset(&reg[0])) != 0) {
		bench_hpz_error(b, "hpz_reset", error);
		goto out;
	}
	c->reset_ms[run - 1] = (double)(clock_now_ns() - t0) / 1e6;
	s = bench_touch(reg[0].addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    q);
	if (bench_verify(b, c, reg[0].addr, run) != 0)
		goto out;

	/* Busy: B's garbage is being scrubbed while A faults. */
	memset(reg[0].addr, BENCH_PATTERN, c->size);
	if (bench_st(b, &s0) != 0)
		goto out;
	t0 = clock_now_ns();
	for (i = 1; i >= 0; i--)
		if ((error = hpz_reset(&reg[i])) != 0) {
			bench_hpz_error(b, "hpz_reset", error);
			goto out;
		}
	s = bench_touch(reg[0].addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	t1 = clock_now_ns();
	if (bench_st(b, &sa) != 0)
		goto out;
	/* From B's reset to the end of A's touch. */
	x[X_BG_GBS] = bench_rate((double)(sa.bg_bytes_cleared -
	    s0.bg_bytes_cleared), (double)(t1 - t0) / 1e6);
	bench_figures(s, c->size, scratch, scratch + c->samples, c->samples,
	    out);
	if (bench_verify(b, c, reg[0].addr, run) != 0)
		goto out;
	if (bench_st(b, &sv) != 0)
		goto out;
	rc = 0;

	for (f = 0; f < BENCH_NFIGS; f++) {
		c->quiet[f][0][run - 1] = q[f];
		c->quiet[f][1][run - 1] = out[f] / q[f];
	}
	x[X_BG_1CORE] = x[X_BG_GBS] / bench_nt_median(b);
	if (sa.bg_ns != s0.bg_ns)
		x[X_SCRUB_GBS] = (double)(sa.bg_bytes_cleared -
		    s0.bg_bytes_cleared) / (double)(sa.bg_ns - s0.bg_ns);
	x[X_BG_CLEARED] = (double)(sv.bg_pages_cleared - s0.bg_pages_cleared);
	x[X_TOUCH_BG_CLEARED] = (double)(sa.bg_pages_cleared -
	    s0.bg_pages_cleared);
	x[X_PENDING_AFTER] = (double)sa.bg_pages_pending;
	x[X_TOUCH_FAULTS] = (double)(sv.faults - s0.faults);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
out:
	for (i = 0; i < 2; i++)
		if ((error = bench_region_end(b, &reg[i], created[i],
		    registered[i])) != 0)
			rc = error;
	return (rc);
}

/*
 * This VM backs RAM lazily and the very first touch of a page is very
 * slow: once per page size, touch twice the region (the kernel's and
 * hpzerod's pages) with the kernel, untimed; three times when a mode
 * selected needs two hpzerod regions and the pool has the pages.
 */
static int
bench_warm(struct bench *b, struct bench_case *c)
{
	size_t		 i = (size_t)(c->page - bench_pages), len, n;
	unsigned long long avail;
	double		*scratch;
	void		*p;
	char		 h[32];
	int		 j, times = 2;

	if (b->warmed[i])
		return (0);
	for (j = 0; j < b->nmodes; j++)
		if (bench_modes[b->modes[j]].busy &&
		    bench_pool(c->page, &avail) == 0 &&
		    avail >= 3 * (c->size / c->page->size))
			times = 3;
	len = (size_t)times * c->size;
	bench_progress(c, "warming %s of %s pages with the kernel",
	    size_format(SIZE_FMT_EXACT, len, h, sizeof h), c->page->human);
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
	char			 done[32];
	int			 run, f, rc, error;

	need = (bench_modes[c->mode].busy ? 3 : 2) *
	    (c->size / c->page->size);
	c->idle_ms = bench_idle_time(b, c);
	c->poll_ns = bench_poll_time(b, c);
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
		if (bench_mode_pool(&bench_modes[c->mode]))
			bench_progress(c, "run %d/%d: %.0f pages from the pool"
			    " (waited %.0f ms), hpz_region_create %.2f ms",
			    run, b->runs, c->x[X_POOL_PAGES][run - 1],
			    c->x[X_IDLE_MS][run - 1],
			    c->x[X_CREATE_MS][run - 1]);
		if (bench_modes[c->mode].idle) {
			if (isnan(c->x[X_DONE_MS][run - 1]))
				snprintf(done, sizeof done, "not done");
			else
				snprintf(done, sizeof done, "done in %.1f ms",
				    c->x[X_DONE_MS][run - 1]);
			bench_progress(c, "run %d/%d: idle %.0f ms, background"
			    " work %s, %.2f GB/s, %.0f faults in the touch",
			    run, b->runs, c->idle_ms, done,
			    c->x[X_BG_GBS][run - 1],
			    c->x[X_TOUCH_FAULTS][run - 1]);
		} else if (bench_modes[c->mode].busy)
			bench_progress(c, "run %d/%d: quiet %.2f GB/s, fault"
			    " p99 busy/quiet %.2fx, %.0f pages pending after"
			    " the touch", run, b->runs,
			    c->quiet[FIG_GBS][0][run - 1],
			    c->quiet[FIG_FAULT_P99][1][run - 1],
			    c->x[X_PENDING_AFTER][run - 1]);
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

	t0 = clock_now_ns();
	k->fn(p, BENCH_NT_BYTES);
	clear_fence();
	return ((double)BENCH_NT_BYTES / ((double)(clock_now_ns() - t0) / 1e9) /
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

	t0 = clock_now_ns();
	for (i = 0; i < sizeof d / sizeof d[0]; i++) {
		t1 = clock_now_ns();
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

/*
 * "median (min-max)" of n run figures, each divided by div; format is
 * XF_FIG, XF_RATIO (two decimals) or XF_COUNT (none).
 */
static void
bench_cell(const double *v, int n, int format, double div, char *buf,
    size_t len)
{
	double	 med, min, max;
	char	 a[24], lo[24], hi[24];

	bench_stats(v, n, &med, &min, &max);
	if (isnan(med)) {
		snprintf(buf, len, "-");
		return;
	}
	if (format == XF_COUNT) {
		snprintf(a, sizeof a, "%.0f", med);
		snprintf(lo, sizeof lo, "%.0f", min);
		snprintf(hi, sizeof hi, "%.0f", max);
	} else if (format == XF_RATIO) {
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

/* Print text indented, words wrapped before column width. */
static void
bench_wrap(const char *text, int indent, int width)
{
	const char	*w = text, *e;
	int		 col = 0, n;

	while (*w != '\0') {
		w += strspn(w, " ");
		if (*w == '\0')
			break;
		e = w + strcspn(w, " ");
		n = (int)(e - w);
		if (col > indent && col + 1 + n > width) {
			printf("\n");
			col = 0;
		}
		if (col == 0)
			col = printf("%*s%.*s", indent, "", n, w);
		else
			col += printf(" %.*s", n, w);
		w = e;
	}
	if (col > 0)
		printf("\n");
}

/* One case's block of the table. */
static void
bench_print_case(const struct bench *b, const struct bench_case *c)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	char		 sz[32], label[48], cell[BENCH_NSIDES][96], what[256];
	double		 div;
	size_t		 len;
	int		 f, s, x, r, missing;

	printf("\n%s %s t=%d: %s region%s, %zu fault%s timed a run",
	    c->page->name, m->name, c->threads,
	    size_format(SIZE_FMT_EXACT, c->size, sz, sizeof sz), m->busy ? "s A and B" : "",
	    c->samples, c->samples == 1 ? "" : "s");
	if (c->skipped && c->done == 0) {
		printf("\n  skipped: %s\n", c->why);
		return;
	}
	printf(", %d run%s\n", c->done, c->done == 1 ? "" : "s");
	if (m->what != NULL) {
		len = (size_t)snprintf(what, sizeof what, "%s", m->what);
		if (m->idle && len < sizeof what)
			snprintf(what + len, sizeof what - len,
			    " (idle %.0f ms%s, poll %.2f ms)", c->idle_ms,
			    b->idle_ms >= 0 ? ", -I" : "",
			    (double)c->poll_ns / 1e6);
		bench_wrap(what, 2, 76);
	}
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
			bench_cell(c->fig[f][s], c->done, s == SIDE_RATIO ?
			    XF_RATIO : XF_FIG, div, cell[s], sizeof cell[s]);
		printf("  %-24s %-20s %-20s %s\n", label, cell[SIDE_KERNEL],
		    cell[SIDE_HPZ], cell[SIDE_RATIO]);
	}
	if (m->recycle) {
		bench_cell(c->reset_ms, c->done, XF_FIG, 1.0, cell[0],
		    sizeof cell[0]);
		printf("  %-24s %-20s %s\n", "hpz_reset ms (untimed)", "",
		    cell[0]);
	}
	if (m->busy) {
		printf("  the same run, region A touched alone (quiet) and"
		    " right after B's reset (busy):\n");
		printf("  %-24s %-20s %-20s %s\n", "", "quiet", "busy",
		    "busy/quiet");
		for (f = 0; f < BENCH_NFIGS; f++) {
			if (bench_figs[f].multi && c->samples == 1)
				continue;
			div = bench_figs[f].fault ? c->page->unit_us : 1.0;
			if (f == FIG_GBS)
				snprintf(label, sizeof label, "%s",
				    bench_figs[f].label);
			else
				snprintf(label, sizeof label, "%s %s",
				    bench_figs[f].label, bench_figs[f].fault ?
				    c->page->unit : "ns");
			bench_cell(c->quiet[f][0], c->done, XF_FIG, div,
			    cell[0], sizeof cell[0]);
			bench_cell(c->fig[f][SIDE_HPZ], c->done, XF_FIG, div,
			    cell[1], sizeof cell[1]);
			bench_cell(c->quiet[f][1], c->done, XF_RATIO, 1.0,
			    cell[2], sizeof cell[2]);
			printf("  %-24s %-20s %-20s %s\n", label, cell[0],
			    cell[1], cell[2]);
		}
	}
	for (x = 0; x < BENCH_NX; x++) {
		if (!bench_x_applies(m, x))
			continue;
		if (x == X_DONE_MS)
			snprintf(label, sizeof label, "%s in ms",
			    m->bg == BG_CLEAR ? "all cleared" :
			    "all populated");
		else if (x == X_BG_GBS)
			snprintf(label, sizeof label, "bg %s GB/s",
			    m->bg == BG_CLEAR ? "clear" : "populate");
		else
			snprintf(label, sizeof label, "%s", bench_x[x].label);
		bench_cell(c->x[x], c->done, bench_x[x].format, 1.0, cell[0],
		    sizeof cell[0]);
		for (r = missing = 0; r < c->done; r++)
			missing += !isfinite(c->x[x][r]);
		if (missing == c->done)
			snprintf(cell[0], sizeof cell[0], "%s", x == X_DONE_MS ||
			    x == X_PREMAP_MS ? "not done" : "-");
		else if (missing > 0 && (x == X_DONE_MS || x == X_PREMAP_MS))
			snprintf(cell[0] + strlen(cell[0]), sizeof cell[0] -
			    strlen(cell[0]), ", not done in %d of %d", missing,
			    c->done);
		printf("  %-24s %-20s %s\n", label, "", cell[0]);
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
	if (m->bg == BG_NONE)
		return;
	printf("  background: %llu pages cleared (%llu MiB in %.1f ms of"
	    " clearing), %llu populated,\n  %llu premapped; %.1f ms"
	    " throttled by the budgets\n",
	    c->after.bg_pages_cleared - c->before.bg_pages_cleared,
	    (c->after.bg_bytes_cleared - c->before.bg_bytes_cleared) >> 20,
	    (double)(c->after.bg_ns - c->before.bg_ns) / 1e6,
	    c->after.bg_pages_populated - c->before.bg_pages_populated,
	    c->after.bg_pages_premapped - c->before.bg_pages_premapped,
	    (double)(c->after.bg_throttle_ns - c->before.bg_throttle_ns) /
	    1e6);
}

/*
 * The line of a background case: the rate of its background work against
 * the single-core clear bandwidth ("bg rate 0.8x of 1 core").
 */
static void
bench_print_bg(const struct bench *b, const struct bench_case *c)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	double			 gbs, ratio, nt, lo, hi, done;
	int			 r, missing = 0;

	if (m->bg == BG_NONE || c->done == 0)
		return;
	bench_stats(c->x[X_BG_GBS], c->done, &gbs, &lo, &hi);
	bench_stats(c->x[X_BG_1CORE], c->done, &ratio, &lo, &hi);
	nt = bench_nt_median(b);
	printf("%s %s t=%d: bg rate ", m->name, c->page->name, c->threads);
	if (isnan(gbs))
		printf("not measured");
	else if (isnan(ratio))
		printf("%.2f GB/s (single-core clear bandwidth not measured)",
		    gbs);
	else
		printf("%.2fx of 1 core (%.2f GB/s against %s %.1f GB/s)",
		    ratio, gbs, clear_kernel((enum clear_kind)b->nt_bulk)->name,
		    nt);
	if (m->bg == BG_POPULATE)
		printf(", allocated by fallocate (the kernel zeroes)");
	if (m->idle) {
		bench_stats(c->x[X_DONE_MS], c->done, &done, &lo, &hi);
		for (r = 0; r < c->done; r++)
			missing += isnan(c->x[X_DONE_MS][r]);
		if (missing == c->done)
			printf(", not done in %.0f ms", c->idle_ms);
		else
			printf(", done in %.1f ms%s", done, missing ?
			    " (not in every run)" : "");
	} else if (m->busy)
		printf(", while the busy touch ran");
	else
		printf(", during the touch");
	printf("\n");
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
	if (b->status.cost_rt_ns != 0)
		printf("hpzerod's start-up costs: uffd round trip %.1f us (%s)"
		    ", kernel zeroing %.1f us, kernel first touch %.1f us, its"
		    " clear %.1f us a 2 MiB page;\n  faults intercepted %s,"
		    " stepping aside %s\n", b->status.cost_rt_ns / 1e3,
		    b->status.cost_rt_huge ? "2 MiB" : "4 KiB shmem",
		    b->status.cost_kzero_ns / 1e3,
		    b->status.cost_ktouch_ns / 1e3,
		    b->status.cost_clear_ns / 1e3,
		    b->status.policy_intercept, b->status.policy_step_aside);
	else
		printf("hpzerod's start-up costs: not measured\n");
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
	if (bench_has_bg(b)) {
		printf("\nBackground work (daemon/scrub.c, SCHED_IDLE"
		    " threads): budget ");
		if (b->status.bg_budget_gbs > 0)
			printf("%.1f GB/s", b->status.bg_budget_gbs);
		else
			printf("unlimited");
		printf(" in all, ");
		if (b->status.bg_client_budget_gbs > 0)
			printf("%.1f GB/s", b->status.bg_client_budget_gbs);
		else
			printf("unlimited");
		printf(" a client.\nWhile idle, hpz_status is asked every"
		    " poll (a twentieth of the time one core\nwould take to"
		    " clear the region, 0.1-1 ms; a done time is up to one"
		    " poll\nlate); the daemon's counters are global, so it"
		    " must serve no one else.\nbg done: from hpz_reset (fresh"
		    " regions: hpz_register) until no garbage\npage is"
		    " pending, or the whole region is allocated; bg GB/s:"
		    " bytes cleared\n(allocated) by then over that time;"
		    " scrubber GB/s clearing: bytes over the\ntime the"
		    " scrubbers spent clearing (bg_ns); faults in the touch:"
		    " those the\ndaemon resolved.\n");
	}
	for (i = 0; i < b->ncases; i++)
		bench_print_case(b, &b->cases[i]);
	ratio = bench_nt_ratio(b, &gbs, &nt);
	printf("\n");
	if (!isnan(ratio))
		printf("recycled 2m t=1: hpzerod %.2f GB/s = %.2fx the"
		    " single-core clear bandwidth (%s, %.1f GB/s)\n", gbs,
		    ratio, clear_kernel((enum clear_kind)b->nt_bulk)->name, nt);
	for (i = 0; i < b->ncases; i++)
		bench_print_bg(b, &b->cases[i]);
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
	JADD(o, "cost_round_trip_ns", json_object_new_int64((int64_t)
	    b->status.cost_rt_ns));
	JADD(o, "cost_kernel_zero_ns", json_object_new_int64((int64_t)
	    b->status.cost_kzero_ns));
	JADD(o, "cost_kernel_touch_ns", json_object_new_int64((int64_t)
	    b->status.cost_ktouch_ns));
	JADD(o, "cost_clear_ns", json_object_new_int64((int64_t)
	    b->status.cost_clear_ns));
	JADD(o, "policy_intercept", json_object_new_string(
	    b->status.policy_intercept));
	JADD(o, "policy_step_aside", json_object_new_string(
	    b->status.policy_step_aside));
	JADD(o, "hot_size", json_object_new_int64((int64_t)
	    b->status.hot_size));
	if (bench_jadd_num(o, "bg_budget_gbs", b->status.bg_budget_gbs) != 0 ||
	    bench_jadd_num(o, "bg_client_budget_gbs",
	    b->status.bg_client_budget_gbs) != 0)
		goto nomem;
	JADD(root, "daemon", o);
	if (bench_jadd_num(root, "idle_ms_option", b->idle_ms >= 0 ?
	    b->idle_ms : NAN) != 0)
		goto nomem;

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
		JADD(c, "mode", json_object_new_string(
		    bench_modes[bc->mode].name));
		JADD(c, "region_flags", json_object_new_int64(
		    bench_modes[bc->mode].flags));
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
			if (bench_modes[bc->mode].recycle)
				JADD(c, "reset_ms", bench_jseries(bc->reset_ms,
				    bc->done));
			if (bench_modes[bc->mode].busy) {
				if ((figs = json_object_new_object()) == NULL)
					goto nomem;
				for (f = 0; f < BENCH_NFIGS; f++) {
					if ((fig = json_object_new_object()) ==
					    NULL)
						goto nomem;
					JADD(fig, "quiet", bench_jseries(
					    bc->quiet[f][0], bc->done));
					JADD(fig, "busy_over_quiet",
					    bench_jseries(bc->quiet[f][1],
					    bc->done));
					JADD(figs, bench_figs[f].json,
					    bench_jtake(&fig));
				}
				JADD(c, "quiet_figures", bench_jtake(&figs));
			}
			if (bench_modes[bc->mode].bg != BG_NONE) {
				if ((figs = json_object_new_object()) == NULL)
					goto nomem;
				JADD(figs, "kind", json_object_new_string(
				    bench_modes[bc->mode].bg == BG_CLEAR ?
				    "clear" : "populate"));
				if (bench_modes[bc->mode].idle &&
				    bench_jadd_num(figs, "poll_ms",
				    (double)bc->poll_ns / 1e6) != 0)
					goto nomem;
				for (f = 0; f < BENCH_NX; f++)
					if (bench_x_applies(&bench_modes[
					    bc->mode], f))
						JADD(figs, bench_x[f].json,
						    bench_jseries(bc->x[f],
						    bc->done));
				JADD(c, "background", bench_jtake(&figs));
			}
			if ((o = json_object_new_object()) == NULL)
				goto nomem;
			/* Every counter the daemon counts (hpz-counters.h). */
#define BENCH_DELTA_counter(name) JADD(o, #name, json_object_new_int64(	\
			    (int64_t)(bc->after.name - bc->before.name)));
#define BENCH_DELTA_gauge(name)
#define BENCH_DELTA(name, kind, unit, prom, label, help)		\
			BENCH_DELTA_##kind(name)
#define BENCH_NONE(name, kind, unit, prom, label, help)
			HPZ_COUNTERS_ALL(BENCH_DELTA, BENCH_NONE)
#undef BENCH_NONE
#undef BENCH_DELTA
#undef BENCH_DELTA_gauge
#undef BENCH_DELTA_counter
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
	b.idle_ms = -1;
	opterr = 0;	/* our own words, not getopt's */
	while ((ch = getopt_long(argc, argv, ":hs:S:r:t:p:m:I:", longopts,
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
			/* The warm-up maps more than the size: far from overflow. */
			if (size_parse_max(optarg, SIZE_MAX / 8, &b.size) != 0)
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
				bench_usage_error("-m: want distinct modes"
				    " (see below), comma separated, or all,"
				    " not '%s'", optarg);
			break;
		case 'I':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    v < 0 || v > BENCH_IDLE_MAX_MS)
				bench_usage_error("-I: want 0 to %d ms, not"
				    " '%s'", BENCH_IDLE_MAX_MS, optarg);
			b.idle_ms = (double)v;
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
				for (f = 0; f < BENCH_NX; f++)
					c->x[f] = bench_alloc((size_t)b.runs *
					    sizeof(double));
				for (f = 0; f < BENCH_NFIGS; f++)
					for (s = 0; s < 2; s++)
						c->quiet[f][s] = bench_alloc(
						    (size_t)b.runs *
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
		for (f = 0; f < BENCH_NX; f++)
			free(b.cases[i].x[f]);
		for (f = 0; f < BENCH_NFIGS; f++)
			for (s = 0; s < 2; s++)
				free(b.cases[i].quiet[f][s]);
	}
	free(b.cases);
	return (rc);
}
