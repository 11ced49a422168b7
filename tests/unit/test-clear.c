/*
 * test-clear.c - unit tests of the clear kernels: every byte asked for is
 * zero and not one byte outside is touched, at any alignment and length;
 * the hot window's arithmetic; the order faults really clear in
 * (clear_pages for a batch, clear_split in extents with helpers, a 1 GiB
 * page); a write the file refuses fails instead of killing; the choice of
 * kernels in clear_init.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "clear.h"
#include "plan.h"
#include "window.h"

#define KiB		1024UL
#define MiB		(1024UL * KiB)
#define GiB		(1024UL * MiB)
#define GUARD		(4 * KiB)
#define PATTERN		0xa5
#define MAXOFF		64
#define MAXLEN		(2 * MiB + 5)

static const size_t	lens[] = { 0, 1, 7, 63, 64, 65, 127, 4095, 4096,
			    4097, 65536 + 13, 2 * MiB + 5 };
static const size_t	offs[] = { 0, 1, 8, 31, 63, 64 };

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

/* --- helpers ------------------------------------------------------------ */

/* A page-aligned buffer with room for GUARD bytes either side of size. */
static unsigned char *
buf_get(size_t size)
{
	void	*b;

	b = mmap(NULL, size + 2 * GUARD + MAXOFF, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(b, MAP_FAILED, "mmap: %s", strerror(errno));
	return (b);
}

static void
buf_put(unsigned char *b, size_t size)
{
	munmap(b, size + 2 * GUARD + MAXOFF);
}

/* Index of the first byte in [p, p+len) that is not v, or len. */
static size_t
first_not(const unsigned char *p, size_t len, unsigned char v)
{
	size_t	i;

	for (i = 0; i < len; i++) {
		if (p[i] != v)
			break;
	}
	return (i);
}

/* p was filled with PATTERN from p-GUARD to p+len+GUARD, then cleared:
 * the range is zero, the guards untouched. */
static void
expect_cleared(const unsigned char *p, size_t len, const char *what)
{
	size_t	i;

	i = first_not(p, len, 0);
	cr_expect_eq(i, len, "%s: byte %zu of %zu is 0x%02x, not 0", what, i,
	    len, i < len ? p[i] : 0);
	i = first_not(p - GUARD, GUARD, PATTERN);
	cr_expect_eq(i, GUARD, "%s: wrote %zu bytes before the range", what,
	    GUARD - i);
	i = first_not(p + len, GUARD, PATTERN);
	cr_expect_eq(i, GUARD, "%s: wrote the byte %zu past the end", what, i);
}

/* Every length at every offset, with guards, for one kernel. */
static void
check_kernel(const struct clear_kernel *k)
{
	unsigned char	*b, *p;
	char		 what[128];
	size_t		 li, oi;

	b = buf_get(MAXLEN);
	for (li = 0; li < nitems(lens); li++) {
		for (oi = 0; oi < nitems(offs); oi++) {
			p = b + GUARD + offs[oi];
			memset(p - GUARD, PATTERN, lens[li] + 2 * GUARD);
			k->fn(p, lens[li]);
			clear_fence();
			snprintf(what, sizeof(what), "%s len %zu off %zu",
			    k->name, lens[li], offs[oi]);
			expect_cleared(p, lens[li], what);
		}
	}
	buf_put(b, MAXLEN);
}

static void
check_kind(enum clear_kind kind)
{
	const struct clear_kernel	*k;

	k = clear_kernel(kind);
	cr_assert_not_null(k);
	if (!clear_supported(kind))
		cr_skip_test("%s is not supported by this CPU", k->name);
	check_kernel(k);
}

/* Independent model of the window: whole subpages within ceil(hot/2)
 * subpages of the faulting one, inside the page. */
static void
model_window(size_t ps, size_t off, size_t hot, size_t *start, size_t *len)
{
	size_t	fsub, nsub, first, last, nsubs, end;

	if (off >= ps)
		off = ps - 1;
	fsub = off / 4096;
	nsub = (hot / 2 + 4095) / 4096;
	nsubs = (ps + 4095) / 4096;
	first = fsub > nsub ? fsub - nsub : 0;
	last = nsubs - 1 - fsub > nsub ? fsub + nsub : nsubs - 1;
	end = (last + 1) * 4096;
	if (end > ps)
		end = ps;
	*start = first * 4096;
	*len = end - *start;
}

static void
expect_window(size_t ps, size_t off, size_t hot)
{
	size_t	s, l, ms, ml, f;

	plan_window(ps, off, hot, &s, &l);
	model_window(ps, off, hot, &ms, &ml);
	cr_expect(s == ms && l == ml, "window(ps %zu, off %zu, hot %zu) = "
	    "[%zu, +%zu), want [%zu, +%zu)", ps, off, hot, s, l, ms, ml);
	f = off < ps ? off : ps - 1;
	cr_expect(s <= f && f < s + l && s + l <= ps && s % 4096 == 0,
	    "window(ps %zu, off %zu, hot %zu) = [%zu, +%zu) misses the "
	    "fault or the page", ps, off, hot, s, l);
}

/* Fill a page and its guards, clear_pages it, check it all. */
static void
check_page(size_t ps, size_t off, size_t hot)
{
	struct clear_cost	 cost = { 0, 0, 0, 0 };
	unsigned char		*b, *p;
	uint64_t		 o = off;
	char			 what[128];

	b = buf_get(ps);
	p = b + GUARD;
	memset(b, PATTERN, ps + 2 * GUARD);
	cr_assert_eq(clear_pages((char *)p, ps, 1, &o, hot, &cost), 0);
	snprintf(what, sizeof(what), "clear_pages(ps %zu, off %zu, hot %zu) "
	    "bulk %s hot %s", ps, off, hot, clear_bulk_kernel->name,
	    clear_hot_kernel->name);
	expect_cleared(p, ps, what);
	cr_expect_eq(cost.bulk_bytes + cost.hot_bytes, ps, "%s: cost %llu + "
	    "%llu bytes", what, (unsigned long long)cost.bulk_bytes,
	    (unsigned long long)cost.hot_bytes);
	buf_put(b, ps);
}

static void
check_pages(void)
{
	check_page(2 * MiB, 0, 64 * KiB);
	check_page(2 * MiB, 2 * MiB - 1, 64 * KiB);
	check_page(2 * MiB, 1 * MiB + 5, 64 * KiB);
	check_page(2 * MiB, 4096 * 3 + 1234, 64 * KiB);
	check_page(2 * MiB, 4096 * 3 + 1234, 0);
	check_page(2 * MiB, 4096 * 3 + 1234, 4 * MiB);
	check_page(2 * MiB, 2 * MiB + 7, 64 * KiB);
	check_page(2 * MiB, 777777, SIZE_MAX);
	check_page(4096, 0, 64 * KiB);
	check_page(4096, 4095, 0);
	check_page(4096, 5000, 64 * KiB);
}

/*
 * A recording kernel: which ranges the clear asked for, in order (across
 * threads, under a lock).  rec_write 0: record only, for pages too big to
 * touch in a unit test (a 1 GiB page, mapped but never written).
 */
struct call {
	int	 hot;
	size_t	 off;
	size_t	 len;
};
#define NCALLS_MAX	8192
static struct call	 calls[NCALLS_MAX];
static int		 ncalls;
static unsigned char	*rec_page;
static int		 rec_write = 1;
static pthread_mutex_t	 rec_lock = PTHREAD_MUTEX_INITIALIZER;

static void
rec_call(int hot, void *p, size_t len)
{
	if (rec_write)
		memset(p, 0, len);
	pthread_mutex_lock(&rec_lock);
	if (ncalls < (int)nitems(calls)) {
		calls[ncalls].hot = hot;
		calls[ncalls].off = (size_t)((unsigned char *)p - rec_page);
		calls[ncalls].len = len;
	}
	ncalls++;
	pthread_mutex_unlock(&rec_lock);
}

static void
rec_bulk(void *p, size_t len)
{
	rec_call(0, p, len);
}

static void
rec_hot(void *p, size_t len)
{
	rec_call(1, p, len);
}

static const struct clear_kernel rec_bulk_kernel = {
	"rec-bulk", CLEAR_AVX512_NT, 1, rec_bulk
};
static const struct clear_kernel rec_hot_kernel = {
	"rec-hot", CLEAR_MEMSET, 0, rec_hot
};

static void
rec_start(unsigned char *page, int write)
{
	rec_page = page;
	rec_write = write;
	ncalls = 0;
	clear_bulk_kernel = &rec_bulk_kernel;
	clear_hot_kernel = &rec_hot_kernel;
}

static void
rec_stop(void)
{
	clear_bulk_kernel = clear_kernel(CLEAR_MEMSET);
	clear_hot_kernel = clear_kernel(CLEAR_MEMSET);
}

/* Distance of a call's range from the window [ws, we). */
static size_t
rec_distance(const struct call *c, size_t ws, size_t we)
{
	if (c->off + c->len <= ws)
		return (ws - (c->off + c->len));
	if (c->off >= we)
		return (c->off - we);
	return (0);
}

/*
 * c, the last hot call of the page at base, is the 4 KiB that faulted (at
 * off), or the whole window where that 4 KiB is not inside it.
 */
static void
expect_fault_last(const struct call *c, size_t base, size_t off, size_t ps,
    uint64_t s, uint64_t l)
{
	size_t	sub = (off < ps ? off : ps - 1) & ~(size_t)4095;

	if (sub >= s && sub + 4096 <= s + l) {
		cr_expect_eq(c->off - base, sub, "the last hot call is at %zu, "
		    "not the faulting 4 KiB at %zu", c->off - base, sub);
		cr_expect_eq(c->len, 4096);
	} else {
		cr_expect_eq(c->off - base, s);
		cr_expect_eq(c->len, l);
	}
}

/*
 * A batch of n pages as a fault clears it (clear_pages): every bulk call
 * before every hot one (one fence between), the bulk of each page farthest
 * from its fault first and never inside its window, then the windows,
 * page by page, each exactly the planner's in up to three calls, the
 * faulting 4 KiB the last of its page's.  Together: every byte once.
 */
static void
check_order_pages(size_t ps, size_t n, const uint64_t *off, size_t hot)
{
	struct clear_cost	 cost = { 0, 0, 0, 0 };
	unsigned char		*b;
	uint64_t		 s, l;
	size_t			 i, covered[64], page, first_hot, last;
	int			 k;

	cr_assert_leq(n, 64);
	b = buf_get(ps * n);
	memset(b, PATTERN, ps * n + 2 * GUARD);
	rec_start(b + GUARD, 1);
	cr_assert_eq(clear_pages((char *)rec_page, ps, n, off, hot, &cost), 0);
	rec_stop();
	cr_assert_leq(ncalls, NCALLS_MAX);
	memset(covered, 0, sizeof(covered));
	for (first_hot = 0; first_hot < (size_t)ncalls &&
	    !calls[first_hot].hot; first_hot++)
		;
	cr_expect_geq((size_t)ncalls - first_hot, n, "%zu hot calls for %zu "
	    "pages", (size_t)ncalls - first_hot, n);
	cr_expect_leq((size_t)ncalls - first_hot, 3 * n, "%zu hot calls for "
	    "%zu pages", (size_t)ncalls - first_hot, n);
	last = SIZE_MAX;
	for (k = 0; k < ncalls; k++) {
		page = calls[k].off / ps;
		cr_assert_lt(page, n, "call %d outside the batch", k);
		plan_window(ps, off[page], hot, &s, &l);
		covered[page] += calls[k].len;
		if ((size_t)k >= first_hot) {
			cr_expect(calls[k].hot, "a bulk call after a hot one");
			cr_expect(calls[k].off >= page * ps + s &&
			    calls[k].off + calls[k].len <= page * ps + s + l,
			    "hot call %d outside the window of page %zu", k,
			    page);
			cr_expect((size_t)k == first_hot ||
			    calls[k - 1].off / ps <= page,
			    "windows out of page order");
			/* A page's last hot call: the 4 KiB that faulted. */
			if (k + 1 == ncalls || calls[k + 1].off / ps != page)
				expect_fault_last(&calls[k], page * ps,
				    off[page], ps, s, l);
			continue;
		}
		cr_expect(calls[k].off + calls[k].len <= page * ps + s ||
		    calls[k].off >= page * ps + s + l,
		    "bulk call %d inside the window of page %zu", k, page);
		/* Within a page: farthest from the window first. */
		if (k > 0 && calls[k - 1].off / ps == page) {
			struct call	c = calls[k], pc = calls[k - 1];

			c.off -= page * ps;
			pc.off -= page * ps;
			cr_expect_geq(rec_distance(&pc, s, s + l),
			    rec_distance(&c, s, s + l), "page %zu: a nearer "
			    "piece went first", page);
		}
		cr_expect(last == SIZE_MAX || page >= last,
		    "bulk of page %zu after page %zu", page, last);
		last = page;
	}
	for (i = 0; i < n; i++)
		cr_expect_eq(covered[i], ps, "page %zu: %zu bytes of %zu", i,
		    covered[i], ps);
	cr_expect_eq(cost.bulk_bytes + cost.hot_bytes, n * ps);
	expect_cleared(rec_page, ps * n, "recorded batch");
	buf_put(b, ps * n);
}

static void
check_order(size_t ps, size_t off, size_t hot)
{
	uint64_t	o = off;

	check_order_pages(ps, 1, &o, hot);
}

/* A helper thread, as a worker asked by worker_assist would be. */
static void *
helper_main(void *arg)
{
	struct clear_job	*job = arg;

	clear_job_run(job);
	clear_job_put(job);
	return (NULL);
}

static pthread_t	helper_threads[4];
static int		nhelpers;

static int
offer_helpers(struct clear_job *job, void *arg)
{
	int	i, want = *(int *)arg;

	for (i = 0; i < want; i++) {
		clear_job_get(job);
		cr_assert_eq(pthread_create(&helper_threads[i], NULL,
		    helper_main, job), 0);
	}
	nhelpers = want;
	return (want);
}

/*
 * One page as a job (clear_split): extents of at most extent bytes that
 * tile the page less the window; without helpers, farthest from the fault
 * first; the window last, hot, exactly the planner's.
 */
static void
check_split(unsigned char *page, size_t ps, size_t off, size_t hot,
    size_t extent, int helpers, int write)
{
	struct clear_cost	 cost = { 0, 0, 0, 0 };
	uint64_t		 s, l, covered = 0;
	int			 k, helped, want = helpers;

	rec_start(page, write);
	nhelpers = 0;
	cr_assert_eq(clear_split((char *)page, ps, off, hot, extent,
	    helpers > 0 ? offer_helpers : NULL, &want, &helped, &cost), 0);
	for (k = 0; k < nhelpers; k++)
		pthread_join(helper_threads[k], NULL);
	rec_stop();
	cr_expect_eq(helped, helpers);
	cr_assert_leq(ncalls, NCALLS_MAX, "%d calls", ncalls);
	plan_window(ps, off, hot, &s, &l);
	cr_assert_geq(ncalls, 1);
	cr_expect(calls[ncalls - 1].hot, "the last call is not hot");
	expect_fault_last(&calls[ncalls - 1], 0, off, ps, s, l);
	for (k = 0; k < ncalls; k++) {
		covered += calls[k].len;
		if (calls[k].hot) {
			cr_expect(calls[k].off >= s &&
			    calls[k].off + calls[k].len <= s + l,
			    "hot call %d outside the window", k);
			continue;
		}
		cr_expect_not(calls[k].hot, "call %d is hot", k);
		cr_expect_leq(calls[k].len, extent, "call %d: %zu bytes", k,
		    calls[k].len);
		cr_expect(calls[k].off + calls[k].len <= s ||
		    calls[k].off >= s + l, "call %d inside the window", k);
		if (helpers == 0 && k > 0)
			cr_expect_geq(rec_distance(&calls[k - 1], s, s + l),
			    rec_distance(&calls[k], s, s + l),
			    "call %d nearer than call %d", k - 1, k);
	}
	cr_expect_eq(covered, ps, "%llu bytes of %zu covered",
	    (unsigned long long)covered, ps);
	cr_expect_eq(cost.bulk_bytes + cost.hot_bytes, ps);
}

static double
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
}

