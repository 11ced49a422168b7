/*
 * test-region.c - unit tests of region validation and arithmetic: range
 * checks against a backing file, what may back a region, conflicts between
 * regions, lookups, and reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <linux/memfd.h>

#include <criterion/criterion.h>

#include "hpz.h"
#include "hpz-state.h"
#include "resolve.h"
#include "uffd-compat.h"

#include "cost.h"
#include "intercept.h"
#include "region-check.h"
#include "region-life.h"
#include "region.h"


#define MiB		(1024ULL * 1024)
#define PAGE_2M		(2 * MiB)
#define ADDR		0x7f0000000000ULL

static const struct backing file_2m = {
	.fs_magic = HUGETLBFS_MAGIC,
	.page_size = PAGE_2M,
	.size = 64 * MiB,
};

/* --- helpers ------------------------------------------------------------ */

static void
expect_range_bad(uint64_t addr, uint64_t len, uint64_t offset,
    uint64_t page_size, const char *what, const char *needle)
{
	char	why[256];
	int	error;

	memset(why, 0, sizeof(why));
	error = region_check_range(addr, len, offset, page_size, &file_2m,
	    why, sizeof(why));
	cr_expect_eq(error, -EINVAL, "%s: got %d (%s)", what, error, why);
	cr_expect_neq(why[0], '\0', "%s: no reason", what);
	if (needle != NULL)
		cr_expect_not_null(strstr(why, needle), "%s: reason \"%s\" "
		    "lacks \"%s\"", what, why, needle);
}

static void
expect_range_ok(uint64_t addr, uint64_t len, uint64_t offset,
    const char *what)
{
	char	why[256];
	int	error;

	why[0] = '\0';
	error = region_check_range(addr, len, offset, PAGE_2M, &file_2m, why,
	    sizeof(why));
	cr_expect_eq(error, 0, "%s: got %d (%s)", what, error, why);
}

static void
expect_backing_bad(int fd, const char *what, const char *needle)
{
	struct backing	b;
	char		why[256];
	int		error;

	memset(why, 0, sizeof(why));
	error = region_check_backing(fd, &b, why, sizeof(why));
	cr_expect_eq(error, -EINVAL, "%s: got %d (%s)", what, error, why);
	cr_expect_neq(why[0], '\0', "%s: no reason", what);
	if (needle != NULL)
		cr_expect_not_null(strstr(why, needle), "%s: reason \"%s\" "
		    "lacks \"%s\"", what, why, needle);
}

static void
expect_uffd_bad(int fd, const char *what)
{
	char	why[256];
	int	error;

	memset(why, 0, sizeof(why));
	error = region_check_uffd(fd, why, sizeof(why));
	cr_expect_eq(error, -EINVAL, "%s: got %d (%s)", what, error, why);
	cr_expect_neq(why[0], '\0', "%s: no reason", what);
}

static int
shmem_memfd(off_t size)
{
	int	fd;

	fd = memfd_create("test-region", MFD_CLOEXEC);
	cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, size), 0, "ftruncate: %s", strerror(errno));
	return (fd);
}

static void
fake_region(struct region *r, struct client *c, uint64_t addr, uint64_t len,
    dev_t dev, ino_t ino, uint64_t offset)
{
	memset(r, 0, sizeof(*r));
	r->client = c;
	r->addr = addr;
	r->len = len;
	r->offset = offset;
	r->page_size = PAGE_2M;
	r->npages = len / PAGE_2M;
	r->dev = dev;
	r->ino = ino;
	r->uffd = r->fd = -1;
}

/* --- region_overlaps ---------------------------------------------------- */

