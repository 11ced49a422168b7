/*
 * hpzerod.c - options, start-up, signals, sd_notify and the event loop.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "hpzerod.h"

#define HPZD_STATUS_INTERVAL	5	/* seconds between STATUS= updates */
#define HPZD_OPTSTRING		"c:s:w:k:K:H:e:p:r:S:B:C:U:dVh"

#ifndef HPZD_CONFIG_DEFAULT
#define HPZD_CONFIG_DEFAULT	"/etc/hpzerod.conf"
#endif

static int		 hpzd_argc;
static char		**hpzd_argv;
static const char	*hpzd_config;	/* NULL: the default, may be absent */
static struct conf	 hpzd_conf;	/* what runs */

static const struct option hpzd_options[] = {
	{ "socket",	required_argument,	NULL, 's' },
	{ "workers",	required_argument,	NULL, 'w' },
	{ "clear-kernel", required_argument,	NULL, 'k' },
	{ "hot-kernel",	required_argument,	NULL, 'K' },
	{ "hot-size",	required_argument,	NULL, 'H' },
	{ "extent",	required_argument,	NULL, 'e' },
	{ "spin-us",	required_argument,	NULL, 'p' },
	{ "route",	required_argument,	NULL, 'r' },
	{ "split",	required_argument,	NULL, 'S' },
	{ "config",	required_argument,	NULL, 'c' },
	{ "background-gbs", required_argument,	NULL, 'B' },
	{ "client-gbs",	required_argument,	NULL, 'C' },
	{ "scrub",	required_argument,	NULL, 'U' },
	{ "pool",	required_argument,	NULL, 'P' },
	{ "intercept",	required_argument,	NULL, 'I' },
	{ "step-aside",	required_argument,	NULL, 'A' },
	{ "debug",	no_argument,		NULL, 'd' },
	{ "version",	no_argument,		NULL, 'V' },
	{ "help",	no_argument,		NULL, 'h' },
	{ NULL,		0,			NULL, 0 }
};

static void
hpzd_usage(FILE *f)
{
	fprintf(f, "usage: hpzerod [-dhV] [-c config] [-s path] [-w workers] "
	    "[options]\n"
	    "  -c, --config PATH       settings file (default %s)\n"
	    "  -s, --socket PATH       listen on PATH (default %s),\n"
	    "                          unless systemd passes a socket\n"
	    "  -w, --workers N         worker threads (default: online CPUs)\n"
	    "      --clear-kernel K    bulk clear kernel: avx512-nt, avx2-nt,\n"
	    "                          sse2-nt, rep-stosb, memset (default:\n"
	    "                          the fastest measured at start)\n"
	    "      --hot-kernel K      kernel for the faulting neighbourhood:\n"
	    "                          rep-stosb or memset\n"
	    "      --hot-size BYTES    neighbourhood of the faulting 4 KiB\n"
	    "                          cleared last (default 64K)\n"
	    "      --extent BYTES      largest clear extent (default: the\n"
	    "                          LLC share of one CPU)\n"
	    "      --spin-us N         most an idle worker spins (default 50)\n"
	    "      --route MODE        reader, thread or hash (default reader)\n"
	    "      --split on|off      share a page's clear with workers\n"
	    "                          already spinning (default on)\n"
	    "      --scrub on|off      clear garbage in the background\n"
	    "      --pool on|off       keep a pre-zeroed pool of huge pages\n"
	    "      --intercept auto|always  trap a range's faults only while\n"
	    "                          it holds garbage (default auto)\n"
	    "      --step-aside auto|never|always  leave garbage to the\n"
	    "                          kernel when we cannot keep up\n"
	    "      --background-gbs G  background budget in all (0: none)\n"
	    "      --client-gbs G      background budget a client (0: none)\n"
	    "  -d, --debug             log debug messages\n"
	    "  -V, --version           print the version and exit\n"
	    "  -h, --help              print this help and exit\n"
	    "Options override the settings file.\n",
	    HPZD_CONFIG_DEFAULT, HPZ_SOCKET_DEFAULT);
}

static void
hpzd_notify_status(void)
{
	char	buf[256];

	stats_summary(buf, sizeof(buf));
	sd_notifyf(0, "STATUS=%s", buf);
}

static int	hpzd_settings(struct conf *, int quiet);

