/*
 * hpzctl.h - what hpzctl's files share: hpzctl.c (the commands, the
 * status numbers) and hpzctl-pool.c (the pools).
 */
#ifndef HPZCTL_H
#define HPZCTL_H

#include <stdio.h>

struct json_object;

/* cur - prev of a counter, 0 if it went back (the daemon restarted). */
#define HPZCTL_DELTA(c, p, f)	((c)->f >= (p)->f ? (c)->f - (p)->f : 0)

/* hpzctl.c */
double		 hpzctl_gbs(unsigned long long, unsigned long long);
int		 hpzctl_json_add(struct json_object *, const char *,
		    unsigned long long);
void		 hpzctl_prom_head(FILE *, const char *, const char *,
		    const char *);

/* hpzctl-pool.c */
void		 hpzctl_pool_status(void);
void		 hpzctl_pool_table(void);
int		 hpzctl_pool_json(struct json_object *);
void		 hpzctl_pool_top(double);
void		 hpzctl_pool_prom(FILE *);

#endif /* HPZCTL_H */