Test(region, overlaps_basic)
{
	/* Adjacent on either side. */
	cr_expect_not(region_overlaps(0x1000, 0x1000, 0x2000, 0x1000));
	cr_expect_not(region_overlaps(0x2000, 0x1000, 0x1000, 0x1000));
	/* Disjoint. */
	cr_expect_not(region_overlaps(0x1000, 0x1000, 0x5000, 0x1000));
	/* One byte shared, either way round. */
	cr_expect(region_overlaps(0x1000, 0x1001, 0x2000, 0x1000));
	cr_expect(region_overlaps(0x2000, 0x1000, 0x1000, 0x1001));
	/* Partial. */
	cr_expect(region_overlaps(0x1000, 0x3000, 0x2000, 0x3000));
	cr_expect(region_overlaps(0x2000, 0x3000, 0x1000, 0x3000));
	/* Contained, containing, identical. */
	cr_expect(region_overlaps(0x1000, 0x10000, 0x3000, 0x1000));
	cr_expect(region_overlaps(0x3000, 0x1000, 0x1000, 0x10000));
	cr_expect(region_overlaps(0x1000, 0x1000, 0x1000, 0x1000));
	cr_expect(region_overlaps(0, 1, 0, 1));
}

Test(region, overlaps_zero_length)
{
	cr_expect_not(region_overlaps(0x1000, 0, 0x1000, 0x1000));
	cr_expect_not(region_overlaps(0x1000, 0x1000, 0x1000, 0));
	cr_expect_not(region_overlaps(0x1800, 0, 0x1000, 0x1000));
	cr_expect_not(region_overlaps(0x1000, 0x1000, 0x1800, 0));
	cr_expect_not(region_overlaps(0x1000, 0, 0x1000, 0));
}

/* Ranges up to, not reaching, 2^64 (the validators refuse any that do). */
Test(region, overlaps_near_top)
{
	const uint64_t	top = UINT64_MAX;

	/* [top-0x1fff, top-0xfff) and [top-0xfff, top): adjacent. */
	cr_expect_not(region_overlaps(top - 0x1fff, 0x1000, top - 0xfff,
	    0xfff));
	cr_expect_not(region_overlaps(top - 0xfff, 0xfff, top - 0x1fff,
	    0x1000));
	cr_expect(region_overlaps(top - 0x1fff, 0x1001, top - 0xfff, 0xfff));
	cr_expect(region_overlaps(top - 0xfff, 0xfff, top - 0x1fff, 0x1001));
	/* The biggest range from 0 against the last byte below 2^64. */
	cr_expect(region_overlaps(0, top, top - 1, 1));
	cr_expect_not(region_overlaps(0, top - 1, top - 1, 1));
	/* Far apart: low against high. */
	cr_expect_not(region_overlaps(0, 0x1000, top - 0x1000, 0x1000));
	cr_expect_not(region_overlaps(top - 0x1000, 0x1000, 0, 0x1000));
	cr_expect(region_overlaps(1, top - 1, top - 0x1000, 0x1000));
}

/* --- region_check_range ------------------------------------------------- */

Test(region, check_range_valid)
{
	expect_range_ok(ADDR, PAGE_2M, 0, "first page");
	expect_range_ok(ADDR, 64 * MiB, 0, "whole file");
	expect_range_ok(ADDR, 32 * MiB, 32 * MiB, "second half, exact end");
	expect_range_ok(ADDR, PAGE_2M, 62 * MiB, "last page, exact end");
	expect_range_ok(0, PAGE_2M, 0, "address 0");
	expect_range_ok(0 - 2 * PAGE_2M, PAGE_2M, 0, "below 2^64");
}

Test(region, check_range_page_size_mismatch)
{
	expect_range_bad(ADDR, PAGE_2M, 0, 4096, "4 KiB vs 2 MiB",
	    "page size");
	expect_range_bad(ADDR, 1024 * MiB, 0, 1024 * MiB, "1 GiB vs 2 MiB",
	    "page size");
}

