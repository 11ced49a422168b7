/*
 * hpz-bench.c - benchmark hpzerod against the kernel's own first touch.
 *
 * A case is a page size (2 MiB, 1 GiB), a mode ("recycled": a registered
 * region written with a pattern, then hpz_reset; "fresh": a region just
 * registered) and a number of touching threads.  Each run of a case times
 * the kernel on a fresh shared hugetlb memfd of the same size (what a VMM
 * maps without hpzerod) and hpzerod (odd runs the kernel first, even runs
 * hpzerod first), so every hpzerod figure has a kernel figure from the
 * same run beside it; the table shows the median and min-max over the
 * runs.
 *
 * A touch: each thread takes a contiguous share of the region; for each
 * huge page of its share it times the first access (in the middle of the
 * page: that access is the fault), then the read of the 64 cache lines of
 * the subpage that faulted, then reads one byte of every 4 KiB.  Every
 * byte hpzerod served is read back and must be zero.
 *
 * The other modes measure the daemon's background work (daemon/scrub.c):
 * "idle-recycled" and "idle-premap" leave the region idle after hpz_reset
 * while polling hpz_status, to see how fast the SCHED_IDLE scrubbers clear
 * it (and, with HPZ_PREMAP, map it) before the touch; "idle-fresh-eager"
 * and "idle-fresh-eager-premap" do the same for a fresh region populated
 * by HPZ_AHEAD_EAGER; "onfault-ahead" touches a fresh HPZ_AHEAD_ONFAULT
 * region at once; "busy-recycled" touches a recycled region while the
 * scrubbers clear a second one, beside the same touch without it.
 *
 * The pool modes measure hpzerod's pre-zeroed pool (daemon/pool.c): after
 * an idle pause (until the pool holds the region, at most a second or -I),
 * hpz_region_create takes a pool file; "pool" touches it unregistered (a
 * page-cache hit a page, no zeroing), "pool-premap" has hpz_region_create
 * map the pool's pages (HPZ_PREMAP), "pool-register" registers it with
 * default flags first (each first touch a minor fault through the daemon).
 *
 * This file: the command line and main; bench.h says where the rest is.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "hpz.h"
#include "size.h"
#include "uffd-compat.h"
#include "cli.h"
#include "bench.h"

static void	bench_usage(FILE *);
#define bench_usage_error(...)	cli_usage_error(bench_usage, __VA_ARGS__)
static int	bench_parse_lists(struct bench *, int, const char *);
static void	bench_cpu(char *, size_t);

/* How to call us; on stdout for -h, on stderr after a mistake. */
static void
bench_usage(FILE *f)
{
	fprintf(f,
	    "usage: hpz-bench [-h] [--json] [-s socket] [-S size] [-r runs]\n"
	    "                 [-t threads,...] [-p 2m,1g] [-m mode,...|all]\n"
	    "                 [-I ms]\n"
	    "  -s socket   hpzerod's socket (default $HPZ_SOCKET,\n"
	    "              then %s)\n"
	    "  -S size     region size with K, M, G or T (default 1G; for 1g\n"
	    "              pages rounded up to whole pages)\n"
	    "  -r runs     runs a case (default %d)\n"
	    "  -t list     touching threads (default 1,2)\n"
	    "  -p list     page sizes (default 2m,1g)\n"
	    "  -m list     modes (default recycled,fresh), or all:\n"
	    "              recycled, fresh, fresh-discard, idle-recycled,\n"
	    "              idle-premap, idle-fresh-eager,\n"
	    "              idle-fresh-eager-premap, onfault-ahead,\n"
	    "              busy-recycled, pool, pool-premap, pool-register\n"
	    "  -I ms       idle time of the idle-* modes (default: twice the\n"
	    "              region at the single-core clear bandwidth, at\n"
	    "              least %d ms); the most the pool modes wait for\n"
	    "              the pool (default 1000 ms)\n"
	    "  --json      one JSON object on stdout instead of the table\n"
	    "exit status: 0 done (cases may be skipped), 1 failure or a"
	    " non-zero byte, 2 usage\n", HPZ_SOCKET_DEFAULT, BENCH_RUNS,
	    BENCH_IDLE_MIN_MS);
}

