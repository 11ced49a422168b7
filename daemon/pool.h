/*
 * pool.h - huge pages allocated ahead (pool.c).
 */
#ifndef HPZD_POOL_H
#define HPZD_POOL_H

#include <stdint.h>

#include "hpz-protocol.h"

struct client;
struct conf;
struct pool;

enum pool_action {
	POOL_NONE,
	POOL_FILL,		/* allocate a page */
	POOL_YIELD,		/* give pages back: the host is short */
	POOL_SHRINK,		/* give pages back: over the size set */
};
enum pool_action pool_decide(int enabled, uint64_t avail, uint64_t inflight,
		    uint64_t node_free, uint64_t reserve, uint64_t pages,
		    uint64_t target, uint64_t *n);
double		 pool_uid_refill(double tokens, uint64_t cap, uint64_t dt);
int		 pool_start(const struct conf *);
void		 pool_stop(void);
void		 pool_configure(const struct conf *);
/*
 * What a hand-out comes to: a file (fd >= 0, the sender's to close once
 * sent) or an error and why.
 */
struct pool_answer {
	int		 fd;
	int		 error;		/* fd < 0: a negative errno */
	char		 text[HPZ_REPLY_TEXT];
	uint64_t	 id;		/* hand-out number, for the logs */
	uint64_t	 size;
	uint64_t	 page_size;
	int		 node;
};
int		 pool_try_take(struct client *, const struct hpz_msg *,
		    struct pool_answer *);
void		 pool_on_client(struct client *(*find)(uint64_t id),
		    void (*answer)(struct client *, uint32_t seq,
		    struct pool_answer *));
void		 pool_status_fill(struct hpz_msg_pool_status_reply *,
		    uint32_t first);
uint64_t	 pool_ready_bytes(void);
int		 pool_answer_to(uint64_t id, uint32_t seq,
		    struct pool_answer *);
struct pool	*pool_get(int psi, int node);
int		 pool_nodes(void);
int		 pool_size_index(uint64_t);

#endif /* HPZD_POOL_H */
