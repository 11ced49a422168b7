/*
 * pool.h - huge pages allocated ahead (pool.c).
 */
#ifndef HPZD_POOL_H
#define HPZD_POOL_H

#include <stdint.h>

#include "hpz-protocol.h"

struct client;
struct conf;

enum pool_action {
	POOL_NONE,
	POOL_FILL,		/* allocate a page */
	POOL_YIELD,		/* give pages back: the host is short */
	POOL_SHRINK,		/* give pages back: over the size set */
};
enum pool_action pool_decide(int enabled, uint64_t avail, uint64_t node_free,
		    uint64_t reserve, uint64_t pages, uint64_t target,
		    uint64_t *n);
double		 pool_uid_refill(double tokens, uint64_t cap, uint64_t dt);
int		 pool_start(const struct conf *);
void		 pool_stop(void);
void		 pool_configure(const struct conf *);
int		 pool_take(struct client *, const struct hpz_msg *);
void		 pool_on_client(struct client *(*find)(uint64_t id));
int		 pool_status(struct client *, const struct hpz_msg *);
uint64_t	 pool_ready_bytes(void);

#endif /* HPZD_POOL_H */
