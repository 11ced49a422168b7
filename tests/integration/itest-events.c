/*
 * itest-events.c - the client changes its mappings under the daemon:
 * munmap, mremap, madvise(MADV_DONTNEED/MADV_REMOVE) and fork without
 * MADV_DONTFORK.  Every access runs in a thread given a generous bound, so
 * that a fault nobody serves fails the test instead of hanging it.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"

#define PAGE		(2 * MiB)
#define BOUND_S		30	/* "did not hang", not a timing claim */

/* What a reader thread checks: len bytes at p all equal to v. */
/* Check [p, p+len) reads v, in a thread that must finish in BOUND_S. */
static void
ev_expect(const void *p, size_t len, unsigned char v, const char *what)
{
	itest_expect_bytes(p, len, v, BOUND_S, what);
}

/* Pages 0-1 data (0x11, 0x22), pages 2-3 garbage (were 0xee). */
static void
ev_setup(struct hpz_region *r)
{
	struct hpz_region	sub;
	unsigned char		*p;

	itest_create(r, 4 * PAGE, HPZ_PAGE_2M);
	itest_register(r);
	p = r->addr;
	memset(p, 0xee, r->len);
	sub = *r;
	sub.addr = p + 2 * PAGE;
	sub.len = 2 * PAGE;
	cr_assert_eq(hpz_reset(&sub), 0, "reset: %s", hpz_last_error());
	memset(p, 0x11, PAGE);
	memset(p + PAGE, 0x22, PAGE);
}

/* Is a region of ours listed at addr? */
static int
ev_listed(uintptr_t addr)
{
	struct hpz_region_info	info[64];
	size_t			n, i;

	cr_assert_eq(hpz_list_regions(info, 64, &n), 0, "%s",
	    hpz_last_error());
	for (i = 0; i < n && i < 64; i++)
		if (info[i].addr == addr && info[i].pid == getpid())
			return (1);
	return (0);
}

/* Wait (bounded) until the daemon lists no region of ours at addr. */
static void
ev_wait_unlisted(uintptr_t addr, const char *what)
{
	int	i;

	for (i = 0; i < BOUND_S * 20; i++) {
		if (!ev_listed(addr))
			return;
		usleep(50000);
	}
	cr_assert_fail("%s: the daemon still serves the region", what);
}

/* The file as the kernel serves it, through a fresh unregistered map. */
static void
ev_expect_file(const struct hpz_region *r, const char *what)
{
	unsigned char	*q;

	q = mmap(NULL, r->len, PROT_READ, MAP_SHARED, r->fd, 0);
	cr_assert_neq(q, MAP_FAILED);
	ev_expect(q, PAGE, 0x11, what);
	ev_expect(q + PAGE, PAGE, 0x22, what);
	ev_expect(q + 2 * PAGE, 2 * PAGE, 0, what);
	munmap(q, r->len);
}

/* A region the client munmaps: dropped, garbage punched, data kept. */
Test(events, munmap_releases_region, .timeout = 120)
{
	struct hpz_region	r;

	ev_setup(&r);
	cr_assert(ev_listed((uintptr_t)r.addr));
	cr_assert_eq(munmap(r.addr, r.len), 0);
	ev_wait_unlisted((uintptr_t)r.addr, "after munmap");
	ev_expect_file(&r, "file after munmap");
	close(r.fd);
}

/* Half of it unmapped: released; the other half still reads right. */
Test(events, partial_munmap_releases_region, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;

	ev_setup(&r);
	p = r.addr;
	cr_assert_eq(munmap(p + 3 * PAGE, PAGE), 0);
	ev_wait_unlisted((uintptr_t)p, "after a partial munmap");
	ev_expect(p, PAGE, 0x11, "data page 0");
	ev_expect(p + PAGE, PAGE, 0x22, "data page 1");
	ev_expect(p + 2 * PAGE, PAGE, 0, "garbage page 2");
	munmap(p, 3 * PAGE);
	close(r.fd);
}

