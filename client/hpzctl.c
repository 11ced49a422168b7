/*
 * hpzctl.c - ask a running hpzerod how it is doing.
 *
 *	hpzctl [-s socket] status
 *	hpzctl [-s socket] stats [-j | --json]
 *	hpzctl [-s socket] stats -w seconds [-n count]
 *	hpzctl [-s socket] top [-i seconds] [-n count]
 *	hpzctl [-s socket] prometheus [-o file]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json.h>

#include "hpz.h"
#include "clock.h"
#include "size.h"
#include "cli.h"
#include "hpzctl.h"

/*
 * One number of struct hpz_status (a line of hpz-counters.h): its name is
 * its stats name and JSON key; prom, when not "", its Prometheus metric.
 */
struct hpzctl_field {
	const char	*name;
	size_t		 offset;
	const char	*kind;		/* "counter" or "gauge" */
	const char	*unit;
	const char	*prom;		/* after "hpzerod_" */
	const char	*label;
	const char	*help;
};

#define HPZCTL_FIELD(f, kind, unit, prom, label, help) \
	{ #f, offsetof(struct hpz_status, f), #kind, unit, prom, label, help },

/* Every number, in the order of struct hpz_status. */
static const struct hpzctl_field hpzctl_fields[] = {
	HPZ_COUNTERS_ALL(HPZCTL_FIELD, HPZCTL_FIELD)
};

#define HPZCTL_MAX_REGIONS	4096
#define HPZCTL_NFIELDS	(sizeof hpzctl_fields / sizeof hpzctl_fields[0])

static void	hpzctl_usage(FILE *);
#define hpzctl_usage_error(...)	cli_usage_error(hpzctl_usage, __VA_ARGS__)
#define hpzctl_bad_option(where, ch, argv) \
	cli_bad_option(hpzctl_usage, (where), (ch), (argv))
static unsigned long long hpzctl_value(const struct hpz_status *,
		    const struct hpzctl_field *);
static unsigned long long hpzctl_fault_mean(const struct hpz_status *);
static const char *hpzctl_uptime(unsigned long long, char *, size_t);
static int	hpzctl_query(struct hpz_status *);
static unsigned long long hpzctl_percentile(const struct hpz_status *, double);
static unsigned long long hpzctl_hist_percentile(const unsigned long long *,
		    unsigned long long, double);
static struct hpz_region_info *hpzctl_regions(size_t *);
static int	hpzctl_status(int, char **);
static const char *hpzctl_limit(unsigned long long, unsigned long long, int,
		    char *, size_t);
static void	hpzctl_limits(const struct hpz_status *);
static void	hpzctl_costs(const struct hpz_status *);
static int	hpzctl_stats(int, char **);
static int	hpzctl_stats_table(const struct hpz_status *);
static int	hpzctl_regions_table(void);
static int	hpzctl_stats_json(const struct hpz_status *);
static double	hpzctl_parse_interval(const char *, const char *);
static unsigned long hpzctl_parse_count(const char *, const char *);
static int	hpzctl_region_cmp(const void *, const void *);
static struct hpz_region_info *hpzctl_top_sample(struct hpz_status *,
		    size_t *);
static void	hpzctl_top_screen(const struct hpz_status *,
		    const struct hpz_status *, const struct hpz_region_info *,
		    size_t, const struct hpz_region_info *, size_t, double,
		    double);
static int	hpzctl_top_wait(const sigset_t *, double);
static int	hpzctl_top_loop(double, unsigned long);
static int	hpzctl_top(int, char **);
static void	hpzctl_prom_label(FILE *, const char *);
static void	hpzctl_prom_fields(FILE *, const struct hpz_status *);
static int	hpzctl_prom_write(FILE *, const struct hpz_status *,
		    const struct hpz_region_info *, size_t);
static int	hpzctl_prometheus(int, char **);

/* Tell the user how to call us, on stdout for -h, on stderr for mistakes. */
static void
hpzctl_usage(FILE *f)
{
	fprintf(f,
	    "usage: hpzctl [-h] [--version] [-s socket] command\n"
	    "commands:\n"
	    "  status               is hpzerod running, and what it has done\n"
	    "  stats [-j | --json]  every counter, as a table or JSON\n"
	    "  stats -w seconds [-n count]\n"
	    "                       the same as top -i seconds [-n count]\n"
	    "  top [-i seconds] [-n count]\n"
	    "                       rates and latency, refreshed every interval\n"
	    "                       (default 1 s), count times (default until\n"
	    "                       interrupted)\n"
	    "  prometheus [-o file] counters in the Prometheus text format, on\n"
	    "                       stdout or replacing file atomically\n"
	    "options:\n"
	    "  -s, --socket socket  hpzerod's socket (default $HPZ_SOCKET,\n"
	    "                       then %s)\n"
	    "  -h, --help           this help\n"
	    "      --version        print the version\n", HPZ_SOCKET_DEFAULT);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help",	no_argument,		NULL,	'h' },
		{ "socket",	required_argument,	NULL,	's' },
		{ "version",	no_argument,		NULL,	'V' },
		{ NULL,		0,			NULL,	0 }
	};
	const char	*cmd;
	int		 ch;

	cli_prog = "hpzctl";
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:hs:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h':
			hpzctl_usage(stdout);
			return (0);
		case 's':
			cli_socket_option(hpzctl_usage, optarg);
			break;
		case 'V':
			printf("hpzctl %s\n", HPZ_VERSION);
			return (0);
		default:
			hpzctl_bad_option("", ch, argv);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0)
		hpzctl_usage_error("no command given");

	cmd = argv[0];
	if (strcmp(cmd, "status") == 0)
		return (hpzctl_status(argc, argv));
	if (strcmp(cmd, "stats") == 0)
		return (hpzctl_stats(argc, argv));
	if (strcmp(cmd, "top") == 0)
		return (hpzctl_top(argc, argv));
	if (strcmp(cmd, "prometheus") == 0)
		return (hpzctl_prometheus(argc, argv));
	hpzctl_usage_error("unknown command '%s'", cmd);
}