/* --- the kernels -------------------------------------------------------- */

Test(kernel, avx512_nt)
{
	check_kind(CLEAR_AVX512_NT);
}

Test(kernel, avx2_nt)
{
	check_kind(CLEAR_AVX2_NT);
}

Test(kernel, sse2_nt)
{
	check_kind(CLEAR_SSE2_NT);
}

Test(kernel, rep_stosb)
{
	check_kind(CLEAR_REP_STOSB);
}

Test(kernel, memset)
{
	check_kind(CLEAR_MEMSET);
}

Test(kernel, table)
{
	const struct clear_kernel	*k;
	int				 i;

	for (i = 0; i < CLEAR_NKINDS; i++) {
		k = clear_kernel((enum clear_kind)i);
		cr_assert_not_null(k);
		cr_expect_eq(k->kind, (enum clear_kind)i);
		cr_expect_eq(clear_kernel_by_name(k->name), k, "%s", k->name);
		cr_expect_eq(k->nontemporal, i <= CLEAR_SSE2_NT, "%s",
		    k->name);
		cr_expect_not_null(k->fn);
	}
	cr_expect_str_eq(clear_kernel(CLEAR_AVX512_NT)->name, "avx512-nt");
	cr_expect_str_eq(clear_kernel(CLEAR_AVX2_NT)->name, "avx2-nt");
	cr_expect_str_eq(clear_kernel(CLEAR_SSE2_NT)->name, "sse2-nt");
	cr_expect_str_eq(clear_kernel(CLEAR_REP_STOSB)->name, "rep-stosb");
	cr_expect_str_eq(clear_kernel(CLEAR_MEMSET)->name, "memset");
	cr_expect_null(clear_kernel(CLEAR_NKINDS));
	cr_expect_null(clear_kernel_by_name(NULL));
	cr_expect_null(clear_kernel_by_name(""));
	cr_expect_null(clear_kernel_by_name("avx512"));
	cr_expect_null(clear_kernel_by_name("memset "));
}

