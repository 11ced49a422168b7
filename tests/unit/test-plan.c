/*
 * test-plan.c - unit tests of the extent planner (plan.c): the
 * most a job clears, the window around a fault, its split into extents,
 * their order and the coalescing of neighbouring faults.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "plan.h"
#include "window.h"
#include "worker.h"

#define KiB		1024ULL
#define MiB		(1024ULL * KiB)
#define GiB		(1024ULL * MiB)
#define SUB		4096ULL

#define NEXT		8192	/* room for any split in these tests */

/* --- helpers ------------------------------------------------------------ */

static uint64_t
round_up(uint64_t v, uint64_t to)
{
	return ((v + to - 1) / to * to);
}

/* Distance of [off, off+len) from [ws, we), 0 when touching or inside. */
static uint64_t
distance(uint64_t off, uint64_t len, uint64_t ws, uint64_t we)
{
	if (off + len <= ws)
		return (ws - (off + len));
	if (off >= we)
		return (off - we);
	return (0);
}

static int
ext_cmp(const void *a, const void *b)
{
	const struct plan_extent	*x = a, *y = b;

	if (x->off != y->off)
		return (x->off < y->off ? -1 : 1);
	return (0);
}

/*
 * The extents of a split and the window must tile [0, len): no gap, no
 * overlap, nothing outside; each extent nonempty and at most max; farthest
 * from the window first.
 */
static void
check_split(uint64_t len, uint64_t ws, uint64_t wl, uint64_t max,
    const struct plan_extent *ext, size_t n, const char *what)
{
	struct plan_extent	*all;
	uint64_t		 pos, we = ws + wl, d, prev = UINT64_MAX;
	size_t			 i, m = 0;

	all = calloc(n + 1, sizeof(*all));
	cr_assert_not_null(all);
	for (i = 0; i < n; i++) {
		cr_assert_gt(ext[i].len, 0, "%s: extent %zu is empty", what, i);
		cr_assert_leq(ext[i].len, max, "%s: extent %zu: %llu > max %llu",
		    what, i, (unsigned long long)ext[i].len,
		    (unsigned long long)max);
		cr_assert_leq(ext[i].off + ext[i].len, len,
		    "%s: extent %zu [%llu,+%llu) past len %llu", what, i,
		    (unsigned long long)ext[i].off,
		    (unsigned long long)ext[i].len, (unsigned long long)len);
		d = distance(ext[i].off, ext[i].len, ws, we);
		cr_assert_leq(d, prev, "%s: extent %zu at distance %llu after "
		    "one at %llu", what, i, (unsigned long long)d,
		    (unsigned long long)prev);
		prev = d;
		all[m++] = ext[i];
	}
	if (wl > 0) {
		all[m].off = ws;
		all[m].len = wl;
		m++;
	}
	qsort(all, m, sizeof(*all), ext_cmp);
	for (pos = 0, i = 0; i < m; i++) {
		cr_assert_eq(all[i].off, pos, "%s: piece %zu starts at %llu, "
		    "expected %llu (gap or overlap)", what, i,
		    (unsigned long long)all[i].off, (unsigned long long)pos);
		pos += all[i].len;
	}
	cr_assert_eq(pos, len, "%s: pieces end at %llu, not %llu", what,
	    (unsigned long long)pos, (unsigned long long)len);
	/* The last extent touches the window, if there is any extent. */
	if (n > 0)
		cr_assert_eq(distance(ext[n - 1].off, ext[n - 1].len, ws, we), 0,
		    "%s: the last extent does not touch the window", what);
	free(all);
}

/* How many extents a split needs: each side of the window on its own. */
static uint64_t
split_needed(uint64_t len, uint64_t ws, uint64_t wl, uint64_t max)
{
	return ((ws + max - 1) / max + (len - ws - wl + max - 1) / max);
}

