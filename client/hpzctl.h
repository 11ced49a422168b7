/*
 * hpzctl.h - what hpzctl's files share, from the bottom up:
 * hpzctl-ask.c (the usage, the questions to the daemon, the command
 * line's numbers) and hpzctl-fields.c (the counters' list and the numbers
 * made of them); hpzctl-pool.c (the pools in each command) and
 * hpzctl-reserve.c (reserve); the commands hpzctl-status.c,
 * hpzctl-top.c, hpzctl-stats.c (stats, and top's loop for -w) and
 * hpzctl-prom.c; hpzctl.c (main).  A file calls only the ones before it
 * (tests/lint.sh checks that no two files call each other).
 */
#ifndef HPZCTL_H
#define HPZCTL_H

#include <stddef.h>
#include <stdio.h>

struct hpz_region_info;
struct hpz_status;
struct json_object;

/* cur - prev of a counter, 0 if it went back (the daemon restarted). */
#define HPZCTL_DELTA(c, p, f)	((c)->f >= (p)->f ? (c)->f - (p)->f : 0)

/* A bad command line: say what, then the usage; exit 2 (cli.h). */
#define hpzctl_usage_error(...)	cli_usage_error(hpzctl_usage, __VA_ARGS__)
#define hpzctl_bad_option(where, ch, argv) \
	cli_bad_option(hpzctl_usage, (where), (ch), (argv))

/*
 * One number of struct hpz_status (a line of hpz-counters.h): its name is
 * its stats name and JSON key; prom, when not "", its Prometheus metric.
 */
struct hpzctl_field {
	const char	*name;
	size_t		 offset;
	const char	*kind;		/* "counter" or "gauge" */
	const char	*unit;
	const char	*prom;		/* after "hpzerod_" */
	const char	*label;
	const char	*help;
};

/* hpzctl-ask.c */
void		 hpzctl_usage(FILE *);
int		 hpzctl_query(struct hpz_status *);
struct hpz_region_info *hpzctl_regions(size_t *);
double		 hpzctl_parse_interval(const char *, const char *);
unsigned long	 hpzctl_parse_count(const char *, const char *);

/* hpzctl-fields.c */
extern const struct hpzctl_field hpzctl_fields[];
extern const size_t hpzctl_nfields;
unsigned long long hpzctl_value(const struct hpz_status *,
		    const struct hpzctl_field *);
unsigned long long hpzctl_percentile(const struct hpz_status *, double);
unsigned long long hpzctl_hist_percentile(const unsigned long long *,
		    unsigned long long, double);
double		 hpzctl_gbs(unsigned long long, unsigned long long);
int		 hpzctl_json_add(struct json_object *, const char *,
		    unsigned long long);
void		 hpzctl_prom_head(FILE *, const char *, const char *,
		    const char *);
const char	*hpzctl_uptime(unsigned long long, char *, size_t);

/* hpzctl-pool.c */
void		 hpzctl_pool_status(void);
void		 hpzctl_pool_table(void);
int		 hpzctl_pool_json(struct json_object *);
void		 hpzctl_pool_top(double);
void		 hpzctl_pool_prom(FILE *);

/* hpzctl-reserve.c */
int		 hpzctl_reserve(int, char **);
void		 hpzctl_hold_status(void);

/* hpzctl-status.c, hpzctl-top.c, hpzctl-stats.c, hpzctl-prom.c */
int		 hpzctl_status(int, char **);
int		 hpzctl_top_loop(double, unsigned long);
int		 hpzctl_top(int, char **);
int		 hpzctl_stats(int, char **);
int		 hpzctl_prometheus(int, char **);

#endif /* HPZCTL_H */