Test(kernel, supported)
{
	cr_expect(clear_supported(CLEAR_MEMSET));
	cr_expect_not(clear_supported(CLEAR_NKINDS));
#if defined(__x86_64__)
	cr_expect(clear_supported(CLEAR_SSE2_NT));
	cr_expect(clear_supported(CLEAR_REP_STOSB));
	/* libgcc checks XCR0 as well: the two must agree. */
	cr_expect_eq(clear_supported(CLEAR_AVX2_NT),
	    __builtin_cpu_supports("avx2") != 0);
	cr_expect_eq(clear_supported(CLEAR_AVX512_NT),
	    __builtin_cpu_supports("avx512f") != 0);
#else
	cr_expect_not(clear_supported(CLEAR_AVX512_NT));
	cr_expect_not(clear_supported(CLEAR_REP_STOSB));
#endif
}

/* Before clear_init the entry points already work, with memset. */
Test(kernel, defaults)
{
	unsigned char	*b, *p;

	cr_assert_not_null(clear_bulk_kernel);
	cr_assert_not_null(clear_hot_kernel);
	cr_expect_str_eq(clear_bulk_kernel->name, "memset");
	cr_expect_str_eq(clear_hot_kernel->name, "memset");

	b = buf_get(MAXLEN);
	p = b + GUARD + 3;
	memset(b, PATTERN, MAXLEN + 2 * GUARD);
	clear_range(p, 65536 + 13);
	expect_cleared(p, 65536 + 13, "clear_range");
	memset(b, PATTERN, MAXLEN + 2 * GUARD);
	clear_bulk(p, 4097);
	clear_fence();
	expect_cleared(p, 4097, "clear_bulk");
	memset(b, PATTERN, MAXLEN + 2 * GUARD);
	clear_hot(p, 63);
	expect_cleared(p, 63, "clear_hot");
	buf_put(b, MAXLEN);
	check_pages();
}

