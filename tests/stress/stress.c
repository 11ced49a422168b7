/*
 * stress.c - the interception stress test (issue 12).  Threads of one
 * process work on the pages of two regions at once: write a pattern,
 * read it back (several readers fault the same page together), reset a
 * page or a whole region, MADV_DONTNEED, MADV_REMOVE, fallocate(PUNCH_HOLE)
 * behind the daemon's back, while stress.sh kills and restarts hpzerod
 * under them with a different [policy] each life.  A range's faults are
 * the daemon's only while it holds garbage, so every reset switches the
 * range to trapping faults and every clear of its last garbage page
 * switches it back: the transitions happen all the time.  Every word read
 * is checked against a model of what its page must hold: the last pattern
 * written, or zero after a reset, a remove or a punch.  A non-zero word
 * the model does not expect is a stale byte; a zero where data is
 * expected is a data page zeroed.
 *
 * Environment: HPZ_SOCKET, HPZ_STRESS_SECONDS (20), HPZ_STRESS_THREADS
 * (4), HPZ_STRESS_PAGES (8 a region), HPZ_STRESS_SEED (the clock),
 * HPZ_STRESS_COUNTS (a file for the final counts), HPZ_STRESS_OPS (the
 * operations besides reads: w write, r reset a page, R reset a region,
 * d MADV_DONTNEED, m MADV_REMOVE, p punch; all by default).  Exit 0: no violation;
 * 1: violations or a missing transition; 77: no huge pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/falloc.h>

#include "hpz.h"
#include "../tclock.h"
#include "hpz-state.h"

#define HUGE_2M		(2UL << 20)
#define WORDS		(HUGE_2M / 4096)	/* one word every 4 KiB */
#define NREGIONS	2
#define THREADS_MAX	16
#define OP_BOUND_S	60	/* a liveness bound, not a timing */

enum { M_ZERO, M_DATA, M_EITHER };	/* EITHER: data tag or zero */

#define TRACE_N		16	/* operations kept a page, for a report */

struct mpage {
	pthread_rwlock_t lock;
	int		 st;
	uint64_t	 tag;
	unsigned int	 nt;
	struct {
		uint64_t	 us;
		char		 op;	/* w r R d m p v (verify) */
		int		 st;	/* the model after it */
		int		 sb;	/* the state byte after it */
	}		 tr[TRACE_N];
};

struct sreg {
	struct hpz_region r;
	unsigned int	 flags;
	size_t		 npages;
	struct mpage	*pg;
	pthread_mutex_t	 whole;		/* whole-region resets, one at once */
	int		 sfd;		/* libhpz's page-state memfd, or -1 */
};

struct counts {
	uint64_t	 ops, writes, verifies, words, resets, resets_whole;
	uint64_t	 resets_failed, dontneed, removes, punches, violations;
};

static struct sreg	 reg[NREGIONS];
static struct counts	 cnt;
static volatile int	 stopping;
static uint64_t		 seed, tag_ctr = 1;
static volatile uint64_t op_started[THREADS_MAX];
static const char	*ops = "wrRdmp";	/* HPZ_STRESS_OPS */

/* Transitions seen across the daemon's lives (the monitor sums them). */
static uint64_t		 tr_on, tr_off, tr_aside, tr_pages_aside, lives_seen;

static uint64_t
xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (*s);
}

static inline uint64_t
pat(uint64_t t, size_t i)
{
	return (t ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL));
}

static void
violation(const char *fmt, ...)
{
	va_list	ap;

	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	va_start(ap, fmt);
	fprintf(stderr, "%lld.%03ld stress: VIOLATION ", (long long)ts.tv_sec,
	    ts.tv_nsec / 1000000);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	__atomic_add_fetch(&cnt.violations, 1, __ATOMIC_RELAXED);
}

/* The page's state byte as the servers see it (for a report), or -1. */
static int
state_byte(const struct sreg *sr, size_t p)
{
	uint8_t	b;

	if (sr->sfd < 0 || pread(sr->sfd, &b, 1, (off_t)(HPZ_STATE_PAGES_OFF +
	    p)) != 1)
		return (-1);
	return (b);
}

/* The page-state memfd libhpz made for the region just registered. */
static int
state_find(void)
{
	char	path[64], link[256];
	ssize_t	n;
	int	fd, r, taken;

	for (fd = 3; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		if (strstr(link, "memfd:hpz-state") == NULL)
			continue;
		for (taken = 0, r = 0; r < NREGIONS; r++)
			if (reg[r].sfd == fd)
				taken = 1;
		if (!taken)
			return (fd);
	}
	return (-1);
}

static uint64_t *
page_addr(struct sreg *sr, size_t p)
{
	return ((uint64_t *)((char *)sr->r.addr + p * HUGE_2M));
}

