/*
 * clear.c - clear kernels, the choice between them, and the order in which
 * huge pages are cleared: the bulk with non-temporal stores, then the
 * faulting subpage's neighbourhood with ordinary stores so that it is
 * cache-hot when the client resumes; one page in extents shared with
 * helpers; every write into a client's file behind a recovery point.
 * Self-contained: no log, no stats, no workers (see clear.h), so that
 * client/hpz-bench can link clear.o alone.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "hpz-protocol.h"
#include "clock.h"

#include "clear.h"
#include "plan.h"

#define CLEAR_CAL_SIZE		(64UL << 20)	/* past the LLC: NT pays */
#define CLEAR_CAL_ROUNDS_MIN	3
#define CLEAR_CAL_ROUNDS_MAX	32
#define CLEAR_CAL_BUDGET_NS	40000000ULL	/* no round starts after */
#define CLEAR_CAL_NT_MARGIN	25	/* %: ordinary stores must beat NT by */
#define CLEAR_CAL_TIE_MARGIN	2	/* %: a later kernel must beat by */
#define CLEAR_HOT_SIZE		(64UL << 10)
#define CLEAR_SUBPAGE		4096UL	/* a piece is whole base pages */
#define CLEAR_HOT_REPS		64

static void	clear_memset(void *, size_t);
#if defined(__x86_64__)
static void	clear_avx512_nt(void *, size_t);
static void	clear_avx2_nt(void *, size_t);
static void	clear_sse2_nt(void *, size_t);
static void	clear_rep_stosb(void *, size_t);
#else
#define clear_avx512_nt	clear_memset
#define clear_avx2_nt	clear_memset
#define clear_sse2_nt	clear_memset
#define clear_rep_stosb	clear_memset
#endif

/* In enum order: clear_kernel() indexes it, ties prefer the earlier one. */
static const struct clear_kernel clear_kernels[CLEAR_NKINDS] = {
	{ "avx512-nt", CLEAR_AVX512_NT, 1, clear_avx512_nt },
	{ "avx2-nt", CLEAR_AVX2_NT, 1, clear_avx2_nt },
	{ "sse2-nt", CLEAR_SSE2_NT, 1, clear_sse2_nt },
	{ "rep-stosb", CLEAR_REP_STOSB, 0, clear_rep_stosb },
	{ "memset", CLEAR_MEMSET, 0, clear_memset },
};

/* Safe before clear_init: callers may clear before the choice is made. */
const struct clear_kernel *clear_bulk_kernel = &clear_kernels[CLEAR_MEMSET];
const struct clear_kernel *clear_hot_kernel = &clear_kernels[CLEAR_MEMSET];

static double	clear_gbs[CLEAR_NKINDS];

/* The portable kernel, and the fallback for heads and tails of the rest. */
static void
clear_memset(void *p, size_t len)
{
	if (len != 0)
		memset(p, 0, len);
}

#if defined(__x86_64__)
/* Streaming stores bypass the cache: the bulk of a page nobody reads soon. */
static __attribute__((target("avx512f"))) void
clear_avx512_nt(void *p, size_t len)
{
	char	*c = p;
	size_t	 head, body, i;
	__m512i	 z = _mm512_setzero_si512();

	head = -(uintptr_t)c & 63;
	if (len < head + 64) {
		clear_memset(c, len);
		return;
	}
	clear_memset(c, head);
	c += head;
	len -= head;
	body = len & ~(size_t)63;
	for (i = 0; i + 256 <= body; i += 256) {
		_mm512_stream_si512((void *)(c + i), z);
		_mm512_stream_si512((void *)(c + i + 64), z);
		_mm512_stream_si512((void *)(c + i + 128), z);
		_mm512_stream_si512((void *)(c + i + 192), z);
	}
	for (; i < body; i += 64)
		_mm512_stream_si512((void *)(c + i), z);
	clear_memset(c + body, len - body);
}