/* Read one counter through the field table. */
static unsigned long long
hpzctl_value(const struct hpz_status *st, const struct hpzctl_field *f)
{
	unsigned long long	 v;

	memcpy(&v, (const char *)st + f->offset, sizeof v);
	return (v);
}

/* Mean time from fault read to mapped; the daemon keeps only the sum. */
static unsigned long long
hpzctl_fault_mean(const struct hpz_status *st)
{
	if (st->faults == 0)
		return (0);
	return (st->fault_ns_total / st->faults);
}

/* Uptime the way people say it: 3d04h05m06s, 1h02m03s, 2m03s, 7s. */
static const char *
hpzctl_uptime(unsigned long long ms, char *buf, size_t len)
{
	unsigned long long	 s = ms / 1000;
	unsigned long long	 d, h, m;

	d = s / 86400;
	h = s / 3600 % 24;
	m = s / 60 % 60;
	s %= 60;
	if (d > 0)
		snprintf(buf, len, "%llud%02lluh%02llum%02llus", d, h, m, s);
	else if (h > 0)
		snprintf(buf, len, "%lluh%02llum%02llus", h, m, s);
	else if (m > 0)
		snprintf(buf, len, "%llum%02llus", m, s);
	else
		snprintf(buf, len, "%llus", s);
	return (buf);
}

/* Ask the daemon; on failure say where we looked and why it failed. */
static int
hpzctl_query(struct hpz_status *st)
{
	int	 error;

	memset(st, 0, sizeof *st);
	error = hpz_status(st);
	if (error != 0) {
		fprintf(stderr, "hpzctl: cannot reach hpzerod at %s: %s\n",
		    cli_socket(), hpz_strerror(error));
		return (-1);
	}
	/* Never trust the daemon to have terminated its string. */
	st->version[sizeof st->version - 1] = '\0';
	return (0);
}

/* The short answer to "is it up, and what has it done". */
static int
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
	printf("  %-18s %s pages a region, %llu regions a connection\n",
	    "limits, a region:", b1, st->limit_conn_regions);
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

/* Upper bound (ns) of the histogram bucket holding quantile q. */
static unsigned long long
hpzctl_percentile(const struct hpz_status *st, double q)
{
	return (hpzctl_hist_percentile(st->latency_hist, st->fault_ns_max, q));
}

/*
 * The same for any latency histogram (a delta, for top); the last bucket
 * is open-ended, so max stands for its upper bound.
 */
static unsigned long long
hpzctl_hist_percentile(const unsigned long long *hist, unsigned long long max,
    double q)
{
	unsigned long long	total = 0, seen = 0;
	int			i;

	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++)
		total += hist[i];
	if (total == 0)
		return (0);
	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++) {
		seen += hist[i];
		if ((double)seen >= q * (double)total)
			break;
	}
	if (i >= HPZ_LATENCY_BUCKETS - 1)
		return (max);
	return (2ULL << i);
}

double
hpzctl_gbs(unsigned long long bytes, unsigned long long ns)
{
	return (ns == 0 ? 0.0 : (double)bytes / (double)ns);
}

