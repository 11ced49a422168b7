/*
 * test-state.c - unit tests of the per-page state machine: what a fault
 * does in every state, claim/release/reset, claims from many threads, and
 * recovery from a server that died holding pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "hpz-state.h"
#include "uffdio.h"

static const uint8_t	data_states[] = { PAGE_KEEP, PAGE_ZEROED, PAGE_MAPPED };

/* --- fault decisions ---------------------------------------------------- */

Test(state, missing_fault_populates_unless_garbage)
{
	unsigned int	s;

	for (s = 0; s < 256; s++)
		cr_assert_eq(state_fault_action((uint8_t)s, FAULT_MISSING),
		    (s & PAGE_STATE_MASK) == PAGE_GARBAGE ? ACTION_CLEAR :
		    ACTION_POPULATE, "state 0x%02x", s);
}

/*
 * A MISSING fault can be read after the page was allocated and written,
 * then reset: allocating does not zero a page that exists, so the page
 * must be cleared (found by the soak test, with premap and a reset).
 */
Test(state, late_missing_fault_on_garbage_clears)
{
	cr_assert_eq(state_fault_action(PAGE_GARBAGE, FAULT_MISSING),
	    ACTION_CLEAR);
}

Test(state, minor_fault_on_garbage_clears)
{
	cr_assert_eq(state_fault_action(PAGE_GARBAGE, FAULT_MINOR),
	    ACTION_CLEAR);
	/* The flag bits are masked off: the decision rests on the state. */
	cr_assert_eq(state_fault_action(PAGE_GARBAGE | PAGE_BUSY,
	    FAULT_MINOR), ACTION_CLEAR);
	cr_assert_eq(state_fault_action(PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET,
	    FAULT_MINOR), ACTION_CLEAR);
}

Test(state, minor_fault_on_data_maps)
{
	size_t	i;
	uint8_t	s;

	for (i = 0; i < sizeof(data_states); i++) {
		s = data_states[i];
		cr_expect_eq(state_fault_action(s, FAULT_MINOR), ACTION_MAP,
		    "%s", state_name(s));
		cr_expect_eq(state_fault_action(s | PAGE_BUSY, FAULT_MINOR),
		    ACTION_MAP, "%s|BUSY", state_name(s));
		cr_expect_eq(state_fault_action(s | PAGE_BUSY | PAGE_RESET,
		    FAULT_MINOR), ACTION_MAP, "%s|BUSY|RESET", state_name(s));
	}
}

/* The one rule that protects client data, over every byte value. */
Test(state, no_data_page_is_ever_cleared)
{
	unsigned int	s, n = 0;

	for (s = 0; s < 256; s++) {
		if ((s & PAGE_STATE_MASK) == PAGE_GARBAGE)
			continue;
		n++;
		cr_assert_neq(state_fault_action((uint8_t)s, FAULT_MINOR),
		    ACTION_CLEAR, "state 0x%02x would be cleared", s);
		cr_assert_neq(state_fault_action((uint8_t)s, FAULT_MISSING),
		    ACTION_CLEAR, "state 0x%02x would be cleared", s);
	}
	cr_assert_eq(n, 256 - 16);
}

Test(state, needs_punch_only_garbage)
{
	unsigned int	s;

	for (s = 0; s < 256; s++)
		cr_assert_eq(!!state_needs_clear((uint8_t)s),
		    (s & PAGE_STATE_MASK) == PAGE_GARBAGE, "state 0x%02x", s);
}

Test(state, names)
{
	cr_expect_str_eq(state_name(PAGE_KEEP), "keep");
	cr_expect_str_eq(state_name(PAGE_GARBAGE), "garbage");
	cr_expect_str_eq(state_name(PAGE_ZEROED), "zeroed");
	cr_expect_str_eq(state_name(PAGE_MAPPED), "mapped");
	cr_expect_str_eq(state_name(PAGE_MAPPED | PAGE_BUSY), "mapped");
	cr_expect_str_eq(state_name(PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET),
	    "garbage");
	cr_expect_str_eq(state_name(4), "invalid");
	cr_expect_str_eq(state_name(PAGE_STATE_MASK), "invalid");
}