/* --- the window --------------------------------------------------------- */

Test(window, examples)
{
	static const struct window_case	w[] = {
		{ 2 * MiB, MiB + 5, 64 * KiB, MiB - 32 * KiB, 68 * KiB,
		    "the faulting 4 KiB +- 32 KiB in the middle" },
		{ 2 * MiB, 4096 * 3 + 1234, 64 * KiB, 0,
		    4 * 4096 + 32 * KiB, "clipped at the start" },
		{ 2 * MiB, 2 * MiB - 1, 64 * KiB, 2 * MiB - 36 * KiB,
		    36 * KiB, "clipped at the end" },
		{ 2 * MiB, 5 * MiB, 64 * KiB, 2 * MiB - 36 * KiB, 36 * KiB,
		    "beyond the page counts as its last byte" },
		{ 2 * MiB, 4096 * 3 + 1234, 0, 4096 * 3, 4096,
		    "hot_size 0: the subpage alone" },
		{ 2 * MiB, 4096 * 3, 2, 4096 * 2, 3 * 4096,
		    "half a window of 1 byte rounds up to a subpage" },
		{ 2 * MiB, 4096 * 3 + 1234, 4 * MiB, 0, 2 * MiB,
		    "larger than the page: the whole page" },
		{ 2 * MiB, 1, SIZE_MAX, 0, 2 * MiB, "hot SIZE_MAX" },
		{ 4096, 100, 64 * KiB, 0, 4096, "a shmem page is all window" },
		{ 4096, 0, 0, 0, 4096, "a shmem page, hot 0" },
		{ 0, 0, 64 * KiB, 0, 0, "no page, no window" },
		{ GiB, GiB - 4096, SIZE_MAX - 1, 0, GiB,
		    "1 GiB near its end, no overflow with a huge window" },
	};

	EXPECT_WINDOWS(w);
}

