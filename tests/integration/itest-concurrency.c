/*
 * itest-concurrency.c - many at once: threads faulting the same page,
 * several client processes, a client killed or forked mid-region.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"

/* --- concurrency ---------------------------------------------------------- */

struct same_page {
	pthread_barrier_t	*barrier;
	volatile unsigned char	*byte;
	unsigned char		 seen;
};

static void *
same_page_main(void *arg)
{
	struct same_page	*sp = arg;

	pthread_barrier_wait(sp->barrier);
	sp->seen = *sp->byte;
	return (NULL);
}

static void
itest_same_page(unsigned int flags, int reset)
{
	struct hpz_region	r;
	pthread_barrier_t	barrier;
	pthread_t		t[8];
	struct same_page	sp[8];
	int			i, round;

	itest_create(&r, 8 * MiB, HPZ_PAGE_2M);
	r.flags = flags;
	itest_register(&r);
	for (round = 0; round < 4; round++) {
		if (reset) {
			memset(r.addr, 0xff, r.len);
			cr_assert_eq(hpz_reset(&r), 0);
		}
		pthread_barrier_init(&barrier, NULL, 8);
		for (i = 0; i < 8; i++) {
			sp[i].barrier = &barrier;
			sp[i].byte = (unsigned char *)r.addr +
			    (size_t)round * 2 * MiB + (size_t)i * 4096 * 7;
			sp[i].seen = 0xee;
			pthread_create(&t[i], NULL, same_page_main, &sp[i]);
		}
		for (i = 0; i < 8; i++) {
			pthread_join(t[i], NULL);
			cr_assert_eq(sp[i].seen, 0, "thread %d read 0x%02x", i,
			    sp[i].seen);
		}
		pthread_barrier_destroy(&barrier);
	}
	itest_assert_zero(&r, "after concurrent faults");
	hpz_region_destroy(&r);
}

Test(concurrency, threads_fault_same_fresh_page)
{
	itest_same_page(0, 0);
}

Test(concurrency, threads_fault_same_garbage_page)
{
	itest_same_page(HPZ_DISCARD, 1);
}

/* One client process: its own region, touched, checked, reset, checked. */
static int
itest_child_cycle(size_t len)
{
	struct hpz_region	r;
	size_t			first;
	int			round;

	if (hpz_region_create(&r, len, HPZ_PAGE_2M) != 0)
		return (3);
	if (hpz_register(&r) != 0)
		return (4);
	for (round = 0; round < 3; round++) {
		if (itest_count_nonzero(r.addr, r.len, &first) != 0)
			return (5);
		memset(r.addr, 0x80 | round, r.len);
		if (hpz_reset(&r) != 0)
			return (6);
	}
	if (itest_count_nonzero(r.addr, r.len, &first) != 0)
		return (7);
	hpz_region_destroy(&r);
	return (0);
}

Test(concurrency, several_processes_at_once)
{
	pid_t	pid[4];
	int	i, status;

	itest_need_pages(2048, 4 * 16);
	for (i = 0; i < 4; i++) {
		pid[i] = fork();
		cr_assert_geq(pid[i], 0);
		if (pid[i] == 0)
			_exit(itest_child_cycle(32 * MiB));
	}
	for (i = 0; i < 4; i++) {
		cr_assert_eq(waitpid(pid[i], &status, 0), pid[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "client process %d failed with status 0x%x", i, status);
	}
}

Test(concurrency, killed_client_releases_its_state)
{
	struct hpz_status	base, st;
	struct hpz_region	r;
	pid_t			pid;
	int			pfd[2], i, status;
	char			c;

	itest_need_pages(2048, 64);
	base = itest_status();
	cr_assert_eq(pipe(pfd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		if (hpz_region_create(&r, 128 * MiB, HPZ_PAGE_2M) != 0 ||
		    hpz_register(&r) != 0)
			_exit(3);
		if (write(pfd[1], "r", 1) != 1)
			_exit(4);
		for (;;) {	/* fault until killed */
			memset(r.addr, 0x66, r.len);
			hpz_reset(&r);
		}
	}
	close(pfd[1]);
	cr_assert_eq(read(pfd[0], &c, 1), 1, "child did not register");
	usleep(200 * 1000);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status));
	for (i = 0; i < 100; i++) {
		st = itest_status();
		if (st.regions == base.regions && st.clients == base.clients + 1)
			break;
		usleep(50 * 1000);
	}
	cr_assert_eq(st.regions, base.regions,
	    "daemon still holds %llu regions (had %llu)", st.regions,
	    base.regions);
	cr_assert_eq(st.bytes_registered, base.bytes_registered);
	close(pfd[0]);
	/* And the daemon still serves. */
	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	itest_assert_zero(&r, "after a client was killed");
	hpz_region_destroy(&r);
}

Test(concurrency, forked_child_does_not_inherit_region)
{
	struct hpz_region	r;
	pid_t			pid;
	int			status;

	itest_create(&r, 4 * MiB, HPZ_PAGE_2M);
	itest_register(&r);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		unsigned char	vec;

		/* MADV_DONTFORK: the range is not mapped here at all. */
		if (mincore(r.addr, 4096, &vec) == -1 && errno == ENOMEM)
			_exit(0);
		_exit(1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child could reach the registered range (status 0x%x)", status);
	itest_assert_zero(&r, "parent");
	hpz_region_destroy(&r);
}
