/*
 * itest-teardown.c - attacks on how the daemon lets a region go, each in
 * its own process beside an honest client (register, touch, write, reset,
 * check, unregister, round after round), as itest-hostile.c does: its
 * rounds keep completing within a generous liveness bound, every byte it
 * read is zero, and the daemon is the same process afterwards.
 *
 *   - a region with a reset in flight, registered again with the same fds
 *     on a second connection of the same process, then the first
 *     connection closed (the reset's answer held it: use after free);
 *   - a sparse HPZ_DISCARD|HPZ_NO_SCRUB shmem region sealed
 *     F_SEAL_FUTURE_WRITE before it is let go (the punch fails with
 *     EPERM): the daemon must not write its holes full of zeros.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-protocol.h"

#define TD_ATTACK_MS	6000
#define TD_BOUND_MS	30000
#define TD_HONEST_LEN	(16 * MiB)

struct td_shared {
	atomic_int	 stop;
	atomic_int	 rounds;
	atomic_ullong	 last_ms;
	atomic_ullong	 bad;
	atomic_int	 failed;
	char		 why[256];
	atomic_int	 attacks;
	atomic_int	 wrong;		/* the attack saw what it must not */
	char		 what[256];
	atomic_llong	 blocks_before, blocks_after;
};

static uint64_t
td_bound(void)
{
	return (TD_BOUND_MS * (uint64_t)itest_wait_scale());
}

static void
td_honest_main(struct td_shared *sh)
{
	struct hpz_region	r;
	size_t			first;
	int			error;

	if (hpz_region_create(&r, TD_HONEST_LEN, HPZ_PAGE_2M) != 0)
		_exit(1);
	while (!atomic_load(&sh->stop)) {
		r.flags = HPZ_DISCARD;
		if ((error = hpz_register(&r)) != 0) {
			snprintf(sh->why, sizeof(sh->why), "register: %s (%s)",
			    hpz_strerror(error), hpz_last_error());
			_exit(1);
		}
		atomic_fetch_add(&sh->bad, itest_count_nonzero(r.addr, r.len,
		    &first));
		memset(r.addr, 0x5a, r.len);
		if ((error = hpz_reset(&r)) != 0) {
			snprintf(sh->why, sizeof(sh->why), "reset: %s (%s)",
			    hpz_strerror(error), hpz_last_error());
			_exit(1);
		}
		atomic_fetch_add(&sh->bad, itest_count_nonzero(r.addr, r.len,
		    &first));
		if ((error = hpz_unregister(&r)) != 0) {
			snprintf(sh->why, sizeof(sh->why), "unregister: %s "
			    "(%s)", hpz_strerror(error), hpz_last_error());
			_exit(1);
		}
		atomic_fetch_add(&sh->rounds, 1);
		atomic_store(&sh->last_ms, itest_now_ms());
	}
	hpz_region_destroy(&r);
	_exit(0);
}

static unsigned long long
td_daemon_start(pid_t pid)
{
	char			 path[64], buf[1024], *p;
	unsigned long long	 start = 0;
	FILE			*f;
	int			 field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return (0);
	if (fgets(buf, sizeof(buf), f) != NULL &&
	    (p = strrchr(buf, ')')) != NULL) {
		for (field = 2; *p != '\0' && field < 22; p++)
			if (*p == ' ')
				field++;
		start = strtoull(p, NULL, 10);
	}
	fclose(f);
	return (start);
}

static void
td_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void
td_watch(struct td_shared *sh, pid_t honest, uint64_t until, const char *n)
{
	uint64_t	now, last;
	int		status;

	for (;;) {
		last = atomic_load(&sh->last_ms);
		now = itest_now_ms();
		if (waitpid(honest, &status, WNOHANG) == honest)
			cr_assert_fail("%s: the honest client exited (status "
			    "0x%x) after %d rounds: %s", n, status,
			    atomic_load(&sh->rounds), sh->why);
		if (now > last && now - last > td_bound()) {
			td_kill(honest);
			cr_assert_fail("%s: the honest client completed no "
			    "round for %llu ms (%d rounds so far)", n,
			    (unsigned long long)(now - last),
			    atomic_load(&sh->rounds));
		}
		if (now >= until)
			return;
		usleep(50 * 1000);
	}
}

