/*
 * bench-text.c - hpz-bench's table for people: the machine and the daemon,
 * then each case's figures as median (min-max) over the runs, kernel and
 * hpzerod side by side.
 */
#include <math.h>	/* isnan, isfinite, NAN: macros, no libm */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "size.h"
#include "clock.h"
#include "cli.h"
#include "bench.h"

static void	bench_text_fmt(double, char *, size_t);
static void	bench_text_cell(const double *, int, int, double, char *,
		    size_t);
static void	bench_text_wrap(const char *, int, int);
static int	bench_text_has_bg(const struct bench *);
static void	bench_text_label(const struct bench_case *, int, int, char *,
		    size_t);
static int	bench_text_below_clock(const double *, int, int);
static void	bench_text_figs(const struct bench_case *, int);
static void	bench_text_case(const struct bench *,
		    const struct bench_case *);
static void	bench_text_bg(const struct bench *,
		    const struct bench_case *);

/* A figure with three significant digits or so. */
static void
bench_text_fmt(double v, char *buf, size_t len)
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
bench_text_cell(const double *v, int n, int format, double div, char *buf,
    size_t len)
{
	double	 med, min, max;
	char	 a[24], lo[24], hi[24];

	cli_stats(v, n, &med, &min, &max);
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
		bench_text_fmt(med / div, a, sizeof a);
		bench_text_fmt(min / div, lo, sizeof lo);
		bench_text_fmt(max / div, hi, sizeof hi);
	}
	snprintf(buf, len, "%s (%s-%s)", a, lo, hi);
}

/* Print text indented, words wrapped before column width. */
static void
bench_text_wrap(const char *text, int indent, int width)
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

/* Does any case measure background work? */
static int
bench_text_has_bg(const struct bench *b)
{
	int	 i;

	for (i = 0; i < b->ncases; i++)
		if (bench_modes[b->cases[i].mode].bg != BG_NONE)
			return (1);
	return (0);
}

/*
 * The label of figure f in the page's unit; one (the main table) names
 * the figures of a case with one fault a run for what they are.
 */
static void
bench_text_label(const struct bench_case *c, int f, int one, char *label,
    size_t len)
{
	if (one && c->samples == 1 && f == FIG_FAULT_P50)
		snprintf(label, len, "fault stall %s", c->page->unit);
	else if (one && c->samples == 1 && f == FIG_READ_P50)
		snprintf(label, len, "read-after-fault ns");
	else if (f == FIG_GBS)
		snprintf(label, len, "%s", bench_figs[f].label);
	else
		snprintf(label, len, "%s %s", bench_figs[f].label,
		    bench_figs[f].fault ? c->page->unit : "ns");
}

/*
 * Is the median of n latencies (us) of figure f shorter than twice what
 * the clock can tell?  Then the access took no fault, and the figure (and
 * any ratio of it) is the timer's, not the daemon's.
 */
static int
bench_text_below_clock(const double *v, int n, int f)
{
	double	 med, min, max;

	if (!bench_figs[f].fault)
		return (0);
	cli_stats(v, n, &med, &min, &max);
	return (!isnan(med) && med * 1e3 < 2.0 *
	    (double)clock_resolution_ns());
}

/*
 * The figures of a case, one a row: kernel, hpzerod and their ratio, or
 * for busy the touch alone (quiet), beside the scrubbers (busy) and the
 * ratio of the two.
 */
static void
bench_text_figs(const struct bench_case *c, int busy)
{
	static const char *const head[2][3] = {
		{ "kernel", "hpzerod", "hpzerod/kernel" },
		{ "quiet", "busy", "busy/quiet" },
	};
	const double	*col[3];
	char		 label[48], cell[3][96];
	double		 div;
	int		 f, s, below[2];

	printf("  %-24s %-20s %-20s %s\n", "", head[busy][0], head[busy][1],
	    head[busy][2]);
	for (f = 0; f < BENCH_NFIGS; f++) {
		if (bench_figs[f].multi && c->samples == 1)
			continue;
		div = bench_figs[f].fault ? c->page->unit_us : 1.0;
		bench_text_label(c, f, !busy, label, sizeof label);
		col[0] = busy ? c->quiet[f][0] : c->fig[f][SIDE_KERNEL];
		col[1] = c->fig[f][SIDE_HPZ];
		col[2] = busy ? c->quiet[f][1] : c->fig[f][SIDE_RATIO];
		for (s = 0; s < 2; s++)
			below[s] = bench_text_below_clock(col[s], c->done, f);
		for (s = 0; s < 3; s++)
			bench_text_cell(col[s], c->done, s == 2 ? XF_RATIO :
			    XF_FIG, div, cell[s], sizeof cell[s]);
		/* No fault to time: say so, and no ratio of it. */
		for (s = 0; s < 2; s++)
			if (below[s])
				snprintf(cell[s], sizeof cell[s], "no fault"
				    " (< clock)");
		if (below[0] || below[1])
			snprintf(cell[2], sizeof cell[2], "-");
		printf("  %-24s %-20s %-20s %s\n", label, cell[0], cell[1],
		    cell[2]);
	}
}

