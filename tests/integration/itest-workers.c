/*
 * itest-workers.c - a client that holds its own address space's lock
 * while the daemon must map pages into it, beside an honest client.
 *
 * The hostile client keeps the VMA of its registered region write-locked
 * most of the time: mprotect() over the region and a 48 GiB read-only
 * anonymous mapping right after it, whose page tables were populated
 * (MADV_POPULATE_READ: every entry the zero page), takes the mmap_lock
 * for writing and walks 12 million entries (about 0.35 s here), again and
 * again.  UFFDIO_CONTINUE into that region cannot take the VMA lock then
 * and waits for the mmap_lock: per-VMA locks (6.4 and later) let it pass a
 * writer that only waits, or MADV_POPULATE_READ holding the lock for
 * reading, but not one that holds it.  Meanwhile many threads touch pages
 * of the region and drop them, so the daemon must CONTINUE again and
 * again.  The honest client's rounds must keep completing within a
 * generous bound (a round takes about 0.1 s), read zero, and the daemon
 * must be the same process afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"

/* How long the attacker works beside the honest client. */
#define WK_ATTACK_MS	15000
/* Generous: an honest round that needs this long is stuck. */
#define WK_BOUND_MS	10000
#define WK_HONEST_LEN	(16 * MiB)
#define WK_BIG_LEN	(48 * GiB)
#define WK_HOSTILE_LEN	(4 * MiB)	/* shmem, 4 KiB pages */
#define WK_TOUCHERS	48
#define WK_PROTECTORS	32
#define WK_SPACING	(4 * 4096)	/* no two touched pages coalesce */

struct wk_shared {
	atomic_int	 stop;
	atomic_int	 rounds;
	atomic_ullong	 last_ms;	/* when the last round completed */
	atomic_ullong	 bad;		/* non-zero words read */
	atomic_int	 failed;
	char		 why[256];
	atomic_int	 registered;	/* the honest client's region is */
	atomic_int	 ready;		/* the attacker is set up */
	atomic_ullong	 touches;	/* hostile touches served */
	atomic_ullong	 protects;	/* hostile mprotect calls */
	atomic_ullong	 protect_ms_max;
};

/* --- the honest client ---------------------------------------------------- */

struct wk_touch {
	unsigned char	*p;
	size_t		 len;
	size_t		 bad;
};

static void *
wk_touch_main(void *arg)
{
	struct wk_touch	*t = arg;
	size_t		 first;

	t->bad = itest_count_nonzero(t->p, t->len, &first);
	return (NULL);
}

static int
wk_fail(struct wk_shared *sh, int step, const char *what, int error)
{
	snprintf(sh->why, sizeof(sh->why), "%s: %s (%s)", what,
	    hpz_strerror(error), hpz_last_error());
	atomic_store(&sh->failed, step);
	return (step);
}

/*
 * Touch from two threads, write, reset, touch again, write.  The region
 * is registered once, before the attack: what this test measures is the
 * daemon's map ioctls, not the register (hpz_register(HPZ_DISCARD) reads
 * every process's /proc/PID/maps, lib/mappers.c, and passes over a process
 * whose lock is held: control/discard_register_beside_* tests that).
 */
static int
wk_round(struct wk_shared *sh, struct hpz_region *r)
{
	struct wk_touch	 t[2];
	pthread_t	 th[2];
	size_t		 first;
	int		 i, error;

	for (i = 0; i < 2; i++) {
		t[i].p = (unsigned char *)r->addr + (size_t)i * (r->len / 2);
		t[i].len = r->len / 2;
		t[i].bad = 0;
		pthread_create(&th[i], NULL, wk_touch_main, &t[i]);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		atomic_fetch_add(&sh->bad, t[i].bad);
	}
	memset(r->addr, 0x5a, r->len);
	if ((error = hpz_reset(r)) != 0)
		return (wk_fail(sh, 2, "reset", error));
	atomic_fetch_add(&sh->bad, itest_count_nonzero(r->addr, r->len,
	    &first));
	memset(r->addr, 0x3c, r->len);
	if ((error = hpz_reset(r)) != 0)
		return (wk_fail(sh, 3, "reset", error));
	return (0);
}

