/*
 * clear.c - clear kernels, the choice between them, and the order in which
 * a huge page is cleared: the bulk with non-temporal stores, then the
 * faulting subpage's neighbourhood with ordinary stores so that it is
 * cache-hot when the client resumes.  Self-contained: no log, no stats, so
 * that client/hpz-bench can link clear.o alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "hpzerod.h"

#define CLEAR_CAL_SIZE		(64UL << 20)	/* past the LLC: NT pays */
#define CLEAR_CAL_ROUNDS_MIN	3
#define CLEAR_CAL_ROUNDS_MAX	32
#define CLEAR_CAL_BUDGET_NS	40000000ULL	/* no round starts after */
#define CLEAR_CAL_NT_MARGIN	25	/* %: ordinary stores must beat NT by */
#define CLEAR_CAL_TIE_MARGIN	2	/* %: a later kernel must beat by */
#define CLEAR_HOT_SIZE		(64UL << 10)
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

/* Monotonic nanoseconds, for the calibration and its report. */
static uint64_t
clear_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
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
	start = clear_now_ns();
	for (round = 0; round < CLEAR_CAL_ROUNDS_MAX; round++) {
		if (round >= CLEAR_CAL_ROUNDS_MIN &&
		    clear_now_ns() - start > CLEAR_CAL_BUDGET_NS)
			break;
		for (i = 0; i < CLEAR_NKINDS; i++) {
			if (!clear_supported(clear_kernels[i].kind))
				continue;
			t0 = clear_now_ns();
			clear_kernels[i].fn(buf, size);
			clear_fence();
			t = clear_now_ns() - t0;
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

	t0 = clear_now_ns();
	k->fn(buf, CLEAR_HOT_SIZE);
	for (i = 0; i < CLEAR_HOT_SIZE / sizeof(*q); i++)
		sum += q[i];
	sink = sum;
	(void)sink;
	return (clear_now_ns() - t0);
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

	t0 = clear_now_ns();
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
	    (double)(clear_now_ns() - t0) / 1e6);
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

/* Clear a page so that the fault's neighbourhood is written last, with
 * ordinary stores, and is still in the cache when the client resumes. */
void
clear_page(void *page, size_t page_size, size_t fault_off, size_t hot_size)
{
	char	*c = page;
	size_t	 start, len, end;

	plan_window(page_size, fault_off, hot_size, &start, &len);
	end = start + len;
	if (start != 0 || end != page_size) {
		/* The piece farther from the fault goes first. */
		if (start > page_size - end) {
			clear_bulk(c, start);
			clear_bulk(c + end, page_size - end);
		} else {
			clear_bulk(c + end, page_size - end);
			clear_bulk(c, start);
		}
		clear_fence();
	}
	clear_hot(c + start, len);
}
