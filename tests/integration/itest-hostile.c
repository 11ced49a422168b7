/*
 * itest-hostile.c - clients that turn what they legitimately hold (their
 * page-state memfd, their backing file) against the daemon, each in its
 * own process, while an honest client works beside them.  The honest one
 * registers a region, touches it from two threads, checks that it reads
 * zero, writes it, resets it, checks again and unregisters, round after
 * round.  Every test asserts that its rounds keep completing (a generous
 * liveness bound, not a timing threshold), that every byte it read was
 * zero, that it still completes a round once the attacker is gone, and
 * that the daemon is the same process as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"
#include "hpz-state.h"

/* How long the attacker works beside the honest client. */
#define HS_ATTACK_MS	6000
/* Generous: an honest round that needs this long is stuck (soak: 30 s). */
#define HS_BOUND_MS	30000
#define HS_HONEST_LEN	(16 * MiB)
#define HS_ROUNDS_MIN	2

/* What the honest client reports to the test (shared memory). */
struct hs_shared {
	atomic_int	 stop;
	atomic_int	 rounds;
	atomic_ullong	 last_ms;	/* when the last round completed */
	atomic_ullong	 bad;		/* non-zero words read */
	atomic_int	 failed;	/* a call failed: which step */
	char		 why[256];
	atomic_int	 attacks;	/* attacker iterations */
};

/* --- the honest client ---------------------------------------------------- */

struct hs_touch {
	unsigned char	*p;
	size_t		 len;
	size_t		 bad;
};

static void *
hs_touch_main(void *arg)
{
	struct hs_touch	*t = arg;
	size_t		 first;

	t->bad = itest_count_nonzero(t->p, t->len, &first);
	return (NULL);
}

static void
hs_fail(struct hs_shared *sh, int step, const char *what, int error)
{
	snprintf(sh->why, sizeof(sh->why), "%s: %s (%s)", what,
	    hpz_strerror(error), hpz_last_error());
	atomic_store(&sh->failed, step);
}

/* One round; 0, or the step that failed. */
static int
hs_round(struct hs_shared *sh, struct hpz_region *r)
{
	struct hs_touch	 t[2];
	pthread_t	 th[2];
	size_t		 first, bad;
	int		 i, error;

	r->flags = HPZ_DISCARD;
	if ((error = hpz_register(r)) != 0) {
		hs_fail(sh, 1, "register", error);
		return (1);
	}
	for (i = 0; i < 2; i++) {
		t[i].p = (unsigned char *)r->addr + (size_t)i * (r->len / 2);
		t[i].len = r->len / 2;
		t[i].bad = 0;
		pthread_create(&th[i], NULL, hs_touch_main, &t[i]);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		atomic_fetch_add(&sh->bad, t[i].bad);
	}
	memset(r->addr, 0x5a, r->len);
	if ((error = hpz_reset(r)) != 0) {
		hs_fail(sh, 2, "reset", error);
		return (2);
	}
	bad = itest_count_nonzero(r->addr, r->len, &first);
	atomic_fetch_add(&sh->bad, bad);
	memset(r->addr, 0x3c, r->len);
	if ((error = hpz_unregister(r)) != 0) {
		hs_fail(sh, 3, "unregister", error);
		return (3);
	}
	return (0);
}

static void
hs_honest_main(struct hs_shared *sh)
{
	struct hpz_region	r;

	if (hpz_region_create(&r, HS_HONEST_LEN, HPZ_PAGE_2M) != 0) {
		hs_fail(sh, 9, "region create", -ENOMEM);
		_exit(1);
	}
	while (!atomic_load(&sh->stop)) {
		if (hs_round(sh, &r) != 0)
			_exit(1);
		atomic_fetch_add(&sh->rounds, 1);
		atomic_store(&sh->last_ms, itest_now_ms());
	}
	hpz_region_destroy(&r);
	_exit(0);
}

/* --- helpers for the attackers ------------------------------------------ */

