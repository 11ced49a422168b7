/*
 * hpzctl-top.c - hpzctl top (and stats -w): the rates and fault latency
 * of each interval, worked out from two samples of the counters and the
 * regions, refreshed like top(1) until interrupted.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hpz.h"
#include "clock.h"
#include "size.h"
#include "cli.h"
#include "hpzctl.h"

static int	hpzctl_region_cmp(const void *, const void *);
static struct hpz_region_info *hpzctl_top_sample(struct hpz_status *,
		    size_t *);
static void	hpzctl_top_screen(const struct hpz_status *,
		    const struct hpz_status *, const struct hpz_region_info *,
		    size_t, const struct hpz_region_info *, size_t, double,
		    double);
static int	hpzctl_top_wait(const sigset_t *, double);

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
int
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
int
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