Test(region, check_range_empty_and_unaligned)
{
	expect_range_bad(ADDR, 0, 0, PAGE_2M, "len 0", NULL);
	expect_range_bad(ADDR + 4096, PAGE_2M, 0, PAGE_2M, "addr + 4 KiB",
	    "multiples");
	expect_range_bad(ADDR, PAGE_2M + 4096, 0, PAGE_2M, "len + 4 KiB",
	    "multiples");
	expect_range_bad(ADDR, PAGE_2M, 4096, PAGE_2M, "offset 4 KiB",
	    "multiples");
	expect_range_bad(ADDR + 1, PAGE_2M, 0, PAGE_2M, "addr + 1",
	    "multiples");
}

Test(region, check_range_past_end)
{
	expect_range_bad(ADDR, 4 * MiB, 62 * MiB, PAGE_2M,
	    "last page + one more", "past the end");
	expect_range_bad(ADDR, 66 * MiB, 0, PAGE_2M, "file + one page",
	    "past the end");
	expect_range_bad(ADDR, PAGE_2M, 64 * MiB, PAGE_2M, "offset == size",
	    "past the end");
	expect_range_bad(ADDR, PAGE_2M, 66 * MiB, PAGE_2M, "offset > size",
	    "past the end");
	/* offset + len would wrap to inside the file. */
	expect_range_bad(ADDR, 4 * MiB, 0 - PAGE_2M, PAGE_2M,
	    "offset near 2^64", "past the end");
	expect_range_bad(ADDR, 0 - PAGE_2M - ADDR, 4 * MiB, PAGE_2M,
	    "len near 2^64", NULL);
}

Test(region, check_range_address_wrap)
{
	expect_range_bad(0 - PAGE_2M, PAGE_2M, 0, PAGE_2M, "ends at 2^64",
	    "wraps");
	expect_range_bad(0 - PAGE_2M, 4 * MiB, 0, PAGE_2M, "past 2^64",
	    "wraps");
}

/* --- region_check_backing ----------------------------------------------- */

Test(region, check_backing_shmem_memfd)
{
	struct backing	b;
	struct stat	st;
	char		why[256] = "";
	int		fd, error;

	fd = shmem_memfd(3 * 4096);
	memset(&b, 0xa5, sizeof(b));
	error = region_check_backing(fd, &b, why, sizeof(why));
	cr_assert_eq(error, 0, "rejected: %s", why);
	cr_assert_eq(b.fs_magic, TMPFS_MAGIC);
	cr_assert_eq(b.page_size, (uint64_t)sysconf(_SC_PAGESIZE));
	cr_assert_eq(b.size, 3 * 4096);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(b.dev, st.st_dev);
	cr_assert_eq(b.ino, st.st_ino);

	/* The size is read each time, not cached. */
	cr_assert_eq(ftruncate(fd, 64 * MiB), 0);
	cr_assert_eq(region_check_backing(fd, &b, why, sizeof(why)), 0);
	cr_assert_eq(b.size, 64 * MiB);
	close(fd);
}

Test(region, check_backing_not_read_write)
{
	char	path[64];
	int	fd, ro, wo;

	fd = shmem_memfd(4096);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(ro, 0, "open %s: %s", path, strerror(errno));
	expect_backing_bad(ro, "read-only memfd", "read-write");
	wo = open(path, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(wo, 0, "open %s: %s", path, strerror(errno));
	expect_backing_bad(wo, "write-only memfd", "read-write");
	close(wo);
	close(ro);
	close(fd);
}

Test(region, check_backing_other_filesystem)
{
	static const char	*dirs[] = { ".", "/var/tmp", "/tmp" };
	struct statfs		 sfs;
	char			 path[4096];
	size_t			 i;
	int			 fd = -1;

	/* A regular file on neither hugetlbfs nor tmpfs. */
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && fd == -1; i++) {
		if (statfs(dirs[i], &sfs) == -1 ||
		    (long)sfs.f_type == TMPFS_MAGIC ||
		    (long)sfs.f_type == HUGETLBFS_MAGIC)
			continue;
		snprintf(path, sizeof(path), "%s/test-region.XXXXXX", dirs[i]);
		fd = mkstemp(path);
		if (fd != -1)
			unlink(path);
	}
	if (fd == -1)
		cr_skip_test("no writable directory off tmpfs and hugetlbfs");
	cr_assert_eq(ftruncate(fd, 4 * MiB), 0);
	expect_backing_bad(fd, "regular file", "hugetlbfs and shmem");
	close(fd);
}

