/*
 * test-conf.c - unit tests of the settings (conf.c, conf-file.c): the key
 * table (defaults, every key written back and read again, the messages and
 * their ranges, the option's spellings, SIGHUP's keys), every refused value
 * of a file with its line, and the quirks of libinih that conf-file.c
 * smooths over (indented lines, long lines, inline comments).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "hpz.h"
#include "hpz-state.h"

#include "clear.h"
#include "conf.h"
#include "plan.h"
#include "topo.h"
#include "worker.h"


#define KiB		1024ULL
#define MiB		(1024ULL * KiB)
#define GiB		(1024ULL * MiB)

/* --- helpers ------------------------------------------------------------ */

/* A temporary file holding text; the caller unlinks it. */
static void
write_conf(const char *text, char *path, size_t len)
{
	const char	*dir = getenv("TMPDIR");
	FILE		*f;
	int		 fd;

	snprintf(path, len, "%s/test-conf-XXXXXX",
	    dir != NULL && *dir != '\0' ? dir : "/tmp");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0, "mkstemp %s: %s", path, strerror(errno));
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	cr_assert_neq(fputs(text, f), EOF);
	cr_assert_eq(fclose(f), 0);
}

/* conf_load of text; path gets the (already removed) file's name. */
static int
load(const char *text, struct conf *c, char *why, size_t whylen, char *path,
    size_t pathlen)
{
	int	r;

	write_conf(text, path, pathlen);
	why[0] = '\0';
	r = conf_load(path, c, why, whylen);
	unlink(path);
	return (r);
}

/* A conf unlike the defaults in every field, to see what a load touches. */
static void
odd_conf(struct conf *c)
{
	conf_defaults(c);
	snprintf(c->socket, sizeof(c->socket), "/odd.sock");
	c->workers = 7;
	snprintf(c->clear_kernel, sizeof(c->clear_kernel), "sse2-nt");
	snprintf(c->hot_kernel, sizeof(c->hot_kernel), "memset");
	c->hot_size = 8 * KiB;
	c->extent = 512 * KiB;
	c->spin_us = 3;
	c->route = ROUTE_HASH;
	c->split = 0;
	c->scrub = 0;
	c->scrub_threads = 5;
	c->background_gbs = 1.5;
	c->client_gbs = 0.25;
	c->ahead_min = 8 * MiB;
	c->ahead_max = 16 * MiB;
	c->uid_state_bytes = 5 * MiB;
	c->region_pages = 77;
	c->uid_stuck_contexts = 3;
	c->uid_contexts = 5;
	c->ctx_threads = 7;
	c->map_bytes = 3 * GiB;
	c->region_forks = 9;
}

/* The load must fail with -EINVAL, say "path:line: ", and leave c alone. */
static void
expect_bad(const char *text, int line, const char *needle)
{
	struct conf	c, saved;
	char		why[512], path[256], prefix[300];
	int		r;

	odd_conf(&c);
	memcpy(&saved, &c, sizeof(saved));
	r = load(text, &c, why, sizeof(why), path, sizeof(path));
	cr_assert_eq(r, -EINVAL, "accepted or wrong error %d for:\n%s", r,
	    text);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	cr_assert_eq(strncmp(why, prefix, strlen(prefix)), 0,
	    "why '%s' does not start '%s' for:\n%s", why, prefix, text);
	if (needle != NULL)
		cr_assert_not_null(strstr(why, needle),
		    "why '%s' lacks '%s'", why, needle);
	cr_assert_eq(memcmp(&c, &saved, sizeof(c)), 0,
	    "conf changed by a refused file:\n%s", text);
}

/* The load must succeed; returns the conf it started from, changed. */
static void
expect_good(const char *text, struct conf *c)
{
	char	why[512], path[256];
	int	r;

	r = load(text, c, why, sizeof(why), path, sizeof(path));
	cr_assert_eq(r, 0, "refused (%d: %s):\n%s", r, why, text);
}

struct bad_value {
	const char	*section;
	const char	*key;
	const char	*value;
};

/* Each value in its section, on line 4 after a comment and a good key. */
static void
expect_bad_values(const struct bad_value *bad, size_t n)
{
	char	text[1024], needle[300];
	size_t	i;

	for (i = 0; i < n; i++) {
		snprintf(text, sizeof(text), "; line 1\n[daemon]\n"
		    "workers = 2\n[%s]\n%s = %s\n", bad[i].section,
		    bad[i].key, bad[i].value);
		snprintf(needle, sizeof(needle), "%s must be ", bad[i].key);
		expect_bad(text, 5, needle);
		snprintf(needle, sizeof(needle), "not '%s'", bad[i].value);
		expect_bad(text, 5, needle);
	}
}

/* --- defaults ------------------------------------------------------------ */

Test(conf, defaults)
{
	struct conf	c;

	memset(&c, 0xa5, sizeof(c));
	conf_defaults(&c);
	cr_assert_str_eq(c.socket, HPZ_SOCKET_DEFAULT);
	cr_assert_str_eq(c.socket, "/run/hpzerod/hpzerod.sock");
	cr_assert_eq(c.workers, 0);
	cr_assert_str_eq(c.clear_kernel, "");
	cr_assert_str_eq(c.hot_kernel, "");
	cr_assert_eq(c.hot_size, PLAN_HOT_DEFAULT);
	cr_assert_eq(c.hot_size, 64 * KiB);
	cr_assert_eq(c.extent, 0);
	cr_assert_eq(c.spin_us, 50);
	cr_assert_eq(c.route, ROUTE_READER);
	cr_assert_eq(c.split, 1);
	cr_assert_eq(c.scrub, 1);
	cr_assert_eq(c.scrub_threads, 0);
	cr_assert_float_eq(c.background_gbs, 0.0, 1e-12);
	cr_assert_float_eq(c.client_gbs, 0.0, 1e-12);
	cr_assert_eq(c.ahead_min, 4 * MiB);
	cr_assert_eq(c.ahead_max, 256 * MiB);
}

/* --- conf_parse_bytes ---------------------------------------------------- */

