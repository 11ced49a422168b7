/*
 * itest-errors.c - the library's errors: no daemon, memory that cannot be a
 * region, bad ranges and overlaps, calls on unknown regions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <criterion/criterion.h>

#include "itest.h"

/* --- library errors ------------------------------------------------------- */

Test(errors, no_daemon)
{
	struct hpz_region	r;
	int			error;

	setenv("HPZ_SOCKET", "/nonexistent/hpzerod.sock", 1);
	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	error = hpz_register(&r);
	cr_assert(error == -ENOENT || error == -ECONNREFUSED, "got %d", error);
	cr_assert_not_null(strstr(hpz_strerror(error), "not running"));
	/* Nothing left registered: the page is served by the kernel. */
	*(volatile char *)r.addr = 1;
	hpz_region_destroy(&r);
}

Test(errors, private_anonymous_memory_rejected)
{
	struct hpz_region	 r;
	void			*p;

	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = -1;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "private anonymous"),
	    "%s", hpz_last_error());
	munmap(p, 2 * MiB);
}

Test(errors, regular_file_rejected)
{
	struct hpz_region	 r;
	char			 path[] = "/tmp/hpz-itest-XXXXXX";
	void			*p;
	int			 fd;

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(fd, 2 * MiB), 0);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = fd;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "hugetlbfs and shmem"),
	    "%s", hpz_last_error());
	munmap(p, 2 * MiB);
	close(fd);
}

Test(errors, misaligned_region_rejected)
{
	struct hpz_region	r, bad;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	bad = r;
	bad.addr = (char *)r.addr + 4096;
	bad.len = 2 * MiB;
	cr_assert_eq(hpz_register(&bad), -EINVAL);
	bad = r;
	bad.len = 3 * MiB;
	cr_assert_eq(hpz_register(&bad), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "multiple"));
	hpz_region_destroy(&r);
}

Test(errors, region_past_end_of_file_rejected)
{
	struct hpz_region	 r;
	struct hpz_status	 before, after;
	void			*p;
	int			 fd;

	fd = memfd_create("itest", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 1 * MiB), 0);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(&r, 0, sizeof(r));
	r.addr = p;
	r.len = 2 * MiB;
	r.fd = fd;
	before = itest_status();
	cr_assert_eq(hpz_register(&r), -EINVAL);
	cr_assert_not_null(strstr(hpz_last_error(), "past the end"), "%s",
	    hpz_last_error());
	after = itest_status();
	cr_assert_eq(after.regions, before.regions);
	cr_assert_eq(after.requests_rejected, before.requests_rejected + 1);
	munmap(p, 2 * MiB);
	close(fd);
}

Test(errors, overlap_in_same_process_rejected)
{
	struct hpz_region	r, half;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	cr_assert_eq(hpz_register(&r), -EBUSY);
	half = r;
	half.addr = (char *)r.addr + 4 * MiB;
	half.len = 4 * MiB;
	half.offset = 4 * MiB;
	cr_assert_eq(hpz_register(&half), -EBUSY);
	hpz_region_destroy(&r);
}

Test(errors, same_file_range_twice_rejected)
{
	struct hpz_region	 r, alias;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	/* Another mapping of the same file pages: two states for one page. */
	alias = r;
	alias.addr = itest_alias(&r);
	cr_assert_eq(hpz_register(&alias), -EBUSY, "%s", hpz_last_error());
	cr_assert_not_null(strstr(hpz_last_error(), "overlaps"));
	munmap(alias.addr, alias.len);
	hpz_region_destroy(&r);
}

Test(errors, unknown_region_calls)
{
	struct hpz_region	r;

	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	cr_assert_eq(hpz_unregister(&r), -ENXIO);
	cr_assert_eq(hpz_reset(&r), -ENXIO);
	hpz_region_destroy(&r);
}

Test(errors, region_create_bad_arguments)
{
	struct hpz_region	r;

	cr_assert_eq(hpz_region_create(&r, 3 * MiB, HPZ_PAGE_2M), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 0, HPZ_PAGE_2M), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB, 0x4000), -EINVAL);
	cr_assert_eq(hpz_region_create(&r, 2 * MiB,
	    HPZ_PAGE_1G | HPZ_PAGE_SHMEM), -EINVAL);
	cr_assert_eq(hpz_region_create(NULL, 2 * MiB, 0), -EINVAL);
	cr_assert_eq(hpz_register(NULL), -EINVAL);
}

Test(errors, unknown_region_flags_rejected)
{
	struct hpz_region	r;

	itest_create(&r, 2 * MiB, HPZ_PAGE_2M);
	r.flags = 0x8000;
	cr_assert_eq(hpz_register(&r), -EINVAL);
	r.flags = 0;
	hpz_region_destroy(&r);
}
