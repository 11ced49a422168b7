/*
 * itest-hpzctl.c - hpzctl against the daemon run.sh started: status, stats,
 * top, the JSON and Prometheus outputs, its bad command lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "itest.h"

/* --- hpzctl --------------------------------------------------------------- */

static int
itest_run(const char *args, char *out, size_t outlen)
{
	const char	*dir = getenv("HPZ_BUILDDIR");
	char		 cmd[1024];
	FILE		*f;
	size_t		 n;
	int		 status;

	cr_assert_not_null(dir, "HPZ_BUILDDIR is not set");
	snprintf(cmd, sizeof(cmd), "%s/client/hpzctl %s 2>&1", dir, args);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	status = pclose(f);
	return (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

Test(hpzctl, status_answers)
{
	char	out[4096];

	cr_assert_eq(itest_run("status", out, sizeof(out)), 0, "%s", out);
	cr_assert_not_null(strstr(out, "faults"), "%s", out);
	cr_assert_not_null(strstr(out, HPZ_VERSION), "%s", out);
}

Test(hpzctl, status_without_daemon_fails)
{
	char	out[4096];

	cr_assert_eq(itest_run("-s /nonexistent/x.sock status", out,
	    sizeof(out)), 1, "%s", out);
}

Test(hpzctl, stats_json)
{
	char	out[8192];

	cr_assert_eq(itest_run("stats --json", out, sizeof(out)), 0, "%s", out);
	cr_assert_not_null(strstr(out, "\"faults\""), "%s", out);
	cr_assert_not_null(strstr(out, "\"bytes_registered\""), "%s", out);
	cr_assert_eq(out[0], '{', "%s", out);
}

/* --- hpzctl top and prometheus -------------------------------------------- */


/* Blocks of hpzctl top output, one starting at each "hpzerod " line. */
static int
itest_count_blocks(const char *out)
{
	const char	*p;
	int		 n = 0;

	for (p = out; (p = strstr(p, "hpzerod ")) != NULL; p++)
		if (p == out || p[-1] == '\n')
			n++;
	return (n);
}

Test(hpzctl, top_prints_count_blocks)
{
	static char	out[65536];

	cr_assert_eq(itest_run("top -n 2 -i 0.2", out, sizeof(out)), 0, "%s",
	    out);
	cr_assert_eq(itest_count_blocks(out), 2, "%s", out);
	cr_assert_not_null(strstr(out, "faults/s"), "%s", out);
	cr_assert_not_null(strstr(out, "\n\nhpzerod "), "no blank line between "
	    "blocks: %s", out);
	cr_assert_null(strstr(out, "\033["), "escapes on a pipe: %s", out);
}

Test(hpzctl, stats_watch_is_top)
{
	static char	out[65536];

	cr_assert_eq(itest_run("stats -w 0.1 -n 3", out, sizeof(out)), 0,
	    "%s", out);
	cr_assert_eq(itest_count_blocks(out), 3, "%s", out);
}

Test(hpzctl, prometheus_format)
{
	static char		 out[1 << 20];
	struct hpz_region	 r;
	regex_t			 re;
	char			*line, *save, *v, want[128];
	struct hpz_status	 st;
	unsigned long long	 prev = 0, cur, inf = 0, count = 0, total;
	int			 nbuckets = 0, have_inf = 0, have_count = 0;
	int			 i, b;

	/*
	 * A region of ours with some faults, so it has lines of its own, and
	 * faults the daemon served (garbage, no scrub to clear it first), so
	 * the histogram counts some even when this suite runs alone: the
	 * first touches of a fresh region are the kernel's.
	 */
	itest_create(&r, 8 * MiB, HPZ_PAGE_2M | HPZ_NO_SCRUB);
	itest_register(&r);
	memset(r.addr, 1, r.len);
	cr_assert_eq(hpz_reset(&r), 0, "reset: %s", hpz_last_error());
	itest_assert_zero(&r, "after reset");
	/* The histogram is updated after the fault is served: wait for it. */
	for (i = 0; i < 200; i++) {
		st = itest_status();
		for (total = 0, b = 0; b < HPZ_LATENCY_BUCKETS; b++)
			total += st.latency_hist[b];
		if (total > 0)
			break;
		usleep(10 * 1000);
	}

	cr_assert_eq(itest_run("prometheus", out, sizeof(out)), 0, "%s", out);
	snprintf(want, sizeof(want), "pid=\"%d\"", (int)getpid());
	cr_assert_not_null(strstr(out, want), "our region is missing: %s",
	    out);
	cr_assert_not_null(strstr(out,
	    "# TYPE hpzerod_fault_latency_seconds histogram\n"), "%s", out);
	cr_assert_not_null(strstr(out, "hpzerod_faults_total{kind=\"minor\"}"),
	    "%s", out);
	cr_assert_not_null(strstr(out, "\nhpzerod_info{version=\"" HPZ_VERSION
	    "\""), "%s", out);
	cr_assert_eq(regcomp(&re, "^[a-z_]+(\\{[^}]*\\})? [0-9.eE+-]+$",
	    REG_EXTENDED | REG_NOSUB), 0);
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#') {
			cr_assert(strncmp(line, "# HELP ", 7) == 0 ||
			    strncmp(line, "# TYPE ", 7) == 0, "%s", line);
			continue;
		}
		cr_assert_eq(regexec(&re, line, 0, NULL, 0), 0,
		    "bad line: '%s'", line);
		v = strrchr(line, ' ') + 1;
		cur = strtoull(v, NULL, 10);
		if (strncmp(line, "hpzerod_fault_latency_seconds_bucket{",
		    37) == 0) {
			cr_assert_geq(cur, prev, "buckets go down at '%s'",
			    line);
			prev = cur;
			nbuckets++;
			if (strstr(line, "le=\"+Inf\"") != NULL) {
				inf = cur;
				have_inf = 1;
			}
		} else if (strncmp(line,
		    "hpzerod_fault_latency_seconds_count ", 36) == 0) {
			count = cur;
			have_count = 1;
		}
	}
	regfree(&re);
	cr_assert(have_inf, "no +Inf bucket");
	cr_assert(have_count, "no _count");
	cr_assert_gt(nbuckets, 2);
	cr_assert_eq(inf, count, "+Inf bucket %llu, _count %llu", inf, count);
	cr_assert_gt(count, 0, "the faults above are not counted");
	hpz_region_destroy(&r);
}

