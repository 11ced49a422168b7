/*
 * control-limits.h - the [limits] on each uid, its usage, and SIGHUP's
 * settings for every client and region (control-limits.c).
 */
#ifndef HPZD_CONTROL_LIMITS_H
#define HPZD_CONTROL_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hpz-protocol.h"
#include "region.h"

struct cctx;
struct conf;

void		 control_limits(const struct conf *);
void		 control_reload(const struct conf *);
void		 control_uid_usage(uid_t, int *clients, int *regions,
		    uint64_t *bytes, uint64_t *state_bytes);
void		 control_fill_limits(struct hpz_msg_status_reply *, uid_t);
int		 control_check_quota(struct client *, uint64_t npages,
		    char *why, size_t whylen);
uint64_t	 control_map_derived(void);
int		 control_map_take(struct client *, struct cctx *, uint64_t,
		    char *, size_t);
void		 control_map_give(struct cctx *, uint64_t);
int		 control_check_clients(pid_t, uid_t, char *why,
		    size_t whylen);

#endif /* HPZD_CONTROL_LIMITS_H */
