/*
 * hpzctl-prom.c - hpzctl prometheus: the counters, the fault latency
 * histogram and each region's numbers in the Prometheus text exposition
 * format, on stdout or replacing a file atomically (for node_exporter's
 * textfile collector).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpz.h"
#include "cli.h"
#include "hpzctl.h"

static void	hpzctl_prom_label(FILE *, const char *);
static void	hpzctl_prom_fields(FILE *, const struct hpz_status *);
static int	hpzctl_prom_write(FILE *, const struct hpz_status *,
		    const struct hpz_region_info *, size_t);

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

	for (i = 0; i < hpzctl_nfields; i++) {
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
		for (j = i; j < hpzctl_nfields; j++) {
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
int
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