static void
check_window(uint64_t page, uint64_t fault, uint64_t hot, uint64_t start,
    uint64_t len)
{
	uint64_t	f = fault >= page ? page - 1 : fault;
	uint64_t	bound = SUB + 2 * round_up(hot / 2, SUB);

	cr_assert_leq(start + len, page, "page %llu fault %llu hot %llu: "
	    "window [%llu,+%llu) past the page", (unsigned long long)page,
	    (unsigned long long)fault, (unsigned long long)hot,
	    (unsigned long long)start, (unsigned long long)len);
	cr_assert_eq(start % SUB, 0, "fault %llu hot %llu: start %llu "
	    "unaligned", (unsigned long long)fault, (unsigned long long)hot,
	    (unsigned long long)start);
	cr_assert(len % SUB == 0 || start + len == page, "fault %llu hot "
	    "%llu: len %llu unaligned", (unsigned long long)fault,
	    (unsigned long long)hot, (unsigned long long)len);
	cr_assert(f >= start && f < start + len, "fault %llu hot %llu: "
	    "window [%llu,+%llu) misses it", (unsigned long long)fault,
	    (unsigned long long)hot, (unsigned long long)start,
	    (unsigned long long)len);
	cr_assert_leq(len, bound, "fault %llu hot %llu: len %llu > %llu",
	    (unsigned long long)fault, (unsigned long long)hot,
	    (unsigned long long)len, (unsigned long long)bound);
	/* Clipped only by the page's edges: otherwise exactly the bound. */
	if (start > 0 && start + len < page)
		cr_assert_eq(len, bound, "fault %llu hot %llu: unclipped "
		    "window %llu, expected %llu", (unsigned long long)fault,
		    (unsigned long long)hot, (unsigned long long)len,
		    (unsigned long long)bound);
}

/* --- plan_extent_max ---------------------------------------------------- */

Test(plan, extent_max_below_min)
{
	cr_expect_eq(plan_extent_max(0), PLAN_EXTENT_MIN);
	cr_expect_eq(plan_extent_max(1), PLAN_EXTENT_MIN);
	cr_expect_eq(plan_extent_max(PLAN_EXTENT_MIN - 1), PLAN_EXTENT_MIN);
	cr_expect_eq(plan_extent_max(PLAN_EXTENT_MIN), PLAN_EXTENT_MIN);
}

Test(plan, extent_max_above_max)
{
	cr_expect_eq(plan_extent_max(PLAN_EXTENT_MAX), PLAN_EXTENT_MAX);
	cr_expect_eq(plan_extent_max(PLAN_EXTENT_MAX + 1), PLAN_EXTENT_MAX);
	cr_expect_eq(plan_extent_max(1 * GiB), PLAN_EXTENT_MAX);
	cr_expect_eq(plan_extent_max(UINT64_MAX), PLAN_EXTENT_MAX);
}

Test(plan, extent_max_in_between)
{
	uint64_t	v;

	cr_expect_eq(plan_extent_max(16 * MiB), 16 * MiB);
	cr_expect_eq(plan_extent_max(8 * MiB + 1), 8 * MiB);
	v = plan_extent_max(32 * MiB / 3);
	cr_expect_eq(v, (32 * MiB / 3) & ~(SUB - 1), "got %llu",
	    (unsigned long long)v);
	cr_expect_eq(v % SUB, 0);
	cr_expect_leq(v, 32 * MiB / 3);
	cr_expect_gt(v + SUB, 32 * MiB / 3);
	cr_expect_eq(plan_extent_max(PLAN_EXTENT_MIN + SUB - 1),
	    PLAN_EXTENT_MIN);
}

/* --- plan_window -------------------------------------------------------- */

Test(plan, window_middle_2m)
{
	uint64_t	s, l, fault = 1 * MiB + 5 * SUB + 17;

	plan_window(2 * MiB, fault, 64 * KiB, &s, &l);
	cr_expect_eq(s, 1 * MiB + 5 * SUB - 32 * KiB, "start %llu",
	    (unsigned long long)s);
	cr_expect_eq(l, 64 * KiB + SUB, "len %llu", (unsigned long long)l);
	check_window(2 * MiB, fault, 64 * KiB, s, l);
}

Test(plan, window_fault_at_zero)
{
	uint64_t	s, l;

	plan_window(2 * MiB, 0, 64 * KiB, &s, &l);
	cr_expect_eq(s, 0);
	cr_expect_eq(l, SUB + 32 * KiB, "len %llu", (unsigned long long)l);
	check_window(2 * MiB, 0, 64 * KiB, s, l);
}

Test(plan, window_fault_at_last_byte)
{
	uint64_t	s, l;

	plan_window(2 * MiB, 2 * MiB - 1, 64 * KiB, &s, &l);
	cr_expect_eq(s, 2 * MiB - SUB - 32 * KiB, "start %llu",
	    (unsigned long long)s);
	cr_expect_eq(s + l, 2 * MiB);
	check_window(2 * MiB, 2 * MiB - 1, 64 * KiB, s, l);
}

