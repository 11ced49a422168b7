/*
 * test-counters.c - unit tests of the list of the status reply's numbers
 * (lib/hpz-counters.h): the structs made from it keep the layout they had
 * when they were written out by hand (an ABI, struct hpz_status, and the
 * wire, struct hpz_msg_status_reply), numbers added later come
 * after all of those, and stats_fill copies every number the daemon counts.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "hpz.h"
#include "hpz-protocol.h"

#include "clear.h"
#include "stats.h"
#include "status.h"

struct counters_at {
	const char	*name;		/* in struct hpz_status */
	size_t		 status;	/* offset in struct hpz_status */
	size_t		 wire;		/* in struct hpz_msg_status_reply */
};

/*
 * The layouts as they were last written out by hand (main at 3c440ad:
 * 32e016c's and issue 12's costs and interception appended), on x86_64.
 * The policy words of struct hpz_status come from the wire's policy bits.
 */
#define COUNTERS_STATUS_SIZE	816
#define COUNTERS_WIRE_SIZE	816
static const struct counters_at counters_recorded[] = {
	{ "version", 0, 16 },
	{ "uptime_ms", 32, 48 },
	{ "clients", 40, 56 },
	{ "regions", 48, 64 },
	{ "bytes_registered", 56, 72 },
	{ "workers", 64, 80 },
	{ "faults", 72, 88 },
	{ "faults_missing", 80, 96 },
	{ "faults_minor", 88, 104 },
	{ "faults_shared", 96, 112 },
	{ "pages_cleared", 104, 120 },
	{ "bytes_cleared", 112, 128 },
	{ "pages_populated", 120, 136 },
	{ "pages_punched", 128, 144 },
	{ "resets", 136, 152 },
	{ "registers", 144, 160 },
	{ "unregisters", 152, 168 },
	{ "requests_rejected", 160, 176 },
	{ "clients_dropped", 168, 184 },
	{ "fault_ns_total", 176, 192 },
	{ "fault_ns_max", 184, 200 },
	{ "clear_kernel", 192, 208 },
	{ "hot_kernel", 208, 224 },
	{ "clear_gbs", 224, 240 },
	{ "hot_size", 232, 248 },
	{ "extent_max", 240, 256 },
	{ "bulk_bytes", 248, 264 },
	{ "bulk_ns", 256, 272 },
	{ "hot_bytes", 264, 280 },
	{ "hot_ns", 272, 288 },
	{ "faults_coalesced", 280, 296 },
	{ "jobs_split", 288, 304 },
	{ "faults_polled", 296, 312 },
	{ "latency_hist", 304, 320 },
	{ "bg_pages_cleared", 560, 576 },
	{ "bg_bytes_cleared", 568, 584 },
	{ "bg_ns", 576, 592 },
	{ "bg_pages_populated", 584, 600 },
	{ "bg_pages_premapped", 592, 608 },
	{ "bg_pages_pending", 600, 616 },
	{ "bg_throttle_ns", 608, 624 },
	{ "bg_budget_gbs", 616, 632 },
	{ "bg_client_budget_gbs", 624, 640 },
	{ "limit_uid_clients", 632, 648 },
	{ "limit_uid_regions", 640, 656 },
	{ "limit_uid_bytes", 648, 664 },
	{ "limit_uid_state_bytes", 656, 672 },
	{ "limit_region_pages", 664, 680 },
	{ "limit_conn_regions", 672, 688 },
	{ "uid_clients", 680, 696 },
	{ "uid_regions", 688, 704 },
	{ "uid_bytes", 696, 712 },
	{ "uid_state_bytes", 704, 720 },
	{ "fds_closing", 712, 728 },
	{ "cost_rt_ns", 720, 736 },
	{ "cost_rt_huge", 728, 768 },
	{ "cost_kzero_ns", 736, 744 },
	{ "cost_ktouch_ns", 744, 752 },
	{ "cost_clear_ns", 752, 760 },
	{ "policy_intercept", 760, 772 },
	{ "policy_step_aside", 768, 772 },
	{ "regions_intercepting", 776, 776 },
	{ "intercept_on", 784, 784 },
	{ "intercept_off", 792, 792 },
	{ "steps_aside", 800, 800 },
	{ "pages_aside", 808, 808 },
};

/* The layouts now: the fields that are not in the list, then the list. */
#define COUNTERS_AT(name, kind, unit, prom, label, help)		\
	{ #name, offsetof(struct hpz_status, name),			\
	    offsetof(struct hpz_msg_status_reply, name) },
