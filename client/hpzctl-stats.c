/*
 * hpzctl-stats.c - hpzctl stats: every counter of struct hpz_status, as a
 * table for people or as JSON for scripts, and the regions under it, from
 * the list of hpzctl-fields.c; with -w, top's loop.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "hpz.h"
#include "cli.h"
#include "hpzctl.h"

static unsigned long long hpzctl_fault_mean(const struct hpz_status *);
static int	hpzctl_stats_table(const struct hpz_status *);
static int	hpzctl_regions_table(void);
static int	hpzctl_stats_json(const struct hpz_status *);

/* Mean time from fault read to mapped; the daemon keeps only the sum. */
static unsigned long long
hpzctl_fault_mean(const struct hpz_status *st)
{
	if (st->faults == 0)
		return (0);
	return (st->fault_ns_total / st->faults);
}

/* Every counter as name and value, names padded to one column. */
static int
hpzctl_stats_table(const struct hpz_status *st)
{
	size_t		 i, w = strlen("fault_ns_mean");

	for (i = 0; i < hpzctl_nfields; i++) {
		if (strlen(hpzctl_fields[i].name) > w)
			w = strlen(hpzctl_fields[i].name);
	}
	printf("%-*s  %s\n", (int)w, "socket", cli_socket());
	printf("%-*s  %s\n", (int)w, "version", st->version);
	for (i = 0; i < hpzctl_nfields; i++) {
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
	for (i = 0; i < hpzctl_nfields; i++) {
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
int
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