/* Every fault offset of small pages against a set of window sizes. */
Test(window, exhaustive_small)
{
	static const size_t	pss[] = { 4096, 8192, 3 * 4096, 64 * KiB };
	static const size_t	hots[] = { 0, 1, 2, 4095, 4096, 8191, 8192,
				    8193, 16384, 65536, 65537, 1 * MiB,
				    SIZE_MAX / 2, SIZE_MAX };
	size_t			pi, hi, off;

	for (pi = 0; pi < nitems(pss); pi++)
		for (hi = 0; hi < nitems(hots); hi++)
			for (off = 0; off <= pss[pi] + 1; off++)
				expect_window(pss[pi], off, hots[hi]);
}

/* The edges of big pages. */
Test(window, edges_big)
{
	static const size_t	pss[] = { 2 * MiB, GiB };
	static const size_t	hots[] = { 0, 1, 4096, 8192, 65536, 65536 + 1,
				    MiB, 2 * MiB, 4 * MiB, GiB, SIZE_MAX };
	size_t			pi, hi, oi, ps;

	for (pi = 0; pi < nitems(pss); pi++) {
		ps = pss[pi];
		size_t	offs_e[] = { 0, 1, 4095, 4096, 4097, 32767, 32768,
			    36863, 36864, ps / 2 - 1, ps / 2, ps - 36865,
			    ps - 36864, ps - 4097, ps - 4096, ps - 4095,
			    ps - 1, ps, ps + 1, SIZE_MAX };

		for (hi = 0; hi < nitems(hots); hi++)
			for (oi = 0; oi < nitems(offs_e); oi++)
				expect_window(ps, offs_e[oi], hots[hi]);
	}
}

