/*
 * status.c - the status and regions replies, and sd_notify's line: what
 * the control plane reads from every module's counters and state (main
 * thread).
 */
#include <stdio.h>
#include <string.h>

#include "hpz.h"
#include "hpz-protocol.h"

#include "cctx.h"
#include "clear.h"
#include "conf.h"
#include "cost.h"
#include "globals.h"
#include "intercept.h"
#include "reap.h"
#include "region-life.h"
#include "region.h"
#include "scrub.h"
#include "stats.h"
#include "status.h"
#include "worker.h"

/*
 * What every region adds up to (main thread): how many, their bytes, and
 * their garbage pages when pending is not NULL.
 */
static void
status_sums(uint64_t *n, uint64_t *bytes, uint64_t *pending)
{
	struct region	*r;

	*n = *bytes = 0;
	if (pending != NULL)
		*pending = 0;
	TAILQ_FOREACH(r, &region_all, all) {
		(*n)++;
		*bytes += r->len;
		if (pending != NULL)
			*pending += scrub_region_pending(r);
	}
}

/*
 * Fill a status reply (main thread: it walks the region list); nclients
 * is the control plane's count, asker the uid that asks (pids of others' stuck
 * contexts are not shown to it).
 */
void
status_fill(struct hpz_msg_status_reply *s, size_t nclients, uid_t asker)
{
	struct region	*r;
	struct cost	 c;
	struct cctx_report cr;
	int		 i, intercept, aside;

#define STATS_COPY(name, kind, unit, prom, label, help) \
	s->name = atomic_load(&stats.name);
	HPZ_COUNTERS_ALL(STATS_COPY, STATS_NONE)
#undef STATS_COPY
	/* The V lines of hpz-counters.h, and what is not a plain number. */
	snprintf(s->version, sizeof(s->version), "%s", PACKAGE_VERSION);
	s->uptime_ms = (stats_now_ns() - hpzd_start_ns) / 1000000;
	s->clients = nclients;
	status_sums(&s->regions, &s->bytes_registered, &s->bg_pages_pending);
	s->workers = (uint64_t)worker_count();
	snprintf(s->clear_kernel, sizeof(s->clear_kernel), "%s",
	    clear_bulk_kernel->name);
	snprintf(s->hot_kernel, sizeof(s->hot_kernel), "%s",
	    clear_hot_kernel->name);
	s->clear_mbps = (uint64_t)(clear_calibrated_gbs(
	    clear_bulk_kernel->kind) * 1000);
	s->hot_size = worker_config.hot_size;
	s->extent_max = worker_extent_max(&worker_config);
	for (i = 0; i < STATS_HIST_BUCKETS && i < HPZ_LATENCY_BUCKETS; i++)
		s->latency_hist[i] = atomic_load(&stats.hist[i]);
	s->bg_budget_mbps = (uint64_t)(scrub_budget_gbs(0) * 1000);
	s->bg_client_budget_mbps = (uint64_t)(scrub_budget_gbs(1) * 1000);
	s->fds_closing = reap_pending();
	cost_get(&c);
	s->cost_rt_ns = c.rt_ns;
	s->cost_rt_huge = (uint32_t)c.huge;
	s->cost_kzero_ns = c.kzero_ns;
	s->cost_ktouch_ns = c.ktouch_ns;
	s->cost_clear_ns = c.clear_ns;
	s->cost_served_ns = cost_served_2m();
	intercept_policies(&intercept, &aside);
	s->policy = (intercept == INTERCEPT_ALWAYS ?
	    HPZ_POLICY_INTERCEPT_ALWAYS : 0) |
	    (aside == ASIDE_NEVER ? HPZ_POLICY_ASIDE_NEVER : 0) |
	    (aside == ASIDE_ALWAYS ? HPZ_POLICY_ASIDE_ALWAYS : 0);
	TAILQ_FOREACH(r, &region_all, all)
		if (atomic_load(&r->intercepting))
			s->regions_intercepting++;
	cctx_report(&cr);
	s->contexts = cr.contexts;
	s->contexts_stuck = cr.stuck;
	s->context_stuck_ms = cr.longest_ms;
	/* Another user's pid is not the asker's to know: root sees all. */
	s->context_stuck_pid = asker == 0 || asker == cr.longest_uid ?
	    (uint64_t)(int64_t)cr.longest_pid : 0;
	snprintf(s->context_stuck_what, sizeof(s->context_stuck_what), "%s",
	    cr.longest_what);
}

/*
 * Fill a regions reply with the regions after after_id that uid may see
 * (its own; root sees all).  Region ids only grow along the list.
 */
void
status_regions(struct hpz_msg_regions_reply *rep, uint64_t after_id,
    uid_t uid)
{
	struct hpz_msg_region_info	*e;
	struct region			*r;

	TAILQ_FOREACH(r, &region_all, all) {
		if (r->id <= after_id ||
		    (uid != 0 && r->client->uid != uid))
			continue;
		if (rep->count == HPZ_REGIONS_PER_REPLY) {
			rep->more = 1;
			break;
		}
		e = &rep->r[rep->count++];
		e->id = r->id;
		e->pid = (int32_t)r->client->pid;
		e->uid = (uint32_t)r->client->uid;
		e->flags = r->flags;
		e->addr = region_addr(r);
		e->len = r->len;
		e->page_size = r->page_size;
		e->faults = atomic_load(&r->faults);
		e->pages_cleared = atomic_load(&r->cleared);
		e->pages_populated = atomic_load(&r->populated);
		e->fault_ns_total = atomic_load(&r->fault_ns_total);
		e->fault_ns_max = atomic_load(&r->fault_ns_max);
		e->priority = r->priority;
		e->bg_pages_cleared = atomic_load(&r->bg_cleared);
		e->bg_pages_pending = scrub_region_pending(r);
	}
}

/* One line for sd_notify STATUS=. */
void
status_summary(char *buf, size_t len, size_t nclients)
{
	uint64_t	n, bytes;

	status_sums(&n, &bytes, NULL);
	snprintf(buf, len, "%zu clients, %llu regions (%llu MiB), "
	    "%llu faults served, %llu pages cleared", nclients,
	    (unsigned long long)n, (unsigned long long)(bytes >> 20),
	    (unsigned long long)atomic_load(&stats.faults),
	    (unsigned long long)atomic_load(&stats.pages_cleared));
}