/* One line with the [limits] in force (0 is unlimited). */
static void
hpzd_log_limits(const char *what, const struct conf *c)
{
	log_info("%s: a uid %d connections, %d regions, %llu bytes, %llu "
	    "bytes of page state; a region %llu pages (0 is unlimited)", what,
	    c->uid_clients, c->uid_regions, (unsigned long long)c->uid_bytes,
	    (unsigned long long)c->uid_state_bytes,
	    (unsigned long long)c->region_pages);
}

/* SIGHUP: read the file again; [background] takes effect, the rest waits. */
static void
hpzd_reload(void)
{
	struct conf	c;

	if (hpzd_settings(&c, 1) != 0) {
		log_warnx("SIGHUP: settings not reloaded");
		return;
	}
	if (strcmp(c.socket, hpzd_conf.socket) != 0 ||
	    c.workers != hpzd_conf.workers ||
	    strcmp(c.clear_kernel, hpzd_conf.clear_kernel) != 0 ||
	    strcmp(c.hot_kernel, hpzd_conf.hot_kernel) != 0 ||
	    c.hot_size != hpzd_conf.hot_size || c.extent != hpzd_conf.extent ||
	    c.spin_us != hpzd_conf.spin_us || c.route != hpzd_conf.route ||
	    c.split != hpzd_conf.split || c.scrub_threads !=
	    hpzd_conf.scrub_threads)
		log_warnx("SIGHUP: only [background] (but threads), [limits], "
		    "[pool] and [policy] change while running; restart "
		    "hpzerod for the others");
	c.scrub_threads = hpzd_conf.scrub_threads;
	scrub_configure(&c);
	control_limits(&c);
	pool_configure(&c);
	hpzd_conf.pool = c.pool;
	memcpy(hpzd_conf.pool_size, c.pool_size, sizeof(c.pool_size));
	memcpy(hpzd_conf.pool_reserve, c.pool_reserve, sizeof(c.pool_reserve));
	hpzd_conf.pool_gbs = c.pool_gbs;
	hpzd_conf.pool_uid_bytes = c.pool_uid_bytes;
	hpzd_conf.uid_clients = c.uid_clients;
	hpzd_conf.uid_regions = c.uid_regions;
	hpzd_conf.uid_bytes = c.uid_bytes;
	hpzd_conf.uid_state_bytes = c.uid_state_bytes;
	hpzd_conf.region_pages = c.region_pages;
	hpzd_conf.scrub = c.scrub;
	hpzd_conf.background_gbs = c.background_gbs;
	hpzd_conf.client_gbs = c.client_gbs;
	hpzd_conf.ahead_min = c.ahead_min;
	hpzd_conf.ahead_max = c.ahead_max;
	hpzd_conf.intercept = c.intercept;
	hpzd_conf.step_aside = c.step_aside;
	intercept_configure(&c);
	log_info("SIGHUP: faults intercepted %s, stepping aside %s",
	    intercept_policy_name(0), intercept_policy_name(1));
	log_info("SIGHUP: background scrub %s, budget %.1f GB/s (per client "
	    "%.1f; 0 is unlimited), read-ahead %llu-%llu KiB",
	    c.scrub ? "on" : "off", c.background_gbs, c.client_gbs,
	    (unsigned long long)(c.ahead_min >> 10),
	    (unsigned long long)(c.ahead_max >> 10));
	hpzd_log_limits("SIGHUP: limits", &c);
}

static void
hpzd_signal_cb(int sig, short events, void *arg)
{
	switch (sig) {
	case SIGTERM:
	case SIGINT:
		log_info("%s: shutting down", strsignal(sig));
		sd_notify(0, "STOPPING=1");
		event_base_loopbreak(hpzd_base);
		break;
	case SIGHUP:
		hpzd_reload();
		break;
	}
}

/*
 * Apply the command line to c.  0, 1 when the caller should exit 0 (help,
 * version), or 2 on a usage error (reported unless quiet).
 */