/* --- claim, release, reset ---------------------------------------------- */

Test(state, claim_free_page)
{
	static const uint8_t	states[] = { PAGE_KEEP, PAGE_GARBAGE,
				    PAGE_ZEROED, PAGE_MAPPED };
	_Atomic uint8_t		page;
	uint8_t			was;
	size_t			i;

	for (i = 0; i < sizeof(states); i++) {
		atomic_init(&page, states[i]);
		was = 0xff;
		cr_assert_eq(state_claim(&page, &was), 1, "%s",
		    state_name(states[i]));
		cr_assert_eq(was, states[i]);
		cr_assert_eq(atomic_load(&page), states[i] | PAGE_BUSY);
	}
}

Test(state, claim_busy_page_fails)
{
	_Atomic uint8_t	page;
	uint8_t		was;

	atomic_init(&page, PAGE_MAPPED);
	cr_assert_eq(state_claim(&page, &was), 1);
	cr_assert_eq(state_claim(&page, &was), 0, "claimed twice");
	cr_assert_eq(atomic_load(&page), PAGE_MAPPED | PAGE_BUSY);

	atomic_init(&page, PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET);
	cr_assert_eq(state_claim(&page, &was), 0);
	cr_assert_eq(atomic_load(&page),
	    PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET);
}

Test(state, release_sets_state_and_frees)
{
	_Atomic uint8_t	page;
	uint8_t		was;

	atomic_init(&page, PAGE_GARBAGE);
	cr_assert_eq(state_claim(&page, &was), 1);
	cr_assert_eq(was, PAGE_GARBAGE);
	cr_assert_eq(state_release(&page, PAGE_MAPPED), PAGE_MAPPED);
	cr_assert_eq(atomic_load(&page), PAGE_MAPPED);

	/* Free again: the next worker gets it and sees the new state. */
	cr_assert_eq(state_claim(&page, &was), 1);
	cr_assert_eq(was, PAGE_MAPPED);
	cr_assert_eq(state_release(&page, PAGE_ZEROED), PAGE_ZEROED);
	cr_assert_eq(atomic_load(&page), PAGE_ZEROED);

	/* Flag bits a worker passes by mistake do not stick. */
	cr_assert_eq(state_claim(&page, &was), 1);
	cr_assert_eq(state_release(&page, PAGE_MAPPED | PAGE_BUSY | PAGE_RESET),
	    PAGE_MAPPED);
	cr_assert_eq(atomic_load(&page), PAGE_MAPPED);
}

Test(state, reset_idle_page)
{
	static const uint8_t	states[] = { PAGE_KEEP, PAGE_GARBAGE,
				    PAGE_ZEROED, PAGE_MAPPED };
	_Atomic uint8_t		page;
	size_t			i;

	for (i = 0; i < sizeof(states); i++) {
		atomic_init(&page, states[i]);
		state_reset(&page);
		cr_assert_eq(atomic_load(&page), PAGE_GARBAGE, "from %s",
		    state_name(states[i]));
	}
}

Test(state, reset_during_work_wins)
{
	static const uint8_t	results[] = { PAGE_KEEP, PAGE_ZEROED,
				    PAGE_MAPPED, PAGE_GARBAGE };
	_Atomic uint8_t		page;
	uint8_t			was;
	size_t			i;

	for (i = 0; i < sizeof(results); i++) {
		atomic_init(&page, PAGE_ZEROED);
		cr_assert_eq(state_claim(&page, &was), 1);
		state_reset(&page);
		/* Still owned by the worker: nobody else may take it. */
		cr_assert_eq(atomic_load(&page),
		    PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET);
		cr_assert_eq(state_claim(&page, &was), 0);
		/* A second reset changes nothing. */
		state_reset(&page);
		cr_assert_eq(atomic_load(&page),
		    PAGE_GARBAGE | PAGE_BUSY | PAGE_RESET);

		cr_assert_eq(state_release(&page, results[i]), PAGE_GARBAGE,
		    "worker's %s beat the reset", state_name(results[i]));
		cr_assert_eq(atomic_load(&page), PAGE_GARBAGE);

		/* The reset is consumed: the next round is ordinary. */
		cr_assert_eq(state_claim(&page, &was), 1);
		cr_assert_eq(was, PAGE_GARBAGE);
		cr_assert_eq(state_release(&page, PAGE_MAPPED), PAGE_MAPPED);
		cr_assert_eq(atomic_load(&page), PAGE_MAPPED);
	}
}