/* --- the order faults clear in (clear_pages, clear_split) ------------------ */

Test(page, order)
{
	check_order(2 * MiB, MiB + 5, 64 * KiB);
	check_order(2 * MiB, 100 * KiB, 64 * KiB);
	check_order(2 * MiB, 2 * MiB - 100 * KiB, 64 * KiB);
	check_order(2 * MiB, 0, 64 * KiB);
	check_order(2 * MiB, 2 * MiB - 1, 64 * KiB);
	check_order(2 * MiB, 4096 * 3 + 1234, 0);
	check_order(2 * MiB, 4096 * 3 + 1234, 4 * MiB);
	check_order(4096, 17, 64 * KiB);
	/* Nothing bulk, so one call: the page itself, hot. */
	check_order(4096, 0, 0);
}

/* A coalesced batch: all the bulk, one fence, then every window. */
Test(page, batch_order)
{
	static const uint64_t	offs3[] = { MiB + 5, 0, 2 * MiB - 1 };
	uint64_t		fo[16];
	size_t			i;

	check_order_pages(2 * MiB, 3, offs3, 64 * KiB);
	for (i = 0; i < 16; i++)
		fo[i] = (i * 4096 * 37 + 11) % (2 * MiB);
	check_order_pages(2 * MiB, 16, fo, 64 * KiB);
	for (i = 0; i < 16; i++)
		fo[i] = i * 97;
	check_order_pages(4096, 16, fo, 64 * KiB);
}

/* One 2 MiB page cut for spinning helpers: pieces, the window last. */
Test(page, split_2m)
{
	unsigned char	*b;
	size_t		 piece;

	b = buf_get(2 * MiB);
	memset(b, PATTERN, 2 * MiB + 2 * GUARD);
	piece = clear_piece(2 * MiB, 2);
	cr_expect_eq(piece, MiB);
	cr_expect_eq(clear_piece(2 * MiB, 64), 256 * KiB, "never under "
	    "the smallest extent");
	check_split(b + GUARD, 2 * MiB, MiB + 5, 64 * KiB, piece, 0, 1);
	expect_cleared(b + GUARD, 2 * MiB, "split without helpers");
	memset(b, PATTERN, 2 * MiB + 2 * GUARD);
	check_split(b + GUARD, 2 * MiB, 4096, 64 * KiB, 256 * KiB, 2, 1);
	expect_cleared(b + GUARD, 2 * MiB, "split with two helpers");
	buf_put(b, 2 * MiB);
}

/*
 * A 1 GiB page in extents of 256 KiB (the most extents a page can need)
 * and of 64 MiB, alone and with helpers: the plan is checked on a mapping
 * that is never written (recording only), so no GiB of memory is needed.
 */
