/*
 * hpzctl.c - ask a running hpzerod how it is doing: the command line and
 * the table of commands.
 *
 *	hpzctl [-s socket] status
 *	hpzctl [-s socket] stats [-j | --json]
 *	hpzctl [-s socket] stats -w seconds [-n count]
 *	hpzctl [-s socket] top [-i seconds] [-n count]
 *	hpzctl [-s socket] prometheus [-o file]
 *	hpzctl [-s socket] reserve SIZE [--page 2m|1g] [--timeout S]
 *
 * Each command is in a file of its own: status in hpzctl-status.c, stats
 * in hpzctl-stats.c, top in hpzctl-top.c, prometheus in hpzctl-prom.c,
 * reserve in hpzctl-reserve.c;
 * the pools' part of each in hpzctl-pool.c; what they all use (the usage,
 * the questions to the daemon, the numbers of its answers) below them, in
 * hpzctl-ask.c and hpzctl-fields.c.  Calls go one way: this file calls
 * the commands, the commands call the files under them, never back.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "hpz.h"
#include "cli.h"
#include "hpzctl.h"

/* The commands, by the name that runs them. */
static const struct hpzctl_cmd {
	const char	*name;
	int		(*run)(int, char **);
} hpzctl_cmds[] = {
	{ "status",	hpzctl_status },
	{ "stats",	hpzctl_stats },
	{ "top",	hpzctl_top },
	{ "prometheus",	hpzctl_prometheus },
	{ "reserve",	hpzctl_reserve },
};

#define HPZCTL_NCMDS	(sizeof hpzctl_cmds / sizeof hpzctl_cmds[0])

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help",	no_argument,		NULL,	'h' },
		{ "socket",	required_argument,	NULL,	's' },
		{ "version",	no_argument,		NULL,	'V' },
		{ NULL,		0,			NULL,	0 }
	};
	const char	*cmd;
	size_t		 i;
	int		 ch;

	cli_prog = "hpzctl";
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:hs:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h':
			hpzctl_usage(stdout);
			return (0);
		case 's':
			cli_socket_option(hpzctl_usage, optarg);
			break;
		case 'V':
			printf("hpzctl %s\n", HPZ_VERSION);
			return (0);
		default:
			hpzctl_bad_option("", ch, argv);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0)
		hpzctl_usage_error("no command given");

	cmd = argv[0];
	for (i = 0; i < HPZCTL_NCMDS; i++) {
		if (strcmp(cmd, hpzctl_cmds[i].name) == 0)
			return (hpzctl_cmds[i].run(argc, argv));
	}
	hpzctl_usage_error("unknown command '%s'", cmd);
}
