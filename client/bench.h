/*
 * bench.h - hpz-bench's private header: the pages, modes and figures it
 * knows, a case and what its runs measured, and the functions of its
 * files, from the bottom up: bench-table.c (the pages, modes and figures
 * it knows), bench-touch.c (the timed touch, the read-back, the clock and
 * the single-core clear bandwidth), bench-run.c (the modes, the runs of a
 * case), bench-text.c (the table for people), bench-json.c (the JSON
 * object, json-c) and hpz-bench.c (the command line, main).  A file calls
 * only the ones before it (tests/lint.sh checks that no two files call
 * each other).
 */
#ifndef HPZ_BENCH_H
#define HPZ_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hpz.h"
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
#define BENCH_POOL_WAIT_DEFAULT_MS 1000	/* pool modes: for the pool to fill */

/* A page size the benchmark knows. */
struct bench_page {
	const char	*name;		/* "2m", on the command line */
	const char	*human;		/* "2 MiB" */
	size_t		 size;
	unsigned int	 hpzflag;	/* for hpz_region_create */
	unsigned int	 mfdflag;	/* the kernel's memfd: MFD_HUGE_* */
	const char	*unit;		/* fault latencies are printed in */
	double		 unit_us;	/* microseconds per unit */
};

#define BENCH_NPAGES	2
extern const struct bench_page bench_pages[BENCH_NPAGES];

/* What the daemon does in the background, and what we measure of it. */
enum {
	BG_NONE,		/* the first two modes: nothing printed */
	BG_CLEAR,		/* scrubbers clear garbage pages */
	BG_POPULATE,		/* scrubbers allocate: the kernel zeroes */
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

#define BENCH_NMODES	12
extern const struct bench_mode bench_modes[BENCH_NMODES];
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

/* A figure of a touch: its JSON key, its label in the table. */
struct bench_fig {
	const char	*json;
	const char	*label;
	int		 fault;		/* printed in the page's fault unit */
	int		 multi;		/* only with more than one sample */
};
extern const struct bench_fig bench_figs[BENCH_NFIGS];

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

/* A figure of the background work: JSON key, label, XF_* format. */
struct bench_xfig {
	const char	*json;
	const char	*label;
	int		 format;	/* XF_* */
};
extern const struct bench_xfig bench_x[BENCH_NX];

enum {
	SIDE_KERNEL,
	SIDE_HPZ,
	SIDE_RATIO,		/* hpzerod / kernel of the same run */
	BENCH_NSIDES
};
extern const char *const bench_sides[BENCH_NSIDES];

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
	double			*bound_ms;	/* recycled, a page over an
						   extent: bench_touch_bound */
	double			*bound_ratio;	/* bound_ms / kernel stall */
	double			*bound_hpz;	/* hpzerod stall / bound_ms */
	int			 bound_threads;	/* 0: not measured */
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
	int			 pages[BENCH_NPAGES];	/* indexes in bench_pages */
	int			 npages;
	int			 modes[BENCH_NMODES];	/* in bench_modes */
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
	char			 cpu[128];	/* its model name */
};

/* hpz-bench.c */
int		 bench_mode_pool(const struct bench_mode *);
int		 bench_x_applies(const struct bench_mode *, int);

/* bench-run.c */
void		 bench_run_error(const struct bench *, const char *, int);
int		 bench_run_case(struct bench *, struct bench_case *);

/* bench-touch.c */
void		 bench_touch_share(size_t, size_t, int, int, size_t *,
		    size_t *);
size_t		 bench_touch_pieces(size_t, size_t, size_t);
double		 bench_touch(void *, size_t, size_t, int, double *, double *);
void		 bench_touch_figures(double, size_t, double *, double *,
		    size_t, double *);
void		*bench_touch_map(const struct bench_page *, size_t);
int		 bench_touch_verify(struct bench *, const struct bench_case *,
		    const unsigned char *, int);
double		 bench_touch_bound(void *, size_t, int, size_t,
		    const struct clear_kernel *);
void		 bench_touch_nt(struct bench *);
double		 bench_touch_nt_median(const struct bench *);
double		 bench_touch_nt_ratio(const struct bench *, double *, double *);
double		 bench_touch_clock(void);

/* bench-text.c */
void		 bench_text(const struct bench *);

/* bench-json.c */
int		 bench_json(const struct bench *);

#endif /* HPZ_BENCH_H */