/* The same with 32-byte stores, for CPUs without AVX-512. */
static __attribute__((target("avx2"))) void
clear_avx2_nt(void *p, size_t len)
{
	char	*c = p;
	size_t	 head, body, i;
	__m256i	 z = _mm256_setzero_si256();

	head = -(uintptr_t)c & 31;
	if (len < head + 32) {
		clear_memset(c, len);
		return;
	}
	clear_memset(c, head);
	c += head;
	len -= head;
	body = len & ~(size_t)31;
	for (i = 0; i + 128 <= body; i += 128) {
		_mm256_stream_si256((__m256i *)(void *)(c + i), z);
		_mm256_stream_si256((__m256i *)(void *)(c + i + 32), z);
		_mm256_stream_si256((__m256i *)(void *)(c + i + 64), z);
		_mm256_stream_si256((__m256i *)(void *)(c + i + 96), z);
	}
	for (; i < body; i += 32)
		_mm256_stream_si256((__m256i *)(void *)(c + i), z);
	clear_memset(c + body, len - body);
}

/* The same with 16-byte stores: every x86-64 has SSE2. */
static void
clear_sse2_nt(void *p, size_t len)
{
	char	*c = p;
	size_t	 head, body, i;
	__m128i	 z = _mm_setzero_si128();

	head = -(uintptr_t)c & 15;
	if (len < head + 16) {
		clear_memset(c, len);
		return;
	}
	clear_memset(c, head);
	c += head;
	len -= head;
	body = len & ~(size_t)15;
	for (i = 0; i + 64 <= body; i += 64) {
		_mm_stream_si128((__m128i *)(void *)(c + i), z);
		_mm_stream_si128((__m128i *)(void *)(c + i + 16), z);
		_mm_stream_si128((__m128i *)(void *)(c + i + 32), z);
		_mm_stream_si128((__m128i *)(void *)(c + i + 48), z);
	}
	for (; i < body; i += 16)
		_mm_stream_si128((__m128i *)(void *)(c + i), z);
	clear_memset(c + body, len - body);
}

/* Ordinary stores the CPU may widen itself (ERMS): the hot neighbourhood. */
static void
clear_rep_stosb(void *p, size_t len)
{
	void	*d = p;
	size_t	 n = len;

	__asm__ volatile("rep stosb" : "+D" (d), "+c" (n) : "a" (0) :
	    "memory");
}

/* CPUID says the CPU has the unit; XCR0 says the OS saves its registers. */
static void
clear_probe_x86(int *avx2, int *avx512)
{
	unsigned int	a, b, c, d, xlo, xhi;
	int		osxsave, avx;

	*avx2 = *avx512 = 0;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	osxsave = (c & bit_OSXSAVE) != 0;
	avx = (c & bit_AVX) != 0;
	if (!osxsave || !avx)
		return;
	__asm__ volatile("xgetbv" : "=a" (xlo), "=d" (xhi) : "c" (0));
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	if ((xlo & 0x6) == 0x6 && (b & bit_AVX2))
		*avx2 = 1;
	if ((xlo & 0xe6) == 0xe6 && (b & bit_AVX512F))
		*avx512 = 1;
}
#endif

/* Can this CPU, under this OS, run the kernel? */
int
clear_supported(enum clear_kind kind)
{
#if defined(__x86_64__)
	/* 0: not probed, else 1 + avx2 + 2 * avx512.  Two probes agree. */
	static int	cached;
	int		probed, avx2, avx512;

	probed = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (probed == 0) {
		clear_probe_x86(&avx2, &avx512);
		probed = 1 + avx2 + 2 * avx512;
		__atomic_store_n(&cached, probed, __ATOMIC_RELAXED);
	}
	switch (kind) {
	case CLEAR_AVX512_NT:
		return (((probed - 1) & 2) != 0);
	case CLEAR_AVX2_NT:
		return (((probed - 1) & 1) != 0);
	case CLEAR_SSE2_NT:
	case CLEAR_REP_STOSB:
	case CLEAR_MEMSET:
		return (1);
	default:
		return (0);
	}
#else
	return (kind == CLEAR_MEMSET);
#endif
}

/* The table entry of a kind, supported or not; NULL for no such kind. */
const struct clear_kernel *
clear_kernel(enum clear_kind kind)
{
	if ((unsigned int)kind >= CLEAR_NKINDS)
		return (NULL);
	return (&clear_kernels[kind]);
}

/* The kernel the configuration names, supported or not; NULL if none. */
const struct clear_kernel *
clear_kernel_by_name(const char *name)
{
	int	i;

	if (name == NULL)
		return (NULL);
	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (strcmp(clear_kernels[i].name, name) == 0)
			return (&clear_kernels[i]);
	}
	return (NULL);
}

/* What clear_init measured; 0 for a kernel it did not time. */
double
clear_calibrated_gbs(enum clear_kind kind)
{
	if ((unsigned int)kind >= CLEAR_NKINDS)
		return (0);
	return (clear_gbs[kind]);
}

