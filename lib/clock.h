/*
 * clock.h - the monotonic clock every figure and deadline is read from,
 * for the daemon and the client programs.  Not installed.
 */
#ifndef HPZ_CLOCK_H
#define HPZ_CLOCK_H

#include <stdint.h>

/* clock.c */
uint64_t	 clock_now_ns(void);
double		 clock_now_s(void);
uint64_t	 clock_resolution_ns(void);

#endif /* HPZ_CLOCK_H */