static void
wk_honest_main(struct wk_shared *sh)
{
	struct hpz_region	r;
	int			error;

	if (hpz_region_create(&r, WK_HONEST_LEN, HPZ_PAGE_2M) != 0) {
		wk_fail(sh, 9, "region create", -ENOMEM);
		_exit(1);
	}
	memset(r.addr, 0x77, r.len);
	/* No scrub: its premaps would serve faults a stuck worker holds. */
	r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
	if ((error = hpz_register(&r)) != 0) {
		wk_fail(sh, 1, "register", error);
		_exit(1);
	}
	atomic_store(&sh->registered, 1);
	while (!atomic_load(&sh->stop)) {
		if (wk_round(sh, &r) != 0)
			_exit(1);
		atomic_fetch_add(&sh->rounds, 1);
		atomic_store(&sh->last_ms, itest_now_ms());
	}
	if ((error = hpz_unregister(&r)) != 0) {
		wk_fail(sh, 4, "unregister", error);
		_exit(1);
	}
	hpz_region_destroy(&r);
	_exit(0);
}

/* --- the hostile client --------------------------------------------------- */

static struct wk_shared	*wk_sh;
static unsigned char	*wk_reg;
static size_t		 wk_span;	/* region and the big mapping */
static atomic_uint	 wk_prot;	/* the next mprotect: 1 writable */
static atomic_int	 wk_go;		/* every protector made: walk */

/* Touch one page of the region and drop it: the daemon must map it. */
static void *
wk_toucher(void *arg)
{
	volatile unsigned char	*p = wk_reg + (size_t)(uintptr_t)arg *
				    WK_SPACING;

	for (;;) {
		(void)*p;
		atomic_fetch_add(&wk_sh->touches, 1);
		madvise((void *)p, 4096, MADV_DONTNEED);
	}
	return (NULL);
}

/*
 * The region's VMA write-locked, a long walk at a time; many of these
 * queue for the lock, so a reader that comes waits for every writer queued
 * before it.  Each asks for the protection the last one did not, so that
 * (mostly) every call changes it and walks.
 */
static void *
wk_protector(void *arg)
{
	uint64_t	t0, ms;

	(void)arg;
	while (!atomic_load(&wk_go))
		usleep(1000);
	for (;;) {
		t0 = itest_now_ms();
		mprotect(wk_reg, wk_span, (atomic_fetch_xor(&wk_prot, 1) & 1) ?
		    PROT_READ | PROT_WRITE : PROT_READ);
		ms = itest_now_ms() - t0;
		if (ms > atomic_load(&wk_sh->protect_ms_max))
			atomic_store(&wk_sh->protect_ms_max, ms);
		atomic_fetch_add(&wk_sh->protects, 1);
	}
	return (NULL);
}

static void
wk_hostile_main(struct wk_shared *sh)
{
	struct hpz_region	 r;
	pthread_t		 th;
	unsigned char		*res, *big;
	cpu_set_t		 set;
	size_t			 i;
	int			 fd, cpu;

	wk_sh = sh;
	/*
	 * Every thread of ours on one CPU (the first we may use): the
	 * daemon's loop then reads on another, and routes every fault, ours
	 * and the honest client's, to that CPU's worker.
	 */
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++)
			;
		if (cpu < CPU_SETSIZE) {
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
		}
	}
	wk_span = WK_HOSTILE_LEN + WK_BIG_LEN;
	/* The region, then right after it the big mapping: one mprotect. */
	res = mmap(NULL, wk_span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED || (fd = memfd_create("hpz-hostile", 0)) == -1 ||
	    ftruncate(fd, WK_HOSTILE_LEN) != 0)
		_exit(2);
	wk_reg = mmap(res, WK_HOSTILE_LEN, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED, fd, 0);
	big = mmap(res + WK_HOSTILE_LEN, WK_BIG_LEN, PROT_READ, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (wk_reg == MAP_FAILED || big == MAP_FAILED)
		_exit(3);
	/* Page tables of 4 KiB entries: the walk is what takes time. */
	madvise(big, WK_BIG_LEN, MADV_NOHUGEPAGE);
	if (madvise(big, WK_BIG_LEN, MADV_POPULATE_READ) != 0)
		_exit(4);
	/* Data in every page, registered as garbage: the daemon clears. */
	memset(wk_reg, 0xa5, WK_HOSTILE_LEN);
	r.addr = wk_reg;
	r.len = WK_HOSTILE_LEN;
	r.fd = fd;
	r.offset = 0;
	r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
	if (hpz_register(&r) != 0)
		_exit(5);
	for (i = 0; i < WK_TOUCHERS; i++)
		if (pthread_create(&th, NULL, wk_toucher,
		    (void *)(uintptr_t)i) != 0)
			_exit(6);
	/*
	 * The daemon serves our faults before the lock is taken: with the
	 * protectors walking from the start, a loaded host may hold every
	 * toucher's fault for the whole attack, and nothing would show the
	 * region was ever served.  The test's setup bound covers a daemon
	 * that serves none.
	 */
	while (atomic_load(&sh->touches) == 0)
		usleep(1000);
	/*
	 * Every protector made before any walks: a thread's stack is an
	 * mmap, which would queue behind the protectors already at it.
	 */
	for (i = 0; i < WK_PROTECTORS; i++)
		if (pthread_create(&th, NULL, wk_protector, NULL) != 0)
			_exit(7);
	atomic_store(&wk_go, 1);
	atomic_store(&sh->ready, 1);
	for (;;)
		pause();
}