Test(region, check_backing_not_regular)
{
	int	p[2], sv[2], dir, efd;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	expect_backing_bad(p[0], "pipe read end", "not a regular file");
	expect_backing_bad(p[1], "pipe write end", "not a regular file");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	expect_backing_bad(sv[0], "socket", "not a regular file");
	dir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir == -1)
		dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dir, 0);
	expect_backing_bad(dir, "directory", "not a regular file");
	efd = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(efd, 0);
	expect_backing_bad(efd, "eventfd", "not a regular file");
	expect_backing_bad(-1, "fd -1", "cannot stat");
	close(efd);
	close(dir);
	close(sv[0]);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

Test(region, check_backing_hugetlb_memfd)
{
	struct backing	b;
	char		why[256] = "";
	int		fd, error;

	fd = memfd_create("test-region-huge",
	    MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);
	if (fd == -1)
		cr_skip_test("memfd_create(MFD_HUGETLB): %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, 8 * MiB), 0, "ftruncate: %s",
	    strerror(errno));
	error = region_check_backing(fd, &b, why, sizeof(why));
	cr_assert_eq(error, 0, "rejected: %s", why);
	cr_assert_eq(b.fs_magic, HUGETLBFS_MAGIC);
	cr_assert_eq(b.page_size, PAGE_2M);
	cr_assert_eq(b.size, 8 * MiB);
	close(fd);
}

/* --- region_check_uffd -------------------------------------------------- */

Test(region, check_uffd_accepts_userfaultfd)
{
	char	why[256] = "";
	int	fd, error;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd == -1)
		cr_skip_test("userfaultfd: %s", strerror(errno));
	error = region_check_uffd(fd, why, sizeof(why));
	cr_assert_eq(error, 0, "rejected: %s", why);
	close(fd);
}

Test(region, check_uffd_rejects_others)
{
	int	p[2], efd, mfd, closed;

	efd = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(efd, 0);
	expect_uffd_bad(efd, "eventfd");
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	expect_uffd_bad(p[0], "pipe");
	mfd = shmem_memfd(4096);
	expect_uffd_bad(mfd, "memfd");
	closed = dup(mfd);
	cr_assert_geq(closed, 0);
	close(closed);
	expect_uffd_bad(closed, "closed fd");
	expect_uffd_bad(-1, "fd -1");
	close(mfd);
	close(p[0]);
	close(p[1]);
	close(efd);
}

/* --- region_conflict ---------------------------------------------------- */

Test(region, conflict_same_client_address)
{
	struct regions	list = TAILQ_HEAD_INITIALIZER(list);
	struct client	a = { .id = 1 };
	struct region	r[2];

	fake_region(&r[0], &a, ADDR, 8 * MiB, 1, 100, 0);
	fake_region(&r[1], &a, ADDR + 16 * MiB, 8 * MiB, 1, 200, 0);
	TAILQ_INSERT_TAIL(&list, &r[0], all);
	TAILQ_INSERT_TAIL(&list, &r[1], all);

	/* Another file, but the client's addresses overlap. */
	cr_assert_eq(region_conflict(&list, &a, ADDR + 4 * MiB, 8 * MiB, 1,
	    300, 0), &r[0]);
	cr_assert_eq(region_conflict(&list, &a, ADDR + 20 * MiB, PAGE_2M, 1,
	    300, 0), &r[1]);
	cr_assert_eq(region_conflict(&list, &a, ADDR - PAGE_2M, 64 * MiB, 1,
	    300, 0), &r[0]);
	/* The gap between them and the space after are free. */
	cr_assert_null(region_conflict(&list, &a, ADDR + 8 * MiB, 8 * MiB, 1,
	    300, 0));
	cr_assert_null(region_conflict(&list, &a, ADDR + 24 * MiB, 8 * MiB,
	    1, 300, 0));
}