/* Every region the daemon shows us; NULL (and a message) on failure. */
static struct hpz_region_info *
hpzctl_regions(size_t *n)
{
	struct hpz_region_info	*info;
	int			 error;

	if ((info = calloc(HPZCTL_MAX_REGIONS, sizeof(*info))) == NULL) {
		fprintf(stderr, "hpzctl: out of memory\n");
		return (NULL);
	}
	error = hpz_list_regions(info, HPZCTL_MAX_REGIONS, n);
	if (error != 0) {
		fprintf(stderr, "hpzctl: cannot list regions: %s\n",
		    hpz_strerror(error));
		free(info);
		return (NULL);
	}
	if (*n > HPZCTL_MAX_REGIONS)
		*n = HPZCTL_MAX_REGIONS;
	return (info);
}

/* Every counter as name and value, names padded to one column. */
static int
hpzctl_stats_table(const struct hpz_status *st)
{
	size_t		 i, w = strlen("fault_ns_mean");

	for (i = 0; i < HPZCTL_NFIELDS; i++) {
		if (strlen(hpzctl_fields[i].name) > w)
			w = strlen(hpzctl_fields[i].name);
	}
	printf("%-*s  %s\n", (int)w, "socket", cli_socket());
	printf("%-*s  %s\n", (int)w, "version", st->version);
	for (i = 0; i < HPZCTL_NFIELDS; i++) {
		printf("%-*s  %20llu\n", (int)w, hpzctl_fields[i].name,
		    hpzctl_value(st, &hpzctl_fields[i]));
	}
	printf("%-*s  %20llu\n", (int)w, "fault_ns_mean",
	    hpzctl_fault_mean(st));
	printf("%-*s  %20llu\n", (int)w, "fault_ns_p50",
	    hpzctl_percentile(st, 0.50));
	printf("%-*s  %20llu\n", (int)w, "fault_ns_p99",
	    hpzctl_percentile(st, 0.99));

	printf("\nclear kernels\n");
	printf("  %-10s %-12s %14s %10s\n", "role", "kernel", "bytes",
	    "GB/s");
	printf("  %-10s %-12s %14llu %10.1f   (%.1f measured at start)\n",
	    "bulk", st->clear_kernel, st->bulk_bytes,
	    hpzctl_gbs(st->bulk_bytes, st->bulk_ns), st->clear_gbs);
	printf("  %-10s %-12s %14llu %10.1f\n", "hot", st->hot_kernel,
	    st->hot_bytes, hpzctl_gbs(st->hot_bytes, st->hot_ns));
	printf("  %-10s %-12s %14llu %10.1f   (budget %.1f GB/s, 0: none)\n",
	    "background", st->clear_kernel, st->bg_bytes_cleared,
	    hpzctl_gbs(st->bg_bytes_cleared, st->bg_ns), st->bg_budget_gbs);

	printf("\nfault latency, read to mapped\n");
	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++) {
		if (st->latency_hist[i] == 0)
			continue;
		printf("  < %10.1f us %12llu\n", (double)(2ULL << i) / 1e3,
		    st->latency_hist[i]);
	}
	hpzctl_pool_table();
	return (hpzctl_regions_table() == 0 && fflush(stdout) == 0 ? 0 : 1);
}

/* The regions, one line each. */
static int
hpzctl_regions_table(void)
{
	struct hpz_region_info	*info;
	size_t			 n, i;

	if ((info = hpzctl_regions(&n)) == NULL)
		return (1);
	printf("\nregions\n");
	printf("  %6s %7s %18s %8s %6s %4s %10s %9s %9s %9s %9s %8s\n",
	    "id", "pid", "addr", "MiB", "page", "prio", "faults", "cleared",
	    "bg clear", "pending", "populated", "mean us");
	for (i = 0; i < n; i++)
		printf("  %6llu %7d %#18llx %8llu %5lluK %4d %10llu %9llu "
		    "%9llu %9llu %9llu %8.1f\n", info[i].id, info[i].pid,
		    info[i].addr, info[i].len >> 20, info[i].page_size >> 10,
		    info[i].priority, info[i].faults, info[i].pages_cleared,
		    info[i].bg_pages_cleared, info[i].bg_pages_pending,
		    info[i].pages_populated, info[i].faults == 0 ? 0.0 :
		    (double)info[i].fault_ns_total / (double)info[i].faults /
		    1e3);
	free(info);
	return (0);
}

/* Add an unsigned counter; json-c before 0.14 has only signed 64 bits. */
int
hpzctl_json_add(struct json_object *obj, const char *key,
    unsigned long long v)
{
	struct json_object	*n;

#if JSON_C_VERSION_NUM >= ((0 << 16) | (14 << 8))
	n = json_object_new_uint64(v);
#else
	n = json_object_new_int64((int64_t)v);
#endif
	if (n == NULL)
		return (-1);
	return (cli_json_add(obj, key, n));
}