/* --- many threads on one page ------------------------------------------- */

#define HAMMER_ITERS	100000

struct hammer {
	_Atomic uint8_t	page;
	atomic_int	owners;
	atomic_int	stop;
	atomic_int	bad_owners;
	atomic_int	bad_busy;
	unsigned long	counter;	/* only touched while claimed */
};

static void *
hammer_worker(void *arg)
{
	struct hammer	*h = arg;
	unsigned long	 c;
	uint8_t		 was;
	int		 i, j;

	for (i = 0; i < HAMMER_ITERS; i++) {
		while (!state_claim(&h->page, &was))
			;
		if (atomic_fetch_add(&h->owners, 1) != 0)
			atomic_fetch_add(&h->bad_owners, 1);
		if ((atomic_load(&h->page) & PAGE_BUSY) == 0)
			atomic_fetch_add(&h->bad_busy, 1);
		/* Read, pause, write: a second owner would lose updates. */
		c = h->counter;
		for (j = 0; j < 32; j++)
			atomic_signal_fence(memory_order_seq_cst);
		h->counter = c + 1;
		atomic_fetch_sub(&h->owners, 1);
		state_release(&h->page, (i & 1) ? PAGE_MAPPED : PAGE_ZEROED);
	}
	return (NULL);
}

static void *
hammer_resetter(void *arg)
{
	struct hammer	*h = arg;

	while (!atomic_load(&h->stop))
		state_reset(&h->page);
	return (NULL);
}

static void
hammer_run(int nworkers, int with_reset)
{
	struct hammer	h;
	pthread_t	t[4], r;
	int		i;
	uint8_t		s;

	cr_assert_leq(nworkers, 4);
	atomic_init(&h.page, PAGE_KEEP);
	atomic_init(&h.owners, 0);
	atomic_init(&h.stop, 0);
	atomic_init(&h.bad_owners, 0);
	atomic_init(&h.bad_busy, 0);
	h.counter = 0;
	if (with_reset)
		cr_assert_eq(pthread_create(&r, NULL, hammer_resetter, &h), 0);
	for (i = 0; i < nworkers; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer_worker, &h),
		    0);
	for (i = 0; i < nworkers; i++)
		pthread_join(t[i], NULL);
	atomic_store(&h.stop, 1);
	if (with_reset)
		pthread_join(r, NULL);

	cr_assert_eq(atomic_load(&h.bad_owners), 0,
	    "%d times two workers held the page", atomic_load(&h.bad_owners));
	cr_assert_eq(atomic_load(&h.bad_busy), 0,
	    "%d times a held page was not busy", atomic_load(&h.bad_busy));
	cr_assert_eq(h.counter, (unsigned long)nworkers * HAMMER_ITERS,
	    "lost updates: %lu", h.counter);
	s = atomic_load(&h.page);
	cr_assert_eq(s & (PAGE_BUSY | PAGE_RESET), 0, "left 0x%02x", s);
	if (with_reset)
		cr_assert(s == PAGE_GARBAGE || s == PAGE_ZEROED ||
		    s == PAGE_MAPPED, "left 0x%02x", s);
	else	/* the last release of each worker is odd: mapped */
		cr_assert_eq(s, PAGE_MAPPED);
}

