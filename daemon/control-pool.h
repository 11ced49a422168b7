/*
 * control-pool.h - the pool's requests on the control socket
 * (control-pool.c).
 */
#ifndef HPZD_CONTROL_POOL_H
#define HPZD_CONTROL_POOL_H

#include <stdint.h>

#include "hpz-protocol.h"
#include "region.h"

struct pool_answer;
void		 control_pool_answer(struct client *, uint32_t seq,
		    struct pool_answer *);
int		 control_pool_take(struct client *, const struct hpz_msg *);
int		 control_pool_reserve(struct client *, const struct hpz_msg *);
int		 control_pool_status(struct client *, const struct hpz_msg *);

#endif /* HPZD_CONTROL_POOL_H */