Test(page, split_1g, .timeout = 60)
{
	static const size_t	offs_g[] = { 0, 512 * MiB + 4097, GiB - 1 };
	unsigned char		*b;
	size_t			 i;

	b = mmap(NULL, GiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	cr_assert_neq(b, MAP_FAILED);
	for (i = 0; i < nitems(offs_g); i++) {
		check_split(b, GiB, offs_g[i], 64 * KiB, 256 * KiB, 0, 0);
		check_split(b, GiB, offs_g[i], 64 * KiB, 64 * MiB, 0, 0);
		check_split(b, GiB, offs_g[i], 64 * KiB, 256 * KiB, 3, 0);
	}
	munmap(b, GiB);
}

/* A file truncated under the clear: the write fails, we live on. */
Test(page, sigbus_is_an_error)
{
	struct clear_cost	 cost = { 0, 0, 0, 0 };
	uint64_t		 off = 4096;
	char			*p;
	int			 fd, helped, want = 2;

	fd = memfd_create("test-clear", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 4 * MiB), 0);
	p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	cr_assert_eq(clear_range_guarded(p, 4 * MiB), 0);
	cr_assert_eq(ftruncate(fd, MiB), 0);
	cr_assert_eq(clear_range_guarded(p, 4 * MiB), -EFAULT);
	cr_assert_eq(clear_range_guarded(p, MiB), 0, "the part left");
	cr_assert_eq(clear_pages(p + 2 * MiB, 4096, 2, (uint64_t[]){ 0, 5 },
	    64 * KiB, &cost), -EFAULT);
	nhelpers = 0;
	cr_assert_eq(clear_split(p + 2 * MiB, 2 * MiB, off, 64 * KiB,
	    256 * KiB, offer_helpers, &want, &helped, &cost), -EFAULT);
	for (want = 0; want < nhelpers; want++)
		pthread_join(helper_threads[want], NULL);
	munmap(p, 4 * MiB);
	close(fd);
}

/* A SIGBUS outside a guarded write still kills, as it should. */
Test(page, sigbus_elsewhere_still_kills)
{
	char	*p;
	pid_t	 pid;
	int	 fd, status;

	fd = memfd_create("test-clear", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, MiB), 0);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	/* The handler is installed by a guarded write first. */
	cr_assert_eq(clear_range_guarded(p, 4096), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		(void)clear_range_guarded(p, 4096);
		p[MiB + 1] = 1;		/* past the end: not guarded */
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's own SIGBUS handler, put back, reports and exits. */
	cr_assert((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
	    (WIFEXITED(status) && WEXITSTATUS(status) != 0),
	    "status 0x%x", status);
#else
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
	    "status 0x%x", status);
#endif
	munmap(p, 2 * MiB);
	close(fd);
}

/* Every supported bulk kernel, with both hot kernels. */
Test(page, all_kernels, .timeout = 60)
{
	static const char	*hots[] = { "rep-stosb", "memset" };
	char			 why[256];
	size_t			 hi;
	int			 i;

	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (!clear_supported((enum clear_kind)i))
			continue;
		for (hi = 0; hi < nitems(hots); hi++) {
			if (!clear_supported(clear_kernel_by_name(hots[hi])->
			    kind))
				continue;
			cr_assert_eq(clear_init(clear_kernel((enum clear_kind)
			    i)->name, hots[hi], why, sizeof(why)), 0, "%s",
			    why);
			check_pages();
		}
	}
}

/* --- clear_init --------------------------------------------------------- */

Test(init, automatic)
{
	const struct clear_kernel	*b, *h;
	char				 why[512];
	double				 t0, ms;
	int				 i;

	t0 = now_ms();
	cr_assert_eq(clear_init(NULL, NULL, why, sizeof(why)), 0, "%s", why);
	ms = now_ms() - t0;
	cr_log_info("clear_init(NULL, NULL): %.1f ms: %s", ms, why);
	b = clear_bulk_kernel;
	h = clear_hot_kernel;
	cr_expect(clear_supported(b->kind), "%s", b->name);
	cr_expect(clear_supported(h->kind), "%s", h->name);
	cr_expect_not(h->nontemporal, "%s", h->name);
	cr_expect_gt(clear_calibrated_gbs(b->kind), 0, "%s", b->name);
	cr_expect_neq(why[0], '\0');
	cr_expect_not_null(strstr(why, b->name), "%s", why);
	for (i = 0; i < CLEAR_NKINDS; i++) {
		const struct clear_kernel	*k;
		double				 g, gb;

		/* Measured exactly the supported ones; the bulk is the best
		 * of its sort (within 2%), and ordinary stores only win by
		 * 25%. */
		k = clear_kernel((enum clear_kind)i);
		g = clear_calibrated_gbs(k->kind);
		gb = clear_calibrated_gbs(b->kind);
		cr_expect_eq(g > 0, clear_supported(k->kind) != 0, "%s",
		    k->name);
		if (k->nontemporal == b->nontemporal)
			cr_expect_leq(g, gb * 1.02, "%s %.1f > %s %.1f * 1.02",
			    k->name, g, b->name, gb);
		else if (b->nontemporal)
			cr_expect_leq(g, gb * 1.25, "%s %.1f > %s %.1f * 1.25",
			    k->name, g, b->name, gb);
		else
			cr_expect_geq(gb, g * 1.25, "%s %.1f < %s %.1f * 1.25",
			    b->name, gb, k->name, g);
	}
	cr_expect_eq(clear_calibrated_gbs(CLEAR_NKINDS), 0);
	/* Loose: the budget is ~150 ms, but machines get busy. */
	cr_expect_lt(ms, 2000, "calibration took %.1f ms", ms);
	check_pages();
}