Test(region, conflict_other_client_address)
{
	struct regions	list = TAILQ_HEAD_INITIALIZER(list);
	struct client	a = { .id = 1 }, b = { .id = 2 };
	struct region	r[2];

	fake_region(&r[0], &a, ADDR, 8 * MiB, 1, 100, 0);
	fake_region(&r[1], &a, ADDR + 16 * MiB, 8 * MiB, 1, 200, 0);
	TAILQ_INSERT_TAIL(&list, &r[0], all);
	TAILQ_INSERT_TAIL(&list, &r[1], all);

	/* Addresses are per process: same numbers, other file, no conflict. */
	cr_assert_null(region_conflict(&list, &b, ADDR, 8 * MiB, 1, 300, 0));
	cr_assert_null(region_conflict(&list, &b, ADDR, 8 * MiB, 2, 100, 0),
	    "same inode number on another device");
	cr_assert_null(region_conflict(&list, &b, ADDR, 8 * MiB, 1, 100,
	    8 * MiB), "same file, disjoint offsets");
}

Test(region, conflict_same_file)
{
	struct regions	list = TAILQ_HEAD_INITIALIZER(list);
	struct client	a = { .id = 1 }, b = { .id = 2 };
	struct region	r[3];

	fake_region(&r[0], &a, ADDR, 8 * MiB, 1, 100, 0);
	fake_region(&r[1], &a, ADDR + 16 * MiB, 8 * MiB, 1, 100, 16 * MiB);
	fake_region(&r[2], &b, ADDR, 8 * MiB, 1, 200, 0);
	TAILQ_INSERT_TAIL(&list, &r[0], all);
	TAILQ_INSERT_TAIL(&list, &r[1], all);
	TAILQ_INSERT_TAIL(&list, &r[2], all);

	/* Another client mapping the same pages of the file elsewhere. */
	cr_assert_eq(region_conflict(&list, &b, 0x100000000ULL, 4 * MiB, 1,
	    100, 4 * MiB), &r[0]);
	cr_assert_eq(region_conflict(&list, &b, 0x100000000ULL, 4 * MiB, 1,
	    100, 20 * MiB), &r[1]);
	/* The same client mapping the file twice. */
	cr_assert_eq(region_conflict(&list, &a, 0x100000000ULL, 4 * MiB, 1,
	    100, 6 * MiB), &r[0]);
	/* Disjoint offsets of the same file share nothing. */
	cr_assert_null(region_conflict(&list, &b, 0x100000000ULL, 8 * MiB, 1,
	    100, 8 * MiB));
	cr_assert_null(region_conflict(&list, &b, 0x100000000ULL, 8 * MiB, 1,
	    100, 24 * MiB));
	/* Empty list. */
	TAILQ_INIT(&list);
	cr_assert_null(region_conflict(&list, &a, ADDR, 8 * MiB, 1, 100, 0));
}

/* --- lookups and arithmetic --------------------------------------------- */

Test(region, page_index)
{
	struct client	c;
	struct region	r;

	fake_region(&r, &c, ADDR, 64 * MiB, 1, 100, 0);
	cr_assert_eq(region_page_index(&r, ADDR), 0);
	cr_assert_eq(region_page_index(&r, ADDR + 1), 0);
	cr_assert_eq(region_page_index(&r, ADDR + PAGE_2M - 1), 0);
	cr_assert_eq(region_page_index(&r, ADDR + PAGE_2M), 1);
	cr_assert_eq(region_page_index(&r, ADDR + 5 * PAGE_2M + 12345), 5);
	cr_assert_eq(region_page_index(&r, ADDR + 64 * MiB - 1), 31);
	/* The file offset plays no part: indexes are into the region. */
	r.offset = 10 * PAGE_2M;
	cr_assert_eq(region_page_index(&r, ADDR + 3 * PAGE_2M), 3);
	r.page_size = 4096;
	cr_assert_eq(region_page_index(&r, ADDR + 3 * PAGE_2M), 3 * 512);
}

