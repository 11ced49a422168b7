/*
 * itest-serve.c - the basic service against the daemon run.sh started: fresh
 * and garbage regions read zero, data written stays, discard and reset
 * hide garbage, unregister and destroy let go.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "itest.h"

/* --- basic service ------------------------------------------------------ */

/*
 * A fresh region holds no garbage: its faults are the kernel's (it zeroes
 * a fresh page anyway; a round trip through us would only add to it).
 * The daemon registers it and leaves its faults alone.
 */
static void
itest_fresh_left_to_kernel(unsigned int page, size_t len)
{
	struct hpz_region	r;
	struct hpz_status	before, after;

	itest_create(&r, len, page);
	before = itest_status();
	itest_register(&r);
	itest_assert_zero(&r, "first read");
	after = itest_status();
	cr_assert_eq(after.registers - before.registers, 1);
	cr_assert_eq(after.faults - before.faults, 0,
	    "the daemon served %llu faults of a fresh region: they are the "
	    "kernel's", after.faults - before.faults);
	cr_assert_geq(after.intercept_off - before.intercept_off, 1,
	    "the region was never left to the kernel");
	hpz_region_destroy(&r);
}

Test(serve, fresh_2m_region_reads_zero)
{
	itest_fresh_left_to_kernel(HPZ_PAGE_2M, 32 * MiB);
}

Test(serve, fresh_shmem_region_reads_zero)
{
	itest_fresh_left_to_kernel(HPZ_PAGE_SHMEM, 8 * MiB);
}

Test(serve, one_gib_page_region)
{
	struct hpz_region	r;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, GiB, HPZ_PAGE_1G);
	memset(r.addr, 0x77, 4096);	/* present before registration */
	itest_register(&r);
	cr_assert_eq(madvise(r.addr, r.len, MADV_DONTNEED), 0);
	p = r.addr;
	cr_assert_eq(itest_count_not(p, 4096, 0x77, &first), 0,
	    "1 GiB page lost its data at %zu", first);
	memset(p, 0xee, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "%s", hpz_last_error());
	itest_assert_zero(&r, "1 GiB page after reset");
	hpz_region_destroy(&r);
}

Test(serve, writes_after_fault_stick)
{
	struct hpz_region	r;
	unsigned char		*p;
	size_t			 i, first;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	p = r.addr;
	for (i = 0; i < r.len; i += 4096)
		p[i] = (unsigned char)(i >> 12);
	/* Zap our mapping: the pages hold data, the daemon maps them as is. */
	cr_assert_eq(madvise(r.addr, r.len, MADV_DONTNEED), 0);
	for (i = 0; i < r.len; i += 4096)
		cr_assert_eq(p[i], (unsigned char)(i >> 12),
		    "data page zeroed at %zu", i);
	(void)first;
	hpz_region_destroy(&r);
}

Test(serve, data_before_registration_kept)
{
	struct hpz_region	 r;
	unsigned char		*alias;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	/* Data written through another mapping: the region never saw it. */
	alias = itest_alias(&r);
	memset(alias, 0x3c, 8 * MiB);
	itest_register(&r);
	cr_assert_eq(itest_count_not(r.addr, 8 * MiB, 0x3c, &first), 0,
	    "data lost at offset %zu", first);
	cr_assert_eq(itest_count_nonzero((char *)r.addr + 8 * MiB, 8 * MiB,
	    &first), 0, "fresh half not zero at %zu", first);
	munmap(alias, r.len);
	hpz_region_destroy(&r);
}

/*
 * Garbage in the first garbage bytes of a len region of page (written
 * through an alias, or through the very mapping we register, which maps
 * it): registered with HPZ_DISCARD, all of it reads zero.
 */
static void
itest_discard_reads_zero(size_t len, unsigned int page, size_t garbage,
    int alias, unsigned char v, const char *what)
{
	struct hpz_region	 r;
	unsigned char		*p = NULL;

	itest_create(&r, len, page);
	if (alias)
		p = itest_alias(&r);
	memset(alias ? p : r.addr, v, garbage);
	r.flags = HPZ_DISCARD;
	itest_register(&r);
	itest_assert_zero(&r, what);
	if (alias)
		munmap(p, r.len);
	hpz_region_destroy(&r);
}

Test(serve, discard_region_reads_zero)
{
	/* Garbage in part of the file. */
	itest_discard_reads_zero(16 * MiB, HPZ_PAGE_2M, 10 * MiB, 1, 0xd1,
	    "discard region");
}

Test(serve, discard_hides_garbage_already_mapped)
{
	itest_discard_reads_zero(16 * MiB, HPZ_PAGE_2M, 16 * MiB, 0, 0xd2,
	    "discard region that was mapped");
}

Test(serve, discard_shmem_region_reads_zero)
{
	itest_discard_reads_zero(4 * MiB, HPZ_PAGE_SHMEM, 4 * MiB, 1, 0x99,
	    "discard shmem region");
}

