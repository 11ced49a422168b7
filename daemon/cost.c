/*
 * cost.c - what a fault costs here, measured at start as the clear
 * kernels are, and the policy that uses it: whether the daemon serving a
 * garbage page's fault beats the kernel zeroing a fresh one, and whether
 * the machine has a core to spare for it right now.
 *
 * Four figures, each the median of a few tries on a file of our own:
 * the uffd round trip (a thread touches a page already in the file of a
 * range registered for minor faults; another thread, asleep in poll,
 * reads the fault and maps it with UFFDIO_CONTINUE: what the faulting
 * thread waits, clearing aside), the kernel's zeroing of a page
 * (fallocate of a hole) and the kernel's first touch (a write to a hole
 * of a mapping nobody intercepts: the exception and the zeroing), and our
 * bulk kernel's clear of such a page out of the caches (not the warm
 * buffer clear.c calibrates on: a garbage page is cold).  The policy also
 * watches what each region's garbage faults through us take of late
 * (cost_observe), so that a region served slower than at start steps
 * aside.  Huge
 * pages are used when the host has two free; else the round trip is
 * measured on shmem and the kernel's figures wait for free huge pages
 * (the 5 s timer tries again, off the loop).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>

#include "uffd-compat.h"

#include "clear.h"
#include "cost.h"
#include "globals.h"
#include "hostmem.h"
#include "log.h"
#include "region.h"
#include "stats.h"
#include "topo.h"
#include "worker.h"

#define COST_TRIES	9		/* a round trip: the median of these */
#define COST_PAGES_MAX	32		/* pages the kernel's figures take */
#define COST_EVICT	(64ULL << 20)	/* written to push them from caches */
#define COST_HUGE	(2ULL << 20)
#define COST_FREE_PATH	"/sys/kernel/mm/hugepages/hugepages-2048kB/"
#define COST_DEMAND_NS	1000000ULL	/* /proc/loadavg read at most this often */

struct cost		 cost;
static pthread_mutex_t	 cost_lock = PTHREAD_MUTEX_INITIALIZER;
static int		 cost_loadavg = -1;
static atomic_uint_fast64_t cost_demand_at;
static atomic_int	 cost_running;	/* runnable tasks, last read */
/*
 * Every 2 MiB region's last garbage faults, read to answer, for the
 * status: a ring whose median is shown (a moving average followed one
 * slow fault threefold).  Lock-free; a lost or torn slot costs nothing.
 */
#define COST_SERVED_RING	32
static atomic_uint_fast64_t	 cost_served[COST_SERVED_RING];
static atomic_uint		 cost_served_next;
static atomic_uint_fast64_t	 cost_served_at;

static int
cost_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

static uint64_t
cost_median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cost_cmp);
	return (v[n / 2]);
}

/* Free, unreserved huge pages of page_size (hostmem_avail). */
long long
cost_host_avail(uint64_t page_size)
{
	return (hostmem_avail(page_size));
}

/* The handler of the round trip: map each fault, until told to stop. */
struct cost_rt {
	int		 uffd;
	int		 efd;		/* stop */
	uint64_t	 page;
};