/* One JSON object for scripts; json-c does the escaping. */
static int
hpzctl_stats_json(const struct hpz_status *st)
{
	struct json_object	*obj, *s, *arr, *r;
	struct hpz_region_info	*info = NULL;
	const char		*text;
	size_t			 i, n;
	int			 rc = 1;

	if ((obj = json_object_new_object()) == NULL)
		goto nomem;
	if ((s = json_object_new_string(st->version)) == NULL ||
	    json_object_object_add(obj, "version", s) != 0)
		goto nomem;
	if ((s = json_object_new_string(st->context_stuck_what)) == NULL ||
	    json_object_object_add(obj, "context_stuck_what", s) != 0)
		goto nomem;
	for (i = 0; i < HPZCTL_NFIELDS; i++) {
		if (hpzctl_json_add(obj, hpzctl_fields[i].name,
		    hpzctl_value(st, &hpzctl_fields[i])) != 0)
			goto nomem;
	}
	if (hpzctl_json_add(obj, "fault_ns_mean", hpzctl_fault_mean(st)) != 0 ||
	    hpzctl_json_add(obj, "fault_ns_p50",
	    hpzctl_percentile(st, 0.50)) != 0 ||
	    hpzctl_json_add(obj, "fault_ns_p99",
	    hpzctl_percentile(st, 0.99)) != 0)
		goto nomem;
	if ((s = json_object_new_string(st->clear_kernel)) == NULL ||
	    json_object_object_add(obj, "clear_kernel", s) != 0 ||
	    (s = json_object_new_string(st->hot_kernel)) == NULL ||
	    json_object_object_add(obj, "hot_kernel", s) != 0 ||
	    (s = json_object_new_double(st->clear_gbs)) == NULL ||
	    json_object_object_add(obj, "clear_gbs", s) != 0 ||
	    (s = json_object_new_double(hpzctl_gbs(st->bulk_bytes,
	    st->bulk_ns))) == NULL ||
	    json_object_object_add(obj, "bulk_gbs", s) != 0 ||
	    (s = json_object_new_double(hpzctl_gbs(st->hot_bytes,
	    st->hot_ns))) == NULL ||
	    json_object_object_add(obj, "hot_gbs", s) != 0 ||
	    (s = json_object_new_double(st->bg_budget_gbs)) == NULL ||
	    json_object_object_add(obj, "bg_budget_gbs", s) != 0 ||
	    (s = json_object_new_double(st->bg_client_budget_gbs)) == NULL ||
	    json_object_object_add(obj, "bg_client_budget_gbs", s) != 0)
		goto nomem;
	if ((arr = json_object_new_array()) == NULL ||
	    json_object_object_add(obj, "latency_hist", arr) != 0)
		goto nomem;
	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++)
		if ((s = json_object_new_int64((int64_t)st->latency_hist[i])) ==
		    NULL || json_object_array_add(arr, s) != 0)
			goto nomem;
	if ((arr = json_object_new_array()) == NULL ||
	    json_object_object_add(obj, "regions", arr) != 0)
		goto nomem;
	if ((info = hpzctl_regions(&n)) == NULL)
		goto out;
	for (i = 0; i < n; i++) {
		if ((r = json_object_new_object()) == NULL ||
		    json_object_array_add(arr, r) != 0 ||
		    hpzctl_json_add(r, "id", info[i].id) != 0 ||
		    hpzctl_json_add(r, "pid", (unsigned long long)info[i].pid)
		    != 0 ||
		    hpzctl_json_add(r, "uid", info[i].uid) != 0 ||
		    hpzctl_json_add(r, "flags", info[i].flags) != 0 ||
		    hpzctl_json_add(r, "addr", info[i].addr) != 0 ||
		    hpzctl_json_add(r, "len", info[i].len) != 0 ||
		    hpzctl_json_add(r, "page_size", info[i].page_size) != 0 ||
		    hpzctl_json_add(r, "faults", info[i].faults) != 0 ||
		    hpzctl_json_add(r, "pages_cleared",
		    info[i].pages_cleared) != 0 ||
		    hpzctl_json_add(r, "pages_populated",
		    info[i].pages_populated) != 0 ||
		    hpzctl_json_add(r, "fault_ns_total",
		    info[i].fault_ns_total) != 0 ||
		    hpzctl_json_add(r, "fault_ns_max", info[i].fault_ns_max) != 0 ||
		    hpzctl_json_add(r, "priority",
		    (unsigned long long)info[i].priority) != 0 ||
		    hpzctl_json_add(r, "bg_pages_cleared",
		    info[i].bg_pages_cleared) != 0 ||
		    hpzctl_json_add(r, "bg_pages_pending",
		    info[i].bg_pages_pending) != 0)
			goto nomem;
	}
	if ((s = json_object_new_string(cli_socket())) == NULL ||
	    json_object_object_add(obj, "socket", s) != 0)
		goto nomem;
	if (hpzctl_pool_json(obj) != 0)
		goto nomem;
	text = json_object_to_json_string_ext(obj,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	if (text == NULL)
		goto nomem;
	printf("%s\n", text);
	rc = fflush(stdout) == 0 ? 0 : 1;
	goto out;
nomem:
	fprintf(stderr, "hpzctl: cannot build JSON: out of memory\n");
out:
	free(info);
	if (obj != NULL)
		json_object_put(obj);
	return (rc);
}

