/*
 * soak.c - the bounded soak test.  Client processes create, register,
 * write, verify, reset and unregister regions at random while soak.sh
 * kills and restarts hpzerod under them.  Every byte read is checked
 * against a model of what its page must hold: the last pattern written
 * to it, or zero once it was discarded or reset.  Every first touch of a
 * page after a register or reset is timed.
 *
 * Environment: HPZ_SOCKET (the daemon), HPZ_SOAK_SECONDS (60),
 * HPZ_SOAK_PROCS (8), HPZ_SOAK_SEED (from the clock), HPZ_SOAK_HUGE
 * (2 MiB pages a process may map at once, 16), HPZ_FALLBACK_MS (2000, as
 * libhpz reads it), HPZ_SOAK_RETRY_MS (how long a request may keep
 * failing, 20000), HPZ_SOAK_COUNTS (a file for the final counts),
 * HPZ_SOAK_INJECT=1 (process 0 flips a byte now and then behind the
 * model's back: the run must then fail, which checks the checker).
 * Exit 0: no violation; 1: violations; 77: no huge pages at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "hpz.h"
#include "../tclock.h"

#define SOAK_SLOTS	2		/* regions a process holds at once */
#define SOAK_HIST	(64 * 8)	/* log2 groups of 8 sub-buckets */
#define SOAK_MAXPROCS	64
#define HUGE_2M		(2UL << 20)
#define SOAK_TRACE	256		/* last operations kept per region */

/* What a page must hold; EITHER: its data or all zero. */
enum { PG_ZERO, PG_DATA, PG_EITHER };
enum { K_HPZ2M, K_MEMFD2M, K_SHMEM };
enum { B_NONE, B_TOUCH, B_REGISTER, B_UNREGISTER, B_RESET, B_DESTROY };

static const char *const busy_name[] = { "-", "first touch", "hpz_register",
	"hpz_unregister", "hpz_reset", "hpz_region_destroy" };

/* What a page must hold. */
struct spage {
	uint8_t		 st;
	uint8_t		 touched;	/* since register or reset */
	uint64_t	 tag;		/* PG_DATA, PG_EITHER: pattern */
	uint64_t	 prev;		/* an earlier tag: stale data */
};

/* One operation on a region, for the report of a violation. */
struct strace {
	uint64_t	 ms;		/* CLOCK_REALTIME, as soak.sh logs */
	char		 op;		/* C create, G register, w write,
					   Z reset, U unregister, f first
					   touch */
	int		 error;
	unsigned int	 flags;
	size_t		 p0, n;
};

struct sregion {
	int		 used;
	unsigned int	 ntrace;
	struct strace	 trace[SOAK_TRACE];
	int		 kind;
	int		 registered;
	struct hpz_region r;
	size_t		 psz;
	size_t		 npages;
	unsigned long	 id;
	unsigned int	 gen;		/* registrations so far */
	struct spage	*pg;
};

/* One client process's counters, in memory shared with the parent. */
struct cstats {
	volatile uint64_t busy_since;	/* ns; 0: not in a touch or call */
	volatile int	 busy_what;
	volatile unsigned long busy_region;
	volatile uint64_t busy_page;
	volatile int	 pid;
	uint64_t	 regions, registers, unregisters, resets, resets_failed;
	uint64_t	 retries, first_touches, pages_written, bytes_written;
	uint64_t	 bytes_verified, verified_after_unregister, nopool;
	uint64_t	 over_bound, violations, exits, incarnation;
	uint64_t	 block_max_ns, call_max_ns;
	uint64_t	 hist[SOAK_HIST];
};

static struct cstats	*stats;		/* [procs], shared */
static volatile uint64_t *stop_ns;	/* shared: when every client stops */
static struct cstats	*me;
static int		 procs = 8, me_idx, max_huge = 16;
static uint64_t		 seed, rng, bound_ns, retry_ns;
static unsigned long	 next_region_id, write_ctr;
static struct sregion	 slot[SOAK_SLOTS];
static long		 fallback_ms = 2000;
static int		 inject;

static uint64_t
mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return (x ^ (x >> 31));
}

static uint64_t
rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (n == 0 ? 0 : rng % n);
}