/* Write "unknown ... (known: a, b, ...)" without snprintf's truncation
 * warnings: the list is appended piece by piece. */
static int
clear_unknown(const char *role, const char *name, char *why, size_t whylen)
{
	size_t	used;
	int	i;

	if (whylen == 0)
		return (-EINVAL);
	snprintf(why, whylen, "unknown %s clear kernel '%s' (known:", role,
	    name);
	for (i = 0; i < CLEAR_NKINDS; i++) {
		used = strlen(why);
		snprintf(why + used, whylen - used, "%s %s", i == 0 ? "" : ",",
		    clear_kernels[i].name);
	}
	used = strlen(why);
	snprintf(why + used, whylen - used, ")");
	return (-EINVAL);
}

/* Turn a configured name into a kernel, or say why it cannot be one. */
static int
clear_pick(const char *role, const char *name, int hot,
    const struct clear_kernel **kp, char *why, size_t whylen)
{
	const struct clear_kernel	*k;

	k = clear_kernel_by_name(name);
	if (k == NULL)
		return (clear_unknown(role, name, why, whylen));
	if (hot && k->nontemporal) {
		snprintf(why, whylen, "the hot kernel must use ordinary stores "
		    "(%s is non-temporal)", k->name);
		return (-EINVAL);
	}
	if (!clear_supported(k->kind)) {
		snprintf(why, whylen, "%s is not supported by this CPU",
		    k->name);
		return (-EINVAL);
	}
	*kp = k;
	return (0);
}

/* Time every supported kernel over a buffer past the LLC, best of a few
 * rounds, interleaved so that no kernel alone meets a cold or busy CPU.
 * Non-temporal wins unless ordinary stores beat it by a margin: the cache
 * they pollute is a cost this cannot see. */
static const struct clear_kernel *
clear_calibrate(void)
{
	const struct clear_kernel	*best = NULL;
	uint64_t			 best_ns[CLEAR_NKINDS], t0, t, start;
	size_t				 size = CLEAR_CAL_SIZE;
	char				*buf;
	int				 i, round, margin;

	buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return (NULL);
	(void)madvise(buf, size, MADV_HUGEPAGE);
	/* The first touch costs a fault a page and, here, a lazy host. */
	memset(buf, 0xa5, size);

	for (i = 0; i < CLEAR_NKINDS; i++)
		best_ns[i] = UINT64_MAX;
	start = clock_now_ns();
	for (round = 0; round < CLEAR_CAL_ROUNDS_MAX; round++) {
		if (round >= CLEAR_CAL_ROUNDS_MIN &&
		    clock_now_ns() - start > CLEAR_CAL_BUDGET_NS)
			break;
		for (i = 0; i < CLEAR_NKINDS; i++) {
			if (!clear_supported(clear_kernels[i].kind))
				continue;
			t0 = clock_now_ns();
			clear_kernels[i].fn(buf, size);
			clear_fence();
			t = clock_now_ns() - t0;
			if (t < best_ns[i])
				best_ns[i] = t;
		}
	}
	(void)munmap(buf, size);

	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (best_ns[i] == UINT64_MAX)
			continue;
		clear_gbs[i] = (double)size / (double)(best_ns[i] ? best_ns[i] :
		    1);
		/* The cache NT spares is worth a little bandwidth; noise must
		 * not flip between equals, so the earlier (wider) one wins. */
		margin = best != NULL && best->nontemporal &&
		    !clear_kernels[i].nontemporal ? CLEAR_CAL_NT_MARGIN :
		    CLEAR_CAL_TIE_MARGIN;
		if (best == NULL || clear_gbs[i] * 100 >
		    clear_gbs[best->kind] * (100 + margin))
			best = &clear_kernels[i];
	}
	return (best);
}

/* Cost of what a fault's neighbourhood sees: clear 64 KiB, read it back. */
static uint64_t
clear_time_hot(const struct clear_kernel *k, char *buf)
{
	volatile uint64_t	 sink;
	const uint64_t		*q = (const uint64_t *)(void *)buf;
	uint64_t		 t0, sum = 0;
	size_t			 i;

	t0 = clock_now_ns();
	k->fn(buf, CLEAR_HOT_SIZE);
	for (i = 0; i < CLEAR_HOT_SIZE / sizeof(*q); i++)
		sum += q[i];
	sink = sum;
	(void)sink;
	return (clock_now_ns() - t0);
}

