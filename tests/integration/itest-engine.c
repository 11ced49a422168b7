/*
 * itest-engine.c - the clearing engine as a client sees it: threads on
 * adjacent garbage pages, page edges, the regions and kernels it reports.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "itest.h"

/* --- clearing engine ------------------------------------------------------ */

struct adjacent {
	pthread_barrier_t	*barrier;
	unsigned char		*base;
	size_t			 stride;	/* bytes between this thread's pages */
	size_t			 first;
	size_t			 count;
	size_t			 page;
	size_t			 bad;
};

/* Touch every stride-th page from first, mid-page, and check it reads 0. */
static void *
adjacent_main(void *arg)
{
	struct adjacent	*a = arg;
	size_t		 i, off, first;

	pthread_barrier_wait(a->barrier);
	for (i = 0; i < a->count; i++) {
		off = (a->first + i * a->stride) * a->page;
		if (a->base[off + a->page / 2 + 123] != 0)
			a->bad++;
		a->bad += itest_count_nonzero(a->base + off, a->page, &first);
	}
	return (NULL);
}

/* Many threads faulting neighbouring garbage pages at once: coalescing. */
static void
itest_adjacent(unsigned int pageflag, size_t len, int nthreads)
{
	struct hpz_region	 r;
	struct adjacent		 a[8];
	pthread_barrier_t	 barrier;
	pthread_t		 t[8];
	size_t			 page, npages, bad = 0;
	int			 i, round;

	itest_create(&r, len, pageflag);
	page = (size_t)hpz_page_size(r.fd);
	npages = len / page;
	itest_register(&r);
	for (round = 0; round < 3; round++) {
		memset(r.addr, 0xc3, r.len);
		cr_assert_eq(hpz_reset(&r), 0);
		pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
		for (i = 0; i < nthreads; i++) {
			a[i].barrier = &barrier;
			a[i].base = r.addr;
			a[i].stride = (size_t)nthreads;
			a[i].first = (size_t)i;
			a[i].count = npages / (size_t)nthreads;
			a[i].page = page;
			a[i].bad = 0;
			pthread_create(&t[i], NULL, adjacent_main, &a[i]);
		}
		for (i = 0; i < nthreads; i++) {
			pthread_join(t[i], NULL);
			bad += a[i].bad;
		}
		pthread_barrier_destroy(&barrier);
		cr_assert_eq(bad, 0, "round %d: %zu stale words", round, bad);
	}
	itest_assert_zero(&r, "after interleaved faults");
	hpz_region_destroy(&r);
}

Test(engine, interleaved_threads_on_garbage_2m_pages)
{
	itest_adjacent(HPZ_PAGE_2M, 32 * MiB, 8);
}

Test(engine, interleaved_threads_on_garbage_shmem_pages)
{
	itest_adjacent(HPZ_PAGE_SHMEM, 8 * MiB, 4);
}

Test(engine, neighbourhood_of_fault_is_zero_at_page_edges)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 offs[] = { 0, 4095, 4096, MiB, 2 * MiB - 1 };
	size_t			 i, first;

	itest_create(&r, 2 * MiB * 5, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x7e, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	p = r.addr;
	/* First touch of each page at a different subpage, then all of it. */
	for (i = 0; i < 5; i++)
		cr_assert_eq(p[i * 2 * MiB + offs[i]], 0,
		    "faulting byte of page %zu", i);
	cr_assert_eq(itest_count_nonzero(p, r.len, &first), 0,
	    "stale byte at %zu", first);
	hpz_region_destroy(&r);
}

Test(engine, list_regions_reports_ours)
{
	struct hpz_region	 r;
	struct hpz_region_info	 info[64];
	struct hpz_status	 before;
	size_t			 n, i;
	int			 found = 0;

	/* No scrub: every page's garbage waits for its fault. */
	itest_create(&r, 8 * MiB, HPZ_PAGE_2M | HPZ_NO_SCRUB);
	itest_register(&r);
	memset(r.addr, 1, r.len);
	before = itest_status();
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	(void)itest_status_faults(&before, 4);
	cr_assert_eq(hpz_list_regions(info, 64, &n), 0, "%s",
	    hpz_last_error());
	for (i = 0; i < n && i < 64; i++) {
		if (info[i].addr != (uintptr_t)r.addr)
			continue;
		found = 1;
		cr_assert_eq(info[i].len, r.len);
		cr_assert_eq(info[i].page_size, 2 * MiB);
		cr_assert_eq(info[i].pid, getpid());
		cr_assert_geq(info[i].pages_cleared + info[i].bg_pages_cleared,
		    4);
		cr_assert_geq(info[i].faults, 4);
	}
	cr_assert(found, "our region is not in the list of %zu", n);
	hpz_region_destroy(&r);
}

Test(engine, status_names_the_clear_kernels)
{
	struct hpz_status	st;
	unsigned long long	total = 0;
	int			i, tries;

	/* Counters settle once no fault is being accounted. */
	for (tries = 0; tries < 100; tries++) {
		st = itest_status();
		for (total = 0, i = 0; i < HPZ_LATENCY_BUCKETS; i++)
			total += st.latency_hist[i];
		if (total == st.faults)
			break;
		usleep(10 * 1000);
	}
	cr_assert_neq(st.clear_kernel[0], '\0');
	cr_assert_neq(st.hot_kernel[0], '\0');
	cr_assert_gt(st.extent_max, 0);
	cr_assert_eq(total, st.faults, "histogram holds %llu of %llu faults",
	    total, st.faults);
}