/* Remember an operation on page p (its lock held; verify: shared). */
static void
trace_op(struct sreg *sr, size_t p, char op)
{
	struct mpage	*m = &sr->pg[p];
	unsigned int	 k = __atomic_fetch_add(&m->nt, 1, __ATOMIC_RELAXED);

	m->tr[k % TRACE_N].us = tclock_ns() / 1000;
	m->tr[k % TRACE_N].op = op;
	m->tr[k % TRACE_N].st = m->st;
	m->tr[k % TRACE_N].sb = state_byte(sr, p);
}

static void
trace_print(struct sreg *sr, size_t p)
{
	struct mpage	*m = &sr->pg[p];
	unsigned int	 k, first = m->nt > TRACE_N ? m->nt - TRACE_N : 0;

	for (k = first; k < m->nt; k++)
		fprintf(stderr, "stress:   page %zu: %llu us %c -> model %d, "
		    "state byte 0x%02x\n", p,
		    (unsigned long long)m->tr[k % TRACE_N].us,
		    m->tr[k % TRACE_N].op, m->tr[k % TRACE_N].st,
		    m->tr[k % TRACE_N].sb);
}

/* Check page p (lock held) against the model; settle an EITHER. */
static void
verify(struct sreg *sr, size_t p, uint64_t *rs, int settle)
{
	struct mpage		*m = &sr->pg[p];
	volatile uint64_t	*w = page_addr(sr, p);
	size_t			 i, first = xs(rs) % WORDS, k, zeros = 0, data = 0;
	uint64_t		 v;

	/* The faulting word is a random one; then every word. */
	for (k = 0; k < WORDS; k++) {
		i = (first + k) % WORDS;
		v = w[i * 512];
		if (v == 0)
			zeros++;
		else if (m->st != M_ZERO && v == pat(m->tag, i))
			data++;
		else {
			violation("region %d page %zu word %zu: 0x%016llx, "
			    "the model says %s (tag %llu): a stale or foreign "
			    "byte (state byte 0x%02x)", (int)(sr - reg), p, i,
			    (unsigned long long)v, m->st == M_ZERO ? "zero" :
			    m->st == M_DATA ? "data" : "data or zero",
			    (unsigned long long)m->tag, state_byte(sr, p));
			return;
		}
	}
	__atomic_add_fetch(&cnt.words, WORDS, __ATOMIC_RELAXED);
	if (m->st == M_DATA && zeros != 0)
		violation("region %d page %zu: %zu of %zu words zero, the "
		    "model says data (tag %llu): a data page zeroed (state "
		    "byte 0x%02x)", (int)(sr - reg), p, zeros, (size_t)WORDS,
		    (unsigned long long)m->tag, state_byte(sr, p));
	if (m->st == M_DATA && zeros != 0)
		trace_print(sr, p);
	if (m->st == M_EITHER && zeros != 0 && data != 0)
		violation("region %d page %zu: %zu words zero and %zu data: "
		    "half reset", (int)(sr - reg), p, zeros, data);
	else if (m->st == M_EITHER && settle)
		m->st = data != 0 ? M_DATA : M_ZERO;
	trace_op(sr, p, 'v');
}

static void
write_page(struct sreg *sr, size_t p)
{
	struct mpage	*m = &sr->pg[p];
	volatile uint64_t *w = page_addr(sr, p);
	uint64_t	 t = __atomic_fetch_add(&tag_ctr, 1, __ATOMIC_RELAXED);
	size_t		 i;

	t = t * 0x100000001b3ULL + seed;
	if (t == 0)
		t = 1;
	for (i = 0; i < WORDS; i++)
		w[i * 512] = pat(t, i);
	m->st = M_DATA;
	m->tag = t;
	trace_op(sr, p, 'w');
	__atomic_add_fetch(&cnt.writes, 1, __ATOMIC_RELAXED);
}

