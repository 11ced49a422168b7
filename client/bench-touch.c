/*
 * bench-touch.c - what hpz-bench times: the touch of a region by its
 * threads (the first access of each huge page, the read after it), the
 * read-back that every byte hpzerod served is zero, the cost of a clock
 * read, the machine's single-core clear bandwidth, and one page cleared
 * by as many threads as the daemon has workers (the least its stall on a
 * garbage page can be).
 */
#include <errno.h>
#include <math.h>	/* NAN: a macro, no libm */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "clock.h"
#include "uffd-compat.h"
#include "cli.h"
#include "bench.h"

/* A timed thread: released by a barrier, its span read on itself. */
struct bench_lane {
	pthread_t		 tid;
	pthread_barrier_t	*barrier;
	uint64_t		 start, end;	/* its own clock */
};

/* One touching thread and its share [lo, hi) of the region. */
struct bench_thread {
	struct bench_lane	 l;		/* first: bench_touch_span */
	unsigned char		*base;
	size_t			 lo, hi, page;
	double			*fault_ns;	/* per huge page of the share */
	double			*read_ns;
	unsigned long		 sink;
};

/* Where read bytes end up, so the compiler must do the reads. */
static unsigned long	bench_touch_sink;

static void	*bench_touch_thread(void *);
static uint64_t	bench_touch_span(void *, size_t, int, pthread_barrier_t *);
static double	bench_touch_clear_pass(const struct clear_kernel *,
		    unsigned char *);

/*
 * Thread i's share of a region: whole huge pages when there are enough to
 * go round, else 4 KiB subpages (two threads on one 1 GiB page both fault
 * on it, as two vCPUs touching it would).
 */
void
bench_touch_share(size_t size, size_t page, int threads, int i, size_t *lo,
    size_t *hi)
{
	size_t	 unit, n;

	unit = size / page >= (size_t)threads ? page : BENCH_SUBPAGE;
	n = size / unit;
	*lo = n * (size_t)i / (size_t)threads * unit;
	*hi = n * (size_t)(i + 1) / (size_t)threads * unit;
}

/* Huge pages that [lo, hi) reaches into: the faults its thread times. */
size_t
bench_touch_pieces(size_t lo, size_t hi, size_t page)
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
bench_touch_thread(void *arg)
{
	struct bench_thread		*t = arg;
	const volatile unsigned char	*b = t->base;
	const volatile uint64_t		*line;
	unsigned long			 sum = 0;
	uint64_t			 t0, t1, t2;
	size_t				 pg, lo, hi, off, fault, k = 0, i;

	pthread_barrier_wait(t->l.barrier);
	t->l.start = clock_now_ns();
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
	t->l.end = clock_now_ns();
	t->sink = sum;
	return (NULL);
}

/*
 * Release n threads waiting on barrier (each an element of the array at
 * threads, stride bytes apart, whose first member is its bench_lane) and
 * join them: ns from the first one's start to the last one's end.
 */