/* rep stosb unless memset is clearly (10%) faster at the hot job. */
static const struct clear_kernel *
clear_choose_hot(void)
{
	const struct clear_kernel	*rep, *mem;
	uint64_t			 trep, tmem, t;
	char				*buf;
	int				 i;

	trep = tmem = UINT64_MAX;
	mem = &clear_kernels[CLEAR_MEMSET];
	if (!clear_supported(CLEAR_REP_STOSB))
		return (mem);
	rep = &clear_kernels[CLEAR_REP_STOSB];
	buf = mmap(NULL, CLEAR_HOT_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return (rep);
	memset(buf, 0xa5, CLEAR_HOT_SIZE);
	for (i = 0; i < CLEAR_HOT_REPS; i++) {
		memset(buf, 0xa5, CLEAR_HOT_SIZE);
		if ((t = clear_time_hot(rep, buf)) < trep)
			trep = t;
		memset(buf, 0xa5, CLEAR_HOT_SIZE);
		if ((t = clear_time_hot(mem, buf)) < tmem)
			tmem = t;
	}
	(void)munmap(buf, CLEAR_HOT_SIZE);
	return (tmem * 10 < trep * 9 ? mem : rep);
}

/* Choose the kernels: named ones are checked, missing ones measured.  On
 * success why holds a one-line summary for the caller's log. */
int
clear_init(const char *bulk, const char *hot, char *why, size_t whylen)
{
	const struct clear_kernel	*b = NULL, *h = NULL;
	uint64_t			 t0;
	size_t				 used;
	int				 error, i, first;

	if (whylen > 0)
		why[0] = '\0';
	if (bulk != NULL &&
	    (error = clear_pick("bulk", bulk, 0, &b, why, whylen)) != 0)
		return (error);
	if (hot != NULL &&
	    (error = clear_pick("hot", hot, 1, &h, why, whylen)) != 0)
		return (error);

	t0 = clock_now_ns();
	memset(clear_gbs, 0, sizeof(clear_gbs));
	if (b == NULL && (b = clear_calibrate()) == NULL) {
		/* No memory to measure with: trust the widest unit. */
		for (i = 0; i < CLEAR_NKINDS && b == NULL; i++) {
			if (clear_supported(clear_kernels[i].kind))
				b = &clear_kernels[i];
		}
	}
	if (h == NULL)
		h = clear_choose_hot();
	clear_bulk_kernel = b;
	clear_hot_kernel = h;

	if (whylen == 0)
		return (0);
	snprintf(why, whylen, "bulk %s%s, hot %s%s", b->name,
	    bulk != NULL ? " (configured)" : "", h->name,
	    hot != NULL ? " (configured)" : "");
	first = 1;
	for (i = 0; i < CLEAR_NKINDS; i++) {
		if (clear_gbs[i] == 0)
			continue;
		used = strlen(why);
		snprintf(why + used, whylen - used, "%s %s %.1f",
		    first ? "; GB/s:" : ",", clear_kernels[i].name,
		    clear_gbs[i]);
		first = 0;
	}
	used = strlen(why);
	snprintf(why + used, whylen - used, "; chosen in %.1f ms",
	    (double)(clock_now_ns() - t0) / 1e6);
	return (0);
}

/* The bulk of a page: nobody reads it soon.  Needs clear_fence after. */
void
clear_bulk(void *p, size_t len)
{
	clear_bulk_kernel->fn(p, len);
}

/* What the client reads next: ordinary stores leave it in the cache. */
void
clear_hot(void *p, size_t len)
{
	clear_hot_kernel->fn(p, len);
}

/* Order streaming stores before what follows (CONTINUE, the hot clear). */
void
clear_fence(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

/* A whole range nobody is waiting on, visible once it returns. */
void
clear_range(void *p, size_t len)
{
	clear_bulk(p, len);
	clear_fence();
}

/*
 * Writes into a client's file can meet SIGBUS: the client may truncate or
 * punch the file under us, seal it, or the pool may have no page for a
 * hole.  Each such write runs behind a per-thread recovery point: the
 * handler jumps back only when the fault lies in the range this very
 * thread armed, and the write fails with -EFAULT for that region alone.
 * Any other SIGBUS is not ours: it goes to whoever handled it before us,
 * or, with the default disposition put back, happens again and kills (a
 * bug of ours still dies loudly).
 * The daemon owns its process, so a process-wide handler is its to set.
 */
struct clear_guard {
	sigjmp_buf		 jb;
	uintptr_t		 lo;
	uintptr_t		 hi;
	volatile sig_atomic_t	 armed;
};
static __thread struct clear_guard	 clear_tguard;
static pthread_once_t		 clear_guard_once = PTHREAD_ONCE_INIT;
static struct sigaction		 clear_old_bus;

static void
clear_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct clear_guard	*g = &clear_tguard;
	uintptr_t		 a = (uintptr_t)si->si_addr;

	if (g->armed && si->si_code > 0 && a >= g->lo && a < g->hi) {
		g->armed = 0;
		siglongjmp(g->jb, 1);
	}
	/* Not ours: whoever handled SIGBUS before us, or the default. */
	if ((clear_old_bus.sa_flags & SA_SIGINFO) &&
	    clear_old_bus.sa_sigaction != NULL) {
		clear_old_bus.sa_sigaction(sig, si, uc);
		return;
	}
	if (!(clear_old_bus.sa_flags & SA_SIGINFO) &&
	    clear_old_bus.sa_handler != SIG_DFL &&
	    clear_old_bus.sa_handler != SIG_IGN) {
		clear_old_bus.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL);
	if (si->si_code <= 0)
		raise(sig);	/* sent, not a fault: deliver it again */
}

static void
clear_guard_install(void)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = clear_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &clear_old_bus);
}

