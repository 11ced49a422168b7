/*
 * bench-run.c - the runs of a case: the kernel's reference touch, then
 * hpzerod's region set up as the mode says (recycled, fresh, idle while the
 * scrubbers work, busy beside a second region, a file of the pool), each
 * beside the other in the same run, and the warm-up before them.
 */
#include <errno.h>
#include <math.h>	/* isnan, NAN: macros, no libm */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "size.h"
#include "clock.h"
#include "cli.h"
#include "bench.h"

static void	bench_run_progress(const struct bench_case *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static int	bench_run_skip(struct bench_case *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static int	bench_run_free_pages(const struct bench_page *,
		    unsigned long long *);
static int	bench_run_wait_pool(struct bench_case *, unsigned long long);
static int	bench_run_kernel(struct bench_case *, int, double *,
		    double *);
static double	bench_run_idle_time(const struct bench *,
		    const struct bench_case *);
static uint64_t	bench_run_poll_time(const struct bench *,
		    const struct bench_case *);
static void	bench_run_sleep_until(uint64_t);
static int	bench_run_status(const struct bench *, struct hpz_status *);
static double	bench_run_rate(double, double);
static int	bench_run_idle(struct bench *, struct bench_case *, uint64_t,
		    const struct hpz_status *, double *, double *,
		    struct hpz_status *, struct hpz_status *);
static int	bench_run_create(struct bench *, struct bench_case *, int,
		    struct hpz_region *, unsigned int, const char *);
static int	bench_run_region_new(struct bench *, struct bench_case *, int,
		    struct hpz_region *, unsigned int, int *, int *);
static int	bench_run_region_end(struct bench *, struct hpz_region *, int,
		    int);
static void	bench_run_scrub_figures(const struct bench *, double *,
		    const struct hpz_status *, const struct hpz_status *,
		    const struct hpz_status *);
static int	bench_run_hpz(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_run_pool_level(const struct bench_page *,
		    unsigned long long *, unsigned long long *);
static int	bench_run_pool(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_run_busy(struct bench *, struct bench_case *, int,
		    double *, double *);
static int	bench_run_warm(struct bench *, struct bench_case *);
static int	bench_run_bound_threads(const struct bench *,
		    const struct bench_case *);

/* A progress line on stderr, so that stdout holds only the results. */
static void
bench_run_progress(const struct bench_case *c, const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "case %s %s t=%d: ", c->page->name,
	    bench_modes[c->mode].name, c->threads);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * A libhpz call failed: say why, in the daemon's words when it has some.
 * ENOENT means "no socket" only from a call that connects first.
 */
void
bench_run_error(const struct bench *b, const char *call, int err)
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
bench_run_skip(struct bench_case *c, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->skipped = 1;
	bench_run_progress(c, "skipped: %s", c->why);
	return (0);
}

/* Free pages of a size nobody has reserved yet; -1 if there is no pool. */
static int
bench_run_free_pages(const struct bench_page *pg, unsigned long long *avail)
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
 * Enough free pages for a run?  The last run's pages may take a moment to
 * come back (the daemon closes its side of a region after us): wait a bit.
 * 1 when there are, 0 when the case is now skipped.
 */
static int
bench_run_wait_pool(struct bench_case *c, unsigned long long need)
{
	unsigned long long	 avail = 0;
	struct timespec		 ts = { 0, 10 * 1000 * 1000 };
	uint64_t		 t0 = clock_now_ns();
	int			 waited = 0;

	for (;;) {
		if (bench_run_free_pages(c->page, &avail) != 0) {
			bench_run_skip(c,
			    "no %s huge page pool on this machine",
			    c->page->human);
			return (0);
		}
		if (avail >= need)
			break;
		if (clock_now_ns() - t0 > BENCH_POOL_WAIT_MS * 1000000ULL) {
			bench_run_skip(c, "needs %llu free %s pages, have %llu",
			    need, c->page->human, avail);
			return (0);
		}
		waited = 1;
		nanosleep(&ts, NULL);
	}
	if (waited)
		bench_run_progress(c, "waited %.0f ms for %llu free pages",
		    (double)(clock_now_ns() - t0) / 1e6, need);
	return (1);
}

/* One kernel reference touch; its figures into out.  -1: case skipped. */
static int
bench_run_kernel(struct bench_case *c, int run, double *out,
    double *scratch)
{
	void	*p;
	double	 s;

	if ((p = bench_touch_map(c->page, c->size)) == NULL) {
		if (errno == ENOMEM) {
			bench_run_skip(c, "the %s pool ran out in run %d (used"
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
	bench_touch_figures(s, c->size, scratch, scratch + c->samples,
	    c->samples, out);
	return (0);
}

/*
 * The idle time T of a case, in ms: -I, else twice the time one core
 * takes to clear the region (the daemon's own start-up figure when we
 * could not measure it), at least BENCH_IDLE_MIN_MS.
 */
static double
bench_run_idle_time(const struct bench *b, const struct bench_case *c)
{
	double	 gbs, ms;

	if (b->idle_ms >= 0)
		return (b->idle_ms);
	gbs = bench_touch_nt_median(b);
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
bench_run_poll_time(const struct bench *b, const struct bench_case *c)
{
	double	 gbs, ns;

	gbs = bench_touch_nt_median(b);
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
bench_run_sleep_until(uint64_t ns)
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
bench_run_status(const struct bench *b, struct hpz_status *st)
{
	int	 error;

	if ((error = hpz_status(st)) != 0) {
		bench_run_error(b, "hpz_status", error);
		return (-1);
	}
	return (0);
}

/* GB/s of bytes in ms; NAN without a time. */
static double
bench_run_rate(double bytes, double ms)
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
bench_run_idle(struct bench *b, struct bench_case *c, uint64_t t0,
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
		bench_run_sleep_until(next);
		if (bench_run_status(b, &st) != 0)
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
	bench_run_sleep_until(deadline);
	if (bench_run_status(b, end) != 0)
		return (-1);
	if (want_done)
		*at_done = *end;
	return (0);
}

/*
 * hpz_region_create of the case's size and page, with flags, for run:
 * 0, -1 case skipped (the pool has no room for what), else the exit
 * status.
 */
static int
bench_run_create(struct bench *b, struct bench_case *c, int run,
    struct hpz_region *reg, unsigned int flags, const char *what)
{
	int	 error;

	memset(reg, 0, sizeof *reg);
	if ((error = hpz_region_create(reg, c->size, c->page->hpzflag |
	    flags)) == 0)
		return (0);
	if (error == -ENOMEM) {
		bench_run_skip(c, "no room for %s in the %s pool in run %d",
		    what, c->page->human, run);
		return (-1);
	}
	bench_run_error(b, "hpz_region_create", error);
	return (BENCH_EXIT_FAIL);
}

/*
 * Create a region of the case's size for run and register it with flags.
 * 0 done, -1 case skipped, else the exit status; *created, *registered
 * say what to undo.
 */
static int
bench_run_region_new(struct bench *b, struct bench_case *c, int run,
    struct hpz_region *reg, unsigned int flags, int *created,
    int *registered)
{
	int	 error;

	/* Fresh memory, as these modes mean: the pool has modes of its own. */
	if ((error = bench_run_create(b, c, run, reg, HPZ_NO_POOL,
	    "the hpzerod region")) != 0)
		return (error);
	*created = 1;
	reg->flags = flags;
	if ((error = hpz_register(reg)) != 0) {
		bench_run_error(b, "hpz_register", error);
		return (BENCH_EXIT_FAIL);
	}
	*registered = 1;
	return (0);
}

/* Undo bench_run_region_new; rc, or the exit status if unregistering fails. */
static int
bench_run_region_end(struct bench *b, struct hpz_region *reg, int created,
    int registered)
{
	int	 error, rc = 0;

	if (registered && (error = hpz_unregister(reg)) != 0) {
		bench_run_error(b, "hpz_unregister", error);
		rc = BENCH_EXIT_FAIL;
	}
	if (created)
		hpz_region_destroy(reg);
	return (rc);
}

/*
 * The scrubbers' figures of a run from the daemon's counters: at the
 * start (s0), when their work was timed to (at), after the read-back (sv).
 */
static void
bench_run_scrub_figures(const struct bench *b, double *x,
    const struct hpz_status *s0, const struct hpz_status *at,
    const struct hpz_status *sv)
{
	x[X_BG_1CORE] = x[X_BG_GBS] / bench_touch_nt_median(b);
	if (at->bg_ns != s0->bg_ns)
		x[X_SCRUB_GBS] = (double)(at->bg_bytes_cleared -
		    s0->bg_bytes_cleared) / (double)(at->bg_ns - s0->bg_ns);
	x[X_BG_CLEARED] = (double)(sv->bg_pages_cleared -
	    s0->bg_pages_cleared);
}

/*
 * One hpzerod touch: a new region registered with the mode's flags
 * (recycled: written with a pattern and hpz_reset; idle: left alone for T
 * first), touched, read back.  0 done, -1 case skipped, else the exit
 * status.  Only the touch and the reset are timed; the background figures
 * of the run go into c->x[][run - 1].
 */
static int
bench_run_hpz(struct bench *b, struct bench_case *c, int run, double *out,
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
		return (bench_run_busy(b, c, run, out, scratch));
	if (bench_mode_pool(m))
		return (bench_run_pool(b, c, run, out, scratch));
	for (i = 0; i < BENCH_NX; i++)
		x[i] = NAN;
	memset(&s0, 0, sizeof s0);
	/* A fresh idle region's background work starts at registration. */
	if (bg && !m->recycle) {
		if (bench_run_status(b, &s0) != 0)
			return (BENCH_EXIT_FAIL);
		t0 = clock_now_ns();
	}
	rc = bench_run_region_new(b, c, run, &reg, m->flags, &created,
	    &registered);
	if (rc != 0)
		goto out;
	rc = BENCH_EXIT_FAIL;
	if (m->recycle) {
		memset(reg.addr, BENCH_PATTERN, c->size);
		if (bg && bench_run_status(b, &s0) != 0)
			goto out;
		t0 = clock_now_ns();
		if ((error = hpz_reset(&reg)) != 0) {
			bench_run_error(b, "hpz_reset", error);
			goto out;
		}
		c->reset_ms[run - 1] = (double)(clock_now_ns() - t0) / 1e6;
	}
	if (m->idle) {
		if (bench_run_idle(b, c, t0, &s0, &done_ms, &premap_ms, &sd,
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
		x[X_BG_GBS] = bench_run_rate(v, ms);
	}
	if (bg && bench_run_status(b, &sb) != 0)
		goto out;
	s = bench_touch(reg.addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	if (bg && bench_run_status(b, &sa) != 0)
		goto out;
	bench_touch_figures(s, c->size, scratch, scratch + c->samples,
	    c->samples, out);
	if (bench_touch_verify(b, c, reg.addr, run) != 0)
		goto out;
	c->bound_ms[run - 1] = NAN;
	if (c->bound_threads > 0)
		c->bound_ms[run - 1] = bench_touch_bound(reg.addr,
		    c->page->size, c->bound_threads,
		    (size_t)b->status.extent_max,
		    clear_kernel_by_name(b->status.clear_kernel));
	rc = 0;
	if (!bg)
		goto out;
	/* After the read-back, so that the fault counters have settled. */
	if (bench_run_status(b, &sv) != 0) {
		rc = BENCH_EXIT_FAIL;
		goto out;
	}
	if (!m->idle) {
		/* onfault-ahead: allocated ahead while the client touched. */
		v = (double)(sa.bg_pages_populated - sb.bg_pages_populated) *
		    (double)c->page->size;
		x[X_BG_GBS] = bench_run_rate(v, s * 1e3);
	}
	bench_run_scrub_figures(b, x, &s0, &sv, &sv);
	x[X_BG_POPULATED] = (double)(sv.bg_pages_populated -
	    s0.bg_pages_populated);
	x[X_BG_PREMAPPED] = (double)(sv.bg_pages_premapped -
	    s0.bg_pages_premapped);
	x[X_TOUCH_FAULTS] = (double)(sv.faults - sb.faults);
	x[X_TOUCH_MISSING] = (double)(sv.faults_missing - sb.faults_missing);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
out:
	error = bench_run_region_end(b, &reg, created, registered);
	return (error != 0 ? error : rc);
}

/* Pages ready in the daemon's pools of pg's size, and handed out so far. */
static int
bench_run_pool_level(const struct bench_page *pg, unsigned long long *ready,
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
bench_run_pool(struct bench *b, struct bench_case *c, int run,
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
		if (bench_run_pool_level(c->page, &ready, &h0) != 0) {
			bench_run_skip(c,
			    "hpzerod has no pool (hpz_pool_status:"
			    " %s)", hpz_last_error());
			return (-1);
		}
		if (ready >= want || clock_now_ns() >= deadline)
			break;
		nanosleep(&ts, NULL);
	}
	x[X_IDLE_MS] = (double)(clock_now_ns() - t0) / 1e6;
	if (bench_run_status(b, &sb) != 0)
		return (BENCH_EXIT_FAIL);
	t0 = clock_now_ns();
	error = bench_run_create(b, c, run, &reg, m->flags & HPZ_PREMAP,
	    "the region");
	t1 = clock_now_ns();
	if (error != 0)
		return (error);
	created = 1;
	x[X_CREATE_MS] = (double)(t1 - t0) / 1e6;
	if (bench_run_pool_level(c->page, &r1, &h1) == 0)
		x[X_POOL_PAGES] = (double)(h1 - h0);
	if (strcmp(m->name, "pool-register") == 0) {
		reg.flags = 0;
		if ((error = hpz_register(&reg)) != 0) {
			bench_run_error(b, "hpz_register", error);
			goto out;
		}
		registered = 1;
	}
	s = bench_touch(reg.addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	bench_touch_figures(s, c->size, scratch, scratch + c->samples,
	    c->samples, out);
	x[X_CREATE_TOUCH_GBS] = (double)c->size / (s + (double)(t1 - t0) /
	    1e9) / 1e9;
	if (bench_touch_verify(b, c, reg.addr, run) != 0)
		goto out;
	if (bench_run_status(b, &sv) != 0)
		goto out;
	x[X_TOUCH_FAULTS] = (double)(sv.faults - sb.faults);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
	rc = 0;
out:
	error = bench_run_region_end(b, &reg, created, registered);
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
bench_run_busy(struct bench *b, struct bench_case *c, int run,
    double *out, double *scratch)
{
	struct hpz_region	 reg[2];	/* A, B */
	struct hpz_status	 s0, sa, sv;
	double			 q[BENCH_NFIGS], x[BENCH_NX], s;
	uint64_t		 t0, t1;
	int			 created[2] = { 0, 0 }, registered[2] = { 0,
	    0 };
	int			 error, rc, i, f;

	for (i = 0; i < BENCH_NX; i++)
		x[i] = NAN;
	memset(reg, 0, sizeof reg);
	for (i = 0; i < 2; i++)
		/* A is cleared by its faults, B by the scrubbers. */
		if ((rc = bench_run_region_new(b, c, run, &reg[i],
		    i == 0 ? HPZ_NO_SCRUB : bench_modes[c->mode].flags,
		    &created[i], &registered[i])) != 0)
			goto out;
	rc = BENCH_EXIT_FAIL;
	memset(reg[1].addr, BENCH_PATTERN, c->size);

	/* Quiet: nothing but A's own recycling. */
	memset(reg[0].addr, BENCH_PATTERN, c->size);
	t0 = clock_now_ns();
	if ((error = hpz_reset(&reg[0])) != 0) {
		bench_run_error(b, "hpz_reset", error);
		goto out;
	}
	c->reset_ms[run - 1] = (double)(clock_now_ns() - t0) / 1e6;
	s = bench_touch(reg[0].addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	bench_touch_figures(s, c->size, scratch, scratch + c->samples,
	    c->samples, q);
	if (bench_touch_verify(b, c, reg[0].addr, run) != 0)
		goto out;

	/* Busy: B's garbage is being scrubbed while A faults. */
	memset(reg[0].addr, BENCH_PATTERN, c->size);
	if (bench_run_status(b, &s0) != 0)
		goto out;
	t0 = clock_now_ns();
	for (i = 1; i >= 0; i--)
		if ((error = hpz_reset(&reg[i])) != 0) {
			bench_run_error(b, "hpz_reset", error);
			goto out;
		}
	s = bench_touch(reg[0].addr, c->size, c->page->size, c->threads,
	    scratch, scratch + c->samples);
	t1 = clock_now_ns();
	if (bench_run_status(b, &sa) != 0)
		goto out;
	/* From B's reset to the end of A's touch. */
	x[X_BG_GBS] = bench_run_rate((double)(sa.bg_bytes_cleared -
	    s0.bg_bytes_cleared), (double)(t1 - t0) / 1e6);
	bench_touch_figures(s, c->size, scratch, scratch + c->samples,
	    c->samples, out);
	if (bench_touch_verify(b, c, reg[0].addr, run) != 0)
		goto out;
	if (bench_run_status(b, &sv) != 0)
		goto out;
	rc = 0;

	for (f = 0; f < BENCH_NFIGS; f++) {
		c->quiet[f][0][run - 1] = q[f];
		c->quiet[f][1][run - 1] = out[f] / q[f];
	}
	bench_run_scrub_figures(b, x, &s0, &sa, &sv);
	x[X_TOUCH_BG_CLEARED] = (double)(sa.bg_pages_cleared -
	    s0.bg_pages_cleared);
	x[X_PENDING_AFTER] = (double)sa.bg_pages_pending;
	x[X_TOUCH_FAULTS] = (double)(sv.faults - s0.faults);
	for (i = 0; i < BENCH_NX; i++)
		c->x[i][run - 1] = x[i];
out:
	for (i = 0; i < 2; i++)
		if ((error = bench_run_region_end(b, &reg[i], created[i],
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
bench_run_warm(struct bench *b, struct bench_case *c)
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
		    bench_run_free_pages(c->page, &avail) == 0 &&
		    avail >= 3 * (c->size / c->page->size))
			times = 3;
	len = (size_t)times * c->size;
	bench_run_progress(c, "warming %s of %s pages with the kernel",
	    size_format(SIZE_FMT_EXACT, len, h, sizeof h), c->page->human);
	if ((p = bench_touch_map(c->page, len)) == NULL) {
		if (errno == ENOMEM)
			return (bench_run_skip(c, "the %s pool ran out during"
			    " the warm-up", c->page->human));
		fprintf(stderr, "hpz-bench: mmap for the warm-up: %s\n",
		    strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	n = len / c->page->size + (size_t)c->threads;
	scratch = cli_alloc(2 * n * sizeof *scratch);
	bench_touch(p, len, c->page->size, c->threads, scratch, scratch + n);
	free(scratch);
	if (munmap(p, len) == -1) {
		fprintf(stderr, "hpz-bench: munmap: %s\n", strerror(errno));
		exit(BENCH_EXIT_FAIL);
	}
	b->warmed[i] = 1;
	return (0);
}

/*
 * Threads for the all-worker clear of a page (bench_touch_bound): the
 * daemon's workers, where its stall on a garbage page is one page cleared
 * by all of them ("recycled": no background clear, one page a fault,
 * shared out because it is larger than an extent) and its bulk kernel
 * runs here; else 0, not measured.
 */
static int
bench_run_bound_threads(const struct bench *b, const struct bench_case *c)
{
	const struct bench_mode		*m = &bench_modes[c->mode];
	const struct clear_kernel	*k;

	if (c->mode != BENCH_MODE_RECYCLED || m->bg != BG_NONE ||
	    b->status.workers == 0 || b->status.extent_max == 0 ||
	    c->page->size <= b->status.extent_max ||
	    b->status.workers > BENCH_MAX_THREADS)
		return (0);
	k = clear_kernel_by_name(b->status.clear_kernel);
	if (k == NULL || !clear_supported(k->kind))
		return (0);
	return ((int)b->status.workers);
}

/* All runs of one case.  0 done or skipped, else the exit status. */
int
bench_run_case(struct bench *b, struct bench_case *c)
{
	unsigned long long	 need, avail;
	double			 k[BENCH_NFIGS], h[BENCH_NFIGS], *scratch;
	char			 done[32];
	int			 run, f, rc, error;

	need = (bench_modes[c->mode].busy ? 3 : 2) *
	    (c->size / c->page->size);
	c->idle_ms = bench_run_idle_time(b, c);
	c->bound_threads = bench_run_bound_threads(b, c);
	c->poll_ns = bench_run_poll_time(b, c);
	if (bench_run_free_pages(c->page, &avail) != 0)
		return (bench_run_skip(c,
		    "no %s huge page pool on this machine",
		    c->page->human));
	if (avail < need)
		return (bench_run_skip(c, "needs %llu free %s pages, have %llu",
		    need, c->page->human, avail));
	if (bench_run_warm(b, c) != 0 || c->skipped)
		return (0);
	if ((error = hpz_status(&c->before)) != 0) {
		bench_run_error(b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}

	scratch = cli_alloc(2 * c->samples * sizeof *scratch);
	for (run = 1; run <= b->runs; run++) {
		if (!bench_run_wait_pool(c, need))
			break;
		/*
		 * Kernel first in odd runs, hpzerod first in even ones: the
		 * second touch of a run gets the pages the first gave back,
		 * and neither side should always be the second.
		 */
		if (run % 2 == 1 && bench_run_kernel(c, run, k, scratch) != 0)
			break;
		rc = bench_run_hpz(b, c, run, h, scratch);
		if (rc == -1)
			break;
		if (rc == 0 && run % 2 == 0 &&
		    (!bench_run_wait_pool(c, need) ||
		    bench_run_kernel(c, run, k, scratch) != 0))
			break;
		if (rc != 0) {
			free(scratch);
			return (rc);
		}
		c->bound_ratio[run - 1] = c->bound_ms[run - 1] * 1e3 /
		    k[FIG_FAULT_P50];
		c->bound_hpz[run - 1] = h[FIG_FAULT_P50] /
		    (c->bound_ms[run - 1] * 1e3);
		for (f = 0; f < BENCH_NFIGS; f++) {
			c->fig[f][SIDE_KERNEL][run - 1] = k[f];
			c->fig[f][SIDE_HPZ][run - 1] = h[f];
			c->fig[f][SIDE_RATIO][run - 1] = h[f] / k[f];
		}
		c->done = run;
		bench_run_progress(c,
		    "run %d/%d: kernel %.2f GB/s, hpzerod %.2f"
		    " GB/s (%.2fx), fault p50 %.1f vs %.1f %s", run, b->runs,
		    k[FIG_GBS], h[FIG_GBS], h[FIG_GBS] / k[FIG_GBS],
		    k[FIG_FAULT_P50] / c->page->unit_us,
		    h[FIG_FAULT_P50] / c->page->unit_us, c->page->unit);
		if (bench_mode_pool(&bench_modes[c->mode]))
			bench_run_progress(c,
			    "run %d/%d: %.0f pages from the pool"
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
			bench_run_progress(c,
			    "run %d/%d: idle %.0f ms, background"
			    " work %s, %.2f GB/s, %.0f faults in the touch",
			    run, b->runs, c->idle_ms, done,
			    c->x[X_BG_GBS][run - 1],
			    c->x[X_TOUCH_FAULTS][run - 1]);
		} else if (bench_modes[c->mode].busy)
			bench_run_progress(c,
			    "run %d/%d: quiet %.2f GB/s, fault"
			    " p99 busy/quiet %.2fx, %.0f pages pending after"
			    " the touch", run, b->runs,
			    c->quiet[FIG_GBS][0][run - 1],
			    c->quiet[FIG_FAULT_P99][1][run - 1],
			    c->x[X_PENDING_AFTER][run - 1]);
	}
	free(scratch);
	if ((error = hpz_status(&c->after)) != 0) {
		bench_run_error(b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}
	return (0);
}