/* The page-state memfd libhpz made for our (only) region, mapped. */
static struct hpz_state_header *
hs_state(size_t *lenp)
{
	char		 path[300], link[256];
	struct dirent	*e;
	struct stat	 st;
	DIR		*d;
	void		*p = NULL;
	ssize_t		 n;
	int		 fd = -1, best = -1;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return (NULL);
	while ((e = readdir(d)) != NULL) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		if (strstr(link, "memfd:hpz-state") != NULL &&
		    atoi(e->d_name) > best)
			best = atoi(e->d_name);
	}
	closedir(d);
	if (best < 0)
		return (NULL);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", best);
	if ((fd = open(path, O_RDWR)) == -1 || fstat(fd, &st) == -1)
		goto out;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
	    fd, 0);
	if (p == MAP_FAILED)
		p = NULL;
	*lenp = (size_t)st.st_size;
out:
	if (fd != -1)
		close(fd);
	return (p);
}

static _Atomic uint8_t *
hs_pages(struct hpz_state_header *h)
{
	return ((_Atomic uint8_t *)((char *)h + HPZ_STATE_PAGES_OFF));
}

/* A touch that may meet SIGBUS (the kernel's verdict on a truncated file). */
static __thread sigjmp_buf	 hs_jb;
static __thread volatile int	 hs_armed;

