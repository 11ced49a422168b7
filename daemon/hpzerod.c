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

struct event_base	*hpzd_base;
uint64_t		 hpzd_start_ns;

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
	{ "debug",	no_argument,		NULL, 'd' },
	{ "version",	no_argument,		NULL, 'V' },
	{ "help",	no_argument,		NULL, 'h' },
	{ NULL,		0,			NULL, 0 }
};

static void
hpzd_usage(FILE *f)
{
	fprintf(f, "usage: hpzerod [-dhV] [-s path] [-w workers] [options]\n"
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
	    "  -d, --debug             log debug messages\n"
	    "  -V, --version           print the version and exit\n"
	    "  -h, --help              print this help and exit\n",
	    HPZ_SOCKET_DEFAULT);
}

/* A byte count with an optional K/M/G suffix. */
static int
hpzd_parse_bytes(const char *s, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return (-1);
	switch (*end) {
	case 'K': case 'k':
		v <<= 10;
		end++;
		break;
	case 'M': case 'm':
		v <<= 20;
		end++;
		break;
	case 'G': case 'g':
		v <<= 30;
		end++;
		break;
	}
	if (*end != '\0')
		return (-1);
	*out = v;
	return (0);
}

static void
hpzd_notify_status(void)
{
	char	buf[256];

	stats_summary(buf, sizeof(buf));
	sd_notifyf(0, "STATUS=%s", buf);
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
		log_info("SIGHUP: nothing to reload");
		break;
	}
}

static void
hpzd_timer_cb(int fd, short events, void *arg)
{
	hpzd_notify_status();
}

int
main(int argc, char **argv)
{
	const char	*socket_path = HPZ_SOCKET_DEFAULT;
	const char	*bulk_name = NULL, *hot_name = NULL;
	struct worker_config cfg = worker_config;
	char		 why[256];
	long		 spin;
	struct event	*ev_term, *ev_int, *ev_hup, *ev_timer;
	struct timeval	 tv = { HPZD_STATUS_INTERVAL, 0 };
	long		 ncpu;
	char		*end;
	int		 ch, debug = 0, nworkers, lfd, from_systemd;

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nworkers = ncpu < 1 ? 1 : ncpu > HPZD_WORKERS_MAX ? HPZD_WORKERS_MAX :
	    (int)ncpu;
	while ((ch = getopt_long(argc, argv, "s:w:k:K:H:e:p:r:S:dVh", hpzd_options,
	    NULL)) != -1) {
		switch (ch) {
		case 's':
			socket_path = optarg;
			break;
		case 'w':
			errno = 0;
			nworkers = (int)strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || nworkers < 1 ||
			    nworkers > HPZD_WORKERS_MAX) {
				fprintf(stderr, "hpzerod: --workers must be "
				    "1 to %d\n", HPZD_WORKERS_MAX);
				return (2);
			}
			break;
		case 'k':
			bulk_name = optarg;
			break;
		case 'K':
			hot_name = optarg;
			break;
		case 'H':
			if (hpzd_parse_bytes(optarg, &cfg.hot_size) == -1 ||
			    cfg.hot_size > (1ULL << 30)) {
				fprintf(stderr, "hpzerod: bad --hot-size\n");
				return (2);
			}
			break;
		case 'e':
			if (hpzd_parse_bytes(optarg, &cfg.extent_max) == -1 ||
			    cfg.extent_max < PLAN_EXTENT_MIN ||
			    cfg.extent_max > PLAN_EXTENT_MAX) {
				fprintf(stderr, "hpzerod: --extent must be "
				    "256K to 64M\n");
				return (2);
			}
			break;
		case 'p':
			errno = 0;
			spin = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || spin < 0 ||
			    spin > 100000) {
				fprintf(stderr, "hpzerod: --spin-us must be "
				    "0 to 100000\n");
				return (2);
			}
			cfg.spin_us = (int)spin;
			break;
		case 'r':
			if (strcmp(optarg, "reader") == 0)
				cfg.route = ROUTE_READER;
			else if (strcmp(optarg, "thread") == 0)
				cfg.route = ROUTE_THREAD;
			else if (strcmp(optarg, "hash") == 0)
				cfg.route = ROUTE_HASH;
			else {
				fprintf(stderr, "hpzerod: --route must be "
				    "reader, thread or hash\n");
				return (2);
			}
			break;
		case 'S':
			if (strcmp(optarg, "on") == 0)
				cfg.split = 1;
			else if (strcmp(optarg, "off") == 0)
				cfg.split = 0;
			else {
				fprintf(stderr, "hpzerod: --split must be "
				    "on or off\n");
				return (2);
			}
			break;
		case 'd':
			debug = 1;
			break;
		case 'V':
			printf("hpzerod %s (protocol %d)\n", PACKAGE_VERSION,
			    HPZ_PROTOCOL_VERSION);
			return (0);
		case 'h':
			hpzd_usage(stdout);
			return (0);
		default:
			hpzd_usage(stderr);
			return (2);
		}
	}
	if (optind != argc) {
		hpzd_usage(stderr);
		return (2);
	}

	log_init(debug);
	setvbuf(stderr, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	hpzd_start_ns = stats_now_ns();

	if ((hpzd_base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if (topo_init(&topo, "") == -1)
		log_warnx("cannot read the CPU topology: workers not pinned");
	if (clear_init(bulk_name, hot_name, why, sizeof(why)) != 0) {
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
	/* Workers exist before we serve: spawning later would stall faults. */
	cfg.nworkers = nworkers;
	if (worker_start(&cfg) != 0)
		fatalx("cannot start %d workers", nworkers);
	if ((lfd = control_listen(socket_path, &from_systemd)) == -1) {
		sd_notifyf(0, "STATUS=cannot listen on %s", socket_path);
		worker_stop();
		return (1);
	}
	if (control_init(lfd) == -1)
		fatalx("cannot watch the listening socket");

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

	log_info("hpzerod %s ready: %s%s, %d workers", PACKAGE_VERSION,
	    from_systemd ? "socket from systemd" : socket_path,
	    "", nworkers);
	sd_notify(0, "READY=1");
	hpzd_notify_status();

	if (event_base_dispatch(hpzd_base) == -1)
		log_warnx("event loop failed");

	/* Every region: garbage dropped, range handed back to the kernel. */
	control_shutdown();
	if (!from_systemd && unlink(socket_path) == -1 && errno != ENOENT)
		log_warn("unlink %s", socket_path);
	worker_stop();
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_hup);
	event_free(ev_timer);
	event_base_free(hpzd_base);
	log_info("stopped");
	return (0);
}
