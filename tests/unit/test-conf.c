/*
 * test-conf.c - unit tests of hpzerod.conf (conf.c): defaults, every key,
 * every refused value with its line, and the quirks of libinih that conf.c
 * smooths over (indented lines, long lines, inline comments).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "hpzerod.h"


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
		cr_assert_eq(c.pool_size[0][i], GiB);
		cr_assert_eq(c.pool_size[1][i], GiB);
	}
	cr_assert_eq(c.pool_reserve[0], 2 * GiB);
	cr_assert_eq(c.pool_reserve[1], 2 * GiB);
	cr_assert_float_eq(c.pool_gbs, 0.0, 1e-12);
	cr_assert_eq(c.pool_uid_bytes, 0);
}

Test(conf, pool_every_key)
{
	struct conf	c;
	int		i;

	conf_defaults(&c);
	expect_good("[pool]\nenable = no\nsize_2m = 512M\nsize_1g = 0\n"
	    "reserve_2m = 4G\nreserve_1g = 0\ngbs = 2.5\nuid_bytes = 8G\n",
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
	};

	expect_bad_values(bad, sizeof(bad) / sizeof(bad[0]));
}