Test(plan, window_unaligned_fault)
{
	uint64_t	s, l, fault = SUB * 3 + 1234;

	plan_window(2 * MiB, fault, 64 * KiB, &s, &l);
	/* Subpage 3 less 32 KiB is below 0: clipped. */
	cr_expect_eq(s, 0);
	cr_expect_eq(l, 4 * SUB + 32 * KiB, "len %llu", (unsigned long long)l);
	check_window(2 * MiB, fault, 64 * KiB, s, l);

	fault = 100 * SUB + 1234;
	plan_window(2 * MiB, fault, 64 * KiB, &s, &l);
	cr_expect_eq(s, 100 * SUB - 32 * KiB);
	cr_expect_eq(l, SUB + 64 * KiB);
	check_window(2 * MiB, fault, 64 * KiB, s, l);
}

Test(plan, window_hot_zero)
{
	static const struct window_case	w[] = {
		{ 2 * MiB, 77 * SUB + 4095, 0, 77 * SUB, SUB,
		    "2 MiB, hot 0: the subpage" },
		{ 1 * GiB, 0, 0, 0, SUB, "1 GiB, hot 0: the subpage" },
	};

	EXPECT_WINDOWS(w);
}

Test(plan, window_hot_larger_than_page)
{
	static const struct window_case	w[] = {
		{ 2 * MiB, 1 * MiB, 4 * MiB, 0, 2 * MiB, "hot 4 MiB" },
		{ 2 * MiB, 12345, UINT64_MAX, 0, 2 * MiB, "hot UINT64_MAX" },
	};

	EXPECT_WINDOWS(w);
}

Test(plan, window_fault_past_end)
{
	uint64_t	s, l, s2, l2;

	plan_window(2 * MiB, 2 * MiB, 64 * KiB, &s, &l);
	plan_window(2 * MiB, 2 * MiB - 1, 64 * KiB, &s2, &l2);
	cr_expect_eq(s, s2);
	cr_expect_eq(l, l2);
	plan_window(2 * MiB, UINT64_MAX, 64 * KiB, &s, &l);
	cr_expect_eq(s, s2);
	cr_expect_eq(l, l2);
}

Test(plan, window_small_page)
{
	static const struct window_case	w[] = {
		{ 4096, 0, 64 * KiB, 0, 4096, "4 KiB, hot 64 KiB" },
		{ 4096, 4095, 0, 0, 4096, "4 KiB, last byte, hot 0" },
		{ 4096, 99999, 1 * MiB, 0, 4096, "4 KiB, past the end" },
		/* Smaller than a subpage, or empty: never past the page. */
		{ 100, 50, 0, 0, 100, "100 bytes" },
		{ 0, 0, 64 * KiB, 0, 0, "no page" },
	};

	EXPECT_WINDOWS(w);
}

Test(plan, window_property)
{
	static const uint64_t	pages[] = { 8 * KiB, 64 * KiB, 2 * MiB };
	static const uint64_t	hots[] = { 0, 4096, 8192, 64 * KiB, 1 * MiB };
	uint64_t		s, l, f;
	size_t			p, h;

	for (p = 0; p < sizeof(pages) / sizeof(pages[0]); p++)
		for (h = 0; h < sizeof(hots) / sizeof(hots[0]); h++)
			for (f = 0; f < pages[p] + 4093; f += 4093) {
				plan_window(pages[p], f, hots[h], &s, &l);
				check_window(pages[p], f, hots[h], s, l);
			}
	/* 1 GiB: a coarser step, the same rules. */
	for (h = 0; h < sizeof(hots) / sizeof(hots[0]); h++)
		for (f = 0; f < 1 * GiB; f += 4093 * 997) {
			plan_window(1 * GiB, f, hots[h], &s, &l);
			check_window(1 * GiB, f, hots[h], s, l);
		}
}

/* --- plan_split --------------------------------------------------------- */

Test(plan, split_window_middle)
{
	struct plan_extent	ext[NEXT];
	size_t			n;

	n = plan_split(2 * MiB, 1 * MiB - 32 * KiB, 68 * KiB, 256 * KiB, ext,
	    NEXT);
	cr_assert_eq(n, split_needed(2 * MiB, 1 * MiB - 32 * KiB, 68 * KiB,
	    256 * KiB), "n %zu", n);
	check_split(2 * MiB, 1 * MiB - 32 * KiB, 68 * KiB, 256 * KiB, ext, n,
	    "middle");
	/* The first extent is one of the page's ends. */
	cr_expect(ext[0].off == 0 || ext[0].off + ext[0].len == 2 * MiB);
}

