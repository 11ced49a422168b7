/*
 * control-state.h - the control plane's slice of a region (struct region's
 * reply): the register whose reply waits for the region.  control.c alone
 * reads and writes it; it is typed here, below region.h, so that region.h
 * needs no header of the control layer.
 */
#ifndef HPZD_CONTROL_STATE_H
#define HPZD_CONTROL_STATE_H

#include <stdint.h>

struct client;

struct control_slice {
	/* Before it serves (prep.c): the register waiting for it. */
	struct client		*waiter;	/* r->client waiting for the
						   reply to seq, or NULL */
	uint32_t		 waiter_seq;
	int			 waiter_answer;	/* enum control_answer */
	/* After its faults went to the kernel (switched_cb). */
	uint64_t		 answer_cid;
	uint32_t		 answer_seq;
	int			 answer;	/* enum control_answer */
};

#endif /* HPZD_CONTROL_STATE_H */