/* All counters, for people (a table) or for scripts (--json). */
static int
hpzctl_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,	NULL,	'j' },
		{ NULL,		0,		NULL,	0 }
	};
	struct hpz_status	 st;
	double			 interval = 0;
	unsigned long		 count = 0;
	int			 ch, json = 0;

	optind = 0;	/* glibc: start over on the command's own argv */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:jn:w:", longopts, NULL)) !=
	    -1) {
		switch (ch) {
		case 'j':
			json = 1;
			break;
		case 'n':
			count = hpzctl_parse_count("stats: ", optarg);
			break;
		case 'w':
			interval = hpzctl_parse_interval("stats: ", optarg);
			break;
		default:
			hpzctl_bad_option("stats: ", ch, argv);
		}
	}
	cli_no_more_args(hpzctl_usage, "stats: ", optind, argc, argv);
	if (interval > 0 && json)
		hpzctl_usage_error("stats: -w and --json do not go together");
	if (count > 0 && interval == 0)
		hpzctl_usage_error("stats: -n needs -w");
	if (interval > 0)
		return (hpzctl_top_loop(interval, count));
	if (hpzctl_query(&st) != 0)
		return (1);
	return (json ? hpzctl_stats_json(&st) : hpzctl_stats_table(&st));
}

/* --- top ----------------------------------------------------------------- */

#define HPZCTL_INTERVAL_MIN	0.01
#define HPZCTL_INTERVAL_MAX	86400.0

/* A refresh interval in seconds, such as 0.5; exit 2 if it is not one. */
static double
hpzctl_parse_interval(const char *where, const char *arg)
{
	char	*end;
	double	 v;

	errno = 0;
	v = strtod(arg, &end);
	if (end == arg || *end != '\0' || errno != 0 || !isfinite(v) ||
	    v < HPZCTL_INTERVAL_MIN || v > HPZCTL_INTERVAL_MAX)
		hpzctl_usage_error("%sbad interval '%s' (seconds, %g to %g)",
		    where, arg, HPZCTL_INTERVAL_MIN, HPZCTL_INTERVAL_MAX);
	return (v);
}

/* A number of refreshes, at least 1; exit 2 if it is not one. */
static unsigned long
hpzctl_parse_count(const char *where, const char *arg)
{
	char		*end;
	unsigned long	 v;

	errno = 0;
	if (*arg < '0' || *arg > '9')
		hpzctl_usage_error("%sbad count '%s'", where, arg);
	v = strtoul(arg, &end, 10);
	if (*end != '\0' || errno != 0 || v == 0)
		hpzctl_usage_error("%sbad count '%s'", where, arg);
	return (v);
}

static int
hpzctl_region_cmp(const void *a, const void *b)
{
	const struct hpz_region_info	*x = a, *y = b;

	return (x->id < y->id ? -1 : x->id > y->id);
}

/* Counters and regions (sorted by id); NULL and a message on failure. */
static struct hpz_region_info *
hpzctl_top_sample(struct hpz_status *st, size_t *n)
{
	struct hpz_region_info	*info;

	if (hpzctl_query(st) != 0)
		return (NULL);
	if ((info = hpzctl_regions(n)) == NULL)
		return (NULL);
	qsort(info, *n, sizeof *info, hpzctl_region_cmp);
	return (info);
}

