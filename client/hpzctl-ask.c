/*
 * hpzctl-ask.c - what every hpzctl command uses of the command line and
 * the daemon: the usage, the questions (status, the regions) with their
 * errors said, and the command line's numbers (an interval, a count).
 * Under every command file; calls nothing of hpzctl's above it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpz.h"
#include "cli.h"
#include "hpzctl.h"

#define HPZCTL_MAX_REGIONS	4096
#define HPZCTL_INTERVAL_MIN	0.01
#define HPZCTL_INTERVAL_MAX	86400.0

/* Tell the user how to call us, on stdout for -h, on stderr for mistakes. */
void
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
	    "  reserve SIZE [--page 2m|1g] [--timeout S]\n"
	    "                       make SIZE of huge pages free for a program\n"
	    "                       that does not use hpzerod; the pool keeps\n"
	    "                       off them until taken or for S s (60)\n"
	    "options:\n"
	    "  -s, --socket socket  hpzerod's socket (default $HPZ_SOCKET,\n"
	    "                       then %s)\n"
	    "  -h, --help           this help\n"
	    "      --version        print the version\n", HPZ_SOCKET_DEFAULT);
}

/* Ask the daemon; on failure say where we looked and why it failed. */
int
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

/* Every region the daemon shows us; NULL (and a message) on failure. */
struct hpz_region_info *
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

/* A refresh interval in seconds, such as 0.5; exit 2 if it is not one. */
double
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
unsigned long
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