static uint64_t
bench_touch_span(void *threads, size_t stride, int n,
    pthread_barrier_t *barrier)
{
	struct bench_lane	*l;
	uint64_t		 t0 = UINT64_MAX, t1 = 0;
	int			 i;

	pthread_barrier_wait(barrier);
	for (i = 0; i < n; i++) {
		l = (struct bench_lane *)(void *)((char *)threads +
		    (size_t)i * stride);
		pthread_join(l->tid, NULL);
		t0 = l->start < t0 ? l->start : t0;
		t1 = l->end > t1 ? l->end : t1;
	}
	pthread_barrier_destroy(barrier);
	return (t1 > t0 ? t1 - t0 : 0);
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
double
bench_touch(void *addr, size_t size, size_t page, int threads,
    double *fault_ns, double *read_ns)
{
	struct bench_thread	*t;
	pthread_barrier_t	 barrier;
	uint64_t		 ns;
	size_t			 k = 0;
	int			 i;

	t = cli_alloc((size_t)threads * sizeof *t);
	cli_barrier_init(&barrier, (unsigned int)threads + 1);
	for (i = 0; i < threads; i++) {
		t[i].l.barrier = &barrier;
		t[i].base = addr;
		t[i].page = page;
		bench_touch_share(size, page, threads, i, &t[i].lo, &t[i].hi);
		t[i].fault_ns = fault_ns + k;
		t[i].read_ns = read_ns + k;
		k += bench_touch_pieces(t[i].lo, t[i].hi, page);
		cli_thread_start(&t[i].l.tid, bench_touch_thread, &t[i], i);
	}
	ns = bench_touch_span(t, sizeof *t, threads, &barrier);
	for (i = 0; i < threads; i++)
		bench_touch_sink += t[i].sink;
	free(t);
	return ((double)ns / 1e9);
}

/*
 * The figures of one touch, into out[BENCH_NFIGS]; no GB/s (NAN, printed
 * "-") from a touch shorter than twice what the clock can tell.
 */
void
bench_touch_figures(double secs, size_t size, double *fault_ns, double *read_ns,
    size_t n, double *out)
{
	out[FIG_GBS] = secs * 1e9 < 2.0 * (double)clock_resolution_ns() ? NAN :
	    (double)size / secs / 1e9;
	out[FIG_FAULT_P50] = cli_pct(fault_ns, n, 0.50) / 1e3;
	out[FIG_FAULT_P99] = cli_pct(fault_ns, n, 0.99) / 1e3;
	out[FIG_FAULT_MAX] = cli_pct(fault_ns, n, 1.0) / 1e3;
	out[FIG_READ_P50] = cli_pct(read_ns, n, 0.50);
	out[FIG_READ_P99] = cli_pct(read_ns, n, 0.99);
}

/*
 * The kernel's reference: a fresh shared hugetlb memfd, as a VMM maps
 * guest RAM without hpzerod, served by the kernel's own faults.
 */
void *
bench_touch_map(const struct bench_page *pg, size_t len)
{
	return (cli_kernel_map(len, pg->mfdflag));
}

/* Every byte hpzerod served must read zero: say where one is not. */
int
bench_touch_verify(struct bench *b, const struct bench_case *c,
    const unsigned char *base, int run)
{
	size_t		 bad, first;
	unsigned int	 firstval;

	if ((bad = cli_nonzero(base, c->size, &first, &firstval)) != 0) {
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

/* One thread of bench_touch_bound: extents off a shared cursor. */
struct bench_bound {
	struct bench_lane	 l;		/* first: bench_touch_span */
	const struct clear_kernel *k;
	unsigned char		*page;
	size_t			 size, extent;
	size_t			*next;
};

static void *
bench_bound_thread(void *arg)
{
	struct bench_bound	*t = arg;
	size_t			 off, len;

	pthread_barrier_wait(t->l.barrier);
	t->l.start = clock_now_ns();
	while ((off = __atomic_fetch_add(t->next, t->extent,
	    __ATOMIC_RELAXED)) < t->size) {
		len = t->size - off < t->extent ? t->size - off : t->extent;
		t->k->fn(t->page + off, len);
	}
	clear_fence();
	t->l.end = clock_now_ns();
	return (NULL);
}

/*
 * The least a fault on a garbage page can stall when hpzerod clears it:
 * the same page cleared here by as many threads as the daemon has
 * workers, with its bulk kernel, in extents of its size taken off one
 * cursor (as clear_split shares a page).  Milliseconds from the first
 * thread's start to the last one's end, each read on the thread itself.
 */
double
bench_touch_bound(void *page, size_t size, int threads, size_t extent,
    const struct clear_kernel *k)
{
	struct bench_bound	*t;
	pthread_barrier_t	 barrier;
	uint64_t		 ns;
	size_t			 next = 0;
	int			 i;

	t = cli_alloc((size_t)threads * sizeof *t);
	cli_barrier_init(&barrier, (unsigned int)threads + 1);
	for (i = 0; i < threads; i++) {
		t[i].l.barrier = &barrier;
		t[i].k = k;
		t[i].page = page;
		t[i].size = size;
		t[i].extent = extent;
		t[i].next = &next;
		cli_thread_start(&t[i].l.tid, bench_bound_thread, &t[i], i);
	}
	ns = bench_touch_span(t, sizeof *t, threads, &barrier);
	free(t);
	return ((double)ns / 1e6);
}

/* One timed pass of a clear kernel over the buffer, in GB/s. */
static double
bench_touch_clear_pass(const struct clear_kernel *k, unsigned char *p)
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
void
bench_touch_nt(struct bench *b)
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
		bench_touch_clear_pass(k, p);
		if (p[0] != 0 || p[BENCH_NT_BYTES / 2 + BENCH_SKEW] != 0 ||
		    p[BENCH_NT_BYTES - 1] != 0) {
			fprintf(stderr, "hpz-bench: clear kernel %s left"
			    " non-zero bytes; not measured\n", k->name);
			continue;
		}
		for (i = 0; i < BENCH_NT_PASSES; i++)
			b->nt[kind][i] = bench_touch_clear_pass(k, p);
		b->nt_have[kind] = 1;
	}
	munmap(p, BENCH_NT_BYTES);
	if (b->nt_have[b->nt_bulk])
		b->nt_ok = 1;
	else
		snprintf(b->nt_why, sizeof b->nt_why, "the bulk kernel %s"
		    " failed its check", clear_bulk_kernel->name);
}

/* The single-core clear bandwidth (GB/s, median of the passes) or NAN. */
double
bench_touch_nt_median(const struct bench *b)
{
	double	 med, lo, hi;

	if (!b->nt_ok)
		return (NAN);
	cli_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, &med, &lo, &hi);
	return (med);
}

/*
 * recycled 2 MiB, 1 thread, hpzerod GB/s over the single-core clear
 * bandwidth (both medians); NAN when either is missing.
 */
double
bench_touch_nt_ratio(const struct bench *b, double *gbs, double *nt)
{
	double	 lo, hi;
	int	 i;

	*gbs = *nt = NAN;
	if (!b->nt_ok)
		return (NAN);
	cli_stats(b->nt[b->nt_bulk], BENCH_NT_PASSES, nt, &lo, &hi);
	for (i = 0; i < b->ncases; i++) {
		if (b->cases[i].page == &bench_pages[0] &&
		    b->cases[i].mode == 0 && b->cases[i].threads == 1 &&
		    b->cases[i].done > 0)
			cli_stats(b->cases[i].fig[FIG_GBS][SIDE_HPZ],
			    b->cases[i].done, gbs, &lo, &hi);
	}
	return (*gbs / *nt);
}

/* What one clock_gettime costs: it is inside every latency figure. */
double
bench_touch_clock(void)
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
	return (cli_pct(d, sizeof d / sizeof d[0], 0.5));
}