Test(plan, split_window_at_start)
{
	struct plan_extent	ext[NEXT];
	size_t			n;

	n = plan_split(2 * MiB, 0, 36 * KiB, 512 * KiB, ext, NEXT);
	cr_assert_eq(n, 4, "n %zu", n);
	check_split(2 * MiB, 0, 36 * KiB, 512 * KiB, ext, n, "start");
	cr_expect_eq(ext[0].off + ext[0].len, 2 * MiB);
	cr_expect_eq(ext[n - 1].off, 36 * KiB);
}

Test(plan, split_window_at_end)
{
	struct plan_extent	ext[NEXT];
	size_t			n;

	n = plan_split(2 * MiB, 2 * MiB - 36 * KiB, 36 * KiB, 512 * KiB, ext,
	    NEXT);
	cr_assert_eq(n, 4, "n %zu", n);
	check_split(2 * MiB, 2 * MiB - 36 * KiB, 36 * KiB, 512 * KiB, ext, n,
	    "end");
	cr_expect_eq(ext[0].off, 0);
	cr_expect_eq(ext[n - 1].off + ext[n - 1].len, 2 * MiB - 36 * KiB);
}

Test(plan, split_whole_window)
{
	struct plan_extent	ext[4];

	cr_expect_eq(plan_split(2 * MiB, 0, 2 * MiB, 256 * KiB, ext, 4), 0);
	cr_expect_eq(plan_split(2 * MiB, 0, 2 * MiB, 256 * KiB, ext, 0), 0);
}

Test(plan, split_1g_16m)
{
	static struct plan_extent	ext[NEXT];
	uint64_t			ws, wl;
	size_t				n;

	plan_window(1 * GiB, 512 * MiB + 12345, 64 * KiB, &ws, &wl);
	n = plan_split(1 * GiB, ws, wl, 16 * MiB, ext, NEXT);
	cr_assert_geq(n, 64, "n %zu", n);
	cr_assert_leq(n, 66, "n %zu", n);
	cr_assert_eq(n, split_needed(1 * GiB, ws, wl, 16 * MiB));
	check_split(1 * GiB, ws, wl, 16 * MiB, ext, n, "1g");
}

Test(plan, split_nout_too_small)
{
	struct plan_extent	ext[NEXT];
	size_t			need;

	need = split_needed(2 * MiB, 1 * MiB, 68 * KiB, 256 * KiB);
	cr_assert_gt(need, 2);
	memset(ext, 0, sizeof(ext));
	cr_expect_eq(plan_split(2 * MiB, 1 * MiB, 68 * KiB, 256 * KiB, ext,
	    need - 1), 0);
	/* Nothing written past nout. */
	cr_expect_eq(ext[need - 1].len, 0);
	cr_expect_eq(plan_split(2 * MiB, 1 * MiB, 68 * KiB, 256 * KiB, ext,
	    0), 0);
	cr_expect_eq(plan_split(2 * MiB, 1 * MiB, 68 * KiB, 256 * KiB, ext,
	    need), need);
}

Test(plan, split_window_beyond_len)
{
	struct plan_extent	ext[NEXT];

	cr_expect_eq(plan_split(2 * MiB, 2 * MiB + SUB, SUB, 256 * KiB, ext,
	    NEXT), 0);
	cr_expect_eq(plan_split(2 * MiB, 2 * MiB - SUB, 2 * SUB, 256 * KiB,
	    ext, NEXT), 0);
	/* wstart + wlen would wrap. */
	cr_expect_eq(plan_split(2 * MiB, SUB, UINT64_MAX, 256 * KiB, ext,
	    NEXT), 0);
}

Test(plan, split_max_zero)
{
	struct plan_extent	ext[NEXT];

	cr_expect_eq(plan_split(2 * MiB, 1 * MiB, SUB, 0, ext, NEXT), 0);
}