static const struct counters_at counters_now[] = {
	{ "version", offsetof(struct hpz_status, version),
	    offsetof(struct hpz_msg_status_reply, version) },
	{ "clear_kernel", offsetof(struct hpz_status, clear_kernel),
	    offsetof(struct hpz_msg_status_reply, clear_kernel) },
	{ "hot_kernel", offsetof(struct hpz_status, hot_kernel),
	    offsetof(struct hpz_msg_status_reply, hot_kernel) },
	{ "clear_gbs", offsetof(struct hpz_status, clear_gbs),
	    offsetof(struct hpz_msg_status_reply, clear_mbps) },
	{ "latency_hist", offsetof(struct hpz_status, latency_hist),
	    offsetof(struct hpz_msg_status_reply, latency_hist) },
	{ "bg_budget_gbs", offsetof(struct hpz_status, bg_budget_gbs),
	    offsetof(struct hpz_msg_status_reply, bg_budget_mbps) },
	{ "bg_client_budget_gbs",
	    offsetof(struct hpz_status, bg_client_budget_gbs),
	    offsetof(struct hpz_msg_status_reply, bg_client_budget_mbps) },
	{ "cost_rt_huge", offsetof(struct hpz_status, cost_rt_huge),
	    offsetof(struct hpz_msg_status_reply, cost_rt_huge) },
	{ "policy_intercept", offsetof(struct hpz_status, policy_intercept),
	    offsetof(struct hpz_msg_status_reply, policy) },
	{ "policy_step_aside", offsetof(struct hpz_status, policy_step_aside),
	    offsetof(struct hpz_msg_status_reply, policy) },
	HPZ_COUNTERS_ALL(COUNTERS_AT, COUNTERS_AT)
};

#define COUNTERS_N(a)	(sizeof(a) / sizeof((a)[0]))

static const struct counters_at *
counters_find(const char *name)
{
	size_t	i;

	for (i = 0; i < COUNTERS_N(counters_now); i++)
		if (strcmp(counters_now[i].name, name) == 0)
			return (&counters_now[i]);
	return (NULL);
}

Test(counters, recorded_layout_kept)
{
	const struct counters_at	*r, *n;
	size_t				 i;

	for (i = 0; i < COUNTERS_N(counters_recorded); i++) {
		r = &counters_recorded[i];
		n = counters_find(r->name);
		cr_assert_not_null(n, "%s is gone from the status reply",
		    r->name);
		cr_expect_eq(n->status, r->status, "struct hpz_status %s at "
		    "%zu, was at %zu", r->name, n->status, r->status);
		cr_expect_eq(n->wire, r->wire, "status reply %s at %zu, was "
		    "at %zu", r->name, n->wire, r->wire);
	}
	cr_expect_geq(sizeof(struct hpz_status), COUNTERS_STATUS_SIZE);
	cr_expect_geq(sizeof(struct hpz_msg_status_reply), COUNTERS_WIRE_SIZE);
	cr_expect_leq(sizeof(struct hpz_msg_status_reply), HPZ_MSG_MAX);
}

/* A number added to the list goes after everything recorded. */
Test(counters, new_numbers_appended)
{
	const struct counters_at	*n;
	size_t				 i, j;

	for (i = 0; i < COUNTERS_N(counters_now); i++) {
		n = &counters_now[i];
		for (j = 0; j < COUNTERS_N(counters_recorded); j++)
			if (strcmp(counters_recorded[j].name, n->name) == 0)
				break;
		if (j < COUNTERS_N(counters_recorded))
			continue;
		cr_expect_geq(n->status, COUNTERS_STATUS_SIZE, "new %s at %zu "
		    "in struct hpz_status, inside the old layout", n->name,
		    n->status);
		cr_expect_geq(n->wire, COUNTERS_WIRE_SIZE, "new %s at %zu in "
		    "the status reply, inside the old layout", n->name,
		    n->wire);
	}
}

/* Every D line: counted in struct stats, sent as it is. */
Test(counters, stats_fill_copies_each)
{
	struct hpz_msg_status_reply	 s;
	uint64_t			 v = 1000;

	memset(&stats, 0, sizeof(stats));
#define COUNTERS_SET(name, kind, unit, prom, label, help)		\
	atomic_store(&stats.name, v++);
	HPZ_COUNTERS_ALL(COUNTERS_SET, STATS_NONE)
	memset(&s, 0, sizeof(s));
	status_fill(&s, 0, 0);
	v = 1000;
#define COUNTERS_CHECK(name, kind, unit, prom, label, help)		\
	cr_expect_eq(s.name, v, "%s is %llu, not %llu", #name,		\
	    (unsigned long long)s.name, (unsigned long long)v);		\
	v++;
	HPZ_COUNTERS_ALL(COUNTERS_CHECK, STATS_NONE)
	cr_expect_gt(v, 1000 + 20, "only %llu counters",
	    (unsigned long long)(v - 1000));
}
