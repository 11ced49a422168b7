/*
 * hpzctl-status.c - hpzctl status: the short answer to "is it up, and
 * what has it done", with what a fault costs, the limits in force and
 * the client contexts.
 */
#include <stddef.h>
#include <stdio.h>

#include "hpz.h"
#include "size.h"
#include "cli.h"
#include "hpzctl.h"

static void	hpzctl_costs(const struct hpz_status *);
static const char *hpzctl_limit(unsigned long long, unsigned long long, int,
		    char *, size_t);
static void	hpzctl_limits(const struct hpz_status *);

/* The short answer to "is it up, and what has it done". */
int
hpzctl_status(int argc, char **argv)
{
	struct hpz_status	 st;
	char			 b1[32], b2[32];

	cli_no_more_args(hpzctl_usage, "status: ", 1, argc, argv);
	if (hpzctl_query(&st) != 0)
		return (1);

	printf("hpzerod %s running at %s\n", st.version, cli_socket());
	printf("  %-18s %s\n", "uptime:",
	    hpzctl_uptime(st.uptime_ms, b1, sizeof b1));
	printf("  %-18s %llu\n", "clients:", st.clients);
	printf("  %-18s %llu\n", "regions:", st.regions);
	printf("  %-18s %s (%llu bytes)\n", "bytes registered:",
	    size_format(SIZE_FMT_DECIMAL, st.bytes_registered, b1, sizeof b1),
	    st.bytes_registered);
	printf("  %-18s %llu (missing %llu, minor %llu)\n", "faults served:",
	    st.faults, st.faults_missing, st.faults_minor);
	printf("  %-18s %llu\n", "pages cleared:", st.pages_cleared);
	printf("  %-18s %s (%llu bytes)\n", "bytes cleared:",
	    size_format(SIZE_FMT_DECIMAL, st.bytes_cleared, b2, sizeof b2), st.bytes_cleared);
	printf("  %-18s %llu\n", "pages populated:", st.pages_populated);
	printf("  %-18s %llu\n", "resets:", st.resets);
	printf("  %-18s %s (bulk, %.1f GB/s measured at start), %s (last "
	    "%llu KiB around the fault)\n", "clear kernels:", st.clear_kernel,
	    st.clear_gbs, st.hot_kernel, st.hot_size >> 10);
	printf("  %-18s %llu pages cleared ahead (%.1f GB/s), %llu allocated "
	    "ahead, %llu premapped, %llu garbage pending\n", "background:",
	    st.bg_pages_cleared, hpzctl_gbs(st.bg_bytes_cleared, st.bg_ns),
	    st.bg_pages_populated, st.bg_pages_premapped, st.bg_pages_pending);
	printf("  %-18s ", "background budget:");
	if (st.bg_budget_gbs == 0)
		printf("unlimited in all, ");
	else
		printf("%.1f GB/s in all, ", st.bg_budget_gbs);
	if (st.bg_client_budget_gbs == 0)
		printf("unlimited a client\n");
	else
		printf("%.1f GB/s a client\n", st.bg_client_budget_gbs);
	if (st.faults > 0)
		printf("  %-18s p50 < %.0f us, p99 < %.0f us, max %.0f us\n",
		    "fault latency:", hpzctl_percentile(&st, 0.50) / 1e3,
		    hpzctl_percentile(&st, 0.99) / 1e3, st.fault_ns_max / 1e3);
	hpzctl_costs(&st);
	hpzctl_limits(&st);
	hpzctl_pool_status();
	hpzctl_hold_status();
	return (fflush(stdout) == 0 ? 0 : 1);
}

/*
 * What a fault costs on this machine, as the daemon measured it at start,
 * and what it makes of it: a region's faults are intercepted only while
 * it holds garbage, and left to the kernel where the daemon cannot keep
 * up.
 */