Test(serve, reset_after_pattern_reads_zero)
{
	struct hpz_region	r;
	struct hpz_status	before, after;
	int			round;

	itest_create(&r, 32 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	for (round = 0; round < 3; round++) {
		memset(r.addr, 0xa5 + round, r.len);
		before = itest_status();
		cr_assert_eq(hpz_reset(&r), 0, "reset: %s", hpz_last_error());
		itest_assert_zero(&r, "after reset");
		after = itest_status();
		/* By the fault path or ahead of it, in the background. */
		cr_assert_geq(after.pages_cleared + after.bg_pages_cleared -
		    before.pages_cleared - before.bg_pages_cleared, 16,
		    "daemon cleared %llu pages", after.pages_cleared +
		    after.bg_pages_cleared - before.pages_cleared -
		    before.bg_pages_cleared);
	}
	hpz_region_destroy(&r);
}

Test(serve, reset_shmem_reads_zero)
{
	struct hpz_region	r;

	itest_create(&r, 4 * MiB, HPZ_PAGE_SHMEM);
	itest_register(&r);
	memset(r.addr, 0x5e, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "reset: %s", hpz_last_error());
	itest_assert_zero(&r, "shmem after reset");
	hpz_region_destroy(&r);
}

Test(serve, reset_hides_writes_through_alias)
{
	struct hpz_region	 r;
	unsigned char		*alias;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	alias = itest_alias(&r);
	memset(alias, 0x42, r.len);	/* stale bytes the region never read */
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	munmap(alias, r.len);
	hpz_region_destroy(&r);
}

Test(serve, reset_subrange_only)
{
	struct hpz_region	 r, mid;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x17, r.len);
	mid = r;
	mid.addr = (char *)r.addr + 4 * MiB;
	mid.len = 8 * MiB;
	cr_assert_eq(hpz_reset(&mid), 0, "%s", hpz_last_error());
	p = r.addr;
	cr_assert_eq(itest_count_not(p, 4 * MiB, 0x17, &first), 0);
	cr_assert_eq(itest_count_nonzero(p + 4 * MiB, 8 * MiB, &first), 0,
	    "reset range not zero at %zu", first);
	cr_assert_eq(itest_count_not(p + 12 * MiB, 4 * MiB, 0x17, &first), 0,
	    "page outside the reset lost data at %zu", first);
	hpz_region_destroy(&r);
}

Test(serve, reset_keeps_pages_allocated)
{
	struct hpz_region	r;
	struct stat		before, after;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	memset(r.addr, 0x01, r.len);
	/* hugetlbfs counts the file's allocated pages in st_blocks. */
	cr_assert_eq(fstat(r.fd, &before), 0);
	cr_assert_eq((size_t)before.st_blocks * 512, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	itest_assert_zero(&r, "after reset");
	cr_assert_eq(fstat(r.fd, &after), 0);
	cr_assert_eq(after.st_blocks, before.st_blocks,
	    "file blocks went %lld -> %lld: pages were given back",
	    (long long)before.st_blocks, (long long)after.st_blocks);
	hpz_region_destroy(&r);
}

Test(serve, unregister_keeps_data_drops_garbage)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 first;

	itest_create(&r, 16 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	p = r.addr;
	memset(p, 0xab, r.len);
	cr_assert_eq(hpz_reset(&r), 0);
	memset(p, 0xcd, 2 * MiB);	/* page 0: data again */
	cr_assert_eq(hpz_unregister(&r), 0, "%s", hpz_last_error());
	cr_assert_eq(itest_count_not(p, 2 * MiB, 0xcd, &first), 0,
	    "mapped data lost at %zu", first);
	cr_assert_eq(itest_count_nonzero(p + 2 * MiB, r.len - 2 * MiB,
	    &first), 0, "stale garbage visible after unregister at %zu",
	    first);
	/* Unregistered: a second unregister says so. */
	cr_assert_eq(hpz_unregister(&r), -ENXIO);
	hpz_region_destroy(&r);
}

Test(serve, destroy_releases_region)
{
	struct hpz_region	r;
	struct hpz_status	base, mid, after;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	base = itest_status();
	itest_register(&r);
	mid = itest_status();
	cr_assert_eq(mid.regions, base.regions + 1);
	cr_assert_eq(mid.bytes_registered, base.bytes_registered + r.len);
	hpz_region_destroy(&r);
	after = itest_status();
	cr_assert_eq(after.regions, base.regions);
	cr_assert_null(r.addr);
}

Test(serve, random_order_touches)
{
	struct hpz_region	 r;
	unsigned char		*p;
	size_t			 n, i, j, t, *order, first;

	itest_create(&r, 64 * MiB, HPZ_PAGE_2M);
	r.flags = HPZ_DISCARD;
	itest_register(&r);
	p = r.addr;
	n = r.len / 4096;
	order = malloc(n * sizeof(*order));
	cr_assert_not_null(order);
	for (i = 0; i < n; i++)
		order[i] = i;
	srand(12345);
	for (i = n - 1; i > 0; i--) {
		j = (size_t)rand() % (i + 1);
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		cr_assert_eq(p[order[i] * 4096 + 4095], 0);
		p[order[i] * 4096] = (unsigned char)(order[i] | 1);
	}
	for (i = 0; i < n; i++) {
		cr_assert_eq(p[i * 4096], (unsigned char)(i | 1));
		cr_assert_eq(itest_count_nonzero(p + i * 4096 + 8, 4096 - 8,
		    &first), 0);
	}
	free(order);
	hpz_region_destroy(&r);
}