Test(region, find_exact_and_containing)
{
	struct client	c;
	struct region	r[2];

	memset(&c, 0, sizeof(c));
	TAILQ_INIT(&c.regions);
	fake_region(&r[0], &c, ADDR, 8 * MiB, 1, 100, 0);
	fake_region(&r[1], &c, ADDR + 16 * MiB, 8 * MiB, 1, 200, 0);
	TAILQ_INSERT_TAIL(&c.regions, &r[0], entry);
	TAILQ_INSERT_TAIL(&c.regions, &r[1], entry);

	cr_assert_eq(region_find(&c, ADDR, 8 * MiB, 1), &r[0]);
	cr_assert_eq(region_find(&c, ADDR + 16 * MiB, 8 * MiB, 1), &r[1]);
	cr_assert_null(region_find(&c, ADDR, 4 * MiB, 1), "exact: part");
	cr_assert_null(region_find(&c, ADDR + PAGE_2M, 6 * MiB, 1));
	cr_assert_null(region_find(&c, ADDR, 16 * MiB, 1));

	cr_assert_eq(region_find(&c, ADDR, 8 * MiB, 0), &r[0]);
	cr_assert_eq(region_find(&c, ADDR, PAGE_2M, 0), &r[0]);
	cr_assert_eq(region_find(&c, ADDR + 6 * MiB, PAGE_2M, 0), &r[0]);
	cr_assert_eq(region_find(&c, ADDR + 18 * MiB, 4 * MiB, 0), &r[1]);
	cr_assert_null(region_find(&c, ADDR + 6 * MiB, 4 * MiB, 0),
	    "runs past the end");
	cr_assert_null(region_find(&c, ADDR - PAGE_2M, 4 * MiB, 0),
	    "starts before");
	cr_assert_null(region_find(&c, ADDR + 8 * MiB, PAGE_2M, 0), "gap");
	cr_assert_null(region_find(&c, ADDR + 6 * MiB, 12 * MiB, 0),
	    "spans two regions");
	cr_assert_null(region_find(&c, ADDR + 4 * MiB, UINT64_MAX, 0));
	cr_assert_null(region_find(&c, UINT64_MAX - 4095, 4096, 0));

	TAILQ_INIT(&c.regions);
	cr_assert_null(region_find(&c, ADDR, 8 * MiB, 1));
	cr_assert_null(region_find(&c, ADDR, 8 * MiB, 0));
}

/* --- region_reset ------------------------------------------------------- */

static void
state_region(struct region *r, struct client *c, uint64_t npages)
{
	uint64_t	i;

	fake_region(r, c, ADDR, npages * PAGE_2M, 1, 100, 0);
	r->state = calloc(npages, sizeof(*r->state));
	cr_assert_not_null(r->state);
	for (i = 0; i < npages; i++)
		atomic_init(&r->state[i], PAGE_MAPPED);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	region_resolve_init(r);
	/* As libhpz registers it: its faults come to us. */
	intercept_init(r);
}

static void
reset_never(void *arg, int error)
{
	(void)arg;
	cr_assert_fail("a reset done at once called back (%d)", error);
}

