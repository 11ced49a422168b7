/*
 * status.h - the status and regions replies, read from every module
 * (status.c).
 */
#ifndef HPZD_STATUS_H
#define HPZD_STATUS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hpz-protocol.h"

void		 status_fill(struct hpz_msg_status_reply *, size_t nclients,
		    uid_t asker);
void		 status_regions(struct hpz_msg_regions_reply *,
		    uint64_t after_id, uid_t uid);
void		 status_summary(char *buf, size_t len, size_t nclients);

#endif /* HPZD_STATUS_H */
