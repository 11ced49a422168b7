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

#include "hpz-protocol.h"

#include "cctx.h"
#include "clear.h"
#include "conf.h"
#include "control-client.h"
#include "control-limits.h"
#include "control-socket.h"
#include "cost.h"
#include "fdstore.h"
#include "globals.h"
#include "intercept.h"
#include "keep.h"
#include "log.h"
#include "pool-hold.h"
#include "pool.h"
#include "prep-thread.h"
#include "reap.h"
#include "region-life.h"
#include "scrub.h"
#include "stats.h"
#include "status.h"
#include "topo.h"
#include "worker.h"

#define HPZD_STATUS_INTERVAL	5	/* seconds between STATUS= updates */
#define HPZD_OPT_KEY		256	/* getopt's value for key i: this + i */

#ifndef HPZD_CONFIG_DEFAULT
#define HPZD_CONFIG_DEFAULT	"/etc/hpzerod.conf"
#endif

static int		 hpzd_argc;
static char		**hpzd_argv;
static const char	*hpzd_config;	/* NULL: the default, may be absent */
static struct conf	 hpzd_conf;	/* what runs */

/* The options that are no key of the settings, then one a key (conf.c). */
static const struct option hpzd_own_options[] = {
	{ "config",	required_argument,	NULL, 'c' },
	{ "debug",	no_argument,		NULL, 'd' },
	{ "version",	no_argument,		NULL, 'V' },
	{ "help",	no_argument,		NULL, 'h' },
};
#define HPZD_NOWN	(sizeof(hpzd_own_options) / sizeof(hpzd_own_options[0]))
#define HPZD_NOPTIONS	64
static struct option	 hpzd_options[HPZD_NOPTIONS + 1];
static char		 hpzd_optstring[2 * HPZD_NOPTIONS + 1] = "c:dVh";

/* getopt_long's tables, from the keys that have an option. */
static void
hpzd_options_init(void)
{
	const struct conf_key	*k;
	size_t			 i, n = HPZD_NOWN, len;

	memcpy(hpzd_options, hpzd_own_options, sizeof(hpzd_own_options));
	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		if (k->option == NULL)
			continue;
		if (n == HPZD_NOPTIONS)
			fatalx("more than %d options", HPZD_NOPTIONS);
		hpzd_options[n].name = k->option;
		hpzd_options[n].has_arg = required_argument;
		hpzd_options[n].flag = NULL;
		hpzd_options[n++].val = HPZD_OPT_KEY + (int)i;
		if (k->letter != 0) {
			len = strlen(hpzd_optstring);
			hpzd_optstring[len] = (char)k->letter;
			hpzd_optstring[len + 1] = ':';
			hpzd_optstring[len + 2] = '\0';
		}
	}
	memset(&hpzd_options[n], 0, sizeof(hpzd_options[n]));
}

/* The key an option value getopt returned stands for, NULL: none. */
static const struct conf_key *
hpzd_option_key(int ch)
{
	const struct conf_key	*k;
	size_t			 i;

	if (ch >= HPZD_OPT_KEY)
		return (conf_key_at((size_t)(ch - HPZD_OPT_KEY)));
	for (i = 0; (k = conf_key_at(i)) != NULL; i++)
		if (k->option != NULL && k->letter == ch)
			return (k);
	return (NULL);
}

/* Each key's option with the file's key under it, at its default. */
static void
hpzd_usage(FILE *f)
{
	const struct conf_key	*k;
	char			 opt[64];
	size_t			 i;

	fprintf(f, "usage: hpzerod [-dhV] [-c config] [-s path] [-w workers] "
	    "[options]\n"
	    "  -c, --config PATH         settings file (default %s)\n",
	    HPZD_CONFIG_DEFAULT);
	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		if (k->option == NULL)
			continue;
		if (k->letter != 0)
			snprintf(opt, sizeof(opt), "-%c, --%s %s", k->letter,
			    k->option, k->arg);
		else
			snprintf(opt, sizeof(opt), "    --%s %s", k->option,
			    k->arg);
		fprintf(f, "  %-26s%s%s\n%28s[%s] %s = %s\n", opt,
		    strlen(opt) > 25 ? "\n                            " : "",
		    k->help, "", k->section, k->name, k->def);
	}
	fprintf(f, "  -d, --debug               log debug messages\n"
	    "  -V, --version             print the version and exit\n"
	    "  -h, --help                print this help and exit\n"
	    "Each option sets the key of hpzerod.conf(5) shown under it, there "
	    "at its\ndefault; options override the settings file.\n");
}

static void
hpzd_notify_status(void)
{
	char	buf[256];

	status_summary(buf, sizeof(buf), control_nclients());
	sd_notifyf(0, "STATUS=%s", buf);
}

static int	hpzd_settings(struct conf *, int quiet);