/* hpz_reset of pages [p, p+n) (their locks held). */
static void
reset_pages(struct sreg *sr, size_t p, size_t n)
{
	struct hpz_region	 part = sr->r;
	size_t			 i;
	int			 error;

	part.addr = (char *)sr->r.addr + p * HUGE_2M;
	part.len = n * HUGE_2M;
	part.offset = sr->r.offset + (off_t)(p * HUGE_2M);
	error = hpz_reset(&part);
	for (i = p; i < p + n; i++) {
		if (error == 0)
			sr->pg[i].st = M_ZERO;
		else if (sr->pg[i].st == M_DATA)
			sr->pg[i].st = M_EITHER;
		trace_op(sr, i, n == sr->npages ? 'R' : 'r');
	}
	if (error != 0)
		__atomic_add_fetch(&cnt.resets_failed, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(n == sr->npages ? &cnt.resets_whole : &cnt.resets,
	    1, __ATOMIC_RELAXED);
}

static void
one_op(uint64_t *rs)
{
	struct sreg	*sr = &reg[xs(rs) % NREGIONS];
	size_t		 p = xs(rs) % sr->npages, i;
	int		 op = (int)(xs(rs) % 100);
	struct mpage	*m = &sr->pg[p];

	if (op >= 40 && strchr(ops, op < 44 ? 'R' : op < 70 ? 'w' : op < 78 ?
	    'r' : op < 86 ? 'd' : op < 93 ? 'm' : 'p') == NULL)
		op = 0;		/* not among HPZ_STRESS_OPS: a read */
	if (op < 40) {
		pthread_rwlock_rdlock(&m->lock);
		/* Readers share the page: their faults come together. */
		verify(sr, p, rs, 0);
		pthread_rwlock_unlock(&m->lock);
		__atomic_add_fetch(&cnt.verifies, 1, __ATOMIC_RELAXED);
		return;
	}
	if (op < 44) {
		/* The whole region: every page's lock, in order. */
		pthread_mutex_lock(&sr->whole);
		for (i = 0; i < sr->npages; i++)
			pthread_rwlock_wrlock(&sr->pg[i].lock);
		reset_pages(sr, 0, sr->npages);
		for (i = 0; i < sr->npages; i++)
			pthread_rwlock_unlock(&sr->pg[i].lock);
		pthread_mutex_unlock(&sr->whole);
		return;
	}
	pthread_rwlock_wrlock(&m->lock);
	if (m->st == M_EITHER)
		verify(sr, p, rs, 1);
	if (op < 70) {
		write_page(sr, p);
	} else if (op < 78) {
		reset_pages(sr, p, 1);
	} else if (op < 86) {
		/* Page tables only: a shared file keeps its contents. */
		if (madvise(page_addr(sr, p), HUGE_2M, MADV_DONTNEED) == -1)
			violation("MADV_DONTNEED: %s", strerror(errno));
		trace_op(sr, p, 'd');
		__atomic_add_fetch(&cnt.dontneed, 1, __ATOMIC_RELAXED);
	} else if (op < 93) {
		if (madvise(page_addr(sr, p), HUGE_2M, MADV_REMOVE) == -1)
			violation("MADV_REMOVE: %s", strerror(errno));
		else
			m->st = M_ZERO;
		trace_op(sr, p, 'm');
		__atomic_add_fetch(&cnt.removes, 1, __ATOMIC_RELAXED);
	} else {
		/* No uffd event: the daemon is not told (QEMU's balloon). */
		if (fallocate(sr->r.fd, FALLOC_FL_PUNCH_HOLE |
		    FALLOC_FL_KEEP_SIZE, sr->r.offset + (off_t)(p * HUGE_2M),
		    (off_t)HUGE_2M) == -1)
			violation("fallocate(PUNCH_HOLE): %s", strerror(errno));
		else
			m->st = M_ZERO;
		trace_op(sr, p, 'p');
		__atomic_add_fetch(&cnt.punches, 1, __ATOMIC_RELAXED);
	}
	/* Read it back at once: a fault right after the change. */
	if (xs(rs) % 2)
		verify(sr, p, rs, 1);
	pthread_rwlock_unlock(&m->lock);
}

static void *
worker_main(void *arg)
{
	uint64_t	rs = seed ^ (0x1234567ULL * (uintptr_t)arg + 1);
	int		idx = (int)(uintptr_t)arg;

	while (!stopping) {
		op_started[idx] = tclock_ns();
		one_op(&rs);
		op_started[idx] = 0;
		__atomic_add_fetch(&cnt.ops, 1, __ATOMIC_RELAXED);
	}
	return (NULL);
}

/* Sum the daemon's interception counters over its lives. */
static void
monitor_poll(struct hpz_status *last, int *have)
{
	struct hpz_status	st;

	if (hpz_status(&st) != 0)
		return;
	if (!*have || st.uptime_ms < last->uptime_ms ||
	    st.intercept_on < last->intercept_on) {
		/* A new life: its counters start from zero. */
		memset(last, 0, sizeof(*last));
		lives_seen++;
	}
	tr_on += st.intercept_on - last->intercept_on;
	tr_off += st.intercept_off - last->intercept_off;
	tr_aside += st.steps_aside - last->steps_aside;
	tr_pages_aside += st.pages_aside - last->pages_aside;
	*last = st;
	*have = 1;
}

int
main(void)
{
	pthread_t		 t[THREADS_MAX];
	struct hpz_status	 last;
	const char		*s;
	FILE			*f;
	uint64_t		 end, now;
	size_t			 i, r, npages = 8;
	int			 nthreads = 4, seconds = 20, have = 0, error;

	if ((s = getenv("HPZ_STRESS_SECONDS")) != NULL)
		seconds = atoi(s);
	if ((s = getenv("HPZ_STRESS_THREADS")) != NULL)
		nthreads = atoi(s);
	if ((s = getenv("HPZ_STRESS_OPS")) != NULL)
		ops = s;
	if ((s = getenv("HPZ_STRESS_PAGES")) != NULL)
		npages = (size_t)atoi(s);
	if (nthreads < 1 || nthreads > THREADS_MAX)
		nthreads = 4;
	seed = (s = getenv("HPZ_STRESS_SEED")) != NULL ?
	    strtoull(s, NULL, 0) : tclock_ns();
	fprintf(stderr, "stress: seed %llu, %d threads, %d s, 2 regions of "
	    "%zu pages\n", (unsigned long long)seed, nthreads, seconds,
	    npages);
	for (r = 0; r < NREGIONS; r++)
		reg[r].sfd = -1;
	for (r = 0; r < NREGIONS; r++) {
		/* One scrubbed (short garbage), one cleared on fault only. */
		reg[r].flags = HPZ_PAGE_2M | HPZ_NO_POOL |
		    (r == 1 ? HPZ_NO_SCRUB : 0);
		reg[r].npages = npages;
		error = hpz_region_create(&reg[r].r, npages * HUGE_2M,
		    reg[r].flags);
		if (error == -ENOMEM || error == -ENOSPC) {
			fprintf(stderr, "SKIP: no huge pages\n");
			return (77);
		}
		if (error != 0 || (error = hpz_register(&reg[r].r)) != 0) {
			fprintf(stderr, "stress: region %zu: %s\n", r,
			    hpz_last_error());
			return (1);
		}
		reg[r].sfd = state_find();
		reg[r].pg = calloc(npages, sizeof(*reg[r].pg));
		pthread_mutex_init(&reg[r].whole, NULL);
		for (i = 0; i < npages; i++)
			pthread_rwlock_init(&reg[r].pg[i].lock, NULL);
	}
	for (i = 0; i < (size_t)nthreads; i++)
		pthread_create(&t[i], NULL, worker_main, (void *)(uintptr_t)i);
	end = tclock_ns() + (uint64_t)seconds * 1000000000ULL;
	while ((now = tclock_ns()) < end) {
		monitor_poll(&last, &have);
		for (i = 0; i < (size_t)nthreads; i++) {
			uint64_t b = op_started[i];

			if (b != 0 && now > b && now - b >
			    (uint64_t)OP_BOUND_S * 1000000000ULL) {
				violation("thread %zu: one operation for more "
				    "than %d s: a hang", i, OP_BOUND_S);
				stopping = 1;
			}
		}
		usleep(50 * 1000);
	}
	stopping = 1;
	for (i = 0; i < (size_t)nthreads; i++)
		pthread_join(t[i], NULL);
	monitor_poll(&last, &have);
	/* Everything once more, settled. */
	for (r = 0; r < NREGIONS; r++) {
		uint64_t rs = seed + r + 1;

		for (i = 0; i < npages; i++)
			verify(&reg[r], i, &rs, 1);
	}
	/* The test must have done what it says it does. */
	if (tr_on == 0 || tr_off == 0)
		violation("no interception transition seen (on %llu, off "
		    "%llu): the test did not exercise them",
		    (unsigned long long)tr_on, (unsigned long long)tr_off);
	fprintf(stderr, "stress: ops=%llu writes=%llu verifies=%llu "
	    "words=%llu resets=%llu whole=%llu failed=%llu dontneed=%llu "
	    "remove=%llu punch=%llu lives_seen=%llu intercept_on=%llu "
	    "intercept_off=%llu steps_aside=%llu pages_aside=%llu "
	    "violations=%llu\n",
	    (unsigned long long)cnt.ops, (unsigned long long)cnt.writes,
	    (unsigned long long)cnt.verifies, (unsigned long long)cnt.words,
	    (unsigned long long)cnt.resets,
	    (unsigned long long)cnt.resets_whole,
	    (unsigned long long)cnt.resets_failed,
	    (unsigned long long)cnt.dontneed, (unsigned long long)cnt.removes,
	    (unsigned long long)cnt.punches, (unsigned long long)lives_seen,
	    (unsigned long long)tr_on, (unsigned long long)tr_off,
	    (unsigned long long)tr_aside, (unsigned long long)tr_pages_aside,
	    (unsigned long long)cnt.violations);
	if ((s = getenv("HPZ_STRESS_COUNTS")) != NULL &&
	    (f = fopen(s, "w")) != NULL) {
		fprintf(f, "steps_aside=%llu intercept_on=%llu "
		    "intercept_off=%llu\n", (unsigned long long)tr_aside,
		    (unsigned long long)tr_on, (unsigned long long)tr_off);
		fclose(f);
	}
	for (r = 0; r < NREGIONS; r++)
		hpz_region_destroy(&reg[r].r);
	return (cnt.violations != 0);
}
