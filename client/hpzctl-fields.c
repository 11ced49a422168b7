/*
 * hpzctl-fields.c - the numbers of the daemon's answers, for every hpzctl
 * command: the counters, listed once from hpz-counters.h in
 * hpzctl_fields (the stats table's lines, the JSON keys and the
 * Prometheus metrics are made from it), and what is made of them (a
 * percentile, a rate, an uptime, a JSON number, a metric's head).  Under
 * every command file; calls nothing of hpzctl's above it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <json.h>

#include "hpz.h"
#include "cli.h"
#include "hpzctl.h"

#define HPZCTL_FIELD(f, kind, unit, prom, label, help) \
	{ #f, offsetof(struct hpz_status, f), #kind, unit, prom, label, help },

/* Every number, in the order of struct hpz_status. */
const struct hpzctl_field hpzctl_fields[] = {
	HPZ_COUNTERS_ALL(HPZCTL_FIELD, HPZCTL_FIELD)
};

const size_t	hpzctl_nfields = sizeof hpzctl_fields / sizeof hpzctl_fields[0];

/* Read one counter through the field table. */
unsigned long long
hpzctl_value(const struct hpz_status *st, const struct hpzctl_field *f)
{
	unsigned long long	 v;

	memcpy(&v, (const char *)st + f->offset, sizeof v);
	return (v);
}

/* Upper bound (ns) of the histogram bucket holding quantile q. */
unsigned long long
hpzctl_percentile(const struct hpz_status *st, double q)
{
	return (hpzctl_hist_percentile(st->latency_hist, st->fault_ns_max, q));
}

/*
 * The same for any latency histogram (a delta, for top); the last bucket
 * is open-ended, so max stands for its upper bound.
 */
unsigned long long
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

/* A rate in GB/s: bytes over ns is bytes a nanosecond; 0 for no time. */
double
hpzctl_gbs(unsigned long long bytes, unsigned long long ns)
{
	return (ns == 0 ? 0.0 : (double)bytes / (double)ns);
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

/* A metric's HELP and TYPE lines, in the Prometheus text format. */
void
hpzctl_prom_head(FILE *f, const char *name, const char *type,
    const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Uptime the way people say it: 3d04h05m06s, 1h02m03s, 2m03s, 7s. */
const char *
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
