/*
 * control.h - a client's requests: validate, dispatch, and the register,
 * unregister, reset, status, policy and scrub replies (control.c).
 */
#ifndef HPZD_CONTROL_H
#define HPZD_CONTROL_H

#include "hpz-protocol.h"
#include "region.h"

/* What a register's reply says: a new region, or one held again. */
enum control_answer {
	CONTROL_REGISTERED,
	CONTROL_REGISTERED_AGAIN,
};

int		 control_message(struct client *, struct hpz_msg *);
void		 control_region_ready(struct region *);

#endif /* HPZD_CONTROL_H */