static void
hpzctl_costs(const struct hpz_status *st)
{
	double	ours;

	if (st->cost_rt_ns == 0)
		printf("  %-18s not measured\n", "costs:");
	else if (st->cost_ktouch_ns == 0)
		printf("  %-18s uffd round trip %.1f us (%s); the kernel's "
		    "zeroing not measured yet\n", "costs:",
		    st->cost_rt_ns / 1e3, st->cost_rt_huge ? "2 MiB" :
		    "4 KiB shmem");
	else {
		ours = (double)(st->cost_rt_ns + st->cost_clear_ns);
		printf("  %-18s uffd round trip %.1f us, kernel zeroing %.1f "
		    "us, kernel first touch %.1f us,\n"
		    "  %-18s our clear %.1f us (a 2 MiB page): a garbage "
		    "fault we serve costs %.2fx the kernel's first touch\n",
		    "costs:", st->cost_rt_ns / 1e3, st->cost_kzero_ns / 1e3,
		    st->cost_ktouch_ns / 1e3, "", st->cost_clear_ns / 1e3,
		    ours / (double)st->cost_ktouch_ns);
		/* The prediction beside what faults took of late. */
		if (st->cost_served_ns != 0)
			printf("  %-18s a garbage 2 MiB fault: predicted %.1f "
			    "us, served of late %.1f us (round trip + %.1f us "
			    "read to answer), %.2fx the kernel's\n", "",
			    ours / 1e3, (st->cost_rt_ns +
			    st->cost_served_ns) / 1e3,
			    st->cost_served_ns / 1e3, (double)(st->cost_rt_ns +
			    st->cost_served_ns) / (double)st->cost_ktouch_ns);
		else
			printf("  %-18s a garbage 2 MiB fault: predicted %.1f "
			    "us; none served in the last second\n", "",
			    ours / 1e3);
	}
	printf("  %-18s intercept %s, step aside %s: %llu of %llu regions "
	    "trap their faults now\n", "interception:", st->policy_intercept,
	    st->policy_step_aside, st->regions_intercepting, st->regions);
	printf("  %-18s %llu times to trapping faults, %llu back to the "
	    "kernel; stepped aside %llu times (%llu pages)\n", "",
	    st->intercept_on, st->intercept_off, st->steps_aside,
	    st->pages_aside);
}

/* One limit and what this uid uses of it: "4096 (3 used)". */
static const char *
hpzctl_limit(unsigned long long limit, unsigned long long used, int bytes,
    char *buf, size_t len)
{
	char	l[32], u[32];

	if (bytes) {
		size_format(SIZE_FMT_DECIMAL, limit, l, sizeof l);
		size_format(SIZE_FMT_DECIMAL, used, u, sizeof u);
	} else {
		snprintf(l, sizeof l, "%llu", limit);
		snprintf(u, sizeof u, "%llu", used);
	}
	snprintf(buf, len, "%s (%s used)", limit == 0 ? "unlimited" : l, u);
	return (buf);
}

/* The [limits] in force (hpzerod.conf(5)), and this uid's share of them. */
static void
hpzctl_limits(const struct hpz_status *st)
{
	char	b1[80], b2[80], b3[80], b4[80];

	printf("  %-18s connections %s, regions %s,\n"
	    "  %-18s bytes %s, page state %s\n", "limits, this uid:",
	    hpzctl_limit(st->limit_uid_clients, st->uid_clients, 0, b1,
	    sizeof b1), hpzctl_limit(st->limit_uid_regions, st->uid_regions,
	    0, b2, sizeof b2), "",
	    hpzctl_limit(st->limit_uid_bytes, st->uid_bytes, 1, b3,
	    sizeof b3), hpzctl_limit(st->limit_uid_state_bytes,
	    st->uid_state_bytes, 1, b4, sizeof b4));
	if (st->limit_region_pages == 0)
		snprintf(b1, sizeof b1, "unlimited");
	else
		snprintf(b1, sizeof b1, "%llu", st->limit_region_pages);
	if (st->limit_region_forks == 0)
		snprintf(b2, sizeof b2, "unlimited");
	else
		snprintf(b2, sizeof b2, "%llu", st->limit_region_forks);
	printf("  %-18s %s pages a region, %llu regions a connection,\n"
	    "  %-18s %s forked children a region at once\n",
	    "limits, a region:", b1, st->limit_conn_regions, "", b2);
	printf("  %-18s clients' files mapped %s, context threads %s,\n"
	    "  %-18s client contexts at work %llu a uid\n", "limits, all:",
	    hpzctl_limit(st->limit_map_bytes, st->map_bytes, 1, b2,
	    sizeof b2), hpzctl_limit(st->limit_threads, st->ctx_threads, 0,
	    b3, sizeof b3), "", st->limit_uid_contexts);
	if (st->fds_closing > 0)
		printf("  %-18s %llu passed fds still being closed\n",
		    "closing:", st->fds_closing);
	printf("  %-18s %llu with a thread now, %llu stuck", "client contexts:",
	    st->contexts, st->contexts_stuck);
	if (st->contexts_stuck > 0)
		printf(": the longest, pid %lld, for %.1f s in %s (a lock its "
		    "client holds; only its own requests wait)",
		    (long long)st->context_stuck_pid,
		    (double)st->context_stuck_ms / 1000.0,
		    st->context_stuck_what);
	printf("\n");
}