static void
hs_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (hs_armed) {
		hs_armed = 0;
		siglongjmp(hs_jb, 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
hs_catch_sigbus(void)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = hs_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
}

/* Read every page of [p, p+len) (stride: a page); 1 if SIGBUS came. */
static int
hs_touch(volatile unsigned char *p, size_t len, size_t stride, int write)
{
	size_t	i;

	if (sigsetjmp(hs_jb, 1) != 0)
		return (1);
	hs_armed = 1;
	for (i = 0; i < len; i += stride) {
		if (write)
			p[i] = 0x77;
		else
			(void)p[i];
	}
	hs_armed = 0;
	return (0);
}

/* --- the attacks --------------------------------------------------------- */

/* BUSY on page bytes the daemon never claimed, then touch those pages. */
static void
hs_attack_busy_fault(struct hs_shared *sh)
{
	struct hpz_state_header	*h;
	struct hpz_region	 r;
	_Atomic uint8_t		*pg;
	size_t			 slen, i, n;

	if (hpz_region_create(&r, 64 * MiB, HPZ_PAGE_2M) != 0 ||
	    hpz_register(&r) != 0 || (h = hs_state(&slen)) == NULL)
		_exit(2);
	pg = hs_pages(h);
	n = r.len / (2 * MiB);
	for (;;) {
		for (i = 0; i < n; i++)
			atomic_fetch_or(&pg[i], PAGE_BUSY);
		hs_touch(r.addr, r.len, 2 * MiB, 0);
		hs_touch(r.addr, r.len, 2 * MiB, 1);
		madvise(r.addr, r.len, MADV_DONTNEED);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

/* BUSY on every page, then a reset of all of them. */
static void
hs_attack_busy_reset(struct hs_shared *sh)
{
	struct hpz_state_header	*h;
	struct hpz_region	 r;
	_Atomic uint8_t		*pg;
	size_t			 slen, i, n;

	if (hpz_region_create(&r, 64 * MiB, HPZ_PAGE_2M) != 0 ||
	    hpz_register(&r) != 0 || (h = hs_state(&slen)) == NULL)
		_exit(2);
	pg = hs_pages(h);
	n = r.len / (2 * MiB);
	for (;;) {
		hs_touch(r.addr, r.len, 2 * MiB, 1);
		for (i = 0; i < n; i++)
			atomic_fetch_or(&pg[i], PAGE_BUSY);
		(void)hpz_reset(&r);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

/* Random bytes over the page bytes and the header, touches, resets. */
static void
hs_attack_random_state(struct hs_shared *sh)
{
	struct hpz_state_header	*h;
	struct hpz_region	 r;
	unsigned char		*b;
	unsigned int		 seed = (unsigned int)getpid();
	size_t			 slen, i, n, pg;

	hs_catch_sigbus();
	if (hpz_region_create(&r, 64 * MiB, HPZ_PAGE_2M) != 0 ||
	    hpz_register(&r) != 0 || (h = hs_state(&slen)) == NULL)
		_exit(2);
	b = (unsigned char *)h;
	n = r.len / (2 * MiB);
	for (;;) {
		for (i = 0; i < sizeof(*h); i++)
			if (rand_r(&seed) % 4 == 0)
				b[i] = (unsigned char)rand_r(&seed);
		for (i = 0; i < n; i++)
			b[HPZ_STATE_PAGES_OFF + i] = (unsigned char)rand_r(&seed);
		for (i = 0; i < 4; i++) {
			pg = (size_t)rand_r(&seed) % n;
			hs_touch((unsigned char *)r.addr + pg * 2 * MiB,
			    2 * MiB, 4096, rand_r(&seed) & 1);
		}
		(void)hpz_reset(&r);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

/*
 * A shmem region registered HPZ_DISCARD (every page garbage), then sealed
 * F_SEAL_FUTURE_WRITE (a punch fails with EPERM) and truncated to nothing
 * before it is unregistered: the daemon must drop its garbage without a
 * write past the end of the file.
 */
static void
hs_attack_truncate_unregister(struct hs_shared *sh)
{
	struct hpz_region	 r;
	size_t			 len = 8 * MiB;
	void			*p;
	int			 fd;

	for (;;) {
		fd = memfd_create("hs-shmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd == -1 || ftruncate(fd, (off_t)len) == -1)
			_exit(2);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			_exit(2);
		memset(p, 0xee, len / 2);
		memset(&r, 0, sizeof(r));
		r.addr = p;
		r.len = len;
		r.fd = fd;
		r.flags = HPZ_DISCARD;
		if (hpz_register(&r) != 0)
			_exit(3);
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == -1 ||
		    ftruncate(fd, 0) == -1)
			_exit(4);
		(void)hpz_unregister(&r);
		munmap(p, len);
		close(fd);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

/* A hugetlbfs region whose file is truncated while the scrub clears it. */
static void
hs_attack_truncate_scrub(struct hs_shared *sh)
{
	struct hpz_region	 r;
	struct timespec		 ts;
	unsigned int		 seed = (unsigned int)getpid();

	hs_catch_sigbus();
	for (;;) {
		if (hpz_region_create(&r, 32 * MiB, HPZ_PAGE_2M) != 0)
			_exit(2);
		if (hpz_register(&r) != 0)
			_exit(3);
		hs_touch(r.addr, r.len, 4096, 1);
		/* Reset: the scrub starts on the garbage when it returns. */
		if (hpz_reset(&r) == 0) {
			ts.tv_sec = 0;
			ts.tv_nsec = (long)(rand_r(&seed) % 2000) * 1000;
			nanosleep(&ts, NULL);
		}
		(void)ftruncate(r.fd, 0);
		usleep(2000);
		(void)hpz_unregister(&r);
		hpz_region_destroy(&r);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

struct hs_trunc {
	int		 fd;
	useconds_t	 delay;
};

static void *
hs_trunc_main(void *arg)
{
	struct hs_trunc	*t = arg;

	usleep(t->delay);
	(void)ftruncate(t->fd, 0);
	return (NULL);
}

/* A hugetlbfs region whose file is truncated while faults clear it. */
static void
hs_attack_truncate_fault(struct hs_shared *sh)
{
	struct hpz_region	 r;
	struct hs_trunc		 t;
	pthread_t		 th;
	unsigned int		 seed = (unsigned int)getpid();

	hs_catch_sigbus();
	for (;;) {
		if (hpz_region_create(&r, 32 * MiB, HPZ_PAGE_2M) != 0)
			_exit(2);
		memset(r.addr, 0xd4, r.len);	/* in the file: MINOR faults */
		r.flags = HPZ_DISCARD | HPZ_NO_SCRUB;
		if (hpz_register(&r) != 0)
			_exit(3);
		t.fd = r.fd;
		t.delay = (useconds_t)(rand_r(&seed) % 1500);
		pthread_create(&th, NULL, hs_trunc_main, &t);
		hs_touch(r.addr, r.len, 2 * MiB, 0);
		pthread_join(th, NULL);
		(void)hpz_unregister(&r);
		hpz_region_destroy(&r);
		atomic_fetch_add(&sh->attacks, 1);
	}
}

/* --- the harness ---------------------------------------------------------- */

/*
 * The honest client must complete a round within the bound, the whole
 * time; returns once the attack time is over (or the client is stuck).
 */
static void
hs_watch(struct hs_shared *sh, pid_t honest, uint64_t until, const char *when)
{
	uint64_t	now, last;
	int		status;

	for (;;) {
		now = itest_now_ms();
		last = atomic_load(&sh->last_ms);
		if (waitpid(honest, &status, WNOHANG) == honest)
			cr_assert_fail("%s: the honest client exited (status 0x%x) "
			    "after %d rounds: %s", when, status,
			    atomic_load(&sh->rounds), sh->why);
		if (now - last > (HS_BOUND_MS * (uint64_t)itest_wait_scale())) {
			itest_kill(honest);
			cr_assert_fail("%s: the honest client completed no round "
			    "for %llu ms (%d rounds so far; bound %llu ms)",
			    when, (unsigned long long)(now - last),
			    atomic_load(&sh->rounds),
			    (unsigned long long)(HS_BOUND_MS * (uint64_t)itest_wait_scale()));
		}
		if (now >= until)
			return;
		usleep(50 * 1000);
	}
}

static void
hs_run(void (*attack)(struct hs_shared *), const char *name)
{
	struct hs_shared	*sh;
	struct hpz_status	 base, st;
	unsigned long long	 start;
	pid_t			 daemon, honest, hostile;
	int			 status, rounds;
	uint64_t		 t0;

	itest_need_pages(2048, 8 + 32 + 8);
	base = itest_status();
	daemon = itest_daemon_pid();
	start = itest_daemon_start(daemon);
	cr_assert_neq(start, 0, "no daemon with pid %d", (int)daemon);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	t0 = itest_now_ms();
	atomic_store(&sh->last_ms, t0);

	honest = fork();
	cr_assert_geq(honest, 0);
	if (honest == 0)
		hs_honest_main(sh);
	hostile = fork();
	cr_assert_geq(hostile, 0);
	if (hostile == 0) {
		attack(sh);
		_exit(0);
	}

	hs_watch(sh, honest, t0 + HS_ATTACK_MS, name);
	rounds = atomic_load(&sh->rounds);
	itest_kill(hostile);
	/* With the attacker gone, a round must still complete. */
	hs_watch(sh, honest, 0, name);
	t0 = itest_now_ms();
	while (atomic_load(&sh->rounds) < rounds + 1 &&
	    itest_now_ms() - t0 < (HS_BOUND_MS * (uint64_t)itest_wait_scale()))
		usleep(50 * 1000);
	atomic_store(&sh->stop, 1);
	t0 = itest_now_ms();
	while (waitpid(honest, &status, WNOHANG) != honest) {
		if (itest_now_ms() - t0 > (HS_BOUND_MS * (uint64_t)itest_wait_scale())) {
			itest_kill(honest);
			cr_assert_fail("%s: the honest client did not finish its "
			    "last round after the attacker was killed", name);
		}
		usleep(50 * 1000);
	}
	cr_log_info("%s: %d honest rounds, %d attacks", name,
	    atomic_load(&sh->rounds), atomic_load(&sh->attacks));
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s: the honest client failed (status 0x%x): %s", name, status,
	    sh->why);
	cr_assert_gt(atomic_load(&sh->rounds), rounds,
	    "%s: no honest round completed after the attacker was killed",
	    name);
	cr_assert_geq(atomic_load(&sh->rounds), HS_ROUNDS_MIN,
	    "%s: only %d honest rounds", name, atomic_load(&sh->rounds));
	cr_assert_eq(atomic_load(&sh->bad), 0,
	    "%s: the honest client read %llu non-zero words", name,
	    (unsigned long long)atomic_load(&sh->bad));
	cr_assert_gt(atomic_load(&sh->attacks), 0,
	    "%s: the attack never ran", name);
	cr_assert_eq(kill(daemon, 0), 0, "%s: the daemon (pid %d) is gone",
	    name, (int)daemon);
	cr_assert_eq(itest_daemon_start(daemon), start,
	    "%s: pid %d is another process now", name, (int)daemon);
	/* The attacker's regions go with its connection: let them go. */
	t0 = itest_now_ms();
	do {
		st = itest_status();
		if (st.regions <= base.regions)
			break;
		usleep(50 * 1000);
	} while (itest_now_ms() - t0 < (HS_BOUND_MS * (uint64_t)itest_wait_scale()));
	cr_assert_leq(st.regions, base.regions, "%s: the daemon still holds "
	    "%llu regions of the clients that are gone", name,
	    (unsigned long long)(st.regions - base.regions));
	munmap(sh, sizeof(*sh));
}

Test(hostile, busy_bit_then_fault, .timeout = 180)
{
	hs_run(hs_attack_busy_fault, "BUSY bit + fault");
}

Test(hostile, busy_bits_then_reset, .timeout = 180)
{
	hs_run(hs_attack_busy_reset, "BUSY bits + reset");
}

Test(hostile, random_state_bytes, .timeout = 180)
{
	hs_run(hs_attack_random_state, "random state bytes + touch + reset");
}

Test(hostile, truncated_sealed_discard_shmem_unregister, .timeout = 180)
{
	hs_run(hs_attack_truncate_unregister,
	    "shmem HPZ_DISCARD sealed + truncated + unregister");
}

Test(hostile, hugetlbfs_truncated_while_scrubbed, .timeout = 180)
{
	hs_run(hs_attack_truncate_scrub, "hugetlbfs truncated while scrubbed");
}

Test(hostile, truncated_while_fault_clears, .timeout = 180)
{
	hs_run(hs_attack_truncate_fault, "truncated while a fault clears");
}

/*
 * SIGTERM stops a daemon in its normal time while clients attack it: its
 * own daemon on a private socket, BUSY bits faulted and reset, and a file
 * truncated under the scrub, at once.
 */
Test(hostile, sigterm_stops_daemon_under_attack, .timeout = 180)
{
	struct hs_shared	*sh;
	char			 dir[] = "/tmp/hpz-hostile.XXXXXX", sock[128];
	char			 log[128];
	pid_t			 daemon, att[3];
	uint64_t		 t0;
	int			 i, fd, status;

	itest_need_pages(2048, 3 * 32 + 8);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/hpzerod.sock", dir);
	snprintf(log, sizeof(log), "%s/hpzerod.log", dir);
	daemon = itest_fork_dying();
	cr_assert_geq(daemon, 0);
	if (daemon == 0) {
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)) >= 0)
			dup2(fd, 2);
		execl(itest_daemon_path(), "hpzerod", "--socket", sock,
		    "--workers", "2", "--pool", "off", (char *)NULL);
		_exit(121);
	}
	for (i = 0; i < 3000 * itest_wait_scale() && access(sock, F_OK) != 0; i++)
		usleep(10 * 1000);
	cr_assert_eq(access(sock, F_OK), 0, "hpzerod did not come up");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	for (i = 0; i < 3; i++) {
		att[i] = fork();
		cr_assert_geq(att[i], 0);
		if (att[i] == 0) {
			setenv("HPZ_SOCKET", sock, 1);
			if (i == 0)
				hs_attack_busy_fault(sh);
			else if (i == 1)
				hs_attack_busy_reset(sh);
			else
				hs_attack_truncate_scrub(sh);
			_exit(0);
		}
	}
	t0 = itest_now_ms();
	while (atomic_load(&sh->attacks) < 3 && itest_now_ms() - t0 < 5000)
		usleep(20 * 1000);
	usleep(500 * 1000);
	kill(daemon, SIGTERM);
	t0 = itest_now_ms();
	while (waitpid(daemon, &status, WNOHANG) != daemon) {
		if (itest_now_ms() - t0 > (HS_BOUND_MS * (uint64_t)itest_wait_scale())) {
			kill(daemon, SIGKILL);
			waitpid(daemon, NULL, 0);
			for (i = 0; i < 3; i++)
				itest_kill(att[i]);
			cr_assert_fail("hpzerod did not stop on SIGTERM in %llu "
			    "ms while attacked (%d attacks)",
			    (unsigned long long)(HS_BOUND_MS * (uint64_t)itest_wait_scale()),
			    atomic_load(&sh->attacks));
		}
		usleep(20 * 1000);
	}
	cr_log_info("hpzerod stopped in %llu ms on SIGTERM",
	    (unsigned long long)(itest_now_ms() - t0));
	for (i = 0; i < 3; i++)
		itest_kill(att[i]);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "hpzerod exit status 0x%x on SIGTERM under attack", status);
	cr_assert_gt(atomic_load(&sh->attacks), 0, "the attacks never ran");
	unlink(log);
	unlink(sock);
	rmdir(dir);
	munmap(sh, sizeof(*sh));
}