/* The settings in force, a line a section; only SIGHUP's if reload_only. */
static void
hpzd_log_settings(const char *what, const struct conf *c, int reload_only)
{
	const struct conf_key	*k;
	const char		*last = "";
	char			 buf[1024];
	size_t			 i;

	for (i = 0; (k = conf_key_at(i)) != NULL; i++) {
		if (strcmp(k->section, last) == 0)
			continue;
		last = k->section;
		if (conf_text(c, k->section, reload_only, buf, sizeof(buf)) !=
		    NULL)
			log_info("%s [%s] %s", what, k->section, buf);
	}
}

/* SIGHUP: read the file again; what CONF_RELOAD marks takes effect. */
static void
hpzd_reload(void)
{
	struct conf	c;
	char		names[512];

	if (hpzd_settings(&c, 1) != 0) {
		log_warnx("SIGHUP: settings not reloaded");
		return;
	}
	if (conf_restart_diff(&hpzd_conf, &c, names, sizeof(names)) > 0)
		log_warnx("SIGHUP: %s changed: only [background] (but "
		    "threads), [limits], [pool] and [policy] change while "
		    "running; restart hpzerod for the others", names);
	conf_reload(&hpzd_conf, &c);
	control_reload(&hpzd_conf);
	hpzd_log_settings("SIGHUP: settings", &hpzd_conf, 1);
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
	const struct conf_key	*k;
	char			 why[512];
	int			 ch;

	optind = 0;
	opterr = !quiet;
	while ((ch = getopt_long(hpzd_argc, hpzd_argv, hpzd_optstring,
	    hpzd_options, NULL)) != -1) {
		switch (ch) {
		case 'c':
			hpzd_config = optarg;
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
			if ((k = hpzd_option_key(ch)) == NULL) {
				if (!quiet)
					hpzd_usage(stderr);
				return (2);
			}
			if (conf_set(c, k, optarg, 1, why, sizeof(why)) == -1) {
				if (!quiet)
					fprintf(stderr, "hpzerod: %s (see --help "
					    "and hpzerod.conf(5))\n", why);
				return (2);
			}
			break;
		}
	}
	if (optind != hpzd_argc) {
		if (!quiet)
			hpzd_usage(stderr);
		return (2);
	}
	return (0);
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
static struct prep_job	hpzd_cost_job;

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
		if (prep_job(&hpzd_cost_job, hpzd_cost_work, hpzd_cost_done,
		    NULL) == 0)
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
	struct worker_config cfg;
	struct event	*ev_term, *ev_int, *ev_hup, *ev_timer, *ev_wd = NULL;
	struct timeval	 wdtv;
	uint64_t	 wdusec = 0;
	struct timeval	 tv = { HPZD_STATUS_INTERVAL, 0 };
	char		 why[256];
	long		 ncpu;
	int		 rc, debug = 0, nworkers, lfd, from_systemd;

	hpzd_argc = argc;
	hpzd_argv = argv;
	hpzd_options_init();
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
	conf_worker(&hpzd_conf, nworkers, &cfg);

	if ((hpzd_base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	/*
	 * Threads that keep client-made costs off the loop: closing passed
	 * fds, and work that grows with a region's pages.  The reaper's
	 * interrupting signal is blocked in every other thread.
	 */
	if (reap_start() != 0 || prep_start() != 0 || cctx_start() != 0)
		fatalx("cannot start the reaper, prep and client threads");
	reap_block_signal();
	/* The tending pass's plumbing exists before any region needs it. */
	region_tend_init();
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
	    (unsigned long long)(worker_extent_max(&cfg) >> 10),
	    clear_bulk_kernel->name,
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
	if (worker_start(&cfg) != 0)
		fatalx("cannot start %d workers", nworkers);
	if (scrub_start(&hpzd_conf) != 0)
		fatalx("cannot start the background threads");
	if (pool_start(&hpzd_conf) != 0)
		fatalx("cannot start the pool");
	if ((lfd = control_listen(hpzd_conf.socket, &from_systemd)) == -1) {
		sd_notifyf(0, "STATUS=cannot listen on %s", hpzd_conf.socket);
		cctx_stop(CCTX_STOP_MS);
		prep_stop();
		pool_hold_stop();
		pool_stop();
		scrub_stop();
		worker_stop();
		reap_stop();
		return (1);
	}
	if (control_init(lfd) == -1)
		fatalx("cannot watch the listening socket");
	control_limits(&hpzd_conf);
	hpzd_log_settings("settings", &hpzd_conf, 0);
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

	/*
	 * Every region: garbage cleared in place (the client keeps its
	 * pages), range handed back to the kernel; what a client's context
	 * has not cleared in KEEP_EXIT_MS stays garbage, its range registered
	 * for libhpz to serve.
	 */
	keep_exit_deadline(KEEP_EXIT_MS);
	control_shutdown();
	if (!from_systemd && unlink(hpzd_conf.socket) == -1 &&
	    errno != ENOENT)
		log_warn("unlink %s", hpzd_conf.socket);
	/* The regions' teardowns run on their clients' contexts. */
	cctx_stop(KEEP_EXIT_MS + CCTX_STOP_MS);
	prep_stop();
	pool_hold_stop();
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