static int
hpzd_args(struct conf *c, int quiet, int *debug)
{
	const char	*k;
	char		*end;
	double		 g;
	long		 v;
	int		 ch;

	optind = 0;
	opterr = !quiet;
	while ((ch = getopt_long(hpzd_argc, hpzd_argv, HPZD_OPTSTRING,
	    hpzd_options, NULL)) != -1) {
		switch (ch) {
		case 'c':
			hpzd_config = optarg;
			break;
		case 's':
			if (strlen(optarg) >= sizeof(c->socket))
				goto bad;
			strcpy(c->socket, optarg);
			break;
		case 'w':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || v < 1 ||
			    v > HPZD_WORKERS_MAX)
				goto bad;
			c->workers = (int)v;
			break;
		case 'k':
		case 'K':
			k = strcmp(optarg, "auto") == 0 ? "" : optarg;
			if (strlen(k) >= sizeof(c->clear_kernel))
				goto bad;
			strcpy(ch == 'k' ? c->clear_kernel : c->hot_kernel, k);
			break;
		case 'H':
			if (conf_parse_bytes(optarg, &c->hot_size) == -1 ||
			    c->hot_size > (1ULL << 30))
				goto bad;
			break;
		case 'e':
			if (conf_parse_bytes(optarg, &c->extent) == -1 ||
			    c->extent < PLAN_EXTENT_MIN ||
			    c->extent > PLAN_EXTENT_MAX)
				goto bad;
			break;
		case 'p':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || v < 0 || v > 100000)
				goto bad;
			c->spin_us = (int)v;
			break;
		case 'r':
			if (strcmp(optarg, "reader") == 0)
				c->route = ROUTE_READER;
			else if (strcmp(optarg, "thread") == 0)
				c->route = ROUTE_THREAD;
			else if (strcmp(optarg, "hash") == 0)
				c->route = ROUTE_HASH;
			else
				goto bad;
			break;
		case 'S':
			if (strcmp(optarg, "on") == 0)
				c->split = 1;
			else if (strcmp(optarg, "off") == 0)
				c->split = 0;
			else
				goto bad;
			break;
		case 'U':
			if (strcmp(optarg, "on") == 0)
				c->scrub = 1;
			else if (strcmp(optarg, "off") == 0)
				c->scrub = 0;
			else
				goto bad;
			break;
		case 'P':
			if (strcmp(optarg, "on") == 0)
				c->pool = 1;
			else if (strcmp(optarg, "off") == 0)
				c->pool = 0;
			else
				goto bad;
			break;
		case 'I':
			if (strcmp(optarg, "auto") == 0)
				c->intercept = INTERCEPT_AUTO;
			else if (strcmp(optarg, "always") == 0)
				c->intercept = INTERCEPT_ALWAYS;
			else
				goto bad;
			break;
		case 'A':
			if (strcmp(optarg, "auto") == 0)
				c->step_aside = ASIDE_AUTO;
			else if (strcmp(optarg, "never") == 0)
				c->step_aside = ASIDE_NEVER;
			else if (strcmp(optarg, "always") == 0)
				c->step_aside = ASIDE_ALWAYS;
			else
				goto bad;
			break;
		case 'B':
		case 'C':
			errno = 0;
			g = strtod(optarg, &end);
			if (errno != 0 || *end != '\0' || end == optarg ||
			    !(g >= 0) || g > 1e6)
				goto bad;
			if (ch == 'B')
				c->background_gbs = g;
			else
				c->client_gbs = g;
			break;
		case 'd':
			if (debug != NULL)
				*debug = 1;
			break;
		case 'V':
			if (!quiet)
				printf("hpzerod %s (protocol %d)\n",
				    PACKAGE_VERSION, HPZ_PROTOCOL_VERSION);
			return (1);
		case 'h':
			if (!quiet)
				hpzd_usage(stdout);
			return (1);
		default:
			if (!quiet)
				hpzd_usage(stderr);
			return (2);
		}
	}
	if (optind != hpzd_argc) {
		if (!quiet)
			hpzd_usage(stderr);
		return (2);
	}
	return (0);
bad:
	if (!quiet) {
		for (k = NULL, v = 0; hpzd_options[v].name != NULL; v++)
			if (hpzd_options[v].val == ch)
				k = hpzd_options[v].name;
		fprintf(stderr, "hpzerod: bad value '%s' for --%s (see "
		    "--help and hpzerod.conf(5))\n", optarg, k != NULL ? k : "?");
	}
	return (2);
}

/*
 * The settings: defaults, then the file, then the command line.  A missing
 * default file is fine; a named one must exist.  0, or what to exit with.
 */