/*
 * Run body(arg), which writes inside [p, p+len) only.  0, or -EFAULT if a
 * write there met SIGBUS (the rest of body did not run).  Not nested.
 */
int
clear_guarded(void *p, size_t len, void (*body)(void *), void *arg)
{
	struct clear_guard	*g = &clear_tguard;
	sigset_t		 bus;

	pthread_once(&clear_guard_once, clear_guard_install);
	/* No mask saved (a syscall per clear): SIGBUS is unblocked here. */
	if (sigsetjmp(g->jb, 0) != 0) {
		sigemptyset(&bus);
		sigaddset(&bus, SIGBUS);
		pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
		clear_fence();
		return (-EFAULT);
	}
	g->lo = (uintptr_t)p;
	g->hi = (uintptr_t)p + len;
	atomic_signal_fence(memory_order_seq_cst);
	g->armed = 1;
	atomic_signal_fence(memory_order_seq_cst);
	body(arg);
	atomic_signal_fence(memory_order_seq_cst);
	g->armed = 0;
	return (0);
}

/* One clear behind a recovery point: fn over [p, p + len). */
struct clear_span {
	void	(*fn)(void *, size_t);
	void	*p;
	size_t	 len;
};

static void
clear_span_body(void *arg)
{
	struct clear_span	*s = arg;

	s->fn(s->p, s->len);
}

/* fn (a clear kernel) over [p, p + len) behind a recovery point. */
static int
clear_span_guarded(void (*fn)(void *, size_t), void *p, size_t len)
{
	struct clear_span	s = { fn, p, len };

	return (clear_guarded(p, len, clear_span_body, &s));
}

/* clear_range behind a recovery point: 0, or -EFAULT. */
int
clear_range_guarded(void *p, size_t len)
{
	return (clear_span_guarded(clear_range, p, len));
}

/* clear_bulk (streaming stores) behind a recovery point: 0, or -EFAULT. */
int
clear_bulk_guarded(void *p, size_t len)
{
	return (clear_span_guarded(clear_bulk, p, len));
}

/*
 * The faulting neighbourhood [ws, ws + wl) of page with ordinary stores,
 * the 4 KiB that faulted (at fault_off) last: written in address order,
 * the lines after it could push it out of the first-level cache before
 * the client reads it.
 */
static void
clear_window(char *page, uint64_t ws, uint64_t wl, uint64_t fault_off)
{
	uint64_t	sub = fault_off & ~(uint64_t)(CLEAR_SUBPAGE - 1);
	uint64_t	end = ws + wl;

	if (sub < ws || sub + CLEAR_SUBPAGE > end) {
		clear_hot(page + ws, wl);
		return;
	}
	if (sub > ws)
		clear_hot(page + ws, sub - ws);
	if (end > sub + CLEAR_SUBPAGE)
		clear_hot(page + sub + CLEAR_SUBPAGE,
		    end - sub - CLEAR_SUBPAGE);
	clear_hot(page + sub, CLEAR_SUBPAGE);
}