Test(state, claims_are_exclusive)
{
	hammer_run(4, 0);
}

/* Resets while workers hold the page never hand it to a second worker. */
Test(state, claims_are_exclusive_under_resets)
{
	hammer_run(3, 1);
}

/*
 * Crash recovery.  A server marks a page cleared before it maps it, so a
 * page a dead server left busy is garbage only while it was never mapped.
 */
Test(recover, busy_garbage_stays_garbage)
{
	cr_assert_eq(state_recovered(PAGE_GARBAGE | PAGE_BUSY), PAGE_GARBAGE);
}

Test(recover, busy_cleared_counts_as_data)
{
	_Atomic uint8_t	page = PAGE_GARBAGE;
	uint8_t		was;

	cr_assert(state_claim(&page, &was));
	state_mark_cleared(&page);
	cr_assert_eq(atomic_load(&page), PAGE_ZEROED | PAGE_BUSY);
	/* The server dies here, between the clear and the map. */
	cr_assert_eq(state_recovered(atomic_load(&page)), PAGE_MAPPED);
	cr_assert_eq(state_fault_action(state_recovered(atomic_load(&page)),
	    FAULT_MINOR), ACTION_MAP, "a recovered page must not be cleared");
}

Test(recover, reset_while_busy_is_garbage)
{
	_Atomic uint8_t	page = PAGE_MAPPED;
	uint8_t		was;

	cr_assert(state_claim(&page, &was));
	state_reset(&page);
	state_mark_cleared(&page);
	cr_assert(atomic_load(&page) & PAGE_RESET, "mark_cleared lost a reset");
	cr_assert_eq(state_recovered(atomic_load(&page)), PAGE_GARBAGE);
}

Test(recover, data_states_are_kept)
{
	size_t	i;

	for (i = 0; i < sizeof(data_states); i++) {
		cr_expect_eq(state_recovered(data_states[i]), data_states[i]);
		if (data_states[i] != PAGE_ZEROED)
			cr_expect_eq(state_recovered(data_states[i] |
			    PAGE_BUSY), data_states[i], "%s|BUSY",
			    state_name(data_states[i]));
	}
	cr_expect_eq(state_recovered(PAGE_GARBAGE), PAGE_GARBAGE);
}

Test(recover, whole_array)
{
	_Atomic uint8_t	pages[6];
	uint8_t		in[6] = { PAGE_KEEP, PAGE_GARBAGE | PAGE_BUSY,
			    PAGE_ZEROED | PAGE_BUSY, PAGE_MAPPED,
			    PAGE_MAPPED | PAGE_BUSY | PAGE_RESET | PAGE_GARBAGE,
			    PAGE_GARBAGE };
	uint8_t		out[6] = { PAGE_KEEP, PAGE_GARBAGE, PAGE_MAPPED,
			    PAGE_MAPPED, PAGE_GARBAGE, PAGE_GARBAGE };
	size_t		i;

	for (i = 0; i < 6; i++)
		atomic_init(&pages[i], in[i]);
	cr_assert_eq(state_recover(pages, 6), 3);
	for (i = 0; i < 6; i++)
		cr_expect_eq(atomic_load(&pages[i]), out[i], "page %zu", i);
}

/* The server lock: one holder; it goes when the holder's fd closes. */
Test(recover, server_lock_is_exclusive)
{
	int	mfd, a, b, status;
	pid_t	pid;

	mfd = memfd_create("test-state", MFD_CLOEXEC);
	cr_assert_geq(mfd, 0);
	cr_assert_eq(ftruncate(mfd, HPZ_STATE_SIZE(16)), 0);
	a = state_lock_server(mfd, 0);
	cr_assert_geq(a, 0, "first lock: %s", strerror(-a));
	b = state_lock_server(mfd, 50);
	cr_assert_eq(b, -EAGAIN, "second lock in the same process: %d", b);
	/* Another process cannot take it either, until we drop it. */
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0)
		_exit(state_lock_server(mfd, 0) == -EAGAIN ? 0 : 1);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "a second process took a held lock");
	close(a);
	b = state_lock_server(mfd, 0);
	cr_assert_geq(b, 0, "lock not free after close: %s", strerror(-b));
	close(b);
	close(mfd);
}