Test(init, named)
{
	char	why[256];
	int	i;

	for (i = 0; i < CLEAR_NKINDS; i++) {
		const struct clear_kernel	*k;

		k = clear_kernel((enum clear_kind)i);
		if (!clear_supported(k->kind))
			continue;
		cr_expect_eq(clear_init(k->name, NULL, why, sizeof(why)), 0,
		    "%s: %s", k->name, why);
		cr_expect_eq(clear_bulk_kernel, k);
		cr_expect_not(clear_hot_kernel->nontemporal);
		/* Named, so not measured. */
		cr_expect_eq(clear_calibrated_gbs(k->kind), 0);
	}
	cr_expect_eq(clear_init("memset", "memset", why, sizeof(why)), 0,
	    "%s", why);
	cr_expect_str_eq(clear_bulk_kernel->name, "memset");
	cr_expect_str_eq(clear_hot_kernel->name, "memset");
	if (clear_supported(CLEAR_REP_STOSB)) {
		cr_expect_eq(clear_init(NULL, "rep-stosb", why, sizeof(why)),
		    0, "%s", why);
		cr_expect_str_eq(clear_hot_kernel->name, "rep-stosb");
		cr_expect_gt(clear_calibrated_gbs(clear_bulk_kernel->kind), 0);
	}
	/* No room for a reason is no reason to fail. */
	cr_expect_eq(clear_init("memset", "memset", NULL, 0), 0);
}

Test(init, unknown)
{
	const struct clear_kernel	*b, *h;
	char				 why[256];

	b = clear_bulk_kernel;
	h = clear_hot_kernel;
	cr_expect_eq(clear_init("avx1024-nt", NULL, why, sizeof(why)),
	    -EINVAL);
	cr_expect_not_null(strstr(why, "unknown"), "%s", why);
	cr_expect_not_null(strstr(why, "'avx1024-nt'"), "%s", why);
	cr_expect_not_null(strstr(why, "avx512-nt, avx2-nt, sse2-nt, "
	    "rep-stosb, memset)"), "%s", why);
	cr_expect_eq(clear_init(NULL, "zero", why, sizeof(why)), -EINVAL);
	cr_expect_not_null(strstr(why, "'zero'"), "%s", why);
	cr_expect_eq(clear_init("", "memset", why, sizeof(why)), -EINVAL);
	/* Short buffers truncate, never overflow. */
	memset(why, 'x', sizeof(why));
	cr_expect_eq(clear_init("nope", NULL, why, 12), -EINVAL);
	cr_expect_eq(strlen(why), 11);
	cr_expect_eq(why[12], 'x');
	cr_expect_eq(clear_init("nope", NULL, NULL, 0), -EINVAL);
	/* A failed init changes nothing. */
	cr_expect_eq(clear_bulk_kernel, b);
	cr_expect_eq(clear_hot_kernel, h);
}

Test(init, nontemporal_hot)
{
	char	why[256];
	int	i;

	for (i = 0; i <= CLEAR_SSE2_NT; i++) {
		const char	*name = clear_kernel((enum clear_kind)i)->name;

		why[0] = '\0';
		cr_expect_eq(clear_init(NULL, name, why, sizeof(why)), -EINVAL,
		    "%s as hot", name);
		cr_expect_not_null(strstr(why, "ordinary stores"), "%s", why);
	}
	cr_expect_str_eq(clear_hot_kernel->name, "memset");
}

Test(init, unsupported)
{
	char	why[256];
	int	i, n = 0;

	for (i = 0; i < CLEAR_NKINDS; i++) {
		const char	*name = clear_kernel((enum clear_kind)i)->name;

		if (clear_supported((enum clear_kind)i))
			continue;
		n++;
		cr_expect_eq(clear_init(name, NULL, why, sizeof(why)), -EINVAL,
		    "%s", name);
		cr_expect_not_null(strstr(why, "not supported by this CPU"),
		    "%s", why);
		cr_expect_not_null(strstr(why, name), "%s", why);
	}
	if (n == 0)
		cr_skip_test("this CPU supports every kernel");
}