struct clear_win {
	char		*page;
	uint64_t	 ws;
	uint64_t	 wl;
	uint64_t	 fault_off;
};

static void
clear_window_body(void *arg)
{
	struct clear_win	*w = arg;

	clear_window(w->page, w->ws, w->wl, w->fault_off);
}

/* Pages clear_pages works on. */
struct clear_batch {
	char			*base;
	size_t			 page_size;
	size_t			 n;
	const uint64_t		*off;
	size_t			 hot;
	struct clear_cost	*cost;
};

static void
clear_pages_body(void *arg)
{
	struct plan_extent	 ext[8];
	struct clear_batch	*b = arg;
	uint64_t		 ws, wl, t0, t1;
	size_t			 i, e, n;
	char			*page;

	t0 = clock_now_ns();
	for (i = 0; i < b->n; i++) {
		page = b->base + i * b->page_size;
		plan_window(b->page_size, b->off[i], b->hot, &ws, &wl);
		n = plan_split(b->page_size, ws, wl, b->page_size, ext, 8);
		for (e = 0; e < n; e++) {
			clear_bulk(page + ext[e].off, ext[e].len);
			b->cost->bulk_bytes += ext[e].len;
		}
	}
	clear_fence();
	t1 = clock_now_ns();
	b->cost->bulk_ns += t1 - t0;
	for (i = 0; i < b->n; i++) {
		page = b->base + i * b->page_size;
		plan_window(b->page_size, b->off[i], b->hot, &ws, &wl);
		clear_window(page, ws, wl, b->off[i]);
		b->cost->hot_bytes += wl;
	}
	b->cost->hot_ns += clock_now_ns() - t1;
}

/*
 * Clear n adjacent pages (each within an extent) at base: the bulk of
 * every page with streaming stores, farthest from its fault (fault_off[i])
 * first, one fence, then each faulting neighbourhood (hot bytes) with
 * ordinary stores, so it is in cache when the client resumes.  0, or
 * -EFAULT if the file refused a write.
 */
int
clear_pages(char *base, size_t page_size, size_t n, const uint64_t *fault_off,
    size_t hot, struct clear_cost *cost)
{
	struct clear_batch	b = { base, page_size, n, fault_off, hot, cost };

	return (clear_guarded(base, n * page_size, clear_pages_body, &b));
}

/* A page cleared in extents by whoever takes them. */
struct clear_job {
	char			*base;
	size_t			 n;
	atomic_size_t		 next;		/* next extent to take */
	atomic_size_t		 remaining;	/* extents not yet done */
	atomic_int		 refs;		/* the last one frees */
	atomic_int		 failed;	/* a write met SIGBUS */
	atomic_uint_fast64_t	 bulk_ns;
	atomic_uint_fast64_t	 bulk_bytes;
	struct plan_extent	 ext[CLEAR_JOB_EXTENTS_MAX];
};

/* The job's sizes must fit what the planner may ask of them. */
_Static_assert(CLEAR_JOB_EXTENTS_MAX == (1ULL << 30) / PLAN_EXTENT_MIN + 2,
    "CLEAR_JOB_EXTENTS_MAX does not match PLAN_EXTENT_MIN");

void
clear_job_get(struct clear_job *job)
{
	atomic_fetch_add(&job->refs, 1);
}

void
clear_job_put(struct clear_job *job)
{
	if (atomic_fetch_sub(&job->refs, 1) == 1)
		free(job);
}

/*
 * Take and clear a job's extents until none is left (the owner, or a
 * helper).  Each extent behind its own recovery point, so that one that
 * fails still counts as done and nobody waits for it forever.
 */
void
clear_job_run(struct clear_job *job)
{
	uint64_t	t0, len;
	size_t		i;

	while ((i = atomic_fetch_add(&job->next, 1)) < job->n) {
		if (!atomic_load(&job->failed)) {
			len = job->ext[i].len;
			t0 = clock_now_ns();
			if (clear_bulk_guarded(job->base + job->ext[i].off,
			    len) != 0)
				atomic_store(&job->failed, 1);
			atomic_fetch_add(&job->bulk_ns, clock_now_ns() - t0);
			atomic_fetch_add(&job->bulk_bytes, len);
		}
		/* Our streaming stores land before anyone maps. */
		clear_fence();
		atomic_fetch_sub(&job->remaining, 1);
	}
}