/*
 * -t, -p or -m: a comma-separated list, no empty item, no repeat, of
 * thread counts, or indexes in bench_pages or bench_modes.
 */
static int
bench_parse_lists(struct bench *b, int opt, const char *arg)
{
	char		 item[32];
	const char	*s = arg, *comma, *name;
	size_t		 len;
	int		*list, *count, max, n = 0, i, v;

	if (opt == 't') {
		list = b->threads;
		count = &b->nthreads;
		max = BENCH_MAX_LIST;
	} else if (opt == 'p') {
		list = b->pages;
		count = &b->npages;
		max = (int)BENCH_NPAGES;
	} else {
		list = b->modes;
		count = &b->nmodes;
		max = (int)BENCH_NMODES;
	}
	do {
		comma = strchr(s, ',');
		len = comma != NULL ? (size_t)(comma - s) : strlen(s);
		if (len == 0 || len >= sizeof item || n == max)
			return (-1);
		memcpy(item, s, len);
		item[len] = '\0';
		s += len + (comma != NULL);
		if (opt == 'm' && strcmp(item, "all") == 0 && n == 0 &&
		    comma == NULL) {
			for (n = 0; n < max; n++)
				list[n] = n;
			break;
		}
		if (opt == 't') {
			if (cli_parse_int(item, 1, BENCH_MAX_THREADS, &v) != 0)
				return (-1);
		} else {
			for (v = 0; v < max; v++) {
				name = opt == 'p' ? bench_pages[v].name :
				    bench_modes[v].name;
				if (strcmp(item, name) == 0)
					break;
			}
			if (v == max)
				return (-1);
		}
		for (i = 0; i < n; i++)
			if (list[i] == v)
				return (-1);
		list[n++] = v;
	} while (comma != NULL);
	*count = n;
	return (0);
}