static int
hpzd_settings(struct conf *c, int quiet)
{
	char	why[512];
	int	rc, error;

	conf_defaults(c);
	hpzd_config = NULL;
	if ((rc = hpzd_args(c, 1, NULL)) != 0 && quiet)
		return (rc);
	error = conf_load(hpzd_config != NULL ? hpzd_config :
	    HPZD_CONFIG_DEFAULT, c, why, sizeof(why));
	if (error != 0 && !(error == -ENOENT && hpzd_config == NULL)) {
		if (quiet)
			log_warnx("%s", why);
		else
			fprintf(stderr, "hpzerod: %s\n", why);
		return (2);
	}
	return (hpzd_args(c, quiet, NULL));
}

/* What things cost, measured again off the loop. */
static int	hpzd_cost_busy;

static void
hpzd_cost_work(struct prep_job *j)
{
	(void)j;
	cost_measure();
}

static void
hpzd_cost_done(struct prep_job *j)
{
	struct cost	c;
	char		buf[256];

	(void)j;
	hpzd_cost_busy = 0;
	cost_get(&c);
	if (c.measured) {
		cost_text(buf, sizeof(buf));
		log_info("costs: %s", buf);
	}
}

static void
hpzd_timer_cb(int fd, short events, void *arg)
{
	struct cost	c;

	hpzd_notify_status();
	/* The kernel's figures wait for free huge pages: try again. */
	cost_get(&c);
	if (!c.measured && !hpzd_cost_busy && cost_host_avail(2ULL << 20) >= 2) {
		hpzd_cost_busy = 1;
		if (prep_job(hpzd_cost_work, hpzd_cost_done, NULL) == 0)
			hpzd_cost_busy = 0;
	}
}