/* A page cut in n pieces of whole subpages, none under the minimum. */
size_t
clear_piece(size_t page_size, int n)
{
	size_t	piece = (page_size / (size_t)(n > 0 ? n : 1) +
		    CLEAR_SUBPAGE - 1) / CLEAR_SUBPAGE * CLEAR_SUBPAGE;

	return (piece < PLAN_EXTENT_MIN ? PLAN_EXTENT_MIN : piece);
}

/*
 * Clear one page as a job others may share: cut in extents of at most
 * extent bytes, farthest from the fault first, offered to helpers through
 * offer() (which takes a reference for each one it asks and returns how
 * many), taken by us too; then the faulting neighbourhood, here, last,
 * with ordinary stores.  *helped: helpers asked.  0, -EFAULT (a write
 * met SIGBUS), -ENOMEM, -E2BIG (too many extents).
 */
int
clear_split(char *page, size_t page_size, size_t fault_off, size_t hot,
    size_t extent, int (*offer)(struct clear_job *, void *), void *arg,
    int *helped, struct clear_cost *cost)
{
	struct clear_job	*job;
	struct clear_win	 win;
	uint64_t		 ws, wl, t0;
	int			 failed, n = 0;

	*helped = 0;
	plan_window(page_size, fault_off, hot, &ws, &wl);
	if ((job = calloc(1, sizeof(*job))) == NULL)
		return (-ENOMEM);
	job->base = page;
	job->n = plan_split(page_size, ws, wl, extent, job->ext,
	    CLEAR_JOB_EXTENTS_MAX);
	if (job->n == 0 && page_size > wl) {
		free(job);
		return (-E2BIG);
	}
	atomic_init(&job->remaining, job->n);
	atomic_init(&job->refs, 1);
	if (offer != NULL && job->n > 1)
		n = offer(job, arg);
	*helped = n;
	clear_job_run(job);
	while (atomic_load(&job->remaining) != 0)
		sched_yield();
	failed = atomic_load(&job->failed);
	cost->bulk_ns += atomic_load(&job->bulk_ns);
	cost->bulk_bytes += atomic_load(&job->bulk_bytes);
	clear_job_put(job);
	if (failed)
		return (-EFAULT);
	t0 = clock_now_ns();
	win.page = page;
	win.ws = ws;
	win.wl = wl;
	win.fault_off = fault_off;
	if (clear_guarded(page + ws, wl, clear_window_body, &win) != 0)
		return (-EFAULT);
	cost->hot_ns += clock_now_ns() - t0;
	cost->hot_bytes += wl;
	return (0);
}

/*
 * Clear [base, base+len) with streaming stores as a job others may share:
 * cut in extents of about extent bytes (whole subpages), offered to
 * helpers through offer() as clear_split does, taken by us too.  No part
 * is hot: nobody waits on it.  *helped: helpers asked.  0, -EFAULT (a
 * write met SIGBUS: which part is cleared is not known), -ENOMEM.
 */
int
clear_spread(char *base, size_t len, size_t extent,
    int (*offer)(struct clear_job *, void *), void *arg, int *helped)
{
	struct clear_job	*job;
	size_t			 n, off;
	int			 failed;

	*helped = 0;
	if (extent < CLEAR_SUBPAGE)
		extent = CLEAR_SUBPAGE;
	if ((len + extent - 1) / extent > CLEAR_JOB_EXTENTS_MAX)
		extent = len / CLEAR_JOB_EXTENTS_MAX + 1;
	extent = (extent + CLEAR_SUBPAGE - 1) / CLEAR_SUBPAGE * CLEAR_SUBPAGE;
	if ((job = calloc(1, sizeof(*job))) == NULL)
		return (-ENOMEM);
	job->base = base;
	for (n = 0, off = 0; off < len; off += extent, n++) {
		job->ext[n].off = off;
		job->ext[n].len = len - off < extent ? len - off : extent;
	}
	job->n = n;
	atomic_init(&job->remaining, n);
	atomic_init(&job->refs, 1);
	if (offer != NULL && n > 1)
		*helped = offer(job, arg);
	clear_job_run(job);
	while (atomic_load(&job->remaining) != 0)
		sched_yield();
	failed = atomic_load(&job->failed);
	clear_job_put(job);
	return (failed ? -EFAULT : 0);
}