/* --- the test --------------------------------------------------------------- */

/* Where each thread of pid waits, in the test's log (a stall's story). */
static void
wk_log_stacks(pid_t pid, const char *who)
{
	char		 path[128], line[256], cmd[64];
	FILE		*f;
	int		 tid;
	DIR		*d;
	struct dirent	*e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if ((tid = atoi(e->d_name)) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
		    tid);
		cmd[0] = '\0';
		if ((f = fopen(path, "r")) != NULL) {
			if (fgets(cmd, sizeof(cmd), f) == NULL)
				cmd[0] = '\0';
			cmd[strcspn(cmd, "\n")] = '\0';
			fclose(f);
		}
		cr_log_warn("%s thread %d (%s):", who, tid, cmd);
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stack",
		    (int)pid, tid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL) {
			line[strcspn(line, "\n")] = '\0';
			cr_log_warn("    %s", line);
		}
		fclose(f);
	}
	closedir(d);
}

/* Rounds keep completing within the bound until `until` (0: once). */
static void
wk_watch(struct wk_shared *sh, pid_t honest, pid_t hostile, uint64_t until)
{
	uint64_t	now, last, bound;
	int		status;

	bound = WK_BOUND_MS * (uint64_t)itest_wait_scale();
	for (;;) {
		now = itest_now_ms();
		last = atomic_load(&sh->last_ms);
		if (waitpid(honest, &status, WNOHANG) == honest) {
			itest_kill(hostile);
			cr_assert_fail("the honest client exited (status 0x%x) "
			    "after %d rounds: %s", status,
			    atomic_load(&sh->rounds), sh->why);
		}
		if (now - last > bound) {
			wk_log_stacks(honest, "honest");
			wk_log_stacks(itest_daemon_pid(), "hpzerod");
			itest_kill(honest);
			itest_kill(hostile);
			cr_assert_fail("the honest client completed no round "
			    "for %llu ms beside a client holding its mmap_lock "
			    "(%d rounds so far; bound %llu ms; %llu hostile "
			    "touches served, mprotect up to %llu ms)",
			    (unsigned long long)(now - last),
			    atomic_load(&sh->rounds),
			    (unsigned long long)bound,
			    (unsigned long long)atomic_load(&sh->touches),
			    (unsigned long long)atomic_load(
			    &sh->protect_ms_max));
		}
		if (now >= until)
			return;
		usleep(50 * 1000);
	}
}

/*
 * A worker caught in UFFDIO_CONTINUE on a client's mmap_lock holds only
 * that client's faults: the honest client's go to other workers.
 */