Test(region, reset_marks_pages_garbage)
{
	struct client	c;
	struct region	r;
	uint64_t	i;

	state_region(&r, &c, 8);
	cr_assert_eq(region_reset(&r, ADDR + 2 * PAGE_2M, 3 * PAGE_2M,
	    reset_never, NULL), 0);
	for (i = 0; i < 8; i++)
		cr_assert_eq(atomic_load(&r.state[i]),
		    i >= 2 && i < 5 ? PAGE_GARBAGE : PAGE_MAPPED, "page %llu",
		    (unsigned long long)i);
	cr_assert_eq(resolve_garbage(&r.rt), 3);

	cr_assert_eq(region_reset(&r, ADDR + 4096, PAGE_2M, reset_never,
	    NULL), -EINVAL);
	cr_assert_eq(region_reset(&r, ADDR, PAGE_2M + 4096, reset_never,
	    NULL), -EINVAL);
	cr_assert_eq(atomic_load(&r.state[0]), PAGE_MAPPED,
	    "a refused reset changed a page");
	free(r.state);
}

/*
 * A region whose faults the kernel serves (no garbage) must trap them
 * again before a reset declares anything garbage: where that fails, the
 * reset fails and no page changes (else the kernel would map garbage).
 */
Test(region, reset_refused_when_faults_cannot_be_trapped)
{
	struct client	c;
	struct region	r;
	uint64_t	i;

	state_region(&r, &c, 8);
	atomic_store(&r.intercepting, 0);
	r.uffd = -1;		/* UFFDIO_REGISTER fails: EBADF */
	cr_assert_lt(region_reset(&r, ADDR, 8 * PAGE_2M, reset_never, NULL),
	    0, "a reset went on without trapping the faults");
	for (i = 0; i < 8; i++)
		cr_assert_eq(atomic_load(&r.state[i]), PAGE_MAPPED,
		    "page %llu changed by a refused reset",
		    (unsigned long long)i);
	cr_assert_eq(resolve_garbage(&r.rt), 0);
	free(r.state);
}

/* A BUSY bit nobody of ours set is not waited for. */
Test(region, reset_ignores_busy_bits_it_did_not_set)
{
	struct client	c;
	struct region	r;
	uint64_t	i;

	state_region(&r, &c, 8);
	for (i = 0; i < 8; i++)
		atomic_store(&r.state[i], PAGE_MAPPED | PAGE_BUSY);
	cr_assert_eq(region_reset(&r, ADDR, 8 * PAGE_2M, reset_never, NULL),
	    0);
	for (i = 0; i < 8; i++)
		cr_assert_eq(atomic_load(&r.state[i]), PAGE_GARBAGE);
	free(r.state);
}

static int
held_map(struct resolve *rs, uint64_t idx, uint64_t n, uint64_t *done)
{
	(void)rs;
	(void)idx;
	*done = n;
	return (0);
}

static int
held_nop(struct resolve *rs, uint64_t idx, uint64_t n)
{
	(void)rs;
	(void)idx;
	(void)n;
	return (0);
}

static void
held_wake(struct resolve *rs, uint64_t idx, uint64_t n)
{
	(void)held_nop(rs, idx, n);
}

static const struct resolve_ops held_ops = {
	held_nop, held_nop, held_map, held_wake, NULL
};

static void
reset_answered(void *arg, int error)
{
	int	*answered = arg;

	cr_assert_eq(error, 0);
	(*answered)++;
}

/*
 * The answer to a reset waits while a thread of ours holds a page of it
 * (its map of the old bytes may be on its way), without blocking: it comes
 * from region_reset_work once the holder let go, and the page is garbage.
 */
