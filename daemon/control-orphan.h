/*
 * control-orphan.h - regions back from systemd's fd store, held by an
 * orphan client until their process returns or exits (control-orphan.c).
 */
#ifndef HPZD_CONTROL_ORPHAN_H
#define HPZD_CONTROL_ORPHAN_H

#include <stdint.h>
#include <sys/types.h>

#include "hpz-protocol.h"

struct client	*control_orphan(pid_t);
void		 control_adopt(uint64_t id, pid_t,
		    const struct hpz_msg_register *, int *fds);

#endif /* HPZD_CONTROL_ORPHAN_H */
