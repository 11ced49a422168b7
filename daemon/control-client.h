/*
 * control-client.h - a client of the control socket below its requests:
 * the list, pause and resume, replies, closes, drop (control-client.c).
 */
#ifndef HPZD_CONTROL_CLIENT_H
#define HPZD_CONTROL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "region.h"

/*
 * A client is not read while its context has this many calls queued
 * (closes of the fds its messages bring, mostly: one stuck on a FUSE
 * server of its own holds the rest, each an fd of ours), and read again
 * once it is down to half.  One message brings at most 253 more.
 */
#define CONTROL_BACKLOG	256

extern struct clients	 control_clients;
extern uint64_t		 control_next_id;
extern size_t		 control_count;	/* connections, no orphan */
extern struct client	*control_current;	/* being read (its fds) */
size_t		 control_nclients(void);
int		 control_send_reply(int fd, uint32_t seq, int error,
		    uint64_t id, const char *text);
void		 control_pause(struct client *);
void		 control_resume(struct client *);
struct client	*control_find(uint64_t);
struct client	*control_connected(uint64_t);
void		 control_close_fd(int);
struct cctx;
void		 control_close_on_ctx(struct cctx *, int, const char *);
void		 control_drop(struct client *, const char *);
void		 control_orphan_check(struct client *);

#endif /* HPZD_CONTROL_CLIENT_H */