Test(workers, mmap_lock_held_over_continue, .timeout = 240)
{
	struct wk_shared	*sh;
	struct hpz_status	 base, st;
	unsigned long long	 start;
	pid_t			 daemon, honest, hostile;
	uint64_t		 t0;
	int			 status, rounds, bit;

	itest_need_pages(2048, 8 + 8);
	base = itest_status();
	daemon = itest_daemon_pid();
	start = itest_daemon_start(daemon);
	cr_assert_neq(start, 0, "no daemon with pid %d", (int)daemon);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));

	honest = fork();
	cr_assert_geq(honest, 0);
	if (honest == 0)
		wk_honest_main(sh);
	t0 = itest_now_ms();
	while (!atomic_load(&sh->registered)) {
		if (waitpid(honest, &status, WNOHANG) == honest)
			cr_assert_fail("the honest client did not register "
			    "(status 0x%x): %s", status, sh->why);
		cr_assert_lt(itest_now_ms() - t0, 60000,
		    "the honest client took over a minute to register");
		usleep(20 * 1000);
	}
	hostile = fork();
	cr_assert_geq(hostile, 0);
	if (hostile == 0)
		wk_hostile_main(sh);
	t0 = itest_now_ms();
	while (!atomic_load(&sh->ready)) {
		if (waitpid(hostile, &status, WNOHANG) == hostile) {
			itest_kill(honest);
			cr_assert_fail("the attacker did not set up (status "
			    "0x%x)", status);
		}
		if (itest_now_ms() - t0 > 120000) {
			itest_kill(honest);
			itest_kill(hostile);
			cr_assert_fail("the attacker took over 2 minutes to "
			    "set up (%llu of its faults served)",
			    (unsigned long long)atomic_load(&sh->touches));
		}
		usleep(20 * 1000);
	}
	/* Rounds counted from here: the attack is on. */
	rounds = atomic_load(&sh->rounds);
	atomic_store(&sh->last_ms, itest_now_ms());

	wk_watch(sh, honest, hostile, itest_now_ms() + WK_ATTACK_MS);
	st = itest_status();
	rounds = atomic_load(&sh->rounds) - rounds;
	cr_log_info("beside the attack: %d honest rounds in %d ms, %llu "
	    "hostile touches served, %llu mprotect calls (longest %llu ms), "
	    "workers stuck now %llu, found stuck %llu times, %llu items "
	    "taken over, %llu spares", rounds, WK_ATTACK_MS,
	    (unsigned long long)atomic_load(&sh->touches),
	    (unsigned long long)atomic_load(&sh->protects),
	    (unsigned long long)atomic_load(&sh->protect_ms_max),
	    (unsigned long long)st.workers_stuck,
	    (unsigned long long)(st.threads_stuck_total -
	    base.threads_stuck_total),
	    (unsigned long long)(st.work_taken_over - base.work_taken_over),
	    (unsigned long long)st.workers_spare);
	/* Whether a worker of the daemon did wait on the attacker. */
	bit = st.threads_stuck_total > base.threads_stuck_total;
	itest_kill(hostile);
	rounds = atomic_load(&sh->rounds);
	/* With the attacker gone, a round must still complete. */
	t0 = itest_now_ms();
	while (atomic_load(&sh->rounds) < rounds + 1 &&
	    itest_now_ms() - t0 < WK_BOUND_MS * (uint64_t)itest_wait_scale())
		usleep(50 * 1000);
	atomic_store(&sh->stop, 1);
	t0 = itest_now_ms();
	while (waitpid(honest, &status, WNOHANG) != honest) {
		if (itest_now_ms() - t0 > WK_BOUND_MS *
		    (uint64_t)itest_wait_scale()) {
			itest_kill(honest);
			cr_assert_fail("the honest client did not finish its "
			    "last round after the attacker was killed");
		}
		usleep(50 * 1000);
	}
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the honest client failed (status 0x%x): %s", status, sh->why);
	cr_assert_gt(atomic_load(&sh->rounds), rounds,
	    "no honest round completed after the attacker was killed");
	cr_assert_eq(atomic_load(&sh->bad), 0,
	    "the honest client read %llu non-zero words",
	    (unsigned long long)atomic_load(&sh->bad));
	cr_assert_eq(kill(daemon, 0), 0, "the daemon (pid %d) is gone",
	    (int)daemon);
	cr_assert_eq(itest_daemon_start(daemon), start,
	    "pid %d is another process now", (int)daemon);
	munmap(sh, sizeof(*sh));
	/* Without a thread held, the rounds above prove nothing. */
	if (!bit)
		cr_skip_test("no thread of the daemon was held by the "
		    "attacker's lock this time: the attack did not bite");
}
