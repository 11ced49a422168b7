/*
 * control-limits.c - what the control plane holds under the settings: the
 * [limits] on each uid (its connections, regions, bytes, page state), a
 * uid's usage, and SIGHUP's settings reaching every client and region.
 */
#include <sys/resource.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
static uint64_t		 control_uid_bytes;	/* in force: derived if 0 */
static uint64_t		 control_uid_state_bytes;
static uint64_t		 control_map_max;	/* map_bytes in force */

#define GIB_UP(b)	(((b) + (1ULL << 30) - 1) >> 30)

/*
 * The address space a process of ours has: the top of the stack's
 * mapping rounded up to a power of two (2^47 on x86-64 with four-level
 * page tables, and with five levels too, since mmap stays below 2^47
 * unless asked), or RLIMIT_AS if that is lower.  128 TiB if unknown.
 */
static uint64_t
control_address_space(void)
{
	struct rlimit	 rl;
	FILE		*f;
	char		 line[512];
	uint64_t	 top = 0, lo, hi, as = 1ULL << 47;

	if ((f = fopen("/proc/self/maps", "re")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if (strstr(line, "[stack]") != NULL &&
			    sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2)
				top = hi;
		fclose(f);
	}
	if (top != 0) {
		as = 1;
		while (as < top && as < (1ULL << 62))
			as <<= 1;
	}
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)rl.rlim_cur < as)
		as = (uint64_t)rl.rlim_cur;
	return (as);
}

/*
 * [limits] map_bytes = 0: half our address space, the other half kept for
 * what the daemon itself maps (its threads' stacks, its heap, the pool's
 * files, a restart's regions).
 */
uint64_t
control_map_derived(void)
{
	return (control_address_space() / 2);
}

/* The limits, from the settings (0: unlimited). */
void
control_limits(const struct conf *c)
{
	control_uid_clients = c->uid_clients;
	control_uid_regions = c->uid_regions;
	control_map_max = c->map_bytes > 0 ? c->map_bytes :
	    control_map_derived();
	/* A uid's share: a quarter of the whole unless set. */
	control_uid_bytes = c->uid_bytes > 0 ? c->uid_bytes :
	    control_map_max / 4;
	control_uid_state_bytes = c->uid_state_bytes;
	region_limits(c->region_pages);
	log_info("limits: clients' files mapped at most %llu GiB in all "
	    "([limits] map_bytes%s), %llu GiB a uid ([limits] bytes%s)",
	    (unsigned long long)(control_map_max >> 30),
	    c->map_bytes > 0 ? "" : ": half the address space",
	    (unsigned long long)(control_uid_bytes >> 30),
	    c->uid_bytes > 0 ? "" : ": a quarter of map_bytes");
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
		*state_bytes += c->state_bytes;
	}
	/* Registered, and on the way in (a probe) or out (a teardown). */
	*bytes = cctx_mapped(uid, 0);
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
	s->limit_map_bytes = control_map_max;
	s->map_bytes = cctx_mapped(0, 1);
	cctx_thread_figures(&s->limit_uid_contexts, &s->limit_threads,
	    &s->ctx_threads);
	s->limit_region_forks = (uint64_t)uffd_forks_limit();
	control_uid_usage(uid, &nc, &nr, &bytes, &sbytes);
	s->uid_clients = (uint64_t)nc;
	s->uid_regions = (uint64_t)nr;
	s->uid_bytes = bytes;
	s->uid_state_bytes = sbytes;
}

/*
 * May uid register one more region of npages pages?  0, or -EDQUOT with
 * the limit and its setting in why.  (Its bytes were charged before its
 * probe mapped them: control_map_take.)
 */
int
control_check_quota(struct client *c, uint64_t npages, char *why,
    size_t whylen)
{
	uint64_t	bytes, sbytes, need = HPZ_STATE_SIZE(npages);
	int		nc, nr;

	control_uid_usage(c->uid, &nc, &nr, &bytes, &sbytes);
	(void)bytes;
	if (control_uid_regions > 0 && nr >= control_uid_regions) {
		snprintf(why, whylen, "uid %u has %d regions, the most it may "
		    "have ([limits] regions in hpzerod.conf)",
		    (unsigned)c->uid, nr);
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

/*
 * Charge len bytes of address space to x (the context of c's process)
 * before a probe maps a region of c's: 0, or -EDQUOT with the limit in
 * why, its uid's share ([limits] bytes) or all uids' ([limits]
 * map_bytes).  What is charged stays so until the munmap is done, on
 * x's thread: control_map_give back then, on the loop.
 */
int
control_map_take(struct client *c, struct cctx *x, uint64_t len, char *why,
    size_t whylen)
{
	uint64_t	mine = cctx_mapped(c->uid, 0), all = cctx_mapped(0, 1);

	if (mine > control_uid_bytes || len > control_uid_bytes - mine) {
		snprintf(why, whylen, "uid %u would have %llu GiB of files "
		    "mapped by hpzerod (registered or being let go), over "
		    "its %llu GiB ([limits] bytes in hpzerod.conf)",
		    (unsigned)c->uid, (unsigned long long)GIB_UP(mine + len),
		    (unsigned long long)(control_uid_bytes >> 30));
		return (-EDQUOT);
	}
	if (all > control_map_max || len > control_map_max - all) {
		snprintf(why, whylen, "hpzerod would map %llu GiB of its "
		    "clients' files, over its %llu GiB for all users "
		    "([limits] map_bytes in hpzerod.conf)",
		    (unsigned long long)GIB_UP(all + len),
		    (unsigned long long)(control_map_max >> 30));
		return (-EDQUOT);
	}
	cctx_mapped_add(x, (int64_t)len);
	return (0);
}

/* The munmap of what control_map_take charged is done (main thread). */
void
control_map_give(struct cctx *x, uint64_t len)
{
	cctx_mapped_add(x, -(int64_t)len);
}
