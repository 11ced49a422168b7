/*
 * control-limits.c - what the control plane holds under the settings: the
 * [limits] on each uid (its connections, regions, bytes, page state), a
 * uid's usage, and SIGHUP's settings reaching every client and region.
 */
#include <errno.h>
#include <stdio.h>

#include "hpz-protocol.h"
#include "hpz-state.h"

#include "bucket.h"
#include "cctx.h"
#include "conf.h"
#include "control-client.h"
#include "control-limits.h"
#include "globals.h"
#include "intercept.h"
#include "log.h"
#include "pool.h"
#include "region-check.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "uffd.h"

/* [limits] in force; 0: unlimited (region_pages lives in region.c). */
static int		 control_uid_clients;
static int		 control_uid_regions;
static uint64_t		 control_uid_bytes;
static uint64_t		 control_uid_state_bytes;

/* The limits, from the settings (0: unlimited). */
void
control_limits(const struct conf *c)
{
	control_uid_clients = c->uid_clients;
	control_uid_regions = c->uid_regions;
	control_uid_bytes = c->uid_bytes;
	control_uid_state_bytes = c->uid_state_bytes;
	region_limits(c->region_pages);
	cctx_limits(c->uid_stuck_contexts, c->uid_contexts,
	    c->ctx_threads > 0 ? c->ctx_threads : cctx_threads_derived());
	uffd_limits(c->region_forks);
}

/*
 * SIGHUP's settings (main thread): each module takes its own, and here
 * they reach what the control plane holds: every client's background
 * budget, every region's garbage when scrubbing comes back on, every
 * region's interception under a new [policy].
 */
void
control_reload(const struct conf *c)
{
	struct client	*cl;
	struct region	*r;
	int		 scrub_on;

	scrub_on = scrub_configure(c);
	TAILQ_FOREACH(cl, &control_clients, entry)
		if (cl->budget != NULL)
			bucket_set(cl->budget, c->client_gbs);
	/* Garbage left while scrubbing was off: go over it now. */
	if (scrub_on)
		TAILQ_FOREACH(r, &region_all, all)
			scrub_add(r, 0);
	control_limits(c);
	pool_configure(c);
	intercept_configure(c);
	TAILQ_FOREACH(r, &region_all, all)
		intercept_reconfigure(r);
}

/*
 * What one uid holds: connections, regions, bytes registered, bytes of
 * page state (each client keeps its sums, region.c).  Regions taken back
 * from the fd store count once, with the orphan that holds them until
 * their process registers them again.
 */
void
control_uid_usage(uid_t uid, int *clients, int *regions, uint64_t *bytes,
    uint64_t *state_bytes)
{
	struct client	*c;

	*clients = *regions = 0;
	*bytes = *state_bytes = 0;
	TAILQ_FOREACH(c, &control_clients, entry) {
		if (c->uid != uid)
			continue;
		if (!c->orphan)		/* not a connection */
			(*clients)++;
		*regions += (int)c->nregions;
		*bytes += c->bytes;
		*state_bytes += c->state_bytes;
	}
}

/* The limits in force and what uid holds, for a status reply. */
void
control_fill_limits(struct hpz_msg_status_reply *s, uid_t uid)
{
	uint64_t	bytes, sbytes;
	int		nc, nr;

	s->limit_uid_clients = (uint64_t)control_uid_clients;
	s->limit_uid_regions = (uint64_t)control_uid_regions;
	s->limit_uid_bytes = control_uid_bytes;
	s->limit_uid_state_bytes = control_uid_state_bytes;
	s->limit_region_pages = region_limit_pages();
	s->limit_conn_regions = HPZD_REGIONS_PER_CLIENT;
	s->limit_region_forks = (uint64_t)uffd_forks_limit();
	control_uid_usage(uid, &nc, &nr, &bytes, &sbytes);
	s->uid_clients = (uint64_t)nc;
	s->uid_regions = (uint64_t)nr;
	s->uid_bytes = bytes;
	s->uid_state_bytes = sbytes;
}

/*
 * May uid register one more region of len bytes and npages pages?  0, or
 * -EDQUOT with the limit and its setting in why.
 */
int
control_check_quota(struct client *c, uint64_t len, uint64_t npages,
    char *why, size_t whylen)
{
	uint64_t	bytes, sbytes, need = HPZ_STATE_SIZE(npages);
	int		nc, nr;

	control_uid_usage(c->uid, &nc, &nr, &bytes, &sbytes);
	if (control_uid_regions > 0 && nr >= control_uid_regions) {
		snprintf(why, whylen, "uid %u has %d regions, the most it may "
		    "have ([limits] regions in hpzerod.conf)",
		    (unsigned)c->uid, nr);
		return (-EDQUOT);
	}
	if (control_uid_bytes > 0 && (bytes > control_uid_bytes ||
	    len > control_uid_bytes - bytes)) {
		snprintf(why, whylen, "uid %u would have %llu bytes "
		    "registered, over the limit of %llu ([limits] bytes in "
		    "hpzerod.conf)",
		    (unsigned)c->uid, (unsigned long long)(bytes + len),
		    (unsigned long long)control_uid_bytes);
		return (-EDQUOT);
	}
	if (control_uid_state_bytes > 0 && (sbytes > control_uid_state_bytes ||
	    need > control_uid_state_bytes - sbytes)) {
		snprintf(why, whylen, "uid %u would have %llu bytes of page "
		    "state (a byte a page), over the limit of %llu "
		    "([limits] state_bytes in hpzerod.conf)", (unsigned)c->uid,
		    (unsigned long long)(sbytes + need),
		    (unsigned long long)control_uid_state_bytes);
		return (-EDQUOT);
	}
	return (0);
}

/*
 * May uid (of process pid, connecting) have one more connection?  0, or
 * -EDQUOT with the limit and its setting in why (and in the log).
 */
int
control_check_clients(pid_t pid, uid_t uid, char *why, size_t whylen)
{
	if (control_uid_clients > 0) {
		int		nc, nr;
		uint64_t	nb, ns;

		control_uid_usage(uid, &nc, &nr, &nb, &ns);
		if (nc >= control_uid_clients) {
			log_warnx("pid %d uid %u: uid has %d connections, the "
			    "most allowed ([limits] clients in hpzerod.conf); "
			    "refused", (int)pid, (unsigned)uid, nc);
			snprintf(why, whylen, "uid %u has %d connections "
			    "to hpzerod, the most allowed ([limits] clients in "
			    "hpzerod.conf)", (unsigned)uid, nc);
			return (-EDQUOT);
		}
	}
	return (0);
}