/* A region moved whole: served at its new address. */
Test(events, mremap_whole_region, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p, *hole, *to;
	uintptr_t		 a;

	ev_setup(&r);
	/* A 2 MiB aligned hole to move it to. */
	hole = mmap(NULL, r.len + PAGE, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(hole, MAP_FAILED);
	a = ((uintptr_t)hole + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
	p = mremap(r.addr, r.len, r.len, MREMAP_MAYMOVE | MREMAP_FIXED,
	    (void *)a);
	if (p == MAP_FAILED && errno == EINVAL)
		cr_skip_test("this kernel cannot move hugetlb mappings");
	cr_assert_neq(p, MAP_FAILED, "mremap: %s", strerror(errno));
	to = p;
	ev_expect(to, PAGE, 0x11, "data page 0, moved");
	ev_expect(to + PAGE, PAGE, 0x22, "data page 1, moved");
	ev_expect(to + 2 * PAGE, 2 * PAGE, 0, "garbage pages, moved");
	cr_assert(ev_listed((uintptr_t)to), "not listed at its new address");
	cr_assert(!ev_listed((uintptr_t)r.addr), "still at the old address");
	/* New data there sticks too. */
	memset(to + 3 * PAGE, 0x44, PAGE);
	ev_expect(to + 3 * PAGE, PAGE, 0x44, "written after the move");
	cr_assert_eq(munmap(to, r.len), 0);
	ev_wait_unlisted((uintptr_t)to, "after munmap of the moved region");
	munmap(hole, (size_t)(a - (uintptr_t)hole));
	close(r.fd);
}

/* MADV_DONTNEED drops page tables only: data and zeros read back. */
Test(events, madv_dontneed_keeps_data, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;

	ev_setup(&r);
	p = r.addr;
	/* Page 2 cleared and mapped; page 3 left garbage, never touched. */
	ev_expect(p + 2 * PAGE, PAGE, 0, "garbage page 2 before");
	cr_assert_eq(madvise(p, r.len, MADV_DONTNEED), 0);
	ev_expect(p, PAGE, 0x11, "data page 0 after DONTNEED");
	ev_expect(p + PAGE, PAGE, 0x22, "data page 1 after DONTNEED");
	ev_expect(p + 2 * PAGE, 2 * PAGE, 0, "zeroed pages after DONTNEED");
	cr_assert(ev_listed((uintptr_t)p));
	hpz_region_destroy(&r);
}

/* MADV_REMOVE punches pages out: they read zero, the rest is kept. */
Test(events, madv_remove_reads_zero, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;

	ev_setup(&r);
	p = r.addr;
	cr_assert_eq(madvise(p + PAGE, 2 * PAGE, MADV_REMOVE), 0, "%s",
	    strerror(errno));
	ev_expect(p, PAGE, 0x11, "data page 0");
	ev_expect(p + PAGE, 2 * PAGE, 0, "removed pages");
	ev_expect(p + 3 * PAGE, PAGE, 0, "garbage page 3");
	memset(p + PAGE, 0x55, PAGE);
	ev_expect(p + PAGE, PAGE, 0x55, "written after REMOVE");
	cr_assert(ev_listed((uintptr_t)p));
	hpz_region_destroy(&r);
}

/* The child's reads, reported by its exit status. */
static int
ev_child(const unsigned char *p)
{
	size_t	first;

	if (itest_count_not(p, PAGE, 0x11, &first) != 0)
		return (1);
	if (itest_count_not(p + PAGE, PAGE, 0x22, &first) != 0)
		return (2);
	if (itest_count_nonzero(p + 2 * PAGE, 2 * PAGE, &first) != 0)
		return (3);
	return (0);
}

/* Wait for pid at most BOUND_S; kill it if it hangs.  Its wait status. */
static int
ev_wait_child(pid_t pid)
{
	int	status, i;

	for (i = 0; i < BOUND_S * 20; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return (status);
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	cr_assert_fail("the child hung on its region");
	return (-1);
}

/* Forked without MADV_DONTFORK: the child sees data and zeros, never garbage. */
Test(events, fork_without_dontfork, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;
	pid_t			 pid;
	int			 status;

	ev_setup(&r);
	p = r.addr;
	cr_assert_eq(madvise(p, r.len, MADV_DOFORK), 0);
	/* Page 1 not mapped in the parent: the child faults it as MINOR. */
	cr_assert_eq(madvise(p + PAGE, PAGE, MADV_DONTNEED), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(ev_child(p));
	status = ev_wait_child(pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child saw the wrong bytes (status 0x%x)", status);
	/* The parent still reads its data, and zeros where garbage was. */
	ev_expect(p, PAGE, 0x11, "parent data page 0");
	ev_expect(p + PAGE, PAGE, 0x22, "parent data page 1");
	ev_expect(p + 2 * PAGE, 2 * PAGE, 0, "parent garbage pages");
	hpz_region_destroy(&r);
}

/* A forked child that writes: the parent sees it, like any shared map. */
Test(events, fork_child_writes_shared, .timeout = 120)
{
	struct hpz_region	 r;
	unsigned char		*p;
	pid_t			 pid;
	int			 status;

	ev_setup(&r);
	p = r.addr;
	cr_assert_eq(madvise(p, r.len, MADV_DOFORK), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (itest_count_nonzero(p + 3 * PAGE, PAGE, &(size_t){0}) != 0)
			_exit(3);
		memset(p + 3 * PAGE, 0x66, PAGE);
		_exit(0);
	}
	status = ev_wait_child(pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child failed (status 0x%x)", status);
	ev_expect(p + 3 * PAGE, PAGE, 0x66, "child's write, in the parent");
	ev_expect(p + 2 * PAGE, PAGE, 0, "garbage page 2 in the parent");
	hpz_region_destroy(&r);
}