Test(plan, split_property)
{
	static struct plan_extent	ext[NEXT];
	static const uint64_t		lens[] = { 64 * KiB, 2 * MiB,
					    2 * MiB + 4 * KiB, 1 * GiB };
	static const uint64_t		maxes[] = { 4 * KiB, 60 * KiB,
					    256 * KiB, 1 * MiB + 4 * KiB,
					    16 * MiB, 64 * MiB };
	static const uint64_t		hots[] = { 0, 64 * KiB, 1 * MiB };
	uint64_t			ws, wl, f, step, need;
	size_t				li, mi, hi, n;
	char				what[128];

	for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
	for (mi = 0; mi < sizeof(maxes) / sizeof(maxes[0]); mi++)
	for (hi = 0; hi < sizeof(hots) / sizeof(hots[0]); hi++) {
		step = lens[li] / 37 + 1;
		for (f = 0; f < lens[li]; f += step) {
			plan_window(lens[li], f, hots[hi], &ws, &wl);
			need = split_needed(lens[li], ws, wl, maxes[mi]);
			n = plan_split(lens[li], ws, wl, maxes[mi], ext, NEXT);
			snprintf(what, sizeof(what), "len %llu max %llu "
			    "window [%llu,+%llu)",
			    (unsigned long long)lens[li],
			    (unsigned long long)maxes[mi],
			    (unsigned long long)ws, (unsigned long long)wl);
			if (need > NEXT) {
				cr_assert_eq(n, 0, "%s: n %zu", what, n);
				continue;
			}
			cr_assert_eq(n, need, "%s: n %zu, need %llu", what, n,
			    (unsigned long long)need);
			check_split(lens[li], ws, wl, maxes[mi], ext, n, what);
		}
	}
}

/*
 * uffd_clear_split() gives a 1 GiB page's extents JOB_EXTENTS_MAX slots and
 * fails the fault with E2BIG when plan_split() needs more; the smallest
 * extent the daemon allows must leave room for any fault with the default
 * hot window.
 */
Test(plan, split_1g_fits_job_at_min_extent)
{
	static struct plan_extent	ext[JOB_EXTENTS_MAX];
	uint64_t			ws, wl, f, worst = 0, worst_f = 0, need;
	size_t				n;

	for (f = 0; f < 1 * GiB; f += 16 * KiB) {
		plan_window(1 * GiB, f, PLAN_HOT_DEFAULT, &ws, &wl);
		need = split_needed(1 * GiB, ws, wl, PLAN_EXTENT_MIN);
		if (need > worst) {
			worst = need;
			worst_f = f;
		}
	}
	plan_window(1 * GiB, worst_f, PLAN_HOT_DEFAULT, &ws, &wl);
	n = plan_split(1 * GiB, ws, wl, PLAN_EXTENT_MIN, ext, JOB_EXTENTS_MAX);
	cr_expect_leq(worst, JOB_EXTENTS_MAX, "a fault at offset %llu of a "
	    "1 GiB page needs %llu extents of %llu KiB, JOB_EXTENTS_MAX is %d",
	    (unsigned long long)worst_f, (unsigned long long)worst,
	    (unsigned long long)(PLAN_EXTENT_MIN >> 10), JOB_EXTENTS_MAX);
	cr_expect_neq(n, 0, "plan_split(1 GiB, [%llu,+%llu), %llu, %d) "
	    "returned 0", (unsigned long long)ws, (unsigned long long)wl,
	    (unsigned long long)PLAN_EXTENT_MIN, JOB_EXTENTS_MAX);
}

/* --- plan_sort_by_distance ---------------------------------------------- */

Test(plan, sort_by_distance)
{
	struct plan_extent	e[] = {
		{ 900, 100 },	/* touches the window's start: 0 */
		{ 0, 100 },	/* 900 before */
		{ 2000, 100 },	/* touches the window's end: 0 */
		{ 2500, 100 },	/* 500 after */
		{ 500, 100 },	/* 400 before */
		{ 3900, 100 },	/* 1900 after */
	};
	static const uint64_t	want[] = { 1900, 900, 500, 400, 0, 0 };
	size_t			i, n = sizeof(e) / sizeof(e[0]);

	plan_sort_by_distance(e, n, 1000, 2000);
	for (i = 0; i < n; i++)
		cr_expect_eq(distance(e[i].off, e[i].len, 1000, 2000), want[i],
		    "position %zu: extent at %llu", i,
		    (unsigned long long)e[i].off);
	cr_expect_eq(e[0].off, 3900);
	cr_expect_eq(e[1].off, 0);
	/* Equal distances keep their order (insertion sort is stable). */
	cr_expect_eq(e[4].off, 900);
	cr_expect_eq(e[5].off, 2000);

	/* Empty and single lists are left alone. */
	plan_sort_by_distance(e, 0, 0, 0);
	plan_sort_by_distance(e, 1, 0, 0);
	cr_expect_eq(e[0].off, 3900);
}