static long
env_long(const char *name, long def)
{
	const char	*s = getenv(name);

	return (s != NULL && *s != '\0' ? strtol(s, NULL, 0) : def);
}

/* Word i of a page written with tag t: never the same at two offsets. */
static inline uint64_t
pat(uint64_t t, size_t i)
{
	return (t ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL));
}

static void
violation(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fprintf(stderr, "soak: VIOLATION proc %d (pid %d): ", me_idx,
	    (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	__atomic_add_fetch(&me->violations, 1, __ATOMIC_RELAXED);
}

static void
trace(struct sregion *sr, char op, size_t p0, size_t n, int error)
{
	struct strace	*t = &sr->trace[sr->ntrace++ % SOAK_TRACE];
	struct timespec	 ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	t->ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	t->op = op;
	t->p0 = p0;
	t->n = n;
	t->error = error;
	t->flags = sr->r.flags;
}

/* The operations on a region that covered page p, oldest first. */
static void
trace_print(const struct sregion *sr, size_t p)
{
	const struct strace	*t;
	unsigned int		 i, first;

	first = sr->ntrace > SOAK_TRACE ? sr->ntrace - SOAK_TRACE : 0;
	fprintf(stderr, "soak:   region %lu, operations covering page %zu "
	    "(of the last %u; realtime ms):\n", sr->id, p,
	    sr->ntrace - first);
	for (i = first; i < sr->ntrace; i++) {
		t = &sr->trace[i % SOAK_TRACE];
		if (p < t->p0 || p >= t->p0 + t->n)
			continue;
		fprintf(stderr, "soak:     %llu.%03llu %c pages %zu+%zu flags "
		    "0x%x%s%s\n", (unsigned long long)(t->ms / 1000),
		    (unsigned long long)(t->ms % 1000), t->op, t->p0, t->n,
		    t->flags, t->error != 0 ? " error: " : "",
		    t->error != 0 ? hpz_strerror(t->error) : "");
	}
}

static void
busy(int what, const struct sregion *sr, uint64_t page)
{
	me->busy_region = sr != NULL ? sr->id : 0;
	me->busy_page = page;
	me->busy_what = what;
	__atomic_store_n(&me->busy_since, what == B_NONE ? 0 : tclock_ns(),
	    __ATOMIC_RELEASE);
}

static void
hist_add(uint64_t ns)
{
	unsigned int	lg, sub;

	if (ns < 8) {
		me->hist[ns]++;
		return;
	}
	lg = 63 - (unsigned int)__builtin_clzll(ns);
	sub = (unsigned int)(ns >> (lg - 3)) & 7;
	me->hist[lg * 8 + sub]++;
}

/* Upper edge of bucket b, in ns. */
static uint64_t
hist_edge(unsigned int b)
{
	unsigned int	lg = b / 8, sub = b % 8;

	if (lg < 3)
		return (b + 1);
	return (((uint64_t)(8 + sub + 1)) << (lg - 3));
}

/*
 * The first access to a page since it was registered or reset: the one
 * that may fault and wait for the daemon (or libhpz's fallback).  The
 * bound is a liveness bound, not a performance threshold: a thread must
 * never wait much longer than libhpz's fallback delay, whatever the
 * daemon does; 2 s of margin covers slow (ASan) builds.
 */
static uint64_t
first_touch(struct sregion *sr, size_t p, int write, uint64_t v)
{
	volatile uint64_t	*w = (volatile uint64_t *)((char *)sr->r.addr +
	    p * sr->psz);
	uint64_t		 t0, dt, got = 0;
	struct timespec		 ts;

	busy(B_TOUCH, sr, p);
	t0 = tclock_ns();
	if (write)
		*w = v;
	else
		got = *w;
	dt = tclock_ns() - t0;
	busy(B_NONE, NULL, 0);
	sr->pg[p].touched = 1;
	trace(sr, 'f', p, 1, 0);
	me->first_touches++;
	hist_add(dt);
	if (dt > me->block_max_ns)
		me->block_max_ns = dt;
	if (dt > bound_ns) {
		me->over_bound++;
		clock_gettime(CLOCK_REALTIME, &ts);
		violation("first touch (%s) of region %lu page %zu blocked "
		    "%.3f s until %lld.%03ld (bound %.3f s: fallback %ld ms "
		    "+ 2 s)", write ? "write" : "read", sr->id, p, dt / 1e9,
		    (long long)ts.tv_sec, ts.tv_nsec / 1000000, bound_ns / 1e9,
		    fallback_ms);
		trace_print(sr, p);
	}
	return (got);
}

static void
page_write(struct sregion *sr, size_t p)
{
	uint64_t	*w = (uint64_t *)((char *)sr->r.addr + p * sr->psz);
	size_t		 i, n = sr->psz / 8;
	uint64_t	 t;

	t = mix64(((uint64_t)me_idx << 56) ^ (me->incarnation << 44) ^
	    ((uint64_t)sr->id << 24) ^ ++write_ctr) | (1ULL << 63);
	if (!sr->pg[p].touched && sr->registered)
		first_touch(sr, p, 1, pat(t, 0));
	else
		w[0] = pat(t, 0);
	for (i = 1; i < n; i++)
		w[i] = pat(t, i);
	if (sr->pg[p].st != PG_ZERO)
		sr->pg[p].prev = sr->pg[p].tag;
	sr->pg[p].st = PG_DATA;
	sr->pg[p].tag = t;
	trace(sr, 'w', p, 1, 0);
	me->pages_written++;
	me->bytes_written += sr->psz;
}

/* Name what a wrong word looks like. */
static const char *
what_is(const struct spage *sp, uint64_t got, size_t i)
{
	if (got == 0)
		return ("zero: the data was lost");
	if (sp->tag != 0 && got == pat(sp->tag, i))
		return ("this page's data where zero was due: stale");
	if (sp->prev != 0 && got == pat(sp->prev, i))
		return ("this page's earlier data: stale");
	return ("unknown bytes");
}

static void
page_verify(struct sregion *sr, size_t p, const char *when)
{
	const uint64_t	*w = (const uint64_t *)((char *)sr->r.addr +
	    p * sr->psz);
	struct spage	*sp = &sr->pg[p];
	size_t		 i, n = sr->psz / 8;
	uint64_t	 first, exp;
	int		 zero;

	if (!sp->touched && sr->registered)
		first = first_touch(sr, p, 0, 0);
	else
		first = w[0];
	switch (sp->st) {
	case PG_ZERO:
		zero = 1;
		break;
	case PG_DATA:
		zero = 0;
		break;
	default:
		zero = first == 0;
		break;
	}
	for (i = 0; i < n; i++) {
		exp = zero ? 0 : pat(sp->tag, i);
		if ((i == 0 ? first : w[i]) != exp)
			break;
	}
	if (i < n) {
		violation("%s: region %lu (kind %d, %zu pages of %zu, gen %u, "
		    "flags 0x%x, %s) page %zu offset %zu (region offset %zu): "
		    "expected %016llx (%s), got %016llx: %s", when, sr->id,
		    sr->kind, sr->npages, sr->psz, sr->gen, sr->r.flags,
		    sr->registered ? "registered" : "unregistered", p, i * 8,
		    p * sr->psz + i * 8, (unsigned long long)exp,
		    sp->st == PG_ZERO ? "zero" : sp->st == PG_DATA ? "data" :
		    "data or zero", (unsigned long long)(i == 0 ? first : w[i]),
		    exp == 0 ? what_is(sp, i == 0 ? first : w[i], i) :
		    (i == 0 ? first : w[i]) == 0 ? "zero: the data was lost" :
		    "wrong bytes");
		trace_print(sr, p);
		return;
	}
	me->bytes_verified += sr->psz;
}

/* Errors a request may meet while the daemon is down or restarting. */
static int
transient(int error)
{
	switch (-error) {
	case ECONNREFUSED:
	case ECONNRESET:
	case ENOENT:
	case EPIPE:
	case ETIMEDOUT:
	case ENOTCONN:
	case EAGAIN:
	case ENXIO:	/* a new daemon that does not know the region yet */
		return (1);
	}
	return (0);
}

/* A short pause between retries: 5-50 ms. */
static void
pause_retry(void)
{
	struct timespec	ts = { 0, (long)(5 + rnd(45)) * 1000000L };

	me->retries++;
	nanosleep(&ts, NULL);
}

static void
call_time(uint64_t t0)
{
	uint64_t	dt = tclock_ns() - t0;

	if (dt > me->call_max_ns)
		me->call_max_ns = dt;
}

static void
model_reset(struct sregion *sr, size_t p0, size_t n, int done)
{
	size_t	p;

	for (p = p0; p < p0 + n; p++) {
		if (done) {
			if (sr->pg[p].st != PG_ZERO)
				sr->pg[p].prev = sr->pg[p].tag;
			sr->pg[p].st = PG_ZERO;
			sr->pg[p].touched = 0;
		} else if (sr->pg[p].st == PG_DATA)
			/* A failed reset may have cleared it, or not. */
			sr->pg[p].st = PG_EITHER;
	}
}

static int
do_register(struct sregion *sr, unsigned int flags)
{
	uint64_t	t0 = tclock_ns(), t;
	size_t		p;
	int		error;

	sr->r.flags = flags;
	for (;;) {
		busy(B_REGISTER, sr, 0);
		t = tclock_ns();
		error = hpz_register(&sr->r);
		call_time(t);
		busy(B_NONE, NULL, 0);
		trace(sr, 'G', 0, sr->npages, error);
		if (error == 0)
			break;
		if (!transient(error) || tclock_ns() - t0 > retry_ns) {
			violation("hpz_register of region %lu (%zu x %zu, "
			    "flags 0x%x) failed%s: %s (%s)", sr->id, sr->npages,
			    sr->psz, flags, transient(error) ? " for too long" :
			    "", hpz_strerror(error), hpz_last_error());
			return (-1);
		}
		pause_retry();
	}
	sr->registered = 1;
	sr->gen++;
	me->registers++;
	for (p = 0; p < sr->npages; p++) {
		sr->pg[p].touched = 0;
		/* The contents were declared garbage: all must read zero. */
		if (flags & HPZ_DISCARD) {
			if (sr->pg[p].st != PG_ZERO)
				sr->pg[p].prev = sr->pg[p].tag;
			sr->pg[p].st = PG_ZERO;
		}
	}
	return (0);
}

static int
do_unregister(struct sregion *sr)
{
	uint64_t	t0 = tclock_ns(), t;
	int		error;

	for (;;) {
		busy(B_UNREGISTER, sr, 0);
		t = tclock_ns();
		error = hpz_unregister(&sr->r);
		call_time(t);
		busy(B_NONE, NULL, 0);
		trace(sr, 'U', 0, sr->npages, error);
		if (error == 0)
			break;
		if (!transient(error) || tclock_ns() - t0 > retry_ns) {
			violation("hpz_unregister of region %lu failed%s: %s "
			    "(%s)", sr->id, transient(error) ? " for too long" :
			    "", hpz_strerror(error), hpz_last_error());
			return (-1);
		}
		pause_retry();
	}
	sr->registered = 0;
	me->unregisters++;
	return (0);
}

static void
do_reset(struct sregion *sr)
{
	struct hpz_region	rr = sr->r;
	uint64_t		t0 = tclock_ns(), t;
	size_t			p0, n;
	int			error;

	p0 = rnd(sr->npages);
	n = 1 + rnd(sr->npages - p0);
	rr.addr = (char *)sr->r.addr + p0 * sr->psz;
	rr.len = n * sr->psz;
	rr.offset = sr->r.offset + (off_t)(p0 * sr->psz);
	for (;;) {
		busy(B_RESET, sr, p0);
		t = tclock_ns();
		error = hpz_reset(&rr);
		call_time(t);
		busy(B_NONE, NULL, 0);
		trace(sr, 'Z', p0, n, error);
		if (error == 0)
			break;
		me->resets_failed++;
		/* Nothing may be assumed of a reset that reported failure. */
		model_reset(sr, p0, n, 0);
		if (!transient(error) || tclock_ns() - t0 > retry_ns) {
			violation("hpz_reset of region %lu pages %zu+%zu "
			    "failed%s: %s (%s)", sr->id, p0, n,
			    transient(error) ? " for too long" : "",
			    hpz_strerror(error), hpz_last_error());
			return;
		}
		pause_retry();
	}
	model_reset(sr, p0, n, 1);
	me->resets++;
}

static unsigned int
pick_flags(void)
{
	unsigned int	f = 0;

	if (rnd(2))
		f |= HPZ_DISCARD;
	if (rnd(5) == 0)
		f |= HPZ_AHEAD_ONFAULT;
	if (rnd(10) == 0)
		f |= HPZ_AHEAD_EAGER;
	if (rnd(10) == 0)
		f |= HPZ_PREMAP;
	if (rnd(10) == 0)
		f |= HPZ_NO_SCRUB;
	return (f);
}

static size_t
huge_in_use(void)
{
	size_t	n = 0;
	int	i;

	for (i = 0; i < SOAK_SLOTS; i++)
		if (slot[i].used && slot[i].kind != K_SHMEM)
			n += slot[i].npages + 2;
	return (n);
}

/* A new mapping: libhpz's memfd, our own hugetlb memfd, or shmem. */
static int
region_new(struct sregion *sr)
{
	size_t	off = 0, flen;
	int	fd, error;

	memset(sr, 0, sizeof(*sr));
	sr->kind = (int)rnd(3);
	if (sr->kind != K_SHMEM && huge_in_use() + 8 > (size_t)max_huge)
		sr->kind = K_SHMEM;
	sr->psz = sr->kind == K_SHMEM ? (size_t)sysconf(_SC_PAGESIZE) :
	    HUGE_2M;
	sr->npages = sr->kind == K_SHMEM ? 16 + rnd(497) : 1 + rnd(6);
	switch (sr->kind) {
	case K_HPZ2M:
	case K_SHMEM:
		error = hpz_region_create(&sr->r, sr->npages * sr->psz,
		    sr->kind == K_SHMEM ? HPZ_PAGE_SHMEM : HPZ_PAGE_2M);
		if (error != 0) {
			if (error == -ENOMEM) {
				me->nopool++;
				return (-1);
			}
			violation("hpz_region_create: %s (%s)",
			    hpz_strerror(error), hpz_last_error());
			return (-1);
		}
		break;
	case K_MEMFD2M:
		/* Mapped at an offset into a larger file, at times. */
		off = rnd(3);
		flen = (sr->npages + off) * HUGE_2M;
		fd = memfd_create("soak", MFD_CLOEXEC | MFD_HUGETLB);
		if (fd == -1 || ftruncate(fd, (off_t)flen) == -1) {
			violation("hugetlb memfd: %s", strerror(errno));
			if (fd != -1)
				close(fd);
			return (-1);
		}
		sr->r.addr = mmap(NULL, sr->npages * HUGE_2M, PROT_READ |
		    PROT_WRITE, MAP_SHARED, fd, (off_t)(off * HUGE_2M));
		if (sr->r.addr == MAP_FAILED) {
			close(fd);
			me->nopool++;
			return (-1);
		}
		sr->r.len = sr->npages * HUGE_2M;
		sr->r.fd = fd;
		sr->r.offset = (off_t)(off * HUGE_2M);
		break;
	}
	sr->pg = calloc(sr->npages, sizeof(*sr->pg));
	if (sr->pg == NULL) {
		violation("out of memory");
		exit(1);
	}
	sr->id = ++next_region_id;
	sr->used = 1;
	trace(sr, 'C', 0, sr->npages, 0);
	me->regions++;
	return (0);
}

static void
region_free(struct sregion *sr)
{
	if (sr->kind == K_MEMFD2M) {
		munmap(sr->r.addr, sr->r.len);
		close(sr->r.fd);
	} else
		hpz_region_destroy(&sr->r);
	free(sr->pg);
	memset(sr, 0, sizeof(*sr));
}

static void
op_write(struct sregion *sr)
{
	size_t	i, n = 1 + rnd(sr->kind == K_SHMEM ? 32 : 3);

	for (i = 0; i < n; i++)
		page_write(sr, rnd(sr->npages));
}

static void
op_verify(struct sregion *sr, int all, const char *when)
{
	size_t	i, n;

	if (all) {
		for (i = 0; i < sr->npages; i++)
			page_verify(sr, i, when);
		return;
	}
	n = 1 + rnd(sr->kind == K_SHMEM ? 64 : 4);
	for (i = 0; i < n; i++)
		page_verify(sr, rnd(sr->npages), when);
}

/* Touch pages not accessed since the last register or reset. */
static void
op_touch(struct sregion *sr)
{
	size_t	p, n = 0;

	for (p = rnd(sr->npages); p < sr->npages && n < 8; p++)
		if (!sr->pg[p].touched) {
			page_verify(sr, p, "touch");
			n++;
		}
}

/* Write some pages of a mapping that is not registered. */
static void
prefill(struct sregion *sr)
{
	size_t	i, n = rnd(sr->npages + 1);

	for (i = 0; i < n; i++)
		page_write(sr, rnd(sr->npages));
}

/*
 * Unregister, then read it all back as the kernel now serves it: garbage
 * must be gone, data kept.  Then register again, or let it go.
 */
static void
op_unregister(struct sregion *sr, int again)
{
	if (do_unregister(sr) != 0) {
		region_free(sr);
		return;
	}
	op_verify(sr, 1, "after unregister");
	me->verified_after_unregister += sr->npages * sr->psz;
	if (!again) {
		region_free(sr);
		return;
	}
	prefill(sr);
	if (do_register(sr, pick_flags()) != 0)
		region_free(sr);
}

/* HPZ_SOAK_INJECT: a stray byte, as a stale or lost one would look. */
static void
corrupt(struct sregion *sr)
{
	static uint64_t	 last;
	size_t		 p, off;

	if (!sr->used || tclock_ns() - last < 500000000ULL)
		return;
	last = tclock_ns();
	p = rnd(sr->npages);
	off = rnd(sr->psz);
	((volatile char *)sr->r.addr)[p * sr->psz + off] ^= 0x5a;
	fprintf(stderr, "soak: injected a wrong byte: region %lu page %zu "
	    "offset %zu\n", sr->id, p, off);
}

static void
step(void)
{
	struct sregion	*sr = &slot[rnd(SOAK_SLOTS)];
	uint64_t	 r;

	if (inject && me_idx == 0)
		corrupt(sr);

	if (!sr->used) {
		if (region_new(sr) != 0) {
			usleep(1000);
			return;
		}
		prefill(sr);
		if (do_register(sr, pick_flags()) != 0)
			region_free(sr);
		return;
	}
	r = rnd(100);
	if (r < 30)
		op_write(sr);
	else if (r < 60)
		op_verify(sr, 0, "verify");
	else if (r < 75)
		do_reset(sr);
	else if (r < 88)
		op_touch(sr);
	else if (r < 93)
		op_unregister(sr, 1);
	else if (r < 97)
		op_unregister(sr, 0);
	else if (sr->kind == K_HPZ2M) {
		/* hpz_region_destroy unregisters (or unmaps) by itself. */
		busy(B_DESTROY, sr, 0);
		region_free(sr);
		busy(B_NONE, NULL, 0);
	} else
		op_verify(sr, 1, "verify all");
}

static void
on_fatal(int sig)
{
	char	buf[200];
	int	n;

	n = snprintf(buf, sizeof(buf), "soak: VIOLATION proc %d: signal %d "
	    "during %s of region %lu page %llu\n", me_idx, sig,
	    busy_name[me->busy_what], me->busy_region,
	    (unsigned long long)me->busy_page);
	if (write(2, buf, (size_t)n) < 0)
		_exit(2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
child(int idx)
{
	int	i;

	me_idx = idx;
	me = &stats[idx];
	me->incarnation++;
	me->pid = (int)getpid();
	rng = mix64(seed ^ ((uint64_t)idx << 32) ^ me->incarnation) | 1;
	signal(SIGBUS, on_fatal);
	signal(SIGSEGV, on_fatal);
	while (tclock_ns() < *stop_ns) {
		step();
		/* A client that goes away with its regions registered. */
		if (rnd(3000) == 0) {
			me->exits++;
			_exit(3);
		}
	}
	for (i = 0; i < SOAK_SLOTS; i++)
		if (slot[i].used)
			op_unregister(&slot[i], 0);
	_exit(me->violations != 0);
}

static pid_t
spawn(int idx)
{
	pid_t	pid;

	fflush(NULL);
	pid = fork();
	if (pid == -1) {
		perror("soak: fork");
		exit(1);
	}
	if (pid == 0)
		child(idx);
	return (pid);
}

/* Faults the daemon served, summed over its lives (uptime going back). */
struct dfaults {
	uint64_t	last_uptime, last, dead, lives, polls;
};

static void
poll_daemon(struct dfaults *d)
{
	struct hpz_status	st;

	if (hpz_status(&st) != 0)
		return;
	d->polls++;
	if (d->lives == 0 || st.uptime_ms < d->last_uptime ||
	    st.faults < d->last) {
		if (d->lives != 0)
			d->dead += d->last;
		d->lives++;
	}
	d->last_uptime = st.uptime_ms;
	d->last = st.faults;
}

int
main(void)
{
	pid_t		 pids[SOAK_MAXPROCS];
	int		 hung[SOAK_MAXPROCS] = { 0 };
	struct dfaults	 df = { 0 };
	struct cstats	 tot;
	const char	*cf;
	FILE		*f;
	uint64_t	 hang_ns, t, seconds, sum, half, lastpoll = 0, dt;
	unsigned int	 b;
	int		 i, j, status, alive, failed = 0, bad;
	char		 line[1024];

	seconds = (uint64_t)env_long("HPZ_SOAK_SECONDS", 60);
	procs = (int)env_long("HPZ_SOAK_PROCS", 8);
	if (procs < 1 || procs > SOAK_MAXPROCS)
		procs = 8;
	max_huge = (int)env_long("HPZ_SOAK_HUGE", 16);
	fallback_ms = env_long("HPZ_FALLBACK_MS", 2000);
	inject = (int)env_long("HPZ_SOAK_INJECT", 0);
	seed = (uint64_t)env_long("HPZ_SOAK_SEED",
	    (long)(tclock_ns() % 1000000007));
	bound_ns = (uint64_t)(fallback_ms + 2000) * 1000000ULL;
	retry_ns = (uint64_t)env_long("HPZ_SOAK_RETRY_MS", 20000) * 1000000ULL;
	/* A wait this long means nobody will ever serve it. */
	hang_ns = bound_ns * 3 > 30000000000ULL ? bound_ns * 3 : 30000000000ULL;
	printf("soak: %d processes, %llu s, seed %llu, first-touch bound %ld "
	    "ms\n", procs, (unsigned long long)seconds,
	    (unsigned long long)seed, (long)(bound_ns / 1000000));

	stop_ns = mmap(NULL, 64 + sizeof(*stats) * (size_t)procs, PROT_READ |
	    PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (stop_ns == MAP_FAILED) {
		perror("soak: mmap");
		return (1);
	}
	stats = (struct cstats *)((char *)stop_ns + 64);
	*stop_ns = tclock_ns() + seconds * 1000000000ULL;
	for (i = 0; i < procs; i++)
		pids[i] = spawn(i);

	for (alive = procs; alive > 0;) {
		usleep(50000);
		t = tclock_ns();
		if (t - lastpoll > 250000000ULL) {
			poll_daemon(&df);
			lastpoll = t;
		}
		for (i = 0; i < procs; i++) {
			if (pids[i] <= 0)
				continue;
			dt = __atomic_load_n(&stats[i].busy_since,
			    __ATOMIC_ACQUIRE);
			if (dt != 0 && t > dt && t - dt > hang_ns &&
			    !hung[i]) {
				fprintf(stderr, "soak: VIOLATION proc %d (pid "
				    "%d) blocked %.1f s in %s of region %lu "
				    "page %llu: nobody serves it\n", i,
				    (int)pids[i], (t - dt) / 1e9,
				    busy_name[stats[i].busy_what],
				    stats[i].busy_region,
				    (unsigned long long)stats[i].busy_page);
				stats[i].violations++;
				failed = 1;
				hung[i] = 1;
				kill(pids[i], SIGKILL);
			}
			if (waitpid(pids[i], &status, WNOHANG) != pids[i])
				continue;
			hung[i] = 0;
			if (WIFEXITED(status) && WEXITSTATUS(status) == 3 &&
			    tclock_ns() < *stop_ns) {
				pids[i] = spawn(i);
				continue;
			}
			if (WIFSIGNALED(status) ||
			    (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
			    WEXITSTATUS(status) != 3)) {
				if (WIFSIGNALED(status) &&
				    WTERMSIG(status) != SIGKILL)
					fprintf(stderr, "soak: proc %d died of "
					    "signal %d\n", i, WTERMSIG(status));
				failed = 1;
			}
			pids[i] = 0;
			alive--;
		}
		for (i = 0; i < procs; i++)
			if (stats[i].violations != 0)
				failed = 1;
		/* Stop early: the first reports are the useful ones. */
		if (failed && t + 1000000000ULL < *stop_ns)
			*stop_ns = t + 1000000000ULL;
	}
	poll_daemon(&df);

	memset(&tot, 0, sizeof(tot));
	for (i = 0; i < procs; i++) {
		struct cstats	*s = &stats[i];

		tot.regions += s->regions;
		tot.registers += s->registers;
		tot.unregisters += s->unregisters;
		tot.resets += s->resets;
		tot.resets_failed += s->resets_failed;
		tot.retries += s->retries;
		tot.first_touches += s->first_touches;
		tot.pages_written += s->pages_written;
		tot.bytes_written += s->bytes_written;
		tot.bytes_verified += s->bytes_verified;
		tot.verified_after_unregister += s->verified_after_unregister;
		tot.nopool += s->nopool;
		tot.over_bound += s->over_bound;
		tot.violations += s->violations;
		tot.exits += s->exits;
		if (s->block_max_ns > tot.block_max_ns)
			tot.block_max_ns = s->block_max_ns;
		if (s->call_max_ns > tot.call_max_ns)
			tot.call_max_ns = s->call_max_ns;
		for (j = 0; j < SOAK_HIST; j++)
			tot.hist[j] += s->hist[j];
	}
	for (sum = 0, b = 0; b < SOAK_HIST; b++)
		sum += tot.hist[b];
	half = (sum + 1) / 2;
	for (t = 0, b = 0; b < SOAK_HIST; b++)
		if ((t += tot.hist[b]) >= half)
			break;
	bad = failed || tot.violations != 0;
	snprintf(line, sizeof(line), "procs=%d seconds=%llu seed=%llu "
	    "regions=%llu registers=%llu unregisters=%llu resets=%llu "
	    "resets_failed=%llu retries=%llu client_exits=%llu "
	    "first_touches=%llu daemon_faults=%llu daemon_lives_seen=%llu "
	    "bytes_written=%llu bytes_verified=%llu "
	    "bytes_verified_unregistered=%llu no_pool=%llu "
	    "block_max_ms=%.3f block_p50_us=%.1f bound_ms=%llu "
	    "call_max_ms=%.1f violations=%llu", procs,
	    (unsigned long long)seconds, (unsigned long long)seed,
	    (unsigned long long)tot.regions, (unsigned long long)tot.registers,
	    (unsigned long long)tot.unregisters,
	    (unsigned long long)tot.resets,
	    (unsigned long long)tot.resets_failed,
	    (unsigned long long)tot.retries, (unsigned long long)tot.exits,
	    (unsigned long long)tot.first_touches,
	    (unsigned long long)(df.dead + df.last),
	    (unsigned long long)df.lives,
	    (unsigned long long)tot.bytes_written,
	    (unsigned long long)tot.bytes_verified,
	    (unsigned long long)tot.verified_after_unregister,
	    (unsigned long long)tot.nopool, tot.block_max_ns / 1e6,
	    sum == 0 ? 0.0 : hist_edge(b) / 1e3,
	    (unsigned long long)(bound_ns / 1000000), tot.call_max_ns / 1e6,
	    (unsigned long long)(tot.violations + (failed && tot.violations ==
	    0)));
	/* soak.sh prints the one summary line, with its kill counts. */
	if ((cf = getenv("HPZ_SOAK_COUNTS")) != NULL && *cf != '\0' &&
	    (f = fopen(cf, "w")) != NULL) {
		fprintf(f, "%s\n", line);
		fclose(f);
	} else
		printf("soak: %s\n", line);
	if (tot.bytes_verified == 0 && tot.nopool != 0) {
		printf("soak: no huge pages could be mapped\n");
		return (bad ? 1 : 77);
	}
	return (bad ? 1 : 0);
}