/* The attack runs (once, or until killed) beside the honest client. */
static struct td_shared *
td_run(void (*attack)(struct td_shared *), const char *name)
{
	struct td_shared	*sh;
	unsigned long long	 start;
	uint64_t		 t0;
	pid_t			 daemon, honest, hostile;
	int			 status, rounds;

	itest_need_pages(2048, 2 * (TD_HONEST_LEN / (2 * MiB)));
	cr_assert_not_null(getenv("HPZD_PID"), "HPZD_PID is not set (run "
	    "through run.sh)");
	daemon = (pid_t)atoi(getenv("HPZD_PID"));
	start = td_daemon_start(daemon);
	cr_assert_neq(start, 0, "no daemon with pid %d", (int)daemon);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	t0 = itest_now_ms();
	atomic_store(&sh->last_ms, t0);
	if ((honest = fork()) == 0)
		td_honest_main(sh);
	cr_assert_geq(honest, 0);
	if ((hostile = fork()) == 0) {
		attack(sh);
		_exit(0);
	}
	cr_assert_geq(hostile, 0);
	td_watch(sh, honest, t0 + TD_ATTACK_MS, name);
	td_kill(hostile);
	rounds = atomic_load(&sh->rounds);
	t0 = itest_now_ms();
	while (atomic_load(&sh->rounds) < rounds + 1 &&
	    itest_now_ms() - t0 < td_bound())
		td_watch(sh, honest, 0, name);
	atomic_store(&sh->stop, 1);
	t0 = itest_now_ms();
	while (waitpid(honest, &status, WNOHANG) != honest) {
		if (itest_now_ms() - t0 > td_bound()) {
			td_kill(honest);
			cr_assert_fail("%s: the honest client did not finish",
			    name);
		}
		usleep(50 * 1000);
	}
	cr_log_info("%s: %d honest rounds, %d attacks", name,
	    atomic_load(&sh->rounds), atomic_load(&sh->attacks));
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s: the honest client failed (status 0x%x): %s", name, status,
	    sh->why);
	cr_assert_gt(atomic_load(&sh->rounds), rounds,
	    "%s: no honest round after the attacker was killed", name);
	cr_assert_eq(atomic_load(&sh->bad), 0, "%s: the honest client read "
	    "%llu non-zero words", name,
	    (unsigned long long)atomic_load(&sh->bad));
	cr_assert_gt(atomic_load(&sh->attacks), 0, "%s: the attack never "
	    "ran", name);
	cr_assert_eq(kill(daemon, 0), 0, "%s: the daemon (pid %d) is gone",
	    name, (int)daemon);
	cr_assert_eq(td_daemon_start(daemon), start, "%s: pid %d is another "
	    "process now", name, (int)daemon);
	cr_assert_eq(atomic_load(&sh->wrong), 0, "%s: %s", name, sh->what);
	return (sh);
}

static void
td_wrong(struct td_shared *sh, const char *what)
{
	if (atomic_exchange(&sh->wrong, 1) == 0)
		snprintf(sh->what, sizeof(sh->what), "%s", what);
}

/* --- item 5: a sealed file's garbage at teardown ------------------------ */

#define TD_SPARSE_LEN	(1024 * MiB)

static void
td_attack_sealed_sparse(struct td_shared *sh)
{
	struct hpz_region	 r;
	struct stat		 st;
	void			*p;
	int			 fd, error;

	for (;;) {
		fd = memfd_create("td-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd == -1 || ftruncate(fd, (off_t)TD_SPARSE_LEN) == -1)
			_exit(2);
		p = mmap(NULL, TD_SPARSE_LEN, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			_exit(2);
		memset(&r, 0, sizeof(r));
		r.addr = p;
		r.len = TD_SPARSE_LEN;
		r.fd = fd;
		r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
		if ((error = hpz_register(&r)) != 0) {
			snprintf(sh->what, sizeof(sh->what), "register: %s "
			    "(%s)", hpz_strerror(error), hpz_last_error());
			atomic_store(&sh->wrong, 1);
			_exit(3);
		}
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == -1 ||
		    fstat(fd, &st) == -1)
			_exit(4);
		atomic_store(&sh->blocks_before, (long long)st.st_blocks);
		(void)hpz_unregister(&r);
		if (fstat(fd, &st) == -1)
			_exit(4);
		atomic_store(&sh->blocks_after, (long long)st.st_blocks);
		if (st.st_blocks > atomic_load(&sh->blocks_before))
			td_wrong(sh, "the daemon allocated the holes of a "
			    "sealed file at teardown");
		munmap(p, TD_SPARSE_LEN);
		close(fd);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

Test(attack, teardown_sealed_sparse_discard, .timeout = 240)
{
	struct td_shared	*sh;

	sh = td_run(td_attack_sealed_sparse, "sealed sparse HPZ_DISCARD "
	    "shmem teardown");
	cr_log_info("file blocks before %lld, after %lld",
	    (long long)atomic_load(&sh->blocks_before),
	    (long long)atomic_load(&sh->blocks_after));
	cr_assert_leq(atomic_load(&sh->blocks_after),
	    atomic_load(&sh->blocks_before), "the daemon allocated %lld "
	    "blocks of the sealed file's holes at teardown",
	    (long long)(atomic_load(&sh->blocks_after) -
	    atomic_load(&sh->blocks_before)));
	munmap(sh, sizeof(*sh));
}
