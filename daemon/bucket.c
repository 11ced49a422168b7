/*
 * bucket.c - the token bucket behind the background budgets: a rate in
 * GB/s (1 GB/s is a byte a nanosecond), tokens that may go into debt so
 * that a big request waits in proportion to its size, and a reference
 * count, since a background thread may still hold a client's bucket when
 * the client goes (scrub.c's scrub_client_budget).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "bucket.h"

#define BUCKET_BURST_NS	10000000.0	/* a budget may run 10 ms ahead */

struct bucket {
	pthread_mutex_t	 lock;
	int		 refs;		/* under bucket_refs_lock */
	double		 rate;		/* bytes per ns, 0: unlimited */
	double		 tokens;	/* bytes that may go now; < 0: debt */
	uint64_t	 last;		/* ns of the last refill */
};

pthread_mutex_t		 bucket_refs_lock = PTHREAD_MUTEX_INITIALIZER;

/* A token bucket of gbs GB/s (0: unlimited). */
struct bucket *
bucket_new(double gbs)
{
	struct bucket	*b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return (NULL);
	pthread_mutex_init(&b->lock, NULL);
	b->refs = 1;
	bucket_set(b, gbs);
	return (b);
}

/* One more reference to b (NULL: none); the caller holds bucket_refs_lock. */
struct bucket *
bucket_hold(struct bucket *b)
{
	if (b != NULL)
		b->refs++;
	return (b);
}

/*
 * Let go of a bucket: the last reference frees it.  Always under
 * bucket_refs_lock, even for NULL: a client freed after this cannot be
 * the one a background thread is reading the budget of
 * (scrub_client_budget).
 */
void
bucket_free(struct bucket *b)
{
	int	last;

	pthread_mutex_lock(&bucket_refs_lock);
	last = b != NULL && --b->refs == 0;
	pthread_mutex_unlock(&bucket_refs_lock);
	if (!last)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void
bucket_set(struct bucket *b, double gbs)
{
	pthread_mutex_lock(&b->lock);
	b->rate = gbs > 0 ? gbs : 0;	/* 1 GB/s is 1 byte per ns */
	b->tokens = 0;
	b->last = 0;
	pthread_mutex_unlock(&b->lock);
}

/* The rate in GB/s; 0 for unlimited or no bucket. */
double
bucket_rate(struct bucket *b)
{
	double	gbs;

	if (b == NULL)
		return (0);
	pthread_mutex_lock(&b->lock);
	gbs = b->rate;
	pthread_mutex_unlock(&b->lock);
	return (gbs);
}

/*
 * Spend bytes at time now (ns).  Returns how long the caller must wait
 * before using them: tokens may go into debt, so a big request waits in
 * proportion to its size and the average rate holds.
 */
uint64_t
bucket_take(struct bucket *b, uint64_t bytes, uint64_t now)
{
	double	wait;

	if (b == NULL)
		return (0);
	pthread_mutex_lock(&b->lock);
	if (b->rate == 0) {
		pthread_mutex_unlock(&b->lock);
		return (0);
	}
	if (b->last != 0 && now > b->last)
		b->tokens += (double)(now - b->last) * b->rate;
	if (b->tokens > b->rate * BUCKET_BURST_NS)
		b->tokens = b->rate * BUCKET_BURST_NS;
	b->last = now;
	b->tokens -= (double)bytes;
	wait = b->tokens < 0 ? -b->tokens / b->rate : 0;
	pthread_mutex_unlock(&b->lock);
	return ((uint64_t)wait);
}