static void *
cost_rt_main(void *arg)
{
	struct cost_rt		*rt = arg;
	struct uffdio_continue	 uc;
	struct uffd_msg		 m;
	struct pollfd		 pfd[2];

	pfd[0].fd = rt->uffd;
	pfd[0].events = POLLIN;
	pfd[1].fd = rt->efd;
	pfd[1].events = POLLIN;
	for (;;) {
		pfd[0].revents = pfd[1].revents = 0;
		if (poll(pfd, 2, -1) == -1 && errno != EINTR)
			break;
		if (pfd[1].revents & POLLIN)
			break;
		if (read(rt->uffd, &m, sizeof(m)) != (ssize_t)sizeof(m) ||
		    m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		memset(&uc, 0, sizeof(uc));
		uc.range.start = m.arg.pagefault.address & ~(rt->page - 1);
		uc.range.len = rt->page;
		if (ioctl(rt->uffd, UFFDIO_CONTINUE, &uc) == -1) {
			/* Never leave the toucher waiting. */
			(void)ioctl(rt->uffd, UFFDIO_WAKE, &uc.range);
		}
	}
	return (NULL);
}

/*
 * The round trip on one page of fd (page bytes, already allocated): the
 * faulting thread's wait, median of COST_TRIES after one to warm up.  0
 * when it cannot be measured.
 */
static uint64_t
cost_round_trip(int fd, uint64_t page, int huge)
{
	struct uffdio_api	 api;
	struct uffdio_register	 reg;
	struct cost_rt		 rt = { -1, -1, page };
	pthread_t		 t;
	uint64_t		 v[COST_TRIES], t0, one = 1, result = 0;
	volatile char		*p = MAP_FAILED;
	cpu_set_t		 set, old;
	int			 i, started = 0, pinned = 0, cpu;

	if (sched_getaffinity(0, sizeof(old), &old) == -1)
		return (0);
	rt.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (rt.uffd == -1)
		return (0);
	memset(&api, 0, sizeof(api));
	api.api = UFFD_API;
	api.features = huge ? UFFD_FEATURE_MINOR_HUGETLBFS :
	    UFFD_FEATURE_MINOR_SHMEM;
	if (ioctl(rt.uffd, UFFDIO_API, &api) == -1)
		goto out;
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto out;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)p;
	reg.range.len = page;
	reg.mode = UFFDIO_REGISTER_MODE_MINOR;
	if (ioctl(rt.uffd, UFFDIO_REGISTER, &reg) == -1 ||
	    (rt.efd = eventfd(0, EFD_CLOEXEC)) == -1)
		goto out;
	if (pthread_create(&t, NULL, cost_rt_main, &rt) != 0)
		goto out;
	pthread_setname_np(t, "hpzd-cost");
	/*
	 * On our CPU, asleep in poll: as a worker serves a fault, woken on
	 * the CPU the faulting thread leaves (worker.c).  Unpinned, the
	 * figure was 4 us or 60 us by where the scheduler put the thread.
	 */
	if ((cpu = sched_getcpu()) >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		(void)pthread_setaffinity_np(t, sizeof(set), &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
		pinned = 1;
	}
	started = 1;
	for (i = -1; i < COST_TRIES; i++) {
		/* Our page tables go, the page stays: a minor fault. */
		if (madvise((void *)p, page, MADV_DONTNEED) == -1)
			goto out;
		t0 = stats_now_ns();
		p[page / 2] = 1;
		if (i >= 0)
			v[i] = stats_now_ns() - t0;
	}
	result = cost_median(v, COST_TRIES);
out:
	if (started) {
		if (write(rt.efd, &one, sizeof(one)) == -1)
			log_warn("cost: stop the round-trip thread");
		pthread_join(t, NULL);
	}
	if (pinned)
		(void)sched_setaffinity(0, sizeof(old), &old);
	if (p != MAP_FAILED)
		munmap((void *)p, page);
	if (rt.efd != -1)
		close(rt.efd);
	close(rt.uffd);
	return (result);
}

/*
 * Push [p, p+len) out of every cache: the eviction by a 64 MiB write
 * does not on a machine whose last-level cache is larger (a clear timed
 * on a page still cached read 30 us where a fault's clear took 80).
 */
static void
cost_flush(char *p, uint64_t len)
{
#if defined(__x86_64__) || defined(__i386__)
	uint64_t	o;

	for (o = 0; o < len; o += 64)
		__builtin_ia32_clflush(p + o);
	__builtin_ia32_mfence();
#else
	(void)p;
	(void)len;
#endif
}

/*
 * The kernel's first touch (a write to a hole) and zeroing (fallocate of
 * a hole) of 2 MiB pages of fd, n pages of it (at least 2): the first half
 * touched, the second allocated, each page once and timed alone, so that
 * each figure is the median over distinct pages, cold as real first
 * touches are.  The pages are touched once before, then pushed out of the
 * caches: this VM backs memory it never used lazily (a first touch of
 * such a page costs milliseconds), and a page punched comes back from the
 * cache (three times faster).  -1 on failure.
 */
static int
cost_kernel(int fd, int n, uint64_t *zero_ns, uint64_t *touch_ns,
    uint64_t *clear_ns)
{
	uint64_t	 v[COST_PAGES_MAX], t0;
	volatile char	*p;
	char		*ev;
	int		 i, half = n / 2, error = -1;

	p = mmap(NULL, (size_t)n * COST_HUGE, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return (-1);
	ev = mmap(NULL, COST_EVICT, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (ev == MAP_FAILED)
		goto out;
	/*
	 * Every byte: this VM backs a page it never used at a finer grain
	 * than 2 MiB (one byte warmed 4 KiB of it; the others then cost
	 * milliseconds).  Punched, the pages go back to the free list's head
	 * and come back to us below.
	 */
	for (i = 0; i < n; i++)
		memset((char *)p + (uint64_t)i * COST_HUGE, 1, COST_HUGE);
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
	    (off_t)((uint64_t)n * COST_HUGE)) == -1)
		goto out;
	memset(ev, 1, COST_EVICT);
	for (i = 0; i < half; i++) {
		t0 = stats_now_ns();
		p[(uint64_t)i * COST_HUGE + COST_HUGE / 2] = 1;
		v[i] = stats_now_ns() - t0;
	}
	*touch_ns = cost_median(v, half);
	for (i = half; i < n; i++) {
		t0 = stats_now_ns();
		if (fallocate(fd, 0, (off_t)((uint64_t)i * COST_HUGE),
		    (off_t)COST_HUGE) == -1)
			goto out;
		v[i - half] = stats_now_ns() - t0;
	}
	*zero_ns = cost_median(v, n - half);
	/*
	 * Our clear of a page out of the caches, as a fault meets it: the
	 * bulk kernel measured at start runs on a warm buffer, which a
	 * garbage page is not.
	 */
	*clear_ns = 0;
	if (clear_bulk_kernel != NULL) {
		memset(ev, 2, COST_EVICT);
		for (i = 0; i < half; i++) {
			cost_flush((char *)p + (uint64_t)i * COST_HUGE,
			    COST_HUGE);
			t0 = stats_now_ns();
			clear_bulk_kernel->fn((char *)p + (uint64_t)i *
			    COST_HUGE, COST_HUGE);
			clear_fence();
			v[i] = stats_now_ns() - t0;
		}
		*clear_ns = cost_median(v, half);
	}
	error = 0;
out:
	if (ev != MAP_FAILED)
		munmap(ev, COST_EVICT);
	munmap((void *)p, (size_t)n * COST_HUGE);
	return (error);
}

/*
 * Measure (at start, and again from the timer while the kernel's figures
 * are missing).  Any thread; a few milliseconds.
 */
void
cost_measure(void)
{
	struct cost	c;
	uint64_t	rt = 0, zero = 0, touch = 0, cold = 0;
	long		page4k = sysconf(_SC_PAGESIZE);
	long long	avail = cost_host_avail(COST_HUGE);
	int		fd, huge = 0, n;

	/* Distinct pages, a few ms: leave one to whoever else needs it. */
	n = avail - 1 > COST_PAGES_MAX ? COST_PAGES_MAX : (int)avail - 1;
	n &= ~1;
	if (n >= 2 && (fd = memfd_create("hpzd-cost", MFD_CLOEXEC |
	    MFD_HUGETLB | MFD_HUGE_2MB)) != -1) {
		if (ftruncate(fd, (off_t)((uint64_t)n * COST_HUGE)) == 0 &&
		    cost_kernel(fd, n, &zero, &touch, &cold) == 0) {
			rt = cost_round_trip(fd, COST_HUGE, 1);
			huge = rt != 0;
		}
		close(fd);
	}
	if (rt == 0 && (fd = memfd_create("hpzd-cost", MFD_CLOEXEC)) != -1) {
		if (ftruncate(fd, page4k) == 0 &&
		    fallocate(fd, 0, 0, page4k) == 0)
			rt = cost_round_trip(fd, (uint64_t)page4k, 0);
		close(fd);
	}
	pthread_mutex_lock(&cost_lock);
	c = cost;
	if (rt != 0 && (huge || !c.huge)) {
		c.rt_ns = rt;
		c.huge = huge;
	}
	if (zero != 0) {
		c.kzero_ns = zero;
		c.ktouch_ns = touch;
	}
	if (cold != 0)
		c.clear_ns = cold;
	else if (c.clear_ns == 0 && clear_bulk_kernel != NULL &&
	    clear_calibrated_gbs(clear_bulk_kernel->kind) > 0)
		c.clear_ns = (uint64_t)((double)COST_HUGE /
		    clear_calibrated_gbs(clear_bulk_kernel->kind));
	c.measured = c.rt_ns != 0 && c.ktouch_ns != 0;
	cost = c;
	pthread_mutex_unlock(&cost_lock);
}

/* The figures, as one line for the log (and hpzctl). */
void
cost_text(char *buf, size_t len)
{
	struct cost	c;

	pthread_mutex_lock(&cost_lock);
	c = cost;
	pthread_mutex_unlock(&cost_lock);
	if (c.rt_ns == 0) {
		snprintf(buf, len, "not measured");
		return;
	}
	if (c.ktouch_ns == 0) {
		snprintf(buf, len, "uffd round trip %.1f us (%s); the "
		    "kernel's zeroing not measured yet (no free 2 MiB pages)",
		    c.rt_ns / 1e3, c.huge ? "2 MiB" : "4 KiB shmem");
		return;
	}
	snprintf(buf, len, "uffd round trip %.1f us (%s), kernel zeroing "
	    "%.1f us, kernel first touch %.1f us, our clear %.1f us a 2 MiB "
	    "page: a fault we clear costs %.2fx the kernel's", c.rt_ns / 1e3,
	    c.huge ? "2 MiB" : "4 KiB shmem", c.kzero_ns / 1e3,
	    c.ktouch_ns / 1e3, c.clear_ns / 1e3,
	    (double)(c.rt_ns + c.clear_ns) / (double)c.ktouch_ns);
}

/* A copy of the figures (any thread). */
void
cost_get(struct cost *out)
{
	pthread_mutex_lock(&cost_lock);
	*out = cost;
	pthread_mutex_unlock(&cost_lock);
}

/*
 * How much faster than the kernel's first touch the daemon serves a
 * garbage page of page_size bytes on its fault (the round trip and our
 * clear): above 1 it pays.  0 when not measured, or for pages whose
 * zeroing we did not measure (shmem's 4 KiB: the kernel zeroes one in
 * about a microsecond, far below any round trip).  Huge pages scale the
 * 2 MiB figures: zeroing and clearing grow with the size, the round trip
 * does not.
 */
double
cost_fault_gain(const struct cost *c, uint64_t page_size)
{
	double	scale, kernel, ours;

	if (!c->measured || c->clear_ns == 0 || page_size < COST_HUGE)
		return (0);
	scale = (double)page_size / (double)COST_HUGE;
	kernel = (double)c->ktouch_ns * scale;
	ours = (double)c->rt_ns + (double)c->clear_ns * scale;
	return (kernel / ours);
}

/*
 * Keep serving the faults of a region that holds garbage (1), or step
 * aside (0): drop its garbage and let the kernel zero each page on its
 * fault.  Pure.  Every argument but the machine's (c, ncpus, demand) is
 * the region's own: page_size its pages; queued its faults read and not
 * yet answered, this one included; observed_ns what its own garbage
 * faults took through us of late (cost_seen_get); scrub whether background
 * clearing runs for it; nworkers our fault threads.
 *
 * The model, for one fault of the region, scaled from the 2 MiB figures
 * (zeroing and clearing grow with the page, the round trip does not):
 *
 *	kernel = ktouch * scale / share
 *	ours   = rt + clear * scale * ceil(queued / nworkers) / share
 *	keep while max(ours, rt + observed) < kernel
 *
 * share is the part of a CPU a thread gets while demand (runnable threads
 * but ours, from /proc/loadavg) exceeds ncpus: our worker and the client's
 * faulting thread are two of those threads and both get it, so a busy
 * machine divides both waits and never alone makes a region step aside.
 * Where a core is idle and the scrub runs, it clears ahead of the client:
 * keep.  Another region's faults enter only through what this region saw
 * them cost it (observed): a 1 GiB region's clears are never compared with
 * a 2 MiB region's kernel touch.
 */
int
cost_keep(const struct cost *c, uint64_t page_size, int scrub, int demand,
    int ncpus, int queued, int nworkers, uint64_t observed_ns)
{
	double	scale, kernel, ours, share, rounds;

	if (!c->measured || c->clear_ns == 0 || page_size < COST_HUGE)
		return (1);	/* nothing to go by: as before */
	if (demand < ncpus && scrub)
		return (1);
	if (nworkers < 1)
		nworkers = 1;
	if (queued < 1)
		queued = 1;
	scale = (double)page_size / (double)COST_HUGE;
	share = demand <= ncpus ? 1.0 : (double)ncpus / (double)demand;
	kernel = (double)c->ktouch_ns * scale / share;
	rounds = (double)((queued + nworkers - 1) / nworkers);
	ours = (double)c->rt_ns + (double)c->clear_ns * scale * rounds / share;
	/* What the region's garbage faults took of late, if it is more. */
	if (observed_ns != 0 && (double)(c->rt_ns + observed_ns) > ours)
		ours = (double)(c->rt_ns + observed_ns);
	return (ours < kernel);
}

/*
 * Should r's garbage faults stay ours (1), with the numbers of now: the
 * costs, the host's demand, r's queued work and its faults of late?
 * scrub: r's garbage is scrubbed in the background.  The demand unknown:
 * yes.
 */
int
cost_keep_region(const struct region *r, int scrub)
{
	struct cost	c;
	int		demand, queued;

	if ((demand = cost_demand()) < 0)
		return (1);
	cost_get(&c);
	/* The region's own: its queued work, its faults of late. */
	queued = atomic_load(&r->inflight);
	return (cost_keep(&c, r->page_size, scrub, demand + queued,
	    topo_online(), queued, worker_count(),
	    cost_seen_get(&r->seen, stats_now_ns())));
}

/*
 * A region's garbage faults as served of late: from the read of the
 * message to the answer (the round trip's kernel side is cost.rt_ns), a
 * moving average over the last few, forgotten after COST_SEEN_NS without
 * one.  Lock-free and approximate: a lost update costs nothing.
 */
void
cost_seen_feed(struct cost_seen *s, uint64_t ns, uint64_t now)
{
	uint64_t	old = atomic_load(&s->ns);

	atomic_store(&s->ns, old == 0 ? ns : old - old / 8 + ns / 8);
	atomic_store(&s->at, now);
}

uint64_t
cost_seen_get(const struct cost_seen *s, uint64_t now)
{
	uint64_t	at = atomic_load(&s->at);

	if (at == 0 || now - at > COST_SEEN_NS)
		return (0);
	return (atomic_load(&s->ns));
}

/* A garbage fault of r served in ns (a worker). */
void
cost_observe(struct region *r, uint64_t ns)
{
	uint64_t	now = stats_now_ns();

	cost_seen_feed(&r->seen, ns, now);
	if (r->page_size == COST_HUGE) {
		atomic_store(&cost_served[atomic_fetch_add(&cost_served_next,
		    1) % COST_SERVED_RING], ns);
		atomic_store(&cost_served_at, now);
	}
}

/*
 * What a garbage 2 MiB fault took us of late (the median of the last 32),
 * from the read of its message
 * to the answer, over every region (0: none in the last COST_SEEN_NS).
 * Beside rt_ns it is what the client waited: the figure the model's
 * prediction (rt_ns + clear_ns) is held to in hpzctl status.
 */
uint64_t
cost_served_2m(void)
{
	uint64_t	v[COST_SERVED_RING], at = atomic_load(&cost_served_at);
	int		i, n = 0;

	if (at == 0 || stats_now_ns() - at > COST_SEEN_NS)
		return (0);
	for (i = 0; i < COST_SERVED_RING; i++)
		if ((v[n] = atomic_load(&cost_served[i])) != 0)
			n++;
	return (n == 0 ? 0 : cost_median(v, n));
}

/*
 * Threads that want a CPU right now, but ours: runnable tasks from
 * /proc/loadavg (read at most once a millisecond), less our own awake
 * threads.  The machine's figure: the caller adds the threads its own
 * region's faults hold.  -1 when it cannot be read.
 */
int
cost_demand(void)
{
	char		 buf[128], *p;
	uint64_t	 now = stats_now_ns(), at;
	ssize_t		 n;
	int		 running, ours;

	at = atomic_load(&cost_demand_at);
	if (now - at > COST_DEMAND_NS &&
	    atomic_compare_exchange_strong(&cost_demand_at, &at, now)) {
		pthread_mutex_lock(&cost_lock);
		if (cost_loadavg == -1)
			cost_loadavg = open("/proc/loadavg", O_RDONLY |
			    O_CLOEXEC);
		n = cost_loadavg == -1 ? -1 : pread(cost_loadavg, buf,
		    sizeof(buf) - 1, 0);
		pthread_mutex_unlock(&cost_lock);
		running = -1;
		if (n > 0) {
			buf[n] = '\0';
			/* "0.52 0.58 0.59 3/345 1234": runnable/threads */
			if ((p = strchr(buf, '/')) != NULL) {
				while (p > buf && p[-1] != ' ')
					p--;
				running = atoi(p);
			}
		}
		atomic_store(&cost_running, running);
	}
	if ((running = atomic_load(&cost_running)) < 0)
		return (-1);
	ours = atomic_load(&hpzd_busy);
	return (running > ours ? running - ours : 0);
}
