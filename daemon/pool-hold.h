/*
 * pool-hold.h - huge pages made free for the host, held off the pools'
 * fillers until taken or for a bound (pool-hold.c, above pool.c: it
 * calls the pools, they never call it).
 */
#ifndef HPZD_POOL_HOLD_H
#define HPZD_POOL_HOLD_H

#include <stdint.h>

#include "hpz-protocol.h"
#include "pool.h"

struct client;

int		 pool_hold_ask(struct client *, const struct hpz_msg *,
		    struct pool_answer *);
void		 pool_hold_status_fill(struct hpz_msg_pool_status_reply *);
void		 pool_hold_stop(void);

#endif /* HPZD_POOL_HOLD_H */
