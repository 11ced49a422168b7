/*
 * intercept.h - faults trapped only while a region holds garbage (intercept.c).
 */
#ifndef HPZD_INTERCEPT_H
#define HPZD_INTERCEPT_H

#include <stdint.h>

#include "conf.h"

struct conf;
struct region;

void		 intercept_configure(const struct conf *);
void		 intercept_reconfigure(struct region *);
void		 intercept_policies(int *intercept, int *aside);
const char	*intercept_policy_name(int which);
void		 intercept_init(struct region *);
int		 intercept_on(struct region *);
void		 intercept_check(struct region *);
int		 intercept_arm(struct region *,
		    void (*)(struct region *, int, void *), void *);
void		 intercept_fault(struct region *);
void		 intercept_aside_start(struct region *);

#endif /* HPZD_INTERCEPT_H */
