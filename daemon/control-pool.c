/*
 * control-pool.c - the pool's requests on the control socket: a hand-out
 * (HPZ_MSG_POOL_TAKE), answered at once or once its pages land, and the
 * pools' status (HPZ_MSG_POOL_STATUS), and pages made free for the host
 * (HPZ_MSG_RESERVE).  pool.c decides what a request
 * comes to; the replies are sent here.
 */
#include <string.h>
#include <unistd.h>

#include "hpz-protocol.h"

#include "control-pool.h"
#include "pool-hold.h"
#include "pool.h"
#include "region.h"

/*
 * Send the answer to a hand-out: the file, or why not.  The file is ours
 * no more, whatever happened: it must never be handed again.  -1 if the
 * client cannot take the reply.
 */
static int
control_pool_send(struct client *c, uint32_t seq, struct pool_answer *a)
{
	struct hpz_msg_pool_file	file;
	struct hpz_msg_reply		rep;
	ssize_t				n;

	if (a->fd < 0) {
		proto_init(&rep, HPZ_MSG_REPLY, sizeof(rep), seq);
		rep.error = a->error;
		memcpy(rep.text, a->text, sizeof(rep.text));
		if (proto_send(c->fd, &rep, sizeof(rep), NULL, 0) !=
		    sizeof(rep))
			return (-1);
		return (0);
	}
	proto_init(&file, HPZ_MSG_POOL_FILE, sizeof(file), seq);
	file.size = a->size;
	file.page_size = a->page_size;
	file.node = a->node;
	file.id = a->id;
	n = proto_send(c->fd, &file, sizeof(file), &a->fd, 1);
	close(a->fd);
	a->fd = -1;
	return (n == (ssize_t)sizeof(file) ? 0 : -1);
}

/* A hand-out that waited for its pages is answered (pool.c). */
void
control_pool_answer(struct client *c, uint32_t seq, struct pool_answer *a)
{
	(void)control_pool_send(c, seq, a);
}

/* HPZ_MSG_POOL_TAKE.  -1 when the client cannot take a reply. */
int
control_pool_take(struct client *c, const struct hpz_msg *m)
{
	struct pool_answer	a;

	if (pool_try_take(c, m, &a) == 0)
		return (0);	/* answered once its pages land */
	return (control_pool_send(c, m->u.hdr.seq, &a));
}

/*
 * HPZ_MSG_RESERVE: pages made free for the host (pool-hold.c), answered
 * once they are.  -1 when the client cannot take a reply.
 */
int
control_pool_reserve(struct client *c, const struct hpz_msg *m)
{
	struct pool_answer	a;

	if (pool_hold_ask(c, m, &a) == 0)
		return (0);	/* answered once its pages are free */
	return (control_pool_send(c, m->u.hdr.seq, &a));
}

/* HPZ_MSG_POOL_STATUS: the pools from index first on. */
int
control_pool_status(struct client *c, const struct hpz_msg *m)
{
	struct hpz_msg_pool_status_reply	rep;

	proto_init(&rep, HPZ_MSG_POOL_STATUS_REPLY, sizeof(rep),
	    m->u.hdr.seq);
	pool_status_fill(&rep, m->u.pool_status.first);
	pool_hold_status_fill(&rep);
	if (proto_send(c->fd, &rep, sizeof(rep), NULL, 0) != sizeof(rep))
		return (-1);
	return (0);
}
