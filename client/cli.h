/*
 * cli.h - what the client programs (hpzctl, hpz-demo, hpz-bench, hpz-run)
 * share: their words for a bad command line, the socket option, the
 * touching threads, the zero check of what hpzerod served and the run
 * statistics.  Not installed; cli-json.c is apart, for the programs that
 * link json-c.
 */
#ifndef HPZ_CLI_H
#define HPZ_CLI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_FAIL		1
#define CLI_EXIT_USAGE		2

struct json_object;

/* cli.c */
extern const char	*cli_prog;	/* "hpz-bench": set first in main */
void		 cli_usage_error(void (*)(FILE *), const char *, ...)
		    __attribute__((format(printf, 2, 3), noreturn));
void		 cli_bad_option(void (*)(FILE *), const char *, int, char **)
		    __attribute__((noreturn));
void		 cli_no_more_args(void (*)(FILE *), const char *, int, int,
		    char **);
int		 cli_parse_int(const char *, int, int, int *);
int		 cli_int_arg(void (*)(FILE *), int, const char *, int, int,
		    const char *);
size_t		 cli_size_arg(void (*)(FILE *), int, const char *, uint64_t);
void		 cli_socket_option(void (*)(FILE *), const char *);
const char	*cli_socket(void);
void		*cli_alloc(size_t);
void		 cli_barrier_init(pthread_barrier_t *, unsigned int);
void		 cli_thread_start(pthread_t *, void *(*)(void *), void *, int);
size_t		 cli_nonzero(const void *, size_t, size_t *, unsigned int *);
int		 cli_cmp(const void *, const void *);
double		 cli_pct(double *, size_t, double);
void		 cli_stats(const double *, int, double *, double *, double *);
void		*cli_kernel_map(size_t, unsigned int);

/* cli-json.c */
int		 cli_json_add(struct json_object *, const char *,
		    struct json_object *);
int		 cli_json_push(struct json_object *, struct json_object *);

#endif /* HPZ_CLI_H */
