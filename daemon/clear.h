/*
 * clear.h - writing zeros over huge pages: the kernels and the choice
 * between them, the order in which a fault's pages are cleared (the bulk
 * with streaming stores farthest from the fault first, the faulting
 * neighbourhood last with ordinary stores so it is in cache when the
 * client resumes), a page shared out to helpers in extents, and writes
 * into a client's file that fail instead of killing us with SIGBUS.
 *
 * Needs nothing else of the daemon (no log, no stats, no workers: helpers
 * come through a callback), so that client/hpz-bench links it alone.
 */
#ifndef HPZ_CLEAR_H
#define HPZ_CLEAR_H

#include <stddef.h>
#include <stdint.h>

enum clear_kind {
	CLEAR_AVX512_NT,	/* "avx512-nt": vmovntdq zmm */
	CLEAR_AVX2_NT,		/* "avx2-nt": vmovntdq ymm */
	CLEAR_SSE2_NT,		/* "sse2-nt": movntdq xmm */
	CLEAR_REP_STOSB,	/* "rep-stosb" */
	CLEAR_MEMSET,		/* "memset" */
	CLEAR_NKINDS
};
struct clear_kernel {
	const char	*name;
	enum clear_kind	 kind;
	int		 nontemporal;
	/* Any alignment and length; no fence. */
	void		(*fn)(void *p, size_t len);
};
extern const struct clear_kernel *clear_bulk_kernel;	/* the bulk */
extern const struct clear_kernel *clear_hot_kernel;	/* ordinary stores */

/* What a clear spent, for the caller's counters. */
struct clear_cost {
	uint64_t	bulk_bytes;
	uint64_t	bulk_ns;
	uint64_t	hot_bytes;
	uint64_t	hot_ns;
};

/* A page cleared in extents by its fault's worker and helpers. */
struct clear_job;
/* Extents a 1 GiB page can need at the smallest extent (256 KiB). */
#define CLEAR_JOB_EXTENTS_MAX	((1ULL << 30) / (256ULL << 10) + 2)

int		 clear_supported(enum clear_kind);
const struct clear_kernel *clear_kernel(enum clear_kind);
const struct clear_kernel *clear_kernel_by_name(const char *);
int		 clear_init(const char *bulk, const char *hot, char *why,
		    size_t whylen);
double		 clear_calibrated_gbs(enum clear_kind);
void		 clear_bulk(void *p, size_t len);
void		 clear_hot(void *p, size_t len);
void		 clear_fence(void);
void		 clear_range(void *p, size_t len);
int		 clear_guarded(void *p, size_t len, void (*body)(void *),
		    void *arg);
int		 clear_range_guarded(void *p, size_t len);
int		 clear_bulk_guarded(void *p, size_t len);
int		 clear_pages(char *base, size_t page_size, size_t n,
		    const uint64_t *fault_off, size_t hot,
		    struct clear_cost *);
int		 clear_split(char *page, size_t page_size, size_t fault_off,
		    size_t hot, size_t extent,
		    int (*offer)(struct clear_job *, void *), void *arg,
		    int *helped, struct clear_cost *);
int		 clear_spread(char *base, size_t len, size_t extent,
		    int (*offer)(struct clear_job *, void *), void *arg,
		    int *helped);
size_t		 clear_piece(size_t page_size, int n);
void		 clear_job_get(struct clear_job *);
void		 clear_job_run(struct clear_job *);
void		 clear_job_put(struct clear_job *);

#endif /* HPZ_CLEAR_H */