/* One screen: what happened between prev and cur, secs apart. */
static void
hpzctl_top_screen(const struct hpz_status *prev, const struct hpz_status *cur,
    const struct hpz_region_info *pr, size_t pn,
    const struct hpz_region_info *cr, size_t cn, double secs, double interval)
{
	unsigned long long	 hist[HPZ_LATENCY_BUCKETS];
	unsigned long long	 nfaults = 0, faults, cleared;
	const struct hpz_region_info *p;
	char			 b1[32], b2[32];
	size_t			 i, j;

	for (i = 0; i < HPZ_LATENCY_BUCKETS; i++) {
		hist[i] = HPZCTL_DELTA(cur, prev, latency_hist[i]);
		nfaults += hist[i];
	}
	printf("hpzerod %s at %s, up %s, every %.2f s\n", cur->version,
	    cli_socket(), hpzctl_uptime(cur->uptime_ms, b1, sizeof b1),
	    interval);
	printf("  clients %llu, regions %llu, %s registered\n", cur->clients,
	    cur->regions, size_format(SIZE_FMT_DECIMAL, cur->bytes_registered, b2, sizeof b2));
	printf("  %-14s %10.1f (missing %.1f, minor %.1f)\n", "faults/s:",
	    (double)HPZCTL_DELTA(cur, prev, faults) / secs,
	    (double)HPZCTL_DELTA(cur, prev, faults_missing) / secs,
	    (double)HPZCTL_DELTA(cur, prev, faults_minor) / secs);
	printf("  %-14s %10.2f by faults, %.2f in the background\n",
	    "cleared GB/s:",
	    (double)HPZCTL_DELTA(cur, prev, bytes_cleared) / secs / 1e9,
	    (double)HPZCTL_DELTA(cur, prev, bg_bytes_cleared) / secs / 1e9);
	printf("  %-14s %10.1f\n", "premapped/s:",
	    (double)HPZCTL_DELTA(cur, prev, bg_pages_premapped) / secs);
	if (nfaults > 0)
		printf("  %-14s p50 < %.1f us, p99 < %.1f us (%llu faults)\n",
		    "fault latency:",
		    hpzctl_hist_percentile(hist, cur->fault_ns_max, 0.50) / 1e3,
		    hpzctl_hist_percentile(hist, cur->fault_ns_max, 0.99) / 1e3,
		    nfaults);
	else
		printf("  %-14s -, no faults\n", "fault latency:");
	printf("  %-14s %10llu pages\n", "bg pending:", cur->bg_pages_pending);
	hpzctl_pool_top(secs);
	printf("\n  %6s %7s %8s %10s %10s %9s\n", "id", "pid", "MiB",
	    "faults/s", "cleared/s", "pending");
	/* Both lists are sorted by id: a region new since prev counts all. */
	for (i = 0, j = 0; i < cn; i++) {
		while (j < pn && pr[j].id < cr[i].id)
			j++;
		p = j < pn && pr[j].id == cr[i].id ? &pr[j] : NULL;
		faults = cr[i].faults;
		cleared = cr[i].pages_cleared + cr[i].bg_pages_cleared;
		if (p != NULL) {
			faults = faults >= p->faults ? faults - p->faults : 0;
			if (cleared >= p->pages_cleared + p->bg_pages_cleared)
				cleared -= p->pages_cleared +
				    p->bg_pages_cleared;
			else
				cleared = 0;
		}
		printf("  %6llu %7d %8llu %10.1f %10.1f %9llu\n", cr[i].id,
		    cr[i].pid, cr[i].len >> 20, (double)faults / secs,
		    (double)cleared / secs, cr[i].bg_pages_pending);
	}
}

/*
 * Sleep secs with SIGINT blocked, so none is lost between two checks.
 * 1 if SIGINT came, 0 when the time is up.
 */
static int
hpzctl_top_wait(const sigset_t *set, double secs)
{
	struct timespec	ts;
	double		end = clock_now_s() + secs, left;

	while ((left = end - clock_now_s()) > 0) {
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		if (sigtimedwait(set, NULL, &ts) == SIGINT)
			return (1);
	}
	/* One that came while we were busy. */
	ts.tv_sec = 0;
	ts.tv_nsec = 0;
	return (sigtimedwait(set, NULL, &ts) == SIGINT);
}

/* Refresh every interval, count times (0: until SIGINT). */
static int
hpzctl_top_loop(double interval, unsigned long count)
{
	struct hpz_status	 prev, cur;
	struct hpz_region_info	*pr, *cr;
	sigset_t		 set;
	size_t			 pn, cn;
	unsigned long		 done;
	double			 t0, t1;
	int			 tty, rc = 0;

	tty = isatty(STDOUT_FILENO);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
		fprintf(stderr, "hpzctl: sigprocmask: %s\n", strerror(errno));
		return (1);
	}
	if ((pr = hpzctl_top_sample(&prev, &pn)) == NULL)
		return (1);
	t0 = clock_now_s();
	for (done = 0; count == 0 || done < count; done++) {
		if (hpzctl_top_wait(&set, interval))
			break;
		if ((cr = hpzctl_top_sample(&cur, &cn)) == NULL) {
			fprintf(stderr, "hpzctl: hpzerod went away\n");
			rc = 1;
			break;
		}
		t1 = clock_now_s();
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (done > 0)
			putchar('\n');
		hpzctl_top_screen(&prev, &cur, pr, pn, cr, cn,
		    t1 > t0 ? t1 - t0 : interval, interval);
		free(pr);
		pr = cr;
		pn = cn;
		prev = cur;
		t0 = t1;
		if (fflush(stdout) != 0 || ferror(stdout)) {
			rc = 1;
			break;
		}
	}
	free(pr);
	return (rc);
}

