/*
 * bucket.h - a token bucket: bytes a second, with a short burst, shared
 * by reference.  The background budgets (scrub.c, pool.c) are buckets:
 * one for all the daemon's background work, one a client (control plane).
 */
#ifndef HPZD_BUCKET_H
#define HPZD_BUCKET_H

#include <pthread.h>
#include <stdint.h>

struct bucket;

/*
 * Held around reading who owns a bucket and taking a reference to it
 * (bucket_hold); bucket_free takes it too, so the last reference cannot
 * go while another thread is between the two.
 */
extern pthread_mutex_t	 bucket_refs_lock;

struct bucket	*bucket_new(double gbs);
struct bucket	*bucket_hold(struct bucket *);
void		 bucket_free(struct bucket *);
void		 bucket_set(struct bucket *, double gbs);
double		 bucket_rate(struct bucket *);
uint64_t	 bucket_take(struct bucket *, uint64_t bytes, uint64_t now);

#endif /* HPZD_BUCKET_H */