/* The CPU's model name, for the record. */
static void
bench_cpu(char *buf, size_t len)
{
	char	 line[256], *v;
	FILE	*f;

	snprintf(buf, len, "unknown CPU");
	if ((f = fopen("/proc/cpuinfo", "r")) == NULL)
		return;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "model name", 10) != 0 ||
		    (v = strchr(line, ':')) == NULL)
			continue;
		v += strspn(v, ": \t");
		v[strcspn(v, "\n")] = '\0';
		snprintf(buf, len, "%s", v);
		break;
	}
	fclose(f);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument,	NULL, 'j' },
		{ "help",	no_argument,	NULL, 'h' },
		{ NULL,		0,		NULL, 0 }
	};
	struct bench		 b;
	struct bench_case	*c;
	int			 ch, i, j, k, f, s, rc = 0, error;

	cli_prog = "hpz-bench";
	memset(&b, 0, sizeof b);
	b.runs = BENCH_RUNS;
	b.size = 1UL << 30;
	b.idle_ms = -1;
	opterr = 0;	/* our own words, not getopt's */
	while ((ch = getopt_long(argc, argv, ":hs:S:r:t:p:m:I:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'h':
			bench_usage(stdout);
			return (0);
		case 'j':
			b.json = 1;
			break;
		case 's':
			cli_socket_option(bench_usage, optarg);
			break;
		case 'S':
			/* The warm-up maps more: far from overflow. */
			b.size = cli_size_arg(bench_usage, ch, optarg,
			    SIZE_MAX / 8);
			b.size_set = 1;
			break;
		case 'r':
			b.runs = cli_int_arg(bench_usage, ch, optarg, 1,
			    BENCH_MAX_RUNS, "runs");
			break;
		case 't':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-t: want up to %d distinct"
				    " thread counts from 1 to %d, comma"
				    " separated, not '%s'", BENCH_MAX_LIST,
				    BENCH_MAX_THREADS, optarg);
			break;
		case 'p':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-p: want 2m, 1g or both,"
				    " comma separated, not '%s'", optarg);
			break;
		case 'm':
			if (bench_parse_lists(&b, ch, optarg) != 0)
				bench_usage_error("-m: want distinct modes"
				    " (see below), comma separated, or all,"
				    " not '%s'", optarg);
			break;
		case 'I':
			b.idle_ms = cli_int_arg(bench_usage, ch, optarg, 0,
			    BENCH_IDLE_MAX_MS, "ms");
			break;
		default:
			cli_bad_option(bench_usage, "", ch, argv);
		}
	}
	cli_no_more_args(bench_usage, "", optind, argc, argv);
	if (b.nthreads == 0)
		bench_parse_lists(&b, 't', "1,2");
	if (b.npages == 0)
		bench_parse_lists(&b, 'p', "2m,1g");
	if (b.nmodes == 0)
		bench_parse_lists(&b, 'm', "recycled,fresh");
	if (b.size % bench_pages[0].size != 0)
		bench_usage_error("-S: %zu is not a multiple of 2 MiB", b.size);
	b.socket = cli_socket();
	bench_cpu(b.cpu, sizeof b.cpu);

	/* Is the daemon there at all, before we spend time measuring? */
	if ((error = hpz_status(&b.status)) != 0) {
		bench_run_error(&b, "hpz_status", error);
		return (BENCH_EXIT_FAIL);
	}
	fprintf(stderr, "hpz-bench: measuring the single-core clear"
	    " bandwidth\n");
	bench_touch_nt(&b);
	b.clock_ns = bench_touch_clock();

	b.ncases = b.npages * b.nmodes * b.nthreads;
	b.cases = cli_alloc((size_t)b.ncases * sizeof *b.cases);
	c = b.cases;
	for (i = 0; i < b.npages; i++) {
		for (j = 0; j < b.nmodes; j++) {
			for (k = 0; k < b.nthreads; k++, c++) {
				c->page = &bench_pages[b.pages[i]];
				c->mode = b.modes[j];
				c->threads = b.threads[k];
				/* 1 GiB pages: whole pages, at least one. */
				c->size = (b.size + c->page->size - 1) /
				    c->page->size * c->page->size;
				for (s = 0; s < c->threads; s++) {
					size_t lo, hi;

					bench_touch_share(c->size,
					    c->page->size,
					    c->threads, s, &lo, &hi);
					c->samples += bench_touch_pieces(lo, hi,
					    c->page->size);
				}
				for (f = 0; f < BENCH_NFIGS; f++)
					for (s = 0; s < BENCH_NSIDES; s++)
						c->fig[f][s] = cli_alloc(
						    (size_t)b.runs *
						    sizeof(double));
				c->reset_ms = cli_alloc((size_t)b.runs *
				    sizeof(double));
				c->bound_ms = cli_alloc((size_t)b.runs *
				    sizeof(double));
				c->bound_ratio = cli_alloc((size_t)b.runs *
				    sizeof(double));
				c->bound_hpz = cli_alloc((size_t)b.runs *
				    sizeof(double));
				for (f = 0; f < BENCH_NX; f++)
					c->x[f] = cli_alloc((size_t)b.runs *
					    sizeof(double));
				for (f = 0; f < BENCH_NFIGS; f++)
					for (s = 0; s < 2; s++)
						c->quiet[f][s] = cli_alloc(
						    (size_t)b.runs *
						    sizeof(double));
			}
		}
	}

	for (i = 0; i < b.ncases && rc == 0; i++)
		rc = bench_run_case(&b, &b.cases[i]);
	if (rc == 0)
		rc = b.json ? bench_json(&b) : (bench_text(&b), 0);
	if (rc == 0 && fflush(stdout) != 0)
		rc = BENCH_EXIT_FAIL;

	for (i = 0; i < b.ncases; i++) {
		for (f = 0; f < BENCH_NFIGS; f++)
			for (s = 0; s < BENCH_NSIDES; s++)
				free(b.cases[i].fig[f][s]);
		free(b.cases[i].reset_ms);
		free(b.cases[i].bound_ms);
		free(b.cases[i].bound_ratio);
		free(b.cases[i].bound_hpz);
		for (f = 0; f < BENCH_NX; f++)
			free(b.cases[i].x[f]);
		for (f = 0; f < BENCH_NFIGS; f++)
			for (s = 0; s < 2; s++)
				free(b.cases[i].quiet[f][s]);
	}
	free(b.cases);
	return (rc);
}