Test(conf, parse_bytes_good)
{
	static const struct {
		const char	*s;
		uint64_t	 v;
	} good[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "64K", 64 * KiB },
		{ "64k", 64 * KiB },
		{ "2M", 2 * MiB },
		{ "2m", 2 * MiB },
		{ "1G", GiB },
		{ "1g", GiB },
		{ "1T", 1024 * GiB },
		{ "0K", 0 },
		{ "007", 7 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ULL << 40 },
		{ "17179869183G", 17179869183ULL << 30 },
	};
	uint64_t	v;
	size_t		i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 12345;
		cr_assert_eq(conf_parse_bytes(good[i].s, &v), 0, "'%s' refused",
		    good[i].s);
		cr_assert_eq(v, good[i].v, "'%s' gave %llu", good[i].s,
		    (unsigned long long)v);
	}
}

Test(conf, parse_bytes_bad)
{
	static const char	*bad[] = {
		"", "-1", "-0", "+1", " 1", "1 ", "K", "1KB", "1KiB", "1.5M",
		"0x10", "1P", "1e3", "abc", "12a", "2MM",
		"18446744073709551616", "99999999999999999999999",
		"16777216T", "17179869184G", "17592186044416M",
	};
	uint64_t	v = 12345;
	size_t		i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(conf_parse_bytes(bad[i], &v), -1, "'%s' accepted",
		    bad[i]);
		cr_assert_eq(v, 12345, "'%s' wrote the result", bad[i]);
	}
}

/* --- good files ---------------------------------------------------------- */

Test(conf, full_file_sets_every_field)
{
	struct conf	c;

	conf_defaults(&c);
	expect_good(
	    "[daemon]\n"
	    "socket = /tmp/hpz test.sock\n"
	    "workers = 12\n"
	    "[clear]\n"
	    "kernel = rep-stosb\n"
	    "hot_kernel = memset\n"
	    "hot_size = 128K\n"
	    "extent = 2M\n"
	    "[workers]\n"
	    "spin_us = 0\n"
	    "route = thread\n"
	    "split = no\n"
	    "[background]\n"
	    "scrub = off\n"
	    "threads = 3\n"
	    "gbs = 12.5\n"
	    "client_gbs = 0.75\n"
	    "ahead_min = 2M\n"
	    "ahead_max = 1G\n", &c);
	cr_assert_str_eq(c.socket, "/tmp/hpz test.sock");
	cr_assert_eq(c.workers, 12);
	cr_assert_str_eq(c.clear_kernel, "rep-stosb");
	cr_assert_str_eq(c.hot_kernel, "memset");
	cr_assert_eq(c.hot_size, 128 * KiB);
	cr_assert_eq(c.extent, 2 * MiB);
	cr_assert_eq(c.spin_us, 0);
	cr_assert_eq(c.route, ROUTE_THREAD);
	cr_assert_eq(c.split, 0);
	cr_assert_eq(c.scrub, 0);
	cr_assert_eq(c.scrub_threads, 3);
	cr_assert_float_eq(c.background_gbs, 12.5, 1e-12);
	cr_assert_float_eq(c.client_gbs, 0.75, 1e-12);
	cr_assert_eq(c.ahead_min, 2 * MiB);
	cr_assert_eq(c.ahead_max, GiB);
}

Test(conf, limits_accepted)
{
	struct conf	c;

	conf_defaults(&c);
	expect_good("[daemon]\nworkers = 256\n[clear]\nhot_size = 1G\n"
	    "extent = 64M\n[workers]\nspin_us = 100000\n[background]\n"
	    "threads = 256\ngbs = 0\nclient_gbs = 1000000\n", &c);
	cr_assert_eq(c.workers, 256);
	cr_assert_eq(c.hot_size, GiB);
	cr_assert_eq(c.extent, 64 * MiB);
	cr_assert_eq(c.spin_us, 100000);
	cr_assert_eq(c.scrub_threads, 256);
	cr_assert_float_eq(c.client_gbs, 1e6, 1e-6);
	expect_good("[daemon]\nworkers = 0\n[clear]\nhot_size = 0\n"
	    "extent = 256K\n[background]\nthreads = 0\n", &c);
	cr_assert_eq(c.workers, 0);
	cr_assert_eq(c.hot_size, 0);
	cr_assert_eq(c.extent, 256 * KiB);
	cr_assert_eq(c.scrub_threads, 0);
}

Test(conf, partial_file_keeps_the_rest)
{
	struct conf	c, want;

	odd_conf(&c);
	memcpy(&want, &c, sizeof(want));
	expect_good("[workers]\nspin_us = 77\n", &c);
	want.spin_us = 77;
	cr_assert_eq(memcmp(&c, &want, sizeof(c)), 0);

	expect_good("[background]\ngbs = 3\n", &c);
	want.background_gbs = 3;
	cr_assert_eq(memcmp(&c, &want, sizeof(c)), 0);
}

Test(conf, empty_file_changes_nothing)
{
	struct conf	c, want;

	odd_conf(&c);
	memcpy(&want, &c, sizeof(want));
	expect_good("", &c);
	cr_assert_eq(memcmp(&c, &want, sizeof(c)), 0);
	expect_good("\n\n; nothing\n# at all\n[daemon]\n[background]\n", &c);
	cr_assert_eq(memcmp(&c, &want, sizeof(c)), 0);
}

Test(conf, auto_clears_a_previous_choice)
{
	struct conf	c;

	odd_conf(&c);
	expect_good("[clear]\nkernel = auto\nhot_kernel = auto\n"
	    "extent = auto\n", &c);
	cr_assert_str_eq(c.clear_kernel, "");
	cr_assert_str_eq(c.hot_kernel, "");
	cr_assert_eq(c.extent, 0);
}

