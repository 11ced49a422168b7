/*
 * control-orphan.c - regions taken back from systemd's fd store with no
 * connection yet: each registered again without a socket, and held by an
 * orphan client of its process until the process connects again (and
 * registers them again) or exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "hpz-protocol.h"

#include "bucket.h"
#include "cctx.h"
#include "control-client.h"
#include "control-orphan.h"
#include "control.h"
#include "fdstore.h"
#include "globals.h"
#include "log.h"
#include "prep.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"

/* An orphan's process exited: its regions go. */
static void
control_orphan_cb(int fd, short events, void *arg)
{
	struct client	*c = arg;

	log_info("pid %d exited while its regions waited for it",
	    (int)c->pid);
	control_drop(c, NULL);
}

/*
 * The holder of regions taken back from the fd store for process pid,
 * until it connects again (and registers them again) or exits.
 */
struct client *
control_orphan(pid_t pid)
{
	struct client	*c;
	char		 path[64];
	struct stat	 st;

	TAILQ_FOREACH(c, &control_clients, entry)
		if (c->orphan && c->pid == pid)
			return (c);
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) == -1 || (c = calloc(1, sizeof(*c))) == NULL)
		return (NULL);
	c->id = control_next_id++;
	c->fd = -1;
	c->orphan = 1;
	c->pid = pid;
	c->uid = st.st_uid;
	c->gid = st.st_gid;
	c->budget = bucket_new(scrub_budget_gbs(1));
	TAILQ_INIT(&c->regions);
	c->pidfd = fdstore_pidfd(pid);
	c->ctx = cctx_get(c->pid, c->uid);
	c->ev = c->pidfd < 0 ? NULL : event_new(hpzd_base, c->pidfd,
	    EV_READ | EV_PERSIST, control_orphan_cb, c);
	if (c->ev == NULL || event_add(c->ev, NULL) == -1) {
		if (c->ev != NULL)
			event_free(c->ev);
		if (c->pidfd >= 0)
			close(c->pidfd);
		bucket_free(c->budget);
		cctx_put(c->ctx);
		free(c);
		return (NULL);
	}
	TAILQ_INSERT_TAIL(&control_clients, c, entry);
	return (c);
}

/*
 * A region systemd's fd store kept for process pid, registered again
 * without a socket: its orphan client holds it until the process
 * connects again or exits.
 */
void
control_adopt(uint64_t id, pid_t pid, const struct hpz_msg_register *m,
    int *fds)
{
	struct client	*c;
	struct region	*r;
	char		 why[HPZ_REPLY_TEXT];
	int		 error;

	if ((c = control_orphan(pid)) == NULL) {
		fdstore_release(id, fds, "cannot watch its client");
		return;
	}
	error = region_create(c, m, fds[0], fds[1], fds[2], &r, why,
	    sizeof(why));
	if (error != 0) {
		control_orphan_check(c);
		fdstore_release(id, fds, why);
		return;
	}
	r->pidfd = fds[3];
	region_set_id(r, id);
	r->stored = 1;
	/* Busy pages and garbage are looked at after READY=1 (prep.c). */
	(void)prep_region(r, control_region_ready);
}