Test(region, reset_answer_waits_for_held_page)
{
	struct client	c;
	struct region	r;
	struct resolve	rs;
	int		answered = 0;

	state_region(&r, &c, 4);
	resolve_begin(&rs, &r.rt, &held_ops, NULL, FAULT_MINOR, 0);
	cr_assert_eq(resolve_claim(&rs, 1, 0, NULL), RESOLVE_CLAIMED);
	cr_assert_eq(region_reset(&r, ADDR, 4 * PAGE_2M, reset_answered,
	    &answered), 1);
	cr_assert_eq(answered, 0, "answered while a page was held");
	region_reset_work(&r);
	cr_assert_eq(answered, 0, "answered while a page was held");
	resolve_run(&rs);
	cr_assert(rs.resets_done);
	/* The holder mapped it, but the reset came during the work. */
	cr_assert_eq(atomic_load(&r.state[1]), PAGE_GARBAGE);
	cr_assert_eq(atomic_load(&r.state[0]), PAGE_GARBAGE);
	region_reset_work(&r);
	cr_assert_eq(answered, 1);
	/* A second reset with nothing held is answered at once. */
	cr_assert_eq(region_reset(&r, ADDR, PAGE_2M, reset_never, NULL), 0);
	free(r.state);
}

/* --- is it the client's own mapping? (region_check_mapping) ------------- */

Test(mapping, maps_line_parsed)
{
	uint64_t	start, end, off;
	unsigned int	maj, min;
	unsigned long	ino;
	int		srw;

	cr_assert_eq(region_check_maps_line("7f0000000000-7f0000200000 rw-s "
	    "00400000 00:0f 12345 /memfd:x (deleted)\n", &start, &end, &off,
	    &maj, &min, &ino, &srw), 0);
	cr_assert_eq(start, 0x7f0000000000ULL);
	cr_assert_eq(end, 0x7f0000200000ULL);
	cr_assert_eq(off, 0x400000ULL);
	cr_assert_eq(maj, 0);
	cr_assert_eq(min, 15);
	cr_assert_eq(ino, 12345);
	cr_assert(srw);
	cr_assert_eq(region_check_maps_line("7f0000000000-7f0000200000 rw-p "
	    "00000000 00:00 0\n", &start, &end, &off, &maj, &min, &ino, &srw),
	    0);
	cr_assert_not(srw, "a private mapping is not shared");
	cr_assert_eq(region_check_maps_line("7f0000000000-7f0000200000 r--s "
	    "00000000 00:0f 7 /x\n", &start, &end, &off, &maj, &min, &ino,
	    &srw), 0);
	cr_assert_not(srw, "a read-only mapping will not do");
	cr_assert_eq(region_check_maps_line("garbage\n", &start, &end, &off,
	    &maj, &min, &ino, &srw), -1);
	cr_assert_eq(region_check_maps_line("2000-1000 rw-s 0 00:01 1\n",
	    &start, &end, &off, &maj, &min, &ino, &srw), -1);
}

Test(mapping, own_shared_mapping_accepted_others_refused)
{
	struct stat	 st;
	char		 why[256];
	char		*p, *priv;
	int		 fd;

	fd = memfd_create("maptest", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 8 * 4096), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	p = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)p, 8 * 4096,
	    st.st_dev, st.st_ino, 0, why, sizeof(why)), 0, "%s", why);
	/* A sub-range at the matching offset is fine too. */
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)p + 4096,
	    4096, st.st_dev, st.st_ino, 4096, why, sizeof(why)), 0, "%s", why);
	/* The wrong offset, inode or a range past the mapping: refused. */
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)p, 8 * 4096,
	    st.st_dev, st.st_ino, 4096, why, sizeof(why)), -EINVAL);
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)p, 8 * 4096,
	    st.st_dev, st.st_ino + 1, 0, why, sizeof(why)), -EINVAL);
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)p, 9 * 4096,
	    st.st_dev, st.st_ino, 0, why, sizeof(why)), -EINVAL);
	cr_assert_not_null(strstr(why, "not the client's"), "%s", why);
	/* A private mapping of the same file is not shared memory. */
	priv = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
	    0);
	cr_assert_neq(priv, MAP_FAILED);
	cr_assert_eq(region_check_mapping(getpid(), (uintptr_t)priv, 8 * 4096,
	    st.st_dev, st.st_ino, 0, why, sizeof(why)), -EINVAL);
	munmap(priv, 8 * 4096);
	munmap(p, 8 * 4096);
	close(fd);
}