Test(conf, every_kernel_name)
{
	static const char	*bulk[] = { "avx512-nt", "avx2-nt", "sse2-nt",
		"rep-stosb", "memset" };
	static const char	*hot[] = { "rep-stosb", "memset" };
	struct conf		 c;
	char			 text[128];
	size_t			 i;

	conf_defaults(&c);
	for (i = 0; i < sizeof(bulk) / sizeof(bulk[0]); i++) {
		snprintf(text, sizeof(text), "[clear]\nkernel = %s\n", bulk[i]);
		expect_good(text, &c);
		cr_assert_str_eq(c.clear_kernel, bulk[i]);
	}
	for (i = 0; i < sizeof(hot) / sizeof(hot[0]); i++) {
		snprintf(text, sizeof(text), "[clear]\nhot_kernel = %s\n",
		    hot[i]);
		expect_good(text, &c);
		cr_assert_str_eq(c.hot_kernel, hot[i]);
	}
}

Test(conf, every_route)
{
	struct conf	c;

	odd_conf(&c);
	expect_good("[workers]\nroute = reader\n", &c);
	cr_assert_eq(c.route, ROUTE_READER);
	expect_good("[workers]\nroute = thread\n", &c);
	cr_assert_eq(c.route, ROUTE_THREAD);
	expect_good("[workers]\nroute = hash\n", &c);
	cr_assert_eq(c.route, ROUTE_HASH);
}

Test(conf, bool_spellings)
{
	static const char	*yes[] = { "yes", "on", "true", "1", "YES",
		"On", "True" };
	static const char	*no[] = { "no", "off", "false", "0", "NO",
		"Off", "FALSE" };
	struct conf		 c;
	char			 text[128];
	size_t			 i;

	conf_defaults(&c);
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		c.split = c.scrub = 0;
		snprintf(text, sizeof(text), "[workers]\nsplit = %s\n"
		    "[background]\nscrub = %s\n", yes[i], yes[i]);
		expect_good(text, &c);
		cr_assert_eq(c.split, 1, "split = %s", yes[i]);
		cr_assert_eq(c.scrub, 1, "scrub = %s", yes[i]);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		c.split = c.scrub = 1;
		snprintf(text, sizeof(text), "[workers]\nsplit = %s\n"
		    "[background]\nscrub = %s\n", no[i], no[i]);
		expect_good(text, &c);
		cr_assert_eq(c.split, 0, "split = %s", no[i]);
		cr_assert_eq(c.scrub, 0, "scrub = %s", no[i]);
	}
}

Test(conf, comments_blanks_and_spaces)
{
	struct conf	c;

	conf_defaults(&c);
	expect_good(
	    "; a comment\n"
	    "# another\n"
	    "\n"
	    "   \n"
	    "[workers]   ; inline after a section\n"
	    "\t; indented comment\n"
	    "spin_us=9\n"
	    "   route   =   hash   ; inline comment\n"
	    "\n"
	    "[background]\r\n"
	    "gbs = 2.5\t; tab before the comment\r\n"
	    "threads: 4\r\n", &c);
	cr_assert_eq(c.spin_us, 9);
	cr_assert_eq(c.route, ROUTE_HASH);
	cr_assert_float_eq(c.background_gbs, 2.5, 1e-12);
	cr_assert_eq(c.scrub_threads, 4);
}

/* inih takes an indented line for more of the previous value; we do not. */
Test(conf, indented_keys_are_keys)
{
	struct conf	c;

	conf_defaults(&c);
	expect_good("[workers]\n  spin_us = 10\n  route = thread\n"
	    "\tsplit = off\n", &c);
	cr_assert_eq(c.spin_us, 10);
	cr_assert_eq(c.route, ROUTE_THREAD);
	cr_assert_eq(c.split, 0);
}

Test(conf, last_of_a_repeated_key_wins)
{
	struct conf	c;

	conf_defaults(&c);
	expect_good("[workers]\nspin_us = 1\n[daemon]\nworkers = 3\n"
	    "[workers]\nspin_us = 2\n", &c);
	cr_assert_eq(c.spin_us, 2);
	cr_assert_eq(c.workers, 3);
}

Test(conf, socket_length)
{
	struct conf	c;
	char		path[108], text[256];

	conf_defaults(&c);
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[107] = '\0';		/* 107 bytes: fits sun_path */
	snprintf(text, sizeof(text), "[daemon]\nsocket = %s\n", path);
	expect_good(text, &c);
	cr_assert_str_eq(c.socket, path);
	snprintf(text, sizeof(text), "[daemon]\nsocket = %sa\n", path);
	expect_bad(text, 2, "socket must be a path of 1 to 107 bytes");
	expect_bad("[daemon]\nsocket =\n", 2, "socket must be");
}

/* --- bad values ---------------------------------------------------------- */