/* One case's block of the table. */
static void
bench_text_case(const struct bench *b, const struct bench_case *c)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	char		 sz[32], label[48], cell[96], what[256];
	size_t		 len;
	int		 x, r, missing;

	printf("\n%s %s t=%d: %s region%s, %zu fault%s timed a run",
	    c->page->name, m->name, c->threads,
	    size_format(SIZE_FMT_EXACT, c->size, sz, sizeof sz),
	    m->busy ? "s A and B" : "",
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
		bench_text_wrap(what, 2, 76);
	}
	if (c->skipped)
		printf("  (the remaining runs were skipped: %s)\n", c->why);
	bench_text_figs(c, 0);
	if (m->recycle) {
		bench_text_cell(c->reset_ms, c->done, XF_FIG, 1.0, cell,
		    sizeof cell);
		printf("  %-24s %-20s %s\n", "hpz_reset ms (untimed)", "", cell);
	}
	if (c->bound_threads > 0) {
		bench_text_cell(c->bound_ms, c->done, XF_FIG, 1.0, cell,
		    sizeof cell);
		printf("  %-24s %-20s %s\n", "all-worker clear ms", "", cell);
		bench_text_cell(c->bound_ratio, c->done, XF_RATIO, 1.0, cell,
		    sizeof cell);
		printf("  %-45s %s\n", "  all-worker clear/kernel", cell);
		bench_text_cell(c->bound_hpz, c->done, XF_RATIO, 1.0, cell,
		    sizeof cell);
		printf("  %-45s %s\n", "  hpzerod/all-worker clear", cell);
		printf("  all-worker clear: the faulting page cleared again"
		    " here, after the touch, by\n  %d threads (hpzerod's"
		    " workers) with its bulk kernel: the least a stall\n"
		    "  of hpzerod's can be on this page; ratios are per"
		    " run\n", c->bound_threads);
	}
	if (m->busy) {
		printf("  the same run, region A touched alone (quiet) and"
		    " right after B's reset (busy):\n");
		bench_text_figs(c, 1);
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
		bench_text_cell(c->x[x], c->done, bench_x[x].format, 1.0,
		    cell, sizeof cell);
		for (r = missing = 0; r < c->done; r++)
			missing += !isfinite(c->x[x][r]);
		if (missing == c->done)
			snprintf(cell, sizeof cell, "%s", x == X_DONE_MS ||
			    x == X_PREMAP_MS ? "not done" : "-");
		else if (missing > 0 && (x == X_DONE_MS || x == X_PREMAP_MS))
			snprintf(cell + strlen(cell), sizeof cell -
			    strlen(cell), ", not done in %d of %d", missing,
			    c->done);
		printf("  %-24s %-20s %s\n", label, "", cell);
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
bench_text_bg(const struct bench *b, const struct bench_case *c)
{
	const struct bench_mode	*m = &bench_modes[c->mode];
	double			 gbs, ratio, nt, lo, hi, done;
	int			 r, missing = 0;

	if (m->bg == BG_NONE || c->done == 0)
		return;
	cli_stats(c->x[X_BG_GBS], c->done, &gbs, &lo, &hi);
	cli_stats(c->x[X_BG_1CORE], c->done, &ratio, &lo, &hi);
	nt = bench_touch_nt_median(b);
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
		cli_stats(c->x[X_DONE_MS], c->done, &done, &lo, &hi);
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
 * A recycled 2 MiB case: the daemon's model of a garbage fault (round trip
 * and clear, measured at its start) and its figure of late (round trip
 * and read to answer, after the runs) beside the fault p50 the touch
 * measured, each as how far off it is.
 */
static void
bench_text_model(const struct bench *b, const struct bench_case *c)
{
	const struct hpz_status	*st = &c->after;
	double			 p50, lo, hi, model, late;

	if (c->page != &bench_pages[0] || c->mode != 0 || c->done == 0 ||
	    st->cost_ktouch_ns == 0 || st->cost_clear_ns == 0)
		return;
	cli_stats(c->fig[FIG_FAULT_P50][SIDE_HPZ], c->done, &p50, &lo, &hi);
	model = (st->cost_rt_ns + st->cost_clear_ns) / 1e3;
	printf("cost model, %s %s t=%d: predicted %.1f us a fault, measured "
	    "p50 %.1f us (%+.0f%%)", bench_modes[c->mode].name,
	    c->page->name, c->threads, model, p50, (model / p50 - 1) * 100);
	if (st->cost_served_ns != 0) {
		late = (st->cost_rt_ns + st->cost_served_ns) / 1e3;
		printf("; served of late %.1f us (%+.0f%%)", late,
		    (late / p50 - 1) * 100);
	}
	printf("\n");
	(void)b;
}

/* The table, for people. */
void
bench_text(const struct bench *b)
{
	const struct clear_kernel *k;
	double	 med, lo, hi, gbs, nt, ratio;
	int	 i;

	printf("hpz-bench %s: hpzerod %s at %s, %d run%s a case\n",
	    HPZ_VERSION, b->status.version, b->socket, b->runs,
	    b->runs == 1 ? "" : "s");
	printf("machine: %s, %ld CPUs online; clock_gettime %.0f ns a call"
	    " (inside every latency;\n  a latency under %.0f ns is printed"
	    " as no fault)\n", b->cpu, sysconf(_SC_NPROCESSORS_ONLN),
	    b->clock_ns, 2.0 * (double)clock_resolution_ns());
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
		cli_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo,
		    &hi);
		printf("single-core clear bandwidth, warm %zu MiB buffer,"
		    " median of %d passes:\n  %s %.1f GB/s (clear_init's bulk"
		    " kernel%s; best %.1f)\n  others:",
		    BENCH_NT_BYTES >> 20, BENCH_NT_PASSES, k->name, med,
		    k->nontemporal ? ", non-temporal" : "", hi);
		for (i = 0; i < CLEAR_NKINDS; i++) {
			if (!b->nt_have[i] || i == b->nt_bulk)
				continue;
			cli_stats(b->nt[i], BENCH_NT_PASSES, &med, &lo, &hi);
			printf(" %s %.1f",
			    clear_kernel((enum clear_kind)i)->name, med);
		}
		printf(" GB/s\n");
	} else
		printf("single-core clear bandwidth: not measured (%s)\n",
		    b->nt_why);
	printf("\nEach cell: median (min-max) over the runs.  kernel: first"
	    " touch of a fresh\nshared hugetlb memfd of the same size (what a"
	    " VMM maps without hpzerod),\nby the same threads, in the same"
	    " run.  hpzerod/kernel: the ratio within each\nrun; above 1 is"
	    " better for GB/s, below 1 is better for latencies.\nLatencies:"
	    " each huge page's first access (the fault, mid-page);\n"
	    "read-after-fault: reading the 64 lines of the faulting 4 KiB"
	    " right after it.\n");
	if (bench_text_has_bg(b)) {
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
		bench_text_case(b, &b->cases[i]);
	ratio = bench_touch_nt_ratio(b, &gbs, &nt);
	printf("\n");
	if (!isnan(ratio))
		printf("recycled 2m t=1: hpzerod %.2f GB/s = %.2fx the"
		    " single-core clear bandwidth (%s, %.1f GB/s)\n", gbs,
		    ratio, clear_kernel((enum clear_kind)b->nt_bulk)->name, nt);
	for (i = 0; i < b->ncases; i++)
		bench_text_model(b, &b->cases[i]);
	for (i = 0; i < b->ncases; i++)
		bench_text_bg(b, &b->cases[i]);
	printf("verified: %llu bytes served by hpzerod read back zero\n",
	    b->verified);
}