/* --- plan_coalesce ------------------------------------------------------ */

Test(plan, coalesce_any_order)
{
	static const uint64_t	idx[] = { 12, 8, 10, 11, 9, 9, 14, 7, 11 };
	uint64_t		lo, hi;

	plan_coalesce(idx, sizeof(idx) / sizeof(idx[0]), 10, 64, &lo, &hi);
	cr_expect_eq(lo, 7);
	cr_expect_eq(hi, 12);
}

Test(plan, coalesce_capped)
{
	static const uint64_t	idx[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 };
	uint64_t		lo, hi, m;

	for (m = 2; m <= 12; m++) {
		plan_coalesce(idx, sizeof(idx) / sizeof(idx[0]), 6, m, &lo,
		    &hi);
		cr_expect_eq(hi - lo + 1, m < 11 ? m : 11, "max %llu: [%llu, "
		    "%llu]", (unsigned long long)m, (unsigned long long)lo,
		    (unsigned long long)hi);
		cr_expect(lo <= 6 && hi >= 6);
		cr_expect(lo >= 1 && hi <= 11);
	}
}

Test(plan, coalesce_first_absent)
{
	static const uint64_t	idx[] = { 4, 6, 7 };
	uint64_t		lo, hi;

	plan_coalesce(idx, 3, 5, 16, &lo, &hi);
	cr_expect_eq(lo, 4);
	cr_expect_eq(hi, 7);
}

Test(plan, coalesce_no_neighbours)
{
	static const uint64_t	idx[] = { 1, 3, 9, 20 };
	uint64_t		lo = 0, hi = 0;

	plan_coalesce(idx, 4, 5, 16, &lo, &hi);
	cr_expect_eq(lo, 5);
	cr_expect_eq(hi, 5);
	plan_coalesce(NULL, 0, 5, 16, &lo, &hi);
	cr_expect_eq(lo, 5);
	cr_expect_eq(hi, 5);
}

Test(plan, coalesce_max_one)
{
	static const uint64_t	idx[] = { 4, 5, 6 };
	uint64_t		lo, hi;

	plan_coalesce(idx, 3, 5, 1, &lo, &hi);
	cr_expect_eq(lo, 5);
	cr_expect_eq(hi, 5);
	plan_coalesce(idx, 3, 5, 0, &lo, &hi);
	cr_expect_eq(lo, 5);
	cr_expect_eq(hi, 5);
}

Test(plan, coalesce_edges)
{
	static const uint64_t	idx[] = { 1, 2, UINT64_MAX - 1, 0 };
	uint64_t		lo, hi;

	plan_coalesce(idx, 3, 0, 16, &lo, &hi);
	cr_expect_eq(lo, 0);
	cr_expect_eq(hi, 2);
	plan_coalesce(idx, 4, UINT64_MAX, 16, &lo, &hi);
	cr_expect_eq(lo, UINT64_MAX - 1);
	cr_expect_eq(hi, UINT64_MAX);
}

/* 0 - 1 and UINT64_MAX + 1 must not wrap into the run. */
Test(plan, coalesce_no_wrap)
{
	static const uint64_t	idx[] = { UINT64_MAX, 1, 0, UINT64_MAX - 1 };
	uint64_t		lo, hi;

	plan_coalesce(idx, 2, 0, 16, &lo, &hi);
	cr_expect_eq(lo, 0);
	cr_expect_eq(hi, 1);
	plan_coalesce(idx + 2, 2, UINT64_MAX, 16, &lo, &hi);
	cr_expect_eq(lo, UINT64_MAX - 1);
	cr_expect_eq(hi, UINT64_MAX);
}

Test(plan, coalesce_gap)
{
	static const uint64_t	idx[] = { 2, 3, 5, 6, 7, 9 };
	uint64_t		lo, hi;

	plan_coalesce(idx, 6, 6, 16, &lo, &hi);
	cr_expect_eq(lo, 5);
	cr_expect_eq(hi, 7);
	plan_coalesce(idx, 6, 3, 16, &lo, &hi);
	cr_expect_eq(lo, 2);
	cr_expect_eq(hi, 3);
}