Test(conf, bad_daemon_values)
{
	static const struct bad_value	bad[] = {
		{ "daemon", "workers", "-1" },
		{ "daemon", "workers", "257" },
		{ "daemon", "workers", "1000000000000" },
		{ "daemon", "workers", "two" },
		{ "daemon", "workers", "4x" },
		{ "daemon", "workers", "" },
		{ "daemon", "workers", "+4" },
		{ "daemon", "workers", "4.0" },
		{ "daemon", "socket", "" },
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

Test(conf, bad_clear_values)
{
	static const struct bad_value	bad[] = {
		{ "clear", "kernel", "avx3-nt" },
		{ "clear", "kernel", "" },
		{ "clear", "kernel", "AVX2-NT" },
		{ "clear", "kernel", "Auto" },
		{ "clear", "hot_kernel", "avx512-nt" },
		{ "clear", "hot_kernel", "avx2-nt" },
		{ "clear", "hot_kernel", "sse2-nt" },
		{ "clear", "hot_kernel", "fast" },
		{ "clear", "hot_size", "2G" },
		{ "clear", "hot_size", "1073741825" },
		{ "clear", "hot_size", "-64K" },
		{ "clear", "hot_size", "64KB" },
		{ "clear", "hot_size", "" },
		{ "clear", "extent", "0" },
		{ "clear", "extent", "128K" },
		{ "clear", "extent", "262143" },
		{ "clear", "extent", "65M" },
		{ "clear", "extent", "1G" },
		{ "clear", "extent", "big" },
		{ "clear", "extent", "" },
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

Test(conf, bad_workers_values)
{
	static const struct bad_value	bad[] = {
		{ "workers", "spin_us", "-1" },
		{ "workers", "spin_us", "100001" },
		{ "workers", "spin_us", "50us" },
		{ "workers", "spin_us", "" },
		{ "workers", "route", "fast" },
		{ "workers", "route", "Reader" },
		{ "workers", "route", "" },
		{ "workers", "split", "maybe" },
		{ "workers", "split", "2" },
		{ "workers", "split", "y" },
		{ "workers", "split", "" },
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

Test(conf, bad_background_values)
{
	static const struct bad_value	bad[] = {
		{ "background", "scrub", "sometimes" },
		{ "background", "scrub", "" },
		{ "background", "threads", "-1" },
		{ "background", "threads", "257" },
		{ "background", "threads", "all" },
		{ "background", "gbs", "-1" },
		{ "background", "gbs", "-0.5" },
		{ "background", "gbs", "fast" },
		{ "background", "gbs", "inf" },
		{ "background", "gbs", "nan" },
		{ "background", "gbs", "1e999" },
		{ "background", "gbs", "0x10" },
		{ "background", "gbs", "5GB/s" },
		{ "background", "gbs", "" },
		{ "background", "client_gbs", "-2" },
		{ "background", "client_gbs", "lots" },
		{ "background", "client_gbs", "" },
		{ "background", "ahead_min", "-4M" },
		{ "background", "ahead_min", "4MB" },
		{ "background", "ahead_min", "99999999999999999999" },
		{ "background", "ahead_min", "" },
		{ "background", "ahead_max", "1P" },
		{ "background", "ahead_max", "x" },
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

Test(conf, route_message_exact)
{
	struct conf	c;
	char		why[512], path[256], want[512];

	conf_defaults(&c);
	cr_assert_eq(load("[workers]\nspin_us = 1\nroute = fast\n", &c, why,
	    sizeof(why), path, sizeof(path)), -EINVAL);
	snprintf(want, sizeof(want), "%s:3: route must be reader, thread or "
	    "hash, not 'fast'", path);
	cr_assert_str_eq(why, want);
	cr_assert_eq(c.spin_us, 50, "a refused file changed spin_us");
}

Test(conf, unknown_key)
{
	struct conf	c;
	char		why[512], path[256], want[512];

	conf_defaults(&c);
	cr_assert_eq(load("; hpzerod.conf\n\n[workers]\nroute = hash\n\n"
	    "# spin less\nspin = 5\n", &c, why, sizeof(why), path,
	    sizeof(path)), -EINVAL);
	snprintf(want, sizeof(want), "%s:7: unknown key 'spin' in [workers]",
	    path);
	cr_assert_str_eq(why, want);
	cr_assert_eq(c.route, ROUTE_READER);
	/* A key of another section is unknown here. */
	expect_bad("[daemon]\nspin_us = 5\n", 2, "unknown key 'spin_us' in "
	    "[daemon]");
	/* Names are case-sensitive. */
	expect_bad("[workers]\nSpin_us = 5\n", 2, "unknown key 'Spin_us'");
}

Test(conf, unknown_section)
{
	expect_bad("[daemon]\nworkers = 1\n[backgroud]\nscrub = no\n", 4,
	    "key 'scrub' is in unknown section [backgroud]");
	expect_bad("[Workers]\nspin_us = 1\n", 2, "unknown section [Workers]");
	expect_bad("workers = 1\n", 1, "key 'workers' is outside any section");
}

Test(conf, first_error_wins)
{
	expect_bad("[workers]\nspin_us = x\nroute = y\n", 2, "spin_us");
	/* A line inih cannot parse, before one we refuse. */
	expect_bad("[workers]\nspin_us 5\nroute = y\n", 2, "syntax error");
	/* One we refuse, before a line inih cannot parse. */
	expect_bad("[workers]\nroute = y\nspin_us 5\n", 2, "route");
}

Test(conf, syntax_errors)
{
	expect_bad("[daemon]\nworkers = 1\njunk\n", 3, "syntax error");
	expect_bad("; c\n[daemon\nworkers = 1\n", 2, "syntax error");
}

/* inih's comments: ';' after a blank only; '#' only at the start. */
Test(conf, comment_rules)
{
	struct conf	c;

	expect_bad("[workers]\nroute = hash;fast\n", 2, "not 'hash;fast'");
	expect_bad("[workers]\nroute = hash # fast\n", 2,
	    "not 'hash # fast'");
	conf_defaults(&c);
	expect_good("[workers]\nroute = hash ;fast\n", &c);
	cr_assert_eq(c.route, ROUTE_HASH);
}

/* inih would split it in two and miscount every line after. */
Test(conf, long_line_refused_on_its_line)
{
	struct conf	c;
	char		text[1024];

	conf_defaults(&c);
	snprintf(text, sizeof(text), "[daemon]\nworkers = 1\n"
	    "socket = /%0400d\n[workers]\nroute = hash\n", 0);
	expect_bad(text, 3, "line longer than");
	/* A long comment is still a comment, and the count stays right. */
	snprintf(text, sizeof(text), "[daemon]\n; %0400d\nworkers = x\n", 0);
	expect_bad(text, 3, "workers must be");
	snprintf(text, sizeof(text), "[daemon]\n  # %0400d", 0);
	expect_good(text, &c);
}

Test(conf, ahead_min_above_ahead_max)
{
	struct conf	c;

	/* Order in the file does not matter, only the end result. */
	conf_defaults(&c);
	expect_good("[background]\nahead_min = 512M\nahead_max = 1G\n", &c);
	cr_assert_eq(c.ahead_min, 512 * MiB);
	cr_assert_eq(c.ahead_max, GiB);
	expect_good("[background]\nahead_min = 2M\nahead_max = 2M\n", &c);
	cr_assert_eq(c.ahead_min, 2 * MiB);
	cr_assert_eq(c.ahead_max, 2 * MiB);

	expect_bad("[background]\nahead_max = 4M\nahead_min = 8M\n\n", 3,
	    "ahead_min (8M) is larger than ahead_max (4M)");
	expect_bad("[background]\nahead_min = 8M\nahead_max = 4M\n", 3,
	    "ahead_min (8M) is larger than ahead_max (4M)");
	/* Against a value the file does not set. */
	expect_bad("[background]\nahead_max = 1M\n", 2, "ahead_max (1M)");
}

Test(conf, missing_file)
{
	struct conf	c, saved;
	char		why[512], want[512];
	const char	*path = "/nonexistent/hpzerod-test/hpzerod.conf";

	odd_conf(&c);
	memcpy(&saved, &c, sizeof(saved));
	cr_assert_eq(conf_load(path, &c, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "cannot open %s: No such file or "
	    "directory", path);
	cr_assert_str_eq(why, want);
	cr_assert_eq(memcmp(&c, &saved, sizeof(c)), 0);
}

/* fopen takes a directory; reading it fails, and that must show. */
Test(conf, directory_refused)
{
	struct conf	c, saved;
	char		why[512];

	odd_conf(&c);
	memcpy(&saved, &c, sizeof(saved));
	cr_assert_eq(conf_load("/", &c, why, sizeof(why)), -EISDIR, "%s", why);
	cr_assert_not_null(strstr(why, "/: Is a directory"), "%s", why);
	cr_assert_eq(memcmp(&c, &saved, sizeof(c)), 0);
}

Test(conf, short_why_buffer)
{
	struct conf	c;
	char		why[16], path[256];

	memset(why, 'x', sizeof(why));
	conf_defaults(&c);
	cr_assert_eq(load("[workers]\nroute = fast\n", &c, why, 8, path,
	    sizeof(path)), -EINVAL);
	cr_assert_eq(strlen(why), 7);
	cr_assert_eq(why[8], 'x', "wrote past whylen");
}

Test(conf, limits_section)
{
	struct conf	c;

	conf_defaults(&c);
	cr_assert_eq(c.uid_clients, 64);
	cr_assert_eq(c.uid_regions, 4096);
	cr_assert_eq(c.uid_bytes, 0);
	expect_good("[limits]\nclients = 3\nregions = 10\nbytes = 64G\n", &c);
	cr_assert_eq(c.uid_clients, 3);
	cr_assert_eq(c.uid_regions, 10);
	cr_assert_eq(c.uid_bytes, 64ULL << 30);
	expect_bad("[limits]\nclients = 2000\n", 2, "clients must be");
	expect_bad("[limits]\nregions = -1\n", 2, "regions must be");
	expect_bad("[limits]\nbytes = lots\n", 2, "bytes must be");
	/* The address space in all: 0 (the default) is derived at start. */
	conf_defaults(&c);
	cr_assert_eq(c.map_bytes, 0);
	expect_good("[limits]\nmap_bytes = 32T\nbytes = 8T\n", &c);
	cr_assert_eq(c.map_bytes, 32ULL << 40);
	cr_assert_eq(c.uid_bytes, 8ULL << 40);
	expect_bad("[limits]\nmap_bytes = -1\n", 2, "map_bytes must be");
}

/* The limits that bound what a region costs the daemon. */
Test(conf, region_cost_limits)
{
	static const struct bad_value	bad[] = {
		{ "limits", "state_bytes", "-1" },
		{ "limits", "state_bytes", "64MB" },
		{ "limits", "state_bytes", "lots" },
		{ "limits", "state_bytes", "" },
		{ "limits", "region_pages", "-16" },
		{ "limits", "region_pages", "16 pages" },
		{ "limits", "region_pages", "1P" },
		{ "limits", "region_pages", "" },
	};
	struct conf	c;

	conf_defaults(&c);
	/* A sparse 1 TiB region of 4 KiB pages (2^28 pages) is refused. */
	cr_assert_eq(c.region_pages, 16ULL << 20);
	cr_assert_lt(c.region_pages, 1ULL << 28);
	cr_assert_eq(c.uid_state_bytes, 64 * MiB);
	cr_assert_geq(c.uid_state_bytes, HPZ_STATE_SIZE(c.region_pages),
	    "one region of the most pages must fit a uid's state");
	expect_good("[limits]\nstate_bytes = 1G\nregion_pages = 4M\n", &c);
	cr_assert_eq(c.uid_state_bytes, GiB);
	cr_assert_eq(c.region_pages, 4ULL << 20);
	expect_good("[limits]\nregion_pages = 1000\nstate_bytes = 0\n", &c);
	cr_assert_eq(c.region_pages, 1000);
	cr_assert_eq(c.uid_state_bytes, 0);
	expect_good("[limits]\nregion_pages = 0\n", &c);
	cr_assert_eq(c.region_pages, 0, "0 is no limit");
	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

/* --- [pool] --------------------------------------------------------------- */

Test(conf, pool_defaults)
{
	struct conf	c;
	int		i;

	memset(&c, 0xa5, sizeof(c));
	conf_defaults(&c);
	cr_assert_eq(c.pool, 1);
	for (i = 0; i < TOPO_NODES_MAX; i++) {
		/* all: the pool follows the host (pool-fill.c). */
		cr_assert_eq(c.pool_size[0][i], UINT64_MAX);
		cr_assert_eq(c.pool_size[1][i], UINT64_MAX);
	}
	cr_assert_eq(c.pool_reserve[0], 2 * GiB);
	cr_assert_eq(c.pool_reserve[1], 2 * GiB);
	cr_assert_float_eq(c.pool_gbs, 0.0, 1e-12);
	cr_assert_eq(c.pool_uid_bytes, 0);
	cr_assert_eq(c.pool_uid_share, 100);
	cr_assert_eq(c.pool_quiet_ms, 2000);
	cr_assert_eq(c.pool_short_hold_ms, 5000);
}

Test(conf, pool_every_key)
{
	struct conf	c;
	int		i;

	conf_defaults(&c);
	expect_good("[pool]\nenable = no\nsize_2m = 512M\nsize_1g = 0\n"
	    "reserve_2m = 4G\nreserve_1g = 0\ngbs = 2.5\nuid_bytes = 8G\n"
	    "uid_share = 0\nquiet_ms = 0\nshort_hold_ms = 0\n",
	    &c);
	cr_assert_eq(c.pool, 0);
	for (i = 0; i < TOPO_NODES_MAX; i++) {
		cr_assert_eq(c.pool_size[0][i], 512 * MiB);
		cr_assert_eq(c.pool_size[1][i], 0);
	}
	cr_assert_eq(c.pool_reserve[0], 4 * GiB);
	cr_assert_eq(c.pool_reserve[1], 0);
	cr_assert_float_eq(c.pool_gbs, 2.5, 1e-12);
	cr_assert_eq(c.pool_uid_bytes, 8 * GiB);
	cr_assert_eq(c.pool_uid_share, 0);
	cr_assert_eq(c.pool_quiet_ms, 0);
	cr_assert_eq(c.pool_short_hold_ms, 0);
}

Test(conf, pool_size_per_node)
{
	struct conf	c;
	int		i;

	conf_defaults(&c);
	expect_good("[pool]\nsize_2m = 0:1G,3:64M\nsize_1g = 63:2G\n", &c);
	cr_assert_eq(c.pool_size[0][0], GiB);
	cr_assert_eq(c.pool_size[0][3], 64 * MiB);
	for (i = 0; i < TOPO_NODES_MAX; i++) {
		if (i != 0 && i != 3)
			cr_assert_eq(c.pool_size[0][i], 0, "node %d", i);
		cr_assert_eq(c.pool_size[1][i], i == 63 ? 2 * GiB : 0);
	}
}

Test(conf, bad_pool_values)
{
	static const struct bad_value bad[] = {
		{ "pool", "enable", "maybe" },
		{ "pool", "size_2m", "3M" },		/* not whole pages */
		{ "pool", "size_2m", "1G," },
		{ "pool", "size_2m", "0:1G," },
		{ "pool", "size_2m", "0:1G,,1:1G" },
		{ "pool", "size_2m", "64:1G" },		/* no such node */
		{ "pool", "size_2m", "x:1G" },
		{ "pool", "size_2m", "0:" },
		{ "pool", "size_2m", ":1G" },
		{ "pool", "size_2m", "0:1G:2" },
		{ "pool", "size_1g", "512M" },
		{ "pool", "size_1g", "0:3G,1:1536M" },
		{ "pool", "reserve_2m", "-1" },
		{ "pool", "gbs", "fast" },
		{ "pool", "uid_bytes", "1.5G" },
		{ "pool", "uid_share", "101" },
		{ "pool", "quiet_ms", "3600001" },
		{ "pool", "short_hold_ms", "-1" },
		{ "pool", "short_hold_ms", "3600001" },
		{ "pool", "size_2m", "al" },
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}

/* --- the key table ------------------------------------------------------- */

/* Every field of c unlike its default, pool and policy included. */
static void
odd_conf_all(struct conf *c)
{
	int	i;

	odd_conf(c);
	c->uid_clients = 3;
	c->uid_regions = 9;
	c->uid_bytes = 5 * GiB;
	c->pool = 0;
	for (i = 0; i < TOPO_NODES_MAX; i++)
		c->pool_size[0][i] = i == 2 ? 64 * MiB : 0;
	for (i = 0; i < TOPO_NODES_MAX; i++)
		c->pool_size[1][i] = 3 * GiB;
	c->pool_reserve[0] = 6 * MiB;
	c->pool_reserve[1] = 0;
	c->pool_gbs = 0.1;
	c->pool_uid_bytes = 1536 * MiB;
	c->pool_uid_share = 40;
	c->pool_quiet_ms = 500;
	c->pool_short_hold_ms = 250;
	c->intercept = INTERCEPT_ALWAYS;
	c->step_aside = ASIDE_NEVER;
}

/* A value of k's type that k refuses from the file and the command line. */
static const char *
key_bad_value(const struct conf_key *k, char *buf, size_t len)
{
	if (k->type != CONF_PATH)
		return ("bogus");
	memset(buf, 'p', len - 1);
	buf[len - 1] = '\0';
	return (buf);
}

Test(conf, table_is_whole)
{
	const struct conf_key	*k, *k2;
	size_t			 i, j, covered = 0;

	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		cr_assert_not_null(k->def, "[%s] %s has no default",
		    k->section, k->name);
		cr_assert_leq(k->off + k->size, sizeof(struct conf));
		cr_assert_eq(conf_key_find(k->section, k->name), k);
		if (k->option != NULL)
			cr_assert(k->arg != NULL && k->help != NULL,
			    "--%s has no --help line", k->option);
		for (j = 0; (k2 = conf_key_at(j)) != NULL; j++) {
			if (j == i)
				continue;
			cr_assert(k->option == NULL || k2->option == NULL ||
			    strcmp(k->option, k2->option) != 0,
			    "--%s twice", k->option);
			cr_assert(k->letter == 0 || k->letter != k2->letter,
			    "-%c twice", k->letter);
			/* No two keys share a byte of struct conf. */
			cr_assert(k->off + k->size <= k2->off ||
			    k2->off + k2->size <= k->off, "[%s] %s and [%s] %s "
			    "overlap", k->section, k->name, k2->section,
			    k2->name);
		}
		covered += k->size;
	}
	cr_assert_eq(i, 37, "a key added: give it a test and a man entry");
	cr_assert_null(conf_key_find("workers", "spin"));
	cr_assert_null(conf_key_find("daemon", "spin_us"));
	/* Every byte of struct conf but padding belongs to a key. */
	cr_assert_leq(sizeof(struct conf) - covered, 16);
}

/* The defaults are the table's, each as the file would write it. */
Test(conf, defaults_come_from_the_table)
{
	const struct conf_key	*k;
	struct conf		 c, d;
	char			 buf[512], why[256];
	size_t			 i;

	memset(&c, 0xa5, sizeof(c));
	conf_defaults(&c);
	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		conf_format(&c, k, buf, sizeof(buf));
		cr_assert_str_eq(buf, k->def, "[%s] %s: default %s, table %s",
		    k->section, k->name, buf, k->def);
		/* And setting the table's default to an odd conf gives it. */
		odd_conf_all(&d);
		cr_assert_eq(conf_set(&d, k, k->def, 0, why, sizeof(why)), 0,
		    "%s", why);
		cr_assert(conf_same(&d, &c, k), "[%s] %s", k->section,
		    k->name);
	}
}

/* What conf_format writes, conf_set reads back to the same field. */
Test(conf, every_key_round_trips)
{
	const struct conf_key	*k;
	struct conf		 odd, def, d;
	char			 buf[512], why[256];
	size_t			 i;
	int			 j;

	odd_conf_all(&odd);
	conf_defaults(&def);
	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		cr_assert(!conf_same(&odd, &def, k), "odd_conf_all leaves "
		    "[%s] %s at its default", k->section, k->name);
		for (j = 0; j < 2; j++) {
			conf_format(j == 0 ? &odd : &def, k, buf, sizeof(buf));
			conf_defaults(&d);
			if (j == 1)
				odd_conf_all(&d);
			cr_assert_eq(conf_set(&d, k, buf, 0, why, sizeof(why)),
			    0, "[%s] %s = %s: %s", k->section, k->name, buf,
			    why);
			cr_assert(conf_same(&d, j == 0 ? &odd : &def, k),
			    "[%s] %s = %s read back otherwise", k->section,
			    k->name, buf);
			/* The option reads the file's words, but booleans. */
			if (k->option == NULL || k->type == CONF_BOOL ||
			    ((k->flags & CONF_OPT_NOZERO) &&
			    strcmp(buf, "0") == 0))
				continue;
			if (j == 0)
				conf_defaults(&d);
			else
				odd_conf_all(&d);
			cr_assert_eq(conf_set(&d, k, buf, 1, why, sizeof(why)),
			    0, "--%s %s: %s", k->option, buf, why);
			cr_assert(conf_same(&d, j == 0 ? &odd : &def, k),
			    "--%s %s read back otherwise", k->option, buf);
		}
	}
}

/* A bad value, from the file or the command line, names its key. */
Test(conf, bad_value_message_names_the_key)
{
	const struct conf_key	*k;
	struct conf		 c, saved;
	char			 val[150], why[512], want[300], text[512];
	const char		*bad;
	size_t			 i;

	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		bad = key_bad_value(k, val, sizeof(val));
		odd_conf_all(&c);
		memcpy(&saved, &c, sizeof(c));
		cr_assert_eq(conf_set(&c, k, bad, 0, why, sizeof(why)), -1,
		    "[%s] %s took '%s'", k->section, k->name, bad);
		cr_assert_eq(memcmp(&c, &saved, sizeof(c)), 0,
		    "a refused value changed the conf");
		snprintf(want, sizeof(want), "%s must be ", k->name);
		cr_assert_eq(strncmp(why, want, strlen(want)), 0, "%s", why);
		snprintf(want, sizeof(want), ", not '%s'", bad);
		cr_assert_not_null(strstr(why, want), "%s", why);
		/* The same from a file, on its line. */
		snprintf(text, sizeof(text), "[%s]\n%s = %s\n", k->section,
		    k->name, bad);
		snprintf(want, sizeof(want), "%s must be ", k->name);
		expect_bad(text, 2, want);
		if (k->option == NULL)
			continue;
		cr_assert_eq(conf_set(&c, k, bad, 1, why, sizeof(why)), -1);
		snprintf(want, sizeof(want), "--%s must be ", k->option);
		cr_assert_eq(strncmp(why, want, strlen(want)), 0, "%s", why);
	}
}

/* The range in a message is the one the key checks, from the table. */
Test(conf, range_messages_exact)
{
	static const struct {
		const char	*section, *name, *value, *why;
		int		 option;
	} want[] = {
		{ "workers", "spin_us", "100001", "spin_us must be a number "
		    "from 0 to 100000, not '100001'", 0 },
		{ "workers", "spin_us", "-1", "--spin-us must be a number "
		    "from 0 to 100000, not '-1'", 1 },
		{ "daemon", "workers", "257", "workers must be a number from 0 "
		    "to 256, not '257'", 0 },
		{ "daemon", "workers", "0", "--workers must be a number from 1 "
		    "to 256, not '0'", 1 },
		{ "clear", "hot_size", "2G", "hot_size must be a size from 0 "
		    "to 1G, not '2G'", 0 },
		{ "clear", "extent", "65M", "--extent must be auto or a size "
		    "from 256K to 64M, not '65M'", 1 },
		{ "limits", "clients", "1025", "clients must be a number from "
		    "0 to 1024 (0: no limit), not '1025'", 0 },
		{ "background", "gbs", "1000001", "--background-gbs must be a "
		    "number of GB/s from 0 to 1000000 (0: no limit), not "
		    "'1000001'", 1 },
		{ "workers", "split", "yes", "--split must be on or off, not "
		    "'yes'", 1 },
		{ "workers", "split", "y", "split must be yes or no, not 'y'",
		    0 },
		{ "policy", "step_aside", "sometimes", "--step-aside must be "
		    "auto, never or always, not 'sometimes'", 1 },
		{ "clear", "hot_kernel", "sse2-nt", "hot_kernel must be auto, "
		    "rep-stosb or memset, not 'sse2-nt'", 0 },
		{ "pool", "size_1g", "3M", "size_1g must be all (every free "
		    "page above the reserve), a multiple of 1G, or "
		    "NODE:SIZE,... (such as 0:1G,1:2G), not '3M'", 0 },
	};
	const struct conf_key	*k;
	struct conf		 c;
	char			 why[512];
	size_t			 i;

	conf_defaults(&c);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		k = conf_key_find(want[i].section, want[i].name);
		cr_assert_not_null(k);
		cr_assert_eq(conf_set(&c, k, want[i].value, want[i].option,
		    why, sizeof(why)), -1, "%s took %s", want[i].name,
		    want[i].value);
		cr_assert_str_eq(why, want[i].why);
	}
}

/* The command line takes what it took before the table, no more. */
Test(conf, option_values)
{
	const struct conf_key	*k;
	struct conf		 c;
	char			 why[256];

	conf_defaults(&c);
	k = conf_key_find("daemon", "workers");
	cr_assert_eq(conf_set(&c, k, "1", 1, why, sizeof(why)), 0);
	cr_assert_eq(c.workers, 1);
	cr_assert_eq(conf_set(&c, k, "0", 0, why, sizeof(why)), 0);
	cr_assert_eq(c.workers, 0, "the file's 0 is one a CPU");
	k = conf_key_find("workers", "split");
	cr_assert_eq(conf_set(&c, k, "off", 1, why, sizeof(why)), 0);
	cr_assert_eq(c.split, 0);
	cr_assert_eq(conf_set(&c, k, "on", 1, why, sizeof(why)), 0);
	cr_assert_eq(c.split, 1);
	cr_assert_eq(conf_set(&c, k, "Off", 1, why, sizeof(why)), -1);
	k = conf_key_find("daemon", "socket");
	cr_assert_eq(conf_set(&c, k, "", 1, why, sizeof(why)), -1);
	k = conf_key_find("workers", "spin_us");
	cr_assert_eq(conf_set(&c, k, " 5", 1, why, sizeof(why)), -1);
	cr_assert_eq(conf_set(&c, k, "+5", 1, why, sizeof(why)), -1);
	k = conf_key_find("background", "client_gbs");
	cr_assert_eq(conf_set(&c, k, "inf", 1, why, sizeof(why)), -1);
	cr_assert_eq(conf_set(&c, k, "1e6", 1, why, sizeof(why)), 0);
	cr_assert_float_eq(c.client_gbs, 1e6, 1e-6);
	k = conf_key_find("clear", "kernel");
	cr_assert_eq(conf_set(&c, k, "memset", 1, why, sizeof(why)), 0);
	cr_assert_str_eq(c.clear_kernel, "memset");
	cr_assert_eq(conf_set(&c, k, "auto", 1, why, sizeof(why)), 0);
	cr_assert_str_eq(c.clear_kernel, "");
	/* Keys of the file alone have no option. */
	cr_assert_null(conf_key_find("background", "threads")->option);
	cr_assert_null(conf_key_find("limits", "clients")->option);
}

/* SIGHUP: which keys wait for a restart, and which are taken. */
Test(conf, reload_takes_only_reload_keys)
{
	struct conf	run, next, want;
	char		names[512];

	conf_defaults(&run);
	odd_conf_all(&next);
	cr_assert_eq(conf_restart_diff(&run, &run, names, sizeof(names)), 0);
	cr_assert_str_eq(names, "");
	cr_assert_eq(conf_restart_diff(&run, &next, names, sizeof(names)),
	    10, "%s", names);
	cr_assert_str_eq(names, "[daemon] socket, [daemon] workers, [clear] "
	    "kernel, [clear] hot_kernel, [clear] hot_size, [clear] extent, "
	    "[workers] spin_us, [workers] route, [workers] split, "
	    "[background] threads");
	memcpy(&want, &next, sizeof(want));
	conf_reload(&run, &next);
	/* The restart keys stay as they ran. */
	cr_assert_str_eq(run.socket, HPZ_SOCKET_DEFAULT);
	cr_assert_eq(run.spin_us, 50);
	cr_assert_eq(run.scrub_threads, 0);
	/* The others are the new file's. */
	cr_assert_eq(run.scrub, want.scrub);
	cr_assert_float_eq(run.background_gbs, want.background_gbs, 1e-12);
	cr_assert_eq(run.ahead_min, want.ahead_min);
	cr_assert_eq(run.uid_clients, want.uid_clients);
	cr_assert_eq(memcmp(run.pool_size, want.pool_size,
	    sizeof(run.pool_size)), 0);
	cr_assert_eq(run.step_aside, want.step_aside);
}

/* The log's lines come from the table, a section at a time. */
Test(conf, text_of_a_section)
{
	struct conf	c;
	char		buf[512];

	conf_defaults(&c);
	cr_assert_str_eq(conf_text(&c, "limits", 0, buf, sizeof(buf)),
	    "clients=64 regions=4096 bytes=0 state_bytes=64M "
	    "region_pages=16M stuck_contexts=4 contexts=32 threads=0 "
	    "map_bytes=0 forks=64");
	cr_assert_str_eq(conf_text(&c, "background", 1, buf, sizeof(buf)),
	    "scrub=yes gbs=0 client_gbs=0 ahead_min=4M ahead_max=256M");
	cr_assert_str_eq(conf_text(&c, "daemon", 0, buf, sizeof(buf)),
	    "socket=/run/hpzerod/hpzerod.sock workers=0");
	cr_assert_null(conf_text(&c, "daemon", 1, buf, sizeof(buf)));
	cr_assert_null(conf_text(&c, "nosuch", 0, buf, sizeof(buf)));
	odd_conf_all(&c);
	cr_assert_str_eq(conf_text(&c, "pool", 0, buf, sizeof(buf)),
	    "enable=no size_2m=2:64M size_1g=3G reserve_2m=6M reserve_1g=0 "
	    "gbs=0.1 uid_bytes=1536M uid_share=40 quiet_ms=500 "
	    "short_hold_ms=250");
}

/* What the workers get is the settings'. */
Test(conf, worker_config_from_the_settings)
{
	struct worker_config	w;
	struct conf		c;

	conf_defaults(&c);
	conf_worker(&c, 3, &w);
	cr_assert_eq(w.nworkers, 3);
	cr_assert_eq(w.spin_us, 50);
	cr_assert_eq(w.route, ROUTE_READER);
	cr_assert_eq(w.hot_size, 64 * KiB);
	cr_assert_eq(w.extent_max, 0);
	cr_assert_eq(w.split, 1);
	odd_conf(&c);
	conf_worker(&c, 1, &w);
	cr_assert_eq(w.spin_us, 3);
	cr_assert_eq(w.route, ROUTE_HASH);
	cr_assert_eq(w.hot_size, 8 * KiB);
	cr_assert_eq(w.extent_max, 512 * KiB);
	cr_assert_eq(w.split, 0);
	/* The effective extent: as set, else the LLC share. */
	cr_assert_eq(worker_extent_max(&w), 512 * KiB);
	w.extent_max = 0;
	cr_assert_eq(worker_extent_max(&w), plan_extent_max(topo.llc_share));
}