/* Tell systemd's watchdog the event loop still turns. */
static void
hpzd_watchdog_cb(int fd, short events, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

int
main(int argc, char **argv)
{
	struct worker_config cfg = worker_config;
	struct event	*ev_term, *ev_int, *ev_hup, *ev_timer, *ev_wd = NULL;
	struct timeval	 wdtv;
	uint64_t	 wdusec = 0;
	struct timeval	 tv = { HPZD_STATUS_INTERVAL, 0 };
	char		 why[256];
	long		 ncpu;
	int		 rc, debug = 0, nworkers, lfd, from_systemd;

	hpzd_argc = argc;
	hpzd_argv = argv;
	/* Usage errors, --help and --version first, before any file. */
	conf_defaults(&hpzd_conf);
	if ((rc = hpzd_args(&hpzd_conf, 0, &debug)) != 0)
		return (rc == 1 ? 0 : 2);
	if ((rc = hpzd_settings(&hpzd_conf, 0)) != 0)
		return (rc == 1 ? 0 : 2);

	log_init(debug);
	setvbuf(stderr, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	hpzd_start_ns = stats_now_ns();

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nworkers = hpzd_conf.workers > 0 ? hpzd_conf.workers : ncpu < 1 ? 1 :
	    ncpu > HPZD_WORKERS_MAX ? HPZD_WORKERS_MAX : (int)ncpu;
	cfg.hot_size = hpzd_conf.hot_size;
	cfg.extent_max = hpzd_conf.extent;
	cfg.spin_us = hpzd_conf.spin_us;
	cfg.route = (enum worker_route_mode)hpzd_conf.route;
	cfg.split = hpzd_conf.split;

	if ((hpzd_base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	/*
	 * Threads that keep client-made costs off the loop: closing passed
	 * fds, and work that grows with a region's pages.  The reaper's
	 * interrupting signal is blocked in every other thread.
	 */
	if (reap_start() != 0 || prep_start() != 0)
		fatalx("cannot start the reaper and prep threads");
	reap_block_signal();
	/* The uffd event plumbing exists before any region needs it. */
	uffd_init();
	if (topo_init(&topo, "") == -1)
		log_warnx("cannot read the CPU topology: workers not pinned");
	if (clear_init(hpzd_conf.clear_kernel[0] != '\0' ?
	    hpzd_conf.clear_kernel : NULL, hpzd_conf.hot_kernel[0] != '\0' ?
	    hpzd_conf.hot_kernel : NULL, why, sizeof(why)) != 0) {
		fprintf(stderr, "hpzerod: %s\n", why);
		return (2);
	}
	log_info("%d CPUs on %d node(s), LLC %llu KiB shared by %d: extents "
	    "up to %llu KiB; clear kernels %s (bulk, %.1f GB/s measured) and "
	    "%s (last %llu KiB)", topo.ncpus, topo.nnodes,
	    (unsigned long long)(topo.llc_size >> 10), topo.llc_sharing,
	    (unsigned long long)((cfg.extent_max != 0 ? cfg.extent_max :
	    plan_extent_max(topo.llc_share)) >> 10), clear_bulk_kernel->name,
	    clear_calibrated_gbs(clear_bulk_kernel->kind),
	    clear_hot_kernel->name, (unsigned long long)(cfg.hot_size >> 10));
	/* What a fault costs here, before any thread of ours competes. */
	cost_measure();
	cost_text(why, sizeof(why));
	log_info("costs: %s", why);
	intercept_configure(&hpzd_conf);
	log_info("faults intercepted %s (a range's faults are ours only while "
	    "it holds garbage), stepping aside %s", intercept_policy_name(0),
	    intercept_policy_name(1));
	/* Threads exist before we serve: spawning later would stall faults. */
	cfg.nworkers = nworkers;
	if (worker_start(&cfg) != 0)
		fatalx("cannot start %d workers", nworkers);
	if (scrub_start(&hpzd_conf) != 0)
		fatalx("cannot start the background threads");
	if (pool_start(&hpzd_conf) != 0)
		fatalx("cannot start the pool");
	if ((lfd = control_listen(hpzd_conf.socket, &from_systemd)) == -1) {
		sd_notifyf(0, "STATUS=cannot listen on %s", hpzd_conf.socket);
		prep_stop();
		pool_stop();
		scrub_stop();
		worker_stop();
		reap_stop();
		return (1);
	}
	if (control_init(lfd) == -1)
		fatalx("cannot watch the listening socket");
	control_limits(&hpzd_conf);
	hpzd_log_limits("limits", &hpzd_conf);
	/* Regions systemd kept for us across a crash: serve them again. */
	fdstore_init(1);
	control_retake();

	ev_term = evsignal_new(hpzd_base, SIGTERM, hpzd_signal_cb, NULL);
	ev_int = evsignal_new(hpzd_base, SIGINT, hpzd_signal_cb, NULL);
	ev_hup = evsignal_new(hpzd_base, SIGHUP, hpzd_signal_cb, NULL);
	ev_timer = event_new(hpzd_base, -1, EV_PERSIST, hpzd_timer_cb, NULL);
	if (ev_term == NULL || ev_int == NULL || ev_hup == NULL ||
	    ev_timer == NULL || evsignal_add(ev_term, NULL) == -1 ||
	    evsignal_add(ev_int, NULL) == -1 ||
	    evsignal_add(ev_hup, NULL) == -1 ||
	    event_add(ev_timer, &tv) == -1)
		fatalx("cannot set up signal handling");
	if (sd_watchdog_enabled(0, &wdusec) > 0 && wdusec > 0) {
		wdusec /= 3;
		wdtv.tv_sec = (time_t)(wdusec / 1000000);
		wdtv.tv_usec = (suseconds_t)(wdusec % 1000000);
		ev_wd = event_new(hpzd_base, -1, EV_PERSIST, hpzd_watchdog_cb,
		    NULL);
		if (ev_wd == NULL || event_add(ev_wd, &wdtv) == -1)
			fatalx("cannot set up the watchdog timer");
		log_info("watchdog: pinging systemd every %llu ms",
		    (unsigned long long)(wdusec / 1000));
	}

	log_info("hpzerod %s ready: %s, %d workers, background %s (budget "
	    "%.1f GB/s, 0 is unlimited)", PACKAGE_VERSION, from_systemd ?
	    "socket from systemd" : hpzd_conf.socket, nworkers,
	    hpzd_conf.scrub ? "scrub on" : "scrub off",
	    hpzd_conf.background_gbs);
	sd_notify(0, "READY=1");
	hpzd_notify_status();

	if (event_base_dispatch(hpzd_base) == -1)
		log_warnx("event loop failed");

	/* Every region: garbage dropped, range handed back to the kernel. */
	control_shutdown();
	if (!from_systemd && unlink(hpzd_conf.socket) == -1 &&
	    errno != ENOENT)
		log_warn("unlink %s", hpzd_conf.socket);
	prep_stop();
	pool_stop();
	scrub_stop();
	worker_stop();
	reap_stop();
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_hup);
	event_free(ev_timer);
	if (ev_wd != NULL)
		event_free(ev_wd);
	event_base_free(hpzd_base);
	log_info("stopped");
	return (0);
}
