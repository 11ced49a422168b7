/*
 * control.h - the control socket: clients and their requests (control.c).
 */
#ifndef HPZD_CONTROL_H
#define HPZD_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hpz-protocol.h"
#include "region.h"

struct conf;

/* What a register's reply says: a new region, or one held again. */
enum control_answer {
	CONTROL_REGISTERED,
	CONTROL_REGISTERED_AGAIN,
};

extern struct clients	 control_clients;
int		 control_listen(const char *path, int *from_systemd);
void		 control_retake(void);
struct client	*control_orphan(pid_t);
void		 control_orphan_check(struct client *);
int		 control_init(int listen_fd);
void		 control_shutdown(void);
size_t		 control_nclients(void);
int		 control_message(struct client *, struct hpz_msg *);
void		 control_limits(const struct conf *);
void		 control_reload(const struct conf *);
void		 control_uid_usage(uid_t, int *clients, int *regions,
		    uint64_t *bytes, uint64_t *state_bytes);
void		 control_region_ready(struct region *);
void		 control_fill_limits(struct hpz_msg_status_reply *, uid_t);

/* control-pool.c: the pool's requests. */
struct pool_answer;
void		 control_pool_answer(struct client *, uint32_t seq,
		    struct pool_answer *);
int		 control_pool_take(struct client *, const struct hpz_msg *);
int		 control_pool_status(struct client *, const struct hpz_msg *);

#endif /* HPZD_CONTROL_H */