/* Rates and latency over each interval, like top(1). */
static int
hpzctl_top(int argc, char **argv)
{
	double		 interval = 1.0;
	unsigned long	 count = 0;
	int		 ch;

	optind = 0;
	opterr = 0;
	while ((ch = getopt(argc, argv, "+:i:n:")) != -1) {
		switch (ch) {
		case 'i':
			interval = hpzctl_parse_interval("top: ", optarg);
			break;
		case 'n':
			count = hpzctl_parse_count("top: ", optarg);
			break;
		default:
			hpzctl_bad_option("top: ", ch, argv);
		}
	}
	cli_no_more_args(hpzctl_usage, "top: ", optind, argc, argv);
	return (hpzctl_top_loop(interval, count));
}

/* --- prometheus ------------------------------------------------------------ */

/* A label value, escaped as the text format wants: \\, \", \n. */
static void
hpzctl_prom_label(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			putc(*s, f);
	}
}

void
hpzctl_prom_head(FILE *f, const char *name, const char *type,
    const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * The numbers of hpz-counters.h that have a metric, a family where its
 * first line is, every line of the family under it.
 */
static void
hpzctl_prom_fields(FILE *f, const struct hpz_status *st)
{
	const struct hpzctl_field	*p, *q;
	unsigned long long		 v;
	size_t				 i, j;

	for (i = 0; i < HPZCTL_NFIELDS; i++) {
		p = &hpzctl_fields[i];
		if (*p->prom == '\0')
			continue;
		for (j = 0; j < i; j++)
			if (strcmp(hpzctl_fields[j].prom, p->prom) == 0)
				break;
		if (j < i)
			continue;	/* printed with its family */
		fprintf(f, "# HELP hpzerod_%s %s\n# TYPE hpzerod_%s %s\n",
		    p->prom, p->help, p->prom, p->kind);
		for (j = i; j < HPZCTL_NFIELDS; j++) {
			q = &hpzctl_fields[j];
			if (strcmp(q->prom, p->prom) != 0)
				continue;
			fprintf(f, "hpzerod_%s", q->prom);
			if (*q->label != '\0')
				fprintf(f, "{%s}", q->label);
			v = hpzctl_value(st, q);
			if (strcmp(q->unit, "ms") == 0)	/* base unit: seconds */
				fprintf(f, " %.3f\n", (double)v / 1e3);
			else
				fprintf(f, " %llu\n", v);
		}
	}
}

/* Everything, in the text exposition format 0.0.4. */
static int
hpzctl_prom_write(FILE *f, const struct hpz_status *st,
    const struct hpz_region_info *ri, size_t n)
{
	unsigned long long	 cum = 0;
	size_t			 i;
	int			 b;

	hpzctl_prom_fields(f, st);
	hpzctl_prom_head(f, "hpzerod_info", "gauge",
	    "The daemon's version and clear kernels.");
	fputs("hpzerod_info{version=\"", f);
	hpzctl_prom_label(f, st->version);
	fputs("\",clear_kernel=\"", f);
	hpzctl_prom_label(f, st->clear_kernel);
	fputs("\",hot_kernel=\"", f);
	hpzctl_prom_label(f, st->hot_kernel);
	fputs("\"} 1\n", f);

	/*
	 * Bucket i holds [2^i, 2^(i+1)) ns; the last one also every longer
	 * fault, so it has no finite upper bound and goes into +Inf only.
	 */
	hpzctl_prom_head(f, "hpzerod_fault_latency_seconds", "histogram",
	    "Time from reading a fault to mapping its page.");
	for (b = 0; b < HPZ_LATENCY_BUCKETS - 1; b++) {
		cum += st->latency_hist[b];
		fprintf(f, "hpzerod_fault_latency_seconds_bucket{le=\"%.10g\"} "
		    "%llu\n", (double)(2ULL << b) / 1e9, cum);
	}
	cum += st->latency_hist[HPZ_LATENCY_BUCKETS - 1];
	fprintf(f, "hpzerod_fault_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
	    cum);
	fprintf(f, "hpzerod_fault_latency_seconds_sum %.9f\n",
	    (double)st->fault_ns_total / 1e9);
	fprintf(f, "hpzerod_fault_latency_seconds_count %llu\n", cum);

	hpzctl_prom_head(f, "hpzerod_region_bytes", "gauge",
	    "Size of a registered region.");
	for (i = 0; i < n; i++)
		fprintf(f, "hpzerod_region_bytes{region=\"%llu\",pid=\"%d\","
		    "uid=\"%u\"} %llu\n", ri[i].id, ri[i].pid, ri[i].uid,
		    ri[i].len);
	hpzctl_prom_head(f, "hpzerod_region_faults_total", "counter",
	    "Faults resolved in a region.");
	for (i = 0; i < n; i++)
		fprintf(f, "hpzerod_region_faults_total{region=\"%llu\","
		    "pid=\"%d\",uid=\"%u\"} %llu\n", ri[i].id, ri[i].pid,
		    ri[i].uid, ri[i].faults);
	hpzctl_prom_head(f, "hpzerod_region_pages_cleared_total", "counter",
	    "Garbage pages of a region cleared, to serve a fault or in the "
	    "background.");
	for (i = 0; i < n; i++) {
		fprintf(f, "hpzerod_region_pages_cleared_total{region=\"%llu\","
		    "pid=\"%d\",uid=\"%u\",by=\"fault\"} %llu\n", ri[i].id,
		    ri[i].pid, ri[i].uid, ri[i].pages_cleared);
		fprintf(f, "hpzerod_region_pages_cleared_total{region=\"%llu\","
		    "pid=\"%d\",uid=\"%u\",by=\"background\"} %llu\n",
		    ri[i].id, ri[i].pid, ri[i].uid, ri[i].bg_pages_cleared);
	}
	hpzctl_prom_head(f, "hpzerod_region_background_pending_pages", "gauge",
	    "Garbage pages of a region not yet cleared.");
	for (i = 0; i < n; i++)
		fprintf(f, "hpzerod_region_background_pending_pages{region="
		    "\"%llu\",pid=\"%d\",uid=\"%u\"} %llu\n", ri[i].id,
		    ri[i].pid, ri[i].uid, ri[i].bg_pages_pending);
	hpzctl_pool_prom(f);
	return (ferror(f) ? -1 : 0);
}

/* The counters for Prometheus, on stdout or atomically into a file. */
static int
hpzctl_prometheus(int argc, char **argv)
{
	struct hpz_status	 st;
	struct hpz_region_info	*info;
	const char		*path = NULL;
	char			*tmp = NULL;
	FILE			*f = stdout;
	size_t			 n;
	int			 ch, fd, rc = 1;

	optind = 0;
	opterr = 0;
	while ((ch = getopt(argc, argv, "+:o:")) != -1) {
		switch (ch) {
		case 'o':
			if (*optarg == '\0')
				hpzctl_usage_error("prometheus: -o: empty "
				    "file name");
			path = optarg;
			break;
		default:
			hpzctl_bad_option("prometheus: ", ch, argv);
		}
	}
	cli_no_more_args(hpzctl_usage, "prometheus: ", optind, argc, argv);
	/* Everything first: no half-written output when the daemon fails. */
	if (hpzctl_query(&st) != 0)
		return (1);
	st.clear_kernel[sizeof st.clear_kernel - 1] = '\0';
	st.hot_kernel[sizeof st.hot_kernel - 1] = '\0';
	if ((info = hpzctl_regions(&n)) == NULL)
		return (1);

	if (path != NULL) {
		if (asprintf(&tmp, "%s.tmp", path) < 0) {
			tmp = NULL;
			fprintf(stderr, "hpzctl: out of memory\n");
			goto out;
		}
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
			fprintf(stderr, "hpzctl: %s: %s\n", tmp,
			    strerror(errno));
			if (fd >= 0) {
				close(fd);
				unlink(tmp);
			}
			f = NULL;
			goto out;
		}
	}
	if (hpzctl_prom_write(f, &st, info, n) != 0 || fflush(f) != 0) {
		fprintf(stderr, "hpzctl: %s: %s\n", tmp != NULL ? tmp :
		    "stdout", strerror(errno));
		goto out;
	}
	if (tmp != NULL) {
		if (fsync(fileno(f)) != 0 || fclose(f) != 0) {
			f = NULL;
			fprintf(stderr, "hpzctl: %s: %s\n", tmp,
			    strerror(errno));
			goto out;
		}
		f = NULL;
		if (rename(tmp, path) != 0) {
			fprintf(stderr, "hpzctl: rename %s to %s: %s\n", tmp,
			    path, strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	if (tmp != NULL) {
		if (f != NULL)
			fclose(f);
		if (rc != 0)
			unlink(tmp);
		free(tmp);
	}
	free(info);
	return (rc);
}