/* A holder that dies drops the lock: its successor may recover. */
Test(recover, server_lock_dies_with_holder)
{
	int	mfd, b, pfd[2], status;
	char	c;
	pid_t	pid;

	mfd = memfd_create("test-state", MFD_CLOEXEC);
	cr_assert_geq(mfd, 0);
	cr_assert_eq(ftruncate(mfd, HPZ_STATE_SIZE(16)), 0);
	cr_assert_eq(pipe(pfd), 0);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		if (state_lock_server(mfd, 0) < 0)
			_exit(1);
		(void)write(pfd[1], "x", 1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(pfd[0], &c, 1), 1);
	cr_assert_eq(state_lock_server(mfd, 0), -EAGAIN);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	b = state_lock_server(mfd, 1000);
	cr_assert_geq(b, 0, "lock of a killed holder not free: %s",
	    strerror(-b));
	close(b);
	close(mfd);
	close(pfd[0]);
	close(pfd[1]);
}

/* Garbage leaves the file, data stays, and the state says so. */
static int	drop_calls;

static int
drop_clear_fails(void *arg, uint64_t first, uint64_t n)
{
	(void)arg;
	(void)first;
	(void)n;
	drop_calls++;
	return (-1);
}

Test(recover, drop_garbage_punches_runs_and_keeps_data)
{
	_Atomic uint8_t	pages[6];
	uint8_t		in[6] = { PAGE_MAPPED, PAGE_GARBAGE, PAGE_GARBAGE,
			    PAGE_ZEROED, PAGE_GARBAGE, PAGE_KEEP };
	unsigned char	buf[4096];
	uint64_t	left = 9, i;
	int		fd, rofd;
	char		path[64];

	fd = memfd_create("test-drop", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	memset(buf, 0xab, sizeof(buf));
	for (i = 0; i < 6; i++) {
		cr_assert_eq(pwrite(fd, buf, sizeof(buf), (off_t)(i * 4096)),
		    4096);
		atomic_init(&pages[i], in[i]);
	}
	/* A file that will not punch: the runs go to clear, and stay. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rofd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(rofd, 0);
	cr_assert_eq(state_drop_garbage(pages, 6, rofd, 0, 4096,
	    drop_clear_fails, NULL, &left), 0);
	cr_assert_eq(left, 3);
	cr_assert_eq(drop_calls, 2, "one call a run, not a page");
	cr_assert_eq(atomic_load(&pages[1]), PAGE_GARBAGE);
	close(rofd);

	cr_assert_eq(state_drop_garbage(pages, 6, fd, 0, 4096, NULL, NULL,
	    &left), 3);
	cr_assert_eq(left, 0);
	for (i = 0; i < 6; i++) {
		cr_assert_eq(pread(fd, buf, sizeof(buf), (off_t)(i * 4096)),
		    4096);
		if (in[i] == PAGE_GARBAGE) {
			cr_expect_eq(atomic_load(&pages[i]), PAGE_KEEP,
			    "page %llu", (unsigned long long)i);
			cr_expect_eq(buf[0] | buf[4095], 0, "page %llu not "
			    "punched", (unsigned long long)i);
		} else {
			cr_expect_eq(atomic_load(&pages[i]), in[i]);
			cr_expect_eq(buf[0], 0xab, "page %llu lost its data",
			    (unsigned long long)i);
		}
	}
	close(fd);
}

/* What keep_garbage_clears_in_place_and_leaves_holes clears through. */
struct keep_t {
	char		*map;
	uint64_t	 holes;
	int		 runs;
	int		 stop_after;	/* runs before -EINTR; 0: never */
};

static int
keep_t_zero(void *arg, uint64_t idx, uint64_t n)
{
	struct keep_t	*kt = arg;

	memset(kt->map + idx * 4096, 0, n * 4096);
	return (0);
}

static int
keep_t_run(void *arg, uint64_t first, uint64_t n)
{
	struct keep_t	*kt = arg;

	if (kt->stop_after != 0 && kt->runs >= kt->stop_after)
		return (-EINTR);
	kt->runs++;
	return (state_zero_present(kt->map, 4096, first, n, keep_t_zero, kt,
	    &kt->holes));
}

/*
 * Garbage is cleared in place, not punched: its pages stay in the file and
 * read zero, data pages keep their bytes, a garbage page the client had
 * punched stays a hole (the guard refuses to fill it), and a walk stopped
 * by its deadline leaves the rest garbage.
 */
Test(recover, keep_garbage_clears_in_place_and_leaves_holes)
{
	_Atomic uint8_t	pages[8];
	uint8_t		in[8] = { PAGE_GARBAGE, PAGE_GARBAGE, PAGE_GARBAGE,
			    PAGE_MAPPED, PAGE_GARBAGE, PAGE_GARBAGE, PAGE_KEEP,
			    PAGE_GARBAGE };
	struct keep_t	kt = { NULL, 0, 0, 0 };
	unsigned char	buf[4096];
	uint64_t	left = 9, i, j;
	int		fd, guard;

	fd = memfd_create("test-keep", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	memset(buf, 0xab, sizeof(buf));
	for (i = 0; i < 8; i++) {
		cr_assert_eq(pwrite(fd, buf, sizeof(buf), (off_t)(i * 4096)),
		    4096);
		atomic_init(&pages[i], in[i]);
	}
	/* The client punched garbage page 1 itself. */
	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    4096, 4096), 0);
	kt.map = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_NORESERVE, fd, 0);
	cr_assert_neq(kt.map, MAP_FAILED);
	if ((guard = uffdio_hole_guard((uint64_t)(uintptr_t)kt.map,
	    8 * 4096)) < 0)
		cr_skip_test("no userfaultfd here (%s)", strerror(-guard));

	/* Stopped after its first run (pages 0-2): the rest stays garbage. */
	kt.stop_after = 1;
	cr_assert_eq(state_keep_garbage(pages, 8, 3, keep_t_run, &kt, &left),
	    3);
	cr_assert_eq(left, 3);
	cr_assert_eq(kt.holes, 1);
	cr_assert_eq(atomic_load(&pages[4]), PAGE_GARBAGE);
	cr_assert_eq(atomic_load(&pages[7]), PAGE_GARBAGE);

	kt.stop_after = 0;
	cr_assert_eq(state_keep_garbage(pages, 8, 3, keep_t_run, &kt, &left),
	    3);
	cr_assert_eq(left, 0);
	close(guard);
	munmap(kt.map, 8 * 4096);
	for (i = 0; i < 8; i++) {
		cr_assert_eq(pread(fd, buf, sizeof(buf), (off_t)(i * 4096)),
		    4096);
		for (j = 0; j < sizeof(buf); j++)
			if (buf[j] != (in[i] == PAGE_GARBAGE ? 0 : 0xab))
				break;
		cr_expect_eq(j, sizeof(buf), "page %llu byte %llu is 0x%x",
		    (unsigned long long)i, (unsigned long long)j, buf[j]);
		cr_expect_eq(atomic_load(&pages[i]), in[i] == PAGE_GARBAGE ?
		    PAGE_KEEP : in[i], "page %llu", (unsigned long long)i);
	}
	/* Still in the file, all but the hole, which was not filled. */
	cr_expect_eq(lseek(fd, 0, SEEK_DATA), 0);
	cr_expect_eq(lseek(fd, 0, SEEK_HOLE), 4096);
	cr_expect_eq(lseek(fd, 4096, SEEK_DATA), 2 * 4096);
	cr_expect_eq(lseek(fd, 2 * 4096, SEEK_HOLE), 8 * 4096);
	close(fd);
}