Test(hpzctl, prometheus_to_file)
{
	char		 out[4096], big[1 << 16];
	FILE		*f;
	size_t		 n;
	const char	*path = "/tmp/hpzctl-itest.prom";

	unlink(path);
	unlink("/tmp/hpzctl-itest.prom.tmp");
	cr_assert_eq(itest_run("prometheus -o /tmp/hpzctl-itest.prom", out,
	    sizeof(out)), 0, "%s", out);
	cr_assert_eq(out[0], '\0', "output on stdout: %s", out);
	cr_assert_eq(access(path, F_OK), 0, "%s was not made", path);
	cr_assert_neq(access("/tmp/hpzctl-itest.prom.tmp", F_OK), 0,
	    "the .tmp file was left behind");
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(big, 1, sizeof(big) - 1, f);
	big[n] = '\0';
	fclose(f);
	cr_assert_not_null(strstr(big,
	    "hpzerod_fault_latency_seconds_bucket{le=\"+Inf\"}"), "%s", big);
	unlink(path);
}

Test(hpzctl, new_commands_bad_arguments)
{
	static const char *const bad[] = {
		"top -i abc", "top -i 0", "top -n 0", "top -n -1", "top -x",
		"top extra", "top -i", "stats -w 1 --json", "stats -n 2",
		"stats -w nan", "prometheus extra", "prometheus -o",
		"prometheus -q",
	};
	char		 out[4096];
	size_t		 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(itest_run(bad[i], out, sizeof(out)), 2,
		    "'%s': %s", bad[i], out);
}

Test(hpzctl, top_without_daemon_fails)
{
	char	out[4096];

	cr_assert_eq(itest_run("-s /nonexistent/x.sock top -n 1 -i 0.1", out,
	    sizeof(out)), 1, "%s", out);
	cr_assert_eq(itest_run("-s /nonexistent/x.sock prometheus", out,
	    sizeof(out)), 1, "%s", out);
}
